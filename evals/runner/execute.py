"""Call each case's tool with its arguments, under a timeout, and judge the outcome.

Every call runs in its own daemon thread: a sync tool that hangs is abandoned there (a
thread cannot be killed; being daemonic it never holds up the exit) and the run goes
on. An awaitable (an `async def` tool) is driven in a fresh event loop inside that thread
with `asyncio.wait_for`, so it is cancelled cleanly at the deadline.

A tool that raises has an *observed failure*, judged like a failing span. Only what stops
the runner from judging at all is an `error` result: an unknown tool, a timeout, a line
that did not load.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from evals.judge import judge, observe
from evals.runner.loader import Case, LoadProblem
from evals.runner.registry import Registry

PASSED, FAILED, ERROR = "passed", "failed", "error"
# An async tool is cancelled at its deadline; this is how long its thread then has to finish.
_CANCEL_GRACE_S = 1.0


@dataclass(slots=True)
class CallOutcome:
    value: Any = None
    exception: BaseException | None = None
    timed_out: bool = False
    duration_ms: int = 0


@dataclass(slots=True)
class CaseResult:
    """The result of one case (or of one line that did not load)."""

    label: str  # "case 12 v3", or "line 4" for a line without a case id
    tool: str
    status: str  # passed, failed, error
    reasons: list[str] = field(default_factory=list)
    case_id: int | None = None
    version: int | None = None
    content_hash: str = ""
    title: str = ""
    observed: dict[str, Any] | None = None
    duration_ms: int = 0
    postable: bool = True  # False: the server could not recognise the case (see LoadProblem)

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label, "tool": self.tool, "title": self.title, "status": self.status,
            "reasons": self.reasons, "case_id": self.case_id, "version": self.version,
            "content_hash": self.content_hash, "observed": self.observed, "duration_ms": self.duration_ms,
        }  # fmt: skip


def call_args(arguments: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, kwargs): an object → keyword arguments, a list → positional, null → none,
    anything else → one argument."""
    if arguments is None:
        return (), {}
    if isinstance(arguments, dict):
        return (), dict(arguments)
    if isinstance(arguments, list):
        return tuple(arguments), {}
    return (arguments,), {}


def call_tool(fn: Callable[..., Any], arguments: Any, timeout_s: float) -> CallOutcome:
    """Call `fn` with `arguments`; its value or exception, or `timed_out` after `timeout_s`."""
    args, kwargs = call_args(arguments)
    outcome = CallOutcome()
    is_async = inspect.iscoroutinefunction(fn)

    def work() -> None:
        try:
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = asyncio.run(_settle(value, timeout_s, outcome))
            outcome.value = value
        except BaseException as exc:  # noqa: BLE001 - whatever the tool raises is its observed failure
            outcome.exception = exc

    started = time.perf_counter()
    worker = threading.Thread(target=work, name=f"toolwatch-eval-{getattr(fn, '__name__', 'tool')}", daemon=True)
    worker.start()
    worker.join(timeout_s + (_CANCEL_GRACE_S if is_async else 0))
    outcome.duration_ms = round((time.perf_counter() - started) * 1000)
    if worker.is_alive():
        outcome.timed_out = True
        outcome.value = outcome.exception = None
    return outcome


async def _settle(awaitable: Any, timeout_s: float, outcome: CallOutcome) -> Any:
    """Await with `asyncio.wait_for`. The tool's own exceptions (a TimeoutError among them)
    are caught inside, so a TimeoutError out of wait_for is always the runner's deadline."""

    async def caught() -> tuple[Any, BaseException | None]:
        try:
            return await awaitable, None
        except Exception as exc:  # noqa: BLE001 - the tool's failure, judged later
            return None, exc

    try:
        value, exception = await asyncio.wait_for(caught(), timeout_s)
    except TimeoutError:
        outcome.timed_out = True
        return None
    if exception is not None:
        raise exception
    return value


def run_case(case: Case, registry: Registry, *, timeout_s: float | None = None) -> CaseResult:
    """Run one case: call its tool and judge what happened against its expectation."""
    result = CaseResult(
        label=case.label, tool=case.tool, status=ERROR, case_id=case.case_id, version=case.version,
        content_hash=case.content_hash, title=case.title,
    )  # fmt: skip
    fn = registry.get(case.tool)
    if fn is None:
        result.reasons = [registry.missing(case.tool)]
        return result
    limit = timeout_s if timeout_s is not None else case.timeout_s
    outcome = call_tool(fn, case.arguments, limit)
    result.duration_ms = outcome.duration_ms
    if outcome.timed_out:
        result.reasons = [f"timed out after {limit:g} s"]
        return result
    try:
        if outcome.exception is not None:
            result.observed = observe(case.tool, case.arguments, exception=outcome.exception)
        else:
            result.observed = observe(case.tool, case.arguments, result=outcome.value)
    except Exception as exc:  # noqa: BLE001 - a defect in judging must not end the run
        result.reasons = [f"could not judge the outcome: {type(exc).__name__}: {exc}"]
        return result
    verdict = judge(case.expect, result.observed)
    result.status, result.reasons = verdict.status, list(verdict.reasons)
    return result


def problem_result(problem: LoadProblem) -> CaseResult:
    return CaseResult(
        label=problem.label, tool=problem.tool, status=ERROR, reasons=[problem.message],
        case_id=problem.case_id, version=problem.version, content_hash=problem.content_hash,
        postable=problem.postable,
    )  # fmt: skip


def run_all(
    loaded: Iterable[Case | LoadProblem],
    registry: Registry,
    *,
    timeout_s: float | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Every case's result, in order; `on_result` sees each as soon as it is known."""
    results = []
    for item in loaded:
        if isinstance(item, LoadProblem):
            result = problem_result(item)
        else:
            result = run_case(item, registry, timeout_s=timeout_s)
        results.append(result)
        if on_result:
            on_result(result)
    return results


def exit_code(results: Iterable[CaseResult]) -> int:
    """0 when every case passed, 1 when any failed, 2 when any could not be judged."""
    statuses = {result.status for result in results}
    return 2 if ERROR in statuses else 1 if FAILED in statuses else 0
