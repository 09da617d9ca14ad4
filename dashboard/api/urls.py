"""REST API routes under /api/v1/; each area keeps its routes beside its views."""

from dashboard.api import (
    agent_access,  # the owners' agent access log (MCP, feed)
    alerts,
    evals,
    projects,
    settings,
    tool_health,
    tools,
    traces,
)
from dashboard.api import replay as replay_api  # policy replay (issue 17)

urlpatterns = [
    *projects.urlpatterns,
    *tools.urlpatterns,
    *traces.urlpatterns,
    *alerts.urlpatterns,
    *settings.urlpatterns,
    *evals.urlpatterns,
    *agent_access.urlpatterns,
    *tool_health.urlpatterns,
    *replay_api.urlpatterns,
]
