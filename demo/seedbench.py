"""The seed benchmark (docs/contract/seed-benchmark.md): seed 0's three error-contract strategies, replayed as real OTLP traffic.

`seeds/000_fee13e691e1c696a.txt` simulates 60 runs x 200 tool operations; 40 % fail,
evenly transient / validation / permission / not_found; a transient retry succeeds 70 %;
a validation repair 45 % with a code only, 90 % with a field and a suggestion. Every
strategy gets the same operations and the same recovery rolls:
- generic (service seedbench-generic): the tool says only "Something went wrong", so the
  controller retries every failure once, unchanged. The span still records what the
  instrumentation saw (HTTP status or exception type): Toolwatch classifies from that.
- code (seedbench-code): an error code; transient is retried, validation repaired
  (changed arguments), permission and not_found stop.
- envelope (seedbench-envelope): the actionable envelope (code, message, retryable,
  field, suggestion, retryAfterMs): the same routing, repairs succeed more often.
`build_traffic` returns the SDK spans per strategy with the generator's ground truth;
`compare` puts Toolwatch's figures beside the truth and the seed's table.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

from demo.simulate.evidence import dumps
from demo.simulate.generator import MS, SeededIds, _Collect
from demo.simulate.truth import AttemptOutcome, CallOutcome, Counts

RUNS, OPERATIONS = 60, 200
FAILURE_RATE = 0.40
FAILURE_CLASSES = ("transient", "validation", "permission", "not_found")
TRANSIENT_RETRY_SUCCESS = 0.70
REPAIR_SUCCESS = {"code": 0.45, "envelope": 0.90}
STRATEGIES = ("generic", "code", "envelope")
SERVICES = {"generic": "seedbench-generic", "code": "seedbench-code", "envelope": "seedbench-envelope"}
LABELS = {"generic": "generic message", "code": "error code only", "envelope": "actionable envelope"}
TOOLS = ("lookup_customer", "update_booking", "fetch_document", "create_invoice")
SEED_OPERATIONS = 12_000
# Seed 0's table: resolution, attempts per op, failed retries, permanent-failure retries.
SEED_TABLE = {
    "generic": {"resolution_rate": 0.671, "attempts_per_call": 1.402, "failed_retries": 3953, "wasted_retries": 2449},
    "code": {"resolution_rate": 0.712, "attempts_per_call": 1.198, "failed_retries": 1005, "wasted_retries": 0},
    "envelope": {"resolution_rate": 0.755, "attempts_per_call": 1.198, "failed_retries": 487, "wasted_retries": 0},
}
FIGURES = ("resolution_rate", "attempts_per_call", "failed_retries", "wasted_retries")
SIGMAS = 3.0


@dataclass(frozen=True, slots=True)
class Operation:
    tool: str
    failure: str  # "" or one of FAILURE_CLASSES
    transient_roll: float  # the retry succeeds when below TRANSIENT_RETRY_SUCCESS
    repair_roll: float  # the repair succeeds when below the strategy's REPAIR_SUCCESS
    via_http: bool  # generic: the instrumentation saw an HTTP status (else an exception)
    record: str  # the record the call is about


def operations(*, seed: int, runs: int, per_run: int) -> list[list[Operation]]:
    """The operations of every run, with their recovery rolls: the same for every strategy."""
    rng = random.Random(f"seedbench:{seed}")
    out = []
    for _ in range(runs):
        run = []
        for _ in range(per_run):
            failed = rng.random() < FAILURE_RATE
            run.append(Operation(
                tool=rng.choice(TOOLS), failure=rng.choice(FAILURE_CLASSES) if failed else "",
                transient_roll=rng.random(), repair_roll=rng.random(), via_http=rng.random() < 0.5,
                record=f"rec_{rng.getrandbits(48):012x}",
            ))  # fmt: skip
        out.append(run)
    return out


# --- what each strategy's failing call looks like on the span ----------------------------------------

_GENERIC_HTTP = {"transient": 503, "validation": 422, "permission": 403, "not_found": 404}
_GENERIC_EXCEPTION = {
    "transient": "TimeoutError", "validation": "ValueError", "permission": "PermissionError", "not_found": "LookupError",
}  # fmt: skip
_CODES = {"transient": "TRANSIENT", "validation": "VALIDATION", "permission": "PERMISSION", "not_found": "NOT_FOUND"}
_MESSAGES = {
    "transient": "The booking service timed out",
    "validation": "date is not a valid date",
    "permission": "The key may not change bookings of this account",
    "not_found": "No record {record}",
}  # fmt: skip
GENERIC_MESSAGE = "Something went wrong"


def _mark_failure(span, strategy: str, op: Operation, at_ns: int, trace_id: str) -> None:
    cls = op.failure
    if strategy == "generic":
        # The model sees only the generic text; the instrumentation still saw the cause.
        span.set_attribute("gen_ai.tool.call.result", GENERIC_MESSAGE)
        if op.via_http:
            span.set_attribute("http.response.status_code", _GENERIC_HTTP[cls])
        else:
            span.add_event(
                "exception",
                {"exception.type": _GENERIC_EXCEPTION[cls], "exception.message": GENERIC_MESSAGE, "exception.escaped": "False"},
                timestamp=at_ns,
            )  # fmt: skip
        span.set_status(Status(StatusCode.ERROR, GENERIC_MESSAGE))
        return
    if strategy == "code":
        envelope = {"error": {"code": _CODES[cls]}}
    else:
        envelope = {
            "error": {
                "code": _CODES[cls], "message": _MESSAGES[cls].format(record=op.record),
                "retryable": cls == "transient", "traceId": trace_id,
                **({"retryAfterMs": 500} if cls == "transient" else {}),
                **({"field": "date", "suggestion": "Use ISO-8601, e.g. 2026-09-14"} if cls == "validation" else {}),
            }
        }  # fmt: skip
    span.set_attribute("gen_ai.tool.call.result", dumps(envelope))  # a soft failure: status stays unset


def _attempts(strategy: str, op: Operation) -> list[tuple[bool, bool]]:
    """(ok, same arguments as before) per attempt of one operation under a strategy."""
    if not op.failure:
        return [(True, True)]
    if op.failure == "transient":  # every strategy retries a transient failure once
        return [(False, True), (op.transient_roll < TRANSIENT_RETRY_SUCCESS, True)]
    if strategy == "generic":
        return [(False, True), (False, True)]  # a blind retry cannot fix the rest
    if op.failure == "validation":
        return [(False, True), (op.repair_roll < REPAIR_SUCCESS[strategy], False)]  # a repair: changed arguments
    return [(False, True)]  # permission, not_found: stop


@dataclass
class StrategyTraffic:
    strategy: str
    service: str
    spans: list
    truth: Counts = field(default_factory=Counts)


def build_traffic(strategy: str, ops: list[list[Operation]], *, seed: int, start_ns: int, run_spacing_ns: int) -> StrategyTraffic:
    """One trace per run, one logical call per operation, made with the official SDK."""
    service = SERVICES[strategy]
    ids = SeededIds()
    ids.rng = random.Random(f"seedbench:{seed}:{strategy}:ids")
    collect = _Collect()
    provider = TracerProvider(
        resource=Resource({"service.name": service, "deployment.environment.name": "bench"}), id_generator=ids
    )
    provider.add_span_processor(collect)
    tracer = provider.get_tracer("seedbench", "1.0")
    traffic = StrategyTraffic(strategy, service, [])
    latency = random.Random(f"seedbench:{seed}:{strategy}:latency")
    for number, run in enumerate(ops):
        clock = start_ns + number * run_spacing_ns
        root = tracer.start_span(
            "invoke_agent controller", context=Context(), start_time=clock,
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "controller"},
        )  # fmt: skip
        context = set_span_in_context(root)
        trace_id = f"{root.get_span_context().trace_id:032x}"
        for index, op in enumerate(run):
            plan = _attempts(strategy, op)
            call_id = f"call_{number:03d}_{index:04d}"
            args = {"record": op.record, "date": "14/09/2026"}
            outcomes = []
            first_ns = clock
            for attempt, (ok, same) in enumerate(plan, start=1):
                if not same:
                    args = {**args, "date": "2026-09-14"}
                took = int(latency.uniform(20, 120) * MS)
                span = tracer.start_span(
                    f"execute_tool {op.tool}", context=context, kind=SpanKind.INTERNAL, start_time=clock,
                    attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": op.tool,
                        "gen_ai.tool.call.id": call_id, "gen_ai.tool.call.arguments": dumps(args),
                        "tool.call.attempt": attempt,
                    },
                )  # fmt: skip
                if ok:
                    span.set_attribute("gen_ai.tool.call.result", dumps({"ok": True, "record": op.record}))
                else:
                    _mark_failure(span, strategy, op, clock + took, trace_id)
                clock += took
                span.end(end_time=clock)
                clock += 5 * MS
                outcomes.append(AttemptOutcome(ok=ok, error_class="" if ok else op.failure, same_arguments=same))
            traffic.truth.add_call(CallOutcome(op.tool, service, "bench", "controller", first_ns, tuple(outcomes), False))
        root.end(end_time=clock + MS)
        traffic.spans.extend(collect.drain())
    provider.shutdown()
    return traffic


# --- comparing -------------------------------------------------------------------------------------


def expected_probabilities(strategy: str) -> dict[str, float]:
    """Per operation, under the scenario's own probabilities: the chance of being resolved,
    of a second attempt, of a failed retry and of a permanent-failure retry."""
    share = FAILURE_RATE / len(FAILURE_CLASSES)
    transient_fail_again = share * (1 - TRANSIENT_RETRY_SUCCESS)
    if strategy == "generic":
        return {
            "resolved": 1 - FAILURE_RATE + share * TRANSIENT_RETRY_SUCCESS,
            "retried": FAILURE_RATE,
            "failed_retry": FAILURE_RATE - share * TRANSIENT_RETRY_SUCCESS,
            "wasted_retry": 2 * share,
        }
    repair = REPAIR_SUCCESS[strategy]
    return {
        "resolved": 1 - FAILURE_RATE + share * (TRANSIENT_RETRY_SUCCESS + repair),
        "retried": 2 * share,
        "failed_retry": transient_fail_again + share * (1 - repair),
        "wasted_retry": 0.0,
    }


def tolerance(strategy: str, figure: str, n: int) -> float:
    """How far Toolwatch's figure may sit from the seed's table and still reproduce it.

    Both are independent draws of the same scenario, so their difference has standard
    deviation sqrt(sd_ours^2 + sd_seed^2), each binomial (rates: sqrt(p(1-p)/n); counts,
    compared per SEED_OPERATIONS operations: sqrt(n p (1-p)) scaled to that size), under
    the scenario's probabilities. SIGMAS (3) of that: a false FAIL about 0.3 % of the time.
    """
    p = expected_probabilities(strategy)
    key = {"resolution_rate": "resolved", "attempts_per_call": "retried", "failed_retries": "failed_retry", "wasted_retries": "wasted_retry"}[figure]  # fmt: skip
    q = p[key]
    variance_per_op = q * (1 - q)
    if figure in ("resolution_rate", "attempts_per_call"):
        return SIGMAS * math.sqrt(variance_per_op / n + variance_per_op / SEED_OPERATIONS)
    scale = SEED_OPERATIONS / n
    return SIGMAS * math.sqrt(n * variance_per_op * scale**2 + SEED_OPERATIONS * variance_per_op)


def figures(counts: dict) -> dict[str, float | int | None]:
    calls = counts["calls"]
    return {
        "resolution_rate": counts["resolved"] / calls if calls else None,
        "attempts_per_call": counts["attempts"] / calls if calls else None,
        "failed_retries": counts["failed_retries"],
        "wasted_retries": counts["wasted_retries"],
    }


def seed_check(strategy: str, figure: str, value: float, n: int) -> tuple[bool, float, float]:
    """(within tolerance, our figure at the seed's size, tolerance) for one figure."""
    scaled = value * SEED_OPERATIONS / n if figure in ("failed_retries", "wasted_retries") else value
    tol = tolerance(strategy, figure, n)
    return abs(scaled - SEED_TABLE[strategy][figure]) <= tol + 1e-12, scaled, tol
