"""Thin Celery tasks: they take ids and call one service. Safe to run twice (recomputes).

Crash safety (docs/operations.md#crash-safety): a task whose worker dies is requeued
(acks_late, reject_on_worker_lost), and its work is never only in the broker: the rollup
queue is the ingest.ChangedBucket rows (claimed with a lease, dequeued only once their
rows are written), and the next minute's fan-out reaches every project that still has
some. The fan-outs give each task an expiry: a task that waited (or was requeued) past it
is dropped, since the next fan-out does the same work on fresher data.
"""

import datetime as dt

from celery import shared_task
from django.utils import timezone

from dashboard.alerting import evaluation

# Alert delivery tasks live beside their service; importing them registers them with the worker.
from dashboard.alerting.tasks import send_delivery, send_due_deliveries  # noqa: F401
from dashboard.rollups import refresh
from ingest.models import Project

ROLLUPS_EXPIRE = 50  # seconds: the fan-out runs every minute
DRIFT_EXPIRES = 840  # the evaluation runs every 15 minutes


@shared_task(ignore_result=True)
def refresh_rollups() -> None:
    """Fan out: one refresh per project whose tool calls changed (or whose claims a dead run left)."""
    for project_id in refresh.projects_with_changes():
        refresh_project_rollups.apply_async((project_id,), expires=ROLLUPS_EXPIRE)


@shared_task
def refresh_project_rollups(project_id: int) -> int | None:
    """Rows written, or None when another worker is already refreshing the project.

    Spans for past hours (a backfill) are then evaluated for those hours: read from the queue
    before the refresh dequeues it, run after it (docs/drift.md#past-hours)."""
    now = timezone.now()
    past = evaluation.backfilled_range(project_id=project_id, now=now)
    written = refresh.rollups_refresh(project_id=project_id, now=now)
    if written is not None and past is not None:
        evaluate_project_drift_range.delay(project_id, past[0].isoformat(), past[1].isoformat())
    return written


@shared_task(ignore_result=True)
def evaluate_project_drift_range(project_id: int, since: str, until: str) -> None:
    """Evaluate the hours in (since, until] (ISO 8601) as the job would have. Twice is harmless:
    what is already alerted is not alerted again (dashboard/alerting/evaluation.py)."""
    evaluation.drift_evaluate_range(
        project_id=project_id, since=dt.datetime.fromisoformat(since), until=dt.datetime.fromisoformat(until)
    )


@shared_task(ignore_result=True)
def prune_fine_rollups() -> None:
    refresh.rollups_prune_fine(now=timezone.now())


@shared_task(ignore_result=True)
def evaluate_drift() -> None:
    """Fan out: one drift evaluation per project, all judging the same moment."""
    now = timezone.now().isoformat()
    for project_id in Project.objects.values_list("pk", flat=True):
        evaluate_project_drift.apply_async((project_id, now), expires=DRIFT_EXPIRES)


@shared_task(ignore_result=True)
def evaluate_project_drift(project_id: int, now: str | None = None) -> None:
    """Judge the project at `now` (ISO 8601; the fan-out's moment, so a requeued run judges the
    same one), or at the present. Twice is harmless: one open alert per condition, one
    delivery per alert, channel and event (dashboard/alerting/lifecycle.py)."""
    moment = dt.datetime.fromisoformat(now) if now else timezone.now()
    evaluation.drift_evaluate(project_id=project_id, now=moment)
