"""The figure of an alert's page (pure Plotly dicts, drawn by static/js/charts.js).

Every untrusted string (tool names) goes through `base.text()`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.charts.base import METRIC_COLOURS, base_layout, count_axis, iso, text

if TYPE_CHECKING:  # the selector's data shape, named for readers only: charts import no selector
    from dashboard.selectors.alerts import Evidence

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
