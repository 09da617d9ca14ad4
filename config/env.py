"""Tiny typed readers of the environment that fail loudly on junk values."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":  # empty (an unset line of .env) means the default, as for env_int
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below its minimum of {minimum}")
    return value


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return value


# DRF's rate format (rest_framework.throttling.SimpleRateThrottle.parse_rate reads the first
# letter of the period): "600/min", "10/hour", "5/s". "off" turns the throttle of a scope off.
_RATE = re.compile(r"^(\d+)/(s|sec|second|m|min|minute|h|hour|d|day)$")


def env_rate(name: str, default: str | None) -> str | None:
    """A DRF throttle rate ("600/min"), or None for "off"."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in ("off", "none", "0"):
        return None
    match = _RATE.match(value)
    if not match or int(match.group(1)) < 1:
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not a rate; use <requests>/<period> with a period of s, min, hour or day "
            "(e.g. 600/min), or off"
        )
    return value


def env_origins(name: str) -> list[str]:
    """A comma list of origins, each scheme://host[:port] (what CSRF_TRUSTED_ORIGINS holds)."""
    origins = env_list(name, [])
    for origin in origins:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/") or parts.query:
            raise ImproperlyConfigured(
                f"{name}: {origin!r} is not an origin; write scheme://host[:port], e.g. https://toolwatch.example.com"
            )
    return [origin.rstrip("/") for origin in origins]
