"""Thin Celery tasks: they take ids and call one service. Safe to run twice (recomputes)."""

from celery import shared_task

from dashboard import rollups


@shared_task(ignore_result=True)
def refresh_rollups() -> None:
    """Fan out: one refresh per project whose tool calls changed."""
    for project_id in rollups.projects_with_changes():
        refresh_project_rollups.delay(project_id)


@shared_task
def refresh_project_rollups(project_id: int) -> int | None:
    """Rows written, or None when another worker is already refreshing the project."""
    return rollups.rollups_refresh(project_id=project_id)


# Alert delivery tasks live beside their service; importing them registers them with the worker.
from dashboard.tasks_alerts import send_delivery, send_due_deliveries  # noqa: E402, F401
