"""Attempt linking (docs/contract/attempts.md) and per-call metrics (docs/contract/metrics.md). Pure: no Django, no database.

An attempt is one tool span; attempts of one logical call share (trace, call id), or
are marked as retries explicitly (`tool.call.attempt` > 1, `http.request.resend_count`
>= 1), or, with neither, repeat the same tool with identical arguments in the same
trace right after a failed attempt (models often re-issue a call under a new id).
Linking sorts a trace's attempts by start time first, so the result never depends on
the order or the batches in which spans arrived.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

# Classes a retry cannot fix: retrying them is waste (the seed benchmark's
# "permanent-failure retries"). Validation is apart: a repair can fix it.
PERMANENT_CLASSES = frozenset({"permission", "not_found", "business", "user_input", "fatal"})


@dataclass(frozen=True, slots=True)
class Attempt:
    trace_id: str
    span_id: str
    tool: str
    start: dt.datetime
    ok: bool
    error_class: str = ""
    call_id: str = ""
    attempt: int | None = None  # explicit tool.call.attempt, 1 = first try
    resend_count: int | None = None  # explicit http.request.resend_count, >= 1 = a resend
    arguments_hash: str = ""
    escalated: bool = False
    latency_ms: float = 0.0
    service: str = ""
    environment: str = ""
    agent: str = ""
    contract: dict | None = None  # contract checks of a failed attempt: name -> True / False / None

    @property
    def marked_retry(self) -> bool:
        return (self.attempt is not None and self.attempt > 1) or (self.resend_count or 0) >= 1

    @property
    def marked_first(self) -> bool:
        return self.attempt == 1 or self.resend_count == 0


@dataclass(slots=True)
class LogicalCall:
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def first(self) -> Attempt:
        return self.attempts[0]

    @property
    def last(self) -> Attempt:
        return self.attempts[-1]

    @property
    def ok(self) -> bool:
        """A call's outcome is its last attempt's outcome."""
        return self.last.ok

    @property
    def retries(self) -> int:
        return len(self.attempts) - 1

    @property
    def failed_retries(self) -> int:
        return sum(1 for attempt in self.attempts[1:] if not attempt.ok)

    @property
    def wasted_retries(self) -> int:
        """Retries after an attempt that failed with a class no retry can fix."""
        return sum(1 for before in self.attempts[:-1] if not before.ok and before.error_class in PERMANENT_CLASSES)

    @property
    def blind_retries(self) -> int:
        """Validation failures retried with the arguments unchanged."""
        pairs = zip(self.attempts, self.attempts[1:])
        return sum(
            1
            for before, after in pairs
            if not before.ok and before.error_class == "validation" and after.arguments_hash == before.arguments_hash
        )

    @property
    def escalated(self) -> bool:
        return any(attempt.escalated for attempt in self.attempts)


def _sort_key(attempt: Attempt):
    return (attempt.start, attempt.attempt or 0, attempt.resend_count or 0, attempt.span_id)


def link_attempts(attempts: Iterable[Attempt]) -> list[LogicalCall]:
    """Group attempts (of any number of traces) into logical calls, ordered by first start."""
    by_trace: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        by_trace[attempt.trace_id].append(attempt)
    calls: list[LogicalCall] = []
    for trace_attempts in by_trace.values():
        calls.extend(_link_trace(sorted(trace_attempts, key=_sort_key)))
    calls.sort(key=lambda call: _sort_key(call.first))
    return calls


def _link_trace(attempts: list[Attempt]) -> list[LogicalCall]:
    calls: list[LogicalCall] = []
    by_call_id: dict[tuple[str, str], LogicalCall] = {}
    latest_by_tool: dict[str, LogicalCall] = {}
    for attempt in attempts:
        target = by_call_id.get((attempt.tool, attempt.call_id)) if attempt.call_id else None
        if target is None and not attempt.marked_first:
            previous = latest_by_tool.get(attempt.tool)
            if previous is not None and (attempt.marked_retry or _implicit_retry(previous.last, attempt)):
                target = previous
        if target is None:
            target = LogicalCall()
            calls.append(target)
        target.attempts.append(attempt)
        latest_by_tool[attempt.tool] = target
        if attempt.call_id:
            by_call_id.setdefault((attempt.tool, attempt.call_id), target)
    return calls


def _implicit_retry(before: Attempt, after: Attempt) -> bool:
    # The same arguments right after a failure. Arguments are opt-in content: when
    # neither attempt recorded any ("" == ""), a re-issue after a failure is still
    # the likeliest reading, unless distinct call ids say otherwise.
    if before.ok or after.arguments_hash != before.arguments_hash:
        return False
    return bool(after.arguments_hash) or not (before.call_id and after.call_id)


# One call's contribution to CallTotals: (attempts, failed retries, wasted retries, blind
# retries, error class or None when resolved, escalated). Computed once per call, so a call
# counted in several buckets (one per resolution) is measured once.
CallCounts = tuple[int, int, int, int, "str | None", bool]


def call_counts(call: LogicalCall) -> CallCounts:
    attempts = call.attempts
    last = attempts[-1]
    error_class = None if last.ok else (last.error_class or "unknown")
    if len(attempts) == 1:  # most calls: no retries to inspect
        return (1, 0, 0, 0, error_class, last.escalated)
    return (len(attempts), call.failed_retries, call.wasted_retries, call.blind_retries, error_class, call.escalated)


@dataclass(slots=True)
class CallTotals:
    """The counts (docs/contract/metrics.md#counts) over a set of logical calls; rates are derived, never stored."""

    calls: int = 0
    attempts: int = 0
    retries: int = 0
    failed_retries: int = 0
    wasted_retries: int = 0
    blind_retries: int = 0
    errors: int = 0
    resolved: int = 0
    escalations: int = 0
    errors_by_class: Counter = field(default_factory=Counter)

    def add(self, call: LogicalCall) -> None:
        self.add_counts(call_counts(call))

    def add_counts(self, counts: CallCounts) -> None:
        attempts, failed_retries, wasted_retries, blind_retries, error_class, escalated = counts
        self.calls += 1
        self.attempts += attempts
        self.retries += attempts - 1
        self.failed_retries += failed_retries
        self.wasted_retries += wasted_retries
        self.blind_retries += blind_retries
        if error_class is None:
            self.resolved += 1
        else:
            self.errors += 1
            self.errors_by_class[error_class] += 1
        if escalated:
            self.escalations += 1

    @staticmethod
    def _rate(part: int, whole: int) -> float | None:
        return part / whole if whole else None

    @property
    def error_rate(self) -> float | None:
        return self._rate(self.errors, self.calls)

    @property
    def retry_rate(self) -> float | None:
        return self._rate(self.retries, self.calls)

    @property
    def escalation_rate(self) -> float | None:
        return self._rate(self.escalations, self.calls)

    @property
    def resolution_rate(self) -> float | None:
        return self._rate(self.resolved, self.calls)

    @property
    def attempts_per_call(self) -> float | None:
        return self._rate(self.attempts, self.calls)


def totals(calls: Iterable[LogicalCall]) -> CallTotals:
    result = CallTotals()
    for call in calls:
        result.add(call)
    return result
