"""The overview and tool-page selectors, on rollup rows built by hand (exact numbers) and on
tool calls ingested as OTLP and rolled up (the real path). Helpers here serve the page tests too."""

import datetime as dt
import itertools
import re

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from dashboard.models import Alert, ToolRollup, ToolRollupTotal
from dashboard.rollups import histograms
from dashboard.rollups.refresh import rollups_recompute
from dashboard.rollups.rows import floor_time
from dashboard.selectors.tools import (
    SortError,
    _tiles,
    baseline_bands,
    dimension_choices,
    metric_series,
    parse_sort,
    parse_step,
    project_summaries,
    project_totals,
    sort_rows,
    tool_alerts,
    tool_baseline_hours,
    tool_detail,
    tool_failed_calls,
    tools_overview,
    tools_table,
    top_fingerprints,
)
from dashboard.timerange import Filters
from ingest.otlp import JSON, decode_request
from ingest.services import spans_ingest
from tests.factories import make_project
from tests.otlp_builders import json_bytes, json_request, json_span

NOW = dt.datetime(2026, 11, 20, 12, 30, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
HOSTILE = '<script>alert(1)</script><b>x</b>'
COUNTS = ("calls", "attempts", "retries", "wasted_retries", "errors", "resolved", "escalations")
_ids = itertools.count(1)


def budget(queries: int) -> int:
    """A query budget, plus the `SET LOCAL jit = off` that precedes the histogram merge on PostgreSQL."""
    return queries + (connection.vendor == "postgresql")


@pytest.fixture
def frozen(monkeypatch):
    """Pages and API views read the clock through django.utils.timezone.now."""
    monkeypatch.setattr(timezone, "now", lambda: NOW)
    return NOW


def add_rollup(
    project, tool, start, *, service="svc", environment="prod", agent="bot", calls=10, errors=0, retries=0,
    wasted_retries=0, escalations=0, classes=None, latencies=(), contract=None,
):  # fmt: skip
    """Calls of one tool in the five-minute bucket holding `start`, added to that bucket's row and
    to its hour's and its day's rows, and to the tool's totals of those buckets, as the rollup job
    writes them."""
    classes = dict(classes or {})
    classes.setdefault("unknown", errors - sum(classes.values()))
    dimensions = {"service": service, "environment": environment, "agent": agent}
    for (model, keys), resolution in itertools.product(((ToolRollup, dimensions), (ToolRollupTotal, {})), ToolRollup.Resolution):
        row, _ = model.objects.get_or_create(
            project=project, resolution=resolution, bucket_start=floor_time(start, resolution), tool=tool, **keys
        )
        row.calls += calls
        row.attempts += calls + retries
        row.retries += retries
        row.wasted_retries += wasted_retries
        row.errors += errors
        row.resolved += calls - errors
        row.escalations += escalations
        for name, count in classes.items():
            setattr(row, f"err_{name}", getattr(row, f"err_{name}") + count)
        row.latency_hist = histograms.merge([row.latency_hist, histograms.histogram(latencies)])
        for check, (passed, applicable) in (contract or {}).items():
            counts = row.contract.setdefault(check, [0, 0])
            counts[0] += passed
            counts[1] += applicable
        row.save()


def tool_span(tool, start, *, ok=True, message="", service="svc", trace_id=None, attrs=None):
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, **(attrs or {})}
    return json_span(
        trace_id or f"{next(_ids):032x}", f"{next(_ids):016x}", f"execute_tool {tool}", attrs=attributes,
        status_code=0 if ok else 2, status_message=message, start_ns=int(start.timestamp() * 1e9),
    )  # fmt: skip


def ingest_spans(project, spans, *, service="svc", now=NOW):
    """Spans through the real ingest service, then the rollups of the hours they touch recomputed."""
    request = decode_request(json_bytes(json_request([({"service.name": service}, spans)])), JSON)
    spans_ingest(project=project, request=request, limits=settings.INGEST_LIMITS, now=now)
    starts = [dt.datetime.fromtimestamp(int(span["startTimeUnixNano"]) / 1e9, tz=dt.UTC) for span in spans]
    rollups_recompute(project_id=project.pk, start=min(starts), end=max(starts) + HOUR)


def ingest_demo(project, *, hours=6):
    """The demo fleet's traffic (many services, environments and agents) over the hours before NOW,
    ingested and rolled up: data where the per-tool totals sum many dimensioned rows."""
    from demo.quickstart import demo_request

    request = demo_request(seed=11, traces=90, hours=hours, now_ns=int(NOW.timestamp()) * 10**9)
    spans_ingest(project=project, request=request, limits=settings.INGEST_LIMITS, now=NOW)
    rollups_recompute(project_id=project.pk, start=NOW - (hours + 2) * HOUR, end=NOW + HOUR)


def without_totals(monkeypatch):
    """Make every rollup read use the dimensioned rows, as before the per-tool totals existed."""
    monkeypatch.setattr("dashboard.selectors.tools._rollup_model", lambda filters: ToolRollup)


def without_csrf(html: str) -> str:
    """A page's HTML without its CSRF tokens (masked afresh on every response)."""
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)


def reads_totals(queries) -> bool:
    return any(ToolRollupTotal._meta.db_table in query["sql"] for query in queries.captured_queries)


def open_alert(project, tool, kind="retry_rise_flat_error", *, summary="retry rate up", status="open"):
    return Alert.objects.create(
        project=project, tool=tool, kind=kind, status=status, opened_at=NOW - HOUR, last_seen_at=NOW, summary=summary
    )


pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _now(frozen):
    """Selectors read the clock to know which five-minute rollups are still kept."""


# --- the tools table ------------------------------------------------------------------------


def test_the_tools_table_counts_whole_hours_once_and_partial_hours_from_five_minute_rows():
    project = make_project()
    start, end = NOW - dt.timedelta(hours=3), NOW  # 09:30 to 12:30: two partial hours, two whole ones
    add_rollup(project, "lookup", dt.datetime(2026, 11, 20, 9, 10, tzinfo=dt.UTC), calls=100)  # before the range
    add_rollup(project, "lookup", dt.datetime(2026, 11, 20, 9, 40, tzinfo=dt.UTC), calls=1, errors=1)
    add_rollup(project, "lookup", dt.datetime(2026, 11, 20, 10, 5, tzinfo=dt.UTC), calls=2)
    add_rollup(project, "lookup", dt.datetime(2026, 11, 20, 11, 55, tzinfo=dt.UTC), calls=4, retries=2)
    add_rollup(project, "lookup", dt.datetime(2026, 11, 20, 12, 25, tzinfo=dt.UTC), calls=8, escalations=2)

    [row] = tools_table(project, start=start, end=end)

    assert (row["calls"], row["errors"], row["retries"], row["escalations"]) == (15, 1, 2, 2)
    assert row["error_rate"] == pytest.approx(1 / 15)
    assert project_totals(project, start=start, end=end)["calls"] == 15


def test_ranges_are_tiled_by_days_hours_and_five_minute_edges_each_counted_once():
    kept = dt.datetime(2026, 11, 17, tzinfo=dt.UTC)
    at = lambda day, hour, minute=0: dt.datetime(2026, 11, day, hour, minute, tzinfo=dt.UTC)  # noqa: E731

    assert _tiles(at(18, 9, 32), at(20, 12, 31), 86400, kept) == [
        (300, at(18, 9, 30), at(18, 10)), (3600, at(18, 10), at(19, 0)), (86400, at(19, 0), at(20, 0)),
        (3600, at(20, 0), at(20, 12)), (300, at(20, 12), at(20, 12, 31)),
    ]
    # steps shorter than a day cannot use day rows; steps under an hour use five-minute rows only
    assert _tiles(at(18, 9, 30), at(20, 12), 3600, kept) == [(300, at(18, 9, 30), at(18, 10)), (3600, at(18, 10), at(20, 12))]
    assert _tiles(at(20, 9, 30), at(20, 12), 900, kept) == [(300, at(20, 9, 30), at(20, 12))]
    # before the five-minute rows' horizon an edge takes its whole hour
    assert _tiles(at(16, 9, 30), at(16, 12, 10), 3600, kept) == [
        (3600, at(16, 9), at(16, 10)), (3600, at(16, 10), at(16, 12)), (3600, at(16, 12), at(16, 13)),
    ]


def test_long_ranges_read_day_rows_and_agree_with_short_ones():
    project = make_project()
    for day in range(1, 29):
        add_rollup(project, "search", NOW - dt.timedelta(days=day, hours=3), calls=day, errors=1)
    start = NOW - dt.timedelta(days=30)

    [row] = tools_table(project, start=start, end=NOW)
    series = metric_series(project, start=start, end=NOW, step=86400)

    assert row["calls"] == sum(range(1, 29)) == sum(point["calls"] for point in series)
    assert project_totals(project, start=start, end=NOW)["errors"] == 28


def test_the_tools_table_gives_rates_latency_contract_and_a_sparkline_in_two_queries(django_assert_max_num_queries):
    project = make_project()
    for hour in range(24):
        moment = NOW - dt.timedelta(hours=hour, minutes=1)
        add_rollup(project, "search", moment, calls=10, errors=1 if hour < 12 else 0, classes={"transient": 1} if hour < 12 else {},
                   latencies=[10.0] * 9 + [500.0], contract={"explicit_class": (1, 2)})  # fmt: skip
        add_rollup(project, "refund", moment, service="billing", calls=5, retries=1, wasted_retries=1)

    with django_assert_max_num_queries(budget(2)):
        table = tools_overview(project, start=NOW - dt.timedelta(hours=24), end=NOW)

    rows = {row["tool"]: row for row in table["rows"]}
    assert rows["search"]["calls"] == 240 and rows["search"]["error_rate"] == pytest.approx(12 / 240)
    assert rows["search"]["err_transient"] == 12
    assert rows["search"]["p50_ms"] == pytest.approx(10, rel=0.1) and rows["search"]["p99_ms"] == pytest.approx(500, rel=0.1)
    assert rows["search"]["contract_score"] == 0.5 and rows["search"]["contract_checks"] == {"explicit_class": 0.5}
    assert rows["refund"]["retry_rate"] == pytest.approx(0.2) and rows["refund"]["contract_score"] is None
    assert table["spark_step"] == 3600 and len(rows["search"]["sparkline"]) == len(table["spark_starts"]) == 25
    # quiet before the first call, no errors in the 12 older hours, 1 in 10 in the newest
    assert rows["search"]["sparkline"][:2] == [None, 0.0] and rows["search"]["sparkline"][-1] == pytest.approx(0.1)


def test_filters_narrow_the_table_and_unknown_ones_are_refused():
    project = make_project()
    add_rollup(project, "search", NOW - HOUR, service="a", calls=3)
    add_rollup(project, "search", NOW - HOUR, service="b", calls=4)

    [row] = tools_table(project, start=NOW - 2 * HOUR, end=NOW, service="b")

    assert row["calls"] == 4
    with pytest.raises(ValueError, match="unknown filter.*colour"):
        tools_table(project, start=NOW - 2 * HOUR, end=NOW, colour="red")


def test_rows_sort_by_any_column_with_empty_values_last():
    rows = [
        {"tool": "a", "calls": 5, "p95_ms": None}, {"tool": "b", "calls": 9, "p95_ms": 3.0},
        {"tool": "c", "calls": 5, "p95_ms": 1.0},
    ]  # fmt: skip

    assert [r["tool"] for r in sort_rows(rows, "-calls")] == ["b", "a", "c"]
    assert [r["tool"] for r in sort_rows(rows, "calls")] == ["a", "c", "b"]
    assert [r["tool"] for r in sort_rows(rows, "p95_ms")] == ["c", "b", "a"]
    assert [r["tool"] for r in sort_rows(rows, "-p95_ms")] == ["b", "c", "a"]


def test_a_bad_sort_names_the_columns_there_are():
    assert parse_sort("") == "-calls"
    assert parse_sort("-error_rate") == "-error_rate"
    with pytest.raises(SortError, match="sort='colour' is not a column; use one of tool, calls"):
        parse_sort("colour")


def test_a_step_must_tile_the_rollups():
    start, end = NOW - dt.timedelta(days=1), NOW
    assert parse_step("", start, end) is None
    assert parse_step("900", start, end) == 900
    assert parse_step("7200", start, end) == 7200
    for bad, message in (("abc", "not a whole number"), ("700", "5-minute"), ("5400", "hourly"), ("0", "5-minute")):
        with pytest.raises(ValueError, match=message):
            parse_step(bad, start, end)
    with pytest.raises(ValueError, match="at most 2000"):
        parse_step("3600", NOW - dt.timedelta(days=90), NOW)
    with pytest.raises(ValueError, match="five-minute rollups are kept for the last 3 days only"):
        parse_step("300", NOW - dt.timedelta(days=5), NOW - dt.timedelta(days=4))


def test_an_old_short_range_is_drawn_from_hours_since_its_five_minute_rows_are_gone():
    project = make_project()
    add_rollup(project, "search", NOW - dt.timedelta(days=5), calls=3)

    detail = tool_detail(project, "search", start=NOW - dt.timedelta(days=5, hours=2), end=NOW - dt.timedelta(days=4, hours=23))

    assert detail["step"] == 3600 and detail["totals"]["calls"] == 3


def test_dimension_choices_come_from_the_ranges_rollups_in_one_query(django_assert_num_queries):
    project = make_project()
    add_rollup(project, "search", NOW - HOUR, service="a", environment="prod", agent="x")
    add_rollup(project, "search", NOW - HOUR, service="b", environment="", agent="y")
    add_rollup(project, "search", NOW - dt.timedelta(days=3), service="old")

    with django_assert_num_queries(1):
        choices = dimension_choices(
            project, start=NOW - dt.timedelta(hours=24), end=NOW, selected=Filters(agent="gone")
        )

    assert choices == {"service": ["a", "b"], "environment": ["", "prod"], "agent": ["gone", "x", "y"]}


# --- the tool page ----------------------------------------------------------------------------


def test_tool_detail_gives_latency_per_point_and_the_contract_breakdown(django_assert_max_num_queries):
    project = make_project()
    add_rollup(project, "search", NOW - 2 * HOUR, calls=4, errors=2, latencies=[100.0] * 4,
               contract={"explicit_class": (2, 2), "field_named": (0, 1)})  # fmt: skip
    add_rollup(project, "search", NOW - HOUR, calls=2, latencies=[1000.0, 1000.0])

    with django_assert_max_num_queries(budget(2)):
        detail = tool_detail(project, "search", start=NOW - 6 * HOUR, end=NOW, step=3600)

    assert detail["has_calls"] and len(detail["points"]) == 7
    busy = [point for point in detail["points"] if point["calls"]]
    assert [point["p50_ms"] for point in busy] == [pytest.approx(100, rel=0.1), pytest.approx(1000, rel=0.1)]
    assert detail["latency"]["p50_ms"] == pytest.approx(100, rel=0.1)
    assert [(row["check"], row["passed"], row["applicable"]) for row in detail["contract"]] == [
        ("explicit_class", 2, 2), ("field_named", 0, 1)
    ]
    assert detail["totals"]["contract_score"] == pytest.approx(2 / 3)


def test_a_tool_without_calls_in_range_has_empty_points_and_says_so():
    project = make_project()

    detail = tool_detail(project, "search", start=NOW - 6 * HOUR, end=NOW, step=3600)

    assert not detail["has_calls"] and all(point["calls"] == 0 for point in detail["points"])


def test_the_baseline_band_is_the_trailing_week_before_the_guard_at_the_points_volume():
    start = NOW - 3 * HOUR
    hourly = [
        {"bucket_start": floor_time(start, 3600) - dt.timedelta(hours=h), "calls": 100, "errors": 10, "retries": 20, "escalations": 0}
        for h in range(7, 7 + 168)
    ]  # fmt: skip
    # An hour inside the 6 h guard does not move the baseline: a change stays out of its own baseline.
    hourly.append({"bucket_start": floor_time(start, 3600) - HOUR, "calls": 100, "errors": 100, "retries": 0, "escalations": 0})
    points = [{"start": start, "calls": 100}, {"start": start + HOUR, "calls": 0}]

    bands = baseline_bands(hourly, points)

    error = bands["error_rate"][0]
    assert error["baseline"] == pytest.approx(0.1)
    assert error["high"] - error["baseline"] == pytest.approx(2 * (0.1 * 0.9 / 100) ** 0.5)
    assert bands["retry_rate"][0]["high"] - 0.2 == pytest.approx(2 * (0.2 / 100) ** 0.5)  # Poisson
    assert bands["escalation_rate"][0] == {"baseline": 0.0, "low": 0.0, "high": 0.0}
    assert bands["error_rate"][1] is None  # a point without calls has no band


def test_a_baseline_week_with_too_few_calls_draws_no_band():
    hourly = [{"bucket_start": NOW - dt.timedelta(hours=10), "calls": 50, "errors": 1, "retries": 0, "escalations": 0}]

    bands = baseline_bands(hourly, [{"start": NOW, "calls": 10}])

    assert bands["error_rate"] == [None]


def test_the_baseline_hours_are_read_in_one_query(django_assert_num_queries):
    project = make_project()
    add_rollup(project, "search", NOW - dt.timedelta(days=8), calls=5)  # before the baseline week
    add_rollup(project, "search", NOW - dt.timedelta(days=6), calls=7)
    add_rollup(project, "other", NOW - dt.timedelta(days=6), calls=9)

    with django_assert_num_queries(1):
        hours = tool_baseline_hours(project, "search", start=NOW - 6 * HOUR, end=NOW)

    assert [row["calls"] for row in hours] == [7]


def test_top_fingerprints_group_failures_with_counts_first_and_last_seen():
    project = make_project()
    spans = [tool_span("search", NOW - dt.timedelta(minutes=m), ok=False, message="connection timed out") for m in (50, 40, 30)]
    spans += [tool_span("search", NOW - dt.timedelta(minutes=20), ok=False, message="permission denied for user 7")]
    spans += [tool_span("search", NOW - dt.timedelta(minutes=10)), tool_span("other", NOW - dt.timedelta(minutes=10), ok=False, message="x")]
    ingest_spans(project, spans)

    rows = top_fingerprints(project, "search", start=NOW - HOUR, end=NOW)
    failed = tool_failed_calls(project, "search", start=NOW - HOUR, end=NOW)

    assert [row["count"] for row in rows] == [3, 1]
    assert rows[0]["first_seen"] == NOW - dt.timedelta(minutes=50) and rows[0]["last_seen"] == NOW - dt.timedelta(minutes=30)
    assert rows[0]["message"] == "connection timed out" and rows[0]["error_class"] == "transient"
    assert [call.start_time for call in failed] == [NOW - dt.timedelta(minutes=m) for m in (20, 30, 40, 50)]


def test_tool_alerts_put_open_ones_first():
    project = make_project()
    old = open_alert(project, "search", "error_rate_spike", status="resolved")
    current = open_alert(project, "search")
    Alert.objects.filter(pk=current.pk).update(opened_at=NOW - dt.timedelta(days=9))
    open_alert(project, "other")

    assert [alert.pk for alert in tool_alerts(project, "search")] == [current.pk, old.pk]


# --- per-tool totals: the same numbers as the dimensioned rows -----------------------------------

RANGES = [
    (NOW - 40 * dt.timedelta(minutes=1), NOW),  # five-minute rows only
    (NOW - 5 * HOUR - dt.timedelta(minutes=35), NOW),  # five-minute edges around whole hours
    (NOW - dt.timedelta(days=7), NOW),  # days and hours
    (NOW - dt.timedelta(days=30), NOW),
]


@pytest.mark.parametrize("start,end", RANGES)
def test_the_selectors_give_the_same_numbers_from_the_totals_as_from_the_dimensioned_rows(monkeypatch, start, end):
    from django.test.utils import CaptureQueriesContext

    project = make_project()
    ingest_demo(project)
    tool = ToolRollup.objects.filter(project=project).values_list("tool", flat=True).order_by("-calls").first()

    def everything():
        return (
            tools_overview(project, start=start, end=end),
            project_totals(project, start=start, end=end),
            tool_detail(project, tool, start=start, end=end),
            tool_baseline_hours(project, tool, start=start, end=end),
            project_summaries([project], start),
        )

    with CaptureQueriesContext(connection) as queries:
        with_totals = everything()
    assert reads_totals(queries)
    without_totals(monkeypatch)
    with CaptureQueriesContext(connection) as queries:
        from_dimensions = everything()
    assert not reads_totals(queries)

    assert with_totals[0]["rows"] and with_totals == from_dimensions


def test_a_dimension_filter_reads_the_dimensioned_rows():
    from django.test.utils import CaptureQueriesContext

    project = make_project()
    ingest_demo(project)
    service = ToolRollup.objects.filter(project=project).values_list("service", flat=True).first()

    with CaptureQueriesContext(connection) as queries:
        rows = tools_table(project, start=NOW - 6 * HOUR, end=NOW, service=service)

    assert rows and not reads_totals(queries)
    assert sum(row["calls"] for row in rows) < sum(row["calls"] for row in tools_table(project, start=NOW - 6 * HOUR, end=NOW))
