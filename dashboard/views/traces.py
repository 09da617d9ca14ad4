"""The traces explorer (tool calls, filtered, newest first, keyset pages) and one trace's detail."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, path, reverse

from dashboard import timerange, waterfall
from dashboard.charts.tools import calls_histogram_figure
from dashboard.selectors import calls as call_selectors
from dashboard.selectors import logs as log_selectors
from dashboard.selectors import traces as trace_selectors
from dashboard.views.common import PageScope, page_scope, step_label
from ingest.taxonomy import CONTRACT_CHECKS, ERROR_CLASSES

# A value longer than this (or with a line break) is shown as a wrapped block, not inline.
LONG_VALUE_CHARS = 120
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@login_required
def traces_list(request, project):
    scope = page_scope(request, project)
    jump_text = (request.GET.get("trace") or "").strip()
    jump_error = ""
    if jump_text:
        trace_id = trace_selectors.normalize_id(jump_text)
        if not trace_selectors.is_trace_id(trace_id):
            jump_error = f"{jump_text[:80]!r} is not a trace id: a trace id is 32 hexadecimal characters (0-9, a-f)."
        elif not trace_selectors.trace_exists(scope.project, trace_id):
            jump_error = f"There is no trace {trace_id} in {scope.project.name} (it may be older than the retention)."
        else:
            return redirect(reverse("trace", args=[scope.project.slug, trace_id]) + scope.querystring())

    filters, errors = trace_selectors.parse_call_filters(request.GET)
    before = after = None
    try:
        if request.GET.get("before"):
            before = trace_selectors.Cursor.decode(request.GET["before"])
        elif request.GET.get("after"):
            after = trace_selectors.Cursor.decode(request.GET["after"])
    except trace_selectors.CursorError as exc:
        errors["page"] = f"{exc}; showing the newest page"

    time_range = scope.time_range
    try:
        page = trace_selectors.tool_calls_page(
            scope.project, start=time_range.start, end=time_range.end, filters=filters, before=before, after=after,
            limit=trace_selectors.PAGE_SIZE,
        )
    except trace_selectors.SearchTooSlow as exc:
        errors["q"] = f"The {exc}."
        page = trace_selectors.CallsPage([], older=None, newer=None)
    histogram = None if "q" in errors else trace_selectors.tool_calls_histogram(
        scope.project, start=time_range.start, end=time_range.end, filters=filters
    )
    for call in page.calls:  # rows link to their trace, tool names to the tool's page
        call.trace_url = reverse("trace", args=[scope.project.slug, call.trace_id]) + scope.querystring() + f"#call-{call.span_id}"
        call.tool_url = _tool_url(scope, call.tool)
    choices = trace_selectors.filter_choices(scope.project, start=time_range.start, end=time_range.end)
    return render(
        request,
        "dashboard/traces.html",
        scope.context(
            calls=page.calls,
            call_filters=filters,
            filter_errors=list(errors.values()),
            dimensions={name: _with_selected(choices[name], getattr(filters, name)) for name in timerange.FILTER_NAMES},
            tools=_with_selected(choices["tool"], filters.tool),
            error_classes=ERROR_CLASSES,
            outcomes=trace_selectors.OUTCOME_LABELS,
            # One form: the range, the dimensions and the explorer's own filters together; the jump form keeps them.
            range_params={**time_range.params(), **filters.params()},
            histogram=histogram,
            histogram_figure=calls_histogram_figure(
                histogram.starts, histogram.counts, step_label=step_label(histogram.step)
            ) if histogram and any(histogram.counts) else None,
            histogram_step=step_label(histogram.step) if histogram else "",
            older_url=_page_url(scope, filters, before=page.older) if page.older else "",
            newer_url=_page_url(scope, filters, after=page.newer) if page.newer else "",
            jump_text=jump_text,
            jump_error=jump_error,
            paged=before is not None or after is not None,
        ),
    )


def _tool_url(scope: PageScope, tool: str) -> str:
    """The tool's page (keeping range and filters), or "" when a stored name cannot be a URL path."""
    try:
        return reverse("tool", args=[scope.project.slug, tool]) + scope.querystring()
    except NoReverseMatch:
        return ""


def _with_selected(values: list[str], selected: str) -> list[str]:
    """The choices, plus a selected value the rollups have not seen yet (so it survives a reload).

    An empty value (no agent, say) cannot be filtered on: it would read as "all".
    """
    values = [value for value in values if value]
    return values if not selected or selected in values else sorted([*values, selected])


def _page_url(scope: PageScope, filters: trace_selectors.CallFilters, **cursor) -> str:
    return timerange.querystring(scope.time_range, None, **filters.params(), **cursor)


# --- one trace ------------------------------------------------------------------------------


@dataclass
class SpanView:
    row: waterfall.Row
    call: Any  # its ToolCall, for a tool span
    attributes: list[tuple[str, str, bool]]  # (key, value as text, long)
    resource: list[tuple[str, str, bool]]
    events: list[dict] = field(default_factory=list)

    @property
    def span(self):
        return self.row.span


def _value_text(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _pairs(mapping) -> list[tuple[str, str, bool]]:
    if not isinstance(mapping, dict):
        return []
    pairs = []
    for key in sorted(mapping, key=str):
        text = _value_text(mapping[key])
        pairs.append((str(key), text, len(text) > LONG_VALUE_CHARS or "\n" in text))
    return pairs


def _events(span, trace_start_ns: int) -> list[dict]:
    events = []
    for event in span.events if isinstance(span.events, list) else []:
        if not isinstance(event, dict):
            continue
        time_ns = event.get("time_ns")
        offset_ms = (time_ns - trace_start_ns) / 1e6 if isinstance(time_ns, int) and time_ns else None
        events.append({"name": str(event.get("name", "")), "offset_ms": offset_ms, "attributes": _pairs(event.get("attributes"))})
    return events


def _contract_rows(call) -> list[dict]:
    checks = call.contract if isinstance(call.contract, dict) else {}
    return [
        {"name": name, "description": description, "passed": checks[name]}
        for name, description in CONTRACT_CHECKS
        if name in checks
    ]


@login_required
def trace_detail(request, project, trace_id):
    scope = page_scope(request, project)
    trace = trace_selectors.trace_get(scope.project, trace_id)
    if trace is None:
        raise Http404("no such trace in this project")
    layout = waterfall.build(trace.spans)
    started = _started(scope.project, trace, layout)
    start_ns = (started - EPOCH) // dt.timedelta(microseconds=1) * 1000
    views = []
    for row in layout.rows:
        call = trace.calls.get(row.span.span_id)
        if call is not None:
            _prepare_call(call)
        views.append(
            SpanView(row, call, _pairs(row.span.attributes), _pairs(row.span.resource_attributes), _events(row.span, start_ns))
        )
    calls = [view.call for view in views if view.call is not None]
    if not trace.spans:  # a trace of log records alone: its tool calls have no span to hang on
        calls = sorted(trace.calls.values(), key=lambda call: (call.start_time, call.span_id))
        for call in calls:
            _prepare_call(call)
    return render(
        request,
        "dashboard/trace.html",
        scope.context(
            trace=trace,
            started=started,
            waterfall=layout,
            spans=views,
            calls=calls,
            failed_calls=sum(not call.ok for call in calls),
            services=sorted({span.service for span in trace.spans}),
            logical_calls=call_selectors.trace_calls(scope.project, trace),  # templates/dashboard/_trace_calls.html
            **_trace_logs_context(scope.project, trace, start_ns),  # templates/dashboard/_trace_logs.html
        ),
    )


def _prepare_call(call) -> None:
    call.contract_rows = _contract_rows(call)
    call.arguments_text = None if call.arguments is None else _value_text(call.arguments)
    call.result_text = None if call.result is None else _value_text(call.result)


def _started(project, trace, layout) -> dt.datetime:
    """Where the trace's offsets count from: its first span, else (a trace of log records
    alone) its first tool call or log record."""
    if layout.start is not None:
        return layout.start
    moments = [call.start_time for call in trace.calls.values()]
    first_log = log_selectors.trace_logs(project, trace.trace_id)[:1]
    return min(moments + [record.time for record in first_log], default=EPOCH)


def _trace_logs_context(project, trace, trace_start_ns: int) -> dict:
    """The trace's log records for _trace_logs.html: each with its time offset, severity, body
    and attributes as text, and the span it belongs to (its own span id, else the tool call
    whose call id it names)."""
    records = log_selectors.trace_logs(project, trace.trace_id)
    truncated = len(records) > log_selectors.MAX_LOG_RECORDS
    span_ids = {span.span_id for span in trace.spans}
    by_call_id = {call.call_id: call.span_id for call in trace.calls.values() if call.call_id}
    rows = []
    for record in records[: log_selectors.MAX_LOG_RECORDS]:
        time_ns = (record.time - EPOCH) // dt.timedelta(microseconds=1) * 1000
        body = None if record.body is None else _value_text(record.body)
        linked = record.span_id if record.span_id in span_ids else by_call_id.get(record.call_id, "") if record.call_id else ""
        rows.append({
            "record": record,
            "offset_ms": (time_ns - trace_start_ns) / 1e6,
            "severity": log_selectors.severity_name(record.severity_number, record.severity_text),
            "error": record.severity_number >= 17,
            "body": body,
            "body_long": body is not None and (len(body) > LONG_VALUE_CHARS or "\n" in body),
            "attributes": _pairs(record.attributes),
            "linked_span": linked,
            "linked_call": linked in trace.calls,
        })  # fmt: skip
    return {"trace_logs": rows, "trace_logs_truncated": truncated}


urlpatterns = [
    path("p/<slug:project>/traces/", traces_list, name="traces"),
    path("p/<slug:project>/traces/<str:trace_id>/", trace_detail, name="trace"),
]
