"""Expected figures of a policy over a range's failures (docs/replay.md#how-the-figures-are-computed). Pure.

Closed form, not Monte Carlo: each policy makes at most one move after a call's first failure,
so per group of identical first failures (n calls, the move the policy picks, the probability p
that it succeeds) the expectations are exact sums:

    resolved        = calls whose first attempt succeeded + sum of n * p over the groups moved
    attempts        = calls + sum of n over the groups moved
    failed retries  = sum of n * (1 - p) over the groups moved
    wasted retries  = sum of n over the groups moved whose first failure is of a permanent class

Attempts and wasted retries follow from the failures and the policy alone: no probability, no
interval. Resolution and failed retries get a 95 % interval from two independent sources of
variance, added: the error of each estimated p (its Wilson interval's half width over 1.96,
times the number of calls resting on the same evidence: calls sharing an estimate share its
error), and the calls' own binomial outcome, sum of n * p * (1 - p). So the interval says
where these calls' figure would have fallen under the policy. Assumed probabilities add only
the outcome term. The observed figures are the counts themselves (dashboard/rollups/attempts.py),
exact.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from dashboard.replay.estimate import Estimates, Z
from dashboard.replay.policies import POLICIES, STOP, Policy
from dashboard.replay.traffic import ToolTraffic

FIGURES = ("resolution_rate", "attempts_per_call", "failed_retries", "wasted_retries")
OBSERVED, DATA, ASSUMED, MIXED = "observed", "data", "assumed", "mixed"


@dataclass(slots=True)
class Quantity:
    """An expected count with what its variance is made of."""

    mean: float = 0.0
    coef: dict[tuple, float] = field(default_factory=lambda: defaultdict(float))  # basis -> d mean / d p
    outcome_var: float = 0.0

    def minus(self, other: Quantity) -> Quantity:
        coef = defaultdict(float, self.coef)
        for basis, value in other.coef.items():
            coef[basis] -= value
        return Quantity(self.mean - other.mean, coef, self.outcome_var + other.outcome_var)

    def half_width(self, se: dict[tuple, float]) -> float:
        var = self.outcome_var + sum((value * se[basis]) ** 2 for basis, value in self.coef.items() if basis)
        return Z * math.sqrt(max(var, 0.0))


@dataclass(slots=True)
class Expectation:
    calls: int
    resolved: Quantity
    attempts: Quantity
    failed_retries: Quantity
    wasted_retries: Quantity
    moved: int = 0  # calls whose first failure the policy acted on
    moved_on_data: int = 0  # ... with a probability from the project's evidence
    se: dict[tuple, float] = field(default_factory=dict)


def expect(traffic: ToolTraffic, policy: Policy, estimates: Estimates) -> Expectation:
    """The policy's expected counts over the traffic's calls."""
    resolved, failed = Quantity(float(traffic.first_ok)), Quantity()
    moves = wasted = moved_on_data = 0
    se: dict[tuple, float] = {}
    for failure, n in traffic.failures.items():
        move = policy(failure)
        if move.kind == STOP:
            continue
        estimate = estimates.get(failure.tool, failure.error_class, move.kind, move.hinted)
        p = estimate.p
        moves += n
        wasted += n if failure.permanent else 0
        resolved.mean += n * p
        failed.mean += n * (1 - p)
        outcome = n * p * (1 - p)
        resolved.outcome_var += outcome
        failed.outcome_var += outcome
        if estimate.basis:
            moved_on_data += n
            se[estimate.basis] = estimate.se
            resolved.coef[estimate.basis] += n
            failed.coef[estimate.basis] -= n
    return Expectation(
        calls=traffic.calls, resolved=resolved, attempts=Quantity(float(traffic.calls + moves)), failed_retries=failed,
        wasted_retries=Quantity(float(wasted)), moved=moves, moved_on_data=moved_on_data, se=se,
    )  # fmt: skip


def observed_expectation(traffic: ToolTraffic) -> Expectation:
    """What happened: the counts, with no variance."""
    totals = traffic.observed
    return Expectation(
        calls=totals.calls, resolved=Quantity(float(totals.resolved)), attempts=Quantity(float(totals.attempts)),
        failed_retries=Quantity(float(totals.failed_retries)), wasted_retries=Quantity(float(totals.wasted_retries)),
    )  # fmt: skip


def _figure(quantity: Quantity, baseline: Quantity, se: dict, *, per: int, source: str, share: float | None) -> dict:
    scale = 1 / per if per else 0.0
    half = quantity.half_width(se) * scale
    delta = quantity.minus(baseline)
    delta_half = delta.half_width(se) * scale
    value, change = quantity.mean * scale, delta.mean * scale
    return {
        "value": value, "low": value - half, "high": value + half, "source": source, "from_data": share,
        "delta": change, "delta_low": change - delta_half, "delta_high": change + delta_half,
    }  # fmt: skip


def figures(expectation: Expectation, baseline: Expectation, *, observed: bool = False) -> dict:
    """The four figures of the seed table, each with its interval, source and change against `baseline`.

    Rates are per call (resolution, attempts per call); retries are counts over the range.
    `source`: "observed" (counted), "data" (every probability from the project's evidence),
    "assumed" (every one from the seed's assumptions) or "mixed" (`from_data` says what share
    of the moved calls rested on evidence)."""
    calls = expectation.calls
    if observed:
        source, share = OBSERVED, None
    elif not expectation.moved:
        source, share = DATA, 1.0  # nothing moved: no probability needed
    else:
        share = expectation.moved_on_data / expectation.moved
        source = DATA if share == 1 else ASSUMED if share == 0 else MIXED
    certain = OBSERVED if observed else DATA  # attempts and wasted retries need no probability
    se = expectation.se
    return {
        "calls": calls,
        "resolution_rate": _figure(expectation.resolved, baseline.resolved, se, per=calls, source=source, share=share),
        "attempts_per_call": _figure(expectation.attempts, baseline.attempts, se, per=calls, source=certain, share=None),
        "failed_retries": _figure(expectation.failed_retries, baseline.failed_retries, se, per=1, source=source, share=share),
        "wasted_retries": _figure(expectation.wasted_retries, baseline.wasted_retries, se, per=1, source=certain, share=None),
        "resolved": expectation.resolved.mean,
        "attempts": expectation.attempts.mean,
    }  # fmt: skip


def replay_traffic(traffic: ToolTraffic, estimates: Estimates, policies: tuple[str, ...] = tuple(POLICIES)) -> dict:
    """policy key -> figures (against the observed), for the traffic of one tool or of the project."""
    baseline = observed_expectation(traffic)
    out = {}
    for key in policies:
        if key == "observed":
            out[key] = figures(baseline, baseline, observed=True)
        else:
            out[key] = figures(expect(traffic, POLICIES[key][1], estimates), baseline)
    return out
