"""Thin Celery tasks for alert delivery: they take ids and call one service.

Both are safe to run twice: `delivery_send` claims a delivery before sending it. Their hard
time limit is far below the claim's lease (delivery.CLAIM_LEASE, 5 min), so a send still
running is never claimed again; past the soft limit the send is logged as a failed try and
retried (the transports' own timeouts are seconds).
"""

from celery import shared_task
from django.utils import timezone

from dashboard.alerting import delivery

SOFT_TIME_LIMIT = 60
TIME_LIMIT = 90
# A sweep's fan-out waiting longer than this is dropped: the next sweep (a minute later) sends the same ids.
FAN_OUT_EXPIRES = 50


@shared_task(ignore_result=True, soft_time_limit=SOFT_TIME_LIMIT, time_limit=TIME_LIMIT)
def send_delivery(delivery_id: int) -> None:
    """Try one delivery now (queued after commit when an alert opens or resolves)."""
    delivery.delivery_send(delivery_id=delivery_id, now=timezone.now())


@shared_task(ignore_result=True, soft_time_limit=SOFT_TIME_LIMIT, time_limit=TIME_LIMIT)
def send_due_deliveries() -> None:
    """Fan out: one task per delivery that is due (retries, and any whose task was lost)."""
    for delivery_id in delivery.deliveries_due(now=timezone.now()):
        send_delivery.apply_async((delivery_id,), expires=FAN_OUT_EXPIRES)
