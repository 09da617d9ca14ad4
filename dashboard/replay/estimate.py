"""Recovery probabilities per tool and class, from a project's evidence (docs/replay.md#recovery-probabilities). Pure.

The probability that the move after a first failure succeeds, for a (tool, class, move):
a retry of a transient failure, a repair (changed arguments) of a validation error, guided
(the error named its field and suggested the fix) or not. Evidence is what followed the first
failures of the range (dashboard/replay/traffic.py). Looked up from the most specific evidence
with at least MIN_TRIALS trials: this tool's, then the project's (all tools pooled); a retry
also pools retries told and not told how long to wait. Without enough evidence, the seed
benchmark's stated assumptions (docs/contract/seed-benchmark.md#the-scenario), marked "assumed".
Evidence gives the observed share with a Wilson score interval; an assumption has no interval
of its own (it is taken as stated).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from dashboard.replay.policies import PERMANENT_CLASSES, RETRY

Z = 1.96  # 95 % intervals
MIN_TRIALS = 10
TOOL, PROJECT, ASSUMED = "tool", "project", "assumed"

# The seed's stated assumptions: a transient retry succeeds 70 %; a validation repair 45 % with
# an error code only, 90 % with a field and a suggestion; a blind retry cannot fix validation,
# nothing fixes a permanent class.
TRANSIENT_RETRY = 0.70
REPAIR_UNGUIDED = 0.45
REPAIR_GUIDED = 0.90
# No seed figure for a failure nothing classifies: a retry fixes what a retry of the seed's generic
# failures fixes, a quarter of them being transient and 70 % of those recovering.
UNKNOWN_RETRY = 0.25 * TRANSIENT_RETRY


def assumed(error_class: str, kind: str, hinted: bool) -> float:
    if error_class in PERMANENT_CLASSES:
        return 0.0
    if error_class == "validation":
        if kind == RETRY:
            return 0.0
        return REPAIR_GUIDED if hinted else REPAIR_UNGUIDED
    if error_class == "transient":
        return TRANSIENT_RETRY
    return UNKNOWN_RETRY


def wilson(successes: int, trials: int, z: float = Z) -> tuple[float, float]:
    """The Wilson score interval of a binomial share (sound near 0 and 1, unlike the normal one)."""
    if trials <= 0:
        return 0.0, 1.0
    share = successes / trials
    denominator = 1 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True, slots=True)
class Estimate:
    p: float
    low: float
    high: float
    source: str  # TOOL, PROJECT or ASSUMED
    successes: int = 0
    trials: int = 0
    # Which evidence it came from: estimates sharing a basis share their error (simulate.py adds
    # such terms before squaring). () for an assumption, which has no error of its own.
    basis: tuple = ()

    @property
    def from_data(self) -> bool:
        return self.source != ASSUMED

    @property
    def se(self) -> float:
        """The standard error the simulation propagates: the interval's half width over Z."""
        return (self.high - self.low) / (2 * Z)

    def as_dict(self) -> dict:
        return {"p": self.p, "low": self.low, "high": self.high, "source": self.source,
                "successes": self.successes, "trials": self.trials}  # fmt: skip


EstimateKey = tuple[str, str, str, bool]  # (tool, class, move kind, hinted)


class Estimates:
    """The recovery probability of each (tool, class, move kind, hinted), looked up once each."""

    def __init__(self, evidence: Mapping[EstimateKey, list[int] | tuple[int, int]], *, min_trials: int = MIN_TRIALS):
        self.min_trials = min_trials
        self._tool: dict[tuple, list[int]] = {}
        self._project: dict[tuple, list[int]] = {}
        for (tool, cls, kind, hinted), (successes, trials) in evidence.items():
            # A retry's evidence also counts towards its pooled key (hinted None).
            for table, key in (
                (self._tool, (tool, cls, kind, hinted)), (self._project, (cls, kind, hinted)),
                *(((self._tool, (tool, cls, kind, None)), (self._project, (cls, kind, None))) if kind == RETRY else ()),
            ):  # fmt: skip
                tally = table.setdefault(key, [0, 0])
                tally[0] += successes
                tally[1] += trials
        self._cache: dict[EstimateKey, Estimate] = {}

    def get(self, tool: str, error_class: str, kind: str, hinted: bool) -> Estimate:
        key = (tool, error_class, kind, hinted)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._lookup(tool, error_class, kind, hinted)
        return found

    def _lookup(self, tool: str, cls: str, kind: str, hinted: bool) -> Estimate:
        # A guided repair and an unguided one are different evidence (45 % against 90 % in the seed);
        # a retry told to wait and one not told are pooled when either alone is too thin.
        hints = (hinted, None) if kind == RETRY else (hinted,)
        chain = [(self._tool, (tool, cls, kind, h), TOOL) for h in hints]
        chain += [(self._project, (cls, kind, h), PROJECT) for h in hints]
        for table, key, source in chain:
            successes, trials = table.get(key, (0, 0))
            if trials >= self.min_trials:
                low, high = wilson(successes, trials)
                return Estimate(successes / trials, low, high, source, successes, trials, (source, *key))
        p = assumed(cls, kind, hinted)
        return Estimate(p, p, p, ASSUMED)

    def used(self) -> list[tuple[EstimateKey, Estimate]]:
        """Every estimate looked up so far, in a stable order."""
        return sorted(self._cache.items(), key=lambda item: (item[0][0], item[0][1], item[0][2], item[0][3]))


def pooled(evidence: Mapping[EstimateKey, list[int] | tuple[int, int]]) -> list[dict]:
    """The project's recovery shares per (class, move kind, hinted), all tools pooled, with Wilson intervals."""
    tallies: dict[tuple, list[int]] = {}
    for (_, cls, kind, hinted), (successes, trials) in evidence.items():
        tally = tallies.setdefault((cls, kind, hinted), [0, 0])
        tally[0] += successes
        tally[1] += trials
    rows = []
    for (cls, kind, hinted), (successes, trials) in sorted(tallies.items()):
        low, high = wilson(successes, trials)
        rows.append({
            "error_class": cls, "move": kind, "hinted": hinted, "successes": successes, "trials": trials,
            "p": successes / trials if trials else None, "low": low, "high": high,
            "assumed": assumed(cls, kind, hinted),
        })  # fmt: skip
    return rows
