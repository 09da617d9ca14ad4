"""What every figure shares (pure): colours, the layout, axes, and escaping.

Untrusted strings (tool names, messages, attribute values) go through `text()` before they
reach a figure: Plotly renders a subset of HTML in labels and hover text, so a raw "<b>"
would be markup, not text.
"""

from __future__ import annotations

import html

from ingest.taxonomy import ERROR_CLASSES

# One colour per error class, the same as the CSS variables in static/css/toolwatch.css.
CLASS_COLOURS = {
    "transient": "#d97706",
    "validation": "#7c3aed",
    "permission": "#dc2626",
    "not_found": "#0891b2",
    "business": "#4d7c0f",
    "user_input": "#db2777",
    "fatal": "#111827",
    "unknown": "#6b7280",
}
assert set(CLASS_COLOURS) == set(ERROR_CLASSES)
METRIC_COLOURS = {
    "error_rate": "#dc2626",
    "retry_rate": "#d97706",
    "escalation_rate": "#7c3aed",
    "calls": "#2456d6",
    "baseline": "rgba(36, 86, 214, 0.12)",
}
FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12, "color": "#1d2430"}


def text(value) -> str:
    """An untrusted string made safe for Plotly's pseudo-HTML labels and hover text."""
    return html.escape(str(value), quote=False)


def base_layout(**overrides) -> dict:
    layout = {
        "font": FONT,
        "margin": {"l": 48, "r": 16, "t": 24, "b": 36},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "hovermode": "x unified",
        "legend": {"orientation": "h", "y": -0.2},
        # automargin: the margin grows to fit the ticks, so rotated dates and wide numbers are never clipped.
        "xaxis": {"type": "date", "gridcolor": "#eef0f3", "automargin": True},
        "yaxis": {"gridcolor": "#eef0f3", "rangemode": "tozero", "automargin": True},
    }
    layout.update(overrides)
    for name, axis in layout.items():
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            axis.setdefault("automargin", True)
    return layout


def segments(values: list) -> list[range]:
    """The runs of consecutive indices whose value is not None: a band is filled per run, so
    no fill is drawn across a gap (Plotly's `tonexty` would join the runs with a wedge)."""
    runs, begin = [], None
    for index, value in enumerate([*values, None]):
        if value is not None and begin is None:
            begin = index
        elif value is None and begin is not None:
            runs.append(range(begin, index))
            begin = None
    return runs


def band_traces(x: list, low: list, high: list, baseline: list) -> list[dict]:
    """The baseline band as filled traces (low, then high filled to it), one pair per run of
    points with a baseline (segments), shown once in the legend."""
    data: list[dict] = []
    for number, run in enumerate(segments(baseline)):
        data += [
            {"type": "scatter", "mode": "lines", "x": x[run.start:run.stop], "y": low[run.start:run.stop],
             "name": "band low", "showlegend": False, "line": {"width": 0}, "hoverinfo": "skip"},
            {"type": "scatter", "mode": "lines", "x": x[run.start:run.stop], "y": high[run.start:run.stop],
             "name": "baseline band", "fill": "tonexty", "fillcolor": METRIC_COLOURS["baseline"],
             "line": {"width": 0}, "hoverinfo": "skip", "showlegend": number == 0},
        ]  # fmt: skip
    return data


def iso(moment) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def count_axis(top, **overrides) -> dict:
    """A y axis of counts: whole-number ticks only. Plotly's automatic ticks step by 0.5 (or 0.2)
    when the counts are small, so up to a handful the step is fixed at 1; above that its automatic
    steps are whole numbers anyway and `,d` adds the thousands separators."""
    # automargin: "60,000" is wider than the default margin, and would run into the axis title.
    axis = {"gridcolor": "#eef0f3", "rangemode": "tozero", "tickformat": ",d", "automargin": True}
    if (top or 0) <= 5:
        axis.update(tick0=0, dtick=1)
    axis.update(overrides)
    return axis
