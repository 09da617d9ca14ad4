"""evals.runner.execute and registry: calling the user's tools, with timeouts, and judging them."""

from __future__ import annotations

import json
import time

import pytest

from evals.runner.execute import call_args, call_tool, exit_code, run_all, run_case
from evals.runner.loader import Case, parse_text
from evals.runner.registry import RegistryError, load_registry
from tests.evals.sample_tools import BAD_DATE_EXPECT, flights_cases

FIXED = "tests.evals.sample_tools.flights_fixed:TOOLS"
BROKEN = "tests.evals.sample_tools.flights_broken:TOOLS"
MISC = "tests.evals.sample_tools.misc:TOOLS"


def make_case(tool: str, arguments=None, expect=None, *, timeout_s: float = 5) -> Case:
    return Case(
        line=1, case_id=1, version=1, content_hash="sha256:" + "0" * 64, tool=tool, arguments=arguments,
        expect=expect or {"outcome": "success"}, timeout_s=timeout_s,
    )  # fmt: skip


@pytest.fixture(scope="module")
def misc():
    return load_registry(MISC)


def run_flights(spec: str):
    text = "\n".join(json.dumps(c) for c in flights_cases())
    return run_all(parse_text(text), load_registry(spec))


# --- the bug fixed, the bug back ----------------------------------------------------------------


def test_with_the_bug_fixed_every_case_passes():
    results = run_flights(FIXED)
    assert [(r.label, r.status, r.reasons) for r in results] == [("case 1 v2", "passed", []), ("case 2 v1", "passed", [])]
    assert exit_code(results) == 0


def test_with_the_bug_back_every_case_fails_with_its_reasons():
    first, second = run_flights(BROKEN)
    assert first.status == "failed"
    assert first.reasons[0] == "expected class validation, got unknown: Something went wrong"
    assert first.observed["error_class"] == "unknown"
    assert (second.status, second.reasons) == (
        "failed", ["expected success, got transient: flight search upstream timed out after 30 s"],
    )  # fmt: skip
    assert exit_code([first, second]) == 1


# --- calling ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"a": 1}, ((), {"a": 1})),
        ([1, 2], ((1, 2), {})),
        ("text", (("text",), {})),
        (3, ((3,), {})),
        (None, ((), {})),
    ],
)
def test_arguments_become_keyword_positional_single_or_no_arguments(arguments, expected):
    assert call_args(arguments) == expected


def test_each_shape_of_arguments_reaches_the_tool(misc):
    assert call_tool(misc.get("add"), {"a": 2, "b": 3}, 5).value == 5
    assert call_tool(misc.get("add"), [2, 3], 5).value == 5
    assert call_tool(misc.get("echo"), "hi", 5).value == {"echo": "hi"}
    assert call_tool(misc.get("ping"), None, 5).value == "pong"


def test_arguments_the_tool_does_not_take_are_an_observed_validation_failure(misc):
    result = run_case(make_case("ping", {"unexpected": 1}), misc)
    assert result.status == "failed"
    assert result.observed["error_class"] == "validation"  # a TypeError, as the live span would show


def test_a_tool_that_raises_is_an_observed_failure_not_a_runner_error(misc):
    result = run_case(make_case("raises_permission", expect={"outcome": "error", "error_class": "permission"}), misc)
    assert (result.status, result.observed["error_class"]) == ("passed", "permission")
    assert result.observed["message"] == "token lacks the flights:read scope"


def test_a_tool_raising_its_own_timeout_error_is_judged_not_timed_out(misc):
    result = run_case(make_case("raises_timeout"), misc)
    assert result.status == "failed"
    assert result.reasons == ["expected success, got transient: upstream timed out"]


def test_async_tools_are_awaited_and_judged(misc):
    ok = run_case(make_case("async_lookup", {"order_id": "A1"}), misc)
    assert (ok.status, ok.observed["ok"]) == ("passed", True)
    missing = run_case(make_case("async_lookup", {"order_id": "missing"}, {"outcome": "error", "error_class": "not_found"}), misc)
    assert missing.status == "passed"
    raised = run_case(make_case("async_raises", {"order_id": "B2"}), misc)
    assert raised.reasons == ["expected success, got not_found: order B2 does not exist"]


# --- timeouts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["hangs", "async_hangs"])
def test_a_tool_that_hangs_is_an_error_after_its_timeout_and_the_run_goes_on(misc, tool):
    started = time.monotonic()
    results = run_all([make_case(tool, timeout_s=0.5), make_case("ping")], misc)
    elapsed = time.monotonic() - started
    assert [(r.status, r.reasons) for r in results] == [("error", ["timed out after 0.5 s"]), ("passed", [])]
    assert 0.5 <= elapsed < 2.5
    assert exit_code(results) == 2


def test_an_async_tool_that_blocks_its_event_loop_still_times_out(misc):
    started = time.monotonic()
    result = run_case(make_case("async_blocks_loop", timeout_s=0.5), misc)
    assert (result.status, result.reasons) == ("error", ["timed out after 0.5 s"])
    assert time.monotonic() - started < 2.9


def test_the_timeout_can_be_overridden_for_every_case(misc):
    result = run_case(make_case("hangs", timeout_s=60), misc, timeout_s=0.2)
    assert result.reasons == ["timed out after 0.2 s"]


# --- the registry --------------------------------------------------------------------------------------


def test_a_case_whose_tool_is_not_registered_is_an_error_listing_the_tools():
    result = run_case(make_case("book_hotel", expect=BAD_DATE_EXPECT), load_registry(FIXED))
    assert result.status == "error"
    assert result.reasons == [f"no tool named 'book_hotel' in {FIXED} (have: search_flights)"]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("tests.evals.sample_tools.misc", "--tools must look like module:ATTR"),
        ("no_such_module_here:TOOLS", "cannot import 'no_such_module_here' for --tools no_such_module_here:TOOLS: ModuleNotFoundError"),
        ("tests.evals.sample_tools.misc:NOPE", "tests.evals.sample_tools.misc has no attribute 'NOPE'"),
        ("tests.evals.sample_tools.misc:ping", "must be a mapping of tool names to callables, not function"),
        ("tests.evals.sample_tools:BAD_DATE_ARGS", "these entries are not a tool name mapped to a callable: 'origin'"),
    ],
)
def test_an_unusable_tools_spec_says_why(spec, words):
    with pytest.raises(RegistryError) as caught:
        load_registry(spec)
    assert words in str(caught.value)


def test_exit_codes_rank_errors_over_failures_over_passes():
    class R:
        def __init__(self, status):
            self.status = status

    assert exit_code([]) == 0
    assert exit_code([R("passed")]) == 0
    assert exit_code([R("passed"), R("failed")]) == 1
    assert exit_code([R("failed"), R("error")]) == 2
