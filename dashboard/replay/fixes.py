"""Per tool, the contract fixes ranked by their effect (docs/replay.md#contract-fixes). Pure.

The baseline is `policies.as_sent`: what a class-routing controller can do with the error
contract as the tool sends it now (the contract checks ingest records on every failure,
ingest/normalize.py `contract_checks`). A fix makes one check pass on the failures where it
failed, and the replay (dashboard/replay/simulate.py) gives the change, each fix alone with
the others as they are:

- `explicit_class`: state a class or code, so the controller routes (retries transient,
  repairs validation, stops on the permanent classes) instead of retrying blindly;
- `explicit_retryable`: state whether a retry can succeed (the controller stops on the
  failures that say no);
- `field_named` + `suggestion`: name the field and suggest the repair on validation errors
  (a guided repair: 90 % against 45 % in the seed);
- `retry_after`: say how long to wait on transient errors. The seed assumes waiting changes
  nothing, so this has an effect only when the project's own retries show one (retries told
  to wait succeeding more often than the others).

Fixes are ranked by the calls they resolve (per week of traffic at the range's rate, to whole
calls), then by the failed retries they avoid: a resolved call is what the controller is for,
a failed retry what it costs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from dashboard.replay.estimate import Estimates
from dashboard.replay.policies import as_sent, with_contract
from dashboard.replay.simulate import expect
from dashboard.replay.traffic import ToolTraffic

WEEK_SECONDS = 7 * 86400

# key -> (what to do, the failures it applies to, the checks it makes pass)
FIXES: dict[str, tuple[str, object, dict]] = {
    "explicit_class": (
        "state the error class (a code) on its failures",
        lambda f: not f.explicit_class, {"explicit_class": True},
    ),
    "explicit_retryable": (
        "say whether a retry can succeed (retryable) on its failures",
        lambda f: not f.retryable_stated and not f.explicit_class, {"retryable_stated": True},
    ),
    "field_named": (
        "name the field and suggest the repair on its validation errors",
        lambda f: f.error_class == "validation" and not f.guided, {"field_named": True, "suggestion": True},
    ),
    "retry_after": (
        "send retry_after on its transient errors",
        lambda f: f.error_class == "transient" and not f.retry_after, {"retry_after": True},
    ),
}  # fmt: skip


def _apply(traffic: ToolTraffic, applies, checks: dict) -> tuple[ToolTraffic, int]:
    failures: Counter = Counter()
    affected = 0
    for failure, n in traffic.failures.items():
        if applies(failure):
            affected += n
            failure = with_contract(failure, **checks)
        failures[failure] += n
    return replace(traffic, failures=failures), affected


def rank_fixes(tool: str, traffic: ToolTraffic, estimates: Estimates, *, range_seconds: float) -> list[dict]:
    """The fixes that change something for this tool, best first, with their effect over the range and per week."""
    base = expect(traffic, as_sent, estimates)
    per_week = WEEK_SECONDS / range_seconds if range_seconds > 0 else 0.0
    out = []
    for key, (label, applies, checks) in FIXES.items():
        fixed_traffic, affected = _apply(traffic, applies, checks)
        if not affected:
            continue
        fixed = expect(fixed_traffic, as_sent, estimates)
        se = {**base.se, **fixed.se}
        resolved = fixed.resolved.minus(base.resolved)
        failed = fixed.failed_retries.minus(base.failed_retries)
        attempts = fixed.attempts.mean - base.attempts.mean
        wasted = fixed.wasted_retries.mean - base.wasted_retries.mean
        if abs(resolved.mean) < 1e-9 and abs(failed.mean) < 1e-9 and not attempts and not wasted:
            continue
        calls = traffic.calls or 1
        out.append({
            "tool": tool, "fix": key, "label": label, "affected_failures": affected,
            "resolved": resolved.mean, "resolved_half_width": resolved.half_width(se),
            "resolution_rate": resolved.mean / calls, "resolution_rate_half_width": resolved.half_width(se) / calls,
            "failed_retries": failed.mean, "failed_retries_half_width": failed.half_width(se),
            "retries": attempts, "wasted_retries": wasted,
            "per_week": {"resolved": resolved.mean * per_week, "failed_retries": failed.mean * per_week,
                         "retries": attempts * per_week, "wasted_retries": wasted * per_week},
            "score": [round(resolved.mean * per_week), -failed.mean * per_week],
        })  # fmt: skip
    out.sort(key=rank_key)
    return out


def rank_key(fix: dict) -> tuple:
    """Best first: more calls resolved a week, then more failed retries avoided."""
    resolved, avoided = fix["score"]
    return (-resolved, -avoided, fix["tool"], fix["fix"])
