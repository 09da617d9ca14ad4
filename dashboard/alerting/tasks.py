"""Thin Celery tasks for alert delivery: they take ids and call one service.

Both are safe to run twice: `delivery_send` claims a delivery before sending it.
"""

from celery import shared_task
from django.utils import timezone

from dashboard.alerting import delivery


@shared_task(ignore_result=True)
def send_delivery(delivery_id: int) -> None:
    """Try one delivery now (queued after commit when an alert opens or resolves)."""
    delivery.delivery_send(delivery_id=delivery_id, now=timezone.now())


@shared_task(ignore_result=True)
def send_due_deliveries() -> None:
    """Fan out: one task per delivery that is due (retries, and any whose task was lost)."""
    for delivery_id in delivery.deliveries_due(now=timezone.now()):
        send_delivery.delay(delivery_id)
