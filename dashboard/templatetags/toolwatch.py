"""Small template helpers for the pages (everything they output is escaped by Django as usual)."""

from __future__ import annotations

from django import template

from dashboard.charts.preview import svg

register = template.Library()


@register.filter
def attr_of(obj, name: str):
    """`filters|attr_of:"service"`: an attribute named by a variable."""
    return getattr(obj, name, "")


@register.filter
def pct(value, digits: int = 1) -> str:
    """A rate (0..1) as a percentage; an em dash when there were no calls."""
    if value is None:
        return "—"
    return f"{value * 100:.{digits}f} %"


@register.filter
def ms(value) -> str:
    if value is None:
        return "—"
    if value >= 10_000:
        return f"{value / 1000:.1f} s"
    return f"{value:.0f} ms"


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if mapping else None


@register.filter
def as_query(params) -> str:
    """`time_range.params|as_query`: a dict as `?a=1&b=2` for a link (empty values dropped)."""
    from urllib.parse import urlencode

    params = {name: value for name, value in (params or {}).items() if value not in (None, "")}
    return "?" + urlencode(params) if params else ""


@register.filter
def num(value) -> str:
    """A count with thousands separators, `20,076`, the same way everywhere (the alert page's
    statistics already read so); an em dash for None, anything that is not a number as is."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() else f"{value:,.2f}".rstrip("0").rstrip(".")
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.simple_tag
def chart_preview(figure, height: int, width: int = 1100):
    """`{% chart_preview figure 260 560 %}` inside a chart's div: the figure as static SVG, shown
    until plotly.js has run (dashboard/charts/preview.py). Height: the box's CSS height (Plotly fills
    it); width: the box's width in a 1280 px window, which only sets the tick density and legend rows."""
    return svg(figure, width=width, height=height) if figure else ""
