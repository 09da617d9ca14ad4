"""The replay API and pages: scoped to members, inline or 202 with a status URL, every tool name escaped."""

from __future__ import annotations

import pytest

from dashboard.models import ReplayResult
from dashboard.replay.service import run_replay
from dashboard.rollups.refresh import rollups_recompute
from ingest.models import ToolCall

URL = "/api/v1/projects/alpha/replay/"


def test_the_api_answers_a_small_range_inline_with_every_policy(member_client, seeded):
    response = member_client.get(URL, {"range": "24h"})

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "done" and body["progress"] == 100
    policies = body["result"]["policies"]
    assert list(policies) == ["observed", "retry_every_failure", "route_by_class", "route_by_class_with_field"]
    figure = policies["route_by_class"]["resolution_rate"]
    assert set(figure) >= {"value", "low", "high", "source", "delta", "delta_low", "delta_high"}
    assert body["status_url"].endswith(f"/api/v1/projects/alpha/replay/jobs/{body['id']}/")


def test_the_api_narrows_to_one_tool_and_one_policy(member_client, seeded):
    body = member_client.get(URL, {"range": "24h", "tool": "fetch_document", "policy": "route_by_class"}).json()

    assert body["tool"] == "fetch_document" and body["policy"] == "route_by_class"
    assert set(body["result"]["policies"]) == {"observed", "route_by_class"}


def test_a_bad_policy_or_range_is_a_400_naming_it(member_client, seeded):
    assert member_client.get(URL, {"policy": "sometimes"}).json() == {
        "policy": ["unknown policy 'sometimes'; the policies are observed, retry_every_failure, route_by_class, "
                   "route_by_class_with_field"]
    }  # fmt: skip
    assert "range" in member_client.get(URL, {"range": "3y"}).json()


def test_a_large_range_answers_202_with_the_jobs_status_url(member_client, seeded, monkeypatch):
    monkeypatch.setattr("dashboard.replay.service.INLINE_MAX_CALLS", 10)
    monkeypatch.setattr("dashboard.replay.service.replay_job.delay", lambda pk: None)

    response = member_client.get(URL, {"range": "24h"})

    assert response.status_code == 202
    body = response.json()
    assert (body["status"], body["result"]) == ("queued", None)
    status = member_client.get(body["status_url"])
    assert status.status_code == 200 and status.json()["status"] == "queued"


def test_a_job_of_another_project_or_an_outsider_gets_a_404(client, member_client, outsider, seeded, project):
    row = run_replay(project, *seeded)
    client.force_login(outsider)

    assert client.get(URL).status_code == 404
    assert client.get(f"{URL}jobs/{row.pk}/").status_code == 404
    assert member_client.get(f"{URL}jobs/{row.pk + 1000}/").status_code == 404


def test_the_page_shows_a_table_per_policy_with_sources_and_the_ranked_fixes(member_client, seeded):
    response = member_client.get("/p/alpha/replay/", {"range": "24h"})

    assert response.status_code == 200
    html = response.content.decode()
    assert "route by class, with field and suggestion" in html
    assert "from your data" in html and "assumed" in html
    assert "state the error class (a code) on its failures" in html
    assert 'href="/p/alpha/replay/tools/lookup_customer/?range=24h"' in html


def test_a_tool_page_links_to_its_replay_and_the_nav_to_the_projects(member_client, seeded):
    html = member_client.get("/p/alpha/tools/lookup_customer/", {"range": "24h"}).content.decode()

    assert 'href="/p/alpha/replay/tools/lookup_customer/?range=24h"' in html
    assert 'href="/p/alpha/replay/?range=24h"' in html


def test_a_pending_job_shows_its_progress_and_reloads(member_client, seeded, monkeypatch):
    monkeypatch.setattr("dashboard.replay.service.INLINE_MAX_CALLS", 10)
    monkeypatch.setattr("dashboard.replay.service.replay_job.delay", lambda pk: None)

    html = member_client.get("/p/alpha/replay/", {"range": "24h"}).content.decode()

    assert '<meta http-equiv="refresh" content="3">' in html and "<progress" in html


def test_tool_names_are_escaped_everywhere_on_the_page(member_client, seeded, project):
    ToolCall.objects.filter(project=project, tool="lookup_customer").update(tool="<img src=x onerror=alert(1)>")

    rollups_recompute(project_id=project.pk, start=seeded[0], end=seeded[1] + (seeded[1] - seeded[0]))

    html = member_client.get("/p/alpha/replay/", {"range": "24h"}).content.decode()

    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


@pytest.mark.parametrize("url", ["/p/alpha/replay/", "/p/alpha/replay/tools/lookup_customer/"])
def test_an_outsider_gets_a_404_from_the_pages(client, outsider, project, url):
    client.force_login(outsider)

    assert client.get(url).status_code == 404
    assert not ReplayResult.objects.exists()
