"""dashboard/feed/state.py, as pure: a table of tools' windows and what the feed says of them."""

import pytest

from dashboard.feed.state import DEGRADED, FAILING, OK, UNKNOWN, Counts, Failures, dominant_class, tool_state

# A steady baseline: 10,000 calls, 2 % errors, 10 % retries, no wasted retries.
STEADY = Counts(calls=10_000, errors=200, retries=1_000, wasted_retries=0)
NONE = Counts()


@pytest.mark.parametrize(("case", "recent", "baseline", "alerts", "failures", "state", "action", "in_reason"), [
    ("quiet tool", Counts(calls=3), STEADY, (), Failures(), UNKNOWN, None, "too few"),
    ("never seen", NONE, NONE, (), Failures(), UNKNOWN, None, "0 calls"),
    ("as usual", Counts(calls=200, errors=4, retries=20), STEADY, (), Failures({"transient": 4}), OK, "retry", "error rate 2 %"),
    ("half failing", Counts(calls=40, errors=20), STEADY, (), Failures({"transient": 15, "validation": 5}), FAILING,
     "retry", "50 % of 40 calls failed, mostly transient"),
    ("failing beats an alert", Counts(calls=20, errors=19), STEADY, ("error_rate_spike",), Failures({"fatal": 19}),
     FAILING, "stop", "mostly fatal"),
    ("an open alert", Counts(calls=200, errors=4, retries=20), STEADY, ("retry_rise_flat_error",), Failures(), DEGRADED,
     None, "open alert: retry_rise_flat_error"),
    ("an open alert on a quiet tool", NONE, STEADY, ("error_rate_spike",), Failures(), DEGRADED, None, "open alert"),
    ("errors up 5x", Counts(calls=200, errors=20), STEADY, (), Failures({"permission": 20}), DEGRADED, "authorize",
     "error rate 10 %, 5.0x the baseline's 2 %"),
    ("errors up, not significantly", Counts(calls=20, errors=1), STEADY, (), Failures({"transient": 1}), OK, "retry", ""),
    ("retries up 3x", Counts(calls=200, errors=4, retries=60), STEADY, (), Failures(), DEGRADED, None, "retry rate 30 %"),
    ("wasted above the floor", Counts(calls=100, errors=5, wasted_retries=6), Counts(calls=10_000, wasted_retries=500),
     (), Failures({"not_found": 5}), DEGRADED, "replace", "wasted retries 6 % of calls"),
    ("wasted rising from none", Counts(calls=200, errors=4, wasted_retries=8), STEADY, (), Failures({"business": 4}),
     DEGRADED, "escalate", "wasted retries 4 %"),
    ("no baseline, many errors", Counts(calls=50, errors=15), NONE, (), Failures({"validation": 15}, field="date"),
     DEGRADED, "repair", "no baseline yet"),
    ("no baseline, few errors", Counts(calls=50, errors=5), NONE, (), Failures({"validation": 5}), OK, "repair", ""),
])  # fmt: skip
def test_a_tools_state_follows_the_table(case, recent, baseline, alerts, failures, state, action, in_reason):
    health = tool_state(recent=recent, baseline=baseline, open_alert_kinds=alerts, failures=failures)

    assert (health.state, health.next_action) == (state, action), case
    assert in_reason in health.reason, (case, health.reason)


def test_a_transient_tool_says_how_long_to_wait_in_whole_seconds():
    health = tool_state(recent=Counts(calls=30, errors=30), baseline=STEADY,
                        failures=Failures({"transient": 30}, retry_after_ms=2_300))  # fmt: skip

    assert (health.state, health.next_action, health.retry_after_s, health.field) == (FAILING, "retry", 3, None)


def test_a_validation_tool_names_the_field_to_repair_and_no_wait():
    health = tool_state(recent=Counts(calls=30, errors=30), baseline=STEADY,
                        failures=Failures({"validation": 30}, field="date", retry_after_ms=1000))  # fmt: skip

    assert (health.next_action, health.field, health.retry_after_s) == ("repair", "date", None)


def test_the_dominant_class_is_the_most_frequent_and_ties_go_to_the_taxonomys_order():
    assert dominant_class({"validation": 3, "transient": 5}) == "transient"
    assert dominant_class({"not_found": 4, "permission": 4}) == "permission"
    assert dominant_class({"unknown": 2}) == "unknown"
    assert dominant_class({"transient": 0, "made_up": 9}) is None
    assert tool_state(recent=Counts(calls=20, errors=20), baseline=NONE, failures=Failures({"unknown": 20})).next_action == "none"
