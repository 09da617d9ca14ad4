"""The MCP tools: thin adapters over the selectors and services the pages and the REST API use.

Each tool validates its arguments (a bad one is a `validation` envelope naming it), finds the
project among the caller's (an outsider's slug is `not_found`, as the API's 404), calls one
selector or service, and answers structured JSON with a one-line summary. The output shapes
are the REST API's serializers (dashboard/api/*.py), so a field means the same on both.
Synchronous: server.py runs them off the event loop, one database connection per thread.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.http import Http404
from django.utils import timezone
from mcp.types import CallToolResult, Tool, ToolAnnotations

from dashboard import scoping, timerange, tokens
from dashboard.alerting.lifecycle import alert_user_acknowledge
from dashboard.api.alerts import AlertSerializer, _labelled
from dashboard.api.eval_serializers import CaseSerializer, RunSerializer
from dashboard.api.traces import LogicalCallSerializer, ToolCallSummarySerializer
from dashboard.mcp.errors import ToolError, not_found, ok_result, validation
from dashboard.models import ApiToken
from dashboard.selectors import alerts as alert_selectors
from dashboard.selectors import calls as call_selectors
from dashboard.selectors import traces as trace_selectors
from dashboard.selectors.tools import open_alerts, tool_detail, tools_overview, top_fingerprints, totals_of
from evals import selectors as eval_selectors
from evals import services as eval_services
from ingest import taxonomy
from ingest.models import Project

MAX_SERIES_POINTS = 24  # an agent reads a trend, not a chart
MAX_TRACE_SPANS = 200
RANGE_HELP = f"one of {', '.join(timerange.PRESETS)} (default {timerange.DEFAULT_RANGE}), or custom with start and end"


@dataclass(frozen=True)
class Principal:
    """Who calls: a user and the token presented (None: a local admin on stdio, `--user`)."""

    user: Any
    token: ApiToken | None = None


def principal_has_scope(principal: Principal, scope: str) -> bool:
    """The one scope check of the MCP server: the token's scopes (dashboard/tokens.py); a local
    `--user` session has no token, so, like a browser session, only the user's role limits it."""
    return principal.token is None or tokens.token_has_scope(principal.token, scope)


@dataclass
class Call:
    """One tool call: who, the arguments, and the project once a tool has resolved it (for the access log)."""

    principal: Principal
    arguments: dict[str, Any]
    project: Project | None = None
    now: dt.datetime = field(default_factory=timezone.now)

    def text(self, name: str, *, required: bool = False, max_chars: int = 256, hint: str = "") -> str:
        value = self.arguments.get(name)
        if value is None or value == "":
            if required:
                raise validation(name, f"{name} is required", hint or f"pass {name}")
            return ""
        if not isinstance(value, str):
            raise validation(name, f"{name} must be a string, not {type(value).__name__}", hint or f"pass {name} as a string")
        value = value.strip()
        if len(value) > max_chars:
            raise validation(name, f"{name} is longer than {max_chars} characters", f"shorten {name}")
        return value

    def integer(self, name: str, *, default: int, low: int, high: int) -> int:
        value = self.arguments.get(name, default)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise validation(name, f"{name}={value!r} is not a whole number from {low} to {high}", f"pass {name} between {low} and {high}")
        return value

    def project_arg(self) -> Project:
        slug = self.text("project", required=True, max_chars=100, hint="pass a project slug; list_projects lists yours")
        try:
            self.project = scoping.project_for_user(self.principal.user, slug)
        except Http404:
            raise not_found("project", f"no project {slug!r} among yours", "call list_projects for the slugs you can use") from None
        return self.project

    def time_range(self) -> timerange.TimeRange:
        params = {name: self.text(name, max_chars=40) for name in ("range", "start", "end")}
        try:
            return timerange.parse_range(params, self.now)
        except timerange.RangeError as exc:
            raise validation(exc.parameter, str(exc), RANGE_HELP) from None


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    scope: str  # tokens.READ or tokens.ADMIN
    properties: dict[str, dict]
    required: tuple[str, ...]
    handler: Callable[[Call], CallToolResult]

    def as_tool(self) -> Tool:
        schema = {"type": "object", "properties": self.properties, "required": list(self.required), "additionalProperties": False}
        annotations = ToolAnnotations(
            title=self.title, read_only_hint=self.scope == tokens.READ, destructive_hint=False, idempotent_hint=True,
            open_world_hint=False,
        )  # fmt: skip
        return Tool(name=self.name, title=self.title, description=self.description, input_schema=schema, annotations=annotations)


# --- argument schemas -------------------------------------------------------------------------

PROJECT = {"project": {"type": "string", "description": "The project's slug (list_projects lists yours)."}}
RANGE = {
    "range": {"type": "string", "enum": [*timerange.PRESETS, timerange.CUSTOM], "description": f"Time range: {RANGE_HELP}."},
    "start": {"type": "string", "description": "Start of a custom range, ISO 8601 (UTC unless an offset is given)."},
    "end": {"type": "string", "description": "End of a custom range, ISO 8601."},
}
DIMENSIONS = {name: {"type": "string", "description": f"Only calls of this {name}."} for name in timerange.FILTER_NAMES}


def _rates(row: dict) -> dict:
    keys = ("calls", "errors", "retries", "wasted_retries", "escalations", "error_rate", "retry_rate", "escalation_rate")
    return {key: row.get(key) for key in keys}


def _by_class(row: dict) -> dict[str, int]:
    return {name: row[f"err_{name}"] for name in taxonomy.ERROR_CLASSES if row.get(f"err_{name}")}


def _range(time_range: timerange.TimeRange) -> dict:
    return {"key": time_range.key, "start": time_range.start, "end": time_range.end}


# --- the tools --------------------------------------------------------------------------------


def list_projects(call: Call) -> CallToolResult:
    projects = [{"slug": project.slug, "name": project.name} for project in scoping.projects_for_user(call.principal.user)]
    return ok_result(f"{len(projects)} project(s).", {"projects": projects})


def tool_health(project: Project, time_range: timerange.TimeRange) -> dict:
    """The project's tool health over the range: totals, each tool's rates and contract score
    (worst error rate first), the open alerts. The feed (dashboard/feed/) can answer this later."""
    rows = tools_overview(project, start=time_range.start, end=time_range.end)["rows"]
    alerts = open_alerts(project)
    kinds: dict[str, set[str]] = {}
    for alert in alerts:
        kinds.setdefault(alert.tool, set()).add(alert.kind)
    tools = [
        {"tool": row["tool"], **_rates(row), "errors_by_class": _by_class(row), "contract_score": row["contract_score"],
         "p95_ms": row["p95_ms"], "open_alert_kinds": sorted(kinds.get(row["tool"], ()))}
        for row in sorted(rows, key=lambda row: (-(row["error_rate"] or 0), -row["calls"], row["tool"]))
    ]  # fmt: skip
    return {
        "project": project.slug, "range": _range(time_range), "totals": _rates(totals_of(rows)), "tools": tools,
        "open_alerts": [{"id": a.pk, "tool": a.tool, "kind": a.kind, "status": a.status, "summary": a.summary,
                         "opened_at": a.opened_at} for a in alerts],
    }  # fmt: skip


def tool_health_overview(call: Call) -> CallToolResult:
    project, time_range = call.project_arg(), call.time_range()
    data = tool_health(project, time_range)
    failing = [row["tool"] for row in data["tools"] if row["errors"]]
    summary = (
        f"{project.slug}, {time_range.label}: {data['totals']['calls']} calls, {len(data['tools'])} tools, "
        f"{len(failing)} with failures, {len(data['open_alerts'])} open alert(s)."
    )
    return ok_result(summary, data)


def _series_step(start: dt.datetime, end: dt.datetime) -> int:
    # One point fewer than the most: the first step starts at or before `start` (floored), so may add one.
    seconds = (end - start).total_seconds() / (MAX_SERIES_POINTS - 1)
    for step in (300, 600, 900, 1200, 1800):
        if seconds <= step:
            return step
    return -(-int(seconds) // 3600) * 3600


def tool_report(call: Call) -> CallToolResult:
    project, time_range = call.project_arg(), call.time_range()
    tool = call.text("tool", required=True, hint="pass a tool name; tool_health_overview lists them")
    start, end = time_range.start, time_range.end
    detail = tool_detail(project, tool, start=start, end=end, step=_series_step(start, end))
    if not detail["has_calls"]:
        seen = [row["tool"] for row in tools_overview(project, start=start, end=end)["rows"]][:20]
        raise not_found(
            "tool", f"no calls of tool {tool!r} in {project.slug} over the {time_range.label}",
            f"use one of: {', '.join(seen)}" if seen else "widen the range (e.g. 7d or 30d)",
        )  # fmt: skip
    totals = detail["totals"]
    data = {
        "project": project.slug, "tool": tool, "range": _range(time_range), "totals": _rates(totals),
        "errors_by_class": _by_class(totals), "contract_score": totals.get("contract_score"), "latency": detail["latency"],
        "contract_checks": detail["contract"],
        "fingerprints": top_fingerprints(project, tool, start=start, end=end),
        "step_seconds": detail["step"],
        "series": [{"start": p["start"], **_rates(p)} for p in detail["points"]],
    }  # fmt: skip
    summary = f"{tool} in {project.slug}, {time_range.label}: {totals['calls']} calls, {totals['errors']} failed."
    return ok_result(summary, data)


def search_failed_calls(call: Call) -> CallToolResult:
    project, time_range = call.project_arg(), call.time_range()
    params = {"outcome": "failed", **{name: call.text(name) for name in ("tool", "q", *timerange.FILTER_NAMES)}}
    params["class"] = call.text("error_class")
    filters, errors = trace_selectors.parse_call_filters(params)
    for name, message in errors.items():
        name = "error_class" if name == "class" else name
        raise validation(name, message, f"error_class is one of {', '.join(taxonomy.ERROR_CLASSES)}" if name == "error_class" else f"shorten {name}")
    limit = call.integer("limit", default=20, low=1, high=50)
    before = None
    if cursor := call.text("cursor", max_chars=100):
        try:
            before = trace_selectors.Cursor.decode(cursor)
        except trace_selectors.CursorError as exc:
            raise validation("cursor", f"{exc}", "pass the next_cursor of a previous answer, or no cursor") from None
    try:
        page = trace_selectors.tool_calls_page(
            project, start=time_range.start, end=time_range.end, filters=filters, before=before, after=None, limit=limit
        )
    except trace_selectors.SearchTooSlow as exc:
        raise validation("q", str(exc), "narrow the range or name the tool") from None
    calls = ToolCallSummarySerializer(page.calls, many=True).data
    summary = f"{len(calls)} failed call(s) in {project.slug}, {time_range.label}" + ("; more with next_cursor." if page.older else ".")
    return ok_result(summary, {"project": project.slug, "range": _range(time_range), "calls": calls, "next_cursor": page.older})


TRACE_CALL_FIELDS = (
    *trace_selectors.LIST_FIELDS, "error_type", "error_code", "retryable", "field", "suggestion", "retry_after_ms", "contract",
)


def get_trace(call: Call) -> CallToolResult:
    project = call.project_arg()
    trace_id = trace_selectors.normalize_id(call.text("trace_id", required=True, max_chars=64))
    if not trace_selectors.is_trace_id(trace_id):
        raise validation("trace_id", f"trace_id {trace_id!r} is not 32 hex digits", "pass a trace_id from search_failed_calls")
    trace = trace_selectors.trace_get(project, trace_id)
    if trace is None:
        raise not_found("trace_id", f"no trace {trace_id} in {project.slug}", "it may be past the project's retention; search_failed_calls lists recent ones")
    tool_calls = sorted(trace.calls.values(), key=lambda c: (c.start_time, c.span_id))
    spans = [
        {"span_id": s.span_id, "parent_span_id": s.parent_span_id, "name": s.name, "start_time": s.start_time,
         "duration_ms": (s.end_time - s.start_time).total_seconds() * 1000, "status_code": s.status_code}
        for s in trace.spans[:MAX_TRACE_SPANS]
    ]  # fmt: skip
    data = {
        "project": project.slug, "trace_id": trace.trace_id, "truncated": trace.truncated or len(trace.spans) > MAX_TRACE_SPANS,
        "spans": spans,
        "tool_calls": [{name: getattr(c, name) for name in TRACE_CALL_FIELDS} for c in tool_calls],
        "calls": LogicalCallSerializer(call_selectors.trace_calls(project, trace), many=True).data,
    }  # fmt: skip
    failed = sum(1 for c in tool_calls if not c.ok)
    summary = f"trace {trace.trace_id}: {len(trace.spans)} spans, {len(tool_calls)} tool calls ({failed} failed), {len(data['calls'])} logical calls."
    return ok_result(summary, data)


def list_alerts(call: Call) -> CallToolResult:
    project = call.project_arg()
    try:
        filters = alert_selectors.parse_alert_filters({name: call.text(name) for name in ("status", "kind", "tool")})
    except alert_selectors.AlertFilterError as exc:
        raise validation(exc.field, exc.message, f"leave {exc.field} out for every alert") from None
    limit = call.integer("limit", default=50, low=1, high=100)
    alerts = [_labelled(alert) for alert in alert_selectors.alerts_for_project(project, filters)[:limit]]
    data = {"project": project.slug, "alerts": AlertSerializer(alerts, many=True).data}
    return ok_result(f"{len(alerts)} alert(s) in {project.slug}, open and acknowledged first.", data)


def acknowledge_alert(call: Call) -> CallToolResult:
    project = call.project_arg()
    alert_id = call.integer("alert_id", default=0, low=1, high=2**63 - 1)
    if not alert_id:
        raise validation("alert_id", "alert_id is required", "pass an alert id from list_alerts")
    try:
        alert = alert_selectors.alert_for_project(project, alert_id)
    except Http404:
        raise not_found("alert_id", f"no alert #{alert_id} in {project.slug}", "list_alerts lists the project's alerts") from None
    result = alert_user_acknowledge(alert=alert, user=call.principal.user, now=call.now)
    data = {"changed": result.changed, "detail": result.message, "alert": AlertSerializer(_labelled(result.alert)).data}
    return ok_result(result.message, data)


def promote_failed_call(call: Call) -> CallToolResult:
    project = call.project_arg()
    trace_id = trace_selectors.normalize_id(call.text("trace_id", required=True, max_chars=64))
    span_id = trace_selectors.normalize_id(call.text("span_id", required=True, max_chars=32))
    title = call.text("title", max_chars=200)
    tags = call.arguments.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise validation("tags", "tags must be a list of strings", 'pass tags like ["billing", "regression"]')
    try:
        promotion = eval_services.case_promote(
            project=project, trace_id=trace_id, span_id=span_id, user=call.principal.user, title=title, tags=tags
        )
    except eval_services.EvalError as exc:
        if exc.missing:
            raise not_found(exc.field, exc.message, "promote a failed call that search_failed_calls lists") from None
        raise validation(exc.field, exc.message, "promote a failed call that search_failed_calls lists") from None
    case = promotion.case
    data = {
        "created": promotion.created, "case": {"id": case.pk, "title": case.title, "tool": case.tool, "status": case.status,
                                              "latest_version": case.latest_version, "trace_id": case.trace_id,
                                              "span_id": case.span_id, "error_class": case.error_class},
    }  # fmt: skip
    verb = "Promoted to" if promotion.created else "Already promoted:"
    return ok_result(f"{verb} eval case #{case.pk} ({case.title}).", data)


def list_eval_cases(call: Call) -> CallToolResult:
    project = call.project_arg()
    try:
        filters = eval_selectors.parse_case_filters({name: call.text(name) for name in ("status", "tool", "tag", "q")})
    except eval_services.EvalError as exc:
        raise validation(exc.field, exc.message, "status is one of draft, pinned, retired, all") from None
    limit = call.integer("limit", default=50, low=1, high=100)
    context = {"project": project}
    cases = CaseSerializer(eval_selectors.case_list(project, filters)[:limit], many=True, context=context).data
    runs = RunSerializer(eval_selectors.run_list(project)[:5], many=True, context=context).data
    summary = f"{len(cases)} eval case(s) in {project.slug}; the last {len(runs)} run(s)."
    return ok_result(summary, {"project": project.slug, "cases": cases, "recent_runs": runs})


def _str(description: str, **extra) -> dict:
    return {"type": "string", "description": description, **extra}


READ, ADMIN = tokens.READ, tokens.ADMIN
TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("list_projects", "Your projects", "The Toolwatch projects you are a member of (slug and name).", READ, {}, (), list_projects),
    ToolSpec(
        "tool_health_overview", "Tool-health overview",
        "Every tool of a project over a range: calls, error/retry/escalation rates, wasted retries, errors by class, "
        "contract score, p95 latency and open alert kinds, worst error rate first; the project's totals and open alerts.",
        READ, {**PROJECT, **RANGE}, ("project",), tool_health_overview,
    ),
    ToolSpec(
        "tool_report", "One tool's report",
        "One tool over a range: rates, errors by class, latency percentiles, its error-contract checks (share passed), "
        "its top failure fingerprints with first and last seen, and a rate series of at most 24 points.",
        READ, {**PROJECT, "tool": _str("The tool's exact name."), **RANGE}, ("project", "tool"), tool_report,
    ),
    ToolSpec(
        "search_failed_calls", "Search failed calls",
        "Failed tool calls, newest first, filtered by tool, error class, message text and dimensions; "
        "pass next_cursor back as cursor for older ones.",
        READ,
        {**PROJECT, **RANGE, "tool": _str("Exact tool name."),
         "error_class": _str("Error class.", enum=list(taxonomy.ERROR_CLASSES)),
         "q": _str("Text the message contains (case-insensitive)."), **DIMENSIONS,
         "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Calls per page (default 20)."},
         "cursor": _str("next_cursor of the previous page.")},
        ("project",), search_failed_calls,
    ),  # fmt: skip
    ToolSpec(
        "get_trace", "A trace and its logical calls",
        "One trace: its spans (at most 200), its tool calls with class, why (classified_by), envelope and contract "
        "checks, and its logical calls (attempts linked as the rollups link them: retries, wasted, blind, escalation).",
        READ, {**PROJECT, "trace_id": _str("32 hex digits.")}, ("project", "trace_id"), get_trace,
    ),
    ToolSpec(
        "list_alerts", "List alerts",
        "The project's alerts, open and acknowledged first, newest first; filter by status, kind or tool.",
        READ,
        {**PROJECT, "status": _str("Alert status.", enum=list(alert_selectors.STATUSES)),
         "kind": _str("Alert kind.", enum=list(alert_selectors.ALERT_KINDS)), "tool": _str("Exact tool name."),
         "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many (default 50)."}},
        ("project",), list_alerts,
    ),  # fmt: skip
    ToolSpec(
        "acknowledge_alert", "Acknowledge an alert",
        "Acknowledge an open alert (records your username). Needs the token's admin scope.",
        ADMIN, {**PROJECT, "alert_id": {"type": "integer", "minimum": 1, "description": "The alert's id (list_alerts)."}},
        ("project", "alert_id"), acknowledge_alert,
    ),
    ToolSpec(
        "promote_failed_call", "Promote a failed call to an eval case",
        "Make an eval case of a failed tool call (its arguments, failure and a frozen trace snapshot); promoting the "
        "same failure again returns the existing case. Needs the token's admin scope.",
        ADMIN,
        {**PROJECT, "trace_id": _str("32 hex digits."), "span_id": _str("16 hex digits: the failed tool call's span."),
         "title": _str("A title; default from the failure."),
         "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags for the case."}},
        ("project", "trace_id", "span_id"), promote_failed_call,
    ),  # fmt: skip
    ToolSpec(
        "list_eval_cases", "List eval cases",
        "The project's eval cases, newest first, each with its last result (passed/failed, regression) and recurrence, "
        "and the project's last five eval runs.",
        READ,
        {**PROJECT, "status": _str("draft, pinned, retired or all (default: draft and pinned)."),
         "tool": _str("Exact tool name."), "tag": _str("Cases with this tag."), "q": _str("Search text."),
         "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many (default 50)."}},
        ("project",), list_eval_cases,
    ),  # fmt: skip
)
TOOLS_BY_NAME = {spec.name: spec for spec in TOOLS}


def scope_error(spec: ToolSpec) -> ToolError:
    return ToolError(
        taxonomy.PERMISSION, f"this token lacks the '{spec.scope}' scope, which {spec.name} needs",
        suggestion=f"create a token with the '{spec.scope}' scope under /account/tokens/",
    )  # fmt: skip
