"""`/p/<project>/settings/agent-access/`: who asked what, when, through the MCP server and the
tool-health feed (dashboard/agent_access.py). Owners only: a member gets 403, an outsider 404."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.urls import path

from dashboard import agent_access
from dashboard.scoping import is_owner
from dashboard.views.common import page_scope

PAGE_ROWS = 200
OWNERS_ONLY = "Only the project's owners can see its agent access log."


@login_required
def agent_access_page(request, project):
    scope = page_scope(request, project)
    if not is_owner(request.user, scope.project):
        raise PermissionDenied(OWNERS_ONLY)
    surface = request.GET.get("surface", "")
    surface = surface if surface in agent_access.SURFACES else ""
    rows = list(agent_access.access_for_project(scope.project, surface=surface)[:PAGE_ROWS])
    return render(request, "dashboard/agent_access.html", scope.context(
        title="Agent access", rows=rows, surface=surface, surfaces=agent_access.SURFACES, can_change=True,
        keep_days=agent_access.KEEP_DAYS, page_rows=PAGE_ROWS,
    ))  # fmt: skip


urlpatterns = [
    path("p/<slug:project>/settings/agent-access/", agent_access_page, name="agent-access"),
]
