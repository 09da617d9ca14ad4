"""`python -m evals.runner`: output, --json, exit codes, and standing alone without Django."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evals.runner import cli
from tests.evals.sample_tools import case_line, flights_cases

REPO = Path(__file__).resolve().parents[2]
FIXED = "tests.evals.sample_tools.flights_fixed:TOOLS"
BROKEN = "tests.evals.sample_tools.flights_broken:TOOLS"
MISC = "tests.evals.sample_tools.misc:TOOLS"
HOSTILE = "<script>alert(1)</script><b>x</b>"


@pytest.fixture
def cases_file(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in flights_cases()) + "\n", encoding="utf-8")
    return path


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def without_django_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(REPO)
    return env


def test_all_passing_cases_print_a_line_each_and_exit_0(cases_file):
    code, out, err = run_cli("--cases", str(cases_file), "--tools", FIXED)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("PASS  case 1 v2      search_flights (search_flights case 1)")
    assert lines[1].startswith("PASS  case 2 v1      search_flights")
    assert lines[2].startswith("2 cases: 2 passed, 0 failed, 0 errors in ")


def test_failing_cases_print_their_reasons_and_exit_1(cases_file):
    code, out, _ = run_cli("--cases", str(cases_file), "--tools", BROKEN)
    assert code == 1
    assert "FAIL  case 2 v1      search_flights (search_flights case 2)\n" in out
    assert "        - expected success, got transient: flight search upstream timed out after 30 s\n" in out
    assert "2 cases: 0 passed, 2 failed, 0 errors" in out


def test_a_case_that_cannot_be_judged_exits_2_and_the_others_still_run(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join([case_line(1, "ping"), "{oops", case_line(3, "teleport"), case_line(4, "ping")]), encoding="utf-8")
    code, out, _ = run_cli("--cases", str(path), "--tools", MISC)
    assert code == 2
    assert f"ERROR line 2         ?\n        - {path} line 2: not valid JSON" in out
    assert "ERROR case 3 v1      teleport (teleport case 3)\n        - no tool named 'teleport' in " in out
    assert "4 cases: 2 passed, 0 failed, 2 errors" in out


def test_quiet_prints_only_what_did_not_pass(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join([case_line(1, "ping"), case_line(2, "raises_timeout")]), encoding="utf-8")
    code, out, _ = run_cli("--cases", str(path), "--tools", MISC, "--quiet")
    assert code == 1
    assert "case 1 v1" not in out and "FAIL  case 2 v1" in out


def test_json_results_go_to_a_file(cases_file, tmp_path):
    target = tmp_path / "results.json"
    run_cli("--cases", str(cases_file), "--tools", BROKEN, "--json", str(target))
    document = json.loads(target.read_text(encoding="utf-8"))
    assert document["exit_code"] == 1
    first = document["results"][0]
    assert (first["case_id"], first["version"], first["status"], first["tool"]) == (1, 2, "failed", "search_flights")
    assert first["observed"]["error_class"] == "unknown"


def test_json_to_standard_output_keeps_it_pure_json(cases_file):
    code, out, err = run_cli("--cases", str(cases_file), "--tools", FIXED, "--json", "-")
    assert code == 0
    assert [r["status"] for r in json.loads(out)["results"]] == ["passed", "passed"]
    assert "2 cases: 2 passed" in err


def test_hostile_strings_are_printed_as_they_are(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text(case_line(1, "hostile"), encoding="utf-8")
    _, out, _ = run_cli("--cases", str(path), "--tools", MISC)
    assert f"expected success, got validation: {HOSTILE}" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--tools", FIXED], "error: give the cases with --cases FILE, or fetch them with --url"),
        (["--cases", "missing.jsonl", "--tools", FIXED], "error: cannot load the cases: [Errno 2] No such file"),
        (["--cases", "x.jsonl", "--tools", "nope_module:TOOLS"], "error: cannot import 'nope_module'"),
        (["--cases", "x.jsonl", "--tools", FIXED, "--post"], "error: --post needs --url and --project"),
        (["--url", "http://127.0.0.1:9", "--tools", FIXED], "error: --url needs --project"),
        (["--url", "http://127.0.0.1:9", "--project", "shop", "--tools", FIXED], "error: a token is needed"),
    ],
)
def test_a_run_that_cannot_start_says_why_and_exits_2(argv, words, monkeypatch):
    for name in ("TOOLWATCH_TOKEN", "TOOLWATCH_URL", "TOOLWATCH_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    code, _, err = run_cli(*argv)
    assert code == 2
    assert words in err


def test_a_bad_timeout_flag_is_refused_by_name():
    with pytest.raises(SystemExit) as caught:
        run_cli("--cases", "x", "--tools", FIXED, "--timeout", "0")
    assert caught.value.code == 2


def test_the_runner_imports_nothing_of_django():
    modules = ", ".join(
        f"evals.runner.{name}" for name in ("cli", "loader", "registry", "execute", "client", "pytest_plugin")
    )
    code = (
        f"import sys, evals.expectations, evals.judge, {modules}\n"
        "leaked = sorted(m for m in sys.modules if m == 'django' or m.startswith(('django.', 'rest_framework')))\n"
        "print(leaked)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=without_django_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("tools", "expected_code"), [(FIXED, 0), (BROKEN, 1)])
def test_python_dash_m_runs_from_a_checkout_without_django(cases_file, tools, expected_code):
    # A whole run, judging included, then a look at what it imported.
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['evals.runner', '--cases', {str(cases_file)!r}, '--tools', {tools!r}]\n"
        "try:\n    runpy.run_module('evals.runner', run_name='__main__')\n"
        "except SystemExit as exit:\n    status = exit.code\n"
        "print('django loaded:', 'django' in sys.modules)\n"
        "sys.exit(status)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=without_django_env(), capture_output=True, text=True)
    assert done.returncode == expected_code, done.stderr
    assert "django loaded: False" in done.stdout
    assert "2 cases:" in done.stdout


def test_python_dash_m_evals_runner_is_the_entry_point(cases_file):
    done = subprocess.run(
        [sys.executable, "-m", "evals.runner", "--cases", str(cases_file), "--tools", FIXED],
        cwd=REPO, env=without_django_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 cases: 2 passed, 0 failed, 0 errors" in done.stdout


def test_cases_can_be_piped_in_on_standard_input(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(case_line(1, "ping") + "\n"))
    code, out, _ = run_cli("--cases", "-", "--tools", MISC)
    assert code == 0
    assert "1 case: 1 passed, 0 failed, 0 errors" in out


def test_the_version_names_the_runner_and_its_rest_contract(capsys):
    with pytest.raises(SystemExit) as caught:
        cli.main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out.strip() == "python -m evals.runner 1.0.0 (REST contract 1)"
