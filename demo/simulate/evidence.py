"""How a tool span records success and each kind of failure, per convention (docs/contract/spans.md, docs/contract/error-classes.md).

A `Failure` is one way a tool fails: the class it should be given, the prefix of the
`classified_by` the real classifier should write, and a function that marks an SDK span
the way real instrumentation does (HTTP and RPC status codes, exception events, the
`tool.error.*` envelope, JSON result envelopes in the seeds' spellings, MCP `isError`,
the OpenAI Agents bridges' status messages). Pure data plus the OTel SDK: no Django.

Conventions shape where arguments and results go:
- "genai": `execute_tool X`, `gen_ai.tool.call.arguments` / `.result` (JSON strings);
- "openinference": span named X, `openinference.span.kind=TOOL`, `input.value` /
  `output.value`, status OK set explicitly on success;
- "openllmetry": `X.tool`, `traceloop.entity.input` ({"args", "kwargs"}) / `.output`;
- "mcp": `tools/call X` (CLIENT), results are MCP `CallToolResult`s.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import SpanKind, Status, StatusCode

GENAI, OPENINFERENCE, OPENLLMETRY, MCP = "genai", "openinference", "openllmetry", "mcp"

_RESULT_KEY = {
    GENAI: "gen_ai.tool.call.result",
    MCP: "gen_ai.tool.call.result",
    OPENINFERENCE: "output.value",
    OPENLLMETRY: "traceloop.entity.output",
}


def dumps(value: Any) -> str:
    """Compact JSON, keys in the order written (deterministic for a given value)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Shape:
    """What a failure needs to mark a span: its convention, tool, arguments and clock."""

    convention: str
    tool: str
    call_id: str
    args: dict
    at_ns: int  # when the failure happened (events need explicit timestamps: determinism)

    def fill(self, text: str) -> str:
        """`text` with {field} placeholders filled from the arguments (missing ones stay)."""
        return text.format_map(_Missing(self.args)) if "{" in text else text


class _Missing(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@dataclass(frozen=True, slots=True)
class Failure:
    """One way a tool fails and the verdict the classifier should reach."""

    name: str  # the kind of evidence, e.g. "http_status", "result_envelope"
    cls: str  # the class it should get
    classified_by: str  # prefix of the classified_by it should get ("{type_key}": see expected_by)
    mark: Callable[[Any, Shape], None]  # marks the span
    soft: bool = False  # the span status stays unset: a failure the tool returned, not raised

    def expected_by(self, convention: str) -> str:
        """The classified_by prefix under a convention: GenAI and MCP instrumentations also
        set error.type to the exception's type, and that attribute is read first."""
        key = "error.type" if convention in (GENAI, MCP) else "exception.type"
        return self.classified_by.replace("{type_key}", key)


# --- span shapes ---------------------------------------------------------------------------------


def span_name(convention: str, tool: str) -> str:
    if convention == OPENINFERENCE:
        return tool
    if convention == OPENLLMETRY:
        return f"{tool}.tool"
    if convention == MCP:
        return f"tools/call {tool}"
    return f"execute_tool {tool}"


def span_kind(convention: str) -> SpanKind:
    return SpanKind.CLIENT if convention == MCP else SpanKind.INTERNAL


def tool_attributes(convention: str, tool: str, call_id: str, args: dict, tool_type: str) -> dict:
    """The attributes a convention's instrumentation sets when the tool span starts."""
    if convention == OPENINFERENCE:
        return {
            "openinference.span.kind": "TOOL", "tool.name": tool, "tool.id": call_id,
            "input.value": dumps(args), "input.mime_type": "application/json",
        }  # fmt: skip
    if convention == OPENLLMETRY:
        return {
            "traceloop.span.kind": "tool", "traceloop.entity.name": tool, "gen_ai.tool.name": tool,
            "traceloop.entity.input": dumps({"args": [], "kwargs": args}), "traceloop.workflow.name": "agent_run",
        }  # fmt: skip
    attributes = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": tool_type, "gen_ai.tool.call.arguments": dumps(args),
    }  # fmt: skip
    if convention == MCP:
        attributes |= {"mcp.method.name": "tools/call", "jsonrpc.request.id": call_id, "mcp.protocol.version": "2025-11-25"}
    return attributes


def set_result(span, convention: str, value: Any) -> None:
    span.set_attribute(_RESULT_KEY[convention], value if isinstance(value, str) else dumps(value))


def mark_success(span, shape: Shape, result: Any) -> None:
    if shape.convention == MCP:
        result = {"content": [{"type": "text", "text": dumps(result)}], "isError": False}
    set_result(span, shape.convention, result)
    if shape.convention in (OPENINFERENCE, OPENLLMETRY):
        span.set_status(Status(StatusCode.OK))  # both set OK explicitly on success


def _error(span, message: str) -> None:
    span.set_status(Status(StatusCode.ERROR, message))


def _exception_event(span, shape: Shape, type_name: str, message: str) -> None:
    """The `exception` event the SDK's record_exception writes, with an explicit timestamp."""
    module, _, name = type_name.rpartition(".")
    frame = f'  File "/srv/agent/tools/{shape.tool}.py", line 42, in {shape.tool}\n'
    raise_line = f"    raise {name}(message)\n"
    span.add_event(
        "exception",
        {
            "exception.type": type_name,
            "exception.message": message,
            "exception.stacktrace": f"Traceback (most recent call last):\n{frame}{raise_line}{type_name}: {message}\n",
            "exception.escaped": "False",
        },
        timestamp=shape.at_ns,
    )


# --- kinds of evidence ---------------------------------------------------------------------------


def http_status(code: int, message: str, cls: str) -> Failure:
    """An HTTP-backed tool got an error response: the status code is on the span (HTTP semconv)."""

    def mark(span, shape: Shape) -> None:
        span.set_attribute("http.response.status_code", code)
        span.set_attribute("error.type", str(code))
        _error(span, shape.fill(message))

    return Failure("http_status", cls, f"http.response.status_code={code}", mark)


def grpc_status(code: int, message: str, cls: str) -> Failure:
    def mark(span, shape: Shape) -> None:
        span.set_attribute("rpc.system", "grpc")
        span.set_attribute("rpc.grpc.status_code", code)
        _error(span, shape.fill(message))

    return Failure("grpc_status", cls, f"rpc.grpc.status_code={code}", mark)


def jsonrpc_error(code: int, message: str, cls: str) -> Failure:
    """An MCP protocol error: the JSON-RPC code as rpc.response.status_code and error.type (MCP semconv)."""

    def mark(span, shape: Shape) -> None:
        span.set_attribute("rpc.response.status_code", str(code))
        span.set_attribute("error.type", str(code))
        _error(span, shape.fill(message))

    return Failure("jsonrpc_code", cls, f"rpc.response.status_code={code}", mark)


def exception(type_name: str, message: str, cls: str, *, by: str = "") -> Failure:
    """A raised exception, recorded as each convention's instrumentation records it."""

    def mark(span, shape: Shape) -> None:
        text = shape.fill(message)
        _exception_event(span, shape, type_name, text)
        if shape.convention == GENAI:
            span.set_attribute("error.type", type_name)
            _error(span, text)
        elif shape.convention == OPENINFERENCE:
            _error(span, f"{type_name.rpartition('.')[2]}: {text}")
        elif shape.convention == MCP:
            span.set_attribute("error.type", type_name)
            _error(span, text)
        else:  # OpenLLMetry: Status(ERROR, str(e)) and record_exception
            _error(span, text)

    return Failure("exception", cls, by or f"{{type_key}}={type_name}", mark)


def envelope_attributes(cls: str, **fields: Any) -> Failure:
    """The explicit envelope on the span: tool.error.class / code / retryable / field / ..."""

    def mark(span, shape: Shape) -> None:
        span.set_attribute("tool.error.class", cls)
        for key, value in fields.items():
            span.set_attribute(f"tool.error.{key}", shape.fill(value) if isinstance(value, str) else value)
        _error(span, shape.fill(str(fields.get("message", ""))))

    return Failure("envelope_attributes", cls, f"envelope:tool.error.class={cls}", mark)


def result_envelope(body: dict, cls: str, by: str, *, name: str = "result_envelope") -> Failure:
    """A soft failure: the tool returned an error envelope to the model; the span status stays unset."""

    def mark(span, shape: Shape) -> None:
        set_result(span, shape.convention, _filled(body, shape))

    return Failure(name, cls, by, mark, soft=True)


def mcp_is_error(text: str, cls: str, by: str) -> Failure:
    """MCP CallToolResult with isError: error.type tool_error, status ERROR with the first text."""

    def mark(span, shape: Shape) -> None:
        filled = shape.fill(text)
        set_result(span, shape.convention, {"content": [{"type": "text", "text": filled}], "isError": True})
        span.set_attribute("error.type", "tool_error")
        _error(span, filled)

    return Failure("mcp_is_error", cls, by, mark)


def agents_sdk_error(error: str, cls: str, by: str) -> Failure:
    """The OpenAI Agents SDK's handled tool failure through its OpenInference bridge:
    status ERROR "Error running tool (non-fatal): {data}" with data a Python dict repr."""

    def mark(span, shape: Shape) -> None:
        data = {"tool_name": shape.tool, "error": shape.fill(error)}
        _error(span, f"Error running tool (non-fatal): {data!r}")
        set_result(span, shape.convention, "An error occurred while running the tool. Please try again.")

    return Failure("agents_sdk_status", cls, by, mark)


def _filled(value: Any, shape: Shape) -> Any:
    if isinstance(value, str):
        return shape.fill(value)
    if isinstance(value, dict):
        return {key: _filled(item, shape) for key, item in value.items()}
    if isinstance(value, list):
        return [_filled(item, shape) for item in value]
    return value
