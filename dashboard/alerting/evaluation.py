"""The scheduled drift evaluation: rollups -> pure detectors -> the alert lifecycle.

Per project, one query reads every tool's hourly counts over the detectors' lookback;
each tool with traffic (or an open alert) is judged by `dashboard.drift.detect`, and
every finding that fires, or that concerns an open alert, goes to
`alerts.alert_apply_finding`, with its evidence: the statistics, the windows, the hourly
rates for the chart and sample trace ids.

The job runs every 15 minutes (docs/drift.md: a step then has 2 h of data by its 2 h
deadline, wherever in the hour it starts). On the hour the windows are whole hours; at
:15, :30 and :45 a second query reads the 5-minute rollups of the last hours, and the
recent windows end at `now` floored to 5 minutes. Baselines always come from the hourly
rollups.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from django.db.models import Q, Sum

from dashboard import drift
from dashboard.alerting.lifecycle import alert_apply_finding
from dashboard.models import Alert, ToolRollup
from dashboard.rollups.rows import floor_time
from ingest.models import Project, ToolCall

HOUR = dt.timedelta(hours=1)
CHART_HOURS = 72  # hours of rates kept in an alert's evidence for its chart
SAMPLE_TRACES = 5


def thresholds_for(project: Project, tool: str) -> drift.Thresholds:
    """Defaults, then the project's "*" overrides, then the tool's own."""
    overrides = project.drift_thresholds or {}
    return drift.Thresholds.from_overrides(overrides.get("*")).with_overrides(overrides.get(tool))


def hourly_series(
    project: Project, start: dt.datetime, end: dt.datetime, *, resolution: int = ToolRollup.Resolution.HOUR
) -> dict[str, list[drift.Bucket]]:
    """Every tool's buckets of `resolution` (hourly by default; 300 for the 5-minute ones) in [start, end)."""
    rows = (
        ToolRollup.objects.filter(project=project, resolution=resolution, bucket_start__gte=start, bucket_start__lt=end)
        .values("tool", "bucket_start")
        .annotate(
            calls=Sum("calls"), errors=Sum("errors"), retries=Sum("retries"),
            escalations=Sum("escalations"), wasted_retries=Sum("wasted_retries"), failed_retries=Sum("failed_retries"),
        )  # fmt: skip
        .order_by("tool", "bucket_start")
    )
    series: dict[str, list[drift.Bucket]] = defaultdict(list)
    for row in rows:
        series[row["tool"]].append(
            drift.Bucket(
                start=row["bucket_start"], calls=row["calls"], errors=row["errors"], retries=row["retries"],
                escalations=row["escalations"], wasted_retries=row["wasted_retries"],
                failed_retries=row["failed_retries"],
            )  # fmt: skip
        )
    return series


def _sample_traces(project: Project, tool: str, since: dt.datetime) -> list[str]:
    query = ToolCall.objects.filter(project=project, tool=tool, start_time__gte=since).filter(
        Q(ok=False) | Q(attempt__gt=1) | Q(resend_count__gte=1)
    )
    return list(query.order_by("-start_time").values_list("trace_id", flat=True).distinct()[:SAMPLE_TRACES])


def _chart(buckets: list[drift.Bucket], since: dt.datetime) -> list[dict]:
    return [
        {
            "start": bucket.start.isoformat(), "calls": bucket.calls,
            "error_rate": bucket.errors / bucket.calls if bucket.calls else None,
            "retry_rate": bucket.retries / bucket.calls if bucket.calls else None,
            "escalation_rate": bucket.escalations / bucket.calls if bucket.calls else None,
        }  # fmt: skip
        for bucket in buckets
        if bucket.start >= since
    ]


def drift_evaluate(*, project_id: int, now: dt.datetime) -> int:
    """Judge every tool of a project at `now`; returns how many findings reached an alert."""
    project = Project.objects.get(pk=project_id)
    end = floor_time(now, 3600)
    fine_end = floor_time(now, 300)
    open_alerts: dict[str, dict[str, dt.datetime]] = defaultdict(dict)
    for tool, kind, opened_at in Alert.objects.filter(project=project, status__in=Alert.OPEN_STATUSES).values_list(
        "tool", "kind", "opened_at"
    ):
        open_alerts[tool][kind] = opened_at
    # An open alert is judged against the baseline before it opened: read back that far.
    configured = [thresholds_for(project, tool) for tool in ["*", *(project.drift_thresholds or {})]]
    history = max(th.history_hours for th in configured)
    earliest = min([end, *(floor_time(at, 3600) for kinds in open_alerts.values() for at in kinds.values())])
    series = hourly_series(project, earliest - history * HOUR, end)
    fine: dict[str, list[drift.Bucket]] | None = None
    if fine_end > end:
        # Off the hour: the recent windows (the longest plus the confirmations) from the
        # 5-minute rollups, so they end at `now` instead of up to 59 minutes before it.
        recent = max(th.guard_hours + th.confirm_hours for th in configured)
        fine = hourly_series(project, end - recent * HOUR, fine_end, resolution=ToolRollup.Resolution.FIVE_MINUTES)
    applied = 0
    for tool in sorted(series.keys() | open_alerts.keys()):
        opened = open_alerts.get(tool, {})
        findings = drift.detect(
            series.get(tool, []), now, thresholds_for(project, tool), open_kinds=frozenset(opened), opened_at=opened,
            fine_series=None if fine is None else fine.get(tool, []),
        )  # fmt: skip
        for finding in findings:
            if not finding.firing and finding.kind not in opened:
                continue
            evidence = {
                "statistics": finding.statistics,
                "recent": [moment.isoformat() for moment in finding.recent],
                "baseline": [moment.isoformat() for moment in finding.baseline],
                "hourly": _chart(series.get(tool, []), end - CHART_HOURS * HOUR),
                "sample_trace_ids": _sample_traces(project, tool, finding.recent[0]) if finding.firing else [],
            }
            alert_apply_finding(
                project=project, tool=tool, kind=finding.kind, firing=finding.firing,
                evidence=evidence, summary=finding.summary, now=now,
            )  # fmt: skip
            applied += 1
    return applied
