"""The alert lifecycle (SPEC 6): open → acknowledged → resolved, one open alert per condition.

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
- Deliveries are sent after commit by `dashboard.tasks_alerts.send_delivery`; the
  scheduled `send_due_deliveries` also picks up any whose task was lost.
- Resolving by hand also announces it. If the condition still holds, the next evaluation
  opens a new alert: mute, rather than resolve, to silence a condition.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import partial

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction

from dashboard.models import Alert, AlertChannel, Delivery
from dashboard.tasks_alerts import send_delivery

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
    with the reason: the log answers "why was I not told?".
    """
    deliveries = []
    for channel in AlertChannel.objects.filter(project_id=alert.project_id, is_active=True).order_by("id"):
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
