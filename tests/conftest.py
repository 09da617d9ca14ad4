"""Shared test fixtures.

Tests that need a service this machine may lack (PostgreSQL, later Redis and
Chromium) skip with a reason that says what to start. CI sets
TOOLWATCH_REQUIRE_SERVICES=1, which turns every such skip into a failure.
"""

from __future__ import annotations

import os

import pytest


def require_service(available: bool, reason: str) -> None:
    if available:
        return
    if os.environ.get("TOOLWATCH_REQUIRE_SERVICES") == "1":
        pytest.fail(f"required service missing (TOOLWATCH_REQUIRE_SERVICES=1): {reason}")
    pytest.skip(reason)


def _is_postgres() -> bool:
    from django.db import connection

    return connection.vendor == "postgresql"


@pytest.fixture(autouse=True)
def _postgres_marker(request):
    if request.node.get_closest_marker("postgres"):
        require_service(
            _is_postgres(),
            "needs PostgreSQL: start it on 127.0.0.1:5432 and run with "
            "DATABASE_URL=postgres://postgres@127.0.0.1:5432/toolwatch",
        )


@pytest.fixture(autouse=True, scope="session")
def _in_memory_broker():
    # Tasks queued by code under test (after commit) go nowhere: tests that need a worker
    # start a real one on Redis (tests/test_celery_worker.py).
    from config.celery import app

    app.conf.update(broker_url="memory://", broker_transport_options={})
    yield
