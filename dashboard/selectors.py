"""Read-side queries for the pages: every one is scoped to the projects a user belongs to."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from django.db.models import Sum

from dashboard import histograms
from dashboard.models import ERROR_CLASSES, ToolRollup
from dashboard.rollups import floor_time
from ingest.models import Project, ToolCall


def projects_for_user(user) -> list[Project]:
    if user.is_superuser:
        return list(Project.objects.all())
    return list(Project.objects.filter(members=user))


def project_summaries(projects: list[Project], since: dt.datetime) -> list[dict]:
    """Per project: logical calls and failed calls since a time, from hourly rollups, in one query."""
    ids = [project.pk for project in projects]
    totals = {
        row["project"]: row
        for row in ToolRollup.objects.filter(
            project__in=ids, resolution=ToolRollup.Resolution.HOUR, bucket_start__gte=floor_time(since, 3600)
        )
        .values("project")
        .annotate(calls=Sum("calls"), failed=Sum("errors"))
        .order_by()
    }
    return [
        {
            "project": project,
            "calls": totals.get(project.pk, {}).get("calls") or 0,
            "failed": totals.get(project.pk, {}).get("failed") or 0,
        }
        for project in projects
    ]


def recent_failed_calls(projects: list[Project], limit: int = 25) -> list[ToolCall]:
    return list(
        ToolCall.objects.filter(project__in=[p.pk for p in projects], ok=False)
        .select_related("project")
        .only(
            "project__name", "trace_id", "span_id", "start_time", "tool", "error_class", "classified_by",
            "message", "service", "agent", "soft_failure",
        )
        .order_by("-start_time")[:limit]
    )  # fmt: skip


# --- rollup reads: series and the tools table ------------------------------------------------

COUNT_FIELDS = (
    "calls", "attempts", "retries", "failed_retries", "wasted_retries", "blind_retries", "errors", "resolved",
    "escalations", *(f"err_{name}" for name in ERROR_CLASSES),
)  # fmt: skip
# Charts stay readable (and small) at about this many points, whatever the range.
TARGET_POINTS = 120
BUCKET_STEPS = (300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400)


def bucket_seconds_for(start: dt.datetime, end: dt.datetime) -> int:
    """The smallest step that keeps a range within TARGET_POINTS points."""
    span = (end - start).total_seconds()
    for step in BUCKET_STEPS:
        if span / step <= TARGET_POINTS:
            return step
    return BUCKET_STEPS[-1]


def _resolution_for(step: int) -> int:
    return ToolRollup.Resolution.FIVE_MINUTES if step < 3600 else ToolRollup.Resolution.HOUR


def _with_rates(point: dict) -> dict:
    calls = point["calls"]
    for name, part in (("error_rate", "errors"), ("retry_rate", "retries"), ("escalation_rate", "escalations"),
                       ("resolution_rate", "resolved"), ("attempts_per_call", "attempts")):  # fmt: skip
        point[name] = point[part] / calls if calls else None
    return point


def _rollups(project: Project, start, end, resolution: int, filters: dict):
    query = ToolRollup.objects.filter(
        project=project, resolution=resolution, bucket_start__gte=start, bucket_start__lt=end
    )
    allowed = {"tool", "service", "environment", "agent"}
    unknown = set(filters) - allowed
    if unknown:
        raise ValueError(f"unknown filter(s): {', '.join(sorted(unknown))}; use {', '.join(sorted(allowed))}")
    return query.filter(**{name: value for name, value in filters.items() if value})


def metric_series(project: Project, *, start: dt.datetime, end: dt.datetime, step: int | None = None, **filters) -> list[dict]:
    """Counts and rates per step over [start, end), every step present (zeros where quiet)."""
    step = step or bucket_seconds_for(start, end)
    resolution = _resolution_for(step)
    first = floor_time(start, step)
    rows = (
        _rollups(project, first, end, resolution, filters)
        .values("bucket_start")
        .annotate(**{name: Sum(name) for name in COUNT_FIELDS})
        .order_by("bucket_start")
    )
    points: dict[dt.datetime, dict] = {}
    moment = first
    while moment < end:
        points[moment] = {"start": moment, **dict.fromkeys(COUNT_FIELDS, 0)}
        moment += dt.timedelta(seconds=step)
    for row in rows:
        point = points.get(floor_time(row["bucket_start"], step))
        if point is not None:
            for name in COUNT_FIELDS:
                point[name] += row[name] or 0
    return [_with_rates(point) for point in points.values()]


def tools_table(project: Project, *, start: dt.datetime, end: dt.datetime, **filters) -> list[dict]:
    """One row per tool over [start, end): counts, rates, p50/p95/p99 latency, contract score."""
    resolution = _resolution_for(bucket_seconds_for(start, end))
    query = _rollups(project, floor_time(start, resolution), end, resolution, filters)
    totals = {
        row["tool"]: row
        for row in query.values("tool").annotate(**{name: Sum(name) for name in COUNT_FIELDS}).order_by()
    }
    hists: dict[str, list] = defaultdict(list)
    contracts: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for tool, hist, contract in query.values_list("tool", "latency_hist", "contract").iterator(chunk_size=2000):
        hists[tool].append(hist)
        for check, (passed, applicable) in contract.items():
            counts = contracts[tool].setdefault(check, [0, 0])
            counts[0] += passed
            counts[1] += applicable
    table = []
    for tool, row in sorted(totals.items()):
        merged = histograms.merge(hists[tool])
        checks = contracts[tool]
        applicable = sum(counts[1] for counts in checks.values())
        table.append(
            _with_rates({
                **{name: row[name] or 0 for name in COUNT_FIELDS}, "tool": tool,
                "p50_ms": histograms.quantile(merged, 0.5), "p95_ms": histograms.quantile(merged, 0.95),
                "p99_ms": histograms.quantile(merged, 0.99),
                "contract_score": sum(counts[0] for counts in checks.values()) / applicable if applicable else None,
                "contract_checks": {check: counts[0] / counts[1] for check, counts in sorted(checks.items())},
            })  # fmt: skip
        )
    return table
