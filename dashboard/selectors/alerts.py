"""Reads for the alerts pages and API: the list with its filters, one alert, its deliveries, its evidence.

Every query takes the project the caller was already scoped to (`dashboard.scoping`), so
an alert of another project is simply not found.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.shortcuts import get_object_or_404

from dashboard.alerting.explain import alert_sentence
from dashboard.alerting.transports import KIND_LABELS
from dashboard.drift import KINDS
from dashboard.models import Alert, Delivery
from ingest.models import Project

# One sentence per kind: what the detector saw, and what it usually means (docs/drift.md).
KIND_EXPLANATIONS = {
    "eval_regression": (
        "An eval case that passed in its previous run failed in the latest run: the bug it pins is back."
    ),
    "retry_rise_flat_error": (
        "Retries per call rose significantly while the error rate stayed flat: a dependency is "
        "degrading and the agent's retries are hiding it."
    ),
    "error_rate_spike": "Errors per call rose significantly above the baseline: calls of this tool are failing.",
    "wasted_retries": (
        "The agent retries failures of a permanent class (validation, permission, not found…) "
        "that cannot succeed on a retry."
    ),
    "escalation_silence": (
        "Escalations to a human fell to about zero while errors went on: failures are being "
        "absorbed instead of handed over."
    ),
}
STATUSES = tuple(Alert.Status.values)
# Drift kinds, plus the alert an eval run raises when a case that passed fails (evals.services).
EVAL_REGRESSION = "eval_regression"
ALERT_KINDS = (*KINDS, EVAL_REGRESSION)


def kind_label(kind: str) -> str:
    return KIND_LABELS.get(kind, kind)


def kind_explanation(kind: str) -> str:
    return KIND_EXPLANATIONS.get(kind, "A drift condition detected on this tool.")


# --- the list and its filters ------------------------------------------------------------


class AlertFilterError(ValueError):
    """A list filter that cannot be applied; `field` names the parameter, the message says why."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class AlertFilters:
    status: str = ""
    kind: str = ""
    tool: str = ""

    def params(self) -> dict[str, str]:
        return {name: value for name, value in vars(self).items() if value}

    def __bool__(self) -> bool:
        return bool(self.params())


def parse_alert_filters(params) -> AlertFilters:
    """?status=&kind=&tool= as filters (empty means any); raises AlertFilterError naming a bad one."""
    status = (params.get("status") or "").strip()
    kind = (params.get("kind") or "").strip()
    tool = (params.get("tool") or "").strip()[:256]
    if status and status not in STATUSES:
        raise AlertFilterError("status", f"status={status!r} is not one of {', '.join(STATUSES)}")
    if kind and kind not in ALERT_KINDS:
        raise AlertFilterError("kind", f"kind={kind!r} is not one of {', '.join(ALERT_KINDS)}")
    return AlertFilters(status=status, kind=kind, tool=tool)


def alerts_for_project(project: Project, filters: AlertFilters = AlertFilters()) -> QuerySet[Alert]:
    """Open and acknowledged alerts first, then resolved ones; newest first within each.

    A lazy queryset, so a paginator reads one page (and a count), never the whole history.
    The evidence JSON is deferred: a list never needs it, and it is the bulk of a row.
    """
    query = Alert.objects.filter(project=project).defer("evidence")
    if filters.status:
        query = query.filter(status=filters.status)
    if filters.kind:
        query = query.filter(kind=filters.kind)
    if filters.tool:
        query = query.filter(tool=filters.tool)
    resolved_last = Case(
        When(status=Alert.Status.RESOLVED, then=Value(1)), default=Value(0), output_field=IntegerField()
    )
    return query.annotate(resolved_last=resolved_last).order_by("resolved_last", "-opened_at", "-id")


def alert_tools(project: Project) -> list[str]:
    """The tools that have alerts, for the list's tool filter."""
    return list(Alert.objects.filter(project=project).order_by("tool").values_list("tool", flat=True).distinct())


def alert_for_project(project: Project, pk: int) -> Alert:
    """The project's alert `pk`, or 404 (the same answer for another project's alert)."""
    return get_object_or_404(Alert, project=project, pk=pk)


def alert_deliveries(alert: Alert) -> list[Delivery]:
    """The delivery log of an alert, oldest first, with each channel's name and kind.

    Only what the log shows is loaded: never the channel's target (a Slack URL is a
    credential) or its signing secret.
    """
    return list(
        Delivery.objects.filter(alert=alert)
        .select_related("channel")
        .only(
            "alert_id", "event", "status", "attempts", "last_error", "response_code", "created_at", "sent_at",
            "channel__name", "channel__kind",
        )
        .order_by("created_at", "id")
    )  # fmt: skip


# --- evidence, read defensively (pure) --------------------------------------------------------


@dataclass(frozen=True)
class Window:
    start: dt.datetime
    end: dt.datetime


@dataclass(frozen=True)
class EvidenceRow:
    name: str  # the evidence key, for the API and a title attribute
    label: str
    value: str


@dataclass(frozen=True)
class Evidence:
    recent: Window | None
    baseline: Window | None
    statistics: list[EvidenceRow]
    thresholds: list[EvidenceRow]
    sample_trace_ids: list[str]
    points: list[dict]  # hourly {"start": datetime, "calls", "error_rate", "retry_rate", "escalation_rate"}
    # An eval regression's run and cases: {"run_id", "run_label", "git_sha", "cases": [{case_id, version, title, status, reasons}]}
    eval_run: dict | None = None
    # The statistics as stored (numbers, not formatted), for the chart's baseline and band.
    raw_statistics: dict = field(default_factory=dict)


def _moment(value) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _window(value) -> Window | None:
    """A window as the evaluation stores it ([start, end]) or as the docs show it ({"start", "end", …})."""
    if isinstance(value, dict):
        start, end = _moment(value.get("start")), _moment(value.get("end"))
    elif isinstance(value, list | tuple) and len(value) == 2:
        start, end = _moment(value[0]), _moment(value[1])
    else:
        return None
    return Window(start, end) if start and end and end > start else None


# Labels for the statistics' keys that a generic "snake_case → words" would garble.
_LABELS = {
    "evaluated": "Evaluated",
    "mode": "Mode (open: may open; hold: is it clearly back?)",
    "window_hours": "Recent window (hours)",
    "baseline_hours": "Baseline (hours)",
    "z_required": "z required to fire",
    "z_required_count": "z required to fire (retry count)",
    "z_open": "z to open",
    "z": "z",
}


def _label(key: str) -> str:
    if key in _LABELS:
        return _LABELS[key]
    words = key.replace("_", " ")
    for short, long in ((" z", " (z)"), (" p", " (p-value)")):
        if words.endswith(short):
            words = words[: -len(short)] + long
    return words[:1].upper() + words[1:]


def format_number(value) -> str:
    """A statistic for people: booleans as yes/no, small p-values in scientific notation, floats to 4 digits."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value != 0 and abs(value) < 0.001:
            return f"{value:.2e}"
        return f"{value:,.4g}"
    if value is None:
        return "—"
    if isinstance(value, list | tuple):
        return ", ".join(format_number(item) for item in value)
    return str(value)


def _rows(mapping) -> list[EvidenceRow]:
    if not isinstance(mapping, dict):
        return []
    return [EvidenceRow(str(key), _label(str(key)), format_number(value)) for key, value in mapping.items()]


# The rates a chart point may carry; evidence from before issue 15 has the first three only.
POINT_RATES = ("error_rate", "retry_rate", "escalation_rate", "tested_retry_rate", "wasted_rate", "escalation_share")


def _rate(value) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _points(raw) -> list[dict]:
    points = []
    for point in raw if isinstance(raw, list) else []:
        start = _moment(point.get("start")) if isinstance(point, dict) else None
        if start is None:
            continue
        points.append(
            {
                "start": start,
                "calls": _rate(point.get("calls")) or 0,
                "errors": _rate(point.get("errors")) or 0,
                **{name: _rate(point.get(name)) for name in POINT_RATES},
            }
        )
    return sorted(points, key=lambda p: p["start"])


def evidence_of(alert: Alert) -> Evidence:
    """The alert's evidence JSON, shaped for the page; anything missing or malformed is left out, never fatal.

    The evaluation (dashboard.alerting.evaluation) stores `statistics` (with `thresholds` inside),
    `recent` and `baseline` windows, `hourly` chart points and `sample_trace_ids`; older or
    hand-made evidence may say `chart` for the points, or hold windows as objects.
    """
    return _evidence(alert.evidence)


def opening_evidence_of(alert: Alert) -> Evidence | None:
    """The evidence of the evaluation that opened the alert, shaped like `evidence_of`; None when
    the alert has none (one opened before openings were kept, or an eval regression)."""
    raw = getattr(alert, "opening_evidence", None)
    return _evidence(raw) if isinstance(raw, dict) and raw else None


def alert_headline(alert: Alert) -> str:
    """The alert's one sentence: from its opening evidence for a drift alert (what changed, by how
    much, since when, on what volume), else its stored summary."""
    raw = getattr(alert, "opening_evidence", None)
    return alert_sentence(kind=alert.kind, tool=alert.tool, evidence=raw) or alert.summary


def _evidence(raw) -> Evidence:
    evidence = raw if isinstance(raw, dict) else {}
    statistics = dict(evidence.get("statistics") or {}) if isinstance(evidence.get("statistics"), dict) else {}
    thresholds = statistics.pop("thresholds", {})
    samples = evidence.get("sample_trace_ids")
    return Evidence(
        recent=_window(evidence.get("recent")),
        baseline=_window(evidence.get("baseline")),
        statistics=_rows(statistics),
        thresholds=_rows(thresholds),
        sample_trace_ids=[str(trace_id) for trace_id in samples if trace_id] if isinstance(samples, list) else [],
        points=_points(evidence.get("hourly", evidence.get("chart"))),
        eval_run=_eval_run(evidence),
        raw_statistics=statistics,
    )


def _eval_run(evidence: dict) -> dict | None:
    run_id = evidence.get("run_id")
    if not isinstance(run_id, int):
        return None
    cases = []
    for case in evidence.get("cases") or []:
        if isinstance(case, dict) and isinstance(case.get("case_id"), int):
            reasons = case.get("reasons") if isinstance(case.get("reasons"), list) else []
            cases.append({
                "case_id": case["case_id"], "version": case.get("version"), "title": str(case.get("title") or ""),
                "status": str(case.get("status") or ""), "reasons": [str(reason) for reason in reasons],
            })  # fmt: skip
    return {"run_id": run_id, "run_label": str(evidence.get("run_label") or ""), "git_sha": str(evidence.get("git_sha") or ""), "cases": cases}
