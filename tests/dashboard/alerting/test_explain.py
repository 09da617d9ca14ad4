"""The one sentence an alert leads with, from the evidence of the evaluation that opened it (pure)."""

from dashboard.alerting.explain import alert_sentence, percent


def evidence(**statistics):
    return {
        "statistics": {"evaluated": True, "window_hours": 2, "recent_calls": 1240, **statistics},
        "recent": ["2025-01-12T14:05:00+00:00", "2025-01-12T16:05:00+00:00"],
    }


def test_a_retry_rise_says_what_rose_by_how_much_since_when_and_on_what_volume():
    sentence = alert_sentence(
        kind="retry_rise_flat_error", tool="search_kb",
        evidence=evidence(baseline_retry_rate=0.07, recent_retry_rate=0.451, retry_ratio=6.44, recent_error_rate=0.031),
    )  # fmt: skip

    assert sentence == (
        "Retry rate of search_kb rose from 7.0 % to 45.1 % of calls (6.4×) in the 2 h since Jan 12 14:05 UTC, "
        "on 1,240 calls, while its error rate stayed at 3.1 %."
    )


def test_an_error_spike_reads_as_percentages():
    sentence = alert_sentence(
        kind="error_rate_spike", tool="lookup",
        evidence=evidence(baseline_error_rate=0.03, recent_error_rate=0.152, error_ratio=5.07),
    )  # fmt: skip

    assert sentence.startswith("Error rate of lookup rose from 3.0 % to 15.2 % (5.1×) in the 2 h since Jan 12 14:05 UTC")


def test_wasted_retries_above_the_absolute_floor_say_how_many_and_what_share_of_retries():
    sentence = alert_sentence(
        kind="wasted_retries", tool="crm",
        evidence=evidence(recent_wasted_retries=60, recent_retries=150, recent_wasted_rate=0.048,
                          baseline_wasted_rate=0.04, wasted_ratio=1.2, above_baseline=False, above_floor=True),
    )  # fmt: skip

    assert sentence.startswith("crm made 60 wasted retries (4.8 % of calls, 40.0 % of its retries) in the 2 h since")
    assert "cannot succeed" in sentence


def test_escalation_silence_says_how_many_were_expected():
    sentence = alert_sentence(
        kind="escalation_silence", tool="refund",
        evidence=evidence(recent_escalations=0, expected_escalations=14.25, recent_errors=57),
    )  # fmt: skip

    assert sentence.startswith("Escalations of refund fell to 0 where its usual share of failures predicts 14.2")
    assert sentence.endswith("with 57 errors.")


def test_evidence_without_numbers_gives_no_sentence():
    assert alert_sentence(kind="error_rate_spike", tool="t", evidence={"statistics": {"evaluated": False}}) == ""
    assert alert_sentence(kind="eval_regression", tool="t", evidence=evidence()) == ""
    assert alert_sentence(kind="error_rate_spike", tool="t", evidence="junk") == ""


def test_a_rate_from_zero_has_no_ratio():
    sentence = alert_sentence(
        kind="error_rate_spike", tool="t", evidence=evidence(baseline_error_rate=0.0, recent_error_rate=0.2)
    )
    assert "rose from none to 20.0 %" in sentence


def test_percent_keeps_small_rates_readable():
    assert (percent(0.0701), percent(0.00034), percent(0), percent(1.2)) == ("7.0 %", "0.034 %", "0 %", "120.0 %")
