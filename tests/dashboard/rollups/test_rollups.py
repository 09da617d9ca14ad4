import datetime as dt
import random

import pytest
from django.conf import settings
from django.db import connection
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from dashboard.models import ToolRollup, ToolRollupTotal
from dashboard.rollups import histograms
from dashboard.rollups.attempts import link_attempts, totals
from dashboard.rollups.python_path import load_attempts
from dashboard.rollups.refresh import RANGE_GAP, SETTLE, rollups_prune_fine, rollups_recompute, rollups_refresh
from dashboard.rollups.rows import (
    BUCKET,
    FINE_HORIZON,
    ROLLUP_COLUMNS,
    bucket_ranges,
    floor_time,
    hour_ranges,
    merge_failures,
)
from dashboard.selectors.tools import TOP_FINGERPRINTS, metric_series, tools_table, top_fingerprints
from demo.quickstart import demo_request
from ingest.models import ChangedBucket, ToolCall
from ingest.services import spans_ingest
from tests.factories import make_project

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
COUNTS = ("calls", "attempts", "retries", "failed_retries", "wasted_retries", "blind_retries", "errors", "resolved", "escalations")


def ingest(project, request):
    return spans_ingest(project=project, request=request, limits=settings.INGEST_LIMITS, now=NOW)


def split(request: ExportTraceServiceRequest, parts: int, seed: int) -> list[ExportTraceServiceRequest]:
    """The same spans in `parts` requests, shuffled: another arrival order and batching."""
    spans = [(rs.resource, span) for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
    random.Random(seed).shuffle(spans)
    out = []
    for n in range(parts):
        piece = ExportTraceServiceRequest()
        for resource, span in spans[n::parts]:
            rs = piece.resource_spans.add()
            rs.resource.CopyFrom(resource)
            rs.scope_spans.add().spans.append(span)
        out.append(piece)
    return out


def rollup_rows(project) -> list[tuple]:
    """Every rollup row of the project, dimensioned ones then per-tool totals."""
    fields = ("resolution", "bucket_start", "tool", "service", "environment", "agent", *COUNTS, "latency_hist", "contract")
    total_fields = tuple(name for name in fields if name not in ("service", "environment", "agent"))
    return [
        *ToolRollup.objects.filter(project=project).order_by(*fields[:6]).values_list(*fields),
        *ToolRollupTotal.objects.filter(project=project).order_by(*total_fields[:3]).values_list(*total_fields),
    ]


ALL_COUNTS = tuple(name for name in ROLLUP_COLUMNS[7:-2])


def summed_over_dimensions(project) -> dict[tuple, dict]:
    """The dimensioned rows summed per (resolution, bucket, tool): what the totals must hold."""
    sums: dict[tuple, dict] = {}
    for row in ToolRollup.objects.filter(project=project):
        entry = sums.setdefault(
            (row.resolution, row.bucket_start, row.tool), {**dict.fromkeys(ALL_COUNTS, 0), "hists": [], "contract": {}}
        )
        for name in ALL_COUNTS:
            entry[name] += getattr(row, name)
        entry["hists"].append(row.latency_hist)
        for check, (passed, applicable) in row.contract.items():
            tally = entry["contract"].setdefault(check, [0, 0])
            tally[0] += passed
            tally[1] += applicable
    return sums


def assert_totals_are_the_sums_of_the_dimensioned_rows(project):
    """Every bucket's total is the sum of its dimensioned rows; a total without any (failed
    retries in a bucket where no call started) counts nothing and only holds those failures."""
    expected = summed_over_dimensions(project)
    totals = {(row.resolution, row.bucket_start, row.tool): row for row in ToolRollupTotal.objects.filter(project=project)}
    assert set(expected) <= set(totals)
    assert {resolution for resolution, _, _ in totals} == set(ToolRollup.Resolution)
    nothing = {**dict.fromkeys(ALL_COUNTS, 0), "hists": [], "contract": {}}
    for key, row in totals.items():
        sums = expected.get(key, nothing)
        if key not in expected:
            assert row.failures, key
        assert {name: getattr(row, name) for name in ALL_COUNTS} == {name: sums[name] for name in ALL_COUNTS}, key
        assert row.latency_hist == histograms.merge(sums["hists"]), key
        assert row.contract == sums["contract"], key


@pytest.fixture
def demo():
    return demo_request(seed=11, traces=90, hours=6, now_ns=int(NOW.timestamp()) * 10**9)


def test_ingest_queues_the_5_minute_buckets_of_the_tool_calls_it_stores(demo):
    project = make_project()

    ingest(project, demo)

    buckets = set(ChangedBucket.objects.filter(project=project).values_list("bucket_start", flat=True))
    starts = {floor_time(start, 300) for start in ToolCall.objects.filter(project=project).values_list("start_time", flat=True)}
    assert buckets == starts and all(bucket.minute % 5 == 0 and bucket.second == 0 for bucket in buckets)


def test_refresh_rolls_up_exactly_what_linking_the_stored_calls_gives(demo):
    project = make_project()
    ingest(project, demo)

    assert rollups_refresh(project_id=project.pk, now=NOW) > 0

    expected = totals(link_attempts(load_attempts(project.pk, NOW - dt.timedelta(days=1), NOW + dt.timedelta(hours=1))))
    hourly = ToolRollup.objects.filter(project=project, resolution=3600)
    for name in COUNTS:
        assert sum(getattr(row, name) for row in hourly) == getattr(expected, name), name
    five = ToolRollup.objects.filter(project=project, resolution=300)
    assert sum(row.calls for row in five) == expected.calls
    assert not ChangedBucket.objects.filter(project=project).exists()


def test_a_rerun_yields_identical_rows(demo):
    project = make_project()
    ingest(project, demo)
    rollups_refresh(project_id=project.pk, now=NOW)
    first = rollup_rows(project)

    rollups_recompute(project_id=project.pk, start=NOW - dt.timedelta(hours=8), end=NOW + dt.timedelta(hours=1))

    assert rollup_rows(project) == first


@pytest.mark.parametrize("seed", [1, 2])
def test_the_numbers_do_not_depend_on_arrival_order_or_batching(demo, seed):
    whole, pieces = make_project(), make_project()
    ingest(whole, demo)
    for piece in split(demo, parts=7, seed=seed):
        ingest(pieces, piece)
        rollups_refresh(project_id=pieces.pk, now=NOW)  # rollups run between the batches too
    rollups_refresh(project_id=whole.pk, now=NOW)

    assert rollup_rows(whole) == rollup_rows(pieces)


def test_a_span_arriving_two_days_late_is_reflected(demo):
    project = make_project()
    ingest(project, demo)
    rollups_refresh(project_id=project.pk, now=NOW)
    before = ToolRollup.objects.filter(project=project).count()
    late = demo_request(seed=12, traces=3, hours=1, now_ns=int((NOW - dt.timedelta(hours=47)).timestamp()) * 10**9)

    ingest(project, late)
    rollups_refresh(project_id=project.pk, now=NOW)

    old = ToolRollup.objects.filter(project=project, bucket_start__lt=NOW - dt.timedelta(hours=40))
    assert old.exists() and ToolRollup.objects.filter(project=project).count() > before


def test_changed_hours_merge_into_ranges_with_the_hour_before():
    h = dt.datetime(2026, 11, 29, 10, tzinfo=dt.UTC)

    assert hour_ranges([h, h + dt.timedelta(hours=1), h + dt.timedelta(hours=5)]) == [
        (h - dt.timedelta(hours=1), h + dt.timedelta(hours=2)),
        (h + dt.timedelta(hours=4), h + dt.timedelta(hours=6)),
    ]


def test_selectors_give_series_and_the_tools_table_from_rollups(demo, django_assert_max_num_queries):
    project = make_project()
    ingest(project, demo)
    rollups_refresh(project_id=project.pk, now=NOW)
    start, end = NOW - dt.timedelta(hours=8), NOW + dt.timedelta(hours=1)

    with django_assert_max_num_queries(1):
        series = metric_series(project, start=start, end=end)
    with django_assert_max_num_queries(2):
        table = tools_table(project, start=start, end=end)

    expected = totals(link_attempts(load_attempts(project.pk, start, end)))
    assert sum(point["calls"] for point in series) == expected.calls
    assert len(series) == 9 * 12  # 5-minute points over 9 hours
    assert sum(row["calls"] for row in table) == expected.calls
    by_tool = {row["tool"]: row for row in table}
    assert by_tool["update_address"]["errors"] > 0 and by_tool["update_address"]["contract_checks"]["field_named"] == 1.0
    assert by_tool["legacy_export"]["contract_checks"]["specific_message"] == 0.0
    assert all(row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"] for row in table)
    with pytest.raises(ValueError, match="unknown filter"):
        metric_series(project, start=start, end=end, colour="red")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_second_run_on_the_same_project_steps_aside():
    import psycopg

    project = make_project()
    params = connection.get_connection_params()
    other = psycopg.connect(**{k: v for k, v in params.items() if k in ("host", "port", "user", "dbname", "password")})
    try:
        other.execute("SELECT pg_advisory_lock(7310020, %s)", [project.pk])
        assert rollups_refresh(project_id=project.pk, now=NOW) is None
        # Released here: a closed connection's backend lets go of it a moment later.
        other.execute("SELECT pg_advisory_unlock(7310020, %s)", [project.pk])
    finally:
        other.close()
    assert rollups_refresh(project_id=project.pk, now=NOW) == 0


def test_hours_past_the_retention_keep_their_rollups(demo):
    project = make_project(retention_days=2)
    ingest(project, demo)
    rollups_refresh(project_id=project.pk, now=NOW)
    kept = rollup_rows(project)
    later = NOW + dt.timedelta(days=2, hours=3)  # the demo's first hours are now past retention
    from ingest.retention import retention_apply

    retention_apply(now=later)
    ChangedBucket.objects.create(project=project, bucket_start=NOW - dt.timedelta(hours=5))  # a stray queued bucket
    rollups_refresh(project_id=project.pk, now=later)

    assert rollup_rows(project) == kept


def test_day_rows_are_the_sums_of_their_hour_rows(demo):
    project = make_project()
    ingest(project, demo)
    rollups_refresh(project_id=project.pk, now=NOW)

    hours = ToolRollup.objects.filter(project=project, resolution=ToolRollup.Resolution.HOUR)
    days = ToolRollup.objects.filter(project=project, resolution=ToolRollup.Resolution.DAY)
    assert days.exists() and all(row.bucket_start.hour == 0 for row in days)
    for day in days:
        same = [h for h in hours if h.bucket_start.date() == day.bucket_start.date()
                and (h.tool, h.service, h.environment, h.agent) == (day.tool, day.service, day.environment, day.agent)]  # fmt: skip
        for name in (*COUNTS, "err_transient", "err_unknown"):
            assert getattr(day, name) == sum(getattr(h, name) for h in same), name
        assert sum(day.latency_hist.values()) == sum(sum(h.latency_hist.values()) for h in same)


def test_a_recompute_of_one_hour_keeps_its_day_row_whole(demo):
    project = make_project()
    ingest(project, demo)
    rollups_refresh(project_id=project.pk, now=NOW)
    before = rollup_rows(project)

    rollups_recompute(project_id=project.pk, start=NOW - dt.timedelta(hours=2), end=NOW - dt.timedelta(hours=1))

    assert rollup_rows(project) == before


def test_five_minute_rows_stop_at_the_horizon_and_old_ones_are_pruned(demo):
    project = make_project()
    ingest(project, demo)
    cutoff = NOW - dt.timedelta(hours=3)

    rollups_recompute(project_id=project.pk, start=NOW - dt.timedelta(hours=8), end=NOW + dt.timedelta(hours=1), fine_since=cutoff)

    five = ToolRollup.objects.filter(project=project, resolution=ToolRollup.Resolution.FIVE_MINUTES)
    assert five.exists() and all(row.bucket_start >= cutoff for row in five)
    hourly_calls = sum(ToolRollup.objects.filter(project=project, resolution=3600).values_list("calls", flat=True))
    assert hourly_calls == len(link_attempts(load_attempts(project.pk, NOW - dt.timedelta(days=1), NOW + dt.timedelta(hours=1))))

    deleted = rollups_prune_fine(now=NOW + FINE_HORIZON + dt.timedelta(hours=1))

    assert deleted > 0
    assert not ToolRollup.objects.filter(project=project, resolution=ToolRollup.Resolution.FIVE_MINUTES).exists()
    assert sum(ToolRollup.objects.filter(project=project, resolution=3600).values_list("calls", flat=True)) == hourly_calls


# --- per-tool totals (ToolRollupTotal) ------------------------------------------------------------


def test_the_per_tool_totals_are_the_sums_of_the_dimensioned_rows_in_every_bucket_and_resolution(demo):
    project = make_project()
    ingest(project, demo)

    rollups_refresh(project_id=project.pk, now=NOW)

    assert ToolRollup.objects.filter(project=project).values("service", "agent").distinct().count() > 1
    assert ToolRollupTotal.objects.filter(project=project).count() < ToolRollup.objects.filter(project=project).count()
    assert_totals_are_the_sums_of_the_dimensioned_rows(project)


def test_the_totals_stay_the_sums_after_a_partial_recompute_a_late_span_and_pruning(demo):
    project = make_project()
    ingest(project, demo)
    rollups_refresh(project_id=project.pk, now=NOW)

    rollups_recompute(project_id=project.pk, start=NOW - dt.timedelta(hours=3), end=NOW - dt.timedelta(hours=2))
    assert_totals_are_the_sums_of_the_dimensioned_rows(project)

    ingest(project, demo_request(seed=12, traces=5, hours=1, now_ns=int((NOW - dt.timedelta(hours=30)).timestamp()) * 10**9))
    rollups_refresh(project_id=project.pk, now=NOW)
    assert_totals_are_the_sums_of_the_dimensioned_rows(project)

    rollups_prune_fine(now=NOW + FINE_HORIZON + dt.timedelta(hours=1))
    assert not ToolRollupTotal.objects.filter(project=project, resolution=ToolRollup.Resolution.FIVE_MINUTES).exists()
    assert ToolRollupTotal.objects.filter(project=project, resolution=ToolRollup.Resolution.HOUR).exists()


def test_the_migration_sums_rollups_stored_before_the_totals_existed(demo):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("dashboard.migrations.0005_toolrolluptotal")
    project = make_project()
    ingest(project, demo)
    rollups_refresh(project_id=project.pk, now=NOW)
    written = rollup_rows(project)
    coarse = ToolRollupTotal.objects.filter(project=project, resolution__gte=3600).order_by("resolution", "bucket_start", "tool")
    failures = list(coarse.values_list("failures", flat=True))
    ToolRollupTotal.objects.all().delete()

    migration.sum_existing_rollups(apps, connection.schema_editor())

    assert rollup_rows(project) == written
    assert list(coarse.values_list("failures", flat=True)) == failures


def failed_attempts_by_fingerprint(project, start, end) -> dict[str, tuple]:
    """The raw truth: (count, first seen, last seen, class) of the failed attempts per fingerprint."""
    from django.db.models import Count, Max, Min

    from ingest.models import ToolCall

    rows = (
        ToolCall.objects.filter(project=project, ok=False, start_time__gte=start, start_time__lt=end)
        .exclude(fingerprint="")
        .values("tool", "fingerprint")
        .annotate(n=Count("id"), first=Min("start_time"), last=Max("start_time"), cls=Max("error_class"))
    )
    return {(row["tool"], row["fingerprint"]): (row["n"], row["first"], row["last"], row["cls"]) for row in rows}


def test_the_totals_hold_each_buckets_failures_by_fingerprint_as_the_calls_give_them(demo):
    project = make_project()
    ingest(project, demo)
    rollups_refresh(project_id=project.pk, now=NOW)
    start, end = NOW - dt.timedelta(days=1), NOW + dt.timedelta(hours=1)
    expected = failed_attempts_by_fingerprint(project, start, end)
    assert expected

    for resolution in ToolRollup.Resolution:
        merged: dict[tuple, dict] = {}
        for row in ToolRollupTotal.objects.filter(project=project, resolution=resolution):
            merge_failures(merged.setdefault(row.tool, {}), row.failures)
        got = {
            (tool, fingerprint): (count, dt.datetime.fromisoformat(first), dt.datetime.fromisoformat(last), error_class)
            for tool, found in merged.items() for fingerprint, (count, first, last, error_class, _) in found.items()
        }  # fmt: skip
        assert got == expected, resolution
    tool = max(expected, key=lambda key: expected[key][0])[0]
    with_rollups = top_fingerprints(project, tool, start=start, end=end)
    from_calls = top_fingerprints(project, tool, start=start, end=end, service="no-such-service")
    assert from_calls == [] and [row["count"] for row in with_rollups] == sorted(
        (count for (name, _), (count, *_) in expected.items() if name == tool), reverse=True
    )[: TOP_FINGERPRINTS]


def test_a_busy_bucket_is_rolled_up_once_it_has_settled_and_a_quiet_one_at_once(demo, monkeypatch):
    project = make_project()
    ingest(project, demo)
    newest = max(ChangedBucket.objects.filter(project=project).values_list("bucket_start", flat=True))
    during = newest + dt.timedelta(minutes=2)  # the newest bucket is still filling
    calls_in_it = ToolCall.objects.filter(project=project, start_time__gte=newest).count()
    assert calls_in_it > 1

    monkeypatch.setattr("dashboard.rollups.refresh.LATE_AFTER", dt.timedelta(days=1))  # no bucket here counts as late
    monkeypatch.setattr("dashboard.rollups.refresh.OPEN_BUCKET_CALLS", calls_in_it - 1)  # busy: it waits
    rollups_refresh(project_id=project.pk, now=during)
    assert list(ChangedBucket.objects.filter(project=project).values_list("bucket_start", flat=True)) == [newest]

    rollups_refresh(project_id=project.pk, now=newest + BUCKET + SETTLE)  # settled
    assert not ChangedBucket.objects.filter(project=project).exists()
    assert ToolRollup.objects.filter(project=project, resolution=300, bucket_start=newest, calls__gt=0).exists()

    ingest(project, demo_request(seed=13, traces=2, hours=1, now_ns=int(during.timestamp()) * 10**9))
    monkeypatch.setattr("dashboard.rollups.refresh.OPEN_BUCKET_CALLS", 10_000)  # quiet: done while it fills
    rollups_refresh(project_id=project.pk, now=during)
    assert not ChangedBucket.objects.filter(project=project).exists()


def test_the_filling_bucket_after_a_busy_one_waits_without_its_calls_being_counted(demo, monkeypatch):
    project = make_project()
    ingest(project, demo)
    newest = max(ChangedBucket.objects.filter(project=project).values_list("bucket_start", flat=True))
    rollups_refresh(project_id=project.pk, now=newest + BUCKET + SETTLE, everything=True)
    busy_calls = ToolRollupTotal.objects.filter(project=project, resolution=300, bucket_start=newest)
    monkeypatch.setattr("dashboard.rollups.refresh.OPEN_BUCKET_CALLS", sum(row.calls for row in busy_calls) - 1)  # it was busy
    following = newest + BUCKET
    ChangedBucket.objects.create(project=project, bucket_start=following)
    counted = []
    monkeypatch.setattr("dashboard.rollups.refresh._small", lambda project_id, bucket: counted.append(bucket) or True)

    rollups_refresh(project_id=project.pk, now=following + dt.timedelta(minutes=2))  # still filling

    assert counted == []
    assert list(ChangedBucket.objects.filter(project=project).values_list("bucket_start", flat=True)) == [following]


def test_buckets_changed_long_after_they_ended_are_gathered_and_done_every_ten_minutes(demo):
    project = make_project()
    ingest(project, demo)
    rollups_refresh(project_id=project.pk, now=NOW + dt.timedelta(minutes=10))  # a late turn: all done
    assert not ChangedBucket.objects.filter(project=project).exists()
    late = demo_request(seed=12, traces=3, hours=1, now_ns=int((NOW - dt.timedelta(hours=30)).timestamp()) * 10**9)
    ingest(project, late)
    queued = ChangedBucket.objects.filter(project=project).count()

    rollups_refresh(project_id=project.pk, now=NOW + dt.timedelta(minutes=13))
    assert ChangedBucket.objects.filter(project=project).count() == queued  # they wait for the turn

    rollups_refresh(project_id=project.pk, now=NOW + dt.timedelta(minutes=20))
    assert not ChangedBucket.objects.filter(project=project).exists()
    assert ToolRollup.objects.filter(project=project, bucket_start__lt=NOW - dt.timedelta(hours=28)).exists()


def test_changed_buckets_close_together_make_one_range_unless_a_busy_bucket_lies_between():
    five = BUCKET
    first = dt.datetime(2026, 11, 27, 10, 0, tzinfo=dt.UTC)
    changed = [first, first + 2 * five, first + 10 * five]

    assert bucket_ranges(changed) == [(first, first + five), (first + 2 * five, first + 3 * five),
                                              (first + 10 * five, first + 11 * five)]  # fmt: skip
    assert bucket_ranges(changed, gap=RANGE_GAP) == [
        (first, first + 3 * five), (first + 10 * five, first + 11 * five)
    ]  # fmt: skip
    assert bucket_ranges(changed, gap=RANGE_GAP, busy=frozenset({first + five})) == [
        (first, first + five), (first + 2 * five, first + 3 * five), (first + 10 * five, first + 11 * five)
    ]  # fmt: skip
