"""The alerts pages: the list, one alert with its evidence, and the actions people take on it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
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
    alert_tools,
    alerts_for_project,
    evidence_of,
    kind_explanation,
    kind_label,
    parse_alert_filters,
)
from dashboard.timerange import querystring
from dashboard.views.common import page_scope

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


@login_required
def alert_detail(request, project, pk):
    scope = page_scope(request, project)
    alert = _decorate(alert_for_project(scope.project, pk), scope.project.slug)
    evidence = evidence_of(alert)
    context = scope.context(
        alert=alert,
        kind_explanation=kind_explanation(alert.kind),
        evidence=evidence,
        figure=alert_evidence_figure(evidence, kind=alert.kind, tool=alert.tool),
        # Several sampled calls can share one trace: list each trace once, in the order sampled.
        samples=[
            (trace_id, _url("trace", scope.project.slug, trace_id)) for trace_id in dict.fromkeys(evidence.sample_trace_ids)
        ],
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
