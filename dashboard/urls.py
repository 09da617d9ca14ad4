"""Page routes. Each area of the dashboard keeps its routes beside its views."""

from django.urls import path

from dashboard.views import (
    agent_access,  # the owners' agent access log (MCP, feed)
    alerts,
    evals,
    health,
    overview,
    settings,
    tokens,
    traces,
)
from dashboard.views import replay as replay_views  # policy replay (issue 17)

urlpatterns = [
    *evals.urlpatterns,
    path("", overview.home, name="home"),
    *overview.urlpatterns,
    *traces.urlpatterns,
    *alerts.urlpatterns,
    *health.urlpatterns,
    *settings.urlpatterns,
    *agent_access.urlpatterns,
    *tokens.urlpatterns,
    *replay_views.urlpatterns,
]
