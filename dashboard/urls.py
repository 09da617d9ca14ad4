"""Page routes. Each area of the dashboard keeps its routes beside its views."""

from django.urls import path

from dashboard.views import alerts, evals, health, overview, settings, tokens, traces

urlpatterns = [
    *evals.urlpatterns,
    path("", overview.home, name="home"),
    *overview.urlpatterns,
    *traces.urlpatterns,
    *alerts.urlpatterns,
    *health.urlpatterns,
    *settings.urlpatterns,
    *tokens.urlpatterns,
]
