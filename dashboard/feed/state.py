"""Pure: a tool's health for the agents' feed (docs/contract/tool-health.md): its state and next action.

`tool_state` takes one tool's counts over the recent window (the last 15 minutes of
5-minute rollups) and over the drift baseline, its open alerts and the failures it saw
(their classes, fields and stated retry-after), and says how the tool is doing now:
`ok`, `degraded`, `failing` or `unknown`, why (one sentence), and what a controller
should do when a call of it fails (the dominant class's next action, with the seconds to
wait or the field to repair).

The feed is a fast signal for a circuit breaker, not the drift detectors' careful one
(dashboard/drift.py): a 15-minute window, a plain Poisson test against the baseline and
the detectors' own ratios (`min_rise`, the wasted-retry floor), so it reacts within
minutes and alerts stay the thing that pages a human.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ingest import taxonomy

OK, DEGRADED, FAILING, UNKNOWN = "ok", "degraded", "failing", "unknown"
STATES = (OK, DEGRADED, FAILING, UNKNOWN)

# Fewer calls than this in the window say nothing about the tool (a quiet tool is `unknown`).
MIN_CALLS = 10
# Half the calls failing: the tool is failing, whatever its history.
FAILING_ERROR_RATE = 0.5
# Rates are judged against the baseline only when the baseline is this big.
MIN_BASELINE_CALLS = 100
# A rise counts when the recent count is RISE × what the baseline rate predicts (the
# detectors' `min_rise`) and (observed − expected) / √expected reaches RISE_Z.
RISE = 1.5
RISE_Z = 3.0
# Without a baseline, this error rate is degraded on its own.
DEGRADED_ERROR_RATE = 0.2
# Wasted retries per call that are degraded whatever the history (the detectors' `wasted_floor`).
WASTED_FLOOR = 0.05
# The error classes whose failure means "do not call again as it is".
PERMANENT = frozenset({taxonomy.PERMISSION, taxonomy.NOT_FOUND, taxonomy.BUSINESS, taxonomy.USER_INPUT, taxonomy.FATAL})


@dataclass(frozen=True, slots=True)
class Counts:
    """Logical calls and what became of them over a window (docs/contract/metrics.md#counts)."""

    calls: int = 0
    errors: int = 0
    retries: int = 0
    wasted_retries: int = 0

    def rate(self, part: str) -> float | None:
        return getattr(self, part) / self.calls if self.calls else None


@dataclass(frozen=True, slots=True)
class Failures:
    """The window's failed attempts by class, the most named field of its validation failures and
    the longest retry-after its transient failures stated (None: none stated)."""

    by_class: dict[str, int] = field(default_factory=dict)
    field: str = ""
    retry_after_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Health:
    state: str
    reason: str
    dominant_class: str | None
    next_action: str | None  # a key of taxonomy.NEXT_ACTIONS; None when nothing failed
    retry_after_s: int | None
    field: str | None


def dominant_class(by_class: dict[str, int]) -> str | None:
    """The class with most failures; ties go to the first in taxonomy.ERROR_CLASSES order."""
    counted = [(count, -taxonomy.ERROR_CLASSES.index(name), name) for name, count in by_class.items()
               if count > 0 and name in taxonomy.CLASSES]  # fmt: skip
    return max(counted)[2] if counted else None


def _rise(recent: Counts, baseline: Counts, part: str) -> tuple[bool, float | None]:
    """Whether `part` rose over the baseline (ratio RISE and Poisson z RISE_Z), and the ratio."""
    base_rate = baseline.rate(part)
    if baseline.calls < MIN_BASELINE_CALLS or base_rate is None or not recent.calls:
        return False, None
    observed = getattr(recent, part)
    # A baseline without any still predicts a little: half an event over the baseline's calls.
    expected = max(base_rate, 0.5 / baseline.calls) * recent.calls
    ratio = observed / expected
    return ratio >= RISE and (observed - expected) / math.sqrt(expected) >= RISE_Z, ratio


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f} %"


def tool_state(*, recent: Counts, baseline: Counts, open_alert_kinds: list[str] | tuple[str, ...] = (),
               failures: Failures = Failures()) -> Health:  # fmt: skip
    """The tool's state, the reason, and the next action for its failures.

    In order: `failing` when at least MIN_CALLS calls and FAILING_ERROR_RATE of them failed;
    `degraded` when an alert is open, the error, retry or wasted-retry count rose over the
    baseline (RISE and RISE_Z), wasted retries reach WASTED_FLOOR per call, or (without a
    baseline) DEGRADED_ERROR_RATE of the calls failed; `unknown` when fewer than MIN_CALLS
    calls (an open alert still makes it `degraded`: silence is not recovery); else `ok`.
    """
    dominant = dominant_class(failures.by_class)
    action = taxonomy.recommended_action(dominant) if dominant else None
    retry_after_s = (
        math.ceil(failures.retry_after_ms / 1000) if dominant == taxonomy.TRANSIENT and failures.retry_after_ms else None
    )
    field_name = (failures.field or None) if dominant == taxonomy.VALIDATION else None

    def health(state: str, reason: str) -> Health:
        return Health(state, reason, dominant, action, retry_after_s, field_name)

    error_rate = recent.rate("errors")
    if recent.calls >= MIN_CALLS and error_rate is not None and error_rate >= FAILING_ERROR_RATE:
        return health(FAILING, f"{_percent(error_rate)} of {recent.calls} calls failed, mostly {dominant or 'unknown'}")
    reasons = []
    if open_alert_kinds:
        reasons.append("open alert: " + ", ".join(sorted(set(open_alert_kinds))))
    if recent.calls >= MIN_CALLS:
        for part, label in (("errors", "error rate"), ("retries", "retry rate"), ("wasted_retries", "wasted retries")):
            rose, ratio = _rise(recent, baseline, part)
            if rose:
                reasons.append(f"{label} {_percent(recent.rate(part))}, {ratio:.1f}x the baseline's {_percent(baseline.rate(part))}")
        wasted = recent.rate("wasted_retries") or 0.0
        if wasted >= WASTED_FLOOR and not any(r.startswith("wasted") for r in reasons):
            reasons.append(f"wasted retries {_percent(wasted)} of calls")
        if baseline.calls < MIN_BASELINE_CALLS and error_rate is not None and error_rate >= DEGRADED_ERROR_RATE:
            reasons.append(f"error rate {_percent(error_rate)} (no baseline yet)")
    if reasons:
        return health(DEGRADED, "; ".join(reasons))
    if recent.calls < MIN_CALLS:
        return health(UNKNOWN, f"{recent.calls} calls in the window: too few to judge (at least {MIN_CALLS})")
    return health(OK, f"error rate {_percent(error_rate)} of {recent.calls} calls, retries {_percent(recent.rate('retries'))}")
