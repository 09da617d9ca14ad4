"""A real Celery worker on Redis runs the rollup job against the test database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from config.celery import app
from dashboard.models import ToolRollup
from dashboard.tasks import refresh_project_rollups, refresh_rollups
from demo.quickstart import demo_request
from ingest.models import ChangedBucket
from ingest.services import spans_ingest
from tests.conftest import require_service
from tests.factories import make_project

REDIS = "redis://127.0.0.1:6379/15"


def redis_answers() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture
def worker(transactional_db):
    require_service(redis_answers(), "needs Redis: start it on 127.0.0.1:6379 (redis-server --daemonize yes)")
    require_service(
        connection.vendor == "postgresql",
        "needs PostgreSQL, shared with the worker process: run with DATABASE_URL=postgres://postgres@127.0.0.1:5432/toolwatch",
    )
    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "CELERY_BROKER_URL": REDIS,
        "CELERY_RESULT_BACKEND": REDIS,
        "DATABASE_CONN_MAX_AGE": "0",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--concurrency=1", "--loglevel=WARNING",
         "--hostname", f"test-{os.getpid()}@%h"],
        cwd=Path(__file__).resolve().parents[1], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with app.connection_for_write(REDIS) as broker:
            app.control.purge(connection=broker)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=20)


def run(task, *args):
    # The tasks were bound with results ignored (no backend in settings), and the app may
    # have cached its disabled backend: ask for a result and read it from Redis directly.
    from celery.backends.redis import RedisBackend
    from celery.result import AsyncResult

    with app.connection_for_write(REDIS) as broker:  # not the app's pooled test broker
        sent = task.apply_async(args, ignore_result=False, connection=broker)
    return AsyncResult(sent.id, backend=RedisBackend(app=app, url=REDIS)).get(timeout=60)


def test_a_real_worker_refreshes_rollups_and_a_second_run_changes_nothing(worker):
    project = make_project()
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    # Within the last hour: the periodic job leaves older (late) buckets for their turn.
    spans_ingest(project=project, request=demo_request(seed=5, traces=30, hours=1, now_ns=int(now.timestamp()) * 10**9),
                 limits=settings.INGEST_LIMITS, now=now)  # fmt: skip

    written = run(refresh_project_rollups, project.pk)

    # Rows written, an hour's or a day's counted again when several of its buckets changed apart.
    assert written >= ToolRollup.objects.filter(project=project).count() > 0
    assert not ChangedBucket.objects.filter(project=project).exists()
    rows = list(ToolRollup.objects.filter(project=project).order_by("id").values_list("bucket_start", "tool", "calls"))
    assert run(refresh_project_rollups, project.pk) == 0  # nothing changed since
    assert list(ToolRollup.objects.filter(project=project).order_by("id").values_list("bucket_start", "tool", "calls")) == rows


def test_the_periodic_fan_out_reaches_every_changed_project(worker):
    projects = [make_project(), make_project()]
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    for seed, project in enumerate(projects):
        spans_ingest(project=project, request=demo_request(seed=seed, traces=9, hours=1, now_ns=int(now.timestamp()) * 10**9),
                     limits=settings.INGEST_LIMITS, now=now)  # fmt: skip

    run(refresh_rollups)

    import time

    deadline = time.monotonic() + 60
    while ChangedBucket.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(ToolRollup.objects.filter(project=project).exists() for project in projects)
