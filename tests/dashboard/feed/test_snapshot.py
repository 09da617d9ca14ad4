"""dashboard/feed/snapshot.py: the feed document from real ingest and rollups, stored per project,
refreshed by the rollup job, recomputed when stale."""

import datetime as dt

import orjson
import pytest

from dashboard.feed import snapshot as feed
from dashboard.models import ToolHealthSnapshot
from dashboard.rollups.refresh import rollups_refresh
from tests.dashboard.selectors.test_selectors import HOUR, NOW, add_rollup, frozen, ingest_spans, open_alert, tool_span  # noqa: F401
from tests.factories import make_project

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen")]
MINUTE = dt.timedelta(minutes=1)


def flaky_spans(tool, n, *, failing, start=NOW - 4 * MINUTE, attrs=None):
    """n calls of `tool` a second apart, the first `failing` of them failed with `attrs` as their envelope."""
    return [
        tool_span(tool, start + dt.timedelta(seconds=i), ok=i >= failing, message="upstream unavailable",
                  attrs=attrs if i < failing else None)
        for i in range(n)
    ]  # fmt: skip


def test_the_window_is_the_newest_three_buckets_and_the_baseline_the_detectors_week():
    assert feed.feed_window(NOW) == (dt.datetime(2026, 11, 20, 12, 20, tzinfo=dt.UTC), dt.datetime(2026, 11, 20, 12, 35, tzinfo=dt.UTC))
    start, end = feed.baseline_window(NOW)
    assert (end, end - start) == (dt.datetime(2026, 11, 20, 6, tzinfo=dt.UTC), dt.timedelta(days=7))


def test_the_document_says_per_tool_state_rates_baseline_alerts_and_next_action():
    project = make_project()
    for hour in range(7, 100):  # a steady baseline: 20 calls an hour, 1 transient error
        add_rollup(project, "search", NOW - hour * HOUR, calls=20, errors=1, classes={"transient": 1}, retries=2)
    transient = {"tool.error.class": "transient", "tool.error.retryable": True, "tool.error.retry_after_ms": 2500}
    ingest_spans(project, flaky_spans("search", 20, failing=15, attrs=transient))
    invalid = {"tool.error.class": "validation", "tool.error.field": "date", "tool.error.suggestion": "use ISO dates"}
    ingest_spans(project, flaky_spans("book", 12, failing=2, attrs=invalid))
    open_alert(project, "book", "error_rate_spike", summary="errors up")
    open_alert(project, "gone_quiet", "escalation_silence")

    document = feed.tool_health_compute(project=project, now=NOW)

    assert (document["as_of"], document["window_start"], document["window_end"]) == (
        "2026-11-20T12:30:00Z", "2026-11-20T12:20:00Z", "2026-11-20T12:35:00Z")
    tools = {entry["tool"]: entry for entry in document["tools"]}
    assert sorted(tools) == ["book", "gone_quiet", "search"]
    search = tools["search"]
    assert (search["state"], search["calls"], search["errors"], search["error_rate"]) == ("failing", 20, 15, 0.75)
    assert search["errors_by_class"] == {"transient": 15}
    assert search["baseline"]["calls"] == 20 * 93 and search["baseline"]["error_rate"] == pytest.approx(0.05)
    assert search["next_action"] == {"action": "retry", "description": "retry with backoff, honour retry-after",
                                     "retry_after_s": 3, "field": None}  # fmt: skip
    book = tools["book"]
    assert (book["state"], book["dominant_class"], book["next_action"]["field"]) == ("degraded", "validation", "date")
    assert [a["kind"] for a in book["open_alerts"]] == ["error_rate_spike"] and "open alert" in book["reason"]
    assert tools["gone_quiet"]["state"] == "degraded" and tools["gone_quiet"]["calls"] == 0


def test_the_stored_bytes_and_their_strong_etag_change_only_with_the_document():
    project = make_project()
    first = feed.tool_health_refresh(project_id=project.pk, now=NOW)
    again = feed.tool_health_refresh(project_id=project.pk, now=NOW)
    later = feed.tool_health_refresh(project_id=project.pk, now=NOW + MINUTE)

    assert ToolHealthSnapshot.objects.count() == 1
    assert first.etag == again.etag and first.etag.startswith('"') and first.etag.endswith('"')
    assert later.etag != first.etag  # as_of moved
    assert orjson.loads(later.payload)["tools"] == []


def test_the_rollup_job_refreshes_the_snapshot_at_the_end_of_a_projects_run():
    project = make_project()
    ingest_spans(project, flaky_spans("search", 12, failing=0))

    rollups_refresh(project_id=project.pk, now=NOW, everything=True)

    stored = orjson.loads(ToolHealthSnapshot.objects.get(project=project).payload)
    assert [(t["tool"], t["state"], t["calls"]) for t in stored["tools"]] == [("search", "ok", 12)]


def test_a_snapshot_older_than_stale_after_is_recomputed_on_read_and_a_fresh_one_is_not():
    project = make_project()
    stored = feed.tool_health_refresh(project_id=project.pk, now=NOW - feed.STALE_AFTER)

    assert feed.tool_health_current(project=project, now=NOW).etag == stored.etag
    assert feed.tool_health_current(project=project, now=NOW + MINUTE).computed_at == NOW + MINUTE


def test_one_tools_entry_carries_the_window_and_an_unseen_tool_is_unknown():
    project = make_project()
    ingest_spans(project, flaky_spans("search", 12, failing=0))
    snapshot = feed.tool_health_refresh(project_id=project.pk, now=NOW)

    entry = feed.tool_entry(snapshot, "search")
    unseen = feed.tool_entry(snapshot, "nope")

    assert (entry["tool"], entry["state"], entry["window_end"], entry["project"]) == ("search", "ok", "2026-11-20T12:35:00Z", project.slug)
    assert (unseen["tool"], unseen["state"], unseen["calls"], unseen["next_action"]) == ("nope", "unknown", 0, None)
