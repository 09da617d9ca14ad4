"""The rollup job's claims are leases (dashboard/rollups/refresh.py, issue 14 item 1): a run that
dies after claiming loses nothing, ingest re-queues a bucket a run has claimed, and a run
that fails gives its claims back.

A dead run is played in process: its recompute raises and its release is skipped, which
leaves the rows as SIGKILL would (tests/integration/test_worker_killed.py kills a real one).
"""

import datetime as dt
import threading

import pytest
from django.conf import settings
from django.db import connection, connections, transaction

from dashboard.rollups import refresh
from dashboard.rollups.refresh import rollups_refresh
from dashboard.rollups.rows import floor_time
from demo.quickstart import demo_request
from ingest import storage
from ingest.models import ChangedBucket
from ingest.services import spans_ingest
from tests.dashboard.rollups.test_rollups import NOW, ingest, rollup_rows
from tests.factories import make_project

pytestmark = pytest.mark.django_db


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs in the dead process."""


@pytest.fixture
def demo():
    return demo_request(seed=11, traces=60, hours=6, now_ns=int(NOW.timestamp()) * 10**9)


def die_mid_run(monkeypatch, project) -> None:
    """A run that claims, writes some rows, and dies before it can clean up."""
    real = refresh._recompute_buckets

    def recompute_then_die(project_id, buckets, *args):
        real(project_id, buckets[: len(buckets) // 2], *args)  # half the work committed
        raise Killed

    monkeypatch.setattr(refresh, "_recompute_buckets", recompute_then_die)
    monkeypatch.setattr(refresh._Claim, "release", lambda self: None)  # a killed process releases nothing
    with pytest.raises(Killed):
        rollups_refresh(project_id=project.pk, now=NOW, everything=True)
    monkeypatch.undo()


def queued(project) -> list[tuple]:
    return list(
        ChangedBucket.objects.filter(project=project).order_by("bucket_start").values_list("bucket_start", "claimed_by")
    )


def test_a_run_that_dies_after_claiming_leaves_its_buckets_queued_and_the_next_run_writes_the_same_rows(
    demo, monkeypatch
):
    killed, whole = make_project(), make_project()
    ingest(killed, demo)
    ingest(whole, demo)
    rollups_refresh(project_id=whole.pk, now=NOW, everything=True)
    buckets = len(queued(killed))

    die_mid_run(monkeypatch, killed)

    left = queued(killed)
    assert len(left) == buckets and all(by for _, by in left)  # every bucket still there, claimed
    if connection.vendor != "postgresql":  # SQLite: a claim is taken over once its lease ran out
        assert rollups_refresh(project_id=killed.pk, now=NOW, everything=True) == 0
        assert len(queued(killed)) == buckets
        ChangedBucket.objects.filter(project=killed).update(
            claimed_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=settings.ROLLUP_CLAIM_LEASE_SECONDS + 1)
        )
    # On PostgreSQL at once: the run holding the project's lock knows the claimant is gone.
    assert rollups_refresh(project_id=killed.pk, now=NOW, everything=True) > 0

    assert queued(killed) == []
    assert rollup_rows(killed) == rollup_rows(whole) != []


def test_a_failing_run_gives_its_claims_back_at_once(demo, monkeypatch):
    project = make_project()
    ingest(project, demo)
    before = queued(project)

    def fail(*args):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(refresh, "_recompute_buckets", fail)
    with pytest.raises(RuntimeError):
        rollups_refresh(project_id=project.pk, now=NOW, everything=True)

    assert queued(project) == before and all(by == "" for _, by in before)
    assert not ChangedBucket.objects.filter(project=project, claimed_at__isnull=False).exists()


def test_calls_stored_in_a_claimed_bucket_requeue_it_and_the_claimants_delete_leaves_it(demo, monkeypatch):
    project = make_project()
    ingest(project, demo)
    late = demo_request(seed=12, traces=2, hours=1, now_ns=int(NOW.timestamp()) * 10**9)
    real = refresh._recompute_buckets

    def recompute_while_more_calls_arrive(project_id, buckets, *args):
        written = real(project_id, buckets, *args)
        # Ingest marks buckets this run has claimed (and read) before the run dequeues them.
        spans_ingest(project=project, request=late, limits=settings.INGEST_LIMITS, now=NOW)
        return written

    claimed = {start for start, _ in queued(project)}
    monkeypatch.setattr(refresh, "_recompute_buckets", recompute_while_more_calls_arrive)
    rollups_refresh(project_id=project.pk, now=NOW, everything=True)
    monkeypatch.undo()

    scratch = make_project()
    ingest(scratch, late)
    marked = {start for start, _ in queued(scratch)}
    assert marked & claimed  # some of the new calls fell in buckets the run had claimed
    assert queued(project) == [(start, "") for start in sorted(marked)]  # those stay queued, unclaimed

    rollups_refresh(project_id=project.pk, now=NOW, everything=True)
    again = make_project()
    ingest(again, demo)
    ingest(again, late)
    rollups_refresh(project_id=again.pk, now=NOW, everything=True)
    assert queued(project) == [] and rollup_rows(project) == rollup_rows(again)


def test_marking_gathers_a_requests_buckets_into_one_statement_at_the_end(django_assert_num_queries):
    project = make_project()
    bucket = 1_790_000_000 * 10**9 // storage.BUCKET_NS

    with django_assert_num_queries(1), storage.changed_buckets_marked_last():
        storage.mark_changed_buckets(project.pk, {bucket + 2, bucket})
        storage.mark_changed_buckets(project.pk, {bucket + 1})

    assert ChangedBucket.objects.filter(project=project).count() == 3

    with pytest.raises(ZeroDivisionError), storage.changed_buckets_marked_last():
        storage.mark_changed_buckets(project.pk, {bucket + 3})
        raise ZeroDivisionError  # the write failed
    assert ChangedBucket.objects.filter(project=project).count() == 3  # nothing marked for a failed write


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_run_skips_a_bucket_an_uncommitted_ingest_transaction_is_marking():
    """The calls of an ingest transaction still open are invisible to the run: it must not take
    (and dequeue) the bucket they are in, as it would with ON CONFLICT DO NOTHING."""
    project = make_project()
    now = dt.datetime.now(dt.UTC)
    bucket = floor_time(now - dt.timedelta(minutes=30), 300)
    other = bucket - dt.timedelta(minutes=5)
    ChangedBucket.objects.bulk_create([ChangedBucket(project=project, bucket_start=b) for b in (bucket, other)])
    marking, release = threading.Event(), threading.Event()

    def ingest_transaction():
        try:
            with transaction.atomic():
                storage.mark_changed_buckets(project.pk, {int(bucket.timestamp()) * 10**9 // storage.BUCKET_NS})
                marking.set()
                release.wait(10)
        finally:
            connections.close_all()

    writer = threading.Thread(target=ingest_transaction)
    writer.start()
    try:
        assert marking.wait(10)
        rollups_refresh(project_id=project.pk, now=now)
        assert [start for start, _ in queued(project)] == [bucket]  # skipped, still queued
    finally:
        release.set()
        writer.join()
    rollups_refresh(project_id=project.pk, now=now)
    assert queued(project) == []


def test_a_late_backlog_is_drained_a_slice_a_run_and_live_buckets_are_never_held_back(monkeypatch):
    monkeypatch.setattr(refresh, "BACKLOG_BUCKETS_PER_RUN", 5)
    project = make_project()
    now = floor_time(NOW, 3600)  # on a late-buckets minute (LATE_EVERY divides the hour)
    late = [now - dt.timedelta(days=1) + n * refresh.BUCKET for n in range(12)]
    live = now - dt.timedelta(minutes=30)
    ChangedBucket.objects.bulk_create([ChangedBucket(project=project, bucket_start=start) for start in [*late, live]])

    rollups_refresh(project_id=project.pk, now=now)
    left = sorted(ChangedBucket.objects.filter(project=project).values_list("bucket_start", flat=True))
    assert left == late[5:], "the live bucket and the five oldest late ones were done"

    rollups_refresh(project_id=project.pk, now=now)
    rollups_refresh(project_id=project.pk, now=now)
    assert not ChangedBucket.objects.filter(project=project).exists()
