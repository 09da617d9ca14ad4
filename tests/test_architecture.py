"""The layout holds: pure modules are pure, no import circles, and the apps depend one way.

Pure: the README's table of pure modules (between its `pure-modules` markers) is the list.
Each module is imported in a clean interpreter (`python -I`) where every import outside the
standard library, the project's own packages and the module's named third-party packages
raises ImportError; so a pure module that reaches Django, a driver or anything unnamed,
directly or through another project module, fails here. The eval runner gets the standard
library alone.

Imports: read from the source (module level only: `if TYPE_CHECKING:` blocks and function
bodies are not imports of the module), resolved to the project's modules.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("config", "ingest", "dashboard", "evals", "demo")
# The import names of the third-party distributions the README's table may name.
IMPORT_NAMES = {
    "protobuf": {"google"},
    "googleapis-common-protos": {"google"},
    "opentelemetry-proto": {"opentelemetry"},
    "orjson": {"orjson"},
    "pyahocorasick": {"ahocorasick"},
    "pytest": {"pytest", "_pytest"},
}
# Function-level imports of project modules, each with the reason it is not at the top.
# None of them dodges an import circle (there is none to dodge: see below).
FUNCTION_LEVEL_IMPORTS = {
    # Django connects receivers in AppConfig.ready, once every app's models are loaded.
    ("dashboard/apps.py", "dashboard.alerting.eval_regressions"),
    # The demo fleet stays importable without Django (bench/ builds traffic with it alone);
    # only the in-process exporter needs ingest, when it runs.
    ("demo/simulate/exporters.py", "ingest.otlp"),
    ("demo/simulate/exporters.py", "ingest.services"),
    # Building the WSGI application has side effects: only when the command serves.
    ("demo/management/commands/seedbench.py", "config.wsgi"),
}

_BLOCKER = r"""
import importlib, importlib.abc, sys
root, module, allowed = sys.argv[1], sys.argv[2], sorted(filter(None, sys.argv[3].split(",")))
project = {"config", "ingest", "dashboard", "evals", "demo"}

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in sys.stdlib_module_names or top in project or top in allowed:
            return None
        raise ImportError(f"{module} is documented as pure, but imports {name!r}")

for name in allowed:  # what an allowed package imports itself is its own business
    importlib.import_module(name)
sys.meta_path.insert(0, Blocked())
sys.path.insert(0, root)
importlib.import_module(module)
"""


def _pure_table() -> list[tuple[str, set[str]]]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- pure-modules -->(.*?)<!-- /pure-modules -->", readme, re.S)
    assert block, "README.md has no pure-modules table"
    rows = []
    for line in block.group(1).splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        extras = set().union(*(IMPORT_NAMES[name.split("(")[0].strip()] for name in cells[1].split(",") if name.strip()))
        rows.append((cells[0].strip("`").split("`")[0], extras))
    return rows


def _modules_of(path: str) -> list[str]:
    """`ingest/otlp.py` -> ["ingest.otlp"]; `evals/runner/` -> every module of the package."""
    if path.endswith("/"):  # a package: its modules not listed on a row of their own
        listed = {row for row, _ in _pure_table()}
        files = (ROOT / path).glob("*.py")
        return sorted(_dotted(file) for file in files if str(file.relative_to(ROOT)) not in listed)
    return [_dotted(ROOT / path)]


def _dotted(file: Path) -> str:
    parts = file.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PURE = [(module, extras) for path, extras in _pure_table() for module in _modules_of(path)]


def test_the_readme_lists_the_pure_modules_and_each_exists():
    paths = [path for path, _ in _pure_table()]
    assert len(paths) >= 20 and "evals/runner/" in paths
    for path in paths:
        assert (ROOT / path).exists(), path


@pytest.mark.parametrize(("module", "extras"), PURE, ids=[module for module, _ in PURE])
def test_a_pure_module_imports_in_a_clean_interpreter_with_everything_else_blocked(module, extras):
    if module.startswith("evals.runner") and module != "evals.runner.pytest_plugin":
        assert not extras, "the runner is standard library only"
    result = subprocess.run(
        [sys.executable, "-I", "-c", _BLOCKER, str(ROOT), module, ",".join(sorted(extras))],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.strip().splitlines()[-1]


def test_the_blocker_catches_a_module_that_is_not_pure():
    result = subprocess.run(
        [sys.executable, "-I", "-c", _BLOCKER, str(ROOT), "ingest.services", ""], capture_output=True, text=True
    )
    assert result.returncode != 0 and "imports 'django'" in result.stderr


# --- imports ------------------------------------------------------------------------------


def _product_files() -> list[Path]:
    return sorted(
        file for package in PRODUCT for file in (ROOT / package).rglob("*.py") if "migrations" not in file.parts
    )


MODULES = {_dotted(file): file for file in _product_files()}


def _resolve(name: str) -> str | None:
    """The project module an import names (a package's submodule if it is one), or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, file: Path) -> tuple[set[str], set[str]]:
    """(module-level imports, function-level imports) of project modules."""
    top: set[str] = set()
    nested: set[str] = set()
    package = module if file.name == "__init__.py" else module.rpartition(".")[0]

    def names(node) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
        # `from x import y`: the module x.y when there is one, else a name of x.
        return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                for name in names(child):
                    target = _resolve(name)
                    if target and target != module:
                        (nested if in_function else top).add(target)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(ast.parse(file.read_text()), False)
    return top, nested


GRAPH = {module: _imports(module, file) for module, file in MODULES.items()}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(edges):
        if node not in index:
            connect(node)
    return found


def test_no_import_circle_between_modules():
    assert _cycles({module: top for module, (top, _) in GRAPH.items()}) == []


def test_no_import_circle_between_apps():
    apps: dict[str, set[str]] = {}
    for module, (top, _) in GRAPH.items():
        apps.setdefault(module.partition(".")[0], set()).update(
            target.partition(".")[0] for target in top if target.partition(".")[0] != module.partition(".")[0]
        )
    assert _cycles(apps) == [], apps


def test_the_apps_depend_one_way():
    def imported_apps(app: str) -> set[str]:
        return {
            target.partition(".")[0]
            for module, (top, nested) in GRAPH.items()
            if module.partition(".")[0] == app
            for target in top | nested
        } - {app}

    assert imported_apps("ingest") <= {"config"}, "the write path depends on config alone"
    assert "dashboard" not in imported_apps("evals"), "evals imports nothing of dashboard"
    for app in ("config", "ingest", "dashboard", "evals"):
        assert "demo" not in imported_apps(app), f"{app} imports the demo tooling"


def test_function_level_imports_of_project_modules_are_the_listed_ones():
    found = {
        (str(MODULES[module].relative_to(ROOT)), target)
        for module, (_, nested) in GRAPH.items()
        for target in nested
    }
    assert found == FUNCTION_LEVEL_IMPORTS


# --- citations ----------------------------------------------------------------------------

CITATION = re.compile(r"(?<![\w/.])docs/[\w./-]+\.md(?:#[\w-]+)?")  # a path of this repository, not of a URL


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _cited_files() -> list[Path]:
    files = [*_product_files(), *(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py"), ROOT / "README.md"]
    return [*files, *(ROOT / "docs").rglob("*.md"), *(ROOT / "templates").rglob("*.html")]


def test_every_cited_document_and_heading_is_in_the_repository():
    missing = []
    for file in _cited_files():
        for citation in CITATION.findall(file.read_text()):
            path, _, anchor = citation.partition("#")
            target = ROOT / path.rstrip(".")
            if not target.exists():
                missing.append(f"{file.relative_to(ROOT)}: {citation}")
            elif anchor:
                headings = re.findall(r"(?m)^#+ (.+)$", target.read_text())
                if anchor not in {_slug(heading) for heading in headings}:
                    missing.append(f"{file.relative_to(ROOT)}: {citation} (no such heading)")
    assert missing == []


def test_no_comment_cites_a_contract_outside_the_repository():
    stale = re.compile(r"\bSPEC\s+(?:section\s+)?\d|evals-contract\.md|\.\./shared")
    found = [str(file.relative_to(ROOT)) for file in _cited_files() if stale.search(file.read_text())]
    assert found == []
