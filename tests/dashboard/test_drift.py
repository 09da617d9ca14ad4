"""The drift detectors (dashboard/drift.py) on seeded scenarios, and their statistics.

Pure: no database. The rates behind these pinned seeds (recall, false alerts per 100
tool-months) are measured over 100 seeds by bench/drift_eval.py; a test pins the
behaviour of a few seeds so a change in the method shows up here first.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from datetime import UTC, datetime, timedelta

import pytest

from dashboard import drift
from dashboard.drift import (
    ERROR_RATE_SPIKE,
    ESCALATION_SILENCE,
    KINDS,
    RETRY_RISE_FLAT_ERROR,
    WASTED_RETRIES,
    Bucket,
    HourlySeries,
    Thresholds,
    detect,
    replay,
)
from demo.scenarios import EVALUATION_LAG, binomial, clustered, generate, poisson

HOUR = timedelta(hours=1)
T0 = datetime(2025, 3, 3, tzinfo=UTC)


def steady(hours: int, *, calls: int = 500, errors: int = 20, retries: int = 50, escalations: int = 4,
           wasted: int = 2, start: datetime = T0) -> list[Bucket]:  # fmt: skip
    """A noiseless steady series: exact rates make the tests about the logic, not the noise."""
    return [Bucket(start + i * HOUR, calls, errors, retries, escalations, wasted) for i in range(hours)]


FIELDS = ("calls", "errors", "retries", "escalations", "wasted_retries", "failed_retries")


def with_hours(series: list[Bucket], since: int, **values: int) -> list[Bucket]:
    """The series with the given fields replaced from hour `since` on."""
    out = list(series)
    for i in range(since, len(out)):
        b = out[i]
        out[i] = Bucket(b.start, **{f: values.get(f, getattr(b, f)) for f in FIELDS})
    return out


def by_kind(findings):
    return {f.kind: f for f in findings}


def episodes_of(name: str, seed: int, tool: str, *, before: int = 24, after: int = 0):
    """Replay one tool of a scenario from `before` hours ahead of its change to `after` past the end."""
    sc = generate(name, seed)
    exp = next(e for e in sc.expected if e.tool == tool) if sc.expected else None
    start = (exp.onset if exp else sc.start) - before * HOUR
    end = sc.start + sc.hours * HOUR
    return sc, exp, replay(HourlySeries(sc.series[tool]), start, end).episodes


# ---------------------------------------------------------------------------------------
# Statistics helpers


def exact_poisson_ratio_p(k_r: int, n_r: float, k_b: int, n_b: float) -> float:
    """P(X >= k_r), X ~ Binomial(k_r + k_b, n_r / (n_r + n_b)): the exact conditional test."""
    k = k_r + k_b
    pi = n_r / (n_r + n_b)
    return sum(math.comb(k, i) * pi**i * (1 - pi) ** (k - i) for i in range(k_r, k + 1))


def test_the_rise_z_is_zero_for_equal_rates_and_signed_by_direction():
    assert drift.poisson_rise_z(10, 100, 100, 1000) == pytest.approx(0.0, abs=1e-12)
    assert drift.poisson_rise_z(20, 100, 100, 1000) > 0
    assert drift.poisson_rise_z(5, 100, 100, 1000) < 0
    assert drift.binomial_rise_z(10, 100, 100, 1000) == pytest.approx(0.0, abs=1e-12)
    assert drift.binomial_rise_z(20, 100, 100, 1000) > 0 > drift.binomial_rise_z(5, 100, 100, 1000)


@pytest.mark.parametrize(
    ("k_r", "n_r", "k_b", "n_b"), [(17, 100, 50, 1000), (30, 200, 100, 2000), (60, 500, 500, 10000)]
)
def test_the_poisson_rise_z_agrees_with_the_exact_conditional_test_at_small_counts(k_r, n_r, k_b, n_b):
    z = drift.poisson_rise_z(k_r, n_r, k_b, n_b)
    exact_z = drift.p_to_z(exact_poisson_ratio_p(k_r, n_r, k_b, n_b))
    assert z == pytest.approx(exact_z, abs=0.25)
    # The Wald z, the usual shortcut, overstates the evidence by much more at these counts.
    rate = k_b / n_b
    wald = (k_r - n_r * rate) / math.sqrt(n_r * rate)
    assert wald - exact_z > 2 * abs(z - exact_z)


def test_dispersion_divides_the_evidence():
    z1 = drift.poisson_rise_z(80, 500, 500, 10000)
    assert drift.poisson_rise_z(80, 500, 500, 10000, dispersion=2.0) == pytest.approx(z1 / math.sqrt(2.0))


def test_the_excess_z_compares_a_count_with_a_known_rate():
    assert drift.poisson_excess_z(50, 1000, 0.05) == pytest.approx(0.0, abs=1e-12)
    assert drift.poisson_excess_z(100, 1000, 0.05) > 5
    assert drift.poisson_excess_z(20, 1000, 0.05) < 0


def test_the_dispersion_estimates_are_about_one_for_plain_counts_and_higher_for_clustered_ones():
    rng = random.Random(5)
    ns = [rng.randint(200, 800) for _ in range(168)]
    plain = [poisson(rng, 0.1 * n) for n in ns]
    flips = [binomial(rng, n, 0.04) for n in ns]
    bunched = [clustered(rng, n, 0.1, 0.45) for n in ns]  # Var/Mean = E[s^2]/E[s] = 2.12

    def phi(ks, estimator):
        return estimator(sum(ks), sum(ns), sum(k * k / n for k, n in zip(ks, ns)), len(ns))

    assert phi(plain, drift.poisson_dispersion) == pytest.approx(1.0, abs=0.3)
    assert phi(flips, drift.binomial_dispersion) == pytest.approx(1.0, abs=0.3)
    assert phi(bunched, drift.poisson_dispersion) == pytest.approx(2.12, abs=0.45)


def test_the_dispersion_from_running_sums_is_pearsons_statistic():
    ks, ns = [3, 9, 4, 12], [100, 200, 150, 300]
    rate = sum(ks) / sum(ns)
    pearson = sum((k - n * rate) ** 2 / (n * rate) for k, n in zip(ks, ns)) / (len(ks) - 1)
    sums = (sum(ks), sum(ns), sum(k * k / n for k, n in zip(ks, ns)), len(ks))
    assert drift.poisson_dispersion(*sums) == pytest.approx(pearson)


def test_silence_p_is_the_exact_binomial_lower_tail():
    pi = 60 / (60 + 600)
    assert drift.silence_p(0, 60, 120, 600) == pytest.approx((1 - pi) ** 120)
    tail = sum(math.comb(120, i) * pi**i * (1 - pi) ** (120 - i) for i in range(3))
    assert drift.silence_p(2, 60, 118, 600) == pytest.approx(tail, rel=1e-9)
    assert tail < 1e-3
    assert drift.silence_p(0, 0, 10, 100) == 1.0


def test_z_and_p_convert_both_ways_and_are_capped():
    for z in (0.0, 1.5, 4.5, 8.0):
        assert drift.p_to_z(drift.z_to_p(z)) == pytest.approx(z, abs=1e-6)
    assert drift.p_to_z(0.0) == drift.Z_CAP
    assert drift.p_to_z(1.0) == -drift.Z_CAP


def test_the_samplers_have_the_right_mean_and_variance():
    rng = random.Random(1)
    draws = [binomial(rng, 400, 0.05) for _ in range(20000)]
    assert statistics.fmean(draws) == pytest.approx(20, rel=0.02)
    assert statistics.variance(draws) == pytest.approx(19, rel=0.06)
    draws = [poisson(rng, 40.0) for _ in range(20000)]
    assert statistics.fmean(draws) == pytest.approx(40, rel=0.02)
    assert statistics.variance(draws) == pytest.approx(40, rel=0.06)


def test_a_scenario_is_the_same_for_the_same_seed_and_different_for_another():
    assert generate("s5_retry_step", 3).series == generate("s5_retry_step", 3).series
    assert generate("s5_retry_step", 3).series != generate("s5_retry_step", 4).series


def test_a_fine_scenario_holds_quarter_hours_that_sum_to_its_hours():
    sc = generate("s5_retry_step", 3, fine=True)
    for tool, hourly in sc.series.items():
        fine = sc.fine_series[tool]
        assert len(fine) == 4 * len(hourly)
        for i, hour in enumerate(hourly):
            quarters = fine[4 * i : 4 * i + 4]
            assert [q.start for q in quarters] == [hour.start + k * timedelta(minutes=15) for k in range(4)]
            for name in FIELDS:
                assert sum(getattr(q, name) for q in quarters) == getattr(hour, name)


def test_a_scenario_reports_failed_retries_within_its_retries_and_at_most_one_rescued_retry_per_call():
    sc = generate("s5_retry_step", 3, fine=True)
    for buckets in (*sc.series.values(), *sc.fine_series.values()):
        for b in buckets:
            assert b.wasted_retries <= b.failed_retries <= b.retries
            assert b.retries - b.failed_retries <= b.calls


def test_the_s5_step_comes_at_a_random_minute_and_its_deadline_counts_the_jobs_lag():
    steps = [generate("s5_retry_step", seed).expected[0] for seed in range(1, 6)]
    assert len({e.onset.minute for e in steps}) > 1
    for e in steps:
        assert e.deadline == e.onset + 2 * HOUR - EVALUATION_LAG


# ---------------------------------------------------------------------------------------
# Thresholds


def test_overrides_apply_on_top_of_the_defaults_and_layer_per_tool():
    project = Thresholds.from_overrides({"z_retry_rise": 5, "recent_hours": [3, 6]})
    assert project.z_retry_rise == 5
    assert project.recent_hours == (3, 6)
    assert project.min_rise == Thresholds().min_rise
    tool = project.with_overrides({"min_recent_calls": 50})
    assert (tool.z_retry_rise, tool.min_recent_calls) == (5, 50)
    assert Thresholds.from_overrides({}) == Thresholds() == Thresholds.from_overrides(None)
    assert Thresholds.from_overrides(json.loads(json.dumps(project.to_dict()))) == project


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"z_retyr_rise": 4}, "z_retyr_rise"),
        ({"z_wasted": "5"}, "z_wasted"),
        ({"z_wasted": -1}, "z_wasted"),
        ({"z_wasted": float("nan")}, "z_wasted"),
        ({"min_recent_calls": 10.5}, "min_recent_calls"),
        ({"min_recent_calls": True}, "min_recent_calls"),
        ({"baseline_hours": 2}, "baseline_hours"),
        ({"recent_hours": []}, "recent_hours"),
        ({"recent_hours": [6, 2]}, "recent_hours"),
        ({"recent_hours": [0, 2]}, "recent_hours"),
        ({"min_rise": 1.0}, "min_rise"),
        ({"resolve_ratio": 1.6}, "resolve_ratio"),
        ({"silence_max_fraction": 0.6}, "silence_max_fraction"),
        ({"short_window_extra_z": -0.1}, "short_window_extra_z"),
    ],
)
def test_a_bad_override_is_refused_with_its_key_named(overrides, key):
    with pytest.raises(ValueError, match=rf"^{key}:"):
        Thresholds.from_overrides(overrides)


def test_overrides_must_be_a_json_object():
    with pytest.raises(ValueError, match="thresholds"):
        Thresholds.from_overrides([("z_wasted", 5)])  # type: ignore[arg-type]


def test_zero_extra_z_for_short_windows_is_allowed():
    assert Thresholds.from_overrides({"short_window_extra_z": 0}).short_window_extra_z == 0


# ---------------------------------------------------------------------------------------
# detect on hand-made series


def test_detect_returns_one_json_ready_finding_per_kind():
    series = steady(200)
    findings = detect(series, T0 + 200 * HOUR)
    assert [f.kind for f in findings] == list(KINDS)
    for f in findings:
        assert not f.firing
        assert f.statistics["evaluated"] is True
        json.dumps(f.statistics, allow_nan=False)
        assert f.recent[1] == T0 + 200 * HOUR
        assert f.baseline[1] == T0 + (200 - 6) * HOUR
        assert f.summary


def test_a_retry_rise_with_flat_errors_fires_and_says_so():
    series = with_hours(steady(200), 194, retries=100)  # the last 6 hours: retries x2, errors flat
    f = by_kind(detect(series, T0 + 200 * HOUR))[RETRY_RISE_FLAT_ERROR]
    assert f.firing
    s = f.statistics
    assert s["window_hours"] == 6  # both windows fire; the stronger evidence is reported
    assert (s["recent_retry_rate"], s["baseline_retry_rate"]) == (pytest.approx(0.196), pytest.approx(0.096))
    assert s["error_flat"] is True and s["retry_z"] >= s["z_required"]
    assert f.summary.startswith("retry rate 19.6 % vs baseline 9.6 % (z=")
    assert "while error rate 4 % vs 4 %" in f.summary


def chains(hours: int, *, retries: int, failed: int, since: int, retries_after: int, failed_after: int) -> list[Bucket]:
    """A noiseless series whose retries (and failed retries) change from hour `since` on."""
    series = steady(hours, retries=retries, wasted=0)
    return [
        Bucket(b.start, b.calls, b.errors, *((retries_after, b.escalations, 0, failed_after) if i >= since
                                            else (retries, b.escalations, 0, failed)))
        for i, b in enumerate(series)
    ]  # fmt: skip


def test_more_calls_rescued_by_a_retry_are_significant_sooner_than_the_same_retries_in_longer_chains():
    # 18 -> 36 retries an hour for the last 2 h. More rescued calls (12 -> 30 an hour, one
    # each: no clusters) fire; the same retries as longer chains (the rescued calls flat)
    # are left to the retry-count test, whose bar is higher (z 5.3 < 5.5 on 2 h).
    now = T0 + 200 * HOUR
    rescued = chains(200, retries=18, failed=6, since=198, retries_after=36, failed_after=6)
    longer = chains(200, retries=18, failed=6, since=198, retries_after=36, failed_after=24)

    fired = by_kind(detect(rescued, now))[RETRY_RISE_FLAT_ERROR]
    held = by_kind(detect(longer, now))[RETRY_RISE_FLAT_ERROR]

    assert fired.firing and fired.statistics["window_hours"] == 2
    assert fired.statistics["rescued_z"] >= fired.statistics["z_required"]
    assert not held.firing and held.statistics["rescued_ratio"] == 1.0
    # The 2 h retry count alone clears the rescued calls' bar, not its own.
    count_z = drift.poisson_rise_z(2 * 36, 2 * 500, 168 * 18, 168 * 500)
    assert fired.statistics["z_required"] < count_z < fired.statistics["z_required_count"]


def test_a_large_enough_rise_in_retry_chains_fires_on_the_retry_count_alone():
    longer = chains(200, retries=25, failed=10, since=198, retries_after=50, failed_after=35)
    f = by_kind(detect(longer, T0 + 200 * HOUR))[RETRY_RISE_FLAT_ERROR]
    assert f.firing
    assert f.statistics["rescued_z"] == 0 and f.statistics["retry_z"] >= f.statistics["z_required_count"]


def test_without_failed_retries_every_retry_counts_as_rescued_but_never_more_than_the_calls():
    series = steady(200, calls=100, retries=150, wasted=0)  # 1.5 retries per call, none reported failed
    f = by_kind(detect(series, T0 + 200 * HOUR))[RETRY_RISE_FLAT_ERROR]
    assert f.statistics["recent_rescued"] == 6 * 100 and not f.firing


def test_a_retry_rise_with_rising_errors_is_an_error_spike_not_a_quiet_failure():
    series = with_hours(steady(200), 196, retries=100, errors=60)
    findings = by_kind(detect(series, T0 + 200 * HOUR))
    assert findings[ERROR_RATE_SPIKE].firing
    assert not findings[RETRY_RISE_FLAT_ERROR].firing
    assert findings[RETRY_RISE_FLAT_ERROR].statistics["error_flat"] is False


def test_errors_count_as_flat_unless_up_both_significantly_and_materially():
    # Up 1.6x on a handful of errors (z < 2): noise, flat. Up 1.2x at volume (z > 2): small, flat.
    few = with_hours(steady(200, errors=2), 194, retries=100, errors=3)
    f = by_kind(detect(few, T0 + 200 * HOUR))[RETRY_RISE_FLAT_ERROR]
    assert f.statistics["error_ratio"] > 1.25 and f.statistics["error_z"] < 2
    assert f.firing and f.statistics["error_flat"] is True
    many = with_hours(steady(200, calls=5000, errors=500, retries=500), 194, retries=1000, errors=600)
    f = by_kind(detect(many, T0 + 200 * HOUR))[RETRY_RISE_FLAT_ERROR]
    assert f.statistics["error_z"] > 2 and f.statistics["error_ratio"] <= 1.25
    assert f.firing and f.statistics["error_flat"] is True


def test_a_significant_but_immaterial_rise_in_wasted_retries_does_not_fire():
    # 0.1 % -> 0.8 % of calls: a 8x rise, far beyond noise, but under wasted_min_rate (1 %).
    series = with_hours(steady(200, calls=1000, retries=100, wasted=1), 194, retries=107, wasted_retries=8)
    f = by_kind(detect(series, T0 + 200 * HOUR))[WASTED_RETRIES]
    assert f.statistics["wasted_z"] >= f.statistics["z_required"]
    assert not f.firing


def test_wasted_retries_fire_on_a_rise_over_baseline_and_do_not_count_as_a_retry_rise():
    series = with_hours(steady(200), 196, retries=80, wasted_retries=32)  # +30 wasted, the rest steady
    findings = by_kind(detect(series, T0 + 200 * HOUR))
    assert findings[WASTED_RETRIES].firing
    assert findings[WASTED_RETRIES].statistics["above_baseline"] is True
    assert not findings[RETRY_RISE_FLAT_ERROR].firing


def test_chronic_wasted_retries_above_the_floor_fire_without_any_rise():
    series = steady(200, retries=100, wasted=50)  # 0.1 wasted retries per call, for ever
    f = by_kind(detect(series, T0 + 200 * HOUR))[WASTED_RETRIES]
    assert f.firing
    assert f.statistics["above_floor"] is True and f.statistics["above_baseline"] is False


def test_escalations_stopping_while_errors_go_on_is_silence():
    series = with_hours(steady(200), 194, escalations=0)
    f = by_kind(detect(series, T0 + 200 * HOUR))[ESCALATION_SILENCE]
    assert f.firing
    assert f.statistics["expected_escalations"] == pytest.approx(24)
    assert f.statistics["silence_p_exact"] is True


def test_escalations_stopping_because_errors_stopped_is_not_silence():
    series = with_hours(steady(200), 194, escalations=0, errors=1)
    assert not by_kind(detect(series, T0 + 200 * HOUR))[ESCALATION_SILENCE].firing


def test_a_quiet_tool_is_not_evaluated_and_the_reason_is_given():
    series = with_hours(steady(200, calls=5, errors=0, retries=1, escalations=0, wasted=0), 196, retries=5)
    for f in detect(series, T0 + 200 * HOUR):
        assert not f.firing
        assert f.statistics["evaluated"] is False
        assert "calls" in f.statistics["reason"]


def test_a_young_tool_waits_for_a_baseline():
    f = detect(steady(30), T0 + 30 * HOUR)[0]
    assert f.statistics["evaluated"] is False
    assert "baseline" in f.statistics["reason"]


def test_order_missing_hours_partial_hours_and_the_future_do_not_change_the_result():
    series = with_hours(steady(200), 196, retries=100)
    reference = detect(series, T0 + 200 * HOUR)
    shuffled = list(series)
    random.Random(2).shuffle(shuffled)
    later = series + steady(10, retries=900, start=T0 + 200 * HOUR)  # after now: never read
    now = T0 + 200 * HOUR
    for variant, at in ((shuffled, now), (later, now), (series, now + timedelta(minutes=17))):
        assert [(f.firing, f.statistics) for f in detect(variant, at)] == [(f.firing, f.statistics) for f in reference]
    gappy = [b for i, b in enumerate(series) if i % 10 != 3]  # missing hours are hours without calls
    assert by_kind(detect(gappy, T0 + 200 * HOUR))[RETRY_RISE_FLAT_ERROR].firing


def test_two_consecutive_evaluations_can_be_required():
    series = with_hours(steady(200), 199, retries=200)  # only the last hour
    th = Thresholds(confirm_hours=2)
    assert by_kind(detect(series, T0 + 200 * HOUR))[RETRY_RISE_FLAT_ERROR].firing
    f = by_kind(detect(series, T0 + 200 * HOUR, th))[RETRY_RISE_FLAT_ERROR]
    assert not f.firing and "consecutive" in f.statistics["reason"]
    assert by_kind(detect(with_hours(series, 198, retries=200), T0 + 200 * HOUR, th))[RETRY_RISE_FLAT_ERROR].firing


def test_an_open_alert_holds_while_the_rate_stays_up_and_resolves_once_clearly_back():
    up = with_hours(steady(260), 196, retries=100)
    opened = {RETRY_RISE_FLAT_ERROR: T0 + 200 * HOUR}
    kinds = frozenset(opened)
    f = by_kind(detect(up, T0 + 230 * HOUR, open_kinds=kinds, opened_at=opened))[RETRY_RISE_FLAT_ERROR]
    assert f.firing and f.statistics["mode"] == "hold"
    # Part way back (x1.3) is not back; back to x1.1 is.
    part = with_hours(up, 224, retries=65)
    assert by_kind(detect(part, T0 + 230 * HOUR, open_kinds=kinds, opened_at=opened))[RETRY_RISE_FLAT_ERROR].firing
    back = with_hours(up, 224, retries=55)
    f = by_kind(detect(back, T0 + 230 * HOUR, open_kinds=kinds, opened_at=opened))[RETRY_RISE_FLAT_ERROR]
    assert not f.firing and "(resolved)" in f.summary


def test_an_open_alert_keeps_the_baseline_it_opened_on_so_a_lasting_rise_does_not_become_normal():
    up = with_hours(steady(400), 196, retries=100)  # doubled for 8 days
    now = T0 + 400 * HOUR
    opened = {RETRY_RISE_FLAT_ERROR: T0 + 200 * HOUR}
    kinds = frozenset(opened)
    assert by_kind(detect(up, now, open_kinds=kinds, opened_at=opened))[RETRY_RISE_FLAT_ERROR].firing
    # Without the opening time the rolling baseline has absorbed the new level.
    assert not by_kind(detect(up, now, open_kinds=kinds))[RETRY_RISE_FLAT_ERROR].firing


def test_an_open_alert_is_not_resolved_by_the_hours_before_it_opened():
    up = with_hours(steady(260), 199, retries=200)  # opened on one hot hour
    opened = {RETRY_RISE_FLAT_ERROR: T0 + 200 * HOUR}
    f = by_kind(detect(up, T0 + 201 * HOUR, open_kinds=frozenset(opened), opened_at=opened))[RETRY_RISE_FLAT_ERROR]
    assert f.firing and "open for less than" in f.statistics["reason"]


def five_minutes(hourly: list[Bucket]) -> list[Bucket]:
    """Each (noiseless) hour as twelve equal 5-minute buckets: counts must divide by 12."""
    return [
        Bucket(b.start + k * timedelta(minutes=5), *(getattr(b, f) // 12 for f in FIELDS))
        for b in hourly
        for k in range(12)
    ]


def test_with_five_minute_buckets_a_step_is_judged_on_windows_ending_at_now():
    # Retries x2 from 200:10. On the hour, 2 h hold 50 minutes of it: under 1.5x.
    hourly = steady(230, calls=600, errors=24, retries=60, escalations=12, wasted=0)
    fine = five_minutes(hourly)
    step = T0 + 200 * HOUR + timedelta(minutes=10)
    fine = [Bucket(b.start, b.calls, b.errors, b.retries * (2 if b.start >= step else 1), b.escalations, 0)
            for b in fine]  # fmt: skip
    hourly = [Bucket(h.start, *(sum(getattr(b, f) for b in fine if h.start <= b.start < h.start + HOUR)
                                for f in FIELDS)) for h in hourly]  # fmt: skip
    now = T0 + 201 * HOUR + timedelta(minutes=48)

    on_the_hour = by_kind(detect(hourly, now))[RETRY_RISE_FLAT_ERROR]
    at_now = by_kind(detect(hourly, now, fine_series=fine))[RETRY_RISE_FLAT_ERROR]

    assert not on_the_hour.firing and on_the_hour.recent[1] == T0 + 201 * HOUR
    assert at_now.firing and at_now.recent == (now - timedelta(minutes=3) - 2 * HOUR, now - timedelta(minutes=3))
    # The baseline is the same hourly one: it ends on the hour, 6 h or more before now.
    assert at_now.baseline[1] == T0 + 195 * HOUR


def test_on_the_hour_five_minute_buckets_change_nothing():
    sc = generate("s5_retry_step", 3, fine=True)
    exp = sc.expected[0]
    now = exp.onset.replace(minute=0, second=0, microsecond=0) + 2 * HOUR
    hourly = detect(sc.series["degrading"], now)
    fine = detect(sc.series["degrading"], now, fine_series=sc.fine_series["degrading"])
    assert [(f.firing, f.recent, f.baseline, f.statistics) for f in fine] == [
        (f.firing, f.recent, f.baseline, f.statistics) for f in hourly
    ]


def test_replay_more_often_than_hourly_needs_sub_hour_buckets_and_a_step_dividing_the_hour():
    series = steady(100)
    with pytest.raises(ValueError, match="fine_series"):
        replay(series, T0, T0 + 100 * HOUR, step=timedelta(minutes=15))
    with pytest.raises(ValueError, match="step"):
        replay(series, T0, T0 + 100 * HOUR, fine_series=five_minutes(series), step=timedelta(minutes=7))
    fine = five_minutes(steady(100, calls=600, errors=24, retries=60, escalations=12, wasted=0))
    quarterly = replay(series, T0, T0 + 10 * HOUR, fine_series=fine, step=timedelta(minutes=15))
    assert quarterly.evaluations == 40


def test_replay_every_15_minutes_opens_and_resolves_exactly_where_detect_does():
    sc = generate("s6_recovery", 2, fine=True)
    exp = sc.expected[0]
    hourly, fine = HourlySeries(sc.series["degrading"]), HourlySeries(sc.fine_series["degrading"])
    start, end, quarter = exp.onset - 2 * HOUR, exp.recovered + 12 * HOUR, timedelta(minutes=15)
    replayed = replay(hourly, start, end, fine_series=fine, step=quarter)

    opened: dict = {}
    transitions = []
    now = start + quarter
    while now <= end:
        for f in detect(hourly, now, open_kinds=frozenset(opened), opened_at=opened, fine_series=fine):
            if f.firing != (f.kind in opened):
                transitions.append((f.kind, now, f.firing))
                opened.pop(f.kind) if f.kind in opened else opened.setdefault(f.kind, now)
        now += quarter

    expected = [(e.kind, e.opened, True) for e in replayed.episodes] + [
        (e.kind, e.resolved, False) for e in replayed.episodes if e.resolved
    ]
    assert sorted(transitions) == sorted(expected) and transitions


def test_replay_before_fine_from_is_hourly_and_every_step_from_it_on():
    # A range reaching back past the 5-minute rollups' horizon (dashboard/alerting/evaluation.py).
    sc = generate("s5_retry_step", 50, fine=True)  # the step comes at 04:41
    exp = sc.expected[0]
    hourly, fine = HourlySeries(sc.series["degrading"]), HourlySeries(sc.fine_series["degrading"])
    hour = exp.onset.replace(minute=0, second=0, microsecond=0)
    start, end, quarter = hour - 6 * HOUR, hour + 6 * HOUR, timedelta(minutes=15)
    every_quarter = replay(hourly, start, end, fine_series=fine, step=quarter)
    every_hour = replay(hourly, start, end)
    assert every_quarter.episodes[0].opened <= exp.deadline < every_hour.episodes[0].opened == hour + 3 * HOUR

    # fine_from after the hourly opening: judged hourly, as without 5-minute buckets at all.
    late = replay(hourly, start, end, fine_series=fine, step=quarter, fine_from=hour + 4 * HOUR)
    assert [(e.kind, e.opened) for e in late.episodes] == [(e.kind, e.opened) for e in every_hour.episodes]
    assert late.evaluations == 9 + 9  # the hours up to hour + 3 h, then every 15 minutes to the end
    # fine_from before the step: each quarter hour from it on, exactly as throughout.
    early = replay(hourly, start, end, fine_series=fine, step=quarter, fine_from=start + 3 * HOUR)
    assert [(e.kind, e.opened) for e in early.episodes] == [(e.kind, e.opened) for e in every_quarter.episodes]
    assert early.evaluations == 2 + 9 * 4 + 1


def test_an_open_alert_stays_open_when_the_tool_goes_quiet():
    series = with_hours(with_hours(steady(230), 196, retries=100), 210, calls=3, errors=0, retries=1, escalations=0,
                        wasted_retries=0)  # fmt: skip
    opened = {RETRY_RISE_FLAT_ERROR: T0 + 200 * HOUR}
    f = by_kind(detect(series, T0 + 230 * HOUR, open_kinds=frozenset(opened), opened_at=opened))[RETRY_RISE_FLAT_ERROR]
    assert f.firing and "cannot judge recovery" in f.statistics["reason"]


# ---------------------------------------------------------------------------------------
# The scenarios


# Seed 1 is not here: one of its 20 tools raises one of the false alerts the bench counts
# (hourly, 0.34 per 100 tool-months, i.e. about one S1 seed in fifteen shows one).
@pytest.mark.parametrize("seed", [2, 3])
def test_s1_twenty_steady_tools_for_a_month_raise_no_alert(seed):
    sc = generate("s1_steady", seed)
    for tool, buckets in sc.series.items():
        assert replay(HourlySeries(buckets), sc.start, sc.start + sc.hours * HOUR).episodes == [], tool


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_s2_a_retry_ramp_with_flat_errors_fires_within_6_h_of_passing_1_5x(seed):
    sc, exp, episodes = episodes_of("s2_retry_ramp", seed, "degrading")
    assert [e.kind for e in episodes] == [RETRY_RISE_FLAT_ERROR]
    assert exp.onset <= episodes[0].opened <= exp.reference + 6 * HOUR
    assert episodes[0].resolved is None  # the ramp persists, so does the alert


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_s3_an_error_spike_with_retries_rising_is_an_error_spike_and_never_a_quiet_failure(seed):
    sc, exp, episodes = episodes_of("s3_error_spike", seed, "failing")
    kinds = [e.kind for e in episodes]
    assert ERROR_RATE_SPIKE in kinds and RETRY_RISE_FLAT_ERROR not in kinds
    spike = next(e for e in episodes if e.kind == ERROR_RATE_SPIKE)
    assert spike.opened <= exp.onset + 2 * HOUR


def test_s3_a_quiet_failure_never_opens_while_the_error_spike_holds_even_once_the_baseline_took_it_in():
    # Seed 9: 12 h into the spike its first 6 h are in the baseline, whose error dispersion
    # they inflate: the errors (2.7x) are no longer significantly up, but the spike holds.
    sc = generate("s3_error_spike", 9, fine=True)
    exp = sc.expected[0]
    episodes = replay(sc.series["failing"], exp.onset - HOUR, exp.onset + 24 * HOUR,
                      fine_series=sc.fine_series["failing"], step=timedelta(minutes=15)).episodes  # fmt: skip
    assert [e.kind for e in episodes] == [ERROR_RATE_SPIKE]


@pytest.mark.parametrize("seed", [1, 2])
def test_s4_a_tool_at_5_calls_an_hour_pages_nobody_even_with_the_ramp(seed):
    sc = generate("s4_quiet_tool", seed)
    for buckets in sc.series.values():
        assert replay(buckets, sc.start, sc.start + sc.hours * HOUR).episodes == []


def test_s5_a_retry_step_is_caught_within_2_h_on_tools_with_enough_retries_when_judged_every_15_minutes():
    # Detectability within 2 h depends on the retries an hour carries (docs/drift.md):
    # the first seeds whose tool makes 25-50 retries an hour at the step, and >= 50.
    volumes = {s: generate("s5_retry_step", s).expected[0].events_per_hour for s in range(1, 40)}
    seeds = [s for s, v in volumes.items() if 25 <= v < 50][:3] + [s for s, v in volumes.items() if v >= 50][:2]
    assert len(seeds) == 5
    for seed in seeds:
        sc = generate("s5_retry_step", seed, fine=True)
        exp = sc.expected[0]
        episodes = replay(sc.series["degrading"], exp.onset - 12 * HOUR, sc.start + sc.hours * HOUR,
                          fine_series=sc.fine_series["degrading"], step=timedelta(minutes=15)).episodes  # fmt: skip
        assert [e.kind for e in episodes] == [RETRY_RISE_FLAT_ERROR], seed
        # From the step to the job that fires, 3 minutes after the data's end: 2 h at most.
        assert episodes[0].opened + EVALUATION_LAG <= exp.onset + 2 * HOUR, seed


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_s6_after_recovery_the_alert_resolves_by_itself_within_24_h_without_flapping(seed):
    sc, exp, episodes = episodes_of("s6_recovery", seed, "degrading")
    assert [e.kind for e in episodes] == [RETRY_RISE_FLAT_ERROR]  # one episode: no flapping
    (episode,) = episodes
    assert episode.opened <= exp.deadline
    assert episode.resolved is not None
    assert exp.recovered <= episode.resolved <= exp.recovered + 24 * HOUR


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_s7_retrying_permanent_failures_fires_wasted_retries(seed):
    sc, exp, episodes = episodes_of("s7_wasted_retries", seed, "wasteful")
    assert [e.kind for e in episodes] == [WASTED_RETRIES]
    assert episodes[0].opened <= exp.deadline


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_s8_escalations_stopping_while_errors_go_on_fires_escalation_silence(seed):
    sc, exp, episodes = episodes_of("s8_escalation_silence", seed, "absorbing")
    assert [e.kind for e in episodes] == [ESCALATION_SILENCE]
    assert episodes[0].opened <= exp.deadline


@pytest.mark.parametrize("name", ["q_weekly_cycle", "q_bursts", "q_rate_cycle"])
def test_what_looks_different_but_is_fine_raises_no_alert(name):
    sc = generate(name, 2)
    for tool, buckets in sc.series.items():
        assert replay(buckets, sc.start, sc.start + sc.hours * HOUR).episodes == [], tool


def test_the_control_tools_of_the_change_scenarios_stay_silent():
    for name in ("s2_retry_ramp", "s5_retry_step", "s7_wasted_retries"):
        sc = generate(name, 1)
        assert replay(sc.series["control"], sc.start, sc.start + sc.hours * HOUR).episodes == [], name


# --- a condition that began inside the baseline window (issue 15) ------------------------------

OLD_WAY = {"baseline_outlier_z": 0.0, "wasted_floor_count": 0}


def _chronic(hours_in: int, *, retries=lambda late: 50, wasted=lambda late: 1) -> tuple[list[Bucket], datetime]:
    """200 hours of a steady tool; the last `hours_in` of them changed (`late` True)."""
    series = []
    for i in range(200):
        late = i >= 200 - hours_in
        w = wasted(late)
        series.append(Bucket(T0 + i * HOUR, 500, 15, retries(late) + w, 5, w, w))
    return series, T0 + 200 * HOUR


def _fires(series, now, kind, overrides=None) -> bool:
    th = Thresholds.from_overrides(overrides)
    return next(f for f in drift.detect(series, now, th) if f.kind == kind).firing


def test_wasted_retries_that_began_two_days_ago_still_alert_though_the_baseline_holds_them():
    series, now = _chronic(54, wasted=lambda late: 25 if late else 1)

    assert _fires(series, now, "wasted_retries")
    assert not _fires(series, now, "wasted_retries", OLD_WAY)  # the baseline's own scatter absorbed it
    # Each half of the rule catches it alone: the robust baseline, and the absolute floor.
    assert _fires(series, now, "wasted_retries", {"wasted_floor_count": 0})
    assert _fires(series, now, "wasted_retries", {"baseline_outlier_z": 0.0})


def test_a_retry_step_that_began_two_days_ago_is_judged_against_the_days_before_it():
    series, now = _chronic(54, retries=lambda late: 100 if late else 50)

    (finding,) = [f for f in drift.detect(series, now) if f.kind == "retry_rise_flat_error"]
    assert finding.firing and finding.statistics["baseline_excluded_days"] == 2
    assert finding.statistics["retry_ratio"] == pytest.approx(2.0, rel=0.02)
    assert not _fires(series, now, "retry_rise_flat_error", OLD_WAY)


def test_a_steady_baseline_leaves_no_day_out():
    series, now = _chronic(0)

    assert all(f.statistics["baseline_excluded_days"] == 0 for f in drift.detect(series, now))


def test_once_a_level_holds_most_of_the_baseline_it_is_the_norm_and_the_older_days_are_the_outliers():
    series, now = _chronic(150, retries=lambda late: 100 if late else 50)

    (finding,) = [f for f in drift.detect(series, now) if f.kind == "retry_rise_flat_error"]
    assert not finding.firing and finding.statistics["baseline_excluded_days"] == 1
    assert finding.statistics["baseline_retry_rate"] == pytest.approx(0.2)


def test_the_absolute_wasted_floor_needs_the_count_and_the_share_of_retries():
    few, now = _chronic(200, wasted=lambda late: 6)  # 36 in 6 h: under 50, whatever their share
    assert not _fires(few, now, "wasted_retries", {"baseline_outlier_z": 0.0})
    diluted, now = _chronic(200, retries=lambda late: 400, wasted=lambda late: 25)  # 150 of 2550 retries: 6 %
    assert not _fires(diluted, now, "wasted_retries", {"baseline_outlier_z": 0.0, "wasted_floor": 1.0})
    chronic, now = _chronic(200, wasted=lambda late: 25)  # always: no baseline would ever show it
    assert _fires(chronic, now, "wasted_retries")
