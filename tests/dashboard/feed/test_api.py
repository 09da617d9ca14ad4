"""`/api/v1/projects/<slug>/tool-health/` and `…/tool-health/<tool>/`: the stored bytes with a strong
ETag, 304 on If-None-Match, private caching, 404 for outsiders, the `agent` throttle, few queries."""

import orjson
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard import tokens
from dashboard.api import tool_health
from dashboard.feed import snapshot as feed
from dashboard.models import AgentAccess, ToolHealthSnapshot
from tests.dashboard.feed.test_snapshot import flaky_spans
from tests.dashboard.selectors.test_selectors import NOW, frozen, ingest_spans, open_alert  # noqa: F401

pytestmark = pytest.mark.django_db
URL = "/api/v1/projects/alpha/tool-health/"


@pytest.fixture(autouse=True)
def _fresh_access_log_minutes():
    tool_health._logged.clear()  # ids repeat across tests, and the clock is frozen


@pytest.fixture
def busy(frozen, project):  # noqa: F811
    ingest_spans(project, flaky_spans("search", 20, failing=15, attrs={"tool.error.class": "transient",
                                                                         "tool.error.retry_after_ms": 4000}))  # fmt: skip
    ingest_spans(project, flaky_spans("lookup", 12, failing=0))
    open_alert(project, "lookup", "retry_rise_flat_error")
    return project


def test_the_feed_is_the_stored_snapshot_byte_for_byte_with_its_etag(member_client, busy):
    response = member_client.get(URL)

    stored = ToolHealthSnapshot.objects.get(project=busy)  # computed on the first request
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.content == stored.payload.encode() and response["ETag"] == stored.etag
    assert response["Cache-Control"] == f"private, max-age={feed.MAX_AGE_S}"
    tools = {t["tool"]: t for t in response.json()["tools"]}
    assert tools["search"]["state"] == "failing" and tools["search"]["next_action"]["retry_after_s"] == 4
    assert tools["lookup"]["state"] == "degraded"


def test_if_none_match_with_the_etag_is_a_304_without_a_body(member_client, busy):
    etag = member_client.get(URL)["ETag"]

    for sent in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        response = member_client.get(URL, headers={"If-None-Match": sent})
        assert (response.status_code, response.content, response["ETag"]) == (304, b"", etag), sent
    assert member_client.get(URL, headers={"If-None-Match": '"stale"'}).status_code == 200


def test_a_new_snapshot_changes_the_etag(member_client, busy):
    etag = member_client.get(URL)["ETag"]
    feed.tool_health_refresh(project_id=busy.pk, now=NOW.replace(minute=31))

    assert member_client.get(URL, headers={"If-None-Match": etag}).status_code == 200


def test_one_tool_has_its_own_etag_and_an_unknown_tool_is_unknown(member_client, busy):
    response = member_client.get(URL + "search/")
    again = member_client.get(URL + "search/", headers={"If-None-Match": response["ETag"]})
    unseen = member_client.get(URL + "no/such/tool/")

    body = response.json()
    assert (body["tool"], body["state"], body["window_end"]) == ("search", "failing", "2026-11-20T12:35:00Z")
    assert response["ETag"].startswith('"') and again.status_code == 304
    assert (unseen.status_code, unseen.json()["tool"], unseen.json()["state"]) == (200, "no/such/tool", "unknown")


def test_a_personal_token_reads_the_feed_and_outsiders_and_anonymous_callers_do_not(client, busy, member, outsider):
    _, plain = tokens.api_token_create(user=member, name="agent")
    _, theirs = tokens.api_token_create(user=outsider, name="agent")

    assert client.get(URL, headers={"Authorization": f"Bearer {plain}"}).status_code == 200
    assert client.get(URL, headers={"Authorization": f"Bearer {theirs}"}).status_code == 404
    assert client.get(URL + "search/", headers={"Authorization": f"Bearer {theirs}"}).status_code == 404
    assert client.get(URL).status_code == 401


def test_a_poll_of_a_stored_snapshot_is_a_few_queries(client, busy, member):
    _, plain = tokens.api_token_create(user=member, name="agent")
    headers = {"Authorization": f"Bearer {plain}"}
    client.get(URL, headers=headers)  # computes and stores it; the token's use is recorded

    with CaptureQueriesContext(connection) as queries:
        response = client.get(URL, headers=headers)

    assert response.status_code == 200
    assert len(queries) <= 4, [q["sql"] for q in queries.captured_queries]  # token, snapshot head, project, snapshot
    with CaptureQueriesContext(connection) as queries:
        unchanged = client.get(URL, headers=headers | {"If-None-Match": response["ETag"]})
    assert unchanged.status_code == 304
    assert len(queries) <= 3, [q["sql"] for q in queries.captured_queries]  # the token (its user), the snapshot's ETag


def test_the_agent_throttle_applies_once_its_rate_is_set(member_client, busy, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **(settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES") or {}), "agent": "2/min"}}  # fmt: skip
    from django.core.cache import cache

    cache.clear()
    codes = [member_client.get(URL).status_code for _ in range(3)]

    assert codes == [200, 200, 429]


def test_the_payload_is_json_with_the_documented_top_level_fields(member_client, busy):
    body = orjson.loads(member_client.get(URL).content)

    assert set(body) == {"project", "as_of", "window_start", "window_end", "baseline_start", "baseline_end", "tools"}


def test_feed_reads_are_logged_once_per_minute_per_token_and_endpoint(client, busy, member, monkeypatch):
    _, plain = tokens.api_token_create(user=member, name="agent")
    headers = {"Authorization": f"Bearer {plain}"}
    for _ in range(5):
        client.get(URL, headers=headers)
    client.get(URL + "search/", headers=headers)
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW.replace(minute=31))
    client.get(URL, headers=headers)

    rows = list(AgentAccess.objects.order_by("id").values_list("surface", "name", "arguments", "user__username"))
    assert rows == [("feed", "tool-health", {}, "alice"), ("feed", "tool-health/<tool>", {"tool": "search"}, "alice"),
                    ("feed", "tool-health", {}, "alice")]  # fmt: skip
