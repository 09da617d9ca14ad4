"""The traffic model: agent sessions as OTel SDK traces, seeded hour by hour.

A *session* is one trace: `invoke_agent <agent>` (root) → for each step a `chat <model>`
span and the tool's attempts (`execute_tool X`, or the tool's own convention), sometimes
under a sub-agent's `invoke_agent` span, sometimes followed by a `handoff_to_human` call,
and a last `chat`. Spans are made by the official SDK with explicit timestamps and a
seeded id generator, so a given (seed, deployment, hour) always yields the same sessions,
byte for byte, ids included: re-sending an hour stores nothing twice.

Sessions of a deployment arrive as a Poisson process whose hourly rate follows a daily
cycle (and a sparse factor before `dense_since`); each session makes 1-4 tool calls drawn
by the agent's weights. `Simulator.record(session)` adds a session's calls to the ground
truth once it is sent. Drift (`DriftSpec`) changes one tool's behaviour from a time on.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind, set_span_in_context

from demo.simulate import evidence as ev
from demo.simulate import profiles as pf
from demo.simulate.evidence import Failure, Shape
from demo.simulate.truth import PERMANENT_CLASSES, AttemptOutcome, CallOutcome, GroundTruth, LedgerEntry

HOUR_NS = 3600 * 10**9
MS = 10**6
PARALLEL_CALLS = 0.35  # chance a further tool call comes from the same chat turn

RETRY_RISE_FLAT_ERROR = "retry_rise_flat_error"
ERROR_RATE_SPIKE = "error_rate_spike"
WASTED_RETRIES = "wasted_retries"
ESCALATION_SILENCE = "escalation_silence"
DRIFT_KINDS = (RETRY_RISE_FLAT_ERROR, ERROR_RATE_SPIKE, WASTED_RETRIES, ESCALATION_SILENCE)

# What drift does to the tool (docs/demo-traffic.md says why each is shaped so).
RISE_EXTRA_TRANSIENT = 0.35  # retry_rise_flat_error: extra first-attempt transient failures ...
RISE_RETRY_SUCCESS = 0.85  # ... that retries almost always absorb, so the error rate stays flat
RISE_MAX_ATTEMPTS = 4
SPIKE_FACTOR, SPIKE_EXTRA = 3.0, 0.15  # error_rate_spike: error rate x3 + 15 points, retries fail
WASTED_PERMANENT_RATE = 0.15  # wasted_retries: permanent failures (at least this share) retried ...
WASTED_MAX_ATTEMPTS = 3  # ... blindly, up to this many attempts

_FALLBACK_TRANSIENT = ev.http_status(503, "upstream unavailable (503)", "transient")
_FALLBACK_PERMANENT = ev.http_status(404, "record not found", "not_found")
_ESCALATION_ACTION = {"permission": "authorize", "user_input": "ask_user"}
_SCOPES = {
    ev.GENAI: "opentelemetry.instrumentation.openai_agents",
    ev.OPENINFERENCE: "openinference.instrumentation.openai_agents",
    ev.OPENLLMETRY: "traceloop.sdk",
    ev.MCP: "opentelemetry.instrumentation.mcp",
}


class SimulationError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class DriftSpec:
    tool: str
    kind: str
    start: dt.datetime  # drift applies to sessions starting at or after this

    @classmethod
    def parse(cls, text: str, *, now: dt.datetime, default_hours_ago: float = 24.0) -> DriftSpec:
        """'tool:kind[:start_hours_ago]' -> DriftSpec, or ValueError naming what is wrong."""
        parts = text.split(":")
        if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
            raise ValueError(f"drift {text!r}: expected tool:kind[:start_hours_ago], e.g. search_kb:{RETRY_RISE_FLAT_ERROR}:36")
        tool, kind = parts[0], parts[1]
        if kind not in DRIFT_KINDS:
            raise ValueError(f"drift {text!r}: unknown kind {kind!r}; use one of {', '.join(DRIFT_KINDS)}")
        hours = default_hours_ago
        if len(parts) == 3:
            try:
                hours = float(parts[2])
            except ValueError:
                raise ValueError(f"drift {text!r}: start_hours_ago {parts[2]!r} is not a number") from None
            if not (0 <= hours <= 24 * 90):
                raise ValueError(f"drift {text!r}: start_hours_ago must be within 0..2160, got {parts[2]}")
        return cls(tool, kind, now - dt.timedelta(hours=hours))


class SeededIds(IdGenerator):
    """Trace and span ids drawn from the session's own seeded random stream."""

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def generate_span_id(self) -> int:
        return self.rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.rng.getrandbits(128) or 1


class _Collect(SpanProcessor):
    """Keeps finished spans in end order, as a BatchSpanProcessor would hand them to an exporter."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)

    def drain(self) -> list[ReadableSpan]:
        spans, self.spans = self.spans, []
        return spans


@dataclass
class Session:
    start_ns: int
    end_ns: int
    spans: list[ReadableSpan]
    calls: list[CallOutcome]
    ledger: list[LedgerEntry] = field(default_factory=list)

    @property
    def tool_calls(self) -> int:
        return len(self.calls)


@dataclass
class _Attempt:
    failure: Failure | None
    args: dict
    call_id: str
    attempt: int | None = None  # tool.call.attempt
    resend_count: int | None = None  # http.request.resend_count
    next_action: str = ""
    escalation: str = ""  # how this (last) attempt records an escalation, "" for none


def to_ns(moment: dt.datetime) -> int:
    return int(moment.timestamp()) * 10**9 + moment.microsecond * 1000


def from_ns(ns: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ns // 10**9, tz=dt.UTC) + dt.timedelta(microseconds=ns % 10**9 // 1000)


class Simulator:
    """Seeded agent traffic. Build sessions with `sessions()`, count them with `record()`.

    rate: tool calls per hour in all (first attempts), at the peak-free daily mean.
    tools: only these tools (sessions then call only them); None for the whole profile.
    dense_since: hours before it run at `sparse_factor` of the rate ("recent days denser").
    escalation_tools: the project's escalation tools, for the ground truth (docs/contract/attempts.md).
    """

    def __init__(
        self,
        *,
        seed: int = 7,
        rate: float = 150.0,
        profile: pf.Profile = pf.DEFAULT_PROFILE,
        drifts: tuple[DriftSpec, ...] = (),
        tools: frozenset[str] | None = None,
        dense_since: dt.datetime | None = None,
        sparse_factor: float = 0.3,
        daily_cycle: float = 0.3,
        escalation_tools: frozenset[str] = frozenset({pf.HANDOFF_TOOL}),
        ledger: bool = False,
    ):
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        for drift in drifts:
            if drift.tool not in profile.tools:
                raise ValueError(f"drift: unknown tool {drift.tool!r}; tools: {', '.join(sorted(profile.tools))}")
        if tools is not None and (unknown := set(tools) - set(profile.tools)):
            raise ValueError(f"unknown tool(s): {', '.join(sorted(unknown))}")
        self.seed = seed
        self.rate = rate
        self.profile = profile
        self.drifts = {drift.tool: drift for drift in drifts}
        self.tools = tools
        self.dense_since = dense_since
        self.sparse_factor = sparse_factor
        self.daily_cycle = daily_cycle
        self.escalation_tools = escalation_tools
        self.truth = GroundTruth(ledger=ledger)
        self._ids = SeededIds()
        self._collect = _Collect()
        self._tracers: dict[tuple[int, str], object] = {}
        self._providers: list[TracerProvider] = []
        deployments = [d for d in profile.deployments if profile.toolset(d.agent, tools)]
        if not deployments:
            raise ValueError("no deployment calls any of the chosen tools")
        self.deployments = tuple(deployments)
        self._share_total = sum(d.share for d in deployments)
        for index, deployment in enumerate(self.deployments):
            resource = Resource({
                "service.name": deployment.service, "service.version": deployment.version,
                "deployment.environment.name": deployment.environment,
                "telemetry.sdk.language": "python", "telemetry.sdk.name": "opentelemetry",
                "telemetry.sdk.version": "1.45.2",
            })  # fmt: skip
            provider = TracerProvider(resource=resource, id_generator=self._ids)
            provider.add_span_processor(self._collect)
            self._providers.append(provider)
            for convention, scope in _SCOPES.items():
                self._tracers[(index, convention)] = provider.get_tracer(scope, "1.0")

    # --- volume ---------------------------------------------------------------------------------

    def hourly_factor(self, hour: dt.datetime) -> float:
        """The rate multiplier of an hour: a daily cycle (busiest mid-afternoon UTC), sparse before dense_since."""
        factor = 1.0 + self.daily_cycle * math.sin(2 * math.pi * (hour.hour - 10) / 24)
        if self.dense_since is not None and hour < self.dense_since:
            factor *= self.sparse_factor
        return factor

    def expected_calls_per_hour(self) -> dict[str, float]:
        return self.profile.expected_calls_per_hour(self.rate, self.tools)

    # --- sessions -------------------------------------------------------------------------------

    def sessions(self, start: dt.datetime, end: dt.datetime, *, until: dt.datetime | None = None) -> Iterator[Session]:
        """Every session starting in [start, end) (and, with `until`, ended by then), hour by hour."""
        hour = start.replace(minute=0, second=0, microsecond=0)
        start_ns, end_ns = to_ns(start), to_ns(end)
        until_ns = to_ns(until) if until is not None else None
        while hour < end:
            for index in range(len(self.deployments)):
                for session in self.hour_sessions(index, hour):
                    if start_ns <= session.start_ns < end_ns and (until_ns is None or session.end_ns <= until_ns):
                        yield session
            hour += dt.timedelta(hours=1)

    def hour_sessions(self, index: int, hour: dt.datetime) -> Iterator[Session]:
        """The sessions of deployment `index` starting within `hour`, always the same for a seed."""
        deployment = self.deployments[index]
        rng = random.Random(f"{self.seed}:{deployment.service}:{deployment.environment}:{int(hour.timestamp())}")
        per_hour = (
            self.rate * deployment.share / self._share_total / self.profile.mean_calls_per_session
            * self.hourly_factor(hour)
        )  # fmt: skip
        hour_ns = to_ns(hour)
        offset = 0.0
        while True:
            offset += rng.expovariate(per_hour)  # hours: a Poisson process
            if offset >= 1.0:
                return
            self._ids.rng = rng
            yield self._session(index, rng, hour_ns + int(offset * HOUR_NS))

    def session_at(self, index: int, start_ns: int, rng: random.Random) -> Session:
        """One session of deployment `index` starting at `start_ns`, drawn from `rng` (ids too)."""
        self._ids.rng = rng
        return self._session(index, rng, start_ns)

    def record(self, session: Session) -> None:
        """Count a session in the ground truth (call it for the sessions actually sent)."""
        for call in session.calls:
            self.truth.add(call)
        if self.truth.ledger is not None:
            self.truth.ledger.extend(session.ledger)

    def shutdown(self) -> None:
        for provider in self._providers:
            provider.shutdown()

    # --- one trace ------------------------------------------------------------------------------

    def _session(self, index: int, rng: random.Random, start_ns: int) -> Session:
        deployment = self.deployments[index]
        agent = self.profile.agents[deployment.agent]
        toolset = self.profile.toolset(agent.name, self.tools)
        names, weights = [tool for tool, _ in toolset], [weight for _, weight in toolset]
        genai = self._tracers[(index, ev.GENAI)]
        clock = start_ns
        root = genai.start_span(
            f"invoke_agent {agent.name}", context=Context(), kind=SpanKind.INTERNAL, start_time=clock,
            attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent.name,
                "gen_ai.provider.name": "openai", "gen_ai.conversation.id": f"conv_{rng.getrandbits(48):012x}",
            },
        )  # fmt: skip
        root_context = set_span_in_context(root)
        session = Session(start_ns, start_ns, [], [])
        low, high = self.profile.calls_per_session
        for number in range(rng.randint(low, high)):
            # One chat turn asks for one tool call, or for two at once (parallel tool calls).
            if number == 0 or rng.random() >= PARALLEL_CALLS:
                clock = self._chat(genai, root_context, agent.model, rng, clock, "tool_calls")
            tool = self.profile.tools[rng.choices(names, weights)[0]]
            sub_agent = agent.delegates.get(tool.name)
            context, call_agent, sub = root_context, agent.name, None
            if sub_agent:
                sub = genai.start_span(
                    f"invoke_agent {sub_agent}", context=root_context, kind=SpanKind.INTERNAL, start_time=clock,
                    attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": sub_agent},
                )  # fmt: skip
                context, call_agent = set_span_in_context(sub), sub_agent
            clock, handoff = self._call(index, context, tool, rng, clock, deployment, call_agent, session)
            if handoff:
                clock = self._chat(genai, context, agent.model, rng, clock, "tool_calls")
                handoff_tool = self.profile.tools[pf.HANDOFF_TOOL]
                clock, _ = self._call(index, context, handoff_tool, rng, clock, deployment, call_agent, session)
            if sub is not None:
                clock += 2 * MS
                sub.end(end_time=clock)
        clock += 3 * MS  # the final answer's chat span is left out: it costs volume and shows nothing
        root.end(end_time=clock)
        session.end_ns = clock
        session.spans = self._collect.drain()
        return session

    def _chat(self, tracer, context, model: str, rng: random.Random, clock: int, finish: str) -> int:
        duration = int(rng.lognormvariate(math.log(800), 0.4) * MS)
        span = tracer.start_span(
            f"chat {model}", context=context, kind=SpanKind.CLIENT, start_time=clock,
            attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": model,
                "gen_ai.response.model": model, "gen_ai.usage.input_tokens": rng.randint(400, 6000),
                "gen_ai.usage.output_tokens": rng.randint(20, 400), "gen_ai.response.finish_reasons": (finish,),
            },
        )  # fmt: skip
        span.end(end_time=clock + duration)
        return clock + duration

    def _call(self, index, context, tool: pf.Tool, rng, clock: int, deployment, agent: str, session: Session):
        """Make one logical call's attempts as spans; returns (clock, whether a handoff follows)."""
        drift = self.drifts.get(tool.name)
        kind = drift.kind if drift is not None and clock >= to_ns(drift.start) else ""
        attempts, handoff = _plan_call(tool, rng, kind)
        tracer = self._tracers[(index, tool.convention)]
        genai = self._tracers[(index, ev.GENAI)]
        first_ns = clock
        outcomes = []
        previous_args = None
        for number, planned in enumerate(attempts):
            if number and planned.attempt is None and planned.resend_count is None:
                # An implicit retry: the model saw the failure and issued the call again.
                clock = self._chat(genai, context, "gpt-4o-mini", rng, clock, "tool_calls")
            latency = int(rng.lognormvariate(math.log(tool.latency_ms), tool.latency_sigma) * MS) + MS
            attributes = ev.tool_attributes(tool.convention, tool.name, planned.call_id, planned.args, tool.tool_type)
            if planned.attempt is not None:
                attributes["tool.call.attempt"] = planned.attempt
            if planned.resend_count is not None:
                attributes["http.request.resend_count"] = planned.resend_count
            if planned.next_action:
                attributes["tool.next_action"] = planned.next_action
            if planned.escalation == pf.BY_ATTRIBUTE:
                attributes["tool.escalated"] = True
            span = tracer.start_span(
                ev.span_name(tool.convention, tool.name), context=context, kind=ev.span_kind(tool.convention),
                start_time=clock, attributes=attributes,
            )  # fmt: skip
            shape = Shape(tool.convention, tool.name, planned.call_id, planned.args, clock + latency)
            if planned.failure is None:
                ev.mark_success(span, shape, tool.result(rng, planned.args))
            else:
                planned.failure.mark(span, shape)
                if self.truth.ledger is not None:
                    context_ids = span.get_span_context()
                    session.ledger.append(LedgerEntry(
                        f"{context_ids.trace_id:032x}", f"{context_ids.span_id:016x}", tool.name,
                        planned.failure.name, planned.failure.cls, planned.failure.expected_by(tool.convention),
                    ))  # fmt: skip
            if planned.escalation == pf.BY_EVENT:
                span.add_event("escalation", {"escalation.reason": "needs a human"}, timestamp=clock + latency)
            clock += latency
            span.end(end_time=clock)
            outcomes.append(AttemptOutcome(
                ok=planned.failure is None, error_class=planned.failure.cls if planned.failure else "",
                same_arguments=previous_args is None or planned.args == previous_args,
            ))  # fmt: skip
            previous_args = planned.args
            if number + 1 < len(attempts):
                clock += int(200 * 2**number * rng.uniform(0.8, 1.2)) * MS  # backoff
        escalated = any(a.escalation for a in attempts) or tool.name in self.escalation_tools
        session.calls.append(CallOutcome(
            tool.name, deployment.service, deployment.environment, agent, first_ns, tuple(outcomes), escalated,
        ))  # fmt: skip
        return clock, handoff


def _choose(rng: random.Random, failures: tuple[tuple[float, Failure], ...]) -> Failure:
    return rng.choices([f for _, f in failures], [w for w, _ in failures])[0]


def _transient_failure(tool: pf.Tool) -> Failure:
    for _, failure in tool.failures:
        if failure.cls == "transient":
            return failure
    return _FALLBACK_TRANSIENT


def _permanent_failure(tool: pf.Tool) -> Failure:
    for _, failure in tool.failures:
        if failure.cls in PERMANENT_CLASSES:
            return failure
    return _FALLBACK_PERMANENT


def _plan_call(tool: pf.Tool, rng: random.Random, drift: str) -> tuple[list[_Attempt], bool]:
    """The attempts of one logical call (with their failures and retry markers), and
    whether a handoff to a human follows. `drift` is the kind in force, or ""."""
    args = tool.args(rng)
    call_id = f"call_{rng.getrandbits(64):016x}"
    max_attempts, retry_success = tool.max_attempts, tool.retry_success
    failure = None
    if drift == RETRY_RISE_FLAT_ERROR:
        max_attempts, retry_success = RISE_MAX_ATTEMPTS, RISE_RETRY_SUCCESS
        if rng.random() < RISE_EXTRA_TRANSIENT:
            failure = _transient_failure(tool)
    elif drift == WASTED_RETRIES and rng.random() < WASTED_PERMANENT_RATE:
        failure = _permanent_failure(tool)
    if failure is None:
        error_rate = min(0.6, tool.error_rate * SPIKE_FACTOR + SPIKE_EXTRA) if drift == ERROR_RATE_SPIKE else tool.error_rate
        if tool.failures and rng.random() < error_rate:
            failure = _choose(rng, tool.failures)
    if drift == ERROR_RATE_SPIKE:
        retry_success = 0.0
    first_marker = 1 if tool.retry_marker == pf.EXPLICIT else None
    attempts = [_Attempt(failure, args, call_id, attempt=first_marker)]
    while attempts[-1].failure is not None:
        last = attempts[-1]
        cls, number = last.failure.cls, len(attempts)
        if cls == "transient" and number < max_attempts:
            outcome = None if rng.random() < retry_success else last.failure
            retry = _retry(tool.retry_marker, last, number, rng)
        elif cls == "unknown" and number == 1 and rng.random() < tool.retry_unknown:
            outcome = None if rng.random() < retry_success else last.failure
            retry = _retry(tool.retry_marker, last, number, rng)
        elif cls == "validation" and tool.repair is not None and number == 1:
            outcome = None if rng.random() < tool.repair_success else last.failure
            retry = _Attempt(outcome, tool.repair(rng, last.args), last.call_id, attempt=number + 1)
            if last.attempt is None:
                last.attempt = 1
            last.next_action = "repair"
            attempts.append(retry)
            continue
        elif cls in PERMANENT_CLASSES and drift == WASTED_RETRIES and number < WASTED_MAX_ATTEMPTS:
            outcome = last.failure
            retry = _retry(tool.retry_marker, last, number, rng)
        else:
            break
        retry.failure = outcome
        last.next_action = "retry"
        attempts.append(retry)
    handoff = False
    last = attempts[-1]
    if last.failure is not None and drift != ESCALATION_SILENCE:
        chance, how = tool.escalate.get(last.failure.cls, (0.0, ""))
        if chance and rng.random() < chance:
            if how == pf.BY_HANDOFF:
                handoff = True
            else:
                last.escalation = how
                if how == pf.BY_NEXT_ACTION:
                    last.next_action = _ESCALATION_ACTION.get(last.failure.cls, "escalate")
    return attempts, handoff


def _retry(marker: str, last: _Attempt, number: int, rng: random.Random) -> _Attempt:
    """The next attempt of a call, marked the tool's way; the same arguments."""
    if marker == pf.EXPLICIT:
        return _Attempt(None, last.args, last.call_id, attempt=number + 1)
    if marker == pf.RESEND:
        return _Attempt(None, last.args, last.call_id, resend_count=number)
    return _Attempt(None, last.args, f"call_{rng.getrandbits(64):016x}")  # implicit: a new call id
