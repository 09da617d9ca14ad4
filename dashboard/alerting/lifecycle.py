"""The alert lifecycle (docs/contract/drift-and-alerts.md): open → acknowledged → resolved, one open alert per condition.

Contract:
- A condition is (project, tool, kind). At most one of its alerts is open or acknowledged
  at a time; a partial unique constraint holds that even against concurrent evaluations.
- `alert_apply_finding` takes one detector finding as plain values:
  firing, no open alert  → open one, and queue an "opened" delivery per active channel;
  firing, open alert     → refresh its evidence, summary and last_seen_at; no delivery
                           (no flood while it stays open, acknowledged or not);
  not firing, open alert → resolve it (resolved_by "auto"), queue a "resolved" delivery;
  not firing, none open  → nothing.
- A muted alert (muted_until > now) keeps its lifecycle but its deliveries are skipped
  (and logged as such). A condition that reopens while its last alert's mute still runs
  inherits the mute: muting is how a person silences a flapping condition.
- Deliveries are sent after commit by `dashboard.alerting.tasks.send_delivery`; the
  scheduled `send_due_deliveries` also picks up any whose task was lost.
- Resolving by hand also announces it. If the condition still holds, the next evaluation
  opens a new alert: mute, rather than resolve, to silence a condition.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction

from dashboard.alerting.tasks import send_delivery
from dashboard.models import Alert, AlertChannel, Delivery

Status = Alert.Status


def alert_apply_finding(
    *, project, tool: str, kind: str, firing: bool, evidence: dict, summary: str, now: datetime
) -> Alert | None:
    """Apply one finding of (project, tool, kind) to its alerts; see the module contract.

    Returns the alert opened, refreshed or resolved, or None when nothing was open and the
    finding is quiet. `evidence` must be a JSON object (datetimes become ISO strings; NaN
    and infinities are refused with ValueError, as PostgreSQL's jsonb would refuse them).
    """
    with transaction.atomic():
        alert = (
            Alert.objects.select_for_update()
            .filter(project=project, tool=tool, kind=kind, status__in=Alert.OPEN_STATUSES)
            .first()
        )
        if not firing:
            if alert is None:
                return None
            resolved = Alert.objects.filter(id=alert.id, status__in=Alert.OPEN_STATUSES).update(
                status=Status.RESOLVED, resolved_at=now, resolved_by=Alert.RESOLVED_AUTOMATICALLY
            )
            alert.refresh_from_db()
            if resolved:
                _queue_deliveries(alert, event=Delivery.Event.RESOLVED, now=now)
            return alert

        evidence = _json_object(evidence)
        if alert is not None:
            _refresh(alert, evidence=evidence, summary=summary, now=now)
            return alert
        try:
            with transaction.atomic():  # a savepoint: a lost race must not spoil the outer transaction
                alert = Alert.objects.create(
                    project=project,
                    tool=tool,
                    kind=kind,
                    status=Status.OPEN,
                    opened_at=now,
                    last_seen_at=now,
                    summary=summary,
                    evidence=evidence,
                    opening_evidence=evidence,  # kept as it was (docs/contract/drift-and-alerts.md#evidence)
                    muted_until=_inherited_mute(project=project, tool=tool, kind=kind, now=now),
                )
        except IntegrityError:
            # A concurrent evaluation opened it first (the partial unique constraint): join it.
            alert = Alert.objects.select_for_update().get(
                project=project, tool=tool, kind=kind, status__in=Alert.OPEN_STATUSES
            )
            _refresh(alert, evidence=evidence, summary=summary, now=now)
            return alert
        _queue_deliveries(alert, event=Delivery.Event.OPENED, now=now)
        return alert


def alert_record_past(
    *, project, tool: str, kind: str, opened_at: datetime, resolved_at: datetime, evidence: dict, summary: str
) -> Alert:
    """Record an alert that opened and resolved in the past (a range evaluation of backfilled
    hours, dashboard/alerting/evaluation.py): resolved automatically, with no notices, since
    it is over. The caller has checked that no alert of the condition covers that time."""
    evidence = _json_object(evidence)
    return Alert.objects.create(
        project=project, tool=tool, kind=kind, status=Status.RESOLVED, opened_at=opened_at, last_seen_at=resolved_at,
        resolved_at=resolved_at, resolved_by=Alert.RESOLVED_AUTOMATICALLY, summary=summary, evidence=evidence,
        opening_evidence=evidence,
    )  # fmt: skip


def alert_acknowledge(*, alert: Alert, user, now: datetime) -> Alert:
    """Open → acknowledged, recording who and when. No effect on any other status."""
    Alert.objects.filter(id=alert.id, status=Status.OPEN).update(
        status=Status.ACKNOWLEDGED, acknowledged_at=now, acknowledged_by=user.get_username()
    )
    alert.refresh_from_db()
    return alert


def alert_resolve(*, alert: Alert, user, now: datetime) -> Alert:
    """Resolve by hand (open or acknowledged → resolved) and announce it. No effect if resolved."""
    with transaction.atomic():
        resolved = Alert.objects.filter(id=alert.id, status__in=Alert.OPEN_STATUSES).update(
            status=Status.RESOLVED, resolved_at=now, resolved_by=user.get_username()
        )
        alert.refresh_from_db()
        if resolved:
            _queue_deliveries(alert, event=Delivery.Event.RESOLVED, now=now)
    return alert


def alert_mute(*, alert: Alert, until: datetime | None) -> Alert:
    """Skip the alert's deliveries until `until` (None unmutes). The lifecycle goes on."""
    Alert.objects.filter(id=alert.id).update(muted_until=until)
    alert.muted_until = until
    return alert


def _refresh(alert: Alert, *, evidence: dict, summary: str, now: datetime) -> None:
    alert.evidence, alert.summary, alert.last_seen_at = evidence, summary, now
    alert.save(update_fields=["evidence", "summary", "last_seen_at"])


def _json_object(evidence) -> dict:
    if not isinstance(evidence, dict):
        raise ValueError(f"evidence must be a dict, not {type(evidence).__name__}")
    try:
        # Round-trip, so the alert in hand holds exactly what the database will give back.
        return json.loads(json.dumps(evidence, cls=DjangoJSONEncoder, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"evidence is not JSON: {exc}") from None


def _inherited_mute(*, project, tool: str, kind: str, now: datetime) -> datetime | None:
    return (
        Alert.objects.filter(project=project, tool=tool, kind=kind, muted_until__gt=now)
        .order_by("-muted_until")
        .values_list("muted_until", flat=True)
        .first()
    )


def _queue_deliveries(alert: Alert, *, event: str, now: datetime) -> list[Delivery]:
    """One delivery per active channel of the project; pending ones are sent after commit.

    Deliveries that cannot go out (muted alert, failing channel) are written as skipped,
    with the reason: the log answers "why was I not told?". One delivery per (alert, channel,
    event), however often this is reached: every caller holds the alert's row lock (the
    transition's UPDATE or select_for_update), so the check below cannot race.
    """
    deliveries = []
    queued = set(Delivery.objects.filter(alert=alert, event=event).values_list("channel_id", flat=True))
    for channel in AlertChannel.objects.filter(project_id=alert.project_id, is_active=True).order_by("id"):
        if channel.id in queued:
            continue
        if alert.is_muted(now):
            status, reason = Delivery.Status.SKIPPED, f"alert muted until {alert.muted_until.isoformat()}"
        elif channel.failing_since is not None:
            since = channel.failing_since.isoformat()
            status, reason = Delivery.Status.SKIPPED, f"channel failing since {since}: {channel.last_error}"
        else:
            status, reason = Delivery.Status.PENDING, ""
        delivery = Delivery.objects.create(
            alert=alert,
            channel=channel,
            event=event,
            status=status,
            last_error=reason,
            next_attempt_at=now if status == Delivery.Status.PENDING else None,
            created_at=now,
        )
        if status == Delivery.Status.PENDING:
            # robust: a broker hiccup must not fail the caller; the scheduled sweep sends it.
            transaction.on_commit(partial(send_delivery.delay, delivery.id), robust=True)
        deliveries.append(delivery)
    return deliveries


# --- what a person does to an alert from the pages or the API ------------------------------
# Each returns an ActionResult whose message says what happened, or why nothing did (an
# action that does not apply, e.g. resolving a resolved alert, is a no-op, not an error).

MUTE_PERIODS = {
    "1h": timedelta(hours=1),
    "8h": timedelta(hours=8),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
}
MUTE_PERIOD_LABELS = {"1h": "1 hour", "8h": "8 hours", "24h": "24 hours", "7d": "7 days"}
MAX_MUTE = timedelta(days=90)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ActionResult:
    alert: Alert
    changed: bool
    message: str


def _when(moment: datetime | None) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if moment else "an unknown time"


def alert_user_acknowledge(*, alert: Alert, user, now: datetime) -> ActionResult:
    """`alert_acknowledge` by a person, saying whether it applied (only an open alert can be acknowledged)."""
    alert = alert_acknowledge(alert=alert, user=user, now=now)
    if alert.status == Status.ACKNOWLEDGED and alert.acknowledged_at == now:
        logger.info("alert %s acknowledged by %s", alert.pk, user.get_username())
        return ActionResult(alert, True, f"Alert #{alert.pk} acknowledged.")
    if alert.status == Status.ACKNOWLEDGED:
        by = alert.acknowledged_by or "someone"
        when = _when(alert.acknowledged_at)
        message = f"Alert #{alert.pk} was already acknowledged by {by} at {when}; nothing changed."
    else:
        message = f"Alert #{alert.pk} is resolved; there is nothing to acknowledge."
    return ActionResult(alert, False, message)


def alert_user_resolve(*, alert: Alert, user, now: datetime) -> ActionResult:
    """`alert_resolve` by a person, saying whether it applied (a resolved alert stays as it is)."""
    alert = alert_resolve(alert=alert, user=user, now=now)
    if alert.resolved_at == now and alert.resolved_by == user.get_username():
        logger.info("alert %s resolved by %s", alert.pk, user.get_username())
        return ActionResult(
            alert,
            True,
            f"Alert #{alert.pk} resolved. If the condition still holds, the next evaluation opens a new "
            "alert: mute it instead to silence the condition.",
        )
    if alert.resolved_by == Alert.RESOLVED_AUTOMATICALLY:
        by = "automatically"
    else:
        by = f"by {alert.resolved_by or 'someone'}"
    return ActionResult(
        alert, False, f"Alert #{alert.pk} was already resolved {by} at {_when(alert.resolved_at)}; nothing changed."
    )


def alert_user_mute(*, alert: Alert, user, until: datetime | None, now: datetime) -> ActionResult:
    """Mute until `until` (at most MAX_MUTE ahead), or unmute with None; raises ValueError for a time not ahead.

    There is no column for who muted, so the log records it.
    """
    if until is not None and until <= now:
        raise ValueError("the end of a mute must be in the future; unmute instead")
    if until is not None and until - now > MAX_MUTE:
        raise ValueError(f"an alert can be muted for at most {MAX_MUTE.days} days")
    if until is None and not alert.is_muted(now):
        return ActionResult(alert, False, f"Alert #{alert.pk} is not muted; nothing changed.")
    alert = alert_mute(alert=alert, until=until)
    logger.info("alert %s muted until %s by %s", alert.pk, until, user.get_username())
    if until is None:
        return ActionResult(alert, True, f"Alert #{alert.pk} unmuted: its messages will be sent again.")
    return ActionResult(alert, True, f"Alert #{alert.pk} muted until {_when(until)}: its messages are skipped.")
