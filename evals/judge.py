"""Judge a tool's outcome against an eval case's expectation, with the server's own classifier.

Pure, stdlib plus the pure `ingest` modules: the standalone runner ships it. The outcome of
one call (a returned value, or a raised exception) becomes the span an OpenTelemetry GenAI
instrumentation would record for it; `ingest.normalize.normalize_tool_call` reads that span
exactly as it reads live traffic, so a case judged here and the same failure in a trace
get the same class, contract checks and fingerprint. The span's attributes go through the
ingest redaction first, as they would on their way into the server.

- `span_for_call(tool, arguments, result=…, exception=…)` -> the `SpanRecord`;
- `observe(...)` -> the observed record (a plain dict, see `OBSERVED_KEYS`);
- `judge(expect, observed)` -> `Verdict(status, reasons)`, `status` "passed" or "failed".
"""

from __future__ import annotations

import json
import secrets
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from evals.expectations import validate
from ingest.limits import DEFAULT_LIMITS
from ingest.normalize import normalize_tool_call
from ingest.records import SpanRecord
from ingest.redact import redact_attributes, redact_string
from ingest.taxonomy import CONTRACT_CHECKS, UNKNOWN, recommended_action

__all__ = ["OBSERVED_KEYS", "Verdict", "judge", "observe", "span_for_call"]

STATUS_UNSET = 0
STATUS_ERROR = 2
SPAN_KIND_INTERNAL = 1

# The observed record, in this order; the first seven are the ones an eval run posts.
OBSERVED_KEYS = (
    "ok", "error_class", "message", "classified_by", "contract", "next_action", "fingerprint",
    "next_action_stated", "error_type", "error_code", "retryable", "field", "suggestion", "retry_after_ms",
)  # fmt: skip

# Where a tool's error envelope may state the next action it wants the controller to take.
NEXT_ACTION_KEYS = ("next_action", "nextAction", "tool.next_action")
_CHECK_DESCRIPTIONS = dict(CONTRACT_CHECKS)
_MESSAGE_SHOWN = 200

_NOT_GIVEN: Any = object()


@dataclass(frozen=True, slots=True)
class Verdict:
    status: str  # "passed" or "failed"
    reasons: list[str] = field(default_factory=list)


def span_for_call(
    tool: str,
    arguments: Any,
    *,
    result: Any = _NOT_GIVEN,
    exception: BaseException | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
) -> SpanRecord:
    """The span a GenAI instrumentation records for one `execute_tool` call.

    A returned value becomes `gen_ai.tool.call.result` (JSON, a string as it is) and the
    status stays unset: an error envelope in it is the classifier's to recognise. A raised
    exception sets status ERROR ("<Name>: <message>"), `error.type` (its qualified class
    name) and an `exception` event, as the OpenTelemetry SDK's `record_exception` does.
    """
    end_ns = end_ns if end_ns is not None else time.time_ns()
    start_ns = start_ns if start_ns is not None else end_ns
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.type": "function",
    }
    if arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = _as_json(arguments)
    status_code, status_message, events = STATUS_UNSET, "", []
    if exception is not None:
        type_name = qualified_name(type(exception))
        attributes["error.type"] = type_name
        status_code = STATUS_ERROR
        status_message = f"{type(exception).__name__}: {exception}"
        events.append(
            {
                "name": "exception",
                "time_ns": end_ns,
                "attributes": redact_attributes(
                    {
                        "exception.type": type_name,
                        "exception.message": str(exception),
                        "exception.stacktrace": "".join(traceback.format_exception(exception)),
                    },
                    DEFAULT_LIMITS,
                ),
            }
        )
    elif result is not _NOT_GIVEN and result is not None:
        attributes["gen_ai.tool.call.result"] = result if isinstance(result, str) else _as_json(result)
    return SpanRecord(
        trace_id=secrets.token_hex(16),
        span_id=secrets.token_hex(8),
        parent_span_id="",
        name=f"execute_tool {tool}",
        kind=SPAN_KIND_INTERNAL,
        start_ns=start_ns,
        end_ns=end_ns,
        status_code=status_code,
        status_message=redact_string(status_message, DEFAULT_LIMITS.max_attribute_value_chars),
        attributes=redact_attributes(attributes, DEFAULT_LIMITS),
        events=events,
        service="toolwatch-eval-runner",
    )


def observe(tool: str, arguments: Any, *, result: Any = _NOT_GIVEN, exception: BaseException | None = None) -> dict:
    """The observed record of one call: what the classifier makes of its span.

    `next_action` is the one the error states (`next_action` in its envelope), else the
    class's recommended action; `next_action_stated` says which. None when the call succeeded.
    """
    span = span_for_call(tool, arguments, result=result, exception=exception)
    record = normalize_tool_call(span)
    assert record is not None  # an execute_tool span is always a tool span
    stated = "" if record.ok else _stated_next_action(record.result)
    next_action = None if record.ok else (stated or recommended_action(record.error_class))
    return {
        "ok": record.ok,
        "error_class": None if record.ok else record.error_class,
        "message": record.message,
        "classified_by": record.classified_by,
        "contract": dict(record.contract),
        "next_action": next_action,
        "fingerprint": record.fingerprint,
        "next_action_stated": bool(stated),
        "error_type": record.error_type,
        "error_code": record.error_code,
        "retryable": record.retryable,
        "field": record.field,
        "suggestion": record.suggestion,
        "retry_after_ms": record.retry_after_ms,
    }


def judge(expect: dict, observed: dict) -> Verdict:
    """Compare an observed record with an expectation: "passed", or "failed" with one
    human-readable reason for every unmet part (outcome, class, each check, next action)."""
    expect = validate(expect)
    failed = observed.get("ok") is False or bool(observed.get("error_class"))
    error_class = observed.get("error_class") or UNKNOWN
    got = f"{error_class}: {_short(observed.get('message') or '')}".rstrip(": ")

    if expect["outcome"] == "success":
        return Verdict("failed", [f"expected success, got {got}"]) if failed else Verdict("passed")
    if not failed:
        wanted = f"{_a(expect['error_class'])} error" if expect["error_class"] else "an error"
        return Verdict("failed", [f"expected {wanted}, got success"])

    reasons = []
    if expect["error_class"] and expect["error_class"] != error_class:
        reasons.append(f"expected class {expect['error_class']}, got {got}")
    contract = observed.get("contract") or {}
    for name in expect["contract_checks"]:
        value = contract.get(name)
        if value is False:
            reasons.append(f"contract check {name} failed: {_CHECK_DESCRIPTIONS[name]}")
        elif value is None:
            reasons.append(f"contract check {name} does not apply to {_a(error_class)} error")
    wanted_action = expect["next_action"]
    action = observed.get("next_action") or recommended_action(error_class)
    if wanted_action and wanted_action != action:
        why = "stated by the tool" if observed.get("next_action_stated") else f"recommended for {error_class}"
        reasons.append(f"expected next action {wanted_action}, got {action} ({why})")
    return Verdict("failed", reasons) if reasons else Verdict("passed")


def qualified_name(cls: type) -> str:
    """"module.QualName", or just the name for builtins (as OpenTelemetry records `exception.type`)."""
    module = getattr(cls, "__module__", "") or ""
    return f"{module}.{cls.__qualname__}" if module and module != "builtins" else cls.__qualname__


def _stated_next_action(result: Any) -> str:
    """The next action an error envelope states, most specific dict first; "" when none."""
    if not isinstance(result, dict):
        return ""
    layers = [result.get("error"), result, result.get("data"), result.get("structuredContent")]
    for layer in layers:
        if not isinstance(layer, dict):
            continue
        for key in NEXT_ACTION_KEYS:
            value = layer.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()[:64]
    return ""


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_SHOWN else text[: _MESSAGE_SHOWN - 1] + "…"
