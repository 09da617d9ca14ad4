"""`toolwatch-evals` / `python -m evals.runner`: run eval cases against the user's tools, print, optionally post.

Exit codes: 0 every case passed; 1 a case failed; 2 a case could not be judged (or the
runner could not start: bad flags, a module that does not import, cases that cannot be
fetched); 3 the run could not be posted (the local results are still printed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TextIO

from evals.runner import __version__, loader
from evals.runner.client import CONTRACT_VERSION, Client, ClientError, run_payload
from evals.runner.execute import ERROR, FAILED, PASSED, CaseResult, exit_code, run_all
from evals.runner.registry import RegistryError, load_registry

EXIT_SETUP = 2
EXIT_NOT_POSTED = 3
_STATUS_WORDS = {PASSED: "PASS ", FAILED: "FAIL ", ERROR: "ERROR"}
# The distribution (toolwatch-runner) ships this module as toolwatch_runner.cli, run as its
# console script; in a Toolwatch checkout it is run with `python -m`.
PROG = "toolwatch-evals" if __name__.startswith("toolwatch_runner.") else "python -m evals.runner"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run Toolwatch eval cases against your own tool functions and judge them "
        "with Toolwatch's classifier. Exit 0: all passed; 1: a case failed; 2: a case could not "
        "be judged or the runner could not start; 3: the run could not be posted.",
    )
    arg = parser.add_argument
    arg("--cases", metavar="FILE",
        help="a JSONL export of eval cases ('-' for standard input); without it they are fetched from --url")
    arg("--url", default=os.environ.get("TOOLWATCH_URL", ""),
        help="Toolwatch's base URL, e.g. https://toolwatch.example.com (default: $TOOLWATCH_URL)")
    arg("--project", default=os.environ.get("TOOLWATCH_PROJECT", ""), help="the project slug (default: $TOOLWATCH_PROJECT)")
    arg("--token", default=None, help="a personal API token (default: $TOOLWATCH_TOKEN)")
    arg("--tag", default="", help="with --url: only cases with this tag")
    arg("--tools", required=True, metavar="MODULE:ATTR",
        help="a mapping of tool names to callables, e.g. my_agent.tools:TOOLS")
    arg("--timeout", type=_positive_float, metavar="SECONDS", help="override every case's timeout_s")
    arg("--post", action="store_true", help="post the run to Toolwatch (needs --url, --project and a token)")
    arg("--label", default="", help="the run's label (default: git:<short sha>, else a timestamp)")
    arg("--json", metavar="FILE", dest="json_path",
        help="also write the results as JSON ('-' for standard output)")
    arg("--quiet", action="store_true", help="print only failures, errors and the tally")
    arg("--version", action="version", version=f"%(prog)s {__version__} (REST contract {CONTRACT_VERSION})")
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    token = args.token if args.token is not None else os.environ.get("TOOLWATCH_TOKEN", "")

    problem = _setup_problem(args, token)
    if problem:
        print(f"error: {problem}", file=err)
        return EXIT_SETUP
    try:
        registry = load_registry(args.tools)
    except RegistryError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_SETUP
    client = Client(args.url, token) if args.url else None
    try:
        loaded = _load(args, client)
    except (OSError, ClientError) as exc:
        print(f"error: cannot load the cases: {exc}", file=err)
        return EXIT_SETUP

    started_at = datetime.now(UTC)
    report = out if args.json_path != "-" else err  # keep standard output pure JSON then
    results = run_all(
        loaded, registry, timeout_s=args.timeout, on_result=lambda result: _print_result(result, report, args.quiet)
    )
    finished_at = datetime.now(UTC)
    print(tally(results, (finished_at - started_at).total_seconds()), file=report)
    code = exit_code(results)

    if args.json_path:
        _write_json(args.json_path, results, out)
    if args.post:
        assert client is not None
        default, git_sha = default_label(started_at)
        label = args.label or default
        payload = run_payload(results, label=label, git_sha=git_sha, started_at=started_at, finished_at=finished_at)
        try:
            answer = client.post_run(args.project, payload)
        except ClientError as exc:
            print(f"error: the run was not posted: {exc}", file=err)
            return EXIT_NOT_POSTED
        print(describe_answer(answer, client.base_url, skipped=len(results) - len(payload["results"])), file=report)
    return code


def _setup_problem(args: argparse.Namespace, token: str) -> str:
    if not (args.cases or args.url):
        return "give the cases with --cases FILE, or fetch them with --url, --project and a token"
    if args.url and not args.project:
        return "--url needs --project (or $TOOLWATCH_PROJECT)"
    if args.post and not (args.url and args.project):
        return "--post needs --url and --project (or $TOOLWATCH_URL, $TOOLWATCH_PROJECT)"
    if (args.post or not args.cases) and not token:
        return "a token is needed: --token or $TOOLWATCH_TOKEN (a personal API token)"
    return ""


def _load(args: argparse.Namespace, client: Client | None) -> list:
    if args.cases == "-":
        return loader.parse_lines(sys.stdin, source="<stdin>")
    if args.cases:
        return loader.load_file(args.cases)
    assert client is not None
    text = client.fetch_cases(args.project, tag=args.tag)
    return loader.parse_text(text, source=f"{args.project} export")


def format_result(result: CaseResult) -> str:
    """One line per case: status, case id/version, tool, and the reasons."""
    head = f"{_STATUS_WORDS[result.status]} {result.label:<14} {result.tool or '?'}"
    if result.title:
        head += f" ({result.title})"
    if result.status == PASSED:
        return f"{head}  {result.duration_ms} ms"
    return head + "".join(f"\n        - {reason}" for reason in result.reasons)


def _print_result(result: CaseResult, out: TextIO, quiet: bool) -> None:
    if not (quiet and result.status == PASSED):
        print(format_result(result), file=out, flush=True)


def tally(results: Sequence[CaseResult], seconds: float) -> str:
    counts = Counter(result.status for result in results)
    return (
        f"{len(results)} case{'s' if len(results) != 1 else ''}: {counts[PASSED]} passed, "
        f"{counts[FAILED]} failed, {counts[ERROR]} error{'s' if counts[ERROR] != 1 else ''} in {seconds:.2f} s"
    )


def describe_answer(answer: dict, base_url: str, *, skipped: int = 0) -> str:
    """The server's answer to a posted run, in a line or two."""
    link = answer.get("url") or ""
    if link.startswith("/"):
        link = base_url + link
    line = (
        f"posted run {answer.get('id', '?')}: {answer.get('passed', '?')} passed, "
        f"{answer.get('failed', '?')} failed, {answer.get('errors', '?')} errors"
    )
    regressions = answer.get("regressions") or []
    line += f"; regressions: {', '.join(f'case {r}' for r in regressions)}" if regressions else "; no regressions"
    if skipped:
        line += f"\n{skipped} result{'s' if skipped != 1 else ''} not posted (no case the server would recognise)"
    return line + (f"\n{link}" if link else "")


def default_label(now: datetime) -> tuple[str, str | None]:
    """("git:<short sha>", full sha) in a git checkout (or with $GITHUB_SHA), else a timestamp."""
    sha = _git("rev-parse", "HEAD") or os.environ.get("GITHUB_SHA", "").strip()
    if sha:
        return f"git:{sha[:7]}", sha
    return f"run {now.strftime('%Y-%m-%d %H:%M:%S')} UTC", None


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _write_json(path: str, results: Sequence[CaseResult], out: TextIO) -> None:
    document = {"results": [result.as_dict() for result in results], "exit_code": exit_code(results)}
    text = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    if path == "-":
        print(text, file=out)
    else:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text}")
    return value
