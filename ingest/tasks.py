"""Thin Celery tasks of the write side."""

from celery import shared_task
from django.utils import timezone

from ingest import partitions
from ingest.retention import retention_apply


@shared_task(ignore_result=True)
def create_partitions_ahead(days: int = 7) -> None:
    partitions.create_ahead(timezone.now().date(), days_ahead=days)


@shared_task(ignore_result=True)
def apply_retention() -> None:
    retention_apply(now=timezone.now())
