#!/usr/bin/env python3
"""The two Quickstart commands, needing nothing but Python 3.11.

    python3 scripts/dev.py run     set up, migrate, load the demo project, serve on 127.0.0.1:8000
    python3 scripts/dev.py test    set up and run the whole test suite (extra args go to pytest)

Both create ./.venv on first use and reinstall only when pyproject.toml changes.
The database is DATABASE_URL, or a SQLite file under ./var by default.

`run` starts four processes: the web server (waitress), the OTLP/gRPC receiver
(`manage.py grpcserver`, on TOOLWATCH_OTLP_GRPC_PORT, 4317 by default), the Celery worker
with its beat, and a live demo sender (`manage.py simulate --live`) that posts the demo
fleet's traffic to the web server over OTLP/HTTP every few seconds, with a key the
quickstart keeps in var/demo-live.key. DEMO_TRAFFIC=0 leaves the sender out. Unless
SECRET_KEY is set, they share the checkout's own key, made on first run in var/secret-key.
"""

from __future__ import annotations

import hashlib
import os
import secrets
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
    project = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    # The stamp says which pyproject.toml and extras are installed; "[dev]" covers a plain run too.
    installed, _, installed_extras = stamp.read_text().partition(";") if stamp.exists() else ("", "", "")
    if installed == project and extras in ("", installed_extras):
        return
    print(f"installing Toolwatch{extras} into .venv …", flush=True)
    _run(str(PYTHON), "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    _run(str(PYTHON), "-m", "pip", "install", "--quiet", "-e", f".{extras}")
    stamp.write_text(f"{project};{extras}")


def quickstart_secret_key() -> str:
    """This checkout's own SECRET_KEY, made on first run and kept in var/secret-key (never in
    git: var/ is ignored), so the Quickstart runs with DEBUG off too and sessions survive a restart."""
    path = ROOT / "var" / "secret-key"
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        # Created readable by its owner only, before the key is written into it.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(secrets.token_urlsafe(50) + "\n")
    key = path.read_text().strip()
    if len(key) < 50:
        sys.exit(f"{path} holds no usable SECRET_KEY (under 50 characters): delete it to have a new one made")
    return key


def manage(*args: str) -> None:
    _run(str(PYTHON), "manage.py", *args)


def run() -> None:
    ensure_venv("")  # the app alone: the test tools (pytest, playwright, …) come with `test`
    # DEBUG off, as deployed: real 404 and 500 pages, no debug page; the checkout's own key below.
    os.environ.setdefault("SECRET_KEY", quickstart_secret_key())
    manage("migrate", "--no-input", "-v", "0")
    manage("collectstatic", "--no-input", "-v", "0")
    live_key = ROOT / "var" / "demo-live.key"
    manage("quickstart", "--live-key-file", str(live_key))
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
    # OTLP/gRPC on :4317 beside OTLP/HTTP, for exporters configured with OTEL_EXPORTER_OTLP_PROTOCOL=grpc.
    grpc_port = os.environ.get("TOOLWATCH_OTLP_GRPC_PORT", "4317")
    grpc = subprocess.Popen([str(PYTHON), "manage.py", "grpcserver", "--host", host, "--port", grpc_port], cwd=ROOT)
    processes = [web, worker, grpc]
    if os.environ.get("DEMO_TRAFFIC", "1") != "0":
        # The demo keeps living: the same fleet, its search_kb drift still in force, sent as a real
        # OTLP sender would (the first send waits for the server; a failed one is retried).
        processes.append(
            subprocess.Popen(
                [
                    str(PYTHON), "manage.py", "simulate", "--live", "--url", f"http://{_client_host(host)}:{port}",
                    "--key-file", str(live_key), "--rate", "120", "--drift", "search_kb:retry_rise_flat_error:0",
                ],
                cwd=ROOT,
            )
        )  # fmt: skip
    print(f"serving Toolwatch on http://{host}:{port}/  (Ctrl-C stops)", flush=True)
    print(f"OTLP/gRPC on {_client_host(host)}:{grpc_port}  (OTEL_EXPORTER_OTLP_PROTOCOL=grpc)", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # a plain kill stops the children too
    try:
        while all(process.poll() is None for process in processes):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
    sys.exit(web.returncode or worker.returncode or grpc.returncode or 0)


def _client_host(host: str) -> str:
    """Where a local client reaches a server listening on `host` (0.0.0.0 is no destination)."""
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


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
