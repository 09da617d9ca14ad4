"""The pure replay: policies decide a move, estimates fall back to the seed, expectations are exact sums."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter

import pytest

from dashboard.replay import estimate, fixes, policies, simulate, traffic
from dashboard.replay.estimate import Estimates
from dashboard.replay.policies import REPAIR, RETRY, STOP, Failure, Move
from dashboard.replay.report import build_report
from dashboard.rollups.attempts import Attempt, link_attempts

T0 = dt.datetime(2026, 9, 14, 12, tzinfo=dt.UTC)


def failure(cls: str, **checks) -> Failure:
    return Failure(tool="t", error_class=cls, **checks)


@pytest.mark.parametrize("cls, generic, code, envelope", [
    ("transient", RETRY, RETRY, RETRY),
    ("validation", RETRY, REPAIR, REPAIR),
    ("permission", RETRY, STOP, STOP),
    ("not_found", RETRY, STOP, STOP),
    ("fatal", RETRY, STOP, STOP),
    ("unknown", RETRY, RETRY, RETRY),
])  # fmt: skip
def test_the_seed_policies_route_a_first_failure_as_the_seeds_controllers_do(cls, generic, code, envelope):
    f = failure(cls)

    assert policies.retry_every_failure(f).kind == generic
    assert policies.route_by_class(f).kind == code
    assert policies.route_by_class_with_field(f).kind == envelope


def test_only_the_envelope_policy_guides_the_repair():
    f = failure("validation")

    assert policies.route_by_class(f) == Move(REPAIR, hinted=False)
    assert policies.route_by_class_with_field(f) == Move(REPAIR, hinted=True)


def test_as_sent_routes_only_what_the_contract_lets_a_controller_tell_apart():
    assert policies.as_sent(failure("permission")).kind == RETRY  # nothing stated: blind
    assert policies.as_sent(failure("permission", retryable_stated=True)).kind == STOP
    assert policies.as_sent(failure("validation", retryable_stated=True)).kind == STOP  # not retryable, no field
    assert policies.as_sent(failure("validation", explicit_class=True)) == Move(REPAIR, hinted=False)
    guided = failure("validation", explicit_class=True, field_named=True, suggestion=True)
    assert policies.as_sent(guided) == Move(REPAIR, hinted=True)


def test_wilson_intervals_hold_the_share_and_stay_inside_zero_and_one():
    low, high = estimate.wilson(70, 100)
    assert low < 0.70 < high
    assert (round(low, 3), round(high, 3)) == (0.604, 0.781)
    assert estimate.wilson(0, 20)[0] == 0.0 and estimate.wilson(20, 20)[1] == 1.0


def test_an_estimate_comes_from_the_tool_then_the_project_then_the_seeds_assumption():
    evidence = {
        ("a", "transient", RETRY, False): [18, 20],
        ("b", "transient", RETRY, False): [1, 5],  # too thin alone
        ("b", "validation", REPAIR, False): [3, 4],
    }
    estimates = Estimates(evidence)

    a = estimates.get("a", "transient", RETRY, False)
    assert (a.p, a.source) == (0.9, "tool")
    b = estimates.get("b", "transient", RETRY, False)
    assert (b.p, b.source, b.trials) == (19 / 25, "project", 25)
    repair = estimates.get("b", "validation", REPAIR, True)  # guided: no evidence at all
    assert (repair.p, repair.source, repair.low, repair.high) == (0.90, "assumed", 0.90, 0.90)
    assert estimates.get("b", "validation", REPAIR, False).p == 0.45  # 4 trials: assumed
    assert estimates.get("b", "not_found", RETRY, False).p == 0.0
    # A retry told to wait borrows the retries not told when it has no evidence of its own.
    assert estimates.get("a", "transient", RETRY, True).source == "tool"


def _traffic(first_ok: int, failures: dict[Failure, int]) -> traffic.ToolTraffic:
    t = traffic.ToolTraffic(calls=first_ok + sum(failures.values()), first_ok=first_ok, failures=Counter(failures))
    t.observed.calls = t.calls
    t.observed.resolved = first_ok
    t.observed.attempts = t.calls
    return t


def test_the_expectations_are_the_seeds_closed_form_on_its_failure_mix():
    # 600 ok, 100 of each failing class: the seed's 40 % failures, evenly split.
    mix = {failure(cls): 100 for cls in ("transient", "validation", "permission", "not_found")}
    estimates = Estimates({})

    generic = simulate.figures(simulate.expect(_traffic(600, mix), policies.retry_every_failure, estimates),
                               simulate.observed_expectation(_traffic(600, mix)))  # fmt: skip
    envelope = simulate.expect(_traffic(600, mix), policies.route_by_class_with_field, estimates)

    assert generic["resolution_rate"]["value"] == pytest.approx(0.67)
    assert generic["attempts_per_call"]["value"] == pytest.approx(1.4)
    assert generic["failed_retries"]["value"] == pytest.approx(330)
    assert generic["wasted_retries"]["value"] == 200
    assert generic["resolution_rate"]["delta"] == pytest.approx(0.07)
    assert envelope.resolved.mean == pytest.approx(600 + 70 + 90)
    assert envelope.attempts.mean == 1200 and envelope.wasted_retries.mean == 0
    # Assumed probabilities: only the calls' own binomial spread, sum of n p (1 - p).
    assert envelope.resolved.half_width({}) == pytest.approx(1.96 * math.sqrt(100 * 0.7 * 0.3 + 100 * 0.9 * 0.1))


def test_calls_sharing_an_estimate_share_its_error():
    f = failure("transient")
    estimates = Estimates({("t", "transient", RETRY, False): [70, 100]})

    result = simulate.expect(_traffic(0, {f: 1000}), policies.retry_every_failure, estimates)

    se = estimates.get("t", "transient", RETRY, False).se
    expected = 1.96 * math.sqrt((1000 * se) ** 2 + 1000 * 0.7 * 0.3)
    assert result.resolved.half_width(result.se) == pytest.approx(expected)
    assert result.moved_on_data == 1000


def test_fixes_rank_stating_the_class_first_on_generic_failures_and_say_what_a_week_saves():
    mix = {failure(cls): 100 for cls in ("transient", "validation", "permission", "not_found")}
    ranked = fixes.rank_fixes("t", _traffic(600, mix), Estimates({}), range_seconds=86400)

    assert [fix["fix"] for fix in ranked][0] == "explicit_class"
    top = ranked[0]
    assert top["wasted_retries"] == -200 and top["per_week"]["wasted_retries"] == -1400
    assert top["resolved"] == pytest.approx(45)  # validation repaired (45 %) instead of blindly retried
    # retry_after changes nothing when the seed's assumption is all there is.
    assert "retry_after" not in {fix["fix"] for fix in ranked}


def test_naming_the_field_is_worth_the_difference_between_a_guided_and_an_unguided_repair():
    routed = failure("validation", explicit_class=True)
    (fix,) = fixes.rank_fixes("t", _traffic(0, {routed: 200}), Estimates({}), range_seconds=7 * 86400)

    assert fix["fix"] == "field_named"
    assert fix["resolved"] == pytest.approx(200 * (0.90 - 0.45))
    assert fix["failed_retries"] == pytest.approx(-200 * (0.90 - 0.45))


def _attempt(span: str, *, ok: bool, start_s: int, cls: str = "", args: str = "h1", call: str = "c1", n: int = 1, **contract):
    return Attempt(trace_id="tr", span_id=span, tool="t", start=T0 + dt.timedelta(seconds=start_s), ok=ok,
                   error_class=cls, call_id=call, attempt=n, arguments_hash=args,
                   contract=None if ok else {"explicit_class": True, **contract})  # fmt: skip


def test_traffic_reads_each_calls_first_failure_and_what_followed_it():
    calls = link_attempts([
        _attempt("a1", ok=False, start_s=0, cls="transient", retry_after=True),
        _attempt("a2", ok=True, start_s=1, n=2),
        _attempt("b1", ok=False, start_s=2, cls="validation", call="c2", field_named=True, suggestion=True),
        _attempt("b2", ok=False, start_s=3, cls="validation", call="c2", args="h2", n=2),
        _attempt("c1", ok=True, start_s=4, call="c3"),
    ])  # fmt: skip

    (summary,) = traffic.summarise(calls).values()

    assert (summary.calls, summary.first_ok) == (3, 1)
    assert summary.evidence == {("t", "transient", RETRY, True): [1, 1], ("t", "validation", REPAIR, True): [0, 1]}
    assert {f.observed for f in summary.failures} == {Move(RETRY, True), Move(REPAIR, True)}
    assert summary.observed.failed_retries == 1


def test_a_report_for_one_tool_borrows_the_projects_evidence():
    many = {Failure(tool="big", error_class="transient", observed=Move(RETRY)): 50}
    big = _traffic(0, many)
    big.evidence = {("big", "transient", RETRY, False): [10, 50]}
    small = _traffic(5, {Failure(tool="small", error_class="transient"): 5})

    report = build_report({"big": big, "small": small}, tool="small", range_seconds=3600)

    used = {(row["tool"], row["error_class"], row["move"], row["hinted"]): row for row in report["estimates"]}
    assert {key[0] for key in used} == {"small"}
    assert (used["small", "transient", RETRY, False]["source"], used["small", "transient", RETRY, False]["p"]) == ("project", 0.2)
    assert report["policies"]["retry_every_failure"]["resolved"] == pytest.approx(5 + 5 * 0.2)
    assert "tools" not in report
