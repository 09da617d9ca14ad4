"""A real Celery worker SIGKILLed in the middle of a rollup on PostgreSQL loses nothing
(issue 14 item 1): its claimed buckets stay queued, and the next run writes exactly the rows
an uninterrupted run writes.

The calls are generated in SQL (bench/rollup.py's generator, queuing their buckets as ingest
does) in three clusters far enough apart to be three ranges, three transactions: the worker
is killed once the first range's rows are committed and the claims are still there, which
the test watches for in the database, not by sleeping. Two ways to die:
- solo: the whole worker process (a container's OOM kill, `kill -9`); the task stays
  unacknowledged in Redis and a new worker's run (what beat sends every minute) takes over;
- prefork: the pool process running the task (the OOM killer's usual pick); the worker
  requeues the task (task_reject_on_worker_lost) and runs it again by itself.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import time

import pytest
from celery.exceptions import TimeoutError as CeleryTimeout
from django.db import connection

from bench.rollup import _WINDOW_START, call_params, generation_sql
from dashboard.models import RolledUpBucket, ToolRollup, ToolRollupTotal
from dashboard.rollups.refresh import rollups_refresh
from dashboard.rollups.rows import floor_time
from dashboard.tasks import refresh_project_rollups
from ingest.models import ChangedBucket
from ingest.partitions import ensure_partitions
from tests.dashboard.rollups.test_rollups import rollup_rows
from tests.factories import make_project
from tests.integration.conftest import children, send, wait_for

# Calls per cluster: enough that a range takes a second or more on this machine's two cores.
CLUSTER_CALLS = 30_000
# Minutes before now (floored to 5): settled buckets within the last two hours, all due at once;
# gaps over RANGE_GAP (15 min), so each cluster is a range of its own.
CLUSTERS = ((100, 10), (70, 10), (40, 10))


def store_calls(project) -> list[dt.datetime]:
    """The clusters' calls, with their buckets queued; returns the queued buckets."""
    now = floor_time(dt.datetime.now(dt.UTC), 300)
    ensure_partitions({(now - dt.timedelta(hours=3)).date(), now.date()})
    statement = generation_sql(12, _WINDOW_START, mark_changed_buckets=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.25)")
        for n, (ago, minutes) in enumerate(CLUSTERS):
            params = call_params(rows=CLUSTER_CALLS, project_id=project.pk, ns=f"kill{n}", seed=n,
                                 window_start=now - dt.timedelta(minutes=ago), window_seconds=minutes * 60 - 30)  # fmt: skip
            cursor.execute(statement, params)
        cursor.execute("ANALYZE ingest_toolcall")
    return sorted(ChangedBucket.objects.filter(project=project).values_list("bucket_start", flat=True))


def killed_mid_run(project, buckets: int) -> bool:
    """Some rows committed, every bucket still queued and claimed: the run is under way."""
    return (
        ToolRollupTotal.objects.filter(project=project).exists()
        and ChangedBucket.objects.filter(project=project, claimed_at__isnull=False).count() == buckets
    )


def result_of(sent, timeout: float):
    try:
        return sent.get(timeout=timeout)
    except CeleryTimeout:
        return "timed out"


def next_runs_until_done(project, timeout: float = 40) -> None:
    """Runs of the job (beat's, every minute, played faster) until the queue is empty; a run that
    finds the project still locked (the dead run's server process finishing) returns None."""
    deadline = time.monotonic() + timeout
    while ChangedBucket.objects.filter(project=project).exists():
        assert time.monotonic() < deadline, "the queue was not emptied"
        result_of(send(refresh_project_rollups, project.pk), timeout=30)
        time.sleep(0.2)


@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_a_worker_killed_mid_rollup_loses_nothing_and_the_next_run_writes_an_uninterrupted_runs_rows(processes, pool):
    project = make_project()
    buckets = store_calls(project)
    worker = processes.worker(f"doomed-{pool}", pool=pool)
    processes.wait_ready(worker)

    sent = send(refresh_project_rollups, project.pk)
    wait_for(lambda: killed_mid_run(project, len(buckets)), timeout=60, what="the rollup to be under way")
    if pool == "solo":
        processes.kill(worker)
    else:
        (pool_process,) = children(worker.pid)
        os.kill(pool_process, signal.SIGKILL)
    written_at_kill = ToolRollupTotal.objects.filter(project=project).count()

    # Nothing was lost: every bucket is still queued.
    assert sorted(ChangedBucket.objects.filter(project=project).values_list("bucket_start", flat=True)) == buckets
    if pool == "solo":
        successor = processes.worker("successor")
        processes.wait_ready(successor)
    else:
        # The worker requeued the task (task_reject_on_worker_lost) and ran it again: it ends
        # with a result, not WorkerLostError. None: the dead run's server process still held
        # the project's lock (it gives up within seconds, client_connection_check_interval).
        assert result_of(sent, timeout=60) != "timed out"
    next_runs_until_done(project)
    resumed = rollup_rows(project)
    assert 0 < written_at_kill < ToolRollupTotal.objects.filter(project=project).count()

    # An uninterrupted run on the same calls, in this process.
    for model in (ToolRollup, ToolRollupTotal, RolledUpBucket):
        model.objects.filter(project=project).delete()
    ChangedBucket.objects.bulk_create([ChangedBucket(project=project, bucket_start=bucket) for bucket in buckets])
    assert rollups_refresh(project_id=project.pk) > 0
    assert not ChangedBucket.objects.filter(project=project).exists()
    assert resumed == rollup_rows(project) != []
