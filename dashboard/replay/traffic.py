"""A range's logical calls summarised for a replay (docs/replay.md#what-is-read). Pure: no Django, no database.

The calls come linked by the rollups' own code (dashboard/rollups/attempts.py `link_attempts`),
so a replay sees exactly the calls, retries and outcomes the rollups count. Per tool it keeps:
the calls and how many succeeded at once; each call's first failure (`policies.Failure`:
its class, the contract checks a controller could act on, and the move that followed); the
evidence of recovery (what the second attempt after a first failure did: retry or repair, and
whether it succeeded); and the observed counts (docs/contract/metrics.md#counts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from dashboard.replay.policies import REPAIR, RETRY, STOPPED, Failure, Move
from dashboard.rollups.attempts import CallTotals, LogicalCall

EvidenceKey = tuple[str, str, str, bool]  # (tool, class, move kind, hinted)


@dataclass(slots=True)
class ToolTraffic:
    calls: int = 0
    first_ok: int = 0  # calls whose first attempt succeeded
    failures: Counter = field(default_factory=Counter)  # Failure -> calls
    # (tool, class, move kind, hinted) -> [successes, trials] of the move that followed a first failure.
    evidence: dict[EvidenceKey, list[int]] = field(default_factory=dict)
    observed: CallTotals = field(default_factory=CallTotals)

    def merge(self, other: ToolTraffic) -> None:
        self.calls += other.calls
        self.first_ok += other.first_ok
        self.failures.update(other.failures)
        for key, (successes, trials) in other.evidence.items():
            tally = self.evidence.setdefault(key, [0, 0])
            tally[0] += successes
            tally[1] += trials
        for name in ("calls", "attempts", "retries", "failed_retries", "wasted_retries", "blind_retries", "errors",
                     "resolved", "escalations"):  # fmt: skip
            setattr(self.observed, name, getattr(self.observed, name) + getattr(other.observed, name))
        self.observed.errors_by_class.update(other.observed.errors_by_class)


def failure_of(call: LogicalCall) -> Failure | None:
    """The call's first failure, or None when its first attempt succeeded."""
    first = call.first
    if first.ok:
        return None
    checks = first.contract or {}
    cls = first.error_class or "unknown"
    observed = STOPPED
    if len(call.attempts) > 1:
        second = call.attempts[1]
        # A repair changes the arguments (docs/contract/attempts.md#failed-wasted-and-blind-retries:
        # both hashes empty counts as unchanged).
        if second.arguments_hash != first.arguments_hash:
            observed = Move(REPAIR, hinted=bool(checks.get("field_named")) and bool(checks.get("suggestion")))
        else:
            observed = Move(RETRY, hinted=bool(checks.get("retry_after")))
    return Failure(
        tool=first.tool, error_class=cls, explicit_class=bool(checks.get("explicit_class")),
        retryable_stated=bool(checks.get("explicit_retryable")), field_named=bool(checks.get("field_named")),
        suggestion=bool(checks.get("suggestion")), retry_after=bool(checks.get("retry_after")), observed=observed,
    )  # fmt: skip


def summarise(calls: Iterable[LogicalCall]) -> dict[str, ToolTraffic]:
    """tool -> its ToolTraffic, over logical calls of any tools."""
    tools: dict[str, ToolTraffic] = {}
    for call in calls:
        traffic = tools.get(call.first.tool)
        if traffic is None:
            traffic = tools[call.first.tool] = ToolTraffic()
        traffic.calls += 1
        traffic.observed.add(call)
        failure = failure_of(call)
        if failure is None:
            traffic.first_ok += 1
            continue
        traffic.failures[failure] += 1
        if failure.observed.kind != STOPPED.kind:
            key = (failure.tool, failure.error_class, failure.observed.kind, failure.observed.hinted)
            tally = traffic.evidence.setdefault(key, [0, 0])
            tally[0] += call.attempts[1].ok
            tally[1] += 1
    return tools


def combined(tools: dict[str, ToolTraffic]) -> ToolTraffic:
    """The project's traffic: every tool's summed."""
    total = ToolTraffic()
    for traffic in tools.values():
        total.merge(traffic)
    return total
