"""The rollup job: the buckets of changed tool calls recomputed from the calls (docs/contract/metrics.md).

Ingest queues the 5-minute bucket of every tool call it stores (ingest.ChangedBucket, in
the same transaction). `rollups_refresh` claims a project's queued buckets and recomputes
them: it links the attempts around the range into logical calls (dashboard/rollups/attempts.py)
and replaces the range's rollup rows: ToolRollup per tool and dimension, and ToolRollupTotal,
their sums per tool (what pages without a dimension filter read), in the same
transaction. Recomputing instead of incrementing makes a rerun, a late span or a resend
harmless: the rows come out the same. On PostgreSQL an advisory lock keeps two runs off
the same project, and the work is done in SQL (dashboard/rollups/sql.py), 5 minutes at a
time within the fine horizon; on SQLite it is done in Python (dashboard/rollups/python_path.py),
the reference the SQL path is tested against.

Crash safety: a claim is a lease, never a delete. The run marks the due rows claimed (its
`claimed_at`, `claimed_by`) and commits; once every rollup row is written it deletes the
rows that still bear its claim. A worker killed in between (SIGKILL, the OOM killer, a
Celery hard time limit) leaves them claimed, and a later run takes them over: on
PostgreSQL at once, since a run takes claims only while it holds the project's advisory
lock, so a claim found by the next holder is a dead run's; on SQLite once the claim is
older than settings.ROLLUP_CLAIM_LEASE_SECONDS (longer than the task's hard time limit).
Ingest marking a claimed bucket again clears its claim (ingest.storage.mark_changed_buckets),
so the claimant's delete leaves it queued for the calls it may not have read; and a bucket
row that an ingest transaction has marked but not committed is skipped by the claim (SKIP
LOCKED): its new calls are not visible yet."""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import Q, Sum
from django.utils import timezone

from dashboard.feed.snapshot import tool_health_after_rollups
from dashboard.models import RolledUpBucket, ToolRollup, ToolRollupTotal
from dashboard.rollups import sql
from dashboard.rollups.python_path import recompute_in_python
from dashboard.rollups.rows import BUCKET, DAY, FINE_HORIZON, HOUR, aware, bucket_ranges, floor_time, hour_ranges
from ingest.models import ChangedBucket, Project, ToolCall
from ingest.retention import retention_cutoff

logger = logging.getLogger(__name__)

# Ingest queues the 5-minute buckets of the calls it stores (ingest.ChangedBucket). A bucket
# is settled SETTLE after its end (most late spans, the long calls' and the exporters'
# batches, are in by then); before that it is recomputed only while it holds at most
# OPEN_BUCKET_CALLS calls (a few seconds' work). So a quiet project's newest bucket is fresh
# every minute, and a busy project's is rolled up once, when it has settled, instead of
# being read again every minute as it fills.
SETTLE = dt.timedelta(seconds=90)
OPEN_BUCKET_CALLS = 50_000
# Spans for buckets more than LATE_AFTER old (late ones: a span can come up to 48 h late) are
# rolled up every LATE_EVERY minutes, all together, instead of every minute: under steady
# late traffic most of the last two days' buckets change every minute.
LATE_AFTER = dt.timedelta(hours=2)
# Late buckets recomputed per run at most: a day of 5-minute buckets, a few minutes' work even
# for a busy project (docs/benchmarks.md: the rollups of 10 M calls take ~14 min), well under
# the task's soft time limit; the rest wait, queued, for the next runs.
BACKLOG_BUCKETS_PER_RUN = 288
LATE_EVERY = dt.timedelta(minutes=settings.ROLLUP_LATE_EVERY_MINUTES)  # 10 by default
# A range holding more calls than PARALLEL_CALLS (a busy project's settled bucket) is
# recomputed on RANGE_WORKERS connections at once, its tools shared out between them: a
# tool's rows depend on its own calls only, and PostgreSQL runs each connection on its own core.
PARALLEL_CALLS = 300_000
RANGE_WORKERS = 2
# Changed buckets this close together are recomputed as one range, the quiet ones between
# included: one pass instead of many small ones when late spans scatter over the hours. A
# busy bucket between (by its last rollups) is not: it would be recomputed for nothing.
RANGE_GAP = dt.timedelta(minutes=15)
_LOCK_NAMESPACE = 7_310_020  # pg_advisory_lock(namespace, project id): one rollup run per project

def rollups_recompute(
    *, project_id: int, start: dt.datetime, end: dt.datetime, fine_since: dt.datetime | None = None
) -> int:
    """Replace the rollups of [start, end) (hour-aligned) with ones computed afresh, and their
    per-tool totals; returns the ToolRollup rows written.

    The days the range touches get their DAY rows summed again from their HOUR rows. With
    `fine_since` (taken to its hour), calls before it get no 5-minute rows. On PostgreSQL
    the work is done in SQL (dashboard/rollups/sql.py), with the same result.
    """
    start, end = floor_time(start, 3600), floor_time(end - dt.timedelta(microseconds=1), 3600) + HOUR
    fine_since = floor_time(fine_since, 3600) if fine_since else None
    if connection.vendor == "postgresql":
        return sql.recompute(project_id=project_id, start=start, end=end, fine_since=fine_since)
    return recompute_in_python(project_id=project_id, start=start, end=end, fine_since=fine_since)


def rollups_prune_fine(*, now: dt.datetime) -> int:
    """Delete 5-minute rows (and totals) older than FINE_HORIZON (the hourly and daily rows keep
    their counts); returns the ToolRollup rows deleted."""
    old = {"resolution": ToolRollup.Resolution.FIVE_MINUTES, "bucket_start__lt": floor_time(now - FINE_HORIZON, 3600)}
    RolledUpBucket.objects.filter(bucket_start__lt=old["bucket_start__lt"]).delete()
    ToolRollupTotal.objects.filter(**old).delete()
    deleted, _ = ToolRollup.objects.filter(**old).delete()
    return deleted


def _busy_buckets(project_id: int, start: dt.datetime, end: dt.datetime) -> frozenset[dt.datetime]:
    """The 5-minute buckets of [start, end) whose rollups count more than OPEN_BUCKET_CALLS calls."""
    rows = (
        ToolRollupTotal.objects.filter(project_id=project_id, resolution=ToolRollup.Resolution.FIVE_MINUTES,
                                       bucket_start__gte=start, bucket_start__lt=end)  # fmt: skip
        .values("bucket_start").annotate(calls=Sum("calls")).filter(calls__gt=OPEN_BUCKET_CALLS)
    )
    return frozenset(aware(row["bucket_start"]) for row in rows)


class _Claim:
    """One run's lease on queued buckets: taken (and committed) before the recompute, deleted
    only after it (`done`), given back when the run fails (`release`); see the module docstring."""

    BATCH = 1000  # ids per statement

    def __init__(self, project_id: int):
        self.project_id = project_id
        self.at = timezone.now()  # the wall clock: a lease is about real time, whatever `now` a run is given
        self.by = f"{socket.gethostname()[:40]}:{os.getpid()}"
        if connection.vendor == "postgresql":
            # Claims are taken under the project's advisory lock, which dies with its session:
            # holding it now, any claim found is a dead run's.
            self.stale_before = self.at
        else:
            self.stale_before = self.at - dt.timedelta(seconds=settings.ROLLUP_CLAIM_LEASE_SECONDS)

    def claimable(self):
        return ChangedBucket.objects.filter(project_id=self.project_id).filter(
            Q(claimed_at__isnull=True) | Q(claimed_at__lt=self.stale_before)
        )

    def take(self, pks: list[int]) -> list[dt.datetime]:
        """Claim these rows, where still claimable; returns the buckets claimed."""
        taken: list[dt.datetime] = []
        for n in range(0, len(pks), self.BATCH):
            batch = pks[n : n + self.BATCH]
            with transaction.atomic():  # committed before the recompute: the claim must outlive this process
                if connection.vendor == "postgresql":
                    with connection.cursor() as cursor:
                        # SKIP LOCKED: a row an ingest transaction is marking (not committed yet)
                        # waits for the next run, which will see that transaction's calls.
                        cursor.execute(
                            "UPDATE ingest_changedbucket SET claimed_at = %s, claimed_by = %s WHERE id IN ("
                            "SELECT id FROM ingest_changedbucket WHERE id = ANY(%s) "
                            "AND (claimed_at IS NULL OR claimed_at < %s) FOR UPDATE SKIP LOCKED) RETURNING bucket_start",
                            [self.at, self.by, batch, self.stale_before],
                        )
                        taken += [aware(row[0]) for row in cursor.fetchall()]
                else:
                    self.claimable().filter(pk__in=batch).update(claimed_at=self.at, claimed_by=self.by)
                    taken += [aware(start) for start in self._mine().filter(pk__in=batch).values_list("bucket_start", flat=True)]
        return sorted(taken)

    def done(self) -> None:
        """Every claimed bucket's rows are written: dequeue those still bearing this claim (one
        that ingest marked again meanwhile lost it, and stays queued)."""
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                # Rows locked in bucket order, as ingest's marking locks them: no deadlock between the two.
                cursor.execute(
                    "DELETE FROM ingest_changedbucket WHERE id IN (SELECT id FROM ingest_changedbucket WHERE "
                    "project_id = %s AND claimed_by = %s AND claimed_at = %s ORDER BY bucket_start FOR UPDATE)",
                    [self.project_id, self.by, self.at],
                )
            return
        self._mine().delete()

    def release(self) -> None:
        """The run failed: give the buckets back for the next run, now rather than after the lease."""
        try:
            self._mine().update(claimed_at=None, claimed_by="")
        except Exception:  # the connection may be what failed; the lease (or the lock) covers it
            logger.warning("rollup claims of project %s not released; the next run takes them over", self.project_id,
                           exc_info=True)  # fmt: skip

    def _mine(self):
        return ChangedBucket.objects.filter(project_id=self.project_id, claimed_by=self.by, claimed_at=self.at)


def _claim_changed_buckets(project_id: int, now: dt.datetime, everything: bool, claim: _Claim) -> list[dt.datetime]:
    """Claim the queued buckets that are due (see SETTLE and LATE_AFTER), or all of them, among
    those unclaimed or claimed by a run that is gone."""
    queued = claim.claimable().values_list("pk", "bucket_start")
    recent_busy = frozenset() if everything else _busy_buckets(project_id, floor_time(now, 300) - 4 * BUCKET, now)
    due = [
        (start, pk)
        for pk, start in ((pk, aware(start)) for pk, start in queued)
        if everything or _due(project_id, start, now, recent_busy)
    ]
    if not everything:
        # Every recent bucket, and at most BACKLOG_BUCKETS_PER_RUN older ones, oldest first: a
        # backfill is drained a slice a run, within the task's time limit, while the live
        # buckets stay fresh (a run that claimed a whole large backlog would hit the limit,
        # give it all back, and stop the project's rollups for good).
        recent = [item for item in due if item[0] >= now - LATE_AFTER]
        older = sorted(item for item in due if item[0] < now - LATE_AFTER)[:BACKLOG_BUCKETS_PER_RUN]
        due = recent + older
    return claim.take(sorted(pk for _, pk in due))


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
        claim = _Claim(project_id)
        try:
            buckets = _claim_changed_buckets(project_id, now, everything, claim)
            written = _recompute_buckets(project_id, buckets, oldest, fine_since, now)
        except BaseException:  # an error, or Celery's soft time limit: the next run does them
            claim.release()
            raise
        claim.done()
        tool_health_after_rollups(project_id=project_id, now=now)  # the agents' feed (docs/contract/tool-health.md)
        return written


def _recompute_buckets(project_id, buckets, oldest: dt.datetime, fine_since: dt.datetime, now: dt.datetime) -> int:
    written = 0
    if connection.vendor == "postgresql":
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
            written += sql.recompute_fine(project_id=project_id, start=start, end=end, computed_at=now)[0]
        buckets += [bucket for bucket in earlier if bucket < fine_since]
    for start, end in hour_ranges(floor_time(bucket, 3600) for bucket in buckets):
        if end > oldest:
            written += rollups_recompute(project_id=project_id, start=max(start, oldest), end=end, fine_since=now - FINE_HORIZON)
    return written


def _recompute_fine_range(project_id: int, start: dt.datetime, end: dt.datetime, now: dt.datetime) -> tuple[int, set[dt.datetime]]:
    """sql.recompute_fine over [start, end), shared out by tool between RANGE_WORKERS
    connections when the range holds more than PARALLEL_CALLS calls."""
    # Other connections see only what is committed: not inside an open transaction.
    busy = not connection.in_atomic_block and _holds_more_than(project_id, start, end, PARALLEL_CALLS)
    shares = _tool_shares(project_id, start, end) if busy else []
    if len(shares) < 2:
        return sql.recompute_fine(project_id=project_id, start=start, end=end, computed_at=now)

    def one_share(tools: sql.ToolSet) -> tuple[int, set[dt.datetime]]:
        try:
            return sql.recompute_fine(project_id=project_id, start=start, end=end, tools=tools)
        finally:
            connections.close_all()  # this thread's connection

    with ThreadPoolExecutor(max_workers=len(shares)) as pool:
        results = list(pool.map(one_share, shares))
    with connection.cursor() as cursor:  # every tool's rows are in: the buckets are done
        sql.record_buckets(cursor, project_id, start, end, now)
    return sum(rows for rows, _ in results), set().union(*(earlier for _, earlier in results))


def _holds_more_than(project_id: int, start: dt.datetime, end: dt.datetime, calls: int) -> bool:
    in_range = ToolCall.objects.filter(project_id=project_id, start_time__gte=start, start_time__lt=end)
    return in_range.values("pk")[: calls + 1].count() > calls


def _tool_shares(project_id: int, start: dt.datetime, end: dt.datetime) -> list:
    """RANGE_WORKERS sets of tools with about as many calls each, by the last hour's rollups
    before the range: the last set takes every tool not in the others (new ones too)."""
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
    return [sql.ToolSet(tools) for tools in named] + [sql.ToolSet(taken, others=True)]


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
            if self.held and connection.pg_version >= 140000:
                # The lock ends with the session. A worker killed mid-statement leaves its server
                # process running that statement to its end; with this it gives up within a
                # couple of seconds of finding its client gone, and the next run can take over.
                cursor.execute("SET client_connection_check_interval = '2s'")
        return self.held

    def __exit__(self, *exc) -> None:
        if self.held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_NAMESPACE, self.project_id])
