"""The PostgreSQL rollups (dashboard.rollups.sql) write exactly the rows the Python path does.

The Python path (dashboard.rollups.recompute_in_python, SQLite's) links every attempt; the SQL
path links only the (trace, tool) groups that need it and groups the rest in SQL. Same rows,
byte for byte, on data made to hit every rule: shared call ids, marked and implicit retries,
repeated calls that are not retries, calls crossing the range's edges, contract checks,
classes left empty, messages differing in case, latencies on bin edges.
"""

from __future__ import annotations

import datetime as dt
import random

import pytest

from dashboard.models import RolledUpBucket, ToolRollup, ToolRollupTotal
from dashboard.rollups import sql as rollups_sql
from dashboard.rollups.python_path import recompute_in_python
from dashboard.rollups.refresh import SETTLE, rollups_rebuild, rollups_refresh
from dashboard.rollups.rows import BUCKET, CONTRACT_NAMES, HOUR, floor_time
from ingest.models import ChangedBucket, ToolCall
from ingest.partitions import ensure_partitions
from tests.factories import make_project

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

T0 = dt.datetime(2026, 11, 27, 0, 0, tzinfo=dt.UTC)
TOOLS = ("search_kb", "get_order", "refund", "send_email")
CLASSES = ("transient", "validation", "permission", "not_found", "business", "user_input", "fatal", "unknown", "")
CHECKS = CONTRACT_NAMES
MESSAGES = ("Timeout after 30s", "timeout after 30s", "Order 42 not found", "é accent first", "Zebra", "")


def _call(project, trace: str, span: int, tool: str, start: dt.datetime, ok: bool, rng: random.Random, **fields):
    latency = fields.pop("latency_ms", None)
    if latency is None:
        latency = rng.choice((0.0, 0.01, 0.011, 1.1, 12.5, 250.0, rng.lognormvariate(4, 1.2)))
    failed = not ok
    return ToolCall(
        project=project, trace_id=trace, span_id=f"{span:016x}", start_time=start,
        end_time=start + dt.timedelta(milliseconds=latency), latency_ms=latency, tool=tool, convention="genai",
        ok=ok, error_class=rng.choice(CLASSES) if failed else "",
        message=rng.choice(MESSAGES) if failed else "", fingerprint=rng.choice(("f1", "f2", "F3", "")) if failed else "",
        escalated=rng.random() < 0.05, service=rng.choice(("api", "worker")), environment=rng.choice(("prod", "")),
        agent=rng.choice(("triage", "billing", "")),
        contract={name: rng.choice((True, False, None)) for name in rng.sample(CHECKS, 3)} if failed else {},
        **fields,
    )  # fmt: skip


def random_history(project, seed: int, traces: int = 400) -> None:
    """Traces over 30 hours from T0 with every linking case, some straddling hours and days."""
    rng = random.Random(seed)
    rows, span = [], 0
    for number in range(traces):
        trace = f"{seed:08x}{number:024x}"
        moment = T0 + dt.timedelta(seconds=rng.uniform(0, 30 * 3600))
        for _ in range(rng.randint(1, 6)):
            tool = rng.choice(TOOLS)
            call_id = rng.choice(("", f"call-{rng.randint(0, 3)}", f"call-{number}-{span}"))
            arguments = rng.choice(("", "a1", "a2"))
            kind = rng.random()
            span += 1
            first_ok = rng.random() < 0.6
            rows.append(_call(project, trace, span, tool, moment, first_ok, rng, call_id=call_id,
                              arguments_hash=arguments, attempt=rng.choice((None, None, 1))))  # fmt: skip
            if kind < 0.5:  # retried: marked, same id, or implicit (same arguments after a failure)
                for attempt in range(2, rng.randint(2, 4) + 1):
                    moment += dt.timedelta(seconds=rng.choice((0.5, 30, 1200)))  # some cross an hour
                    span += 1
                    marker = rng.choice(("attempt", "resend", "same_id", "implicit"))
                    rows.append(_call(
                        project, trace, span, tool, moment, rng.random() < 0.5, rng,
                        call_id=call_id if marker == "same_id" else rng.choice(("", f"new-{span}")),
                        arguments_hash=arguments if marker != "attempt" or rng.random() < 0.5 else "zz",
                        attempt=attempt if marker == "attempt" else None,
                        resend_count=attempt - 1 if marker == "resend" else None,
                    ))  # fmt: skip
            moment += dt.timedelta(seconds=rng.uniform(0.1, 90))
    ensure_partitions({row.start_time.date() for row in rows})
    ToolCall.objects.bulk_create(rows)


def snapshot(project) -> tuple[list, list]:
    fields = [f.name for f in ToolRollup._meta.fields if f.name != "id"]
    total_fields = [f.name for f in ToolRollupTotal._meta.fields if f.name != "id"]
    return (
        sorted(ToolRollup.objects.filter(project=project).values_list(*fields), key=repr),
        sorted(ToolRollupTotal.objects.filter(project=project).values_list(*total_fields), key=repr),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(
    "start_h, end_h, fine_h",
    [(0, 31, None), (0, 31, 20), (5, 9, 0), (23, 25, 24)],
    ids=["all-fine", "fine-since-20h", "a-few-hours", "across-midnight"],
)
def test_the_sql_path_writes_the_rows_of_the_python_path(seed, start_h, end_h, fine_h):
    project = make_project()
    random_history(project, seed)
    start, end = T0 + dt.timedelta(hours=start_h), T0 + dt.timedelta(hours=end_h)
    fine = None if fine_h is None else T0 + dt.timedelta(hours=fine_h)
    # Rows outside the range are kept as they are by both: start from the whole history.
    recompute_in_python(project_id=project.pk, start=T0 - HOUR, end=T0 + dt.timedelta(hours=32), fine_since=None)

    python_written = recompute_in_python(project_id=project.pk, start=start, end=end, fine_since=fine)
    by_python = snapshot(project)
    sql_written = rollups_sql.recompute(project_id=project.pk, start=start, end=end, fine_since=fine)
    by_sql = snapshot(project)

    assert by_sql[0] == by_python[0]
    assert by_sql[1] == by_python[1]
    assert sql_written == python_written
    assert ToolRollup.objects.filter(project=project, retries__gt=0, blind_retries__gt=0, wasted_retries__gt=0).exists()


def test_repeated_calls_that_are_not_retries_stay_in_sql_and_linked_ones_do_not():
    project = make_project()
    rng = random.Random(5)
    moment = T0 + dt.timedelta(hours=2)
    rows = [
        # Two separate searches in one trace (distinct ids, both fine): no linking needed.
        _call(project, "a" * 32, 1, "search_kb", moment, True, rng, call_id="c1", arguments_hash="x"),
        _call(project, "a" * 32, 2, "search_kb", moment + dt.timedelta(seconds=1), True, rng, call_id="c2", arguments_hash="x"),
        # A failure retried under the same id: linked in Python.
        _call(project, "b" * 32, 3, "refund", moment, False, rng, call_id="r1"),
        _call(project, "b" * 32, 4, "refund", moment + dt.timedelta(seconds=2), True, rng, call_id="r1"),
    ]
    ensure_partitions({moment.date()})
    ToolCall.objects.bulk_create(rows)

    rollups_sql.recompute(project_id=project.pk, start=T0, end=T0 + dt.timedelta(hours=4), fine_since=None)

    hour = {row.tool: row for row in ToolRollupTotal.objects.filter(project=project, resolution=3600)}
    assert (hour["search_kb"].calls, hour["search_kb"].attempts, hour["search_kb"].retries) == (2, 2, 0)
    assert (hour["refund"].calls, hour["refund"].attempts, hour["refund"].retries, hour["refund"].resolved) == (1, 2, 1, 1)


def test_a_late_retry_in_a_later_bucket_updates_its_calls_bucket():
    project = make_project()
    rng = random.Random(9)
    first_at = T0 + dt.timedelta(hours=2, minutes=3)
    failed = _call(project, "c" * 32, 1, "refund", first_at, False, rng, call_id="r9", latency_ms=20.0)
    ensure_partitions({first_at.date()})
    ToolCall.objects.bulk_create([failed])
    ChangedBucket.objects.create(project=project, bucket_start=floor_time(first_at, 300))
    now = T0 + dt.timedelta(hours=3)
    rollups_refresh(project_id=project.pk, now=now)
    # Its retry, 7 minutes later (the next bucket), arrives and is queued as ingest does.
    retry = _call(project, "c" * 32, 2, "refund", first_at + dt.timedelta(minutes=7), True, rng, call_id="r9", latency_ms=20.0)
    ToolCall.objects.bulk_create([retry])
    ChangedBucket.objects.create(project=project, bucket_start=floor_time(retry.start_time, 300))

    rollups_refresh(project_id=project.pk, now=now + dt.timedelta(minutes=1))

    five = ToolRollupTotal.objects.get(project=project, resolution=300, bucket_start=floor_time(first_at, 300))
    hour = ToolRollupTotal.objects.get(project=project, resolution=3600, bucket_start=T0 + dt.timedelta(hours=2))
    for row in (five, hour):
        assert (row.calls, row.attempts, row.retries, row.resolved, row.errors) == (1, 2, 1, 1, 0)
    assert not ToolRollupTotal.objects.filter(project=project, resolution=300, calls__gt=0).exclude(pk=five.pk).exists()
    refreshed = snapshot(project)
    recompute_in_python(project_id=project.pk, start=T0, end=T0 + dt.timedelta(hours=4), fine_since=None)
    assert snapshot(project) == refreshed


def test_a_retry_counted_when_its_calls_bucket_was_computed_does_not_send_it_back():
    project = make_project()
    rng = random.Random(9)
    first_at = T0 + dt.timedelta(hours=2, minutes=4, seconds=50)  # near its bucket's end
    received = first_at + dt.timedelta(seconds=20)  # both attempts, in one export
    rows = [
        _call(project, "d" * 32, 1, "refund", first_at, False, rng, call_id="r1", latency_ms=20.0, received_at=received),
        _call(project, "d" * 32, 2, "refund", first_at + dt.timedelta(seconds=15), True, rng, call_id="r1",
              latency_ms=20.0, received_at=received),  # in the next bucket
    ]  # fmt: skip
    ensure_partitions({first_at.date()})
    ToolCall.objects.bulk_create(rows)
    first_bucket, next_bucket = floor_time(first_at, 300), floor_time(rows[1].start_time, 300)
    ChangedBucket.objects.create(project=project, bucket_start=first_bucket)
    now = first_bucket + BUCKET + SETTLE  # the first bucket has just settled
    rollups_refresh(project_id=project.pk, now=now)
    counted = ToolRollupTotal.objects.get(project=project, resolution=300, bucket_start=first_bucket)
    assert (counted.calls, counted.attempts, counted.retries) == (1, 2, 1)

    ChangedBucket.objects.create(project=project, bucket_start=next_bucket)
    rollups_refresh(project_id=project.pk, now=now + BUCKET)

    # The next bucket's refresh left the first bucket's row alone: it had the retry already.
    assert ToolRollupTotal.objects.filter(pk=counted.pk).exists()
    assert not ToolRollupTotal.objects.filter(project=project, resolution=300, bucket_start=next_bucket).exists()


@pytest.mark.parametrize("seed", [4, 5])
def test_five_minute_recomputes_keep_the_rows_of_a_whole_recompute(seed):
    project = make_project()
    random_history(project, seed)
    recompute_in_python(project_id=project.pk, start=T0 - HOUR, end=T0 + dt.timedelta(hours=32), fine_since=None)
    whole = snapshot(project)

    for start_min, minutes in ((0, 5), (115, 15), (1435, 10), (300, 60)):  # one with the slack scanned
        start = T0 + dt.timedelta(minutes=start_min)
        rollups_sql.recompute_fine(project_id=project.pk, start=start, end=start + dt.timedelta(minutes=minutes))

    assert snapshot(project) == whole


@pytest.mark.django_db(transaction=True)
def test_a_rebuild_on_two_connections_writes_the_rows_of_the_python_path():
    project = make_project()
    random_history(project, 6)
    start, end = T0 - HOUR, T0 + dt.timedelta(hours=32)
    recompute_in_python(project_id=project.pk, start=start, end=end, fine_since=None)
    by_python = snapshot(project)
    ToolRollup.objects.filter(project=project).delete()
    ToolRollupTotal.objects.filter(project=project).delete()

    written = rollups_rebuild(project_id=project.pk, start=start, end=end, now=T0, workers=2)

    assert snapshot(project) == by_python
    assert written == ToolRollup.objects.filter(project=project).count()


@pytest.mark.django_db(transaction=True)
def test_a_busy_range_shared_out_by_tool_between_connections_writes_the_rows_of_the_python_path(monkeypatch):
    project = make_project()
    random_history(project, 7)
    recompute_in_python(project_id=project.pk, start=T0 - HOUR, end=T0 + dt.timedelta(hours=32), fine_since=None)
    whole = snapshot(project)
    monkeypatch.setattr("dashboard.rollups.refresh.PARALLEL_CALLS", 1)  # every range is busy
    shares = []
    recompute_fine = rollups_sql.recompute_fine

    def watched(**arguments):
        shares.append(arguments.get("tools"))
        return recompute_fine(**arguments)

    monkeypatch.setattr(rollups_sql, "recompute_fine", watched)
    changed = [T0 + dt.timedelta(minutes=minutes) for minutes in (300, 305, 600, 1440)]
    ChangedBucket.objects.bulk_create([ChangedBucket(project=project, bucket_start=bucket) for bucket in changed])

    rollups_refresh(project_id=project.pk, now=T0 + dt.timedelta(hours=31), everything=True)

    assert snapshot(project) == whole
    named = [share for share in shares if share is not None]
    assert named and {share.others for share in named} == {False, True}
    assert all(tool in TOOLS for share in named for tool in share.names)
    assert set(RolledUpBucket.objects.filter(project=project).values_list("bucket_start", flat=True)) >= set(changed)


def test_a_busy_bucket_between_two_changed_ones_is_not_recomputed_with_them(monkeypatch):
    project = make_project()
    random_history(project, 8)
    recompute_in_python(project_id=project.pk, start=T0 - HOUR, end=T0 + dt.timedelta(hours=32), fine_since=None)
    whole = snapshot(project)
    between = T0 + dt.timedelta(minutes=305)
    assert ToolRollupTotal.objects.filter(project=project, resolution=300, bucket_start=between, calls__gt=0).exists()
    monkeypatch.setattr("dashboard.rollups.refresh.OPEN_BUCKET_CALLS", 0)  # every bucket with a call counts as busy
    ranges = []
    recompute_fine = rollups_sql.recompute_fine

    def watched(**arguments):
        ranges.append((arguments["start"], arguments["end"]))
        return recompute_fine(**arguments)

    monkeypatch.setattr(rollups_sql, "recompute_fine", watched)
    ChangedBucket.objects.bulk_create([ChangedBucket(project=project, bucket_start=between - BUCKET),
                                       ChangedBucket(project=project, bucket_start=between + BUCKET)])  # fmt: skip

    rollups_refresh(project_id=project.pk, now=T0 + dt.timedelta(hours=31), everything=True)

    assert not any(start <= between < end for start, end in ranges)
    assert (between - BUCKET, between) in ranges
    assert snapshot(project) == whole
