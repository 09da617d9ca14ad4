"""Sending alert deliveries: claim, send through the channel's transport, log, retry.

Contract:
- `delivery_send(delivery_id=, now=)` tries one delivery once, if it is due. It first
  claims the row with a conditional UPDATE (pending and due → sending) that must change
  exactly one row, so two workers handed the same id (a redelivered task, the scheduled
  sweep racing the on-commit task) send it once. The claim is a lease: a "sending" row
  whose lease ran out (its worker died mid-send) is due again. The lease (CLAIM_LEASE)
  outlasts the delivery task's hard time limit, so a live send is never claimed twice, and
  a try's outcome is written only while the claim is still the writer's own.
- A try's log row and its outcome are written in one transaction right after the send, so
  a notice is sent twice only when a worker dies between the receiver's answer and that
  commit. Delivery is therefore at least once; webhook receivers dedupe on `delivery_id`
  (the X-Toolwatch-Delivery header). One delivery per (alert, channel, event).
- Every try is a DeliveryAttempt row. A transient error is retried after RETRY_DELAYS
  (30 s, 2 min, 10 min, 1 h, 1 h: six tries over about 2 h 15 min). A permanent error, or
  the sixth transient one, fails the delivery and marks the channel failing
  (`failing_since`, `last_error`).
- A failing or disabled channel gets no tries: its deliveries are skipped, with the
  reason in `last_error`, until `channel_reenable` or a successful `channel_send_test`.
  A muted alert's deliveries are skipped too, and so is an "opened" notice whose alert
  was resolved meanwhile (the "resolved" notice says it all).
- No HTTP or SMTP call runs inside a database transaction.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import DateTimeField, F, Q, Value
from django.db.models.functions import Coalesce

from dashboard.alerting.transports import TransportError, notice_build, transport_for
from dashboard.models import AlertChannel, Delivery, DeliveryAttempt

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
# The wait after the 1st, 2nd, … failed try (one fewer than MAX_ATTEMPTS).
RETRY_DELAYS = (
    timedelta(seconds=30),
    timedelta(minutes=2),
    timedelta(minutes=10),
    timedelta(hours=1),
    timedelta(hours=1),
)
# Far longer than any send can take (5 s timeouts), and than the delivery task's hard time
# limit (dashboard/alerting/tasks.py): a claim older than this is a dead worker's.
CLAIM_LEASE = timedelta(minutes=5)
DUE_BATCH = 500

Status = Delivery.Status


def deliveries_due(*, now: datetime, limit: int = DUE_BATCH) -> list[int]:
    """Ids of the deliveries to try now, oldest first: pending and due, or abandoned mid-send."""
    return list(
        Delivery.objects.filter(status__in=[Status.PENDING, Status.SENDING], next_attempt_at__lte=now)
        .order_by("next_attempt_at", "id")
        .values_list("id", flat=True)[:limit]
    )


def delivery_send(*, delivery_id: int, now: datetime) -> str | None:
    """Try one delivery once. Returns its new status, or None when there was nothing to do
    (already sent, not due yet, or claimed by another worker)."""
    lease = now + CLAIM_LEASE  # the claim's end, and its mark: a later claimant's differs
    claimed = Delivery.objects.filter(
        Q(status=Status.PENDING) | Q(status=Status.SENDING), id=delivery_id, next_attempt_at__lte=now
    ).update(status=Status.SENDING, next_attempt_at=lease)
    if claimed != 1:
        return None
    delivery = (
        Delivery.objects.select_related("channel__project", "alert")
        .filter(id=delivery_id)
        .first()
    )
    if delivery is None:  # its alert or channel was deleted just now
        return None

    reason = _skip_reason(delivery, now)
    if reason:
        _claimed(delivery, lease).update(status=Status.SKIPPED, last_error=reason, next_attempt_at=None)
        logger.info("delivery %s skipped: %s", delivery.id, reason)
        return Status.SKIPPED
    sent_at = DeliveryAttempt.objects.filter(delivery=delivery, ok=True).values_list("at", flat=True).first()
    if sent_at is not None:
        # Sent already, by a worker whose claim ran out before it recorded the outcome (or by
        # a version that logged the try and its outcome apart): record it, do not send again.
        _claimed(delivery, lease).update(status=Status.SENT, next_attempt_at=None, sent_at=sent_at)
        return Status.SENT

    ok, error, code, duration_ms = _attempt(delivery, now)
    if ok:
        status, next_at, failing = Status.SENT, None, False
    elif error.permanent or delivery.attempts + 1 >= MAX_ATTEMPTS:
        status, next_at, failing = Status.FAILED, None, True
    else:
        status, next_at, failing = Status.PENDING, now + RETRY_DELAYS[delivery.attempts], False
    with transaction.atomic():  # the try's log row and its outcome together, at once
        _log_attempt(delivery, ok=ok, error=error, code=code, now=now, duration_ms=duration_ms)
        if not _finish(delivery, status=status, error=error, code=code, now=now, next_attempt_at=next_at, lease=lease):
            # Our lease ran out mid-send and another worker claimed it: its outcome stands.
            logger.warning("delivery %s: claim lost during the send; the try is logged, its outcome not recorded",
                           delivery.id)  # fmt: skip
            return None
        if failing:
            why = error.message if error.permanent else f"{MAX_ATTEMPTS} tries failed, the last: {error.message}"
            _mark_failing(delivery.channel, error=why, now=now)
    if ok:
        logger.info("delivery %s sent to channel %s", delivery.id, delivery.channel_id)
    else:
        logger.warning(
            "delivery %s to channel %s: %s (%s)", delivery.id, delivery.channel_id, error.message,
            "channel marked failing" if failing else f"retry at {next_at:%H:%M:%S}",
        )  # fmt: skip
    return status


def channel_send_test(*, channel: AlertChannel, now: datetime) -> tuple[bool, str]:
    """Send a test message now, whatever the channel's state, and say how it went.

    Logged like any delivery (event "test", never retried). Success clears the failing mark.
    """
    delivery = Delivery.objects.create(
        channel=channel, event=Delivery.Event.TEST, status=Status.SENDING, created_at=now
    )
    delivery.channel = channel
    ok, error, code, duration_ms = _attempt(delivery, now)
    with transaction.atomic():
        status = Status.SENT if ok else Status.FAILED
        _log_attempt(delivery, ok=ok, error=error, code=code, now=now, duration_ms=duration_ms)
        _finish(delivery, status=status, error=error, code=code, now=now, next_attempt_at=None)
        if ok:
            AlertChannel.objects.filter(id=channel.id).update(failing_since=None)
            channel.failing_since = None
    if ok:
        return True, "Test message sent" + (f" (HTTP {code})." if code else ".")
    return False, error.message


def channel_reenable(*, channel: AlertChannel) -> None:
    """Clear the failing mark (and enable the channel): new deliveries go out again.
    Deliveries skipped meanwhile stay skipped: they are old news."""
    AlertChannel.objects.filter(id=channel.id).update(failing_since=None, is_active=True)
    channel.failing_since, channel.is_active = None, True


def _skip_reason(delivery: Delivery, now: datetime) -> str:
    channel, alert = delivery.channel, delivery.alert
    if not channel.is_active:
        return "channel disabled"
    if channel.failing_since is not None:
        return f"channel failing since {channel.failing_since.isoformat()}: {channel.last_error}"
    if alert is not None:
        if alert.is_muted(now):
            return f"alert muted until {alert.muted_until.isoformat()}"
        if delivery.event == Delivery.Event.OPENED and not alert.is_open:
            return "alert already resolved"
    return ""


def _attempt(delivery: Delivery, now: datetime) -> tuple[bool, TransportError | None, int | None, int]:
    """One try through the transport: ok, the error, the response code, and how long it took (ms)."""
    started = time.monotonic()
    error: TransportError | None = None
    code: int | None = None
    try:
        code = transport_for(delivery.channel).notify(notice_build(delivery=delivery, now=now))
    except TransportError as exc:
        error, code = exc, exc.response_code
    except Exception as exc:  # a bug in formatting must be logged and retried, not lose the alert
        logger.exception("delivery %s: unexpected error", delivery.id)
        error = TransportError(f"internal error: {exc.__class__.__name__}: {exc}", False)
    return error is None, error, code, round((time.monotonic() - started) * 1000)


def _log_attempt(delivery: Delivery, *, ok: bool, error: TransportError | None, code: int | None, now: datetime,
                 duration_ms: int) -> None:  # fmt: skip
    DeliveryAttempt.objects.create(
        delivery=delivery, at=now, ok=ok, error=error.message if error else "", response_code=code, duration_ms=duration_ms
    )


def _claimed(delivery: Delivery, lease: datetime):
    """The delivery, while it is still claimed by the claim that ends at `lease`."""
    return Delivery.objects.filter(id=delivery.id, status=Status.SENDING, next_attempt_at=lease)


def _finish(delivery: Delivery, *, status: str, error: TransportError | None, code: int | None, now: datetime,
            next_attempt_at: datetime | None, lease: datetime | None = None) -> bool:  # fmt: skip
    """Record a try's outcome; with `lease`, only while that claim holds (False when it was lost)."""
    changes = {
        "status": status, "response_code": code, "last_error": error.message if error else "",
        "next_attempt_at": next_attempt_at, **({"sent_at": now} if status == Status.SENT else {}),
    }  # fmt: skip
    rows = _claimed(delivery, lease) if lease is not None else Delivery.objects.filter(id=delivery.id)
    if rows.update(attempts=F("attempts") + 1, **changes) != 1:
        return False
    delivery.attempts += 1
    for name, value in changes.items():
        setattr(delivery, name, value)
    return True


def _mark_failing(channel: AlertChannel, *, error: str, now: datetime) -> None:
    # Coalesce keeps the first failure's time when another delivery already marked it.
    AlertChannel.objects.filter(id=channel.id).update(
        failing_since=Coalesce("failing_since", Value(now, output_field=DateTimeField())), last_error=error
    )
    channel.refresh_from_db(fields=["failing_since", "last_error"])
