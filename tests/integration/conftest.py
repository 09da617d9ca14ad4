"""Real processes against one PostgreSQL and Redis: Celery workers, beat, web servers.

Every test here needs both services and skips without them (fails under
TOOLWATCH_REQUIRE_SERVICES=1, as in CI), like tests/test_celery_worker.py, whose way of
starting a worker this extends: the processes share the test database, so the tests use
`transactional_db` (committed rows) and each process gets DATABASE_URL naming it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from config.celery import app
from tests.conftest import require_service
from tests.test_celery_worker import redis_answers

ROOT = Path(__file__).resolve().parents[2]
# Not test_celery_worker's database 15: a run of both at once must not purge the other's queue.
REDIS = "redis://127.0.0.1:6379/14"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    """Starts processes with the test database and Redis, logs each to a file, stops them all."""

    def __init__(self, log_dir: Path):
        database = connection.settings_dict
        self.env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
            "CELERY_BROKER_URL": REDIS,
            "CELERY_RESULT_BACKEND": REDIS,
            "DATABASE_CONN_MAX_AGE": "0",
            "DEBUG": "0",
            "PYTHONUNBUFFERED": "1",
        }
        self.log_dir = log_dir
        self.running: list[subprocess.Popen] = []

    def start(self, name: str, *args: str, env: dict | None = None) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 (closed with the process)
        process = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env={**self.env, **(env or {})}, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        process.log = log
        process.log_path = self.log_dir / f"{name}.log"
        self.running.append(process)
        return process

    def worker(self, name: str, *, pool: str = "solo", concurrency: int = 1, env: dict | None = None) -> subprocess.Popen:
        process = self.start(
            name, "-m", "celery", "-A", "config", "worker", f"--pool={pool}", f"--concurrency={concurrency}",
            "--loglevel=INFO", "--without-gossip", "--without-mingle", "--hostname", f"{name}-{os.getpid()}@%h", env=env,
        )  # fmt: skip
        process.node = f"{name}-{os.getpid()}@{socket.gethostname()}"
        return process

    def wait_ready(self, *workers: subprocess.Popen, timeout: float = 30) -> None:
        """Until each worker says it is ready (it consumes from the queue by then)."""
        deadline = time.monotonic() + timeout
        for worker in workers:
            while f"{worker.node} ready." not in worker.log_path.read_text(errors="replace"):
                assert worker.poll() is None, f"{worker.node} exited: {worker.log_path.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"{worker.node} not ready after {timeout:g} s"
                time.sleep(0.1)

    def kill(self, process: subprocess.Popen) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    def stop_all(self) -> None:
        for process in self.running:
            if process.poll() is None:
                process.terminate()
        for process in self.running:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
            process.log.close()


@pytest.fixture
def services(transactional_db):
    require_service(redis_answers(), "needs Redis: start it on 127.0.0.1:6379 (redis-server --daemonize yes)")
    require_service(
        connection.vendor == "postgresql",
        "needs PostgreSQL, shared with the processes: run with DATABASE_URL=postgres://postgres@127.0.0.1:5432/toolwatch",
    )
    with app.connection_for_write(REDIS) as broker:
        app.control.purge(connection=broker)


@pytest.fixture
def processes(services, tmp_path):
    started = Processes(tmp_path)
    try:
        yield started
    finally:
        started.stop_all()
        with app.connection_for_write(REDIS) as broker:
            app.control.purge(connection=broker)


def send(task, *args, **options):
    """Queue `task` on Redis (not the tests' in-memory broker); returns its AsyncResult, readable from Redis."""
    from celery.backends.redis import RedisBackend
    from celery.result import AsyncResult

    with app.connection_for_write(REDIS) as broker:
        sent = task.apply_async(args, ignore_result=False, connection=broker, **options)
    return AsyncResult(sent.id, backend=RedisBackend(app=app, url=REDIS))


def children(pid: int) -> list[int]:
    """The child processes of `pid` (a prefork worker's pool processes)."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def wait_for(condition, *, timeout: float, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
