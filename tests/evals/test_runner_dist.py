"""The toolwatch-runner distribution (evals/runner/pyproject.toml): built from this repository as
a wheel, installed into a fresh venv that has nothing else, and run there in isolated mode (-I),
where it must import with the standard library alone and judge cases as the in-repo runner does.

The wheel is built once per module (`pip wheel --no-build-isolation` with the dev extras'
hatchling: no network) and installed by this interpreter's pip into a venv made without pip
(`pip --python`), which is the same install as the venv's own pip would do, seconds faster.
"""

from __future__ import annotations

import ast
import email
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from evals.runner import __version__
from tests.evals.sample_tools import flights_cases

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "evals" / "runner"
SAMPLE_TOOLS = Path(__file__).resolve().parent / "sample_tools"
# The package's modules: the runner's, the judge and expectations, and the pure ingest modules.
MODULES = {
    "__init__", "__main__", "cli", "client", "execute", "loader", "pytest_plugin", "registry", "breaker", "instrument",
    "judge", "expectations", "limits", "normalize", "records", "redact", "secret_rules", "taxonomy",
}  # fmt: skip
BIN = "Scripts" if os.name == "nt" else "bin"


def clean_env(**extra: str) -> dict[str, str]:
    """No PYTHONPATH, no Django, no TOOLWATCH_* defaults: only what a bare CI shell has."""
    keep = ("PATH", "HOME", "SYSTEMROOT", "TMPDIR", "TEMP", "TMP")
    return {name: os.environ[name] for name in keep if name in os.environ} | {"LC_ALL": "C.UTF-8"} | extra


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    missing = [name for name in ("pip", "hatchling") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"cannot build toolwatch-runner here: {', '.join(missing)} not installed (pip install -e '.[dev]')")
    out = tmp_path_factory.mktemp("wheelhouse")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "--quiet", "--wheel-dir", str(out), str(RUNNER)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"building the wheel failed:\n{done.stdout}\n{done.stderr}"
    [built] = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory) -> Path:
    """A venv without system site packages, with the wheel installed and nothing else (not even pip)."""
    home = tmp_path_factory.mktemp("venv") / "fresh"
    venv.create(home, with_pip=False, symlinks=os.name != "nt")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(home / BIN / "python"), "install", "--no-index",
         "--disable-pip-version-check", "--quiet", str(wheel)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"installing the wheel failed:\n{done.stdout}\n{done.stderr}"
    return home


def isolated(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The fresh venv's python in isolated mode: no PYTHON* variables, no user site, no script directory."""
    return subprocess.run(
        [str(home / BIN / "python"), "-I", *args], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=60
    )


def site_packages(home: Path) -> str:
    done = isolated(home, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    return done.stdout.strip()


@pytest.fixture
def workdir(tmp_path) -> Path:
    """A user's project: the case file and the tool modules (which import nothing of Toolwatch)."""
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(case) + "\n" for case in flights_cases()), encoding="utf-8")
    for name in ("flights_fixed", "flights_broken"):
        shutil.copy(SAMPLE_TOOLS / f"{name}.py", tmp_path / f"{name}.py")
    return tmp_path


def test_the_wheel_is_one_flat_package_with_no_dependencies(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata_name] = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(metadata_name))
        sources = {n: archive.read(n).decode() for n in names if n.endswith(".py")}

    assert wheel.name == f"toolwatch_runner-{__version__}-py3-none-any.whl"
    assert {n.split("/")[0] for n in names} == {"toolwatch_runner", f"toolwatch_runner-{__version__}.dist-info"}
    assert {n.removeprefix("toolwatch_runner/").removesuffix(".py") for n in sources} == MODULES
    assert (metadata["Name"], metadata["Version"], metadata["Requires-Python"]) == ("toolwatch-runner", "1.0.0", ">=3.11")
    assert metadata.get_all("Requires-Dist") is None
    for name, source in sources.items():
        imported = {
            (node.module if isinstance(node, ast.ImportFrom) else alias.name).partition(".")[0]
            for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }  # fmt: skip
        assert not imported & {"evals", "ingest", "django", "rest_framework"}, name


def test_every_module_imports_in_the_fresh_venv_with_the_standard_library_alone(fresh, tmp_path):
    code = """
import importlib, json, pkgutil, sys
import toolwatch_runner
names = sorted(m.name for m in pkgutil.iter_modules(toolwatch_runner.__path__))
for name in names:
    if name not in ("__main__", "pytest_plugin"):  # __main__ runs the CLI; the plugin's pytest is below
        importlib.import_module("toolwatch_runner." + name)
try:
    import toolwatch_runner.pytest_plugin
except ModuleNotFoundError as exc:
    plugin_needs = exc.name
outside = sorted({m.partition(".")[0] for m in sys.modules} - set(sys.stdlib_module_names) - {"toolwatch_runner", "__main__"})
print(json.dumps({"names": names, "file": toolwatch_runner.__file__, "version": toolwatch_runner.__version__,
                  "plugin_needs": plugin_needs, "outside": outside}))
"""
    done = isolated(fresh, "-c", code, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert set(found["names"]) == MODULES - {"__init__"}
    assert found["file"].startswith(site_packages(fresh))
    assert found["version"] == __version__
    assert found["plugin_needs"] == "pytest"  # and only pytest: it is not installed there
    assert found["outside"] == []  # no orjson, no evals, no ingest, no Django: the standard library alone


def test_the_console_script_shows_its_help_and_version(fresh, tmp_path):
    script = fresh / BIN / "toolwatch-evals"
    direct = subprocess.run([str(script), "--help"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True)
    version = isolated(fresh, str(script), "--version", cwd=tmp_path)

    assert direct.returncode == 0, direct.stderr
    assert direct.stdout.startswith("usage: toolwatch-evals ")
    assert "--toolwatch" not in direct.stdout and "--tools MODULE:ATTR" in direct.stdout
    assert version.stdout.strip() == f"toolwatch-evals {__version__} (REST contract 1)"


@pytest.mark.parametrize(("tools", "expected_code"), [("flights_fixed", 0), ("flights_broken", 1)])
def test_the_console_script_judges_a_case_file_as_the_in_repo_runner_does(fresh, workdir, tools, expected_code):
    argv = ["--cases", "cases.jsonl", "--tools", f"{tools}:TOOLS", "--json", "-"]
    installed = isolated(fresh, str(fresh / BIN / "toolwatch-evals"), *argv, cwd=workdir)
    in_repo = subprocess.run(
        [sys.executable, "-m", "evals.runner", *argv], cwd=workdir, env=clean_env(PYTHONPATH=str(REPO)),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert (installed.returncode, in_repo.returncode) == (expected_code, expected_code), installed.stderr + in_repo.stderr
    judged, reference = json.loads(installed.stdout), json.loads(in_repo.stdout)
    for document in (judged, reference):
        for result in document["results"]:
            result.pop("duration_ms")
    assert judged == reference
    assert [r["status"] for r in judged["results"]] == (["passed"] * 2 if expected_code == 0 else ["failed"] * 2)
    assert "2 cases: " in installed.stderr


def test_the_console_script_and_the_pytest_plugin_are_registered(fresh, tmp_path):
    code = """
import json
from importlib.metadata import entry_points
print(json.dumps({group: sorted([ep.name, ep.value] for ep in entry_points(group=group))
                  for group in ("console_scripts", "pytest11")}))
"""
    done = isolated(fresh, "-c", code, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "console_scripts": [["toolwatch-evals", "toolwatch_runner.cli:main"]],
        "pytest11": [["toolwatch", "toolwatch_runner.pytest_plugin"]],
    }


def test_pytest_loads_the_installed_plugin_from_its_entry_point_without_p(fresh, workdir):
    # The fresh venv has no pytest: this interpreter's pytest, with the venv's site-packages on
    # its path, finds the plugin as an installed pytest would (entry point autoloading, no -p).
    site = site_packages(fresh)
    (workdir / "pytest.ini").write_text("[pytest]\n")
    (workdir / "test_plain.py").write_text(
        "import sys\n\n"
        "def test_plain(request):\n"
        "    plugin = request.config.pluginmanager.get_plugin('toolwatch')\n"
        "    assert plugin.__name__ == 'toolwatch_runner.pytest_plugin'\n"
        f"    assert plugin.__file__.startswith({site!r})\n"
    )
    env = clean_env(PYTHONPATH=site)

    def pytest_run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:django", "-p", "no:cacheprovider", *args],
            cwd=workdir, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    plain = pytest_run("test_plain.py")
    cases = pytest_run("--toolwatch-cases", "cases.jsonl", "--toolwatch-tools", "flights_broken:TOOLS", "-v")

    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "1 passed" in plain.stdout
    assert cases.returncode == 1, cases.stdout + cases.stderr
    assert f"plugins: toolwatch-runner-{__version__}" in cases.stdout  # loaded from its entry point
    assert "2 failed, 1 passed" in cases.stdout
    assert "cases.jsonl::search_flights[case 1 v2] FAILED" in cases.stdout
    assert "expected class validation, got unknown: Something went wrong" in cases.stdout


def test_the_agents_client_works_in_the_fresh_venv_without_opentelemetry(fresh, tmp_path):
    # The decorator is a plain call where opentelemetry is absent; the breaker fails open when
    # Toolwatch is unreachable (a closed loopback port), within its timeout.
    code = """
import json, socket, sys, time
from toolwatch_runner.breaker import CircuitBreaker
from toolwatch_runner.instrument import ToolError, envelope, failure_attributes, tool_call

@tool_call(name="lookup")
def lookup(n):
    if n < 0:
        raise ToolError("n must be positive", error_class="validation", field="n", suggestion="send 1 or more")
    return {"n": n}

with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]  # closed once the block ends
breaker = CircuitBreaker.from_feed(f"http://127.0.0.1:{port}", "alpha", token="twu_x", timeout_s=0.5, background=False)
began = time.monotonic()
allowed = breaker.allow("lookup")
took = time.monotonic() - began
try:
    lookup(-1)
except ToolError as exc:
    raised = failure_attributes("lookup", exception=exc)
print(json.dumps({"result": lookup(2), "allowed": allowed, "took": took, "state": breaker.advice("lookup").state,
                  "raised": raised, "otel": "opentelemetry" in sys.modules,
                  "soft": failure_attributes("lookup", result=envelope("transient", "busy", retry_after=1.5))}))
"""
    done = isolated(fresh, "-c", code, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert (found["result"], found["allowed"], found["state"], found["otel"]) == ({"n": 2}, True, "unknown", False)
    assert found["took"] < 1.5
    assert found["raised"]["tool.error.field"] == "n" and found["raised"]["tool.error.class"] == "validation"
    assert found["soft"]["tool.error.retry_after_ms"] == 1500 and found["soft"]["tool.error.retryable"] is True
