"""The one plain sentence that says why a drift alert opened. Pure: stdlib only.

Contract:
- `alert_sentence(kind=, tool=, evidence=)` reads the evidence the evaluation stores
  (dashboard/alerting/evaluation.py: `statistics`, `recent`) and says what changed, by how
  much, since when and on what volume, rates as percentages, e.g.
  "Retry rate of search_kb rose from 7.0 % to 45.1 % of calls (6.4×) in the 2 h since
  Jan 12 14:05 UTC, on 1,240 calls, while its error rate stayed at 3.1 %."
- Given the alert's opening evidence (Alert.opening_evidence, never refreshed) it is the
  alert's summary for as long as the alert lives: the alert page, the lists, the overview,
  the tool page and the notices all show it (docs/contract/drift-and-alerts.md#evidence).
- Returns "" when the evidence holds no numbers to say it with (a kind it does not know,
  an evaluation that was not evaluated, evidence from before this existed); callers then
  keep the summary they had.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

__all__ = ["alert_sentence", "percent", "when"]


def percent(rate) -> str:
    """A rate per call as a percentage: 0.0701 -> "7.0 %", 0.00034 -> "0.034 %"."""
    value = 100.0 * float(rate)
    if value == 0:
        return "0 %"
    if abs(value) < 0.1:
        return f"{value:.2g} %"
    return f"{value:,.1f} %"


def when(moment: datetime) -> str:
    """ "Jan 12 14:05 UTC": the date too, since a backfilled alert may have opened days ago."""
    moment = moment.astimezone(UTC)
    return f"{moment:%b} {moment.day} {moment:%H:%M} UTC"


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _moment(value) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _times(ratio) -> str:
    ratio = _number(ratio)
    return f" ({ratio:.1f}×)" if ratio is not None else ""


def _rise(metric: str, tool: str, before, after, ratio, unit: str = "") -> str | None:
    before, after = _number(before), _number(after)
    if before is None or after is None:
        return None
    if before == 0:
        return f"{metric} of {tool} rose from none to {percent(after)}{unit}"
    return f"{metric} of {tool} rose from {percent(before)} to {percent(after)}{unit}{_times(ratio)}"


def alert_sentence(*, kind: str, tool: str, evidence) -> str:
    """The sentence for a drift alert of `kind` on `tool` from one evaluation's evidence; "" if it cannot be said."""
    if not isinstance(evidence, dict):
        return ""
    s = evidence.get("statistics")
    if not isinstance(s, dict) or not s.get("evaluated"):
        return ""
    calls, hours = _number(s.get("recent_calls")), _number(s.get("window_hours"))
    recent = evidence.get("recent")
    since = _moment(recent[0]) if isinstance(recent, list | tuple) and len(recent) == 2 else None
    if calls is None or hours is None or since is None:
        return ""
    span = f"in the {hours:g} h since {when(since)}, on {calls:,.0f} calls"
    if kind == "retry_rise_flat_error":
        what = _rise("Retry rate", tool, s.get("baseline_retry_rate"), s.get("recent_retry_rate"),
                     s.get("retry_ratio"), " of calls")  # fmt: skip
        errors = _number(s.get("recent_error_rate"))
        tail = f", while its error rate stayed at {percent(errors)}" if errors is not None else ""
        return f"{what} {span}{tail}." if what else ""
    if kind == "error_rate_spike":
        what = _rise("Error rate", tool, s.get("baseline_error_rate"), s.get("recent_error_rate"), s.get("error_ratio"))
        return f"{what} {span}." if what else ""
    if kind == "wasted_retries":
        return _wasted(tool, s, span)
    if kind == "escalation_silence":
        observed, expected = _number(s.get("recent_escalations")), _number(s.get("expected_escalations"))
        errors = _number(s.get("recent_errors"))
        if observed is None or expected is None or errors is None:
            return ""
        return (
            f"Escalations of {tool} fell to {observed:,.0f} where its usual share of failures predicts "
            f"{expected:,.1f}, {span} with {errors:,.0f} errors."
        )
    return ""


def _wasted(tool: str, s: dict, span: str) -> str:
    wasted = _number(s.get("recent_wasted_retries"))
    if wasted is None:
        return ""
    rate = _number(s.get("recent_wasted_rate"))
    retries = _number(s.get("recent_retries"))
    share = f", {percent(wasted / retries)} of its retries" if retries else ""
    why = ": retries after a permanent error, which cannot succeed"
    if s.get("above_baseline") or not (s.get("above_floor") or s.get("above_absolute_floor")):
        what = _rise("Wasted retries", tool, s.get("baseline_wasted_rate"), rate, s.get("wasted_ratio"), " of calls")
        if what:
            return f"{what} ({wasted:,.0f}{share}) {span}{why}."
    per_call = f" ({percent(rate)} of calls{share})" if rate is not None else ""
    return f"{tool} made {wasted:,.0f} wasted retries{per_call} {span}{why}."
