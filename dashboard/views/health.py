"""The ingest health page: what arrived over the range, what was turned away and why, the project's keys."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import path

from dashboard.charts.health import OUTCOME_NAMES, ingest_health_figure
from dashboard.selectors.health import api_keys_for_project, has_received_anything, health_step, ingest_health
from dashboard.views.common import page_scope, step_label


@login_required
def health(request, project):
    scope = page_scope(request, project)
    start, end = scope.time_range.start, scope.time_range.end
    report = ingest_health(scope.project, start, end, step=health_step(start, end))
    context = scope.context(
        health=report,
        step_label=step_label(report.step),
        totals=[(OUTCOME_NAMES[outcome], outcome, count) for outcome, count in report.totals.items()],
        figure=None if report.is_empty else ingest_health_figure(report),
        # Only asked when the range is empty: "nothing yet" and "nothing lately" need different advice.
        ever_received=not report.is_empty or has_received_anything(scope.project),
        api_keys=api_keys_for_project(scope.project),
        endpoint=request.build_absolute_uri("/v1/traces"),
        base_url=request.build_absolute_uri("/").rstrip("/"),
        dimensions={},
    )
    return render(request, "dashboard/health.html", context)


urlpatterns = [
    path("p/<slug:project>/health/", health, name="health"),
]
