"""Figures of the overview and tool pages (pure Plotly dicts, passed to templates with
json_script and drawn by static/js/charts.js). Untrusted strings go through `base.text()`."""

from __future__ import annotations

from dashboard.charts.base import (
    CLASS_COLOURS,
    METRIC_COLOURS,
    band_traces,
    base_layout,
    count_axis,
    iso,
    text,
)

# --- the overview and tool pages ----------------------------------------------------------

RATE_LABELS = {"error_rate": "Error rate", "retry_rate": "Retry rate", "escalation_rate": "Escalation rate"}
# The least a rate axis spans: a rate that stays at zero reads as a flat line on 0-1 %, not 0-100 %.
RATE_MIN_SPAN = 0.01
LATENCY_COLOURS = {"p50_ms": "#2456d6", "p95_ms": "#d97706", "p99_ms": "#dc2626"}


def _round(value, digits: int = 5):
    return None if value is None else round(value, digits)


def sparkline_path(values: list[float | None], *, width: int = 120, height: int = 28, pad: int = 2) -> str:
    """An SVG path (`d`) through the values, scaled to the box, broken where a value is None.
    Numbers only, so it is safe in a template as is. Empty when fewer than two steps have a
    value: one point is no trend (it drew as a stray dot), and the page says so in words."""
    present = [value for value in values if value is not None]
    if len(present) < 2:
        return ""
    top = max(present) or 1.0
    step = (width - 2 * pad) / max(len(values) - 1, 1)
    parts, pen_down = [], False
    for index, value in enumerate(values):
        if value is None:
            pen_down = False
            continue
        x = pad + index * step
        y = height - pad - (value / top) * (height - 2 * pad)
        parts.append(f"{'L' if pen_down else 'M'}{x:.1f},{y:.1f}")
        pen_down = True
    return " ".join(parts)


def _rate_axis(values: list) -> dict:
    """A rate axis from zero: Plotly's own range, unless every value is below RATE_MIN_SPAN
    (all zero, say), where its autorange would span 0-100 % for a flat line at the bottom."""
    axis = {"gridcolor": "#eef0f3", "rangemode": "tozero", "tickformat": ".1~%", "automargin": True}
    if max((value for value in values if value is not None), default=0) < RATE_MIN_SPAN:
        axis["range"] = [0, RATE_MIN_SPAN]
    return axis


def rate_figure(points: list[dict], band: list[dict | None], *, metric: str, tool: str) -> dict:
    """One rate over time with its baseline band (low/high filled, baseline dashed). Nothing
    is drawn across a gap (a step without calls, or without a baseline): the lines break at
    None, and the band is filled once per run of steps that have one."""
    x = [iso(point["start"]) for point in points]
    colour = METRIC_COLOURS[metric]
    label = RATE_LABELS[metric]
    low = [_round(b and b["low"]) for b in band] if band else []
    high = [_round(b and b["high"]) for b in band] if band else []
    base = [_round(b and b["baseline"]) for b in band] if band else []
    data = band_traces(x, low, high, base)
    if data:
        data.append(
            {"type": "scatter", "mode": "lines", "x": x, "y": base, "name": "baseline", "connectgaps": False,
             "line": {"color": "#2456d6", "width": 1, "dash": "dot"}, "hovertemplate": "%{y:.1%} baseline<extra></extra>"}
        )  # fmt: skip
    data.append({
        "type": "scatter", "mode": "lines+markers", "x": x, "y": [_round(point[metric]) for point in points],
        "name": f"{label}, {text(tool)}", "line": {"color": colour, "width": 2}, "marker": {"size": 3},
        "connectgaps": False, "hovertemplate": "%{y:.1%} per call<extra></extra>",
    })  # fmt: skip
    return {
        "data": data,
        "layout": base_layout(
            title={"text": label, "font": {"size": 13}, "x": 0, "xanchor": "left"},
            margin={"l": 48, "r": 12, "t": 32, "b": 32}, showlegend=False,
            yaxis=_rate_axis([*[point[metric] for point in points], *high]),
        ),
    }


def volume_figure(points: list[dict], *, tool: str) -> dict:
    """Logical calls (bars) and attempts (line: every span, retries included) per step."""
    x = [iso(point["start"]) for point in points]
    return {
        "data": [
            {"type": "bar", "x": x, "y": [point["calls"] for point in points], "name": f"logical calls, {text(tool)}",
             "marker": {"color": METRIC_COLOURS["calls"]}, "hovertemplate": "%{y:,} logical calls<extra></extra>"},
            {"type": "scatter", "mode": "lines", "x": x, "y": [point["attempts"] for point in points],
             "name": "attempts (spans)", "line": {"color": "#1d2430", "width": 1.5},
             "hovertemplate": "%{y:,} attempts<extra></extra>"},
        ],  # fmt: skip
        "layout": base_layout(
            bargap=0.15, showlegend=True, yaxis=count_axis(max((p["attempts"] or 0 for p in points), default=0))
        ),
    }


def classes_figure(points: list[dict]) -> dict:
    """Failed logical calls per step (by their last attempt's class), stacked, in the class colours."""
    x = [iso(point["start"]) for point in points]
    data = [
        {"type": "bar", "x": x, "y": [point[f"err_{name}"] for point in points], "name": name,
         "marker": {"color": colour}, "hovertemplate": f"%{{y:,}} failed calls, {name}<extra></extra>"}
        for name, colour in CLASS_COLOURS.items()
        if any(point[f"err_{name}"] for point in points)
    ]  # fmt: skip
    # The tallest stack, for the count axis; the legend shows even for one class (it names it).
    top = max((sum(point[f"err_{name}"] or 0 for name in CLASS_COLOURS) for point in points), default=0)
    return {"data": data, "layout": base_layout(barmode="stack", bargap=0.15, showlegend=True, yaxis=count_axis(top))}


def latency_figure(points: list[dict]) -> dict:
    """p50 / p95 / p99 latency per step (ms), from the merged histograms."""
    x = [iso(point["start"]) for point in points]
    data = [
        {"type": "scatter", "mode": "lines", "x": x, "y": [_round(point.get(key), 2) for point in points],
         "name": key.removesuffix("_ms"), "line": {"color": colour, "width": 2 if key == "p95_ms" else 1.5},
         "hovertemplate": "%{y:.0f} ms", "connectgaps": False}
        for key, colour in LATENCY_COLOURS.items()
    ]  # fmt: skip
    return {"data": data, "layout": base_layout(
        margin={"l": 72, "r": 16, "t": 24, "b": 36}, yaxis={"gridcolor": "#eef0f3", "rangemode": "tozero", "ticksuffix": " ms"}
    )}


def trend_figure(points: list[dict]) -> dict:
    """The overview's trend: logical calls per step (bars, on their own axis at the right) and
    the error and retry rates per call (lines, in percent), broken where a step had no calls."""
    x = [iso(point["start"]) for point in points]
    data = [
        {"type": "bar", "name": "logical calls", "x": x, "y": [point["calls"] for point in points], "yaxis": "y2",
         "marker": {"color": "rgba(36, 86, 214, 0.22)"}, "hovertemplate": "%{y:,} logical calls<extra></extra>"},
    ]  # fmt: skip
    rates = []
    for metric in ("error_rate", "retry_rate"):
        values = [_round(point[metric]) for point in points]
        rates += values
        data.append(
            {"type": "scatter", "mode": "lines+markers", "name": RATE_LABELS[metric].lower(), "x": x, "y": values,
             "connectgaps": False, "line": {"color": METRIC_COLOURS[metric], "width": 2}, "marker": {"size": 3},
             "hovertemplate": f"%{{y:.1%}} {RATE_LABELS[metric].lower()}<extra></extra>"}
        )  # fmt: skip
    # The calls' bars keep to the bottom third, under the rates: volume is context, the rates the story.
    calls_top = 3 * max((point["calls"] or 0 for point in points), default=0) or 1
    return {
        "data": data,
        "layout": base_layout(
            height=260, bargap=0.1, showlegend=True, margin={"l": 48, "r": 56, "t": 16, "b": 36},
            yaxis={**_rate_axis(rates), "title": {"text": "per call"}},
            yaxis2=count_axis(calls_top, overlaying="y", side="right", showgrid=False, tickmode="auto",
                              range=[0, calls_top], title={"text": "calls"}),
        ),
    }  # fmt: skip


def calls_histogram_figure(starts: list, counts: list[int], *, step_label: str) -> dict:
    """The traces explorer's volume: matching tool calls (attempts, the list's rows) per step."""
    return {
        "data": [
            {"type": "bar", "name": "tool calls", "x": [iso(moment) for moment in starts], "y": counts,
             "marker": {"color": METRIC_COLOURS["calls"]},
             "hovertemplate": f"%{{y:,}} tool calls in the {text(step_label)}<extra></extra>"},
        ],  # fmt: skip
        "layout": base_layout(
            height=140, bargap=0.1, showlegend=False, margin={"l": 48, "r": 16, "t": 8, "b": 28},
            yaxis=count_axis(max(counts, default=0)),
        ),
    }
