"""The agent access log: the write every MCP call makes (redacted, bounded, pruned), and the
owners' page and API that read it (a member gets 403, an outsider 404)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from dashboard import agent_access
from dashboard.models import AgentAccess
from tests.dashboard.mcp.conftest import token_for


def test_arguments_are_redacted_cut_and_bounded(db):
    summary = agent_access.arguments_summary(
        {"api_key": "sk-live-123", "q": "x" * 500, **{f"k{n}": n for n in range(30)}}
    )

    assert summary["api_key"] == "[REDACTED]"
    assert len(summary["q"]) < 300 and "truncated" in summary["q"]
    assert len(summary) == agent_access.MAX_ARGUMENTS + 1 and summary["…"] == "12 more"


def test_arguments_of_any_shape_stay_a_log_line(db, project):
    wide = {"tags": ["x" * 150] * 5000, "nested": {f"k{n}": n for n in range(3000)}, "deep": [[[[1]]]]}

    row = agent_access.record_access(surface="mcp", name="search_failed_calls", project=project, arguments=wide)

    row.refresh_from_db()
    assert len(row.arguments["tags"]) <= agent_access.MAX_ARGUMENTS + 1 and row.arguments["tags"][-1] == "… 4980 more"
    assert row.arguments["nested"]["…"] == "2980 more"
    huge = {f"k{n}": "y" * 150 for n in range(20)}
    capped = agent_access.arguments_summary({"a": huge, "b": huge})
    assert list(capped) == ["…"] and "not kept" in capped["…"]


def test_control_characters_in_a_tool_name_are_dropped(db, project):
    row = agent_access.record_access(surface="mcp", name="bad\x00name\x1b[31m", project=project, outcome="ok\x00")

    row.refresh_from_db()
    assert row.name == "badname[31m" and row.outcome == "ok"


def test_an_unknown_surface_is_refused(db, project):
    with pytest.raises(ValueError, match="surface"):
        agent_access.record_access(surface="grpc", name="x", project=project)


def test_old_rows_and_rows_past_the_cap_are_pruned(db, project, monkeypatch):
    monkeypatch.setattr(agent_access, "MAX_ROWS_PER_PROJECT", 3)
    now = timezone.now()
    old = agent_access.record_access(surface="mcp", name="old", project=project, now=now - dt.timedelta(days=40))
    for n in range(5):
        agent_access.record_access(surface="feed", name=f"new{n}", project=project, now=now)

    assert agent_access.access_prune(project=project, now=now) == 3
    assert not AgentAccess.objects.filter(pk=old.pk).exists()
    assert [row.name for row in agent_access.access_for_project(project)] == ["new4", "new3", "new2"]


@pytest.fixture
def logged(project, member):
    agent_access.record_access(surface="mcp", name="list_alerts", user=member, project=project, arguments={"project": "alpha"})
    agent_access.record_access(surface="feed", name="tool-health", user=member, project=project)
    agent_access.record_access(surface="mcp", name="list_alerts", user=member, project=None)  # an outsider's slug


def test_owners_see_who_asked_what_on_the_page(owner_client, logged):
    response = owner_client.get("/p/alpha/settings/agent-access/")

    assert response.status_code == 200
    rows = response.context["rows"]
    assert [(row.surface, row.name, row.user.username) for row in rows] == [("feed", "tool-health", "alice"), ("mcp", "list_alerts", "alice")]
    assert b"project=alpha" in response.content
    assert owner_client.get("/p/alpha/settings/agent-access/?surface=feed").context["rows"][0].surface == "feed"


def test_the_settings_nav_links_the_page_for_owners_only(client, owner, member, logged):
    client.force_login(owner)
    assert b"/p/alpha/settings/agent-access/" in client.get("/p/alpha/settings/").content
    client.force_login(member)
    assert b"/p/alpha/settings/agent-access/" not in client.get("/p/alpha/settings/").content


def test_members_get_403_and_outsiders_404(client, member, outsider, logged):
    client.force_login(member)
    assert client.get("/p/alpha/settings/agent-access/").status_code == 403
    client.force_login(outsider)
    assert client.get("/p/alpha/settings/agent-access/").status_code == 404


def test_the_api_lists_the_log_to_owners_only(client, owner, member, outsider, logged):
    def get(user, **params):
        return client.get("/api/v1/projects/alpha/agent-access/", params, HTTP_AUTHORIZATION=f"Bearer {token_for(user, 'read')}")

    response = get(owner)
    assert response.status_code == 200
    assert [(row["surface"], row["name"], row["user"]) for row in response.json()["results"]] == [
        ("feed", "tool-health", "alice"), ("mcp", "list_alerts", "alice"),
    ]  # fmt: skip
    assert get(owner, surface="bogus").status_code == 400
    assert get(member).status_code == 403
    assert get(outsider).status_code == 404
