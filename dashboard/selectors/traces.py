"""Reads for the traces explorer, the trace detail page and their API: tool calls and spans.

The explorer lists raw tool calls, newest first, by keyset pagination on
(start_time, span_id, trace_id): each page is one index range scan with a LIMIT on the
(project, start_time) or (project, tool, start_time) index, so page 1000 costs what page 1
does. (span_id, trace_id) breaks ties on start_time: with the project it is the unique
key of a tool call, so no row is skipped or repeated across pages.

Filter values come from URLs: `parse_call_filters` validates them and names each bad one.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, fields, replace

from django.db import OperationalError, connection, transaction
from django.db.models import Count, Q

from dashboard import timerange
from dashboard.models import ToolRollup
from dashboard.selectors.tools import BucketStart, bucket_seconds_for, metric_series
from ingest.models import LogRecord, Project, Span, ToolCall
from ingest.taxonomy import ERROR_CLASSES

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
# A trace with more spans than this shows its first MAX_SPANS (by start time) and says so.
MAX_SPANS = 2000
MAX_QUERY_CHARS = 200
MAX_VALUE_CHARS = 256
# How long a message search ("contains", which no index serves) may read before it gives up.
SEARCH_TIMEOUT_MS = 3000
QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE for a statement_timeout

TRACE_ID_RE = re.compile(r"^[0-9a-f]{32}$")
SPAN_ID_RE = re.compile(r"^[0-9a-f]{16}$")
_CURSOR_RE = re.compile(r"^(\d{1,19})_([0-9a-f]{16})_([0-9a-f]{32})$")

# What each outcome means in ToolCall fields (every filter on failures says ok=False too, so
# the planner can read the partial index of failed calls). "retried" is an attempt its sender marked as
# a retry (tool.call.attempt > 1 or http.request.resend_count > 0); retries recognised
# only by attempt linking (the same arguments after a failure) are counted in the rollups,
# not flagged per row.
OUTCOMES = {
    "failed": ("failed", Q(ok=False)),
    "ok": ("succeeded", Q(ok=True)),
    "soft_failure": ("soft failure (an error returned to the model)", Q(ok=False, soft_failure=True)),
    "retried": ("retried (a marked retry attempt)", Q(attempt__gt=1) | Q(resend_count__gt=0)),
    "escalated": ("escalated to a human", Q(escalated=True)),
}
OUTCOME_LABELS = {key: label for key, (label, _) in OUTCOMES.items()}

# Columns the explorer shows: the JSON arguments and result stay on disk.
LIST_FIELDS = (
    "trace_id", "span_id", "start_time", "latency_ms", "tool", "ok", "soft_failure", "error_class",
    "classified_by", "message", "service", "environment", "agent", "attempt", "resend_count", "escalated",
)  # fmt: skip


def normalize_id(text: str) -> str:
    return (text or "").strip().lower()


def is_trace_id(text: str) -> bool:
    return bool(TRACE_ID_RE.match(text))


# --- filters --------------------------------------------------------------------------------

# The URL parameter of each filter ("class" is a Python keyword, hence error_class).
FILTER_PARAMS = {
    "tool": "tool", "error_class": "class", "outcome": "outcome", "q": "q",
    "service": "service", "environment": "environment", "agent": "agent",
}  # fmt: skip


@dataclass(frozen=True)
class CallFilters:
    tool: str = ""
    error_class: str = ""
    outcome: str = ""
    q: str = ""
    service: str = ""
    environment: str = ""
    agent: str = ""

    def params(self) -> dict[str, str]:
        """The set filters as URL parameters."""
        return {FILTER_PARAMS[f.name]: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}

    def __bool__(self) -> bool:
        return bool(self.params())


def parse_call_filters(params) -> tuple[CallFilters, dict[str, str]]:
    """The explorer's filters from URL parameters, and an error message per bad parameter.

    A bad value is dropped from the filters (the caller shows or returns its message).
    """
    dims = timerange.parse_filters(params)
    errors: dict[str, str] = {}
    values = {
        # A NUL as ingest stores one (U+FFFD): PostgreSQL text cannot hold it, not even in a query.
        "tool": (params.get("tool") or "").strip().replace("\x00", "\ufffd"),
        "error_class": (params.get("class") or "").strip(),
        "outcome": (params.get("outcome") or "").strip(),
        "q": (params.get("q") or "").strip().replace("\x00", "\ufffd"),
        **{name: getattr(dims, name) for name in timerange.FILTER_NAMES},
    }
    if len(values["tool"]) > MAX_VALUE_CHARS:
        errors["tool"] = f"tool is longer than {MAX_VALUE_CHARS} characters, so no tool has that name"
        values["tool"] = ""
    if values["error_class"] and values["error_class"] not in ERROR_CLASSES:
        errors["class"] = f"class={values['error_class']!r} is not an error class; use one of {', '.join(ERROR_CLASSES)}"
        values["error_class"] = ""
    if values["outcome"] and values["outcome"] not in OUTCOMES:
        errors["outcome"] = f"outcome={values['outcome']!r} is not one of {', '.join(OUTCOMES)}"
        values["outcome"] = ""
    if len(values["q"]) > MAX_QUERY_CHARS:
        errors["q"] = f"the message search is longer than {MAX_QUERY_CHARS} characters"
        values["q"] = ""
    return CallFilters(**values), errors


# --- keyset cursors ---------------------------------------------------------------------------


class CursorError(ValueError):
    """A pagination cursor that this code did not make."""


@dataclass(frozen=True)
class Cursor:
    start_time: dt.datetime
    span_id: str
    trace_id: str

    def encode(self) -> str:
        delta = self.start_time - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return f"{micros}_{self.span_id}_{self.trace_id}"

    @classmethod
    def decode(cls, text: str) -> Cursor:
        match = _CURSOR_RE.match(text or "")
        if not match:
            raise CursorError(f"{text!r} is not a page cursor; follow the Older / Newer links")
        try:
            moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(match.group(1)))
        except OverflowError:
            raise CursorError(f"{text!r} is not a page cursor; follow the Older / Newer links") from None
        return cls(moment, match.group(2), match.group(3))

    @classmethod
    def of(cls, call: ToolCall) -> Cursor:
        return cls(call.start_time, call.span_id, call.trace_id)


def _older_than(cursor: Cursor) -> Q:
    # The plain `start_time <= t` bounds the index scan; the rest breaks ties exactly.
    return Q(start_time__lte=cursor.start_time) & (
        Q(start_time__lt=cursor.start_time)
        | Q(span_id__lt=cursor.span_id)
        | Q(span_id=cursor.span_id, trace_id__lt=cursor.trace_id)
    )


def _newer_than(cursor: Cursor) -> Q:
    return Q(start_time__gte=cursor.start_time) & (
        Q(start_time__gt=cursor.start_time)
        | Q(span_id__gt=cursor.span_id)
        | Q(span_id=cursor.span_id, trace_id__gt=cursor.trace_id)
    )


# --- the explorer ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CallsPage:
    calls: list[ToolCall]
    older: str | None  # cursor for the next page back in time, when there is one
    newer: str | None  # cursor for the page before it, when there is one


def tool_calls_query(project: Project, *, start: dt.datetime, end: dt.datetime, filters: CallFilters):
    """The matching tool calls of [start, end), unordered (the page functions order them)."""
    query = ToolCall.objects.filter(project=project, start_time__gte=start, start_time__lt=end)
    if filters.tool:
        query = query.filter(tool=filters.tool)
    if filters.error_class:
        query = query.filter(ok=False, error_class=filters.error_class)
    if filters.outcome:
        query = query.filter(OUTCOMES[filters.outcome][1])
    for name in timerange.FILTER_NAMES:
        if value := getattr(filters, name):
            query = query.filter(**{name: value})
    if filters.q:
        # Only failures carry a message (ingest.normalize fills it for them alone).
        query = query.filter(ok=False, message__icontains=filters.q)
    return query


def tool_calls_page(
    project: Project,
    *,
    start: dt.datetime,
    end: dt.datetime,
    filters: CallFilters,
    before: Cursor | None = None,
    after: Cursor | None = None,
    limit: int = PAGE_SIZE,
) -> CallsPage:
    """One page of matching tool calls, newest first: the newest page, the one `before` a
    cursor (older) or the one `after` it (newer). One query.

    A message search reads every call in the range until it fills a page (no index
    serves "contains"): on PostgreSQL it stops after SEARCH_TIMEOUT_MS and raises
    SearchTooSlow, which the page and the API turn into advice instead of a hung request.
    """
    if filters.q and connection.vendor == "postgresql":
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL statement_timeout = {int(SEARCH_TIMEOUT_MS)}")
                return _page(project, start, end, filters, before, after, limit)
        except OperationalError as exc:
            if getattr(exc.__cause__, "sqlstate", None) != QUERY_CANCELED:
                raise
            raise SearchTooSlow(
                f"searching the messages of {_describe(start, end)} of calls took longer than {SEARCH_TIMEOUT_MS / 1000:g} s; "
                "narrow the time range, or pick a tool or an error class"
            ) from None
    return _page(project, start, end, filters, before, after, limit)


class SearchTooSlow(Exception):
    """A message search that could not finish in time; the message says what to narrow."""


def _describe(start: dt.datetime, end: dt.datetime) -> str:
    hours = (end - start).total_seconds() / 3600
    return f"{hours:.0f} hours" if hours < 48 else f"{hours / 24:.0f} days"


def _page(project, start, end, filters, before, after, limit) -> CallsPage:
    query = tool_calls_query(project, start=start, end=end, filters=filters).only(*LIST_FIELDS)
    if after is not None:
        rows = list(query.filter(_newer_than(after)).order_by("start_time", "span_id", "trace_id")[: limit + 1])
        more = len(rows) > limit
        calls = rows[:limit][::-1]
        newer = Cursor.of(calls[0]).encode() if more else None
        older = Cursor.of(calls[-1]).encode() if calls else before_cursor_text(after)
        return CallsPage(calls, older=older, newer=newer)
    if before is not None:
        query = query.filter(_older_than(before))
    rows = list(query.order_by("-start_time", "-span_id", "-trace_id")[: limit + 1])
    calls = rows[:limit]
    older = Cursor.of(calls[-1]).encode() if len(rows) > limit else None
    newer = None
    if before is not None:
        newer = Cursor.of(calls[0]).encode() if calls else after_cursor_text(before)
    return CallsPage(calls, older=older, newer=newer)


def before_cursor_text(cursor: Cursor) -> str:
    # An empty newer page still leads back: older than where it started, i.e. the cursor row and beyond.
    return replace(cursor, start_time=cursor.start_time + dt.timedelta(microseconds=1)).encode()


def after_cursor_text(cursor: Cursor) -> str:
    return replace(cursor, start_time=cursor.start_time - dt.timedelta(microseconds=1)).encode()


def filter_choices(project: Project, *, start: dt.datetime, end: dt.datetime) -> dict[str, list[str]]:
    """The tools, services, environments and agents seen in [start, end), from the hourly rollups (one query)."""
    rows = (
        ToolRollup.objects.filter(
            project=project,
            resolution=ToolRollup.Resolution.HOUR,
            bucket_start__gte=start.replace(minute=0, second=0, microsecond=0),
            bucket_start__lt=end,
        )
        .values_list("tool", "service", "environment", "agent")
        .distinct()
    )
    seen: dict[str, set[str]] = {"tool": set(), "service": set(), "environment": set(), "agent": set()}
    for tool, service, environment, agent in rows:
        seen["tool"].add(tool)
        seen["service"].add(service)
        seen["environment"].add(environment)
        seen["agent"].add(agent)
    return {name: sorted(values) for name, values in seen.items()}


def trace_exists(project: Project, trace_id: str) -> bool:
    if Span.objects.filter(project=project, trace_id=trace_id).exists():
        return True
    return project.logs_since is not None and _has_log_side(project, trace_id)


def _has_log_side(project: Project, trace_id: str) -> bool:
    """A trace of log records alone: an agent that reports its tool uses as log events (and
    no spans) has tool calls and records under the trace id of its session (docs/contract/logs.md)."""
    return (
        ToolCall.objects.filter(project=project, trace_id=trace_id).exists()
        or LogRecord.objects.filter(project=project, trace_id=trace_id).exists()
    )


# --- one trace ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trace:
    trace_id: str
    spans: list[Span]
    calls: dict[str, ToolCall]  # by span id
    truncated: bool  # more than MAX_SPANS spans: only the first are here


def trace_get(project: Project, trace_id: str) -> Trace | None:
    """Every span of a trace (up to MAX_SPANS) and its tool calls, in two queries; None when
    the project has no such trace."""
    trace_id = normalize_id(trace_id)
    if not is_trace_id(trace_id):
        return None
    spans = list(
        Span.objects.filter(project=project, trace_id=trace_id)
        .with_resource_attributes()
        .order_by("start_time", "span_id")[: MAX_SPANS + 1]
    )
    if not spans:
        if project.logs_since is None:  # no log records ever: no trace of them either
            return None
        # A trace of log records alone: its tool calls came from an agent's log events.
        calls = list(ToolCall.objects.filter(project=project, trace_id=trace_id).order_by("start_time")[: MAX_SPANS + 1])
        if not calls and not LogRecord.objects.filter(project=project, trace_id=trace_id).exists():
            return None
        return Trace(trace_id, [], {call.span_id: call for call in calls[:MAX_SPANS]}, len(calls) > MAX_SPANS)
    truncated = len(spans) > MAX_SPANS
    spans = spans[:MAX_SPANS]
    # A tool call starts when its span does: the spans' time bounds prune the day partitions.
    calls = ToolCall.objects.filter(
        project=project, trace_id=trace_id, start_time__gte=spans[0].start_time, start_time__lte=spans[-1].start_time
    )
    return Trace(trace_id, spans, {call.span_id: call for call in calls}, truncated)


def tool_call_get(project: Project, trace_id: str, span_id: str) -> ToolCall | None:
    trace_id, span_id = normalize_id(trace_id), normalize_id(span_id)
    if not (is_trace_id(trace_id) and SPAN_ID_RE.match(span_id)):
        return None
    return ToolCall.objects.filter(project=project, trace_id=trace_id, span_id=span_id).first()


# --- the explorer's volume histogram ------------------------------------------------------------

# The filters rollups can answer: without an outcome, class or message filter the histogram is
# the rollups' attempts (each attempt is one row of the list), read from ~120 rollup rows.
ROLLUP_FILTERS = ("tool", *timerange.FILTER_NAMES)


@dataclass(frozen=True)
class Histogram:
    step: int
    starts: list[dt.datetime]
    counts: list[int]
    source: str  # "rollups" or "calls"


def tool_calls_histogram(project: Project, *, start: dt.datetime, end: dt.datetime, filters: CallFilters) -> Histogram | None:
    """The matching tool calls (attempts: the list's rows) per step over [start, end), every step
    present. From the rollups when only tool, service, environment and agent are filtered; else
    from the calls themselves, grouped in SQL (one query; with a message search given up after
    SEARCH_TIMEOUT_MS on PostgreSQL, None then: the page says so)."""
    step = bucket_seconds_for(start, end)
    first = dt.datetime.fromtimestamp(int(start.timestamp()) // step * step, dt.UTC)
    starts = []
    moment = first
    while moment < end:
        starts.append(moment)
        moment += dt.timedelta(seconds=step)
    if not (filters.outcome or filters.error_class or filters.q):
        dims = {name: getattr(filters, name) for name in ROLLUP_FILTERS if getattr(filters, name)}
        points = metric_series(project, start=start, end=end, step=step, **dims)
        return Histogram(step, [point["start"] for point in points], [point["attempts"] for point in points], "rollups")
    grouped = (
        tool_calls_query(project, start=start, end=end, filters=filters)
        .annotate(slot=BucketStart("start_time", step))
        .values("slot")
        .annotate(count=Count("pk"))
        .order_by()
    )
    try:
        if filters.q and connection.vendor == "postgresql":  # no index serves "contains": bounded as the page is
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL statement_timeout = {int(SEARCH_TIMEOUT_MS)}")
                rows = list(grouped)
        else:
            rows = list(grouped)
    except OperationalError as exc:
        if getattr(exc.__cause__, "sqlstate", None) != QUERY_CANCELED:
            raise
        return None
    counts = dict.fromkeys(starts, 0)
    for row in rows:
        slot = row["slot"]
        if isinstance(slot, str):  # SQLite: raw text, naive UTC
            slot = dt.datetime.fromisoformat(slot)
        if slot.tzinfo is None:
            slot = slot.replace(tzinfo=dt.UTC)
        if slot in counts:
            counts[slot] += row["count"]
    return Histogram(step, starts, list(counts.values()), "calls")
