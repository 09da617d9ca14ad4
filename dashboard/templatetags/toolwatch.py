"""Small template helpers for the pages (everything they output is escaped by Django as usual)."""

from __future__ import annotations

from django import template

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
