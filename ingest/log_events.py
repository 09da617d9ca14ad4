"""Agents' OTLP log events, recognised: tool calls of their own, and evidence for tool spans.

Pure: the standard library and the project's other pure modules only (normalize, records).
docs/contract/logs.md lists every shape with its documented source; this module walks them.

`otlp.iter_log_records` turns each OTLP LogRecord into a `LogRecordRecord` (flattened,
redacted, with its qualified event name, its call id and a digest). Then:

- `tool_call_of(record)` is the tool call a *tool-call shape* describes (Claude Code's
  `claude_code.tool_result`, OpenAI Codex's `codex.tool_result`, Gemini CLI's
  `gemini_cli.tool_call`): a synthetic span built from the event, classified by
  `normalize.normalize_tool_call` like any span, so the row is rolled up, drift-checked and
  promotable as span-based calls are. Its trace id is derived from the agent's session id
  (`session.id`, Codex's `conversation.id`), so a session's calls are one trace; its span id
  from the call id (`tool_use_id`, `call_id`), else from the record's digest.
- `evidence_of(record)` is what a record adds to the classification of a tool span: an
  `exception` event (OTel exception attributes on a log, a failed tool-call shape, Claude
  Code's rejected `claude_code.tool_decision`) or a result (`gen_ai.tool.message`). Each
  has a key: `("span", trace_id, span_id)` for a log emitted inside the tool span itself,
  `("call", trace_id, call_id)` for a record naming the tool call by id within its trace.
- `merged_evidence(records)` folds a span's evidence into one `Evidence`, in an order that
  does not depend on arrival (time, then digest), for `normalize_tool_call(log_evidence=...)`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ingest import normalize

# Attribute values read as normalize reads them (one definition of these coercions).
from ingest.normalize import _first_text, _text
from ingest.records import SpanRecord, ToolCallRecord

# The instrumentation scope Claude Code's event logger uses; its records carry the bare
# `event.name` ("tool_result") and the qualified name as body ("claude_code.tool_result").
CLAUDE_CODE_SCOPE = "com.anthropic.claude_code.events"
_QUALIFIED = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$")
MAX_EVENT_NAME_CHARS = 256
MAX_CALL_ID_CHARS = 256

SPAN_KEY = "span"
CALL_KEY = "call"

EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"


@dataclass(slots=True)
class LogRecordRecord:
    """One OTLP log record, flattened, redacted and validated (ingest.otlp.iter_log_records)."""

    time_ns: int  # time_unix_nano, or observed_time_unix_nano when that is 0
    observed_ns: int
    trace_id: str = ""  # 32 hex, or "" when the record names no trace
    span_id: str = ""  # 16 hex, or ""
    severity_number: int = 0
    severity_text: str = ""
    event_name: str = ""  # qualified_event_name()
    body: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)
    flags: int = 0
    resource_attributes: dict[str, Any] = field(default_factory=dict)  # shared per resource: read-only
    resource_digest: bytes = b""
    scope_name: str = ""
    scope_version: str = ""
    service: str = "unknown_service"
    environment: str = ""
    call_id: str = ""  # record_call_id()
    digest: bytes = b""  # 16 bytes naming the record's whole content (replays dedupe on it)


@dataclass(slots=True)
class Evidence:
    """What log records add to a tool span before it is classified (normalize's hook)."""

    events: list[dict[str, Any]] = field(default_factory=list)  # appended to the span's events
    attributes: dict[str, Any] = field(default_factory=dict)  # used where the span has none


@dataclass(frozen=True, slots=True)
class ToolShape:
    """A documented agent event that describes one tool call."""

    event_name: str
    source: str  # where the shape is documented
    tool_keys: tuple[str, ...]
    call_id_keys: tuple[str, ...]
    session_keys: tuple[str, ...]
    arguments_keys: tuple[str, ...]
    result_keys: tuple[str, ...]
    error_keys: tuple[str, ...]  # the error message (a failed call)
    error_type_keys: tuple[str, ...]


TOOL_SHAPES: dict[str, ToolShape] = {
    shape.event_name: shape
    for shape in (
        ToolShape(
            "claude_code.tool_result",
            "https://code.claude.com/docs/en/monitoring-usage#tool-result-event",
            tool_keys=("tool_name", "name"),  # `name` in the first versions of the docs
            call_id_keys=("tool_use_id",),
            session_keys=("session.id",),
            arguments_keys=("tool_input",),
            result_keys=(),
            error_keys=("error",),
            error_type_keys=("error_type",),
        ),
        ToolShape(
            "codex.tool_result",
            "https://github.com/openai/codex/tree/main/docs (the config guide: otel, event catalog)",
            tool_keys=("tool_name",),
            call_id_keys=("call_id",),
            session_keys=("conversation.id",),
            arguments_keys=("arguments",),
            result_keys=("output",),
            error_keys=("output",),
            error_type_keys=(),
        ),
        ToolShape(
            "gemini_cli.tool_call",
            "https://geminicli.com/docs/cli/telemetry/#tools",
            tool_keys=("function_name",),
            call_id_keys=(),
            session_keys=("session.id",),
            arguments_keys=("function_args",),
            result_keys=(),
            error_keys=("error",),
            error_type_keys=("error_type",),
        ),
    )
}
# The session keys of each agent whose tool events are recognised, by event-name prefix.
_SESSION_KEYS = {shape.event_name.split(".", 1)[0]: shape.session_keys for shape in TOOL_SHAPES.values()}
# Shapes that are only evidence for a tool call described elsewhere (a span, a tool result).
CLAUDE_CODE_DECISION = "claude_code.tool_decision"  # code.claude.com/docs/en/monitoring-usage#tool-decision-event
GENAI_TOOL_MESSAGE = "gen_ai.tool.message"  # OTel GenAI semconv <= 1.36, gen-ai-events.md
REJECTING_DECISIONS = frozenset({"reject"})
# The conventions of tool-call rows made from log events (ToolCall.convention).
CONVENTIONS = frozenset(TOOL_SHAPES)


# --- names and ids ---------------------------------------------------------------------------


def qualified_event_name(event_name: str, attributes: dict[str, Any], body: Any, scope_name: str) -> str:
    """The record's event name: the LogRecord's own `event_name`, else a qualified `event.name`
    attribute, else a qualified string body (Claude Code), else the bare `event.name` under
    Claude Code's scope as `claude_code.<name>`, else the bare name as it is."""
    if event_name:
        return event_name[:MAX_EVENT_NAME_CHARS]
    attribute = attributes.get("event.name")
    attribute = attribute.strip() if isinstance(attribute, str) else ""
    if attribute and "." in attribute:
        return attribute[:MAX_EVENT_NAME_CHARS]
    if isinstance(body, str) and len(body) <= MAX_EVENT_NAME_CHARS and _QUALIFIED.match(body.strip()):
        if not attribute or body.strip().endswith("." + attribute):
            return body.strip()
    if attribute and scope_name == CLAUDE_CODE_SCOPE:
        return f"claude_code.{attribute}"[:MAX_EVENT_NAME_CHARS]
    return attribute[:MAX_EVENT_NAME_CHARS]


def record_call_id(event_name: str, attributes: dict[str, Any], body: Any) -> str:
    """The id of the tool call a record speaks of, or ""."""
    shape = TOOL_SHAPES.get(event_name)
    if shape is not None:
        return _first_text(attributes, shape.call_id_keys)[:MAX_CALL_ID_CHARS]
    if event_name == CLAUDE_CODE_DECISION:
        return _first_text(attributes, ("tool_use_id",))[:MAX_CALL_ID_CHARS]
    if event_name == GENAI_TOOL_MESSAGE and isinstance(body, dict):
        return _text(body.get("id")).strip()[:MAX_CALL_ID_CHARS]
    return _first_text(attributes, ("gen_ai.tool.call.id",))[:MAX_CALL_ID_CHARS]


def _hex(text: str, size: int) -> str:
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=size).digest()
    if not any(digest):  # all zeros is an invalid id
        digest = b"\x01" + digest[1:]
    return digest.hex()


def derived_trace_id(agent: str, session_id: str) -> str:
    """A stable trace id (32 hex) for an agent's session: every call of the session is one trace."""
    return _hex(f"toolwatch.session\x1f{agent}\x1f{session_id}", 16)


def derived_span_id(trace_id: str, call_key: str) -> str:
    """A stable span id (16 hex) for one call of a derived trace."""
    return _hex(f"toolwatch.call\x1f{trace_id}\x1f{call_key}", 8)


def session_trace_id(record: LogRecordRecord) -> str:
    """The derived trace id of the agent session a record belongs to ("" for none): any event
    of an agent whose tool events are recognised (claude_code.*, codex.*, gemini_cli.*) that
    names its session. The session's tool calls live in that trace (tool_call_key), so its
    page shows the session's records too, whether or not they also carry a trace context."""
    agent, dot, _ = record.event_name.partition(".")
    keys = _SESSION_KEYS.get(agent) if dot else None
    if not keys:
        return ""
    session = _first_text(record.attributes, keys) or _first_text(record.resource_attributes, keys)
    return derived_trace_id(agent, session) if session else ""


def tool_call_key(record: LogRecordRecord) -> tuple[str, str] | None:
    """(trace_id, span_id) of the tool-call row a tool-call shape makes, None for other records."""
    shape = TOOL_SHAPES.get(record.event_name)
    if shape is None:
        return None
    agent = shape.event_name.split(".", 1)[0]
    session = _first_text(record.attributes, shape.session_keys) or _first_text(record.resource_attributes, shape.session_keys)
    if session:
        trace_id = derived_trace_id(agent, session)
    elif record.trace_id:
        trace_id = record.trace_id
    else:
        trace_id = derived_trace_id(agent, "call:" + (record.call_id or record.digest.hex()))
    return trace_id, derived_span_id(trace_id, record.call_id or "record:" + record.digest.hex())


# --- tool calls from events --------------------------------------------------------------------


def tool_call_of(
    record: LogRecordRecord, *, escalation_tools: frozenset[str] = frozenset()
) -> tuple[SpanRecord, ToolCallRecord] | None:
    """The tool call a tool-call shape describes: (the span it stands for, its classified record).

    The span ends at the record's time and lasts `duration_ms`; a failed call (success false)
    has status Error, the error as status message and an `exception` event with the error
    type and message, so `normalize` classifies it exactly as it would the span.
    """
    shape = TOOL_SHAPES.get(record.event_name)
    key = tool_call_key(record)
    if shape is None or key is None:
        return None
    attrs = record.attributes
    tool = _first_text(attrs, shape.tool_keys) or normalize.UNNAMED_TOOL
    failed = _failed(shape, attrs)
    duration_ms = _number(attrs.get("duration_ms"))
    end_ns = record.time_ns
    start_ns = end_ns - int(duration_ms * 1_000_000) if duration_ms and 0 < duration_ms < 86_400_000 else end_ns
    span_attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if record.call_id:
        span_attrs["gen_ai.tool.call.id"] = record.call_id
    if (arguments := _first_value(attrs, shape.arguments_keys)) is not None:
        span_attrs["gen_ai.tool.call.arguments"] = arguments
    if (result := _first_value(attrs, shape.result_keys)) is not None:
        span_attrs["gen_ai.tool.call.result"] = result
    events = []
    message = ""
    if failed:
        message = _first_text(attrs, shape.error_keys)
        error_type = _first_text(attrs, shape.error_type_keys)
        if not error_type and _text(attrs.get("decision")).strip().lower() in REJECTING_DECISIONS:
            error_type = "PermissionDenied"
        events.append(_exception_event(record.time_ns, error_type, message))
    span = SpanRecord(
        trace_id=key[0],
        span_id=key[1],
        parent_span_id="",
        name=f"execute_tool {tool}",
        kind=1,
        start_ns=start_ns,
        end_ns=end_ns,
        status_code=2 if failed else 1,
        status_message=message,
        attributes=span_attrs,
        resource_attributes=record.resource_attributes,
        resource_digest=record.resource_digest,
        scope_name=record.scope_name,
        scope_version=record.scope_version,
        events=events,
        service=record.service,
        environment=record.environment,
    )
    call = normalize.normalize_tool_call(span, escalation_tools=escalation_tools)
    if call is None:  # cannot happen: the span is an execute_tool span
        return None
    call.convention = shape.event_name  # ToolCall.convention: 32 characters, every shape fits
    return span, call


def _failed(shape: ToolShape, attrs: dict[str, Any]) -> bool:
    success = attrs.get("success")
    if isinstance(success, bool):
        return not success
    text = _text(success).strip().lower()
    if text in ("false", "0", "no"):
        return True
    if text in ("true", "1", "yes"):
        return False
    # No success flag: failed when the shape's error fields say so.
    return bool(_first_text(attrs, shape.error_type_keys) or (shape.error_keys != shape.result_keys and _first_text(attrs, shape.error_keys)))


# --- evidence ----------------------------------------------------------------------------------


def evidence_of(record: LogRecordRecord) -> tuple[tuple[str, str, str], Evidence] | None:
    """(key, evidence) of a record that adds to a tool span's classification, else None.

    The key is (SPAN_KEY, trace_id, span_id) or (CALL_KEY, trace_id, call_id); a record with
    no trace id has none (it can belong to no stored span).
    """
    if not record.trace_id:
        return None
    attrs = record.attributes
    shape = TOOL_SHAPES.get(record.event_name)
    if shape is not None:
        if not record.call_id or not _failed(shape, attrs):
            return None
        error_type = _first_text(attrs, shape.error_type_keys)
        event = _exception_event(record.time_ns, error_type, _first_text(attrs, shape.error_keys))
        return (CALL_KEY, record.trace_id, record.call_id), Evidence(events=[event])
    if record.event_name == CLAUDE_CODE_DECISION:
        decision = _text(attrs.get("decision")).strip().lower()
        if not record.call_id or decision not in REJECTING_DECISIONS:
            return None
        source = _text(attrs.get("source") or attrs.get("decision_source")).strip() or "unknown"
        event = _exception_event(record.time_ns, "PermissionDenied", f"tool use rejected (decision source: {source})")
        return (CALL_KEY, record.trace_id, record.call_id), Evidence(events=[event])
    if record.event_name == GENAI_TOOL_MESSAGE:
        content = record.body.get("content") if isinstance(record.body, dict) else None
        if not record.call_id or content is None or content == "":
            return None
        return (CALL_KEY, record.trace_id, record.call_id), Evidence(attributes={"gen_ai.tool.call.result": content})
    exception_type = _text(attrs.get(EXCEPTION_TYPE)).strip()
    exception_message = _text(attrs.get(EXCEPTION_MESSAGE))
    if (exception_type or exception_message.strip()) and record.span_id:
        event = _exception_event(record.time_ns, exception_type, exception_message)
        return (SPAN_KEY, record.trace_id, record.span_id), Evidence(events=[event])
    return None


def evidence_for(records: Iterable[LogRecordRecord], trace_id: str, span_id: str, call_id: str) -> list[LogRecordRecord]:
    """The records among `records` whose evidence belongs to the tool span (trace_id, span_id)
    of call id `call_id`."""
    keys = {(SPAN_KEY, trace_id, span_id)}
    if call_id:
        keys.add((CALL_KEY, trace_id, call_id))
    found = []
    for record in records:
        item = evidence_of(record)
        if item is not None and item[0] in keys:
            found.append(record)
    return found


def merged_evidence(records: Iterable[LogRecordRecord]) -> Evidence | None:
    """The evidence of these records as one, ordered by (time, digest): the same set of records
    gives the same evidence whatever order they arrived in. None when there is none."""
    merged = Evidence()
    for record in sorted(records, key=lambda r: (r.time_ns, r.digest)):
        item = evidence_of(record)
        if item is None:
            continue
        merged.events.extend(item[1].events)
        for key, value in item[1].attributes.items():
            merged.attributes.setdefault(key, value)
    return merged if merged.events or merged.attributes else None


def _exception_event(time_ns: int, exception_type: str, message: str) -> dict[str, Any]:
    attributes = {}
    if exception_type:
        attributes[EXCEPTION_TYPE] = exception_type
    if message:
        attributes[EXCEPTION_MESSAGE] = message
    return {"name": "exception", "time_ns": time_ns, "attributes": attributes}


# --- digests -------------------------------------------------------------------------------


def record_digest(record: LogRecordRecord) -> bytes:
    """16 bytes naming everything a record says (its resource by digest): a resent record is
    the same bytes, so the same digest, and is stored once."""
    content = [
        record.time_ns, record.observed_ns, record.trace_id, record.span_id, record.severity_number,
        record.severity_text, record.event_name, record.body, record.attributes, record.flags,
        record.resource_digest.hex(), record.scope_name, record.scope_version,
    ]  # fmt: skip
    canonical = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.blake2b(canonical.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def with_digest(record: LogRecordRecord) -> LogRecordRecord:
    return dataclasses.replace(record, digest=record_digest(record))


# --- small coercions -------------------------------------------------------------------------


def _first_value(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None
