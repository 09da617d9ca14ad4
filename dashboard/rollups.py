"""Rollups: the buckets of changed tool calls recomputed from the calls (SPEC 5).

Ingest queues the 5-minute bucket of every tool call it stores (ingest.ChangedBucket, in
the same transaction). `rollups_refresh` claims a project's queued buckets and recomputes
them: it links the attempts around the range into logical calls (dashboard.attempts) and
replaces the range's rollup rows: ToolRollup per tool and dimension, and ToolRollupTotal,
their sums per tool (what pages without a dimension filter read), in the same
transaction. Recomputing instead of incrementing makes a rerun, a late span or a resend
harmless: the rows come out the same. On PostgreSQL an advisory lock keeps two runs off
the same project, and the work is done in SQL (dashboard.rollups_sql), 5 minutes at a
time within the fine horizon; this module's Python path is SQLite's and the reference the
SQL one is tested against."""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import orjson
from django.db import connection, connections, transaction
from django.db.models import Sum

from dashboard import histograms
from dashboard.attempts import Attempt, CallTotals, LogicalCall, call_counts, link_attempts
from dashboard.models import ERROR_CLASSES, RolledUpBucket, ToolRollup, ToolRollupTotal
from django.utils import timezone

from ingest.models import ChangedBucket, Project, ToolCall
from ingest.retention import retention_cutoff
from ingest.services import MAX_WRITE
from ingest.taxonomy import CONTRACT_CHECKS
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
# Ingest queues the 5-minute buckets of the calls it stores (ingest.ChangedBucket). A bucket
# is settled SETTLE after its end (most late spans, the long calls' and the exporters'
# batches, are in by then); before that it is recomputed only while it holds at most
# OPEN_BUCKET_CALLS calls (a few seconds' work). So a quiet project's newest bucket is fresh
# every minute, and a busy project's is rolled up once, when it has settled, instead of
# being read again every minute as it fills.
BUCKET = dt.timedelta(minutes=5)
SETTLE = dt.timedelta(seconds=90)
# A call received this long before a refresh began is in the rows it computed: ingest
# commits within MAX_WRITE of its received time or not at all (ingest.services), and the
# rest covers the clocks of the servers and the worker differing. So a retry arriving in a
# later bucket sends its call's bucket back to be recomputed only when it may not have been
# there the first time (dashboard.models.RolledUpBucket); SETTLE leaves this margin after
# the retries that follow a bucket's last calls by seconds.
RECEIVED_MARGIN = MAX_WRITE + dt.timedelta(seconds=15)
OPEN_BUCKET_CALLS = 50_000
# Spans for buckets more than LATE_AFTER old (late ones: a span can come up to 48 h late) are
# rolled up every LATE_EVERY minutes, all together, instead of every minute: under steady
# late traffic most of the last two days' buckets change every minute.
LATE_AFTER = dt.timedelta(hours=2)
LATE_EVERY = dt.timedelta(minutes=10)
# A range holding more calls than PARALLEL_CALLS (a busy project's settled bucket) is
# recomputed on RANGE_WORKERS connections at once, its tools shared out between them: a
# tool's rows depend on its own calls only, and PostgreSQL runs each connection on its own core.
PARALLEL_CALLS = 300_000
RANGE_WORKERS = 2
# Changed buckets this close together are recomputed as one range, the quiet ones between
# included: one pass instead of many small ones when late spans scatter over the hours. A
# busy bucket between (by its last rollups) is not: it would be recomputed for nothing.
RANGE_GAP = dt.timedelta(minutes=15)
# The contract checks rollups tally (what ingest records; a stray key is not counted).
CONTRACT_NAMES = tuple(name for name, _ in CONTRACT_CHECKS)
_LOCK_NAMESPACE = 7_310_020  # pg_advisory_lock(namespace, project id): one rollup run per project

ATTEMPT_FIELDS = (
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


def aggregate(
    calls: Iterable[LogicalCall], *, fine_since: dt.datetime | None = None, resolutions: tuple[int, ...] | None = None
) -> dict[tuple, _Bucket]:
    """Pure: logical calls -> {(resolution, bucket start, tool, service, environment, agent): bucket}.

    A call counts in the bucket where its first attempt started; the dimensions are
    the first attempt's. Calls before `fine_since` get no 5-minute bucket; `resolutions` (in
    seconds) narrows RESOLUTIONS.
    """
    buckets: dict[tuple, _Bucket] = defaultdict(_Bucket)
    moments: dict[int, dt.datetime] = {}  # bucket start (epoch s) -> datetime, shared by many calls
    all_resolutions = resolutions or tuple(int(resolution) for resolution in RESOLUTIONS)
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
                    if passed is not None and check in CONTRACT_NAMES:
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


# ToolRollupTotal: the same without the dimension columns, plus the failures by fingerprint.
TOTAL_COLUMNS = (*(name for name in ROLLUP_COLUMNS if name not in ("service", "environment", "agent")), "failures")
_TOTAL_TYPES = (*(kind for name, kind in zip(ROLLUP_COLUMNS, _ROLLUP_TYPES) if name in TOTAL_COLUMNS), "jsonb")
# The sample message kept per fingerprint: the tool page shows 200 characters of it.
FAILURE_MESSAGE_CHARS = 256
_COUNTS = slice(7, len(ROLLUP_COLUMNS) - 2)  # the count columns of a ROLLUP_COLUMNS row


def count_values(totals: CallTotals) -> tuple[int, ...]:
    """A bucket's count columns (ROLLUP_COLUMNS[_COUNTS]) in order."""
    return (
        totals.calls, totals.attempts, totals.retries, totals.failed_retries, totals.wasted_retries,
        totals.blind_retries, totals.errors, totals.resolved, totals.escalations,
        *(totals.errors_by_class.get(name, 0) for name in ERROR_CLASSES),
    )  # fmt: skip


def _rows(project_id: int, buckets: dict[tuple, _Bucket]) -> list[tuple]:
    """Rollup rows as tuples in ROLLUP_COLUMNS order."""
    return [
        (project_id, *key, *count_values(bucket.totals), histograms.histogram(bucket.latencies),
         dict(sorted(bucket.contract.items())))
        for key, bucket in sorted(buckets.items())
    ]  # fmt: skip


def total_rows(rows: list[tuple], failures: dict[tuple, dict] | None = None) -> list[tuple]:
    """Pure: ROLLUP_COLUMNS rows summed over service, environment and agent, as TOTAL_COLUMNS
    rows (one per resolution, bucket and tool). Counts add, histograms merge bin by bin and
    contract tallies add, so a total is exactly what its calls would give undivided.
    `failures` ({(project, resolution, bucket start, tool): {fingerprint: [...]}}) fills the
    failures column; a bucket with failed attempts but no call starting in it (a late retry)
    gets a row of zero counts."""
    failures = failures or {}
    sums: dict[tuple, list] = {}
    for key in failures:
        sums[key] = [[0] * len(ROLLUP_COLUMNS[_COUNTS]), [], {}]
    for row in rows:
        key = row[:4]  # project, resolution, bucket start, tool
        entry = sums.get(key)
        if entry is None:
            entry = sums[key] = [list(row[_COUNTS]), [row[-2]], {}]
        else:
            counts = entry[0]
            for index, value in enumerate(row[_COUNTS]):
                counts[index] += value
            entry[1].append(row[-2])
        for check, (passed, applicable) in row[-1].items():
            tally = entry[2].setdefault(check, [0, 0])
            tally[0] += passed
            tally[1] += applicable
    return [
        (*key, *counts, histograms.merge(hists) if len(hists) != 1 else hists[0], dict(sorted(contract.items())),
         dict(sorted(failures.get(key, {}).items())))
        for key, (counts, hists, contract) in sorted(sums.items())
    ]  # fmt: skip


def merge_failures(target: dict[str, list], more: dict[str, list]) -> dict[str, list]:
    """Pure: fold one bucket's {fingerprint: [count, first, last, class, message]} into `target`
    (counts add; the earliest first, the latest last, the greatest class and message)."""
    for fingerprint, (count, first, last, error_class, message) in more.items():
        seen = target.get(fingerprint)
        if seen is None:
            target[fingerprint] = [count, first, last, error_class, message]
        else:
            seen[0] += count
            seen[1] = min(seen[1], first)  # ISO strings in UTC: ordered as the times are
            seen[2] = max(seen[2], last)
            seen[3] = max(seen[3], error_class)
            seen[4] = max(seen[4], message)
    return target


_FAILURES_SQL = {
    "postgresql": "date_bin('300 seconds', start_time, TIMESTAMPTZ '1970-01-01 00:00:00+00')",
    "sqlite": "datetime((CAST(strftime('%%s', start_time) AS INTEGER) / 300) * 300, 'unixepoch')",
}


def load_failures(
    project_id: int, start: dt.datetime, end: dt.datetime, *, fine_since: dt.datetime | None = None
) -> dict[tuple, dict]:
    """The failed attempts that started in [start, end) grouped by fingerprint per 5-minute and
    hour bucket and tool (one grouped query): {(project, resolution, bucket start, tool):
    {fingerprint: [count, first seen, last seen, class, message]}}, ISO times in UTC."""
    # The greatest class and message by code point, as Python compares them (merge_failures).
    c = ' COLLATE "C"' if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_FAILURES_SQL[connection.vendor]}, tool, fingerprint, COUNT(*), MIN(start_time), MAX(start_time), "
            f"MAX(error_class{c}), MAX(message{c}) FROM ingest_toolcall WHERE project_id = %s AND start_time >= %s "
            "AND start_time < %s AND NOT ok AND fingerprint <> '' GROUP BY 1, 2, 3",
            [project_id, start, end],
        )
        groups = cursor.fetchall()
    fine_epoch = int(fine_since.timestamp()) if fine_since else None
    found: dict[tuple, dict] = {}
    for bucket, tool, fingerprint, count, first, last, error_class, message in groups:
        epoch = int(_aware(bucket).timestamp())
        first, last = (_aware(moment).isoformat(timespec="microseconds") for moment in (first, last))
        entry = {fingerprint: [count, first, last, error_class, message[:FAILURE_MESSAGE_CHARS]]}
        for resolution in RESOLUTIONS:
            if resolution < 3600 and fine_epoch is not None and epoch < fine_epoch:
                continue
            moment = dt.datetime.fromtimestamp(epoch - epoch % resolution, tz=dt.UTC)
            merge_failures(found.setdefault((project_id, int(resolution), moment, tool), {}), entry)
    return found


def _write_rows(rows: list[tuple], model=ToolRollup) -> None:
    """Insert rollup rows (ToolRollup's, or with model=ToolRollupTotal, total_rows' ones): binary
    COPY on PostgreSQL (bulk_create was 44 % of a full recompute)."""
    columns, types = (ROLLUP_COLUMNS, _ROLLUP_TYPES) if model is ToolRollup else (TOTAL_COLUMNS, _TOTAL_TYPES)
    if connection.vendor != "postgresql":
        model.objects.bulk_create([model(**dict(zip(columns, row))) for row in rows], batch_size=1000)
        return
    with connection.cursor() as cursor:
        copy_rows(cursor, model._meta.db_table, columns, types, rows)


def _replace(project_id: int, resolutions, start: dt.datetime, end: dt.datetime, rows: list[tuple], failures: dict) -> None:
    """Replace the rows of both tables at `resolutions` in [start, end) with `rows` and their totals."""
    for model in (ToolRollup, ToolRollupTotal):
        model.objects.filter(
            project_id=project_id, resolution__in=resolutions, bucket_start__gte=start, bucket_start__lt=end
        ).delete()
    _write_rows(rows)
    _write_rows(total_rows(rows, failures), ToolRollupTotal)


def load_attempts(project_id: int, start: dt.datetime, end: dt.datetime) -> list[Attempt]:
    """The attempts that started in [start, end), with contract checks for failed ones only."""
    if connection.vendor == "postgresql":
        rows = _pg_attempt_rows(project_id, start, end)
    else:
        rows = (
            ToolCall.objects.filter(project_id=project_id, start_time__gte=start, start_time__lt=end)
            .values_list(*ATTEMPT_FIELDS)
            .iterator(chunk_size=5000)
        )
    return attempts_from_rows(rows)


def attempts_from_rows(rows: Iterable[tuple]) -> list[Attempt]:
    """Attempts from rows of ATTEMPT_FIELDS (contract None for successful attempts)."""
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


def attempt_columns(alias: str) -> str:
    """ATTEMPT_FIELDS as SQL over ingest_toolcall `alias`: successful attempts' contract checks
    are never read, so they are not sent (or JSON-decoded)."""
    return ", ".join(
        f"CASE WHEN {alias}.ok THEN NULL ELSE {alias}.contract END AS contract" if name == "contract" else f"{alias}.{name}"
        for name in ATTEMPT_FIELDS
    )


def _pg_attempt_rows(project_id: int, start: dt.datetime, end: dt.datetime):
    # A plain cursor: the ORM's per-field conversion was most of the load time.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {attempt_columns('t')} FROM ingest_toolcall t WHERE t.project_id = %s AND t.start_time >= %s "
            "AND t.start_time < %s",
            [project_id, start, end],
        )
        return cursor.fetchall()


def rollups_recompute(
    *, project_id: int, start: dt.datetime, end: dt.datetime, fine_since: dt.datetime | None = None
) -> int:
    """Replace the rollups of [start, end) (hour-aligned) with ones computed afresh, and their
    per-tool totals; returns the ToolRollup rows written.

    The days the range touches get their DAY rows summed again from their HOUR rows. With
    `fine_since` (taken to its hour), calls before it get no 5-minute rows. On PostgreSQL
    the work is done in SQL (dashboard.rollups_sql), with the same result.
    """
    start, end = floor_time(start, 3600), floor_time(end - dt.timedelta(microseconds=1), 3600) + HOUR
    fine_since = floor_time(fine_since, 3600) if fine_since else None
    if connection.vendor == "postgresql":
        from dashboard import rollups_sql  # it builds on this module

        return rollups_sql.recompute(project_id=project_id, start=start, end=end, fine_since=fine_since)
    return recompute_in_python(project_id=project_id, start=start, end=end, fine_since=fine_since)


def recompute_in_python(*, project_id: int, start: dt.datetime, end: dt.datetime, fine_since: dt.datetime | None) -> int:
    """rollups_recompute linking every call in Python: SQLite's path, and the reference the
    PostgreSQL one is tested against. Arguments already aligned as rollups_recompute does."""
    attempts = load_attempts(project_id, start - LINK_SLACK, end + LINK_SLACK)
    calls = [call for call in link_attempts(attempts) if start <= call.first.start < end]
    rows = _rows(project_id, aggregate(calls, fine_since=fine_since))
    failures = load_failures(project_id, start, end, fine_since=fine_since)
    with transaction.atomic():
        _replace(project_id, RESOLUTIONS, start, end, rows, failures)
        written = len(rows) + _recompute_days(project_id, floor_time(start, 86400), end)
    return written


def _recompute_days(project_id: int, first_day: dt.datetime, end: dt.datetime) -> int:
    """Replace the DAY rows of the days in [first_day, end) with the sums of their HOUR rows (and
    the totals' DAY rows with the sums of those)."""
    hours_of_the_days = {
        "project_id": project_id, "resolution": ToolRollup.Resolution.HOUR, "bucket_start__gte": first_day,
        "bucket_start__lt": floor_time(end - dt.timedelta(microseconds=1), 86400) + DAY,
    }  # fmt: skip
    hours = ToolRollup.objects.filter(**hours_of_the_days)
    failures: dict[tuple, dict] = {}
    for hour, tool, found in ToolRollupTotal.objects.filter(**hours_of_the_days).values_list("bucket_start", "tool", "failures"):
        if not found:
            continue
        key = (project_id, int(ToolRollup.Resolution.DAY), floor_time(hour, 86400), tool)
        merge_failures(failures.setdefault(key, {}), found)
    sums: dict[tuple, list] = {}
    counts = ROLLUP_COLUMNS[_COUNTS]
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
    _replace(project_id, [ToolRollup.Resolution.DAY], first_day, end, rows, failures)
    return len(rows)


def rollups_prune_fine(*, now: dt.datetime) -> int:
    """Delete 5-minute rows (and totals) older than FINE_HORIZON (the hourly and daily rows keep
    their counts); returns the ToolRollup rows deleted."""
    old = {"resolution": ToolRollup.Resolution.FIVE_MINUTES, "bucket_start__lt": floor_time(now - FINE_HORIZON, 3600)}
    RolledUpBucket.objects.filter(bucket_start__lt=old["bucket_start__lt"]).delete()
    ToolRollupTotal.objects.filter(**old).delete()
    deleted, _ = ToolRollup.objects.filter(**old).delete()
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


def bucket_ranges(
    buckets: Iterable[dt.datetime], gap: dt.timedelta = dt.timedelta(0), busy: frozenset[dt.datetime] = frozenset()
) -> list[tuple[dt.datetime, dt.datetime]]:
    """5-minute bucket starts -> merged [start, end) ranges; buckets at most `gap` apart join a
    range with the buckets between, unless one of those is `busy` (costly to recompute for nothing)."""
    ranges: list[list[dt.datetime]] = []
    for bucket in sorted(set(buckets)):
        between = ranges and _bucket_starts(ranges[-1][1], bucket)
        if ranges and bucket <= ranges[-1][1] + gap and not any(start in busy for start in between):
            ranges[-1][1] = max(ranges[-1][1], bucket + BUCKET)
        else:
            ranges.append([bucket, bucket + BUCKET])
    return [(start, end) for start, end in ranges]


def _bucket_starts(start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    starts = []
    while start < end:
        starts.append(start)
        start += BUCKET
    return starts


def _busy_buckets(project_id: int, start: dt.datetime, end: dt.datetime) -> frozenset[dt.datetime]:
    """The 5-minute buckets of [start, end) whose rollups count more than OPEN_BUCKET_CALLS calls."""
    rows = (
        ToolRollupTotal.objects.filter(project_id=project_id, resolution=ToolRollup.Resolution.FIVE_MINUTES,
                                       bucket_start__gte=start, bucket_start__lt=end)  # fmt: skip
        .values("bucket_start").annotate(calls=Sum("calls")).filter(calls__gt=OPEN_BUCKET_CALLS)
    )
    return frozenset(_aware(row["bucket_start"]) for row in rows)


def _claim_changed_buckets(project_id: int, now: dt.datetime, everything: bool) -> list[dt.datetime]:
    """Take the queued buckets that are due (see SETTLE and LATE_AFTER), or all of them."""
    queued = ChangedBucket.objects.filter(project_id=project_id).values_list("pk", "bucket_start")
    recent_busy = frozenset() if everything else _busy_buckets(project_id, floor_time(now, 300) - 4 * BUCKET, now)
    taken = {
        pk: start
        for pk, start in ((pk, _aware(start)) for pk, start in queued)
        if everything or _due(project_id, start, now, recent_busy)
    }
    if taken:
        ChangedBucket.objects.filter(pk__in=taken).delete()
    return list(taken.values())


def _due(project_id: int, bucket: dt.datetime, now: dt.datetime, recent_busy: frozenset[dt.datetime]) -> bool:
    if bucket + BUCKET + SETTLE > now:  # still filling: only while small
        # Right after a busy bucket it is taken for busy too, without counting its calls.
        return not {bucket - BUCKET, bucket - 2 * BUCKET} & recent_busy and _small(project_id, bucket)
    if bucket + LATE_AFTER > now:
        return True
    # Late spans' buckets are gathered for LATE_EVERY, then done together.
    return int(now.timestamp()) // 60 % int(LATE_EVERY.total_seconds() // 60) == 0


def _small(project_id: int, bucket: dt.datetime) -> bool:
    return not _holds_more_than(project_id, bucket, bucket + BUCKET, OPEN_BUCKET_CALLS)


def _aware(value) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def rollups_refresh(*, project_id: int, now: dt.datetime | None = None, everything: bool = False) -> int | None:
    """Recompute the project's changed buckets that are due (all of them with `everything`: a
    backfill, a run by hand); None when another run holds the project.

    On PostgreSQL, buckets within the 5-minute horizon are recomputed 5 minutes at a time
    (their hours summed from the 5-minute rows), and a call that began in an earlier bucket
    and has an attempt in a changed one gets its own bucket recomputed too; older buckets,
    and every bucket on SQLite, are recomputed a whole hour at a time with the hour before.
    Hours past the project's retention are never recomputed: their raw calls are gone (or
    going), and the rollups are all that is left of them.
    """
    now = now or timezone.now()
    oldest = floor_time(retention_cutoff(Project.objects.get(pk=project_id), now), 3600) + HOUR
    # Hours wholly inside the horizon, whose 5-minute rows are all there to be summed.
    fine_since = floor_time(now - FINE_HORIZON, 3600) + HOUR
    with _project_lock(project_id) as acquired:
        if not acquired:
            return None
        buckets = _claim_changed_buckets(project_id, now, everything)
        try:
            return _recompute_buckets(project_id, buckets, oldest, fine_since, now)
        except BaseException:
            # Put the claimed buckets back so the next run does them.
            ChangedBucket.objects.bulk_create(
                [ChangedBucket(project_id=project_id, bucket_start=bucket) for bucket in buckets], ignore_conflicts=True
            )
            raise


def _recompute_buckets(project_id, buckets, oldest: dt.datetime, fine_since: dt.datetime, now: dt.datetime) -> int:
    written = 0
    if connection.vendor == "postgresql":
        from dashboard import rollups_sql  # it builds on this module

        fine = [bucket for bucket in buckets if bucket >= max(fine_since, oldest)]
        buckets = [bucket for bucket in buckets if bucket < fine_since]
        earlier: set[dt.datetime] = set()
        busy = _busy_buckets(project_id, min(fine), max(fine)) if fine else frozenset()
        for start, end in bucket_ranges(fine, gap=RANGE_GAP, busy=busy):
            rows, before = _recompute_fine_range(project_id, start, end, now)
            written += rows
            earlier |= before
        # The buckets where calls with a newly arrived attempt began, unless done already (once:
        # they hold no new attempt themselves, so they send no one further back).
        earlier -= set(fine)
        for start, end in bucket_ranges(bucket for bucket in earlier if bucket >= max(fine_since, oldest)):
            written += rollups_sql.recompute_fine(project_id=project_id, start=start, end=end, computed_at=now)[0]
        buckets += [bucket for bucket in earlier if bucket < fine_since]
    for start, end in hour_ranges(floor_time(bucket, 3600) for bucket in buckets):
        if end > oldest:
            written += rollups_recompute(project_id=project_id, start=max(start, oldest), end=end, fine_since=now - FINE_HORIZON)
    return written


def _recompute_fine_range(project_id: int, start: dt.datetime, end: dt.datetime, now: dt.datetime) -> tuple[int, set[dt.datetime]]:
    """rollups_sql.recompute_fine over [start, end), shared out by tool between RANGE_WORKERS
    connections when the range holds more than PARALLEL_CALLS calls."""
    from dashboard import rollups_sql  # it builds on this module

    # Other connections see only what is committed: not inside an open transaction.
    busy = not connection.in_atomic_block and _holds_more_than(project_id, start, end, PARALLEL_CALLS)
    shares = _tool_shares(project_id, start, end) if busy else []
    if len(shares) < 2:
        return rollups_sql.recompute_fine(project_id=project_id, start=start, end=end, computed_at=now)

    def one_share(tools: rollups_sql.ToolSet) -> tuple[int, set[dt.datetime]]:
        try:
            return rollups_sql.recompute_fine(project_id=project_id, start=start, end=end, tools=tools)
        finally:
            connections.close_all()  # this thread's connection

    with ThreadPoolExecutor(max_workers=len(shares)) as pool:
        results = list(pool.map(one_share, shares))
    with connection.cursor() as cursor:  # every tool's rows are in: the buckets are done
        rollups_sql.record_buckets(cursor, project_id, start, end, now)
    return sum(rows for rows, _ in results), set().union(*(earlier for _, earlier in results))


def _holds_more_than(project_id: int, start: dt.datetime, end: dt.datetime, calls: int) -> bool:
    in_range = ToolCall.objects.filter(project_id=project_id, start_time__gte=start, start_time__lt=end)
    return in_range.values("pk")[: calls + 1].count() > calls


def _tool_shares(project_id: int, start: dt.datetime, end: dt.datetime) -> list:
    """RANGE_WORKERS sets of tools with about as many calls each, by the last hour's rollups
    before the range: the last set takes every tool not in the others (new ones too)."""
    from dashboard import rollups_sql

    recent = (
        ToolRollupTotal.objects.filter(project_id=project_id, resolution=ToolRollup.Resolution.FIVE_MINUTES,
                                       bucket_start__gte=start - HOUR, bucket_start__lt=start)  # fmt: skip
        .values("tool").annotate(calls=Sum("calls")).order_by("-calls", "tool")
    )
    loads = [[0, []] for _ in range(RANGE_WORKERS)]
    for row in recent:  # the busiest first, each to the least loaded share
        share = min(loads, key=lambda load: load[0])
        share[0] += row["calls"]
        share[1].append(row["tool"])
    named = [tuple(tools) for _, tools in loads[:-1]]
    if not all(named) or not loads[-1][1]:
        return []  # too few tools known to share out
    taken = tuple(tool for tools in named for tool in tools)
    return [rollups_sql.ToolSet(tools) for tools in named] + [rollups_sql.ToolSet(taken, others=True)]


def rollups_rebuild(*, project_id: int, start: dt.datetime, end: dt.datetime, now: dt.datetime | None = None,
                    workers: int = 2) -> int | None:  # fmt: skip
    """Recompute every bucket of [start, end), a day at a time, `workers` days at once (each on
    its own database connection: on PostgreSQL the work runs in the server, so two workers keep
    both cores busy); for history imported without the queue, or after a change to the rollup
    code. Returns the ToolRollup rows written; None when another run holds the project."""
    now = now or timezone.now()
    days, day = [], floor_time(start, 86400)
    while day < end:
        days.append((max(day, start), min(day + DAY, end)))
        day += DAY

    def one_day(span: tuple[dt.datetime, dt.datetime]) -> int:
        try:
            return rollups_recompute(project_id=project_id, start=span[0], end=span[1], fine_since=now - FINE_HORIZON)
        finally:
            if threaded:
                connections.close_all()  # this thread's connection

    threaded = workers > 1 and connection.vendor == "postgresql"
    with _project_lock(project_id) as acquired:  # the refresh job keeps off meanwhile
        if not acquired:
            return None
        if not threaded:
            return sum(one_day(span) for span in days)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return sum(pool.map(one_day, days))


def projects_with_changes() -> list[int]:
    return sorted(set(ChangedBucket.objects.values_list("project_id", flat=True).distinct()))


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
