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

An alert keeps the evidence of the evaluation that opened it (`Alert.opening_evidence`) beside
the latest one's, and its summary is the sentence of the opening (dashboard/alerting/explain.py).
Its chart points cover the whole baseline and the recent windows, one per hour, gaps as None.

Past hours (`drift_evaluate_range`): spans that arrive for hours the job has already judged (a
backfill, an importer, a Collector catching up) are evaluated for those hours, after the
rollup refresh that reads them (`backfilled_range`, dashboard/tasks.py) or by
`manage.py evaluate_drift --since --until`, the way the job would have judged them: every 15
minutes on the 5-minute rollups where they are kept (FINE_HORIZON, 3 days), hourly before that.
Alerts open at the quarter hour they would have opened and nothing already alerted is alerted
again.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from django.db.models import Max, Min, Q, Sum
from django.utils import timezone

from dashboard import drift
from dashboard.alerting.explain import alert_sentence
from dashboard.alerting.lifecycle import alert_apply_finding, alert_record_past
from dashboard.models import Alert, ToolRollup
from dashboard.rollups.rows import FINE_HORIZON, floor_time
from ingest.models import ChangedBucket, Project, ToolCall

HOUR = dt.timedelta(hours=1)
# An alert's chart spans at least this many hours, and always its whole baseline (7 days by
# default): a chart that drew a week's baseline over 3 days of points showed 4 empty days.
CHART_HOURS = 72
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


def _sample_traces(project: Project, tool: str, since: dt.datetime, until: dt.datetime | None = None) -> list[str]:
    query = ToolCall.objects.filter(project=project, tool=tool, start_time__gte=since).filter(
        Q(ok=False) | Q(attempt__gt=1) | Q(resend_count__gte=1)
    )
    if until is not None:
        query = query.filter(start_time__lt=until)
    return list(query.order_by("-start_time").values_list("trace_id", flat=True).distinct()[:SAMPLE_TRACES])


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def chart_points(buckets: list[drift.Bucket], start: dt.datetime, end: dt.datetime) -> list[dict]:
    """One point per hour of [start, end): the whole baseline and the recent windows.

    An hour without a rollup row is a point without calls whose rates are None, so the
    chart breaks its lines there instead of drawing across the gap.
    """
    by_hour = {bucket.start: bucket for bucket in buckets if start <= bucket.start < end}
    points, hour = [], start
    while hour < end:
        bucket = by_hour.get(hour)
        calls = bucket.calls if bucket else 0
        points.append({
            "start": hour.isoformat(), "calls": calls,
            "error_rate": _share(bucket.errors, calls) if bucket else None,
            "retry_rate": _share(bucket.retries, calls) if bucket else None,
            # What retry_rise_flat_error tests: retries but the wasted ones (drift.py).
            "tested_retry_rate": _share(bucket.retries - bucket.wasted_retries, calls) if bucket else None,
            "wasted_rate": _share(bucket.wasted_retries, calls) if bucket else None,
            "escalation_rate": _share(bucket.escalations, calls) if bucket else None,
            "errors": bucket.errors if bucket else 0,
            "escalation_share": _share(bucket.escalations, bucket.errors) if bucket else None,
        })  # fmt: skip
        hour += HOUR
    return points


def finding_evidence(
    project: Project, tool: str, finding: drift.Finding, buckets: list[drift.Bucket], *, now: dt.datetime
) -> dict:
    """The evidence of one finding: its numbers, windows, chart points and sample traces.

    The chart covers the baseline's first hour to the end of the recent window, from the
    hourly rollups the detectors read (the ones the tool page reads too).
    """
    chart_end = floor_time(finding.recent[1] - dt.timedelta(microseconds=1), 3600) + HOUR
    return {
        "statistics": finding.statistics,
        "recent": [moment.isoformat() for moment in finding.recent],
        "baseline": [moment.isoformat() for moment in finding.baseline],
        "hourly": chart_points(buckets, min(finding.baseline[0], chart_end - CHART_HOURS * HOUR), chart_end),
        "sample_trace_ids": (
            _sample_traces(project, tool, finding.recent[0], finding.recent[1]) if finding.firing else []
        ),
        "summary": finding.summary,  # the detector's own line, with z and the window's state
        "evaluated_at": now.isoformat(),
    }


def drift_evaluate(*, project_id: int, now: dt.datetime) -> int:
    """Judge every tool of a project at `now`; returns how many findings reached an alert.

    An open alert's summary stays the sentence of the evaluation that opened it (its
    `opening_evidence`); the latest evaluation's own line is `evidence["summary"]`.
    """
    project = Project.objects.get(pk=project_id)
    end = floor_time(now, 3600)
    fine_end = floor_time(now, 300)
    open_alerts: dict[str, dict[str, dt.datetime]] = defaultdict(dict)
    opening: dict[tuple[str, str], tuple[dict, str]] = {}
    rows = Alert.objects.filter(project=project, status__in=Alert.OPEN_STATUSES).values_list(
        "tool", "kind", "opened_at", "opening_evidence", "summary"
    )
    for tool, kind, opened_at, opening_evidence, summary in rows:
        open_alerts[tool][kind] = opened_at
        opening[tool, kind] = (opening_evidence, summary)
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
            evidence = finding_evidence(project, tool, finding, series.get(tool, []), now=now)
            if (tool, finding.kind) in opening:
                opening_evidence, summary = opening[tool, finding.kind]
                summary = alert_sentence(kind=finding.kind, tool=tool, evidence=opening_evidence) or summary
            else:
                summary = alert_sentence(kind=finding.kind, tool=tool, evidence=evidence) or finding.summary
            alert_apply_finding(
                project=project, tool=tool, kind=finding.kind, firing=finding.firing,
                evidence=evidence, summary=summary, now=now,
            )  # fmt: skip
            applied += 1
    return applied


# --- past hours: backfills, importers, a Collector catching up -------------------------------

# Spans for buckets older than this are "for past hours": the job at `now` judges them only
# inside its baseline, never in a recent window, so they are evaluated for their own hours.
BACKFILL_AFTER = HOUR * 2
FOREVER = dt.datetime.max.replace(tzinfo=dt.UTC)  # the end of an episode still firing
QUARTER = dt.timedelta(minutes=15)  # the scheduled job's cadence (config/celery.py)


def drift_evaluate_range(
    *, project_id: int, since: dt.datetime, until: dt.datetime, now: dt.datetime | None = None
) -> list[Alert]:
    """Evaluate (since, until] (taken to hours) as the job would have; returns the alerts made.

    For data that arrived after its hours were judged. Every tool is replayed (`drift.replay`,
    carrying open kinds as the job does) every 15 minutes, the recent windows summed from the
    5-minute rollups, where those are still kept at `now` (the wall clock by default): from
    the first hour wholly inside FINE_HORIZON plus the recent windows' length. Before that it
    is replayed hourly, on whole hours (the refresh writes no 5-minute rows there and the
    nightly prune deletes them). Each episode is an alert opened at the evaluation it would
    have opened at (`opened_at` = that quarter hour; the job runs 3 minutes after it), unless
    an alert of the same (tool, kind) already covers part of it: what was alerted is not
    alerted again, so running a range twice changes nothing. An episode over by `until` is
    recorded resolved (when it would have resolved), with no notices: there is nothing left
    to act on. One still firing at `until` opens through the lifecycle, with its notices, and
    the job judges it from then on. docs/drift.md#past-hours.
    """
    project = Project.objects.get(pk=project_id)
    since, until = floor_time(since, 3600), floor_time(until, 3600)
    if until <= since:
        return []
    configured = [thresholds_for(project, tool) for tool in ["*", *(project.drift_thresholds or {})]]
    history = max(th.history_hours for th in configured)
    series = hourly_series(project, since - history * HOUR, until)
    # The 5-minute rollups the quarter-hour evaluations sum their recent windows from, in one
    # read for the range: a quarter hour needs the last `recent` hours of them (as the job reads).
    recent = max(th.guard_hours + th.confirm_hours for th in configured)
    kept = floor_time((now or timezone.now()) - FINE_HORIZON, 3600) + HOUR  # as dashboard/rollups/refresh.py
    fine_start = max(since - recent * HOUR, kept)
    fine_from = fine_start + recent * HOUR
    fine = (
        hourly_series(project, fine_start, until, resolution=ToolRollup.Resolution.FIVE_MINUTES)
        if fine_from < until else None
    )  # fmt: skip
    covered: dict[tuple[str, str], list[tuple[dt.datetime, dt.datetime | None]]] = defaultdict(list)
    for tool, kind, opened_at, resolved_at in Alert.objects.filter(project=project).values_list(
        "tool", "kind", "opened_at", "resolved_at"
    ):
        covered[tool, kind].append((opened_at, resolved_at))
    made = []
    for tool in sorted(series):
        buckets = series[tool]
        result = drift.replay(
            drift.HourlySeries(buckets), since, until, thresholds_for(project, tool),
            fine_series=None if fine is None else fine.get(tool, []), step=HOUR if fine is None else QUARTER,
            fine_from=fine_from,
        )  # fmt: skip
        for episode in result.episodes:
            if any(
                opened <= (episode.resolved or FOREVER) and (resolved is None or resolved >= episode.opened)
                for opened, resolved in covered[tool, episode.kind]
            ):
                continue
            evidence = finding_evidence(project, tool, episode.finding, buckets, now=episode.opened)
            summary = alert_sentence(kind=episode.kind, tool=tool, evidence=evidence) or episode.finding.summary
            if episode.resolved is None:
                alert = alert_apply_finding(
                    project=project, tool=tool, kind=episode.kind, firing=True, evidence=evidence,
                    summary=summary, now=episode.opened,
                )  # fmt: skip
            else:
                alert = alert_record_past(
                    project=project, tool=tool, kind=episode.kind, opened_at=episode.opened,
                    resolved_at=episode.resolved, evidence=evidence, summary=summary,
                )  # fmt: skip
            covered[tool, episode.kind].append((episode.opened, episode.resolved))
            made.append(alert)
    return made


def backfilled_range(*, project_id: int, now: dt.datetime) -> tuple[dt.datetime, dt.datetime] | None:
    """The hours to evaluate for the project's queued buckets that are for past hours, or None.

    Read before the rollup refresh dequeues them (dashboard/tasks.py): from the hour of the
    oldest such bucket to the last hour whose recent windows hold the newest (the longest
    window after it), but not past the last complete hour, which the scheduled job judges.
    """
    cutoff = floor_time(now, 300) - BACKFILL_AFTER
    span = ChangedBucket.objects.filter(project_id=project_id, bucket_start__lt=cutoff).aggregate(
        first=Min("bucket_start"), last=Max("bucket_start")
    )
    if span["first"] is None:
        return None
    project = Project.objects.get(pk=project_id)
    guard = max(thresholds_for(project, tool).guard_hours for tool in ["*", *(project.drift_thresholds or {})])
    since = floor_time(span["first"], 3600)
    until = min(floor_time(span["last"], 3600) + (guard + 1) * HOUR, floor_time(now, 3600) - HOUR)
    return (since, until) if until > since else None
