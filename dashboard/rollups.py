"""Rollups: the buckets of changed hours recomputed from the tool calls (SPEC 5).

Ingest queues the hour of every tool call it stores (ingest.ChangedHour, in the same
transaction). `rollups_refresh` claims a project's queued hours and recomputes each
with the hour before it (a retry arriving late can change a call that started then):
it loads the attempts around the range, links them into logical calls
(dashboard.attempts), and replaces the range's rollup rows. Recomputing instead of
incrementing makes a rerun, a late span or a resend harmless: the rows come out the
same. On PostgreSQL an advisory lock keeps two runs off the same project.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson
from django.db import connection, transaction

from dashboard import histograms
from dashboard.attempts import Attempt, CallTotals, LogicalCall, call_counts, link_attempts
from dashboard.models import ERROR_CLASSES, ToolRollup
from django.utils import timezone

from ingest.models import ChangedHour, Project, ToolCall
from ingest.retention import retention_cutoff
from ingest.storage import copy_rows

logger = logging.getLogger(__name__)

HOUR = dt.timedelta(hours=1)
# Attempts this far outside a range are loaded too, so calls crossing its edges link whole.
LINK_SLACK = HOUR
# Computed from the calls; DAY rows are summed from the HOUR rows afterwards.
RESOLUTIONS = (ToolRollup.Resolution.FIVE_MINUTES, ToolRollup.Resolution.HOUR)
DAY = dt.timedelta(days=1)
# 5-minute rows serve ranges of a few hours (and drift's newest hours); older ones are
# pruned nightly and not recreated, since they were most of the rollup rows.
FINE_HORIZON = dt.timedelta(days=3)
_LOCK_NAMESPACE = 7_310_020  # pg_advisory_lock(namespace, project id): one rollup run per project

_ATTEMPT_FIELDS = (
    "trace_id", "span_id", "tool", "start_time", "ok", "error_class", "call_id", "attempt", "resend_count",
    "arguments_hash", "escalated", "latency_ms", "service", "environment", "agent", "contract",
)  # fmt: skip


def floor_time(moment: dt.datetime, seconds: int) -> dt.datetime:
    epoch = int(moment.timestamp())
    return dt.datetime.fromtimestamp(epoch - epoch % seconds, tz=dt.UTC)


@dataclass
class _Bucket:
    totals: CallTotals = field(default_factory=CallTotals)
    latencies: list[float] = field(default_factory=list)
    contract: dict[str, list[int]] = field(default_factory=dict)


def aggregate(calls: Iterable[LogicalCall], *, fine_since: dt.datetime | None = None) -> dict[tuple, _Bucket]:
    """Pure: logical calls -> {(resolution, bucket start, tool, service, environment, agent): bucket}.

    A call counts in the bucket where its first attempt started; the dimensions are
    the first attempt's. Calls before `fine_since` get no 5-minute bucket.
    """
    buckets: dict[tuple, _Bucket] = defaultdict(_Bucket)
    moments: dict[int, dt.datetime] = {}  # bucket start (epoch s) -> datetime, shared by many calls
    all_resolutions = tuple(int(resolution) for resolution in RESOLUTIONS)
    coarse_only = tuple(resolution for resolution in all_resolutions if resolution >= 3600)
    fine_epoch = int(fine_since.timestamp()) if fine_since else None
    for call in calls:
        first = call.first
        epoch = int(first.start.timestamp())
        resolutions = coarse_only if fine_epoch is not None and epoch < fine_epoch else all_resolutions
        counts = call_counts(call)
        latencies = [attempt.latency_ms for attempt in call.attempts]
        contract = call.last.contract if counts[4] is not None else None
        for resolution in resolutions:
            start = epoch - epoch % resolution
            moment = moments.get(start)
            if moment is None:
                moment = moments[start] = dt.datetime.fromtimestamp(start, tz=dt.UTC)
            bucket = buckets[(resolution, moment, first.tool, first.service, first.environment, first.agent)]
            bucket.totals.add_counts(counts)
            bucket.latencies.extend(latencies)
            if contract:
                for check, passed in contract.items():
                    if passed is not None:
                        tally = bucket.contract.setdefault(check, [0, 0])
                        tally[0] += bool(passed)
                        tally[1] += 1
    return buckets


ROLLUP_COLUMNS = (
    "project_id", "resolution", "bucket_start", "tool", "service", "environment", "agent", "calls", "attempts",
    "retries", "failed_retries", "wasted_retries", "blind_retries", "errors", "resolved", "escalations",
    *(f"err_{name}" for name in ERROR_CLASSES), "latency_hist", "contract",
)  # fmt: skip
_ROLLUP_TYPES = (
    "bigint", "integer", "timestamptz", "text", "text", "text", "text", *["integer"] * (9 + len(ERROR_CLASSES)),
    "jsonb", "jsonb",
)  # fmt: skip


def _rows(project_id: int, buckets: dict[tuple, _Bucket]) -> list[tuple]:
    """Rollup rows as tuples in ROLLUP_COLUMNS order."""
    rows = []
    for (resolution, start, tool, service, environment, agent), bucket in sorted(buckets.items()):
        totals = bucket.totals
        rows.append((
            project_id, resolution, start, tool, service, environment, agent, totals.calls, totals.attempts,
            totals.retries, totals.failed_retries, totals.wasted_retries, totals.blind_retries, totals.errors,
            totals.resolved, totals.escalations, *(totals.errors_by_class.get(name, 0) for name in ERROR_CLASSES),
            histograms.histogram(bucket.latencies), dict(sorted(bucket.contract.items())),
        ))  # fmt: skip
    return rows


def _write_rows(rows: list[tuple]) -> None:
    """Insert rollup rows: binary COPY on PostgreSQL (bulk_create was 44 % of a full recompute)."""
    if connection.vendor != "postgresql":
        ToolRollup.objects.bulk_create([ToolRollup(**dict(zip(ROLLUP_COLUMNS, row))) for row in rows], batch_size=1000)
        return
    with connection.cursor() as cursor:
        copy_rows(cursor, ToolRollup._meta.db_table, ROLLUP_COLUMNS, _ROLLUP_TYPES, rows)


def load_attempts(project_id: int, start: dt.datetime, end: dt.datetime) -> list[Attempt]:
    """The attempts that started in [start, end), with contract checks for failed ones only."""
    if connection.vendor == "postgresql":
        rows = _pg_attempt_rows(project_id, start, end)
    else:
        rows = (
            ToolCall.objects.filter(project_id=project_id, start_time__gte=start, start_time__lt=end)
            .values_list(*_ATTEMPT_FIELDS)
            .iterator(chunk_size=5000)
        )
    return [
        Attempt(
            trace_id=trace_id, span_id=span_id, tool=tool, start=start_time, ok=ok, error_class=error_class,
            call_id=call_id, attempt=attempt, resend_count=resend_count, arguments_hash=arguments_hash,
            escalated=escalated, latency_ms=latency_ms, service=service, environment=environment, agent=agent,
            contract=None if ok else _json(contract),
        )  # fmt: skip
        for (
            trace_id, span_id, tool, start_time, ok, error_class, call_id, attempt, resend_count, arguments_hash,
            escalated, latency_ms, service, environment, agent, contract,
        ) in rows  # fmt: skip
    ]


def _json(value):
    # Django loads jsonb as text on PostgreSQL (its JSONField decodes); a plain cursor gets the text.
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _pg_attempt_rows(project_id: int, start: dt.datetime, end: dt.datetime):
    # A plain cursor: the ORM's per-field conversion was most of the load time. Successful
    # attempts' contract checks are never read, so they are not sent (or JSON-decoded).
    columns = ", ".join("CASE WHEN ok THEN NULL ELSE contract END" if name == "contract" else name for name in _ATTEMPT_FIELDS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM ingest_toolcall WHERE project_id = %s AND start_time >= %s AND start_time < %s",
            [project_id, start, end],
        )
        return cursor.fetchall()


def rollups_recompute(
    *, project_id: int, start: dt.datetime, end: dt.datetime, fine_since: dt.datetime | None = None
) -> int:
    """Replace the rollups of [start, end) (hour-aligned) with ones computed afresh; returns rows written.

    The days the range touches get their DAY rows summed again from their HOUR rows. With
    `fine_since`, calls before it get no 5-minute rows.
    """
    start, end = floor_time(start, 3600), floor_time(end - dt.timedelta(microseconds=1), 3600) + HOUR
    attempts = load_attempts(project_id, start - LINK_SLACK, end + LINK_SLACK)
    calls = [call for call in link_attempts(attempts) if start <= call.first.start < end]
    rows = _rows(project_id, aggregate(calls, fine_since=fine_since))
    with transaction.atomic():
        ToolRollup.objects.filter(
            project_id=project_id, resolution__in=RESOLUTIONS, bucket_start__gte=start, bucket_start__lt=end
        ).delete()
        _write_rows(rows)
        written = len(rows) + _recompute_days(project_id, floor_time(start, 86400), end)
    return written


def _recompute_days(project_id: int, first_day: dt.datetime, end: dt.datetime) -> int:
    """Replace the DAY rows of the days in [first_day, end) with the sums of their HOUR rows."""
    hours = ToolRollup.objects.filter(
        project_id=project_id, resolution=ToolRollup.Resolution.HOUR, bucket_start__gte=first_day,
        bucket_start__lt=floor_time(end - dt.timedelta(microseconds=1), 86400) + DAY,
    )  # fmt: skip
    sums: dict[tuple, list] = {}
    counts = ROLLUP_COLUMNS[7:-2]
    for row in hours.values_list("bucket_start", "tool", "service", "environment", "agent", *counts, "latency_hist", "contract"):
        key = (floor_time(row[0], 86400), *row[1:5])
        entry = sums.get(key)
        if entry is None:
            entry = sums[key] = [[0] * len(counts), [], {}]
        totals = entry[0]
        for index, value in enumerate(row[5:5 + len(counts)]):
            totals[index] += value
        entry[1].append(row[-2])
        for check, (passed, applicable) in row[-1].items():
            tally = entry[2].setdefault(check, [0, 0])
            tally[0] += passed
            tally[1] += applicable
    rows = [
        (project_id, int(ToolRollup.Resolution.DAY), day, tool, service, environment, agent, *totals,
         histograms.merge(hists), dict(sorted(contract.items())))
        for (day, tool, service, environment, agent), (totals, hists, contract) in sorted(sums.items())
    ]  # fmt: skip
    ToolRollup.objects.filter(
        project_id=project_id, resolution=ToolRollup.Resolution.DAY, bucket_start__gte=first_day, bucket_start__lt=end
    ).delete()
    _write_rows(rows)
    return len(rows)


def rollups_prune_fine(*, now: dt.datetime) -> int:
    """Delete 5-minute rows older than FINE_HORIZON (the hourly and daily rows keep their counts)."""
    deleted, _ = ToolRollup.objects.filter(
        resolution=ToolRollup.Resolution.FIVE_MINUTES, bucket_start__lt=floor_time(now - FINE_HORIZON, 3600)
    ).delete()
    return deleted


def hour_ranges(hours: Iterable[dt.datetime]) -> list[tuple[dt.datetime, dt.datetime]]:
    """Changed hours -> merged [start, end) ranges, each widened by the hour before."""
    ranges: list[list[dt.datetime]] = []
    for hour in sorted(set(hours)):
        start, end = hour - HOUR, hour + HOUR
        if ranges and start <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], end)
        else:
            ranges.append([start, end])
    return [(start, end) for start, end in ranges]


def _claim_changed_hours(project_id: int) -> list[dt.datetime]:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM ingest_changedhour WHERE project_id = %s RETURNING hour", [project_id])
            hours = [row[0] for row in cursor.fetchall()]
    # SQLite hands back naive strings or datetimes; make them aware datetimes.
    return [_aware(hour) for hour in hours]


def _aware(value) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def rollups_refresh(*, project_id: int, now: dt.datetime | None = None) -> int | None:
    """Recompute the project's changed hours; None when another run holds the project.

    Hours past the project's retention are never recomputed: their raw calls are gone
    (or going), and the rollups are all that is left of them.
    """
    now = now or timezone.now()
    oldest = floor_time(retention_cutoff(Project.objects.get(pk=project_id), now), 3600) + HOUR
    with _project_lock(project_id) as acquired:
        if not acquired:
            return None
        hours = _claim_changed_hours(project_id)
        written = 0
        try:
            for start, end in hour_ranges(hours):
                if end > oldest:
                    written += rollups_recompute(
                        project_id=project_id, start=max(start, oldest), end=end, fine_since=now - FINE_HORIZON
                    )
        except BaseException:
            # Put the claimed hours back so the next run does them.
            ChangedHour.objects.bulk_create(
                [ChangedHour(project_id=project_id, hour=hour) for hour in hours], ignore_conflicts=True
            )
            raise
        return written


def projects_with_changes() -> list[int]:
    return sorted(set(ChangedHour.objects.values_list("project_id", flat=True).distinct()))


class _project_lock:
    """A PostgreSQL session advisory lock on (namespace, project): one run per project at a time."""

    def __init__(self, project_id: int):
        self.project_id = project_id
        self.held = False

    def __enter__(self) -> bool:
        if connection.vendor != "postgresql":
            return True  # SQLite serialises writers itself; the quickstart runs one worker
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_LOCK_NAMESPACE, self.project_id])
            self.held = bool(cursor.fetchone()[0])
        return self.held

    def __exit__(self, *exc) -> None:
        if self.held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_NAMESPACE, self.project_id])
