"""Figures of the alerts and ingest health pages (pure Plotly dicts, drawn by static/js/charts.js).

Every untrusted string (tool names, refusal reasons) goes through `charts.text()`.
"""

from __future__ import annotations

from dashboard.charts import METRIC_COLOURS, base_layout, count_axis, iso, text
from dashboard.selectors_alerts import Evidence
from dashboard.selectors_health import IngestHealth

# The rates an alert's chart draws, and which of them each kind is about (drawn bold; the others thin).
RATES = (
    ("error_rate", "error rate"),
    ("retry_rate", "retries per call"),
    ("escalation_rate", "escalation rate"),
)
KIND_RATES = {
    "retry_rise_flat_error": ("retry_rate", "error_rate"),
    "error_rate_spike": ("error_rate",),
    "wasted_retries": ("retry_rate",),
    "escalation_silence": ("escalation_rate", "error_rate"),
}
RECENT_COLOUR = "rgba(220, 38, 38, 0.10)"
OUTCOME_COLOURS = {"accepted": "#15803d", "duplicate": "#2456d6", "rejected": "#d97706", "refused": "#dc2626"}
OUTCOME_NAMES = {
    "accepted": "accepted spans",
    "duplicate": "duplicate spans",
    "rejected": "rejected spans",
    "refused": "refused requests",
}
# Reasons listed in one hour's hover text; the table below the chart has them all.
HOVER_REASONS = 5


def _window_shape(window, colour: str) -> dict:
    return {
        "type": "rect", "xref": "x", "yref": "paper", "x0": iso(window.start), "x1": iso(window.end),
        "y0": 0, "y1": 1, "fillcolor": colour, "line": {"width": 0}, "layer": "below",
    }  # fmt: skip


def _window_label(window, label: str) -> dict:
    return {
        "xref": "x", "yref": "paper", "x": iso(window.start + (window.end - window.start) / 2), "y": 1,
        "yanchor": "bottom", "text": label, "showarrow": False, "font": {"size": 11, "color": "#667085"},
    }  # fmt: skip


def alert_evidence_figure(evidence: Evidence, *, kind: str, tool: str) -> dict | None:
    """Hourly rates around the alert, with the baseline and the recent window shaded; None without points."""
    points = evidence.points
    if not points:
        return None
    x = [iso(point["start"]) for point in points]
    focus = KIND_RATES.get(kind, tuple(name for name, _ in RATES))
    data: list[dict] = [
        {
            "type": "bar", "name": "calls", "x": x, "y": [point["calls"] for point in points], "yaxis": "y2",
            "marker": {"color": "rgba(102, 112, 133, 0.22)"}, "hovertemplate": "%{y:,} calls<extra></extra>",
        }  # fmt: skip
    ]
    for name, label in RATES:
        data.append(
            {
                "type": "scatter", "mode": "lines", "name": label, "x": x, "y": [point[name] for point in points],
                "connectgaps": False, "line": {"color": METRIC_COLOURS[name], "width": 2.5 if name in focus else 1},
                "opacity": 1 if name in focus else 0.45,
                "hovertemplate": f"%{{y:.3f}} {label}<extra>{text(tool)}</extra>",
            }  # fmt: skip
        )
    calls_top = 3 * max((point["calls"] or 0 for point in points), default=0) or 1
    shapes, annotations = [], []
    if evidence.baseline:
        shapes.append(_window_shape(evidence.baseline, METRIC_COLOURS["baseline"]))
        annotations.append(_window_label(evidence.baseline, "baseline"))
    if evidence.recent:
        shapes.append(_window_shape(evidence.recent, RECENT_COLOUR))
        annotations.append(_window_label(evidence.recent, "recent"))
    layout = base_layout(
        shapes=shapes,
        annotations=annotations,
        margin={"l": 48, "r": 56, "t": 28, "b": 36},
        yaxis={"gridcolor": "#eef0f3", "rangemode": "tozero", "title": {"text": "per call"}},
        # Volume is context, not the story: its bars keep to the bottom third, under the rates.
        # Its own whole-number ticks ("sync" would put them on the rate axis's gridlines: 47.3, 94.5).
        yaxis2=count_axis(
            calls_top, overlaying="y", side="right", showgrid=False, title={"text": "calls"}, tickmode="auto",
            range=[0, calls_top],
        ),
        bargap=0.1,
    )
    return {"data": data, "layout": layout}


def _reasons_hover(per_hour: list[dict[str, int]]) -> list[str]:
    hover = []
    for reasons in per_hour:
        top = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))[:HOVER_REASONS]
        more = len(reasons) - len(top)
        lines = [f"{count:,} × {text(reason)}" for reason, count in top]
        if more > 0:
            lines.append(f"and {more} more reasons")
        hover.append("<br>".join(lines))
    return hover


def _counts(series: dict, *outcomes: str) -> dict:
    return count_axis(max((max(series[outcome], default=0) for outcome in outcomes), default=0))


def ingest_health_figure(health: IngestHealth) -> dict:
    """Arrivals per hour, one trace per outcome: spans stored and duplicates above, spans
    rejected and requests refused below on their own axis (a handful of refusals would
    vanish beside thousands of accepted spans)."""
    x = [iso(hour) for hour in health.hours]
    data = []
    for outcome in ("accepted", "duplicate"):
        data.append(
            {
                "type": "scatter", "mode": "lines", "name": OUTCOME_NAMES[outcome], "x": x,
                "y": health.series[outcome], "line": {"color": OUTCOME_COLOURS[outcome], "width": 2},
                "hovertemplate": f"%{{y:,}} {OUTCOME_NAMES[outcome]}<extra></extra>",
            }  # fmt: skip
        )
    for outcome in ("rejected", "refused"):
        data.append(
            {
                "type": "bar", "name": OUTCOME_NAMES[outcome], "x": x, "y": health.series[outcome], "yaxis": "y2",
                "marker": {"color": OUTCOME_COLOURS[outcome]},
                "hovertext": _reasons_hover(health.reasons_by_hour[outcome]),
                "hovertemplate": f"%{{y:,}} {OUTCOME_NAMES[outcome]}<br>%{{hovertext}}<extra></extra>",
            }  # fmt: skip
        )
    layout = base_layout(
        height=360,
        barmode="group",
        # One x axis for both panels, drawn once under the lower one: the dates would otherwise
        # sit between the panels, on top of the lower panel's ticks.
        xaxis={"type": "date", "gridcolor": "#eef0f3", "anchor": "y2"},
        yaxis={"domain": [0.42, 1], "anchor": "x", "title": {"text": "spans"},
               **_counts(health.series, "accepted", "duplicate")},
        yaxis2={"domain": [0, 0.32], "anchor": "x", "title": {"text": "problems"},
                **_counts(health.series, "rejected", "refused")},
    )
    return {"data": data, "layout": layout}
