"""The simulated fleet: deployments, agents and about twenty tools, each failing its own way.

Every tool has its own error rate, mix of failures (each a kind of evidence from
`evidence`), latency distribution, retry behaviour and escalation habits, so that the
overview has something to tell apart: a flaky search behind a 503-ing proxy, an order
lookup that returns a NOT_FOUND envelope, a payment call that times out and is retried,
a legacy export that only ever says "Something went wrong", MCP tools, OpenInference and
OpenLLMetry instrumented tools. Pure data: change volumes and behaviours here.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from demo.simulate import evidence as ev
from demo.simulate.evidence import GENAI, MCP, OPENINFERENCE, OPENLLMETRY, Failure

# How a retry is marked on the span (docs/contract/attempts.md): "explicit" = tool.call.attempt and the
# same call id; "implicit" = the model re-issues the same arguments under a new call id;
# "resend" = http.request.resend_count. A repair (changed arguments) is always explicit.
EXPLICIT, IMPLICIT, RESEND = "explicit", "implicit", "resend"
# How an escalation is recorded (docs/contract/attempts.md).
BY_ATTRIBUTE, BY_NEXT_ACTION, BY_EVENT, BY_HANDOFF = "attribute", "next_action", "event", "handoff"
HANDOFF_TOOL = "handoff_to_human"


def _id(rng: random.Random, prefix: str, n: int = 8) -> str:
    return prefix + "".join(rng.choices(string.ascii_uppercase + string.digits, k=n))


@dataclass(frozen=True)
class Tool:
    name: str
    args: Callable[[random.Random], dict]
    result: Callable[[random.Random, dict], Any]
    failures: tuple[tuple[float, Failure], ...] = ()  # (weight, failure)
    error_rate: float = 0.03  # chance that a first attempt fails
    convention: str = GENAI
    tool_type: str = "function"
    latency_ms: float = 150.0  # median of a log-normal
    latency_sigma: float = 0.5
    retry_marker: str = EXPLICIT
    max_attempts: int = 3  # for transient failures
    retry_success: float = 0.7  # a retried transient (or unknown) failure succeeds
    repair_success: float = 0.6  # a validation failure that names a field is repaired
    retry_unknown: float = 0.0  # chance an unclassifiable failure is retried once as it was
    # class -> (chance the failed call is escalated, how)
    escalate: dict[str, tuple[float, str]] = field(default_factory=dict)
    repair: Callable[[random.Random, dict], dict] | None = None  # the repaired arguments


@dataclass(frozen=True)
class Agent:
    name: str
    tools: tuple[tuple[str, float], ...]  # (tool, weight)
    # tool -> the sub-agent that makes the call (an invoke_agent span in between)
    delegates: dict[str, str] = field(default_factory=dict)
    model: str = "gpt-4o-mini"


@dataclass(frozen=True)
class Deployment:
    service: str
    version: str
    environment: str
    agent: str
    share: float  # of all sessions


@dataclass(frozen=True)
class Profile:
    tools: dict[str, Tool]
    agents: dict[str, Agent]
    deployments: tuple[Deployment, ...]
    calls_per_session: tuple[int, int] = (1, 4)  # uniform, inclusive

    @property
    def mean_calls_per_session(self) -> float:
        low, high = self.calls_per_session
        return (low + high) / 2

    def expected_calls_per_hour(self, rate: float, tools: frozenset[str] | None = None) -> dict[str, float]:
        """Each tool's expected first-attempt calls per hour at `rate` calls per hour in all."""
        out: dict[str, float] = {}
        deployments = [d for d in self.deployments if self.toolset(d.agent, tools)]
        total_share = sum(d.share for d in deployments)
        for deployment in deployments:
            toolset = self.toolset(deployment.agent, tools)
            weights = sum(weight for _, weight in toolset)
            for tool, weight in toolset:
                out[tool] = out.get(tool, 0.0) + rate * deployment.share / total_share * weight / weights
        return out

    def toolset(self, agent: str, tools: frozenset[str] | None) -> tuple[tuple[str, float], ...]:
        return tuple((tool, weight) for tool, weight in self.agents[agent].tools if tools is None or tool in tools)


# --- the tools -----------------------------------------------------------------------------------

_ORDER_STATES = ("processing", "shipped", "delivered")
_CITIES = ("Lisbon", "Osaka", "Denver", "Nairobi", "Tallinn")


def _order_args(rng):
    return {"order_id": _id(rng, "ord_")}


TOOLS: tuple[Tool, ...] = (
    Tool(
        "search_kb", convention=GENAI, tool_type="datastore", latency_ms=180, latency_sigma=0.6, error_rate=0.05,
        args=lambda rng: {"query": rng.choice(("reset password", "refund policy", "eu shipping", "invoice vat", "change address")), "top_k": 5, "request_id": _id(rng, "q_")},
        result=lambda rng, a: {"hits": [{"id": f"kb_{rng.randint(10, 99)}", "score": round(rng.uniform(0.5, 0.99), 2)}]},
        failures=(
            (0.7, ev.http_status(503, "search backend unavailable (503)", "transient")),
            (0.3, ev.http_status(429, "rate limited by the search backend", "transient")),
        ),
        retry_marker=EXPLICIT, retry_success=0.8,
    ),
    Tool(
        "lookup_order", convention=GENAI, tool_type="extension", latency_ms=90, error_rate=0.12,
        args=_order_args,
        result=lambda rng, a: {"order_id": a["order_id"], "state": rng.choice(_ORDER_STATES), "items": rng.randint(1, 4)},
        failures=(
            (0.8, ev.result_envelope({"error": {"code": "NOT_FOUND", "message": "Order {order_id} does not exist", "retryable": False}}, "not_found", "result:code=NOT_FOUND")),
            (0.2, ev.http_status(504, "orders API gateway timeout", "transient")),
        ),
        retry_marker=IMPLICIT,
    ),
    Tool(
        "create_ticket", convention=GENAI, tool_type="extension", latency_ms=240, error_rate=0.10,
        args=lambda rng: {"subject": rng.choice(("Damaged item", "Late delivery", "Wrong size")), "customer_id": _id(rng, "cus_")},
        result=lambda rng, a: {"ticket_id": _id(rng, "T-", 6)},
        failures=((1.0, ev.http_status(403, "token lacks scope tickets:write", "permission")),),
        escalate={"permission": (0.6, BY_NEXT_ACTION)},
    ),
    Tool(
        "update_address", convention=GENAI, tool_type="extension", latency_ms=110, error_rate=0.15,
        args=lambda rng: {"customer_id": _id(rng, "cus_"), "postal_code": rng.choice(("SW1A", "9410", "ABCDE"))},
        result=lambda rng, a: {"updated": True},
        failures=((1.0, ev.envelope_attributes(
            "validation", code="INVALID_POSTAL_CODE", retryable=False, field="postal_code",
            suggestion="Use a 5-digit US ZIP code, e.g. 94107", message="postal_code '{postal_code}' is not a US ZIP code",
        )),),
        repair=lambda rng, a: {**a, "postal_code": "94107"}, repair_success=0.85,
    ),
    Tool(
        "refund_order", convention=GENAI, tool_type="extension", latency_ms=300, error_rate=0.10,
        args=lambda rng: {"order_id": _id(rng, "ord_"), "amount": rng.choice((120, 480, 750, 1200))},
        result=lambda rng, a: {"refund_id": _id(rng, "re_"), "state": "pending"},
        failures=((1.0, ev.result_envelope(
            {"isError": True, "errorCategory": "business", "isRetryable": False, "description": "Refund of {amount} exceeds the automatic limit of 500"},
            "business", "result:errorCategory=business",
        )),),
        escalate={"business": (0.7, BY_HANDOFF)},
    ),
    Tool(
        "schedule_callback", convention=GENAI, latency_ms=140, error_rate=0.12,
        args=lambda rng: {"contact": rng.choice(("Alex", "Sam", "Kim")), "slot": "tomorrow 10:00", "ref": _id(rng, "cb_")},
        result=lambda rng, a: {"scheduled": True},
        failures=((1.0, ev.result_envelope(
            {"isError": True, "code": "AMBIGUOUS_MATCH", "message": "3 contacts match '{contact}'", "options": ["{contact} Reyes", "{contact} Ito", "{contact} Berg"]},
            "user_input", "result:code=AMBIGUOUS_MATCH",
        )),),
        escalate={"user_input": (0.8, BY_NEXT_ACTION)},
    ),
    Tool(
        "translate_text", convention=GENAI, latency_ms=260, error_rate=0.04,
        args=lambda rng: {"text_id": _id(rng, "tx_"), "target": rng.choice(("de", "ja", "pt"))},
        result=lambda rng, a: {"chars": rng.randint(40, 900)},
        failures=(
            (0.7, ev.grpc_status(14, "translation service UNAVAILABLE", "transient")),
            (0.3, ev.grpc_status(3, "INVALID_ARGUMENT: unsupported language pair", "validation")),
        ),
        retry_marker=RESEND,
    ),
    Tool(
        "send_email", convention=GENAI, tool_type="extension", latency_ms=200, error_rate=0.06,
        args=lambda rng: {"to": f"{_id(rng, 'c', 5).lower()}@example.com", "template": "order_update"},
        result=lambda rng, a: {"message_id": _id(rng, "msg_", 10)},
        failures=((1.0, ev.result_envelope(
            {"success": False, "error_code": "RATE_LIMITED", "message": "Sending quota exceeded for this minute", "retryAfterSeconds": 30},
            "transient", "result:error_code=RATE_LIMITED",
        )),),
        retry_marker=RESEND, retry_success=0.9,
    ),
    Tool(
        "charge_card", convention=GENAI, tool_type="extension", latency_ms=650, latency_sigma=0.7, error_rate=0.10,
        args=lambda rng: {"order_id": _id(rng, "ord_"), "amount_cents": rng.randint(500, 90000)},
        result=lambda rng, a: {"charge_id": _id(rng, "ch_", 12), "captured": True},
        failures=(
            (0.6, ev.exception("TimeoutError", "payment gateway did not answer within 30s", "transient")),
            (0.4, ev.exception("stripe.error.CardError", "Your card was declined.", "business")),
        ),
        max_attempts=2, retry_success=0.75,
        escalate={"business": (0.3, BY_ATTRIBUTE)},
    ),
    Tool(
        "calculate_shipping", convention=GENAI, latency_ms=40, latency_sigma=0.3, error_rate=0.01,
        args=lambda rng: {"city": rng.choice(_CITIES), "weight_g": rng.randint(100, 20000)},
        result=lambda rng, a: {"cents": rng.randint(300, 4000)},
        failures=((1.0, ev.exception("ValueError", "weight_g must be below 20000", "validation")),),
    ),
    Tool(
        "apply_coupon", convention=GENAI, latency_ms=70, error_rate=0.18,
        args=lambda rng: {"order_id": _id(rng, "ord_"), "code": rng.choice(("SPRING10", "VIP25", "FREESHIP"))},
        result=lambda rng, a: {"discount_cents": rng.randint(100, 2500)},
        failures=(
            (0.6, ev.http_status(409, "coupon {code} was already redeemed", "business")),
            (0.4, ev.http_status(422, "coupon {code} has expired", "validation")),
        ),
    ),
    Tool(
        "kyc_check", convention=GENAI, tool_type="extension", latency_ms=900, latency_sigma=0.4, error_rate=0.08,
        args=lambda rng: {"customer_id": _id(rng, "cus_")},
        result=lambda rng, a: {"verified": True},
        failures=((1.0, ev.exception("openai.PermissionDeniedError", "Error code: 403 - the verification key has expired", "permission")),),
        escalate={"permission": (0.5, BY_EVENT)},
    ),
    Tool(
        "web_browse", convention=OPENINFERENCE, latency_ms=1400, latency_sigma=0.8, error_rate=0.09,
        args=lambda rng: {"url": f"https://docs.example.org/{_id(rng, 'p', 6).lower()}"},
        result=lambda rng, a: {"title": "Release notes", "chars": rng.randint(2000, 40000)},
        failures=(
            (0.6, ev.agents_sdk_error("Tool 'web_browse' timed out after 30 seconds.", "transient", 'message:"timed out')),
            # A proxy's HTML error page passed through: the message must be shown as text.
            (0.4, ev.exception("RuntimeError", "<html><title>502 Bad Gateway</title><b>nginx</b></html> upstream returned status 502", "transient", by='message:"')),
        ),
        retry_marker=IMPLICIT, retry_success=0.6,
    ),
    Tool(
        "get_weather", convention=OPENINFERENCE, latency_ms=220, error_rate=0.05,
        args=lambda rng: {"city": rng.choice(_CITIES), "day": rng.randint(1, 28), "request_id": _id(rng, "w_")},
        result=lambda rng, a: {"celsius": rng.randint(-5, 35)},
        failures=((1.0, ev.exception("httpx.ReadTimeout", "The read operation timed out", "transient")),),
        retry_marker=IMPLICIT, retry_success=0.8,
    ),
    Tool(
        "search_papers", convention=OPENLLMETRY, latency_ms=700, error_rate=0.07,
        args=lambda rng: {"query": rng.choice(("tool errors", "agent retries", "llm evals")), "cursor": _id(rng, "cur_")},
        result=lambda rng, a: [{"doi": f"10.1000/{rng.randint(1000, 9999)}"}],
        failures=((1.0, ev.exception("requests.exceptions.ReadTimeout", "HTTPSConnectionPool(host='api.papers.example'): Read timed out. (read timeout=10)", "transient")),),
        retry_marker=EXPLICIT, retry_success=0.85,
    ),
    Tool(
        "summarize_pdf", convention=OPENLLMETRY, latency_ms=2500, latency_sigma=0.6, error_rate=0.06,
        args=lambda rng: {"file_id": _id(rng, "file_")},
        result=lambda rng, a: {"summary_chars": rng.randint(300, 1500)},
        failures=((1.0, ev.exception("KeyError", "'pages'", "validation")),),
    ),
    Tool(
        "github_search", convention=MCP, tool_type="extension", latency_ms=380, error_rate=0.08,
        args=lambda rng: {"q": rng.choice(("repo:acme/api timeout", "label:bug retries")), "page": rng.randint(1, 3), "nonce": _id(rng, "n")},
        result=lambda rng, a: {"total_count": rng.randint(0, 120)},
        failures=((1.0, ev.mcp_is_error("API rate limit exceeded for installation; retry after 30s", "transient", 'message:"rate limit')),),
        retry_marker=IMPLICIT, retry_success=0.7,
    ),
    Tool(
        "read_file", convention=MCP, tool_type="extension", latency_ms=30, latency_sigma=0.4, error_rate=0.07,
        args=lambda rng: {"path": f"/srv/repo/{rng.choice(('src', 'docs', 'etc'))}/{_id(rng, 'f', 5).lower()}.yaml"},
        result=lambda rng, a: {"bytes": rng.randint(100, 9000)},
        failures=(
            (0.6, ev.mcp_is_error("File not found: {path}", "not_found", 'message:"not found')),
            (0.4, ev.jsonrpc_error(-32602, "Invalid params: path must be inside the workspace", "validation")),
        ),
    ),
    Tool(
        "deploy_service", convention=MCP, tool_type="extension", latency_ms=4000, latency_sigma=0.5, error_rate=0.08,
        args=lambda rng: {"service": rng.choice(("api", "worker", "web")), "version": f"1.{rng.randint(0, 40)}.{rng.randint(0, 9)}"},
        result=lambda rng, a: {"rollout": "started"},
        failures=(
            (0.6, ev.result_envelope(
                {"code": -32603, "message": "deploy script timed out after 300s", "data": {"recoverable": True}},
                "transient", "result:recoverable=true", name="jsonrpc_recoverable",
            )),
            (0.4, ev.result_envelope(
                {"code": -32603, "message": "manifest rejected: replicas must be a positive integer", "data": {"recoverable": False}},
                "validation", 'message:"must be', name="jsonrpc_recoverable",
            )),
        ),
        max_attempts=2, retry_success=0.6,
    ),
    Tool(
        "run_sql", convention=GENAI, tool_type="datastore", latency_ms=160, error_rate=0.07,
        args=lambda rng: {"query_id": _id(rng, "qry_"), "table": rng.choice(("orders", "payments", "refunds"))},
        result=lambda rng, a: {"rows": rng.randint(0, 500)},
        failures=((1.0, ev.result_envelope(
            {"error": "permission denied for table {table}", "class": "permanent", "retryable": False},
            "permission", "result:class=permanent + message:",
        )),),
        escalate={"permission": (0.4, BY_ATTRIBUTE)},
    ),
    Tool(
        "legacy_export", convention=GENAI, latency_ms=1200, latency_sigma=0.9, error_rate=0.20,
        args=lambda rng: {"report": rng.choice(("weekly", "monthly")), "job": _id(rng, "job_")},
        result=lambda rng, a: {"rows": rng.randint(100, 50000)},
        failures=((1.0, ev.exception("RuntimeError", "Something went wrong", "unknown", by="none")),),
        retry_marker=IMPLICIT, retry_unknown=0.6, retry_success=0.5,
    ),
    Tool(
        "legacy_crm_sync", convention=GENAI, latency_ms=500, error_rate=0.05,
        args=lambda rng: {"account_id": _id(rng, "acc_")},
        result=lambda rng, a: {"synced": True},
        failures=((1.0, ev.http_status(501, "sync endpoint not implemented in CRM v2", "fatal")),),
    ),
    Tool(
        HANDOFF_TOOL, convention=GENAI, latency_ms=80, error_rate=0.0,
        args=lambda rng: {"reason": "needs a human decision", "ticket": _id(rng, "H-", 6)},
        result=lambda rng, a: {"queued": True, "position": rng.randint(1, 12)},
    ),
)  # fmt: skip

AGENTS: tuple[Agent, ...] = (
    Agent(
        "support",
        tools=(
            ("search_kb", 5.0), ("lookup_order", 2.0), ("create_ticket", 1.0), ("update_address", 1.0),
            ("refund_order", 1.0), ("schedule_callback", 0.7), ("translate_text", 0.8), ("send_email", 1.0),
        ),
        delegates={"refund_order": "refunds"},
    ),
    Agent(
        "checkout",
        tools=(("lookup_order", 1.0), ("charge_card", 2.0), ("calculate_shipping", 1.5), ("apply_coupon", 1.0), ("kyc_check", 0.6)),
        model="gpt-4o",
    ),
    Agent("researcher", tools=(("search_kb", 3.0), ("web_browse", 2.0), ("get_weather", 0.6), ("search_papers", 1.5), ("summarize_pdf", 1.0))),
    Agent(
        "ops",
        tools=(("github_search", 1.5), ("read_file", 2.0), ("deploy_service", 0.8), ("run_sql", 1.2), ("legacy_export", 0.8), ("legacy_crm_sync", 0.6)),
    ),
)  # fmt: skip

DEPLOYMENTS: tuple[Deployment, ...] = (
    Deployment("support-agent", "2.14.3", "prod", "support", 0.35),
    Deployment("support-agent", "2.15.0-rc1", "staging", "support", 0.10),
    Deployment("checkout-agent", "1.8.0", "prod", "checkout", 0.20),
    Deployment("research-agent", "0.9.12", "prod", "researcher", 0.15),
    Deployment("ops-copilot", "3.2.1", "prod", "ops", 0.20),
)

DEFAULT_PROFILE = Profile(
    tools={tool.name: tool for tool in TOOLS},
    agents={agent.name: agent for agent in AGENTS},
    deployments=DEPLOYMENTS,
)
