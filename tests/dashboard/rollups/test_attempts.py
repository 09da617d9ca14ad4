import datetime as dt
import random

import pytest

from dashboard.rollups.attempts import Attempt, link_attempts, totals

T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


def attempt(span: str, seconds: float, *, trace: str = "t1", tool: str = "lookup", ok: bool = True, **fields) -> Attempt:
    return Attempt(trace_id=trace, span_id=span, tool=tool, start=T0 + dt.timedelta(seconds=seconds), ok=ok, **fields)


def shapes(calls) -> list[list[str]]:
    return [[a.span_id for a in call.attempts] for call in calls]


def test_attempts_sharing_a_call_id_are_one_call_whose_outcome_is_the_last():
    calls = link_attempts([
        attempt("a", 0, call_id="c1", ok=False, error_class="transient"),
        attempt("b", 2, call_id="c1", ok=True),
    ])  # fmt: skip

    assert shapes(calls) == [["a", "b"]]
    assert calls[0].ok and calls[0].retries == 1 and calls[0].failed_retries == 0


def test_explicit_attempt_numbers_mark_retries():
    calls = link_attempts([
        attempt("a", 0, attempt=1, ok=False, error_class="transient"),
        attempt("b", 1, attempt=2, ok=False, error_class="transient"),
        attempt("c", 3, attempt=1),
    ])  # fmt: skip

    assert shapes(calls) == [["a", "b"], ["c"]]
    assert calls[0].failed_retries == 1 and not calls[0].ok


def test_a_resend_count_marks_a_retry():
    calls = link_attempts([attempt("a", 0, ok=False, error_class="transient", arguments_hash="x", call_id="c1"),
                           attempt("b", 1, resend_count=1, arguments_hash="y", call_id="c2")])  # fmt: skip

    assert shapes(calls) == [["a", "b"]]


def test_the_same_arguments_after_a_failure_are_a_retry_even_under_a_new_call_id():
    calls = link_attempts([
        attempt("a", 0, call_id="c1", arguments_hash="h1", ok=False, error_class="not_found"),
        attempt("b", 1, call_id="c2", arguments_hash="h1", ok=False, error_class="not_found"),
    ])  # fmt: skip

    assert shapes(calls) == [["a", "b"]]
    assert totals(calls).wasted_retries == 1


def test_changed_arguments_or_a_success_before_start_a_new_call():
    calls = link_attempts([
        attempt("a", 0, call_id="c1", arguments_hash="h1", ok=False, error_class="transient"),
        attempt("b", 1, call_id="c2", arguments_hash="h2"),
        attempt("c", 2, call_id="c3", arguments_hash="h2"),
    ])  # fmt: skip

    assert shapes(calls) == [["a"], ["b"], ["c"]]


def test_other_tools_and_other_traces_never_link():
    calls = link_attempts([
        attempt("a", 0, ok=False, error_class="transient"),
        attempt("b", 1, tool="search"),
        attempt("c", 2, trace="t2"),
    ])  # fmt: skip

    assert len(calls) == 3


def test_retrying_a_permanent_failure_is_wasted_and_a_blind_validation_retry_is_counted_apart():
    calls = link_attempts([
        attempt("a", 0, call_id="p", ok=False, error_class="permission", tool="pay"),
        attempt("b", 1, call_id="p", ok=False, error_class="permission", tool="pay"),
        attempt("c", 0, call_id="v", ok=False, error_class="validation", arguments_hash="same", tool="edit"),
        attempt("d", 1, call_id="v", ok=False, error_class="validation", arguments_hash="same", tool="edit"),
        attempt("e", 0, call_id="r", ok=False, error_class="validation", arguments_hash="old", tool="fix"),
        attempt("f", 1, call_id="r", ok=True, arguments_hash="repaired", tool="fix"),
    ])  # fmt: skip

    result = totals(calls)

    assert (result.calls, result.attempts, result.retries) == (3, 6, 3)
    assert (result.wasted_retries, result.blind_retries, result.failed_retries) == (1, 1, 2)
    assert (result.errors, result.resolved) == (2, 1)
    assert result.errors_by_class == {"permission": 1, "validation": 1}


def test_a_call_is_escalated_when_any_attempt_was():
    calls = link_attempts([attempt("a", 0, call_id="c", ok=False, error_class="business"),
                           attempt("b", 1, call_id="c", ok=False, error_class="business", escalated=True)])  # fmt: skip

    assert totals(calls).escalations == 1
    assert totals(calls).escalation_rate == 1.0


def test_rates_are_derived_from_the_counts():
    calls = link_attempts([
        attempt("a", 0, call_id="1", ok=False, error_class="transient"), attempt("b", 1, call_id="1"),
        attempt("c", 5, call_id="2"),
    ])  # fmt: skip
    result = totals(calls)

    assert (result.error_rate, result.retry_rate, result.resolution_rate, result.attempts_per_call) == (0.0, 0.5, 1.0, 1.5)
    assert totals([]).error_rate is None


@pytest.mark.parametrize("seed", range(20))
def test_linking_does_not_depend_on_arrival_order(seed):
    rng = random.Random(seed)
    attempts = []
    for trace in range(5):
        for n in range(6):
            attempts.append(attempt(
                f"{trace}-{n}", n, trace=f"t{trace}", tool=rng.choice(["a", "b"]), ok=rng.random() < 0.5,
                error_class=rng.choice(["transient", "validation", "permission"]), arguments_hash=rng.choice(["x", "y"]),
                call_id=rng.choice(["", "c1", "c2"]), attempt=rng.choice([None, 1, 2]),
            ))  # fmt: skip
    expected = shapes(link_attempts(attempts))

    shuffled = attempts[:]
    rng.shuffle(shuffled)

    assert shapes(link_attempts(shuffled)) == expected
