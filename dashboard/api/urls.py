"""REST API routes under /api/v1/; each area keeps its routes beside its views."""

from dashboard.api import alerts, evals, projects, settings, tools, traces

urlpatterns = [
    *projects.urlpatterns,
    *tools.urlpatterns,
    *traces.urlpatterns,
    *alerts.urlpatterns,
    *settings.urlpatterns,
    *evals.urlpatterns,
]
