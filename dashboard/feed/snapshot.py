"""The tool-health feed's snapshot: computed from the rollups and open alerts, stored per project
(dashboard.ToolHealthSnapshot), served as stored (docs/contract/tool-health.md).

`tool_health_refresh` is called at the end of every rollup run of a project
(dashboard/rollups/refresh.py) and by `tool_health_current` when a project has no snapshot
yet or its snapshot is older than STALE_AFTER (a quiet project's rollups do not run, but
its window still moves). Four queries: the window's 5-minute totals, the baseline's hourly
totals, the open alerts, and the window's failed calls by class and field (for the
retry-after and the field to repair, which the rollups do not keep).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging

import orjson
from django.db import transaction
from django.db.models import Count, Max, Sum
from django.utils import timezone

from dashboard.drift import DEFAULT_THRESHOLDS
from dashboard.feed.state import Counts, Failures, tool_state
from dashboard.models import Alert, ToolHealthSnapshot, ToolRollup, ToolRollupTotal
from dashboard.rollups.rows import BUCKET, floor_time
from ingest import taxonomy
from ingest.models import Project, ToolCall

# The recent window: the newest three 5-minute buckets, the filling one included.
WINDOW_BUCKETS = 3
# A snapshot older than this is recomputed on the next request.
STALE_AFTER = dt.timedelta(minutes=5)
# What the view tells clients to cache for: a rollup run refreshes the snapshot every minute at most.
MAX_AGE_S = 30
_COUNTS = ("calls", "errors", "retries", "wasted_retries")

logger = logging.getLogger(__name__)


def feed_window(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """Pure: [start, end) of the recent window at `now`, bucket-aligned (its newest bucket still filling)."""
    end = floor_time(now, int(BUCKET.total_seconds())) + BUCKET
    return end - WINDOW_BUCKETS * BUCKET, end


def baseline_window(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """Pure: the drift detectors' baseline at `now`: `baseline_hours` ending `guard_hours` before
    the hour (docs/contract/drift-and-alerts.md#drift-kinds)."""
    end = floor_time(now, 3600) - dt.timedelta(hours=DEFAULT_THRESHOLDS.guard_hours)
    return end - dt.timedelta(hours=DEFAULT_THRESHOLDS.baseline_hours), end


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _rates(counts: Counts) -> dict:
    return {
        "calls": counts.calls,
        "error_rate": counts.rate("errors"),
        "retry_rate": counts.rate("retries"),
        "wasted_retry_rate": counts.rate("wasted_retries"),
    }


def tool_health_compute(*, project: Project, now: dt.datetime) -> dict:
    """The feed document of a project at `now` (see docs/contract/tool-health.md#the-document)."""
    start, end = feed_window(now)
    base_start, base_end = baseline_window(now)
    err_fields = [f"err_{name}" for name in taxonomy.ERROR_CLASSES]
    recent = {
        row["tool"]: row
        for row in ToolRollupTotal.objects.filter(
            project=project, resolution=ToolRollup.Resolution.FIVE_MINUTES, bucket_start__gte=start, bucket_start__lt=end
        )
        .values("tool")
        .annotate(**{name: Sum(name) for name in (*_COUNTS, *err_fields)})
        .order_by()
    }
    baseline = {
        row["tool"]: row
        for row in ToolRollupTotal.objects.filter(
            project=project, resolution=ToolRollup.Resolution.HOUR, bucket_start__gte=base_start, bucket_start__lt=base_end
        )
        .values("tool")
        .annotate(**{name: Sum(name) for name in _COUNTS})
        .order_by()
    }
    alerts: dict[str, list[dict]] = {}
    for alert in (
        Alert.objects.filter(project=project, status__in=Alert.OPEN_STATUSES)
        .only("id", "tool", "kind", "status", "opened_at", "muted_until", "summary")
        .order_by("opened_at", "id")
    ):
        alerts.setdefault(alert.tool, []).append({
            "id": alert.pk, "kind": alert.kind, "status": alert.status, "opened_at": _iso(alert.opened_at),
            "muted": bool(alert.muted_until and alert.muted_until > now), "summary": alert.summary,
        })  # fmt: skip
    # Failed attempts by tool, class and field: the dominant class (of the attempts: a failure a
    # retry recovered still tells the controller what to expect), the most named field and the
    # longest stated retry-after. The rollups keep none of these per attempt.
    attempts: dict[str, dict[str, int]] = {}
    fields: dict[str, dict[str, int]] = {}
    retry_after: dict[str, int] = {}
    for row in (
        ToolCall.objects.filter(project=project, ok=False, start_time__gte=start, start_time__lt=end)
        .values("tool", "error_class", "field")
        .annotate(n=Count("pk"), retry_after_ms=Max("retry_after_ms"))
        .order_by()
    ):
        cls = row["error_class"] or taxonomy.UNKNOWN
        attempts.setdefault(row["tool"], {})[cls] = attempts.get(row["tool"], {}).get(cls, 0) + row["n"]
        if row["error_class"] == taxonomy.VALIDATION and row["field"]:
            named = fields.setdefault(row["tool"], {})
            named[row["field"]] = named.get(row["field"], 0) + row["n"]
        if row["error_class"] == taxonomy.TRANSIENT and row["retry_after_ms"] is not None:
            retry_after[row["tool"]] = max(retry_after.get(row["tool"], 0), row["retry_after_ms"])

    tools = []
    for tool in sorted({*recent, *baseline, *alerts}):
        row, base = recent.get(tool, {}), baseline.get(tool, {})
        recent_counts = Counts(**{name: row.get(name) or 0 for name in _COUNTS})
        base_counts = Counts(**{name: base.get(name) or 0 for name in _COUNTS})
        by_class = {name: row.get(f"err_{name}") or 0 for name in taxonomy.ERROR_CLASSES}
        named = fields.get(tool, {})
        failures = Failures(
            by_class=attempts.get(tool, {}),
            field=max(sorted(named), key=named.get) if named else "",
            retry_after_ms=retry_after.get(tool),
        )
        tool_alerts = alerts.get(tool, [])
        health = tool_state(recent=recent_counts, baseline=base_counts, open_alert_kinds=[a["kind"] for a in tool_alerts],
                            failures=failures)  # fmt: skip
        next_action = None
        if health.next_action:
            next_action = {
                "action": health.next_action, "description": taxonomy.NEXT_ACTIONS[health.next_action],
                "retry_after_s": health.retry_after_s, "field": health.field,
            }  # fmt: skip
        tools.append({
            "tool": tool, "state": health.state, "reason": health.reason,
            **_rates(recent_counts), "errors": recent_counts.errors,
            "errors_by_class": {name: count for name, count in by_class.items() if count},
            "failed_attempts_by_class": dict(sorted(failures.by_class.items())),
            "baseline": _rates(base_counts),
            "dominant_class": health.dominant_class, "next_action": next_action,
            "open_alerts": tool_alerts,
        })  # fmt: skip
    return {
        "project": project.slug,
        "as_of": _iso(now),
        "window_start": _iso(start),
        "window_end": _iso(end),
        "baseline_start": _iso(base_start),
        "baseline_end": _iso(base_end),
        "tools": tools,
    }


def encode(document: dict) -> tuple[bytes, str]:
    """Pure: the document's bytes as served, and their strong ETag (quoted)."""
    body = orjson.dumps(document)
    return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def tool_health_refresh(*, project_id: int, now: dt.datetime | None = None) -> ToolHealthSnapshot:
    """Recompute and store the project's snapshot; returns it. Idempotent (a rerun replaces it)."""
    now = now or timezone.now()
    project = Project.objects.get(pk=project_id)
    body, etag = encode(tool_health_compute(project=project, now=now))
    snapshot, _ = ToolHealthSnapshot.objects.update_or_create(
        project_id=project_id, defaults={"payload": body.decode(), "etag": etag, "computed_at": now}
    )
    return snapshot


def tool_health_after_rollups(*, project_id: int, now: dt.datetime) -> None:
    """tool_health_refresh at the end of a rollup run: a failure is logged, never the run's (the
    rollups are committed; the next request recomputes a stale snapshot anyway)."""
    try:
        with transaction.atomic():  # a savepoint inside a caller's transaction: a failure leaves it usable
            tool_health_refresh(project_id=project_id, now=now)
    except Exception:
        logger.exception("tool-health snapshot of project %s not refreshed", project_id)


def tool_health_current(*, project: Project, now: dt.datetime | None = None) -> ToolHealthSnapshot:
    """The project's snapshot, computed first when there is none or it is older than STALE_AFTER."""
    now = now or timezone.now()
    snapshot = ToolHealthSnapshot.objects.filter(project_id=project.pk).first()
    if snapshot is None or now - snapshot.computed_at > STALE_AFTER:
        snapshot = tool_health_refresh(project_id=project.pk, now=now)
    return snapshot


def snapshot_etag(*, user, slug: str, now: dt.datetime | None = None) -> tuple[int, str] | None:
    """(project id, ETag) of the fresh snapshot of the project with this slug if the user may see
    it, in one query that leaves the payload unread (an unchanged poll is a 304); None when there
    is no such project, no snapshot, or it is stale (the caller then goes the long way)."""
    if not user.is_authenticated:
        return None
    rows = ToolHealthSnapshot.objects.filter(project__slug=slug)
    if not user.is_superuser:
        rows = rows.filter(project__members=user)
    head = rows.values_list("project_id", "etag", "computed_at").first()
    if head is None or (now or timezone.now()) - head[2] > STALE_AFTER:
        return None
    return head[0], head[1]


def snapshot_head(*, project_id: int) -> tuple[str, dt.datetime] | None:
    """(ETag, computed_at) of the project's stored snapshot, the payload unread; None when there is
    none. The fast path's version check (dashboard/feed/fast.py): one indexed read a second."""
    return ToolHealthSnapshot.objects.filter(project_id=project_id).values_list("etag", "computed_at").first()


def tool_entry(snapshot: ToolHealthSnapshot, tool: str) -> dict:
    """Pure over the stored document: one tool's feed entry with the window around it; a tool
    the snapshot does not know (no calls in the window or the baseline, no open alert) is `unknown`."""
    document = orjson.loads(snapshot.payload)
    entry = next((t for t in document.pop("tools") if t["tool"] == tool), None)
    if entry is None:
        none = {"calls": 0, "error_rate": None, "retry_rate": None, "wasted_retry_rate": None}
        entry = {
            "tool": tool, "state": "unknown", "reason": "no calls of this tool in the window or the baseline",
            **none, "errors": 0, "errors_by_class": {}, "failed_attempts_by_class": {}, "baseline": none,
            "dominant_class": None,
            "next_action": None, "open_alerts": [],
        }  # fmt: skip
    return {**document, **entry}
