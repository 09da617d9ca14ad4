#!/usr/bin/env python3
"""The two Quickstart commands, needing nothing but Python 3.11.

    python3 scripts/dev.py run     set up, migrate, create the demo project, serve on 127.0.0.1:8000
    python3 scripts/dev.py test    set up and run the whole test suite (extra args go to pytest)

Both create ./.venv on first use and reinstall only when pyproject.toml changes.
The database is DATABASE_URL, or a SQLite file under ./var by default.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"


def _run(*args: str, **kwargs) -> None:
    subprocess.run(args, cwd=ROOT, check=True, **kwargs)


def ensure_venv(extras: str) -> None:
    """Create the virtualenv and install the project when pyproject.toml (or the extras) changed."""
    if sys.version_info[:2] != (3, 11):
        sys.exit(f"Toolwatch needs Python 3.11; this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        print("creating .venv …", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    stamp = VENV / ".toolwatch-installed"
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return
    print(f"installing Toolwatch{extras} into .venv …", flush=True)
    _run(str(PYTHON), "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    _run(str(PYTHON), "-m", "pip", "install", "--quiet", "-e", f".{extras}")
    stamp.write_text(digest)


def manage(*args: str) -> None:
    _run(str(PYTHON), "manage.py", *args)


def run() -> None:
    ensure_venv("[dev]")
    os.environ.setdefault("DEBUG", "1")
    manage("migrate", "--no-input", "-v", "0")
    manage("collectstatic", "--no-input", "-v", "0")
    manage("quickstart")
    host, port = os.environ.get("HOST", "127.0.0.1"), os.environ.get("PORT", "8000")
    # The worker and its beat run beside the web server on the filesystem broker: no server to install.
    worker = subprocess.Popen(
        [str(PYTHON), "-m", "celery", "-A", "config", "worker", "--beat", "--pool=solo", "--loglevel=WARNING"],
        cwd=ROOT,
    )
    # waitress reads chunked request bodies in full (the Node OTLP exporter sends them).
    web = subprocess.Popen(
        [str(PYTHON), "-m", "waitress", f"--listen={host}:{port}", "--threads=8", "config.wsgi:application"],
        cwd=ROOT,
    )
    print(f"serving Toolwatch on http://{host}:{port}/  (Ctrl-C stops)", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # a plain kill stops the children too
    try:
        while web.poll() is None and worker.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for process in (web, worker):
            if process.poll() is None:
                process.terminate()
        for process in (web, worker):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
    sys.exit(web.returncode or worker.returncode or 0)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def test(pytest_args: list[str]) -> None:
    ensure_venv("[dev]")
    os.chdir(ROOT)
    os.execv(str(PYTHON), [str(PYTHON), "-m", "pytest", *pytest_args])


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in ("run", "test"):
        sys.exit(__doc__)
    if sys.argv[1] == "run":
        run()
    else:
        test(sys.argv[2:])


if __name__ == "__main__":
    main()
