"""A small, deterministic demo history for the Quickstart: realistic agent traces of the last day.

Built with the official OpenTelemetry SDK and encoded by the official OTLP encoder,
then stored through the same `spans_ingest` service the /v1/traces endpoint uses.
Each demo tool fails in its own way, so every kind of evidence shows up.
"""

from __future__ import annotations

import json
import random
import time

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, set_span_in_context

SERVICES = [("checkout-agent", "prod", "checkout"), ("support-agent", "prod", "support"), ("support-agent", "staging", "support")]
SECOND = 1_000_000_000


def _ok(span, rng):
    span.set_attribute("gen_ai.tool.call.result", json.dumps({"ok": True, "items": rng.randint(0, 5)}))


def _http(status: int, message: str):
    def fail(span, rng):
        span.set_attribute("http.response.status_code", status)
        span.set_attribute("error.type", str(status))
        span.set_status(Status(StatusCode.ERROR, message))

    return fail


def _exception(exc: Exception):
    def fail(span, rng):
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))

    return fail


def _envelope(body: dict):
    def fail(span, rng):  # a soft failure: the tool returned an error envelope, status stays unset
        span.set_attribute("gen_ai.tool.call.result", json.dumps(body))

    return fail


def _attributes(**attributes):
    def fail(span, rng):
        for key, value in attributes.items():
            span.set_attribute(key, value)
        span.set_status(Status(StatusCode.ERROR, attributes.get("tool.error.message", "")))

    return fail


# tool -> (failure probability, how it fails, whether the controller retries it)
TOOLS = {
    "search_kb": (0.04, _http(503, "upstream unavailable"), True),
    "lookup_order": (0.15, _envelope({"error": {"code": "NOT_FOUND", "message": "Order ord_4411 does not exist", "retryable": False}}), False),
    "charge_card": (0.12, _exception(TimeoutError("payment gateway did not answer within 30s")), True),
    "create_ticket": (0.08, _http(403, "token lacks scope tickets:write"), False),
    "update_address": (
        0.18,
        _attributes(**{
            "tool.error.class": "validation", "tool.error.retryable": False, "tool.error.field": "postal_code",
            "tool.error.suggestion": "Use a 5-digit US ZIP code, e.g. 94107", "tool.error.message": "postal_code 'SW1A' is not a US ZIP code",
        }),
        True,
    ),
    "refund_order": (0.10, _envelope({"isError": True, "errorCategory": "business", "isRetryable": False, "description": "Refund of 750 exceeds the automatic limit of 500"}), False),
    "legacy_export": (0.20, _exception(RuntimeError("Something went wrong")), True),
}  # fmt: skip


def demo_request(*, seed: int = 7, traces: int = 240, hours: int = 24, now_ns: int | None = None):
    """An ExportTraceServiceRequest of `traces` agent traces spread over the last `hours`."""
    rng = random.Random(seed)
    now_ns = now_ns or time.time_ns()
    spans = []
    for service, environment, agent in SERVICES:
        memory = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": service, "deployment.environment.name": environment}))
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("toolwatch.demo", "1.0")
        for _ in range(traces // len(SERVICES)):
            _trace(tracer, rng, agent, now_ns - rng.randint(60, hours * 3600) * SECOND)
        provider.shutdown()
        spans.extend(memory.get_finished_spans())
    return encode_spans(spans)


def _trace(tracer, rng, agent: str, start: int) -> None:
    clock = start
    root = tracer.start_span(
        f"invoke_agent {agent}", start_time=clock, attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
    )
    context = set_span_in_context(root)
    for tool in rng.sample(sorted(TOOLS), k=rng.randint(1, 3)):
        probability, fail, retried = TOOLS[tool]
        chat = tracer.start_span("chat gpt-4o", context=context, start_time=clock, attributes={"gen_ai.operation.name": "chat"})
        clock += rng.randint(300, 1500) * 1_000_000
        chat.end(end_time=clock)
        call_id = f"call_{rng.getrandbits(48):012x}"
        for attempt in (1, 2):
            span = tracer.start_span(
                f"execute_tool {tool}",
                context=context,
                start_time=clock,
                attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.call.arguments": json.dumps({"id": rng.randint(1000, 9999)}), "tool.call.attempt": attempt,
                },
            )  # fmt: skip
            failed = rng.random() < probability
            (fail if failed else _ok)(span, rng)
            clock += rng.randint(20, 900) * 1_000_000
            span.end(end_time=clock)
            if not (failed and retried):
                break
    root.end(end_time=clock + 5_000_000)
