"""Realistic OTLP/protobuf traffic of AI agents, for the ingest benchmark (not a test).

What a fleet of agents instrumented with the OTel GenAI conventions exports:

- traces of 5–20 spans: `invoke_agent <agent>` (root) → `chat gpt-4o` → one or two
  `execute_tool <tool>` after each chat, so a little over half of the spans are tool spans;
- about 15 attributes per span (gen_ai.operation.name, gen_ai.tool.name, gen_ai.tool.call.id,
  gen_ai.tool.call.arguments / .result as JSON strings, provider, models, token usage,
  server.*, http.* on HTTP-backed tools and some chat spans, …);
- a resource with service.name, service.version, deployment.environment.name,
  telemetry.sdk.* and host / process attributes;
- about 30 % of tool spans failing, with a mix of evidence: status ERROR with an
  `exception` event (type, message, stacktrace), HTTP 429 / 503 / 404 / 403 answers, and
  soft failures whose JSON result is an error envelope (MCP `isError`, `ok: false`, …);
- spans in end-time order (children before their parent, as BatchSpanProcessor exports
  them), cut into requests of exactly `spans_per_request` spans, so traces straddle request
  boundaries and the root (agent) span of a trace often arrives in the next request;
- timestamps within the last hour (inside retention, never in the future).

Speed: a "cycle" of `templates` requests is built once with the protobuf classes and
serialised. Every trace id ends with the 8-byte MARKER, so a fresh copy of the cycle with
new, unique trace ids is `body.replace(MARKER, copy_marker(n))` on the serialised bytes:
nothing sent is ever a duplicate, and building thousands of bodies costs only the
replace and the gzip. Ids inside attribute values (tool call, response, conversation,
order and customer ids) end with the text ID_MARKER, replaced the same way, so every
copy carries new ones, as live traffic does, and a server that remembers repeated
attribute values sees a copy's ids for the first time. The same copy number is used for
all templates of a cycle, so a trace cut across two consecutive requests keeps one trace id. Deterministic for a seed
(except the absolute timestamps, which are relative to the time of generation).
"""

from __future__ import annotations

import hashlib
import json
import random
import string
import time
import zlib
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

# The last 8 bytes of every trace id in a template; 0xfe never occurs in UTF-8 text,
# so it cannot appear inside a string attribute by accident (checked per template anyway).
MARKER = bytes.fromhex("feedfacec0ffee42")
# Ids inside attribute values (call, response, conversation, order, customer ids, …) end
# with this text, replaced per copy as MARKER is: a new copy carries new ids, as real
# traffic does, so no cache of repeated values sees a copy's ids again. Lower-case hex,
# like its replacements: no credential cue of ingest.redact is made of hex digits alone.
ID_MARKER = b"5ca1ab1e"

SPANS_PER_REQUEST = 512
MIN_TRACE_SPANS, MAX_TRACE_SPANS = 5, 20
TOOL_FAILURE_RATE = 0.30

_ALNUM = string.ascii_letters + string.digits
_LOWER_ALNUM = string.ascii_lowercase + string.digits


@dataclass(frozen=True)
class Template:
    """One serialised request of the cycle and what it holds."""

    body: bytes  # ExportTraceServiceRequest; every trace id ends with MARKER
    spans: int
    tool_spans: int
    failing_tool_spans: int


def copy_marker(copy_number: int) -> bytes:
    """The 8 bytes that replace MARKER in copy `copy_number` (unique, random-looking, never MARKER)."""
    marker = hashlib.blake2b(copy_number.to_bytes(8, "big"), digest_size=8, person=b"twbench").digest()
    return marker if marker != MARKER else bytes(8)[:-1] + b"\x01"


def copy_id_marker(copy_number: int) -> bytes:
    """The 8 lower-case hex characters that replace ID_MARKER in copy `copy_number` (never ID_MARKER)."""
    text = hashlib.blake2b(copy_number.to_bytes(8, "big"), digest_size=4, person=b"twbenchid").hexdigest().encode()
    return text if text != ID_MARKER else b"00000001"


def instantiate(template: Template, copy_number: int) -> bytes:
    """The template's body with the trace ids and value ids of copy `copy_number` (uncompressed)."""
    body = template.body.replace(MARKER, copy_marker(copy_number))
    return body.replace(ID_MARKER, copy_id_marker(copy_number))


def gzip_body(body: bytes, level: int = 6) -> bytes:
    """A single gzip member, as the OTLP exporters send with compression on."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return compressor.compress(body) + compressor.flush()


def gzip_pieces(pieces, level: int = 6) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [compressor.compress(piece) for piece in pieces]
    out.append(compressor.flush())
    return b"".join(out)


# ---------------------------------------------------------------------------
# Vocabulary
# ---------------------------------------------------------------------------

SERVICES = (
    ("support-agent", "2.14.3", "prod"),
    ("billing-agent", "1.8.0", "prod"),
    ("research-agent", "0.9.12", "staging"),
    ("ops-copilot", "3.2.1", "prod"),
)
AGENTS = ("support", "billing", "triage", "researcher", "refunds", "ops")
MODELS = (("openai", "gpt-4o", "gpt-4o-2024-08-06"), ("openai", "gpt-4o-mini", "gpt-4o-mini-2024-07-18"))

# tool -> (description, is HTTP-backed, arguments builder, success result builder)
KB_ARTICLES = (
    "How to reset your password: open Settings > Security and choose 'Reset password'. A link valid for 30 minutes is emailed.",
    "Refunds are issued to the original payment method within 5-7 business days after the return is received.",
    "Shipping to EU countries takes 3-5 business days; customs fees are included at checkout.",
    "To change the delivery address, the order must not have shipped yet. Use the address form in Orders.",
    "Invoices can be downloaded as PDF from Billing > Invoices; VAT numbers are added under Company details.",
)


def _alnum(rng: random.Random, n: int, alphabet: str = _ALNUM) -> str:
    return "".join(rng.choices(alphabet, k=n))


def _fresh(rng: random.Random, n: int, alphabet: str = _ALNUM) -> str:
    """n random-looking characters, new in every copy of a template: the last 8 are ID_MARKER."""
    return _alnum(rng, n - len(ID_MARKER), alphabet) + ID_MARKER.decode()


def _order_id(rng):
    return f"ord_{_fresh(rng, 12, string.ascii_uppercase + string.digits)}"


def _customer_id(rng):
    return f"cus_{_fresh(rng, 14)}"


def _args_lookup_order(rng):
    return {"order_id": _order_id(rng), "include": rng.sample(["items", "shipments", "payments", "notes"], 2)}


def _result_lookup_order(rng):
    items = [
        {"sku": f"SKU-{rng.randint(10000, 99999)}", "name": rng.choice(["Desk lamp", "USB-C cable", "Office chair", "Monitor arm", "Notebook A5"]),
         "qty": rng.randint(1, 3), "unit_price": round(rng.uniform(4, 400), 2)}
        for _ in range(rng.randint(1, 3))
    ]  # fmt: skip
    return {
        "order_id": _order_id(rng), "status": rng.choice(["processing", "shipped", "delivered"]),
        "placed_at": "2025-11-%02dT%02d:%02d:00Z" % (rng.randint(1, 28), rng.randint(0, 23), rng.randint(0, 59)),
        "currency": "EUR", "items": items, "shipments": [{"carrier": "DHL", "tracking": _alnum(rng, 12, string.digits)}],
    }  # fmt: skip


def _args_search_kb(rng):
    return {"query": rng.choice(["reset password", "refund policy", "shipping time to germany", "change address", "download invoice"]), "top_k": 3}


def _result_search_kb(rng):
    return {"results": [{"id": f"kb_{rng.randint(100, 999)}", "score": round(rng.uniform(0.5, 0.99), 3), "snippet": rng.choice(KB_ARTICLES)} for _ in range(2)]}


def _args_create_ticket(rng):
    return {
        "customer_id": _customer_id(rng), "priority": rng.choice(["low", "normal", "high"]),
        "subject": rng.choice(["Package not delivered", "Charged twice", "Cannot log in", "Wrong item received"]),
        "body": "Customer reports the issue started after the last update; asked for a callback tomorrow morning.",
    }  # fmt: skip


def _result_create_ticket(rng):
    return {"ticket_id": f"T-{rng.randint(100000, 999999)}", "status": "open", "url": f"https://support.example.com/tickets/{rng.randint(100000, 999999)}"}


def _args_get_customer(rng):
    return {"customer_id": _customer_id(rng)}


def _result_get_customer(rng):
    return {
        "id": _customer_id(rng), "name": rng.choice(["Ada Lovelace", "Grace Hopper", "Alan Turing", "Edsger Dijkstra"]),
        "email": f"user{rng.randint(1, 99999)}@example.org", "tier": rng.choice(["free", "pro", "enterprise"]),
        "created": "2023-%02d-%02d" % (rng.randint(1, 12), rng.randint(1, 28)), "open_tickets": rng.randint(0, 3),
    }  # fmt: skip


def _args_refund_payment(rng):
    return {"order_id": _order_id(rng), "amount": round(rng.uniform(5, 300), 2), "currency": "EUR", "reason": "damaged_item"}


def _result_refund_payment(rng):
    return {"refund_id": f"re_{_fresh(rng, 24)}", "status": "succeeded", "amount": round(rng.uniform(5, 300), 2)}


def _args_get_weather(rng):
    return {"city": rng.choice(["Berlin", "Paris", "Lisbon", "Warsaw", "Oslo"]), "units": "metric"}


def _result_get_weather(rng):
    return {"temperature": round(rng.uniform(-5, 30), 1), "conditions": rng.choice(["clear", "rain", "cloudy"]), "wind_kph": rng.randint(0, 40)}


def _args_run_sql(rng):
    return {"query": f"SELECT id, status, total FROM orders WHERE customer_id = '{_customer_id(rng)}' ORDER BY created_at DESC LIMIT 5"}


def _result_run_sql(rng):
    return {"columns": ["id", "status", "total"], "rows": [[_order_id(rng), rng.choice(["paid", "refunded"]), round(rng.uniform(5, 500), 2)] for _ in range(rng.randint(1, 5))]}


def _args_send_email(rng):
    return {"to": f"user{rng.randint(1, 99999)}@example.org", "template": "order_update", "variables": {"order_id": _order_id(rng)}}


def _result_send_email(rng):
    return {"message_id": f"<{_fresh(rng, 20)}@mail.example.com>", "queued": True}


TOOLS = {
    "lookup_order": ("Look up an order by its id", True, _args_lookup_order, _result_lookup_order),
    "search_kb": ("Search the help-center knowledge base", True, _args_search_kb, _result_search_kb),
    "create_ticket": ("Open a support ticket for a human agent", True, _args_create_ticket, _result_create_ticket),
    "get_customer": ("Fetch a customer profile", True, _args_get_customer, _result_get_customer),
    "refund_payment": ("Refund all or part of a payment", True, _args_refund_payment, _result_refund_payment),
    "get_weather": ("Current weather for a city", True, _args_get_weather, _result_get_weather),
    "run_sql": ("Run a read-only SQL query on the orders replica", False, _args_run_sql, _result_run_sql),
    "send_email": ("Send a templated email to a customer", True, _args_send_email, _result_send_email),
}
TOOL_NAMES = tuple(TOOLS)

_TRACEBACK = """Traceback (most recent call last):
  File "/app/.venv/lib/python3.12/site-packages/agents/tool.py", line 412, in _on_invoke_tool
    result = await the_tool_function(ctx, **kwargs)
  File "/app/support_agent/tools/{tool}.py", line {line}, in {tool}
    response = await client.{method}(url, json=payload, timeout=30)
  File "/app/.venv/lib/python3.12/site-packages/httpx/_client.py", line 1905, in {method}
    return await self.request("{verb}", url, json=json, timeout=timeout)
  File "/app/.venv/lib/python3.12/site-packages/httpx/_client.py", line 1585, in send
    response = await self._send_handling_auth(request, auth=auth, follow_redirects=follow_redirects)
  File "/app/.venv/lib/python3.12/site-packages/httpx/_transports/default.py", line 394, in handle_async_request
    resp = await self._pool.handle_async_request(req)
{exc_type}: {message}
"""

# (exception.type, message builder, extra attributes)
_EXCEPTIONS = (
    ("httpx.ReadTimeout", lambda rng: "The read operation timed out"),
    ("httpx.ConnectError", lambda rng: "[Errno 111] Connection refused"),
    ("TimeoutError", lambda rng: f"tool did not answer within {rng.choice([10, 30, 60])} seconds"),
    ("ValueError", lambda rng: f"invalid literal for int() with base 10: '{_fresh(rng, 12)}'"),
    ("KeyError", lambda rng: "'customer_id'"),
    ("PermissionError", lambda rng: "[Errno 13] Permission denied: '/data/exports/report.csv'"),
    ("pydantic_core._pydantic_core.ValidationError",
     lambda rng: "1 validation error for LookupOrderArgs\norder_id\n  Field required [type=missing, input_value={'include': ['items']}, input_type=dict]"),
)  # fmt: skip

_HTTP_FAILURES = {
    429: ("Too Many Requests", lambda rng: {"error": {"message": f"Rate limit exceeded: {rng.randint(50, 600)} requests per minute. Retry after {rng.randint(1, 30)}s.", "type": "rate_limit_exceeded"}}),
    503: ("Service Unavailable", lambda rng: {"error": "upstream unavailable", "status": 503, "retryAfter": rng.randint(1, 10)}),
    404: ("Not Found", lambda rng: {"detail": f"Order {_order_id(rng)} not found", "status": 404, "title": "Not Found"}),
    403: ("Forbidden", lambda rng: {"error": {"code": "insufficient_scope", "message": "The API token lacks the orders:write scope"}}),
}  # fmt: skip

_ENVELOPES = (
    lambda rng: {"isError": True, "content": [{"type": "text", "text": f"Order {_order_id(rng)} not found in region eu-west-1"}]},
    lambda rng: {"ok": False, "error": {"code": "VALIDATION_ERROR", "message": "field 'items[0].sku' is required", "field": "items[0].sku",
                                         "retryable": False, "suggestion": "Pass the SKU shown by lookup_order"}},
    lambda rng: {"success": False, "errorCategory": "business", "message": "Refund exceeds the 30-day return window", "isRetryable": False},
    lambda rng: {"success": False, "error": {"type": "rate_limited", "message": "Too many lookups for this customer", "retryAfterMs": rng.randint(500, 5000)}},
)  # fmt: skip


# ---------------------------------------------------------------------------
# Building
# ---------------------------------------------------------------------------


def _any(value) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, (list, tuple)):
        return AnyValue(array_value=ArrayValue(values=[_any(v) for v in value]))
    return AnyValue(string_value=str(value))


def _attrs(mapping: dict) -> list[KeyValue]:
    return [KeyValue(key=key, value=_any(value)) for key, value in mapping.items()]


def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"))


@dataclass
class _SpanSpec:
    trace_local: bytes
    span_id: bytes
    parent_id: bytes
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict
    scope: int  # 0: the agents framework, 1: the OpenAI client instrumentation
    status_code: int = 0
    status_message: str = ""
    events: tuple = ()
    tool: bool = False
    failing: bool = False


class _Generator:
    def __init__(self, seed: int, now_ns: int):
        self.rng = random.Random(seed)
        self.now_ns = now_ns
        self.trace_locals: set[bytes] = set()

    def _id(self, n: int) -> bytes:
        while True:
            value = self.rng.getrandbits(8 * n).to_bytes(n, "big")
            if any(value):
                return value

    def trace(self, size: int) -> list[_SpanSpec]:
        rng = self.rng
        while True:
            local = self._id(8)
            if local not in self.trace_locals:
                self.trace_locals.add(local)
                break
        provider, model, response_model = rng.choice(MODELS)
        agent = rng.choice(AGENTS)
        conversation = f"conv_{_fresh(rng, 24)}"
        root_id = self._id(8)
        start = self.now_ns - rng.randint(90, 3300) * 10**9
        t = start + rng.randint(1, 5) * 10**6
        children: list[_SpanSpec] = []
        input_total = output_total = 0
        while len(children) < size - 1:
            # chat
            duration = rng.randint(300, 2500) * 10**6
            input_tokens, output_tokens = rng.randint(400, 6000), rng.randint(20, 600)
            input_total += input_tokens
            output_total += output_tokens
            attrs = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": model,
                "gen_ai.request.temperature": 0.2,
                "gen_ai.request.max_tokens": 4096,
                "gen_ai.request.top_p": 1.0,
                "gen_ai.response.model": response_model,
                "gen_ai.response.id": f"chatcmpl-{_fresh(rng, 29)}",
                "gen_ai.response.finish_reasons": ["tool_calls"],
                "gen_ai.usage.input_tokens": input_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
                "gen_ai.conversation.id": conversation,
                "server.address": "api.openai.com",
                "server.port": 443,
                "gen_ai.openai.response.service_tier": "default",
            }
            if rng.random() < 0.5:
                attrs["http.response.status_code"] = 200
            children.append(
                _SpanSpec(local, self._id(8), root_id, f"chat {model}", 3, t, t + duration, attrs, 1)
            )
            t += duration + rng.randint(1, 5) * 10**6
            for _ in range(1 if rng.random() < 0.5 else 2):
                if len(children) >= size - 1:
                    break
                children.append(self._tool(local, root_id, t, provider, model, conversation))
                t = children[-1].end_ns + rng.randint(1, 5) * 10**6
        if children[-1].attributes.get("gen_ai.operation.name") == "chat":
            children[-1].attributes["gen_ai.response.finish_reasons"] = ["stop"]
        end = t + rng.randint(2, 20) * 10**6
        root = _SpanSpec(
            local, root_id, b"", f"invoke_agent {agent}", 1, start, end,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "gen_ai.agent.id": f"asst_{_fresh(rng, 24)}",
                "gen_ai.agent.description": f"The {agent} agent: answers customers and calls back-office tools",
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": model,
                "gen_ai.response.model": response_model,
                "gen_ai.conversation.id": conversation,
                "gen_ai.usage.input_tokens": input_total,
                "gen_ai.usage.output_tokens": output_total,
                "server.address": "api.openai.com",
                "server.port": 443,
            },
            0,
        )  # fmt: skip
        return [*children, root]  # end-time order: the root ends last

    def _tool(self, local, parent_id, start, provider, model, conversation) -> _SpanSpec:
        rng = self.rng
        tool = rng.choice(TOOL_NAMES)
        description, http_backed, make_args, make_result = TOOLS[tool]
        duration = rng.randint(8, 900) * 10**6
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": f"call_{_fresh(rng, 24)}",
            "gen_ai.tool.type": "function",
            "gen_ai.tool.description": description,
            "gen_ai.tool.call.arguments": _dumps(make_args(rng)),
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.conversation.id": conversation,
            "code.function.name": f"support_agent.tools.{tool}",
            "thread.id": rng.randint(1, 64),
        }
        if http_backed:
            verb = "POST" if tool in ("create_ticket", "refund_payment", "send_email") else "GET"
            attrs["http.request.method"] = verb
            attrs["server.address"] = "api.internal.example.com"
            attrs["url.full"] = f"https://api.internal.example.com/v2/{tool.replace('_', '/')}"
        status_code, status_message, events = (1 if rng.random() < 0.2 else 0), "", ()
        failing = rng.random() < TOOL_FAILURE_RATE
        if not failing:
            attrs["gen_ai.tool.call.result"] = _dumps(make_result(rng))
            if http_backed:
                attrs["http.response.status_code"] = 200
        else:
            roll = rng.random()
            if roll < 0.35 or (roll < 0.70 and not http_backed):
                exc_type, message = rng.choice(_EXCEPTIONS)
                message = message(rng)
                if exc_type.endswith("Timeout") or exc_type == "TimeoutError":
                    duration = rng.choice([10, 30]) * 10**9
                status_code, status_message = 2, f"{exc_type.rsplit('.', 1)[-1]}: {message}"
                attrs["error.type"] = exc_type
                stack = _TRACEBACK.format(
                    tool=tool, line=rng.randint(20, 300), method="post", verb="POST", exc_type=exc_type, message=message
                )
                events = (
                    ("exception", start + duration, {"exception.type": exc_type, "exception.message": message,
                                                     "exception.stacktrace": stack, "exception.escaped": False}),
                )  # fmt: skip
                attrs["gen_ai.tool.call.result"] = f"Error running tool {tool}: {message}"
            elif roll < 0.70:
                code = rng.choice(tuple(_HTTP_FAILURES))
                phrase, body = _HTTP_FAILURES[code]
                status_code, status_message = 2, f"HTTP {code} {phrase}"
                attrs["http.response.status_code"] = code
                attrs["error.type"] = str(code)
                attrs["gen_ai.tool.call.result"] = _dumps(body(rng))
            else:
                status_code = 0
                attrs["gen_ai.tool.call.result"] = _dumps(rng.choice(_ENVELOPES)(rng))
                if http_backed:
                    attrs["http.response.status_code"] = 200
        return _SpanSpec(
            local, self._id(8), parent_id, f"execute_tool {tool}", 1, start, start + duration, attrs, 0,
            status_code, status_message, events, tool=True, failing=failing,
        )  # fmt: skip


_SCOPES = (
    InstrumentationScope(name="opentelemetry.instrumentation.openai_agents", version="0.2.1"),
    InstrumentationScope(name="opentelemetry.instrumentation.openai_v2", version="2.1b0"),
)


def _resource(index: int, rng: random.Random) -> Resource:
    service, version, environment = SERVICES[index % len(SERVICES)]
    return Resource(
        attributes=_attrs(
            {
                "service.name": service,
                "service.version": version,
                "service.instance.id": f"{service}-{_alnum(rng, 10, _LOWER_ALNUM)}",
                "deployment.environment.name": environment,
                "telemetry.sdk.name": "opentelemetry",
                "telemetry.sdk.language": "python",
                "telemetry.sdk.version": "1.38.0",
                "host.name": f"ip-10-0-{rng.randint(0, 255)}-{rng.randint(0, 255)}.eu-west-1.compute.internal",
                "process.pid": rng.randint(1000, 60000),
                "process.runtime.name": "cpython",
                "process.runtime.version": "3.12.7",
            }
        )
    )


def _span_message(spec: _SpanSpec) -> Span:
    return Span(
        trace_id=spec.trace_local + MARKER,
        span_id=spec.span_id,
        parent_span_id=spec.parent_id,
        name=spec.name,
        kind=spec.kind,
        start_time_unix_nano=spec.start_ns,
        end_time_unix_nano=spec.end_ns,
        attributes=_attrs(spec.attributes),
        events=[Span.Event(name=name, time_unix_nano=when, attributes=_attrs(attrs)) for name, when, attrs in spec.events],
        status=Status(code=spec.status_code, message=spec.status_message),
        flags=0x101,
    )


def _trace_sizes(rng: random.Random, total: int) -> list[int]:
    """Trace sizes in [MIN, MAX] summing to `total` exactly."""
    sizes, left = [], total
    while left > MAX_TRACE_SPANS:
        size = rng.randint(MIN_TRACE_SPANS, min(MAX_TRACE_SPANS, left - MIN_TRACE_SPANS))
        sizes.append(size)
        left -= size
    sizes.append(left)
    return sizes


def build_cycle(
    templates: int = 16, *, spans_per_request: int = SPANS_PER_REQUEST, seed: int = 42, now_ns: int | None = None
) -> list[Template]:
    """`templates` consecutive requests of one span stream (traces cut across request boundaries)."""
    now_ns = now_ns if now_ns is not None else time.time_ns()
    generator = _Generator(seed, now_ns)
    stream: list[_SpanSpec] = []
    for size in _trace_sizes(generator.rng, templates * spans_per_request):
        stream.extend(generator.trace(size))
    out = []
    for index in range(templates):
        chunk = stream[index * spans_per_request : (index + 1) * spans_per_request]
        scopes = [ScopeSpans(scope=scope, schema_url="https://opentelemetry.io/schemas/1.37.0") for scope in _SCOPES]
        for spec in chunk:
            scopes[spec.scope].spans.append(_span_message(spec))
        request = ExportTraceServiceRequest(
            resource_spans=[
                ResourceSpans(
                    resource=_resource(index, generator.rng),
                    scope_spans=scopes,
                    schema_url="https://opentelemetry.io/schemas/1.37.0",
                )
            ]
        )
        body = request.SerializeToString()
        if body.count(MARKER) != len(chunk):
            raise RuntimeError("trace-id marker found outside trace ids; change MARKER")
        out.append(
            Template(
                body=body,
                spans=len(chunk),
                tool_spans=sum(spec.tool for spec in chunk),
                failing_tool_spans=sum(spec.failing for spec in chunk),
            )
        )
    return out


def simulator_cycle(templates: int = 16, *, spans_per_request: int = SPANS_PER_REQUEST, seed: int = 7) -> list[Template]:
    """The same kind of cycle, made from the demo fleet's traffic (demo.simulate: 23 tools,
    every kind of evidence, the official SDK's encoder) instead of this module's templates.

    Each trace id keeps its first 8 bytes and gets MARKER as its last 8, so copies work the
    same way; a trace cut across two requests keeps one id. Only trace ids are new in each
    copy: the fleet's call and conversation ids repeat every cycle, which flatters the
    server's memory of repeated attribute values (ingest.otlp) a little. Needs Django set up (the
    classifier counts the tool spans)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from demo.simulate.modes import encoded_requests
    from ingest import otlp
    from ingest.limits import DEFAULT_LIMITS
    from ingest.normalize import normalize_tool_call

    out: list[Template] = []
    for raw in encoded_requests(templates * spans_per_request, seed=seed, spans_per_request=spans_per_request):
        request = ExportTraceServiceRequest.FromString(raw)
        spans = 0
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    span.trace_id = span.trace_id[:8] + MARKER
                    for link in span.links:
                        link.trace_id = link.trace_id[:8] + MARKER
                    spans += 1
        if spans != spans_per_request:
            continue  # the stream's last, short request
        body = request.SerializeToString()
        request = ExportTraceServiceRequest.FromString(body)
        if body.count(MARKER) < spans:
            raise RuntimeError("trace-id marker lost; change MARKER")
        records = otlp.iter_spans(request, DEFAULT_LIMITS, now_ns=time.time_ns())
        calls = [call for call in map(normalize_tool_call, records) if call is not None]
        out.append(Template(
            body=body, spans=spans, tool_spans=len(calls), failing_tool_spans=sum(1 for call in calls if not call.ok),
        ))  # fmt: skip
        if len(out) == templates:
            return out
    raise RuntimeError(f"the simulator made only {len(out)} full requests of {spans_per_request} spans")
