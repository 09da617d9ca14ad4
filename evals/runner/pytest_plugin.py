"""Each eval case as a pytest item:

    pytest --toolwatch-cases cases.jsonl --toolwatch-tools my_agent.tools:TOOLS

with toolwatch-runner installed (its `pytest11` entry point `toolwatch` loads this plugin;
`-p no:toolwatch` leaves it out), or from a Toolwatch checkout with `-p evals.runner.pytest_plugin`.
Loaded into every pytest run of an environment that has the distribution, it does nothing
but add its options until `--toolwatch-cases` is given.

An item is named `<tool>[case <id> v<version>]` (a line that did not load: `line <n>`), passes
when the judge passes the case and fails with its reasons otherwise; a case that could not
be judged (unknown tool, timeout, bad line) fails with that reason. The items join whatever
else pytest collected, so `-k`, `-x` and the usual reports apply.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.runner import loader
from evals.runner.execute import ERROR, PASSED, problem_result, run_case
from evals.runner.registry import Registry, RegistryError, load_registry


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("toolwatch", "Toolwatch eval cases")
    group.addoption("--toolwatch-cases", metavar="FILE", help="run the eval cases of this JSONL export as tests")
    group.addoption(
        "--toolwatch-tools", metavar="MODULE:ATTR", help="the tools the cases call, e.g. my_agent.tools:TOOLS"
    )
    group.addoption("--toolwatch-timeout", type=float, metavar="SECONDS", help="override every case's timeout_s")


def pytest_configure(config: pytest.Config) -> None:
    cases, tools = config.getoption("toolwatch_cases"), config.getoption("toolwatch_tools")
    if cases and not tools:
        raise pytest.UsageError("--toolwatch-cases needs --toolwatch-tools MODULE:ATTR (the tools the cases call)")
    if tools and not cases:
        raise pytest.UsageError("--toolwatch-tools needs --toolwatch-cases FILE (a JSONL export of eval cases)")


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect, so they apply to the cases too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    path = config.getoption("toolwatch_cases")
    if not path:
        return
    try:
        registry = load_registry(config.getoption("toolwatch_tools"))
    except RegistryError as exc:
        raise pytest.UsageError(str(exc)) from None
    cases_file = EvalCasesFile.from_parent(session, path=Path(path).resolve())
    cases_file.registry = registry
    collected = list(cases_file.collect())
    # Reported like any collected file, so "collected N items" counts the cases too.
    config.hook.pytest_collectreport(report=pytest.CollectReport(cases_file.nodeid, "passed", None, collected))
    items.extend(collected)


class EvalCasesFile(pytest.File):
    registry: Registry

    def collect(self):
        try:
            loaded = loader.load_file(self.path)
        except OSError as exc:
            raise pytest.UsageError(f"--toolwatch-cases: cannot read {self.path}: {exc}") from None
        for item in loaded:
            if isinstance(item, loader.LoadProblem):
                name = f"{item.tool}[{item.label}]" if item.tool and item.case_id is not None else item.label
            else:
                name = f"{item.tool}[{item.label}]"
            yield EvalCaseItem.from_parent(self, name=name, loaded=item, registry=self.registry)


class EvalCaseFailed(Exception):
    pass


class EvalCaseItem(pytest.Item):
    def __init__(self, *, loaded, registry: Registry, **kwargs) -> None:
        super().__init__(**kwargs)
        self.loaded = loaded
        self.registry = registry

    def runtest(self) -> None:
        if isinstance(self.loaded, loader.LoadProblem):
            result = problem_result(self.loaded)
        else:
            timeout = self.config.getoption("toolwatch_timeout")
            result = run_case(self.loaded, self.registry, timeout_s=timeout)
        self.user_properties.append(("toolwatch_status", result.status))
        if result.status != PASSED:
            prefix = "could not judge: " if result.status == ERROR else ""
            raise EvalCaseFailed("\n".join(prefix + reason for reason in result.reasons))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, EvalCaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        line = self.loaded.line - 1
        return self.path, line, self.name
