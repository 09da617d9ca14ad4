"""Hatchling build hook: assemble the toolwatch-runner wheel's one flat package, `toolwatch_runner`.

The runner's modules live in the Toolwatch repository where the server uses them too
(`evals/runner/*`, `evals/judge.py`, `evals/expectations.py` and the pure `ingest` modules),
and stay their only source. At build time this hook copies each of `MODULES` into
`toolwatch_runner/`, rewriting its imports of the others (`from ingest.records import …`,
`from ingest import taxonomy`, `from evals.runner.execute import …`, nested ones included)
to `toolwatch_runner`, and checks what is left: an import of any other Toolwatch module, or
of anything but the standard library (`THIRD_PARTY` excepted, and an optional import
guarded by `try: … except ImportError`), fails the build naming the file and line. So the wheel is self-contained, and a module that grows a dependency cannot
slip into it.

It lives beside the runner, not in it (it needs hatchling; the runner's modules need the
standard library alone). The repository must be there: the hook reads `../../` from the
project's directory (evals/runner), which a pip install from a checkout, a local path or
`git+…#subdirectory=evals/runner` gives it. An
sdist (this directory alone) cannot be built from; an editable install is refused (run
`python -m evals.runner` from the checkout instead).
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "toolwatch_runner"

# Repository module -> its module in the wheel's package ("__init__": the package itself).
MODULES = {
    "evals.runner": "__init__",
    "evals.runner.__main__": "__main__",
    "evals.runner.cli": "cli",
    "evals.runner.client": "client",
    "evals.runner.execute": "execute",
    "evals.runner.loader": "loader",
    "evals.runner.pytest_plugin": "pytest_plugin",
    "evals.runner.registry": "registry",
    # The agents' client (docs/agents.md): the tool-health breaker and the envelope decorator.
    "evals.runner.breaker": "breaker",
    "evals.runner.instrument": "instrument",
    "evals.judge": "judge",
    "evals.expectations": "expectations",
    "ingest.limits": "limits",
    "ingest.normalize": "normalize",
    "ingest.records": "records",
    "ingest.redact": "redact",
    "ingest.secret_rules": "secret_rules",
    "ingest.taxonomy": "taxonomy",
}
# The repository's packages whose modules must be in MODULES to be imported.
REPOSITORY_PACKAGES = ("evals", "ingest")
# The packages above the modules: `from ingest import taxonomy` imports a module of one.
PARENTS = {module.rpartition(".")[0] for module in MODULES} - {""}
# What a module may import besides the standard library: the plugin runs inside pytest.
THIRD_PARTY = {"evals.runner.pytest_plugin": {"pytest"}}

HEADER = "# Generated from {path} of the Toolwatch repository by evals/runner/build_hook/hatch_build.py: edit that file.\n"


class BuildError(Exception):
    """The wheel cannot be built; the message says why and where."""


def source_path(repo: Path, module: str) -> Path:
    parts = module.split(".")
    if MODULES[module] == "__init__":
        return repo.joinpath(*parts, "__init__.py")
    return repo.joinpath(*parts[:-1], parts[-1] + ".py")


def target_module(module: str) -> str:
    name = MODULES[module]
    return PACKAGE if name == "__init__" else f"{PACKAGE}.{name}"


def rewrite(source: str, module: str, where: str) -> str:
    """`source` of repository `module` with its imports of MODULES pointing into PACKAGE.

    Raises BuildError for an import the wheel could not satisfy."""
    tree = ast.parse(source, filename=where)
    allowed = THIRD_PARTY.get(module, set())
    optional = _optional_imports(tree)
    edits: list[tuple[int, int, str, str]] = []  # (line, column, old module text, new)
    for node in ast.walk(tree):
        at = f"{where}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.partition(".")[0]
                if top in REPOSITORY_PACKAGES:
                    raise BuildError(f"{at}: `import {alias.name}` cannot be rewritten; write `from … import …`")
                if node not in optional:
                    _check_outside(top, allowed, at)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise BuildError(f"{at}: relative imports are not rewritten; import from the repository's packages")
            name = node.module or ""
            top = name.partition(".")[0]
            if top not in REPOSITORY_PACKAGES:
                if node not in optional:
                    _check_outside(top, allowed, at)
                continue
            if name in MODULES:
                new = target_module(name)
            elif name not in PARENTS:
                raise BuildError(
                    f"{at}: imports {name}, which toolwatch-runner does not ship "
                    "(a pure, standard-library-only module can be added to MODULES in evals/runner/build_hook/hatch_build.py)"
                )
            else:
                # `from ingest import taxonomy`: a package whose imported names must be shipped modules.
                missing = [a.name for a in node.names if f"{name}.{a.name}" not in MODULES]
                if missing:
                    names = ", ".join(f"{name}.{n}" if name else n for n in missing)
                    raise BuildError(
                        f"{at}: imports {names}, which toolwatch-runner does not ship "
                        "(a pure, standard-library-only module can be added to MODULES in evals/runner/build_hook/hatch_build.py)"
                    )
                new = PACKAGE
            edits.append((node.lineno, node.col_offset, name, new))

    lines = source.splitlines(keepends=True)
    for lineno, column, old, new in sorted(edits, reverse=True):
        line = lines[lineno - 1]
        match = re.compile(r"from\s+" + re.escape(old) + r"(?=\s)").match(line, column)
        if not match:
            raise BuildError(f"{where}:{lineno}: cannot find `from {old}` to rewrite (a line continuation?)")
        lines[lineno - 1] = line[:column] + f"from {new}" + line[match.end():]
    rewritten = "".join(lines)

    # The result must compile and import nothing of the repository any more.
    for node in ast.walk(ast.parse(rewritten, filename=where)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").partition(".")[0] in REPOSITORY_PACKAGES:
            raise BuildError(f"{where}:{node.lineno}: `from {node.module}` was left after rewriting")
    return rewritten


def _optional_imports(tree: ast.AST) -> set[ast.AST]:
    """The imports in the body of a `try` that handles ImportError: the module works without them."""
    optional: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h.type) for h in node.handlers):
            for statement in node.body:
                optional.update(n for n in ast.walk(statement) if isinstance(n, ast.Import | ast.ImportFrom))
    return optional


def _catches_import_error(handled: ast.expr | None) -> bool:
    names = handled.elts if isinstance(handled, ast.Tuple) else [handled]
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names)


def _check_outside(top: str, allowed: set[str], at: str) -> None:
    if top == "__future__" or top in sys.stdlib_module_names or top in allowed:
        return
    raise BuildError(f"{at}: imports {top}, which is not in the standard library: toolwatch-runner has no dependencies")


def assemble(repo: Path, out: Path) -> dict[str, str]:
    """Write the package's modules under `out`; {file written: its path in the wheel}."""
    missing = [str(source_path(repo, module).relative_to(repo)) for module in MODULES if not source_path(repo, module).is_file()]
    if missing:
        raise BuildError(
            f"toolwatch-runner is built from a Toolwatch repository checkout, and {repo} lacks "
            f"{', '.join(missing)}. Build the wheel from the repository (pip install ./evals/runner, or "
            "pip install 'toolwatch-runner @ git+https://github.com/OWNER/toolwatch#subdirectory=evals/runner'); "
            "an sdist of evals/runner alone cannot be built from."
        )
    runner = source_path(repo, "evals.runner").parent
    unlisted = sorted(p.name for p in runner.glob("*.py") if p.name not in {f"{n}.py" for n in MODULES.values()})
    if unlisted:
        raise BuildError(f"evals/runner/{', '.join(unlisted)}: a runner module missing from MODULES in {Path(__file__).name}")
    files = {}
    package = out / PACKAGE
    package.mkdir(parents=True)
    for module, name in MODULES.items():
        path = source_path(repo, module)
        relative = path.relative_to(repo).as_posix()
        text = rewrite(path.read_text(encoding="utf-8"), module, relative)
        target = package / f"{name}.py"
        target.write_text(HEADER.format(path=relative) + text, encoding="utf-8")
        files[str(target)] = f"{PACKAGE}/{name}.py"
    return files


class RunnerBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            raise BuildError(
                f"toolwatch-runner builds only a wheel, from the Toolwatch repository (not a {self.target_name})"
            )
        if version == "editable":
            raise BuildError(
                "toolwatch-runner has no editable install: its package is assembled at build time. "
                "In a Toolwatch checkout run `python -m evals.runner` (or pytest -p evals.runner.pytest_plugin)."
            )
        self._out = Path(tempfile.mkdtemp(prefix="toolwatch-runner-build-"))
        repo = Path(self.root).resolve().parent.parent
        build_data["force_include"].update(assemble(repo, self._out))

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        shutil.rmtree(getattr(self, "_out", ""), ignore_errors=True)
