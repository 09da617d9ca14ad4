"""Pure: the rollup rows, their columns, and the bucket arithmetic both recompute paths share.

Logical calls (dashboard/rollups/attempts.py) go into buckets keyed by (resolution, bucket
start, tool, service, environment, agent); a bucket's counts are the per-call counts of
docs/contract/metrics.md, its latencies a mergeable histogram. No Django, no database.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import orjson

from dashboard.rollups import histograms
from dashboard.rollups.attempts import Attempt, CallTotals, LogicalCall, call_counts
from ingest.limits import MAX_WRITE
from ingest.taxonomy import CONTRACT_CHECKS, ERROR_CLASSES

HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)
# Attempts this far outside a range are loaded too, so calls crossing its edges link whole.
LINK_SLACK = HOUR
# Resolutions computed from the calls, in seconds (dashboard.models.ToolRollup.Resolution:
# FIVE_MINUTES, HOUR); DAY rows (86400) are summed from the HOUR rows afterwards.
RESOLUTIONS = (300, 3600)
DAY_RESOLUTION = 86400
# 5-minute rows serve ranges of a few hours (and drift's newest hours); older ones are
# pruned nightly and not recreated, since they were most of the rollup rows.
FINE_HORIZON = dt.timedelta(days=3)
# Ingest queues the 5-minute buckets of the calls it stores (ingest.ChangedBucket).
BUCKET = dt.timedelta(minutes=5)
# A call received this long before a refresh began is in the rows it computed: ingest
# commits within MAX_WRITE of its received time or not at all (ingest/limits.py), and the
# rest covers the clocks of the servers and the worker differing. So a retry arriving in a
# later bucket sends its call's bucket back to be recomputed only when it may not have been
# there the first time (dashboard.models.RolledUpBucket); the refresh job's SETTLE leaves
# this margin after the retries that follow a bucket's last calls by seconds.
RECEIVED_MARGIN = MAX_WRITE + dt.timedelta(seconds=15)
# The contract checks rollups tally (what ingest records; a stray key is not counted).
CONTRACT_NAMES = tuple(name for name, _ in CONTRACT_CHECKS)

ATTEMPT_FIELDS = (
    "trace_id", "span_id", "tool", "start_time", "ok", "error_class", "call_id", "attempt", "resend_count",
    "arguments_hash", "escalated", "latency_ms", "service", "environment", "agent", "contract",
)  # fmt: skip


def floor_time(moment: dt.datetime, seconds: int) -> dt.datetime:
    epoch = int(moment.timestamp())
    return dt.datetime.fromtimestamp(epoch - epoch % seconds, tz=dt.UTC)


@dataclass
class Bucket:
    totals: CallTotals = field(default_factory=CallTotals)
    latencies: list[float] = field(default_factory=list)
    contract: dict[str, list[int]] = field(default_factory=dict)


def aggregate(
    calls: Iterable[LogicalCall], *, fine_since: dt.datetime | None = None, resolutions: tuple[int, ...] | None = None
) -> dict[tuple, Bucket]:
    """Pure: logical calls -> {(resolution, bucket start, tool, service, environment, agent): bucket}.

    A call counts in the bucket where its first attempt started; the dimensions are
    the first attempt's. Calls before `fine_since` get no 5-minute bucket; `resolutions` (in
    seconds) narrows RESOLUTIONS.
    """
    buckets: dict[tuple, Bucket] = defaultdict(Bucket)
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
ROLLUP_TYPES = (
    "bigint", "integer", "timestamptz", "text", "text", "text", "text", *["integer"] * (9 + len(ERROR_CLASSES)),
    "jsonb", "jsonb",
)  # fmt: skip


# ToolRollupTotal: the same without the dimension columns, plus the failures by fingerprint.
TOTAL_COLUMNS = (*(name for name in ROLLUP_COLUMNS if name not in ("service", "environment", "agent")), "failures")
TOTAL_TYPES = (*(kind for name, kind in zip(ROLLUP_COLUMNS, ROLLUP_TYPES) if name in TOTAL_COLUMNS), "jsonb")
# The sample message kept per fingerprint: the tool page shows 200 characters of it.
FAILURE_MESSAGE_CHARS = 256
COUNTS = slice(7, len(ROLLUP_COLUMNS) - 2)  # the count columns of a ROLLUP_COLUMNS row


def count_values(totals: CallTotals) -> tuple[int, ...]:
    """A bucket's count columns (ROLLUP_COLUMNS[COUNTS]) in order."""
    return (
        totals.calls, totals.attempts, totals.retries, totals.failed_retries, totals.wasted_retries,
        totals.blind_retries, totals.errors, totals.resolved, totals.escalations,
        *(totals.errors_by_class.get(name, 0) for name in ERROR_CLASSES),
    )  # fmt: skip


def rollup_rows(project_id: int, buckets: dict[tuple, Bucket]) -> list[tuple]:
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
        sums[key] = [[0] * len(ROLLUP_COLUMNS[COUNTS]), [], {}]
    for row in rows:
        key = row[:4]  # project, resolution, bucket start, tool
        entry = sums.get(key)
        if entry is None:
            entry = sums[key] = [list(row[COUNTS]), [row[-2]], {}]
        else:
            counts = entry[0]
            for index, value in enumerate(row[COUNTS]):
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


def aware(value) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


