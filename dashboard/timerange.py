"""The time range and dimension filters every page keeps in its URL (pure: no database)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from urllib.parse import urlencode

PRESETS = {
    "1h": dt.timedelta(hours=1),
    "24h": dt.timedelta(hours=24),
    "7d": dt.timedelta(days=7),
    "30d": dt.timedelta(days=30),
    "90d": dt.timedelta(days=90),
}
PRESET_LABELS = {"1h": "1 hour", "24h": "24 hours", "7d": "7 days", "30d": "30 days", "90d": "90 days"}
DEFAULT_RANGE = "24h"
CUSTOM = "custom"
# A custom range longer than this would read more rollup rows than a page should.
MAX_CUSTOM_SPAN = dt.timedelta(days=400)
# The moments a custom range may start and end between. Calls are timed from the epoch (OTLP's
# time_unix_nano) and buckets are floored from it, so nothing lies before 1970; the end stops
# centuries short of datetime's year 9999, so the arithmetic around a range (buckets floored and
# ceiled to a day or a step, baselines reaching hours before the start, attempts linked a little
# past the end, offsets of up to a day) never leaves the years datetime can hold.
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
LATEST = dt.datetime(9000, 1, 1, tzinfo=dt.timezone.utc)
SUPPORTED_SPAN = f"{EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d} (UTC)"
FILTER_NAMES = ("service", "environment", "agent")


class RangeError(ValueError):
    """A range the user asked for that cannot be shown; the message says why, `parameter` which
    of range, start and end is at fault (the key of the API's 400, the MCP error's field)."""

    def __init__(self, message: str, parameter: str = "range"):
        super().__init__(message)
        self.parameter = parameter


@dataclass(frozen=True)
class TimeRange:
    key: str  # a PRESETS key or "custom"
    start: dt.datetime
    end: dt.datetime

    @property
    def label(self) -> str:
        if self.key in PRESET_LABELS:
            return f"last {PRESET_LABELS[self.key]}"
        return f"{self.start:%Y-%m-%d %H:%M} – {self.end:%Y-%m-%d %H:%M} UTC"

    def params(self) -> dict[str, str]:
        if self.key == CUSTOM:
            return {"range": CUSTOM, "start": _format(self.start), "end": _format(self.end)}
        return {"range": self.key}


@dataclass(frozen=True)
class Filters:
    service: str = ""
    environment: str = ""
    agent: str = ""

    def as_kwargs(self) -> dict[str, str]:
        """The set filters, as keyword arguments for the selectors."""
        return {name: getattr(self, name) for name in FILTER_NAMES if getattr(self, name)}

    def params(self) -> dict[str, str]:
        return self.as_kwargs()

    def __bool__(self) -> bool:
        return bool(self.as_kwargs())


def _format(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M")


def _parse_moment(name: str, text: str) -> dt.datetime:
    text = text.strip()
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise RangeError(
            f"{name}={text!r} is not a date or time; use YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)", name
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    try:
        moment = moment.astimezone(dt.timezone.utc)
    except OverflowError:  # an offset that moves year 1 or 9999 out of the years datetime holds
        moment = None
    if moment is None or not EARLIEST <= moment <= LATEST:
        raise RangeError(f"{name}={text!r} is outside the supported span: a range lies within {SUPPORTED_SPAN}", name)
    return moment


def parse_range(params, now: dt.datetime) -> TimeRange:
    """The range named by ?range= (a preset, or custom with start and end); raises RangeError."""
    key = (params.get("range") or DEFAULT_RANGE).strip()
    if key in PRESETS:
        return TimeRange(key, now - PRESETS[key], now)
    if key != CUSTOM:
        choices = ", ".join([*PRESETS, CUSTOM])
        raise RangeError(f"range={key!r} is not one of {choices}")
    start_text, end_text = params.get("start") or "", params.get("end") or ""
    if not start_text or not end_text:
        raise RangeError("a custom range needs both start and end", "end" if start_text else "start")
    start = _parse_moment("start", start_text)
    end = _parse_moment("end", end_text)
    if end <= start:
        raise RangeError("the range's end must be after its start", "end")
    if end - start > MAX_CUSTOM_SPAN:
        raise RangeError(f"a custom range can span at most {MAX_CUSTOM_SPAN.days} days")
    return TimeRange(CUSTOM, start, min(end, now) if start < now else end)


def parse_filters(params) -> Filters:
    """The service / environment / agent filters; a NUL becomes U+FFFD, as ingest stores it (ingest/redact.py),
    since PostgreSQL text cannot hold one (the API refuses a NUL before this: dashboard/api/query.py)."""
    return Filters(**{name: (params.get(name) or "").strip()[:256].replace("\x00", "\ufffd") for name in FILTER_NAMES})


def querystring(time_range: TimeRange | None = None, filters: Filters | None = None, **extra) -> str:
    """`?range=…&service=…` for links that keep the page's range and filters (empty values dropped)."""
    params: dict[str, str] = {}
    if time_range is not None:
        params.update(time_range.params())
    if filters is not None:
        params.update(filters.params())
    params.update({name: str(value) for name, value in extra.items() if value not in (None, "")})
    return "?" + urlencode(params) if params else ""
