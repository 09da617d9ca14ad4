"""What a compiler gives ingest's Python as it is: the decode path per span, pure against Cython-compiled.

    .venv/bin/pip install 'cython>=3.1,<4'     # the bench's own tool, not a dependency of Toolwatch
    .venv/bin/python bench/compiled_decode.py [--modules otlp,redact,normalize] [--rounds 3] [--passes 4]
    .venv/bin/python bench/compiled_decode.py --instructions     # valgrind's callgrind: instructions a span

About a minute on 2 cores (most of it compiling; `--instructions` about five). A benchmark that prints
figures, not a test: the evidence for a decision on issue 18 (docs/benchmarks.md, "Session 10" and
"Session 12"), not a build step.

It copies the tracked files of this checkout into a temporary folder, compiles `--modules` of
`ingest/` there with Cython, unchanged (`annotation_typing` off: the annotations stay hints, as
CPython reads them), and builds them in place with the C compiler. Then, `--rounds` times, it
alternates two fresh interpreters, one on this checkout (pure Python) and one on the copy
(its compiled modules load before their sources): each decodes, flattens and redacts
(`ingest.otlp.iter_spans`) and normalises (`ingest.normalize.normalize_tool_call`) `--passes`
new copies of bench/traffic.py's cycle of the specified traffic (~30 % of tool calls failing),
after one untimed pass to warm the caches, and prints the process CPU time per span.
No database: SQLite in memory, nothing written.

On a machine shared with other work two runs of the same side can differ by more than the two sides
do. `--instructions` counts instead (valgrind's callgrind, repeatable whatever else the machine
runs): each side runs once with `--passes` passes and once with none, and the difference divided by
the spans of those passes is its instructions a span (imports, Django's set-up and the warm-up pass
cancel out).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run in each interpreter: argv[1] is the tree to import from, argv[2] the timed passes.
TIMING = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, sys.argv[1])
    os.environ.update(DJANGO_SETTINGS_MODULE="config.settings", DEBUG="1", DATABASE_URL="sqlite://:memory:")
    import django
    django.setup()
    from bench import traffic
    from ingest import normalize, otlp
    from ingest.limits import DEFAULT_LIMITS
    compiled = otlp.__file__.endswith(".so")
    cycle = traffic.build_cycle(16, seed=1)

    def one_pass(copy):
        bodies = [traffic.instantiate(template, copy) for template in cycle]
        spans, started = 0, time.process_time()
        for body in bodies:
            request = otlp.decode_request(body, otlp.PROTOBUF)
            for span in otlp.iter_spans(request, DEFAULT_LIMITS, now_ns=time.time_ns()):
                spans += 1
                normalize.normalize_tool_call(span)
        return time.process_time() - started, spans

    one_pass(10**9 - 1)
    seconds = spans = 0
    for p in range(int(sys.argv[2])):
        s, n = one_pass(10**9 + p)
        seconds, spans = seconds + s, spans + n
    print(compiled, seconds / spans * 1e6 if spans else 0.0, spans)
    """
)

BUILD = textwrap.dedent(
    """
    import sys
    from Cython.Build import cythonize
    from setuptools import setup
    setup(
        name="toolwatch-compiled-bench",
        ext_modules=cythonize(sys.argv[1:], language_level=3, compiler_directives={"annotation_typing": False}, quiet=True),
        script_args=["build_ext", "--inplace"],
    )
    """
)


def copy_tree(target: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        source = ROOT / os.fsdecode(name)
        if source.is_file() and source.name != "pyproject.toml":  # setuptools would read the project's
            (target / source.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / source.relative_to(ROOT))


def build(target: Path, modules: list[str]) -> None:
    sources = [f"ingest/{module}.py" for module in modules]
    (target / "_build_compiled.py").write_text(BUILD)
    subprocess.run([sys.executable, "_build_compiled.py", *sources], cwd=target, check=True, capture_output=True)
    built = sorted(p.name for p in (target / "ingest").glob("*.so"))
    if len(built) != len(modules):
        raise SystemExit(f"compiled {built}, expected {modules}")


def time_tree(tree: Path, passes: int) -> tuple[bool, float]:
    out = subprocess.run(
        [sys.executable, "-c", TIMING, str(tree), str(passes)], cwd=tree, capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0] == "True", float(out[1])


def instructions_per_span(tree: Path, passes: int) -> tuple[bool, float]:
    """(whether ingest.otlp was compiled, instructions a span) of `passes` passes under callgrind."""
    counts = []
    for run_passes in (0, passes):
        with tempfile.TemporaryDirectory(prefix="toolwatch-callgrind-") as out:
            done = subprocess.run(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/callgrind.out",
                 sys.executable, "-c", TIMING, str(tree), str(run_passes)],
                cwd=tree, capture_output=True, text=True, check=True,
            )  # fmt: skip
        collected = [line for line in done.stderr.splitlines() if "Collected :" in line]
        counts.append(int(collected[-1].rsplit(":", 1)[1].replace(",", "").strip()))
        compiled, spans = done.stdout.split()[0] == "True", int(done.stdout.split()[2])
    return compiled, (counts[1] - counts[0]) / spans


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", default="otlp,redact,normalize", help="modules of ingest/ to compile")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=4, help="timed passes over the cycle per interpreter")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions under valgrind's callgrind instead of timing"
    )
    args = parser.parse_args(argv)
    if args.instructions and not shutil.which("valgrind"):
        print("--instructions needs valgrind (Debian's package valgrind)", file=sys.stderr)
        return 2
    try:
        import Cython
    except ImportError:
        print("needs Cython: .venv/bin/pip install 'cython>=3.1,<4'", file=sys.stderr)
        return 2
    modules = [m.strip() for m in args.modules.split(",") if m.strip()]
    with tempfile.TemporaryDirectory(prefix="toolwatch-compiled-") as scratch:
        tree = Path(scratch)
        copy_tree(tree)
        build(tree, modules)
        measure = "instructions of 2 passes" if args.instructions else f"{args.rounds} rounds of {args.passes} passes"
        print(f"compiled_decode: Cython {Cython.__version__}, ingest/{{{','.join(modules)}}}.py, {measure}, "
              f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
        if args.instructions:
            passes = 2  # callgrind runs ~50x slower than the interpreter alone
            was_compiled, pure = instructions_per_span(ROOT, passes)
            assert not was_compiled, "this checkout imported a compiled ingest.otlp"
            was_compiled, compiled = instructions_per_span(tree, passes)
            assert was_compiled, "the copy imported ingest.otlp from its source"
            print(f"pure_instructions_per_span={pure:.0f} compiled_instructions_per_span={compiled:.0f} "
                  f"ratio={compiled / pure:.3f}")  # fmt: skip
            return 0
        pure, compiled = [], []
        for round_ in range(args.rounds):
            was_compiled, us = time_tree(ROOT, args.passes)
            assert not was_compiled, "this checkout imported a compiled ingest.otlp"
            pure.append(us)
            was_compiled, us = time_tree(tree, args.passes)
            assert was_compiled, "the copy imported ingest.otlp from its source"
            compiled.append(us)
            print(f"  round {round_ + 1}: pure {pure[-1]:.1f} µs a span, compiled {compiled[-1]:.1f} µs")
    ratio = statistics.median(compiled) / statistics.median(pure)
    print(f"pure_us_per_span={statistics.median(pure):.1f} compiled_us_per_span={statistics.median(compiled):.1f} "
          f"ratio={ratio:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
