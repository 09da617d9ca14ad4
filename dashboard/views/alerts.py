"""The alerts pages: the list, one alert with its evidence, and the actions people take on it."""

from __future__ import annotations

import dataclasses

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard import scoping
from dashboard.alerting.lifecycle import (
    MUTE_PERIOD_LABELS,
    MUTE_PERIODS,
    alert_user_acknowledge,
    alert_user_mute,
    alert_user_resolve,
)
from dashboard.charts.alerts import alert_evidence_figure
from dashboard.models import Alert
from dashboard.selectors.alerts import (
    ALERT_KINDS,
    EVAL_REGRESSION,
    STATUSES,
    AlertFilterError,
    AlertFilters,
    alert_deliveries,
    alert_for_project,
    alert_headline,
    alert_tools,
    alerts_for_project,
    evidence_of,
    kind_explanation,
    kind_label,
    opening_evidence_of,
    parse_alert_filters,
)
from dashboard.templatetags.toolwatch import pct
from dashboard.timerange import querystring
from dashboard.views.common import page_scope
from evals import selectors as eval_selectors

PAGE_SIZE = 50


def _url(name: str, *args) -> str:
    """A link, or "" when a stored value cannot be one (a tool name with a line break, an odd trace id)."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return ""


def _decorate(alert: Alert, slug: str) -> Alert:
    alert.kind_label = kind_label(alert.kind)
    alert.tool_url = _url("tool", slug, alert.tool)
    return alert


@login_required
def alerts_list(request, project):
    scope = page_scope(request, project)
    filter_error = ""
    try:
        filters = parse_alert_filters(request.GET)
    except AlertFilterError as exc:
        filter_error, filters = f"{exc.message}; showing every alert instead.", AlertFilters()
    page = Paginator(alerts_for_project(scope.project, filters), PAGE_SIZE).get_page(request.GET.get("page"))
    alerts = [_decorate(alert, scope.project.slug) for alert in page.object_list]
    context = scope.context(
        page=page,
        alerts=alerts,
        alert_filters=filters,
        filter_error=filter_error,
        statuses=STATUSES,
        kinds=[(kind, kind_label(kind)) for kind in ALERT_KINDS],
        tools=alert_tools(scope.project),
        # Pagination links keep the filters.
        filter_query=querystring(**filters.params()),
        now=timezone.now(),
    )
    return render(request, "dashboard/alerts.html", context)


def _history(alert: Alert) -> list[tuple]:
    label = (alert.evidence or {}).get("run_label") if isinstance(alert.evidence, dict) else None
    opener = f"Opened by eval run {label}" if alert.kind == EVAL_REGRESSION else "Opened by the drift evaluation"
    events = [(alert.opened_at, opener)]
    if alert.acknowledged_at:
        events.append((alert.acknowledged_at, f"Acknowledged by {alert.acknowledged_by or 'someone'}"))
    if alert.resolved_at:
        if alert.resolved_by == Alert.RESOLVED_AUTOMATICALLY:
            events.append((alert.resolved_at, "Resolved automatically: the condition cleared"))
        else:
            events.append((alert.resolved_at, f"Resolved by {alert.resolved_by or 'someone'}"))
    return sorted(events, key=lambda event: event[0])


# Statistics that are rates per call (or shares), shown as percentages like every other rate.
RATE_SUFFIXES = ("_rate", "_share")
RATE_NAMES = frozenset({"wasted_floor"})


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_percentages(rows, raw) -> list:
    raw = raw if isinstance(raw, dict) else {}
    return [
        dataclasses.replace(row, value=pct(raw[row.name]))
        if (row.name.endswith(RATE_SUFFIXES) or row.name in RATE_NAMES) and _is_number(raw.get(row.name))
        else row
        for row in rows
    ]


def _rates_as_percentages(evidence, alert: Alert):
    """The evidence with its rates as percentages (`pct`, dashboard/templatetags/toolwatch.py):
    the evaluation stores fractions (0.451), every page shows 45.1 %."""
    statistics = (alert.evidence or {}).get("statistics") if isinstance(alert.evidence, dict) else None
    statistics = statistics if isinstance(statistics, dict) else {}
    return dataclasses.replace(
        evidence,
        statistics=_as_percentages(evidence.statistics, statistics),
        thresholds=_as_percentages(evidence.thresholds, statistics.get("thresholds")),
    )


def _regressed_cases(project, eval_run: dict | None) -> list[dict]:
    """For an eval-regression alert: each regressed case with its result in the alert's run and
    its previous result (the one that passed), so the page can show what changed."""
    rows = []
    for entry in (eval_run or {}).get("cases", []):
        try:
            case = eval_selectors.case_get(project, entry["case_id"])
        except Http404:  # deleted since the run
            case = None
        results = eval_selectors.case_results(case, limit=20) if case else []
        now = next((result for result in results if result.run_id == eval_run["run_id"]), None)
        before = None
        if now is not None:
            older = [result for result in results if (result.run.started_at, result.run_id) < (now.run.started_at, now.run_id)]
            before = older[0] if older else None
        rows.append({
            **entry, "case": case, "now": now, "before": before,
            "expect": now.version.expect if now else None,
            "diff": _outcome_diff(before.observed if before else None, now.observed if now else None),
        })  # fmt: skip
    return rows


OUTCOME_FIELDS = (("ok", "succeeded"), ("error_class", "class"), ("message", "message"), ("next_action", "next action"),
                  ("classified_by", "classified by"))  # fmt: skip


def _outcome_diff(before, now) -> list[dict]:
    """What the tool did then and now, field by field (changed ones marked)."""
    before = before if isinstance(before, dict) else {}
    now = now if isinstance(now, dict) else {}
    diff = []
    for key, label in OUTCOME_FIELDS:
        then_value, now_value = before.get(key), now.get(key)
        if then_value is None and now_value is None:
            continue
        diff.append({"label": label, "before": then_value, "now": now_value, "changed": then_value != now_value})
    return diff


def _opening(alert: Alert):
    """The evidence of the evaluation that opened a drift alert, rates as percentages; None without one."""
    opening = opening_evidence_of(alert)
    if opening is None:
        return None
    statistics = opening.raw_statistics
    return dataclasses.replace(
        opening,
        statistics=_as_percentages(opening.statistics, statistics),
        thresholds=_as_percentages(opening.thresholds, statistics.get("thresholds")),
    )


@login_required
def alert_detail(request, project, pk):
    scope = page_scope(request, project)
    alert = _decorate(alert_for_project(scope.project, pk), scope.project.slug)
    evidence = _rates_as_percentages(evidence_of(alert), alert)
    is_eval = alert.kind == EVAL_REGRESSION
    # A drift alert leads with why it opened: its opening's sentence and chart (issue 15); the
    # latest evaluation's numbers come after, folded.
    opening = None if is_eval else _opening(alert)
    sampled = [*(opening.sample_trace_ids if opening else []), *evidence.sample_trace_ids]
    context = scope.context(
        alert=alert,
        kind_explanation=kind_explanation(alert.kind),
        evidence=evidence,
        # An eval regression has its own page shape (templates/dashboard/_alert_eval_regression.html):
        # the cases, the run, what changed; no hourly chart and no drift advice.
        is_eval_regression=is_eval,
        regressed_cases=_regressed_cases(scope.project, evidence.eval_run) if is_eval else [],
        figure=None if is_eval else alert_evidence_figure(opening or evidence, kind=alert.kind, tool=alert.tool),
        headline=alert.summary if is_eval else alert_headline(alert),
        opening=opening,
        latest_summary=(alert.evidence or {}).get("summary", "") if isinstance(alert.evidence, dict) else "",
        # Several sampled calls can share one trace: list each trace once, in the order sampled.
        samples=[(trace_id, _url("trace", scope.project.slug, trace_id)) for trace_id in dict.fromkeys(sampled)],
        deliveries=alert_deliveries(alert),
        history=_history(alert),
        is_muted=alert.is_muted(timezone.now()),
        mute_periods=MUTE_PERIOD_LABELS,
    )
    return render(request, "dashboard/alert.html", context)


# --- actions: POST only (CSRF-checked by Django), any member of the project ------------------


def _scoped_alert(request, project: str, pk: int) -> Alert:
    return alert_for_project(scoping.project_for_user(request.user, project), pk)


def _done(request, project: str, result):
    (messages.success if result.changed else messages.info)(request, result.message)
    return redirect("alert", project, result.alert.pk)


@login_required
@require_POST
def alert_acknowledge_view(request, project, pk):
    alert = _scoped_alert(request, project, pk)
    return _done(request, project, alert_user_acknowledge(alert=alert, user=request.user, now=timezone.now()))


@login_required
@require_POST
def alert_resolve_view(request, project, pk):
    alert = _scoped_alert(request, project, pk)
    return _done(request, project, alert_user_resolve(alert=alert, user=request.user, now=timezone.now()))


@login_required
@require_POST
def alert_mute_view(request, project, pk):
    alert = _scoped_alert(request, project, pk)
    period = request.POST.get("period", "")
    if period not in MUTE_PERIODS:
        choices = ", ".join(MUTE_PERIOD_LABELS.values())
        messages.error(request, f"Mute for how long? period={period!r} is not one of {choices}.")
        return redirect("alert", project, pk)
    now = timezone.now()
    result = alert_user_mute(alert=alert, user=request.user, until=now + MUTE_PERIODS[period], now=now)
    return _done(request, project, result)


@login_required
@require_POST
def alert_unmute_view(request, project, pk):
    alert = _scoped_alert(request, project, pk)
    return _done(request, project, alert_user_mute(alert=alert, user=request.user, until=None, now=timezone.now()))


urlpatterns = [
    path("p/<slug:project>/alerts/", alerts_list, name="alerts"),
    path("p/<slug:project>/alerts/<int:pk>/", alert_detail, name="alert"),
    path("p/<slug:project>/alerts/<int:pk>/acknowledge/", alert_acknowledge_view, name="alert-acknowledge"),
    path("p/<slug:project>/alerts/<int:pk>/resolve/", alert_resolve_view, name="alert-resolve"),
    path("p/<slug:project>/alerts/<int:pk>/mute/", alert_mute_view, name="alert-mute"),
    path("p/<slug:project>/alerts/<int:pk>/unmute/", alert_unmute_view, name="alert-unmute"),
]
