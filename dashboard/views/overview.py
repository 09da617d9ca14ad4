"""Home, the project overview and the tool page: parse the URL, call the selectors, render."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import path
from django.utils import timezone

from dashboard import scoping
from dashboard.charts.tools import (
    RATE_LABELS,
    classes_figure,
    latency_figure,
    rate_figure,
    sparkline_path,
    trend_figure,
    volume_figure,
)
from dashboard.selectors.tools import (
    DEFAULT_SORT,
    SortError,
    baseline_bands,
    dimension_choices,
    open_alerts,
    parse_sort,
    project_summaries,
    sort_rows,
    tool_alerts,
    tool_baseline_hours,
    tool_detail,
    tool_failed_calls,
    tools_overview,
    top_fingerprints,
    totals_of,
)
from dashboard.views.common import page_scope, step_label
from evals.selectors import recurring_cases


@login_required
def home(request):
    projects = scoping.projects_for_user(request.user)
    if len(projects) == 1:
        return redirect("overview", projects[0].slug)
    now = timezone.now()
    summaries = project_summaries(projects, now - dt.timedelta(hours=24))
    for row in summaries:
        row["error_rate"] = row["failed"] / row["calls"] if row["calls"] else None
    return render(
        request, "dashboard/home.html", {"summaries": summaries, "any_calls": any(row["calls"] for row in summaries)}
    )


def _sort_headers(sort: str, scope) -> list[dict]:
    """Each column's header: its next ?sort= link (keeping range and filters) and its aria-sort."""
    current, descending = sort.lstrip("-"), sort.startswith("-")
    headers = []
    for column, label in OVERVIEW_COLUMNS:
        active = column == current
        # Names sort A→Z first; numbers sort largest first, which is what one looks for.
        flip = ("" if descending else "-") if active else ("" if column == "tool" else "-")
        headers.append({
            "column": column, "label": label, "numeric": column != "tool",
            "href": scope.querystring(sort=f"{flip}{column}"),
            "aria_sort": ("descending" if descending else "ascending") if active else "none",
        })  # fmt: skip
    return headers


OVERVIEW_COLUMNS = (
    ("tool", "Tool"), ("calls", "Calls"), ("error_rate", "Error rate"), ("retry_rate", "Retry rate"),
    ("escalation_rate", "Escalation rate"), ("wasted_retries", "Wasted retries"),
    ("contract_score", "Contract score"), ("p95_ms", "p95 latency"),
)  # fmt: skip


@login_required
def overview(request, project):
    scope = page_scope(request, project)
    time_range, filters = scope.time_range, scope.filters
    sort_error = ""
    try:
        sort = parse_sort(request.GET.get("sort"))
    except SortError as exc:
        sort_error, sort = str(exc), DEFAULT_SORT
    table = tools_overview(scope.project, start=time_range.start, end=time_range.end, **filters.as_kwargs())
    rows = sort_rows(table["rows"], sort)
    alerts = open_alerts(scope.project)
    if filters:
        # Alerts are per tool, over all its traffic: a filtered page lists those of the tools it shows.
        shown = {row["tool"] for row in rows}
        alerts = [alert for alert in alerts if alert.tool in shown]
    trend = table["trend"] if rows else []
    kinds_by_tool: dict[str, list[str]] = {}
    for alert in alerts:
        kinds_by_tool.setdefault(alert.tool, []).append(alert.kind)
    for row in rows:
        row["spark_path"] = sparkline_path(row["sparkline"])
        row["drift"] = sorted(set(kinds_by_tool.get(row["tool"], ())))
        rates = [value for value in row["sparkline"] if value is not None]
        row["spark_label"] = (
            f"error rate per {step_label(table['spark_step'])}: from {rates[0]:.1%} to {rates[-1]:.1%}, peak {max(rates):.1%}"
            if len(rates) > 1 else f"calls in one {step_label(table['spark_step'])} only" if rates else "no calls"
        )  # fmt: skip
    return render(
        request,
        "dashboard/overview.html",
        scope.context(
            title="Overview",
            totals=totals_of(rows),
            rows=rows,
            alerts=alerts,
            trend_figure=trend_figure(trend) if trend else None,
            step_label=step_label(table["spark_step"]),
            sort=sort,
            sort_error=sort_error,
            headers=_sort_headers(sort, scope),
            dimensions=dimension_choices(
                scope.project, start=time_range.start, end=time_range.end, selected=filters
            ),
            extra_params={"sort": sort} if sort != DEFAULT_SORT else {},
        ),
    )


@login_required
def tool(request, project, tool):
    tool = tool.replace("\x00", "\ufffd")  # as ingest stores a NUL: PostgreSQL text cannot hold one
    scope = page_scope(request, project)
    time_range, filters = scope.time_range, scope.filters
    window = {"start": time_range.start, "end": time_range.end, **filters.as_kwargs()}
    detail = tool_detail(scope.project, tool, **window)
    points = detail["points"]
    figures = {}
    if detail["has_calls"]:
        hourly = tool_baseline_hours(scope.project, tool, **window)
        bands = baseline_bands(hourly, points)
        figures = {
            **{
                f"fig-{metric.replace('_', '-')}": rate_figure(points, bands[metric], metric=metric, tool=tool)
                for metric in RATE_LABELS
            },
            "fig-volume": volume_figure(points, tool=tool),
            "fig-classes": classes_figure(points),
            "fig-latency": latency_figure(points),
        }
    return render(
        request,
        "dashboard/tool.html",
        scope.context(
            title=tool,
            tool=tool,
            detail=detail,
            totals=detail["totals"],
            step_label=step_label(detail["step"]),
            figures=figures,
            rate_charts=[(f"fig-{metric.replace('_', '-')}", label) for metric, label in RATE_LABELS.items()],
            fingerprints=top_fingerprints(scope.project, tool, **window) if figures else [],
            failed_calls=tool_failed_calls(scope.project, tool, **window) if figures else [],
            alerts=tool_alerts(scope.project, tool),
            # Pinned eval cases whose failure fingerprint came back in live traffic in this range.
            recurring_cases=recurring_cases(scope.project, tool=tool, since=time_range.start),
            dimensions=dimension_choices(
                scope.project, start=time_range.start, end=time_range.end, selected=filters
            ),
        ),
    )


urlpatterns = [
    path("p/<slug:project>/", overview, name="overview"),
    path("p/<slug:project>/tools/<path:tool>/", tool, name="tool"),
]
