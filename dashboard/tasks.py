"""Thin Celery tasks: they take ids and call one service. Safe to run twice (recomputes)."""

from celery import shared_task
from django.utils import timezone

from dashboard.alerting import evaluation

# Alert delivery tasks live beside their service; importing them registers them with the worker.
from dashboard.alerting.tasks import send_delivery, send_due_deliveries  # noqa: F401
from dashboard.rollups import refresh
from ingest.models import Project


@shared_task(ignore_result=True)
def refresh_rollups() -> None:
    """Fan out: one refresh per project whose tool calls changed."""
    for project_id in refresh.projects_with_changes():
        refresh_project_rollups.delay(project_id)


@shared_task
def refresh_project_rollups(project_id: int) -> int | None:
    """Rows written, or None when another worker is already refreshing the project."""
    return refresh.rollups_refresh(project_id=project_id)


@shared_task(ignore_result=True)
def prune_fine_rollups() -> None:
    refresh.rollups_prune_fine(now=timezone.now())


@shared_task(ignore_result=True)
def evaluate_drift() -> None:
    """Fan out: one drift evaluation per project."""
    for project_id in Project.objects.values_list("pk", flat=True):
        evaluate_project_drift.delay(project_id)


@shared_task(ignore_result=True)
def evaluate_project_drift(project_id: int) -> None:
    evaluation.drift_evaluate(project_id=project_id, now=timezone.now())
