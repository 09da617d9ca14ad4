"""The figure of the ingest health page (pure Plotly dicts, drawn by static/js/charts.js).

Every untrusted string (refusal reasons) goes through `base.text()`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.charts.base import base_layout, count_axis, iso, text

if TYPE_CHECKING:  # the selector's data shape, named for readers only: charts import no selector
    from dashboard.selectors.health import IngestHealth

OUTCOME_COLOURS = {"accepted": "#15803d", "duplicate": "#2456d6", "rejected": "#d97706", "refused": "#dc2626"}
OUTCOME_NAMES = {
    "accepted": "accepted spans",
    "duplicate": "duplicate spans",
    "rejected": "rejected spans",
    "refused": "refused requests",
}
# Reasons listed in one hour's hover text; the table below the chart has them all.
HOVER_REASONS = 5


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
