"""The figure of an alert's page (pure Plotly dicts, drawn by static/js/charts.js).

Every untrusted string (tool names) goes through `base.text()`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.charts.base import METRIC_COLOURS, band_traces, base_layout, count_axis, iso, text

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
# The one rate each drift kind is judged on: (point key, label, baseline statistic, dispersion
# statistic, exposure: "calls" or "errors", binomial). Drawn bold, with the baseline's rate and
# a band of ± BAND_Z standard errors at each hour's own volume (as on the tool page).
KIND_METRIC = {
    "retry_rise_flat_error": ("tested_retry_rate", "retries per call (tested)", "baseline_retry_rate",
                              "retry_dispersion", "calls", False),
    "error_rate_spike": ("error_rate", "error rate", "baseline_error_rate", "error_dispersion", "calls", True),
    "wasted_retries": ("wasted_rate", "wasted retries per call", "baseline_wasted_rate", "wasted_dispersion",
                       "calls", False),
    "escalation_silence": ("escalation_share", "escalations per error", "baseline_escalation_share", None,
                           "errors", True),
}  # fmt: skip
BAND_Z = 2.0


def _number(value) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _band(points: list[dict], kind: str, statistics: dict) -> tuple[list, list, list] | None:
    """(baseline, low, high) per point for the kind's rate, None at hours without volume; None without a baseline."""
    metric = KIND_METRIC.get(kind)
    base = _number(statistics.get(metric[2])) if metric else None
    if base is None:
        return None
    phi = _number(statistics.get(metric[3])) if metric[3] else 1.0
    phi = max(phi or 1.0, 1.0)
    baseline, low, high = [], [], []
    for point in points:
        n = point.get(metric[4]) or 0
        if not n:
            baseline.append(None), low.append(None), high.append(None)
            continue
        variance = base * (1.0 - base) if metric[5] and base < 1 else base
        se = (phi * variance / n) ** 0.5
        baseline.append(round(base, 6)), low.append(round(max(0.0, base - BAND_Z * se), 6))
        high.append(round(base + BAND_Z * se, 6))
    return baseline, low, high
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
    """Hourly rates around the alert, with the baseline and the recent window shaded; None without points.

    The kind's own rate is drawn bold against the baseline's rate and band (from the evidence's
    statistics), the other rates thin; every line breaks at an hour without calls."""
    points = evidence.points
    if not points:
        return None
    x = [iso(point["start"]) for point in points]
    metric = KIND_METRIC.get(kind)
    # Evidence from before issue 15 has no point of the kind's own rate: the old emphasis then.
    own = metric is not None and any(point.get(metric[0]) is not None for point in points)
    focus = () if own else KIND_RATES.get(kind, tuple(name for name, _ in RATES))
    data: list[dict] = [
        {
            "type": "bar", "name": "calls", "x": x, "y": [point["calls"] for point in points], "yaxis": "y2",
            "marker": {"color": "rgba(102, 112, 133, 0.22)"}, "hovertemplate": "%{y:,} calls<extra></extra>",
        }  # fmt: skip
    ]
    band = _band(points, kind, evidence.raw_statistics) if own else None
    if band is not None:
        baseline, low, high = band
        data += band_traces(x, low, high, baseline)  # no fill across an hour without calls
        data.append(
            {"type": "scatter", "mode": "lines", "x": x, "y": baseline, "name": "baseline", "connectgaps": False,
             "line": {"color": "#2456d6", "width": 1, "dash": "dot"}, "hovertemplate": "%{y:.1%} baseline<extra></extra>"}
        )  # fmt: skip
    if own:
        data.append(
            {"type": "scatter", "mode": "lines", "name": metric[1], "x": x, "y": [point.get(metric[0]) for point in points],
             "connectgaps": False, "line": {"color": METRIC_COLOURS.get(metric[0], "#b45309"), "width": 2.5},
             "hovertemplate": f"%{{y:.1%}} {metric[1]}<extra>{text(tool)}</extra>"}
        )  # fmt: skip
    for name, label in RATES:
        data.append(
            {
                "type": "scatter", "mode": "lines", "name": label, "x": x, "y": [point[name] for point in points],
                "connectgaps": False, "line": {"color": METRIC_COLOURS[name], "width": 2.5 if name in focus else 1},
                "opacity": 1 if name in focus else 0.45,
                "hovertemplate": f"%{{y:.1%}} {label}<extra>{text(tool)}</extra>",
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
        # Rates as percentages, as on every other page (dashboard/templatetags/toolwatch.py, `pct`).
        yaxis={"gridcolor": "#eef0f3", "rangemode": "tozero", "tickformat": ".1~%", "title": {"text": "per call"}},
        # Volume is context, not the story: its bars keep to the bottom third, under the rates.
        # Its own whole-number ticks ("sync" would put them on the rate axis's gridlines: 47.3, 94.5).
        yaxis2=count_axis(
            calls_top, overlaying="y", side="right", showgrid=False, title={"text": "calls"}, tickmode="auto",
            range=[0, calls_top],
        ),
        bargap=0.1,
    )
    return {"data": data, "layout": layout}
