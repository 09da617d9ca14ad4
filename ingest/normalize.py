"""Normalise one tool span into a `ToolCallRecord` (docs/contract/spans.md). Pure: stdlib only.

Contract:
- `is_tool_span(span)` names the convention that marks a span as a tool call, or "".
- `normalize_tool_call(span, *, escalation_tools, children)` returns the record, or None for
  any other span. Every field is filled from the span alone, but for a sender that states
  the outcome on a child span (Claude Code's `claude_code.tool.execution`,
  `taxonomy.NATIVE_TOOL_SPANS`): that child, when given among `children`, decides whether
  the call failed and why. The agent of an ancestor is resolved later (`ingest.linking`),
  since parents arrive after their children.
- `contract_checks(record)`, `record_fingerprint(record)`, `fingerprint_message(msg)`,
  `arguments_hash(args)`, `parse_value(value)` and `recommended_action(cls)` stand on
  their own: the eval runner judges its outcomes with them.

Decisions worth knowing:
- Status Ok is final (OTel trace API: analysis tools SHOULD suppress errors when status
  is Ok). `error.type` and exception events on an Ok span were handled, so they neither
  fail nor classify it. Its *result* can still be an error envelope: then the tool handed
  a failure to the model, a soft failure, and that counts (docs/contract/error-classes.md).
- The status message is read only with status Error (trace API: it "MUST only be used
  with Error").
- A result is an error envelope only when structured: `isError`, an `error` key,
  `success`/`ok` false, or a recognised error-class key. Text is never searched for
  "error" (seed 3 calls that fragile) and a truncated JSON string stays text.
- Classification walks the evidence of docs/contract/error-classes.md#evidence-order in order and keeps the first that decides.
  `classified_by` says which, as "<source>:<key>=<value>" pieces joined by " + "; the
  sources are `envelope` (span `tool.error.*` attributes), `result` and `status_message`.
- Every spelling and mapping lives in `ingest.taxonomy`; this module only walks it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ingest import taxonomy
from ingest.records import SpanRecord, ToolCallRecord
from ingest.taxonomy import recommended_action

__all__ = [
    "arguments_hash",
    "contract_checks",
    "fingerprint_message",
    "is_tool_span",
    "normalize_tool_call",
    "parse_value",
    "recommended_action",
    "record_fingerprint",
]

STATUS_OK = 1
STATUS_ERROR = 2

# Where each convention keeps a field (docs/contract/spans.md#tool-call-fields); first present wins.
TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name", "traceloop.entity.name")
CALL_ID_KEYS = ("gen_ai.tool.call.id", "tool.id", "tool_call.id")
ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input", "mcp.request.argument")
RESULT_KEYS = ("gen_ai.tool.call.result", "output.value", "traceloop.entity.output", "mcp.response.value")
CONVENTION_KIND_KEYS = ("gen_ai.operation.name", "openinference.span.kind", "traceloop.span.kind", "mcp.method.name")
EXCEPTION_EVENTS = frozenset({"exception", "gen_ai.client.operation.exception"})
HTTP_STATUS_ATTRS = ("http.response.status_code", "http.status_code")
# rpc.grpc.status_code (deprecated 1.39) -> rpc.response.status_code -> rpc.status_code (main).
RPC_STATUS_ATTRS = ("rpc.status_code", "rpc.response.status_code", "rpc.grpc.status_code", "rpc.jsonrpc.error_code")

_SPAN_NAME_TOOL = (
    re.compile(r"^execute_tool\s+(?P<tool>\S.*)$", re.DOTALL),
    re.compile(r"^tools/call\s+(?P<tool>\S.*)$", re.DOTALL),
    re.compile(r"^(?P<tool>.+)\.tool$", re.DOTALL),
)

# Column widths of ingest.models.ToolCall: a longer value would fail the whole insert.
MAX_CHARS = {
    "tool": 256, "call_id": 256, "tool_type": 64, "classified_by": 512, "error_type": 256,
    "error_code": 256, "field": 256, "next_action": 32, "agent": 256,
}  # fmt: skip
MAX_MESSAGE_CHARS = 4096
MAX_COUNT = 2**31 - 1  # attempt and resend_count are 32-bit integer columns
MAX_RETRY_AFTER_MS = 2**53  # a bigint column; anything near it is nonsense anyway
# JSON parsed from a string may nest this deep; deeper stays text (a recursion hazard
# for storage and templates: structured attribute values are already capped at ingest).
MAX_PARSED_DEPTH = 32
UNNAMED_TOOL = "unnamed_tool"

_HTTP_STATUS_TEXT = re.compile(r"[1-5]\d\d")
_NEGATIVE_INT_TEXT = re.compile(r"-\d+")
_INT_TEXT = re.compile(r"-?\d+")
_INT_LITERAL = re.compile(r"\s*[+-]?\d{1,18}\s*")


# Senders whose tool spans have a fixed name and keys of their own (Claude Code), by span name.
_NATIVE_BY_SPAN_NAME = {native.tool_span: native for native in taxonomy.NATIVE_TOOL_SPANS}


# --- recognition ---------------------------------------------------------------------------


def is_tool_span(span: SpanRecord) -> str:
    """The convention that marks `span` as a tool call ("genai", "openinference", "openllmetry",
    "mcp", "claude_code", "span_name"), or "" (docs/contract/spans.md#tool-span-recognition; first match wins)."""
    attrs = span.attributes
    if _text(attrs.get("gen_ai.operation.name")) == "execute_tool":
        return "genai"
    if _is_openinference_tool(attrs):
        return "openinference"
    if _text(attrs.get("traceloop.span.kind")).lower() == "tool":
        return "openllmetry"
    if _text(attrs.get("mcp.method.name")) == "tools/call":
        return "mcp"
    # A span its convention calls something else is not a tool by its name alone:
    # a Traceloop task may well be called "lookup.tool".
    if any(key in attrs for key in CONVENTION_KIND_KEYS):
        return ""
    if (native := _native_tool_spans(span)) is not None:
        return native.convention
    if _tool_in_span_name(span.name) is None:
        return ""
    # GenAI semconv up to v1.36 set no operation name on execute_tool spans, only this.
    if span.name.startswith("execute_tool") and _text(attrs.get("gen_ai.tool.name")):
        return "genai"
    return "span_name"


def _is_openinference_tool(attrs: dict[str, Any]) -> bool:
    return _text(attrs.get("openinference.span.kind")).upper() == "TOOL"


def _native_tool_spans(span: SpanRecord) -> taxonomy.NativeToolSpans | None:
    """The sender whose own tool-span shape `span` has (its name, and its marker or a tool-name
    or call-id key of that sender), or None: any other "X.tool" is left to the span-name rule."""
    native = _NATIVE_BY_SPAN_NAME.get(span.name)
    if native is None:
        return None
    attrs = span.attributes
    marker_key, marker_value = native.marker
    if _text(attrs.get(marker_key)) == marker_value or _first_text(attrs, native.tool_name_keys + native.call_id_keys):
        return native
    return None


def _tool_in_span_name(name: str) -> str | None:
    for pattern in _SPAN_NAME_TOOL:
        if match := pattern.match(name):
            return match.group("tool").strip()
    return None


def _tool_name(span: SpanRecord, native: taxonomy.NativeToolSpans | None) -> str:
    if native is not None:
        # Its span name is the same for every tool ("claude_code.tool"): never the tool's name.
        return _first_text(span.attributes, native.tool_name_keys + TOOL_NAME_KEYS) or UNNAMED_TOOL
    for key in TOOL_NAME_KEYS:
        if name := _text(span.attributes.get(key)).strip():
            return name
    # OpenInference names the span after the tool ("get_weather", "handoff to Billing").
    return _tool_in_span_name(span.name) or span.name.strip() or UNNAMED_TOOL


# --- the record ----------------------------------------------------------------------------


def normalize_tool_call(
    span: SpanRecord, *, escalation_tools: frozenset[str] = frozenset(), children: Iterable[SpanRecord] = (),
    log_evidence: Any = None,
) -> ToolCallRecord | None:
    """The tool-call view of `span`, or None when it is not a tool span (docs/contract/spans.md).

    `children` may hold the span's child spans (others are ignored): a sender of
    taxonomy.NATIVE_TOOL_SPANS states the call's outcome on one of them.
    """
    # --- log-record evidence (ingest.log_events.Evidence, docs/contract/logs.md#evidence) ---
    # The one hook of the logs path: its events (exception events) follow the span's own, its
    # attributes (a result) count only where the span has none; then the span is judged as
    # usual (Status Ok stays final).
    if log_evidence is not None and (log_evidence.events or log_evidence.attributes):
        span = dataclasses.replace(
            span, events=[*span.events, *log_evidence.events], attributes={**log_evidence.attributes, **span.attributes}
        )
    # --- end of the log-record evidence hook ---
    convention = is_tool_span(span)
    if not convention:
        return None
    attrs = span.attributes
    native = _native_tool_spans(span)
    tool = _cap(_tool_name(span, native), "tool")
    arguments = _arguments(attrs, native)
    result = _first_value(attrs, RESULT_KEYS)
    next_action = _text(attrs.get("tool.next_action")).strip()
    call_id_keys = CALL_ID_KEYS if native is None else native.call_id_keys + CALL_ID_KEYS
    record = ToolCallRecord(
        tool=tool,
        convention=convention,
        call_id=_cap(_first_text(attrs, call_id_keys), "call_id"),
        tool_type=_cap(_text(attrs.get("gen_ai.tool.type")).strip(), "tool_type"),
        attempt=_as_count(attrs.get("tool.call.attempt")),
        resend_count=_as_count(attrs.get("http.request.resend_count")),
        arguments=arguments,
        arguments_hash=arguments_hash(arguments),
        result=result,
        escalated=_escalated(span, tool, next_action, escalation_tools),
        next_action=_cap(next_action, "next_action"),
        agent=_cap(_text(attrs.get("gen_ai.agent.name")).strip(), "agent"),
    )
    _fill_failure(record, span, native, children)
    return record


def parse_value(value: Any) -> Any:
    """A structured value as it is; a JSON object, array or string parsed; anything else unchanged.

    OpenLLMetry truncates JSON mid-string: a string that does not parse stays a string,
    and so does one nested deeper than MAX_PARSED_DEPTH.
    """
    if not (isinstance(value, str) and value.lstrip()[:1] in ("{", "[", '"')):
        return value
    try:
        parsed = _json_loads(value)
    except (ValueError, RecursionError):
        return value
    # Fast path: every level of nesting opens with its own "{" or "[", so a text with at
    # most MAX_PARSED_DEPTH of them (those inside strings count too) cannot nest deeper.
    if value.count("{") + value.count("[") <= MAX_PARSED_DEPTH:
        return parsed
    return parsed if _depth_within(parsed, MAX_PARSED_DEPTH) else value


_JSON_DECODER = json.JSONDecoder()


def _json_loads(text: str) -> Any:
    """json.loads(text); faster when the text is the JSON value and nothing around it, the
    usual case, where json.loads spends more on looking for whitespace than on a small value."""
    if text[:1] in ("{", "[", '"'):
        value, end = _JSON_DECODER.raw_decode(text)  # what json.loads does for such a text
        if end == len(text):
            return value
    return json.loads(text)  # whitespace around the value, or data after it: its own verdict


def _depth_within(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return False
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return True


# What json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
# builds on every call, built once.
_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def arguments_hash(arguments: Any) -> str:
    """16 hex of sha256 over canonical JSON (sorted keys, compact); "" when there are none.

    Retry detection compares these, so equal arguments must hash equal in any key order.
    """
    if arguments is None or arguments == "":
        return ""
    return _sha16(_CANONICAL_JSON.encode(arguments))


def _arguments(attrs: dict[str, Any], native: taxonomy.NativeToolSpans | None = None) -> Any:
    for key in ARGUMENT_KEYS if native is None else native.argument_keys + ARGUMENT_KEYS:
        # Outside an OpenInference TOOL span, input.value is a chain's or an LLM's input.
        if key == "input.value" and not _is_openinference_tool(attrs):
            continue
        value = attrs.get(key)
        if value is None or value == "":
            continue
        value = parse_value(value)
        return _traceloop_arguments(value) if key == "traceloop.entity.input" else value
    return None


def _traceloop_arguments(value: Any) -> Any:
    """The call's own arguments inside Traceloop's wrappers.

    The @tool decorator records {"args": [...], "kwargs": {...}} (keyword-only calls are
    their kwargs); its MCP instrumentation records {"tool_name": ..., "arguments": {...}}.
    """
    if not isinstance(value, dict):
        return value
    if "kwargs" in value and set(value) <= {"args", "kwargs"} and not value.get("args"):
        return value["kwargs"]
    if "arguments" in value and set(value) <= {"tool_name", "arguments"}:
        return value["arguments"]
    return value


def _escalated(span: SpanRecord, tool: str, next_action: str, escalation_tools: frozenset[str]) -> bool:
    """docs/contract/attempts.md#escalations: flagged, an escalating next action taken, an `escalation` event, or an escalation tool."""
    if _as_bool(span.attributes.get("tool.escalated")) is True:
        return True
    if next_action.lower() in taxonomy.ESCALATION_ACTIONS:
        return True
    if any(event.get("name") == "escalation" for event in span.events):
        return True
    return tool in escalation_tools


# --- failure: what the span says, and where an envelope may be -----------------------------


@dataclass(slots=True)
class _SpanSignals:
    """The span's own error signals (empty when status is Ok: those errors were handled)."""

    failed: bool = False
    error_type: str = ""
    exception_type: str = ""
    exception_message: str = ""
    status_message: str = ""
    # A native sender's outcome (taxonomy.NATIVE_TOOL_SPANS): its error categories as
    # ("<span name>:<key>", name) pairs, read like exception types, and its error message.
    outcome_names: tuple[tuple[str, str], ...] = ()
    outcome_message: str = ""


@dataclass(slots=True)
class _Source:
    """One place a tool states its error: its dicts, most specific first."""

    name: str  # "envelope" (span tool.error.* attributes), "result", "status_message"
    layers: list[dict[str, Any]]
    # Its (prose, one-word codes) under taxonomy.MESSAGE_KEYS, once read (_message_parts).
    message_parts: tuple[list[str], list[str]] | None = None


def _fill_failure(
    record: ToolCallRecord, span: SpanRecord, native: taxonomy.NativeToolSpans | None, children: Iterable[SpanRecord]
) -> None:
    signals = _span_signals(span)
    if native is not None and span.status_code != STATUS_OK:
        signals = _with_native_outcome(signals, span, native, children)
    result_failed = _result_is_error(record.result)
    if not (signals.failed or result_failed):
        return
    sources = _sources(span, signals, record.result if result_failed else None)
    record.ok = False
    record.soft_failure = result_failed and span.status_code != STATUS_ERROR
    record.error_class, classified_by = _classify(span.attributes, signals, sources)
    record.classified_by = _cap(classified_by, "classified_by")
    outcome_type = signals.outcome_names[0][1] if signals.outcome_names else ""
    record.error_type = _cap(signals.error_type or signals.exception_type or outcome_type, "error_type")
    message, generic_message = _message(signals, sources)
    record.message = message[:MAX_MESSAGE_CHARS]
    _fill_stated(record, sources)
    record.fingerprint = record_fingerprint(record)
    if len(message) > MAX_MESSAGE_CHARS:  # the cut message is judged afresh
        generic_message = taxonomy.is_generic_message(record.message)
    record.contract = _contract_checks(record, generic_message)


def _fill_stated(record: ToolCallRecord, sources: list[_Source]) -> None:
    """The fields only an error envelope states."""
    if not sources:
        return  # fast path: no envelope, so the record's defaults ("" and None) stand
    record.error_code = _cap(_error_code(sources), "error_code")
    record.retryable = _stated_retryable(sources)
    record.field = _cap(_field(sources), "field")
    record.suggestion = _suggestion(sources)[:MAX_MESSAGE_CHARS]
    record.retry_after_ms = _retry_after_ms(sources)


_NO_SIGNALS = _SpanSignals()  # shared (signals are never changed once made)


def _span_signals(span: SpanRecord) -> _SpanSignals:
    if span.status_code == STATUS_OK:
        return _NO_SIGNALS
    attrs = span.attributes
    event = _last_exception_event(span)
    error_type = _text(attrs.get("error.type")).strip()
    # tool.error.* attributes are an error envelope on the span itself.
    stated = bool(_text(attrs.get("tool.error.class")).strip() or _text(attrs.get("tool.error.code")).strip())
    if not (span.status_code == STATUS_ERROR or error_type or event is not None or stated):
        return _NO_SIGNALS  # nothing failed, so every field would be empty
    return _SpanSignals(
        failed=True,
        error_type=error_type,
        exception_type=_text(event.get("exception.type")).strip() if event else "",
        exception_message=_text(event.get("exception.message")) if event else "",
        status_message=span.status_message if span.status_code == STATUS_ERROR else "",
    )


def _with_native_outcome(
    signals: _SpanSignals, span: SpanRecord, native: taxonomy.NativeToolSpans, children: Iterable[SpanRecord]
) -> _SpanSignals:
    """The span's signals with the outcome a native sender states on the span itself and on
    its outcome child (Claude Code: claude_code.tool.execution's status, success, error)."""
    outcome = [span]
    child = _outcome_child(span, native, children)
    if child is not None:
        outcome.append(child)
    failed, status_message, names, messages = signals.failed, signals.status_message, [], []
    for source in outcome:
        attrs = source.attributes
        stated = [(key, _text(attrs.get(key)).strip()) for key in native.error_name_keys + native.error_keys]
        stated = [(key, value) for key, value in stated if value]
        if source is child and child.status_code == STATUS_ERROR:
            failed = True
            status_message = status_message or child.status_message
        if stated or any(_as_bool(attrs.get(key)) is False for key in native.success_keys):
            failed = True
        for key, value in stated:
            # A category ("Error:ENOENT", "ShellError") is one word; the full message has spaces.
            if key in native.error_name_keys or (len(value) <= 200 and not any(c.isspace() for c in value)):
                names.append((f"{source.name}:{key}", value))
            else:
                messages.append(value)
    if not failed:
        return signals
    return _SpanSignals(
        failed=True,
        error_type=signals.error_type,
        exception_type=signals.exception_type,
        exception_message=signals.exception_message,
        status_message=status_message,
        outcome_names=tuple(dict.fromkeys(names)),
        outcome_message=messages[0] if messages else "",
    )


def _outcome_child(
    span: SpanRecord, native: taxonomy.NativeToolSpans, children: Iterable[SpanRecord]
) -> SpanRecord | None:
    """The last-ending child of `span` named as the sender's outcome span, or None."""
    found = None
    for child in children:
        if (
            child.name == native.outcome_span
            and child.parent_span_id == span.span_id
            and child.trace_id == span.trace_id
            and child.status_code != STATUS_OK  # Ok is final: whatever it says was handled
            and (found is None or child.end_ns >= found.end_ns)
        ):
            found = child
    return found


def _last_exception_event(span: SpanRecord) -> dict[str, Any] | None:
    for event in reversed(span.events):
        if event.get("name") in EXCEPTION_EVENTS:
            return event.get("attributes") or {}
    return None


# Every key _result_is_error reads: a dict without any of them is no error envelope (the
# message and retryable keys are what the class and code keys and a JSON-RPC error need).
_RESULT_ERROR_KEYS = frozenset(
    taxonomy.ERROR_FLAG_KEYS + ("error",) + taxonomy.SUCCESS_FLAG_KEYS + taxonomy.STATED_CLASS_KEYS
    + taxonomy.MESSAGE_KEYS + taxonomy.RETRYABLE_KEYS
)  # fmt: skip
_MESSAGE_OR_RETRYABLE_KEYS = frozenset(taxonomy.MESSAGE_KEYS + taxonomy.RETRYABLE_KEYS)
_AMBIGUOUS_CLASS_OR_CODE_KEYS = taxonomy.AMBIGUOUS_CLASS_KEYS + taxonomy.CODE_KEYS


def _result_is_error(result: Any) -> bool:
    """Whether a tool's result is an error envelope (docs/contract/error-classes.md), strictly structured.

    A successful payload may well carry "code" or "class" ({"class": "business"} is a
    seat), so those count only next to a message or retryable key.
    """
    if not isinstance(result, dict):
        return False
    # Fast path for the usual successful payload: none of the keys below is present.
    if _RESULT_ERROR_KEYS.isdisjoint(result):
        return False
    if any(_as_bool(result.get(key)) is True for key in taxonomy.ERROR_FLAG_KEYS):
        return True
    error = result.get("error")
    if error is True or (isinstance(error, dict) and error) or (isinstance(error, str) and error.strip()):
        return True
    if any(result.get(key) is False or result.get(key) == "false" for key in taxonomy.SUCCESS_FLAG_KEYS):
        return True
    if any(_is_class_spelling(result[key]) for key in taxonomy.STATED_CLASS_KEYS if key in result):
        return True
    if _MESSAGE_OR_RETRYABLE_KEYS.isdisjoint(result):
        return False
    if any(_is_class_spelling(result[key]) for key in _AMBIGUOUS_CLASS_OR_CODE_KEYS if key in result):
        return True
    return _is_jsonrpc_error(result)


def _is_jsonrpc_error(value: dict[str, Any]) -> bool:
    code = value.get("code")
    return _is_int(code) and -32768 <= code <= -32000 and isinstance(value.get("message"), str)


def _sources(span: SpanRecord, signals: _SpanSignals, error_result: Any) -> list[_Source]:
    sources = []
    attrs = {key: value for key, value in span.attributes.items() if key.startswith("tool.error.")}
    if attrs:
        sources.append(_Source("envelope", [attrs]))
    if error_result is not None:
        sources.append(_Source("result", _layers(error_result)))
    if parsed := _status_message_envelope(signals.status_message):
        sources.append(_Source("status_message", _layers(parsed)))
    return sources


_MAX_ENVELOPE_DEPTH = 4


def _layers(value: Any, depth: int = 0) -> list[dict[str, Any]]:
    """The dicts of an error envelope, most specific first: its `error` object, the
    envelope, then the details around it (`data` of JSON-RPC and the Agents SDK, MCP
    `structuredContent`, and MCP's first text content, parsed when it is JSON)."""
    if not isinstance(value, dict) or depth > _MAX_ENVELOPE_DEPTH:
        return []
    layers = [*_layers(value.get("error"), depth + 1), value]
    for key in ("data", "structuredContent"):
        layers += _layers(value.get(key), depth + 1)
    if text := _first_content_text(value):
        parsed = parse_value(text)
        layers += _layers(parsed, depth + 1) if isinstance(parsed, dict) else [{"text": text}]
    return layers


def _first_content_text(value: dict[str, Any]) -> str:
    content = value.get("content")
    if isinstance(content, str):
        return content
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type", "text") == "text" and isinstance(block.get("text"), str):
            return block["text"]
    return ""


# "{message}: {data}" from the OpenAI Agents bridges, data being a Python dict repr.
_DETAIL_AFTER_HEADLINE = re.compile(r"^[^{}\n]{1,200}?:\s*(\{.*\})\s*$", re.DOTALL)
_MAX_LITERAL_CHARS = 20_000


def _status_message_envelope(message: str) -> dict[str, Any] | None:
    """A dict an instrumentation wrote into the status message, or None.

    The Agents bridges write "Error running tool (non-fatal): {'tool_name': …, 'error': …}"
    or `str(span.error)`; MCP instrumentations write the first content text, which may be
    a JSON envelope.
    """
    text = message.strip()
    # Fast path: a message without "{" holds no dict (both ways below need one).
    if len(text) > _MAX_LITERAL_CHARS or "{" not in text:
        return None
    if not text.startswith("{"):
        match = _DETAIL_AFTER_HEADLINE.match(text)
        text = match.group(1) if match else ""
    if not text:
        return None
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
        except Exception:  # literal_eval raises several kinds on junk; any means "not a dict"
            continue
        if isinstance(value, dict):
            return value
    return None


# The keys of a _lookup as a set, made once per tuple of keys.
_key_set = functools.cache(frozenset)


def _lookup(sources: Iterable[_Source], keys: tuple[str, ...]) -> Iterator[tuple[_Source, str, Any]]:
    """(source, key, value) of every stated value of `keys`, in precedence order."""
    wanted = _key_set(keys)
    for source in sources:
        for layer in source.layers:
            # Fast path: most layers hold only a few keys, often none of these.
            if wanted.isdisjoint(layer):
                continue
            for key in keys:
                value = layer.get(key)
                if value is not None and value != "":
                    yield source, key, value


# --- classification (docs/contract/error-classes.md#evidence-order) ----------------------------------------------


def _classify(attrs: dict[str, Any], signals: _SpanSignals, sources: list[_Source]) -> tuple[str, str]:
    """(class, classified_by): the first evidence that decides wins (docs/contract/error-classes.md)."""
    decided, permanent, retryable_said = _stated_class(sources)
    if decided:
        return decided
    later = itertools.chain(
        _status_code_evidence(attrs, signals, sources), _name_and_message_evidence(signals, sources)
    )
    for cls, by in later:
        # "permanent" says only "not retryable": it rules transient out, nothing else.
        if not (permanent and cls == taxonomy.TRANSIENT):
            return cls, f"{permanent} + {by}" if permanent else by
    if permanent:
        return taxonomy.VALIDATION, permanent  # docs/contract/error-classes.md: validation when nothing finer is known
    if retryable_said:
        return taxonomy.TRANSIENT, retryable_said
    return taxonomy.UNKNOWN, "none"


def _stated_class(sources: list[_Source]) -> tuple[tuple[str, str] | None, str, str]:
    """Step 1, the explicit envelope: (decided class and evidence or None, the evidence of
    a coarse "permanent", the evidence of a bare retryable=true)."""
    permanent = ""
    for source, key, value in _lookup(sources, taxonomy.CLASS_KEYS):
        if not isinstance(value, str) or not _code_like(key, value):
            continue  # a numeric code is a status code (step 2); prose is a message (step 3)
        cls, permanent_spelling = taxonomy.read_spelling(value)
        if cls:
            return (cls, _evidence(source, key, value)), "", ""
        if not permanent and permanent_spelling:
            permanent = _evidence(source, key, value)
    for source, key, value in _lookup(sources, taxonomy.RETRYABLE_KEYS):
        flag = _as_bool(value)
        if flag is None:
            continue
        # gh-aw: `recoverable` is authoritative. A plain retryable flag decides only when
        # nothing else does: servers that mark everything retryable exist (seed 0).
        if flag and key in taxonomy.RECOVERABLE_KEYS and not permanent:
            return (taxonomy.TRANSIENT, _evidence(source, key, "true")), "", ""
        return None, permanent, _evidence(source, key, "true") if flag else ""
    return None, permanent, ""


_STATUS_OR_CODE_KEYS = taxonomy.STATUS_KEYS + taxonomy.CODE_KEYS


def _status_code_evidence(
    attrs: dict[str, Any], signals: _SpanSignals, sources: list[_Source]
) -> Iterator[tuple[str, str]]:
    for key in HTTP_STATUS_ATTRS:
        code = _as_int(attrs.get(key))
        if code is not None and (cls := taxonomy.class_for_http_status(code)):
            yield cls, f"{key}={code}"
    # HTTP semconv: after an error response, error.type is the status code as a string.
    if _HTTP_STATUS_TEXT.fullmatch(signals.error_type):
        if cls := taxonomy.class_for_http_status(int(signals.error_type)):
            yield cls, f"error.type={signals.error_type}"
    for source, key, value in _lookup(sources, _STATUS_OR_CODE_KEYS):
        code = _as_int(value)
        if code is None:
            continue
        if code < 0:
            cls, refined = _jsonrpc_class(code, signals, sources)
        else:
            cls, refined = (taxonomy.class_for_http_status(code) if 100 <= code <= 599 else None), ""
        if cls:
            yield cls, _evidence(source, key, code) + refined
    for key in RPC_STATUS_ATTRS:
        value = attrs.get(key)
        code = _as_int(value)
        if code is not None and code < 0:  # MCP puts JSON-RPC codes here, as strings
            cls, refined = _jsonrpc_class(code, signals, sources)
        elif isinstance(value, (int, str)) and not isinstance(value, bool):
            cls, refined = taxonomy.class_for_grpc(code if code is not None else value), ""
        else:
            continue
        if cls:
            yield cls, f"{key}={_text(value).strip()}{refined}"
    # MCP semconv: error.type is the JSON-RPC code as a string.
    if _NEGATIVE_INT_TEXT.fullmatch(signals.error_type):
        cls, refined = _jsonrpc_class(int(signals.error_type), signals, sources)
        if cls:
            yield cls, f"error.type={signals.error_type}{refined}"


def _jsonrpc_class(code: int, signals: _SpanSignals, sources: list[_Source]) -> tuple[str | None, str]:
    """(class, extra evidence): MCP's example sends "Unknown tool" as invalid params."""
    if code == -32602:
        for text in _classification_texts(signals, sources):
            if match := taxonomy.UNKNOWN_TOOL_MESSAGE.search(text):
                return taxonomy.NOT_FOUND, f' + message:"{match.group(0)}"'
    return taxonomy.class_for_jsonrpc(code), ""


def _name_and_message_evidence(signals: _SpanSignals, sources: list[_Source]) -> Iterator[tuple[str, str]]:
    candidates = (("error.type", signals.error_type), ("exception.type", signals.exception_type))
    candidates += signals.outcome_names
    names = [(label, name) for label, name in candidates if name and not _INT_TEXT.fullmatch(name)]
    texts = None  # gathered only when needed: most failures are decided before the messages
    for label, name in names:
        if taxonomy.refines_error_name(name):  # TypeError("fetch failed") is no bad argument
            texts = _classification_texts(signals, sources) if texts is None else texts
            for text in texts:
                if hit := taxonomy.refined_class_for_error_name(name, text[:MAX_MESSAGE_CHARS]):
                    yield hit[0], f'{label}={name} + message:"{hit[1][:60]}"'
                    break
        if cls := taxonomy.class_for_error_name(name):
            yield cls, f"{label}={name}"
    for text in _classification_texts(signals, sources) if texts is None else texts:
        if hit := taxonomy.class_for_message(text[:MAX_MESSAGE_CHARS]):
            cls, words = hit
            yield cls, f'message:"{words[:60]}"'
    # Wrappers of every failure of a layer (HttpRequestException, *net.OpError) decide last.
    for label, name in names:
        if cls := taxonomy.broad_class_for_error_name(name):
            yield cls, f"{label}={name}"


def _classification_texts(signals: _SpanSignals, sources: list[_Source]) -> list[str]:
    """Every message the failure carries, strongest first, for the last-resort patterns."""
    texts = [
        *_messages(s for s in sources if s.name != "status_message"),
        signals.exception_message,
        signals.outcome_message,
        *_messages(s for s in sources if s.name == "status_message"),
        signals.status_message,
    ]
    return list(dict.fromkeys(text for text in texts if text.strip()))


def _evidence(source: _Source, key: str, value: Any) -> str:
    return f"{source.name}:{key}={str(value)[:100]}"


# --- envelope fields -----------------------------------------------------------------------


def _code_like(key: str, value: str) -> bool:
    return key not in taxonomy.WORD_CODE_KEYS or len(value.split()) == 1


def _messages(sources: Iterable[_Source]) -> list[str]:
    """Message candidates in precedence order; one-word codes under `error` come last."""
    prose, codes = [], []
    for source in sources:
        source_prose, source_codes = _message_parts(source)
        prose += source_prose
        codes += source_codes
    return prose + codes


def _message_parts(source: _Source) -> tuple[list[str], list[str]]:
    """(prose, codes) of one source, read once: classification and _message both need them."""
    if source.message_parts is None:
        prose, codes = [], []
        for _, key, value in _lookup((source,), taxonomy.MESSAGE_KEYS):
            if isinstance(value, str) and value.strip():
                (codes if key in taxonomy.WORD_CODE_KEYS and _code_like(key, value) else prose).append(value)
        source.message_parts = (prose, codes)
    return source.message_parts


def _message(signals: _SpanSignals, sources: list[_Source]) -> tuple[str, bool]:
    """The envelope's message, else exception.message, else the status message; and
    whether it is generic, which the contract checks need too."""
    for candidates in _message_candidates(signals, sources):
        candidates = [text for text in candidates if text.strip()]
        # Within one envelope, a specific message beats a headline ("Error running tool").
        for text in candidates:
            if not taxonomy.is_generic_message(text):
                return text, False
        if candidates:
            return candidates[0], True
    return "", True  # "" is one of taxonomy.GENERIC_MESSAGES


def _message_candidates(signals: _SpanSignals, sources: list[_Source]) -> Iterator[list[str]]:
    """The candidates of _message by source, in precedence order; later ones only when asked."""
    by_name = {source.name: source for source in sources}
    for name in ("envelope", "result"):
        if name in by_name:
            yield _messages([by_name[name]])
    yield [signals.exception_message]
    if signals.outcome_message:
        yield [signals.outcome_message]
    if "status_message" in by_name:
        yield _messages([by_name["status_message"]])
    yield [signals.status_message]


def _stated_retryable(sources: list[_Source]) -> bool | None:
    for _, _, value in _lookup(sources, taxonomy.RETRYABLE_KEYS):
        if (flag := _as_bool(value)) is not None:
            return flag
    return None


_STATED_CLASS_OR_WORD_CODE_KEYS = taxonomy.STATED_CLASS_KEYS + taxonomy.AMBIGUOUS_CLASS_KEYS + taxonomy.WORD_CODE_KEYS


def _error_code(sources: list[_Source]) -> str:
    """The tool's own error code, else the class it states (seed 2 has only "class")."""
    for keys in (taxonomy.CODE_KEYS, _STATED_CLASS_OR_WORD_CODE_KEYS):
        for _, key, value in _lookup(sources, keys):
            if _is_int(value) or (isinstance(value, str) and _code_like(key, value)):
                return str(value).strip()
    return ""


def _field(sources: list[_Source]) -> str:
    for _, _, value in _lookup(sources, taxonomy.FIELD_KEYS):
        if isinstance(value, str) or _is_int(value):
            return str(value).strip()
        if isinstance(value, list) and value and all(isinstance(part, (str, int)) for part in value):
            return ".".join(str(part) for part in value)  # a path: ["items", 0, "sku"]
    return ""


def _suggestion(sources: list[_Source]) -> str:
    for _, _, value in _lookup(sources, taxonomy.SUGGESTION_KEYS):
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, list):  # recoverySteps; candidate objects are options, not steps
            steps = [str(step).strip() for step in value if isinstance(step, (str, int, float)) and str(step).strip()]
            if steps:
                return "; ".join(steps)
    return ""


def _retry_after_ms(sources: list[_Source]) -> int | None:
    for keys, scale in ((taxonomy.RETRY_AFTER_MS_KEYS, 1), (taxonomy.RETRY_AFTER_SECONDS_KEYS, 1000)):
        for _, _, value in _lookup(sources, keys):
            number = _as_number(value)
            if number is not None and number >= 0:
                return min(round(number * scale), MAX_RETRY_AFTER_MS)
    return None


# --- fingerprints and the error contract ---------------------------------------------------

# (pattern, placeholder, cue): every match of the pattern contains a match of its cue, a
# cheap search, so a text without the cue is left as it is without scanning for the pattern.
_FINGERPRINT_PLACEHOLDERS = tuple(
    (re.compile(pattern, flags), placeholder, re.compile(cue))
    for pattern, flags, placeholder, cue in (
        (r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.IGNORECASE, "<url>", "://"),
        (r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b", 0, "<email>", "@"),
        (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE, "<uuid>", "-"),
        # Quotes that open and close outside words, so "can't" is not the start of a value.
        # ("(?<!\w\")" after the quote is "(?<!\w)" before it: the quote first lets the regex
        # engine skip ahead to the next quote instead of trying every position.)
        (r"\"(?<!\w\")[^\"\n]*\"(?!\w)|'(?<!\w')[^'\n]*'(?!\w)|`[^`\n]*`", 0, "<value>", "[\"'`]"),
        # (The cue spells out both cases: [0-9a-f] ignoring case is exactly [0-9a-fA-F].)
        (
            r"(?<![0-9a-z])(?:0x[0-9a-f]+|(?=[0-9a-f]*\d)[0-9a-f]{8,})(?![0-9a-z])",
            re.IGNORECASE, "<hex>", "[0-9a-fA-F]{8}|0[xX]",
        ),
        # Ids that mix letters and digits: ord_8FQ2ZK, usr1a2b3.
        (r"(?<![0-9a-z])(?=[a-z]*\d)(?=\d*[a-z])[0-9a-z]{6,}(?![0-9a-z])", re.IGNORECASE, "<id>", r"\d"),
        (r"\d+(?:\.\d+)?", 0, "<n>", r"\d"),
    )
)  # fmt: skip


def fingerprint_message(message: str) -> str:
    """The message with its variable parts (urls, emails, uuids, quoted values, hex and
    mixed ids, numbers) replaced by placeholders, whitespace collapsed."""
    if len(message) <= _REMEMBERED_MESSAGE_CHARS:
        return _remembered_template(message)
    return _message_template(message)


def _message_template(text: str) -> str:
    for pattern, placeholder, cue in _FINGERPRINT_PLACEHOLDERS:
        if cue.search(text):
            text = pattern.sub(placeholder, text)
    return " ".join(text.split())


# Failures repeat their messages (the same timeout, the same refusal): the template of a
# short one is remembered instead of running up to seven regexes over it again, a fifth of
# the cost of normalising a failure. Bounded: at most ~4 MB of messages.
_REMEMBERED_MESSAGE_CHARS = 512
_remembered_template = functools.lru_cache(maxsize=4096)(_message_template)


def record_fingerprint(record: ToolCallRecord) -> str:
    """The stable id of a failure's shape: tool, class, code (or error type) and message
    template, as 16 hex; "" when the call succeeded."""
    if record.ok:
        return ""
    code = record.error_code or record.error_type
    return _sha16("\x1f".join((record.tool, record.error_class, code, fingerprint_message(record.message))))


def contract_checks(record: ToolCallRecord) -> dict[str, bool | None]:
    """The contract-quality checks (docs/contract/metrics.md#contract-quality) of a failure, in `taxonomy.CONTRACT_CHECKS` order:
    True passes, False fails, None does not apply. {} for a call that succeeded."""
    if record.ok:
        return {}
    return _contract_checks(record, taxonomy.is_generic_message(record.message))


def _contract_checks(record: ToolCallRecord, generic_message: bool) -> dict[str, bool | None]:
    """contract_checks of a failure, told whether its message is generic (_message knows)."""
    cls = record.error_class or taxonomy.UNKNOWN
    stated_retryable = taxonomy.CLASSES.get(cls, taxonomy.CLASSES[taxonomy.UNKNOWN]).retryable
    shown = f"{record.message}\n{record.suggestion}"
    checks: dict[str, bool | None] = {
        "explicit_class": _states_class(record),
        "explicit_retryable": record.retryable is not None,
        "retry_after": record.retry_after_ms is not None if cls == taxonomy.TRANSIENT else None,
        "field_named": bool(record.field) if cls == taxonomy.VALIDATION else None,
        "suggestion": bool(record.suggestion) if cls == taxonomy.VALIDATION else None,
        "specific_message": not generic_message,
        "no_internals": not taxonomy.find_internals(shown),
        "retryable_consistent": (
            None if record.retryable is None or stated_retryable is None else record.retryable == stated_retryable
        ),
    }
    return {name: checks[name] for name, _ in taxonomy.CONTRACT_CHECKS}


def _states_class(record: ToolCallRecord) -> bool:
    """Whether the tool itself named a class Toolwatch recognises (not a status code or a flag)."""
    source, _, rest = record.classified_by.split(" + ", 1)[0].partition(":")
    key, _, value = rest.partition("=")
    if source in ("envelope", "result", "status_message") and key in taxonomy.CLASS_KEYS and _is_class_spelling(value):
        return True
    return _is_class_spelling(record.error_code)


def _is_class_spelling(value: Any) -> bool:
    if not isinstance(value, str) or not value:  # "" (no error code, say) spells nothing
        return False
    cls, permanent = taxonomy.read_spelling(value)
    return bool(cls) or permanent


# --- small coercions (attribute values arrive as str, bool, int, float, list or dict) -------


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (dict, list)):
        return ""
    return str(value)


def _first_text(attrs: dict[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        if text := _text(attrs.get(key)).strip():
            return text
    return ""


def _first_value(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return parse_value(value)
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _as_int(value: Any) -> int | None:
    if value is None:  # the usual case: an absent attribute
        return None
    if _is_int(value):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT_LITERAL.fullmatch(value):
        return int(value)
    return None


def _as_count(value: Any) -> int | None:
    number = _as_int(value)
    return number if number is not None and 0 <= number <= MAX_COUNT else None


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if _is_int(value) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        return {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(
            value.strip().lower()
        )
    return None


def _cap(text: str, field_name: str) -> str:
    return text[: MAX_CHARS[field_name]]


def _sha16(text: str) -> str:
    # surrogatepass: JSON escapes can produce lone surrogates, which plain utf-8 refuses.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
