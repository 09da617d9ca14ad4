"""evals.runner.pytest_plugin: each eval case a pytest item, run in a separate pytest."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.evals.sample_tools import case_line, flights_cases

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
FIXED = "tests.evals.sample_tools.flights_fixed:TOOLS"
BROKEN = "tests.evals.sample_tools.flights_broken:TOOLS"
MISC = "tests.evals.sample_tools.misc:TOOLS"


@pytest.fixture
def run(pytester, monkeypatch):
    """pytest in a subprocess with the plugin, from a directory of its own, Django left out."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)

    def run(lines: list[str], tools: str, *extra: str):
        pytester.makefile(".jsonl", cases="\n".join(lines) + "\n")
        return pytester.runpytest_subprocess(
            # no:toolwatch: the installed distribution's copy of the plugin, if any, stays out.
            "-p", "evals.runner.pytest_plugin", "-p", "no:toolwatch", "-p", "no:django", "-p", "no:cacheprovider",
            "--toolwatch-cases", "cases.jsonl", "--toolwatch-tools", tools, "-v", *extra,
        )  # fmt: skip

    return run


def flights_lines() -> list[str]:
    import json

    return [json.dumps(case) for case in flights_cases()]


def test_each_case_is_an_item_named_for_its_tool_case_and_version_and_passes_when_fixed(run):
    result = run(flights_lines(), FIXED)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*cases.jsonl::search_flights?case 1 v2? PASSED*", "*cases.jsonl::search_flights?case 2 v1? PASSED*"])


def test_a_case_whose_bug_is_back_fails_with_the_judges_reasons(run):
    result = run(flights_lines(), BROKEN)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*expected class validation, got unknown: Something went wrong*",
            "*expected next action repair, got none (recommended for unknown)*",
            "*expected success, got transient: flight search upstream timed out after 30 s*",
        ]
    )
    assert result.ret == 1


def test_cases_that_cannot_be_judged_fail_with_the_reason(run):
    result = run(["{oops", case_line(2, "teleport"), case_line(3, "hangs", timeout_s=0.5), case_line(4, "ping")], MISC)
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*could not judge: *cases.jsonl line 1: not valid JSON*",
            "*could not judge: no tool named 'teleport' in tests.evals.sample_tools.misc:TOOLS (have: *",
            "*could not judge: timed out after 0.5 s*",
        ]
    )


def test_k_selects_cases_like_any_other_test(run):
    result = run([case_line(1, "ping"), case_line(2, "raises_timeout")], MISC, "-k", "ping")
    result.assert_outcomes(passed=1, deselected=1)


def test_the_cases_option_needs_the_tools_option(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    result = pytester.runpytest_subprocess(
        "-p", "evals.runner.pytest_plugin", "-p", "no:toolwatch", "-p", "no:django", "--toolwatch-cases", "x.jsonl"
    )  # fmt: skip
    result.stderr.fnmatch_lines(["*--toolwatch-cases needs --toolwatch-tools MODULE:ATTR*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_an_unusable_tools_module_is_a_usage_error(run):
    result = run([case_line(1, "ping")], "nope_module:TOOLS")
    result.stderr.fnmatch_lines(["*cannot import 'nope_module'*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_run_that_does_not_use_the_options_is_left_alone(pytester, monkeypatch):
    # The installed distribution loads the plugin into every pytest run of its environment.
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "-p", "evals.runner.pytest_plugin", "-p", "no:toolwatch", "-p", "no:django", "-p", "no:cacheprovider", "-v"
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*collected 1 item", "*test_plain.py::test_plain PASSED*"])
