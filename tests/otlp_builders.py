"""Builders of OTLP requests as real senders shape them.

`sdk_spans` runs the official OpenTelemetry SDK and returns its finished spans, for
the official exporter or the official encoder; `json_request` builds OTLP/JSON the
way the JavaScript exporter sends it (lower-case hex ids, int64 timestamps as
strings, intValue as a number, integer enums).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode


def sdk_spans(build: Callable, *, service: str = "support-agent", environment: str = "prod") -> list:
    """Run `build(tracer)` under a fresh SDK provider and return the finished ReadableSpans."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": service, "deployment.environment.name": environment})
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    build(provider.get_tracer("toolwatch.tests", "1.0"))
    provider.shutdown()
    return list(memory.get_finished_spans())


def agent_with_tools(tracer, *, agent: str = "support", tools: list[dict] | None = None) -> None:
    """An invoke_agent span with a chat span and execute_tool spans below it.

    Each tool dict: name, attributes (extra), error (an exception instance to record), status_message.
    """
    tools = tools if tools is not None else [{"name": "lookup_order"}]
    with tracer.start_as_current_span(
        f"invoke_agent {agent}", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
    ):
        with tracer.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}):
            pass
        for tool in tools:
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool["name"]}
            attributes.update(tool.get("attributes", {}))
            with tracer.start_as_current_span(
                f"execute_tool {tool['name']}", attributes=attributes, record_exception=False, set_status_on_exception=False
            ) as span:
                if tool.get("error") is not None:
                    span.record_exception(tool["error"])
                    span.set_status(Status(StatusCode.ERROR, tool.get("status_message") or str(tool["error"])))


def protobuf_request(spans: list) -> bytes:
    return encode_spans(spans).SerializeToString()


def _any_value(value) -> dict:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": value}  # the JS exporter sends a JSON number
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": _any_value(v)} for k, v in value.items()]}}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def attributes(mapping: dict) -> list[dict]:
    return [{"key": key, "value": _any_value(value)} for key, value in mapping.items()]


def json_span(
    trace_id: str,
    span_id: str,
    name: str,
    *,
    parent: str = "",
    attrs: dict | None = None,
    status_code: int = 0,
    status_message: str = "",
    start_ns: int | None = None,
    duration_ns: int = 25_000_000,
    events: list[dict] | None = None,
    kind: int = 1,
) -> dict:
    start_ns = start_ns if start_ns is not None else time.time_ns() - 60_000_000_000
    span = {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + duration_ns),
        "attributes": attributes(attrs or {}),
        "droppedAttributesCount": 0,
        "events": events or [],
        "status": {"code": status_code, "message": status_message} if status_code else {"code": 0},
        "links": [],
        "flags": 257,
    }
    return span


def json_request(resources: list[tuple[dict, list[dict]]]) -> dict:
    """[(resource attributes, spans)] -> an ExportTraceServiceRequest in OTLP/JSON."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": attributes(resource), "droppedAttributesCount": 0},
                "scopeSpans": [{"scope": {"name": "@opentelemetry/instrumentation-test", "version": "0.1.0"}, "spans": spans}],
                "schemaUrl": "https://opentelemetry.io/schemas/1.30.0",
            }
            for resource, spans in resources
        ]
    }


def json_bytes(document: dict) -> bytes:
    return json.dumps(document).encode()
