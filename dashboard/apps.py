from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"

    def ready(self) -> None:
        # Eval runs' regressions open alerts through the receiver this import connects.
        from dashboard.alerting import eval_regressions  # noqa: F401
