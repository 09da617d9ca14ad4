"""Shared test fixtures.

Tests that need a service this machine may lack (PostgreSQL, later Redis and
Chromium) skip with a reason that says what to start. CI sets
TOOLWATCH_REQUIRE_SERVICES=1, which turns every such skip into a failure.
"""

from __future__ import annotations

import contextlib
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


# --- test-only settings ---------------------------------------------------------------------


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hasher():
    """MD5 instead of PBKDF2 for the whole session: PBKDF2 costs ~0.4 s per password set or
    checked, which was half the suite's time. The session-wide override reaches the live
    server's thread (tests/browser) too, so passwords set here are checked with the same hasher.
    Tokens and API keys hash with their own functions and are not affected."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(autouse=True, scope="session")
def _unhashed_static_names():
    """Static files under their own names: the tests' servers find them with the staticfiles
    finders, and the manifest of hashed names exists only after collectstatic. The hashed,
    compressed, year-cached files are tested against a real collectstatic and server
    (tests/test_static_files.py)."""
    from django.conf import settings
    from django.test import override_settings

    storages = {**settings.STORAGES, "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"}}
    with override_settings(STORAGES=storages):
        yield


@pytest.fixture(autouse=True)
def _fresh_cache():
    """An empty cache for each test: API throttle counts and ingest buckets (kept there) must
    not carry over from test to test, where user ids repeat. Tests of the throttles set tiny
    rates themselves (tests/test_throttles.py)."""
    from django.core.cache import cache

    cache.clear()
    yield


# --- the cast -------------------------------------------------------------------------------
# One project, "Alpha" (slug alpha), with its owner olga and a plain member alice; mallory is
# a user of no project. Every cast user's password is PASSWORD. The logged-in clients are
# pytest-django's `client` (the same object), so a test uses one of them, or `client` itself.

PASSWORD = "pw-cast-123"


def _user(username: str):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username, password=PASSWORD)


@pytest.fixture
def owner(db):
    """olga: an owner of `project` (once `project` is asked for)."""
    return _user("olga")


@pytest.fixture
def member(db):
    """alice: a plain member of `project` (once `project` is asked for)."""
    return _user("alice")


@pytest.fixture
def outsider(db):
    """mallory: a member of no project."""
    return _user("mallory")


@pytest.fixture
def project(owner, member):
    """"Alpha" (slug alpha): owner is an owner member, member a plain member."""
    from ingest.models import Membership
    from tests.factories import make_project

    project = make_project("Alpha", slug="alpha")
    Membership.objects.create(project=project, user=owner, role=Membership.Role.OWNER)
    Membership.objects.create(project=project, user=member, role=Membership.Role.MEMBER)
    return project


@pytest.fixture
def owner_client(client, project, owner):
    """`client`, logged in as the owner of `project`."""
    client.force_login(owner)
    return client


@pytest.fixture
def member_client(client, project, member):
    """`client`, logged in as a plain member of `project`."""
    client.force_login(member)
    return client


# --- the app on a real server -----------------------------------------------------------------


def stop_waitress(server, thread) -> None:
    """Stop a waitress server whose loop runs in `thread`: every socket it serves (the listener,
    kept-alive connections, the trigger that wakes it) is closed from the loop's own thread, so its
    select() never sees a closed one (closed from here: EBADF in the loop thread); then its task threads."""
    from waitress import wasyncore

    if getattr(server, "stopped", False):
        return
    server.stopped = True
    if thread.is_alive():
        server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))
        thread.join(timeout=5)
    server.task_dispatcher.shutdown()


@contextlib.contextmanager
def served_app():
    """The whole app served by waitress (it reads chunked bodies, as production's servers do) on a
    free loopback port: yields (base URL, server), the server so a test can stop it early
    (`server.stop()`). Needs a transactional database (the server's threads see committed data only)."""
    import datetime as dt
    import threading

    from django.core.handlers.wsgi import WSGIHandler
    from django.db import connection
    from waitress.server import create_server

    from ingest import partitions

    partitions.forget_cache()
    server = create_server(WSGIHandler(), host="127.0.0.1", port=0, threads=2, clear_untrusted_proxy_headers=True)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    server.stop = lambda: stop_waitress(server, thread)
    try:
        yield f"http://127.0.0.1:{server.effective_port}", server
    finally:
        stop_waitress(server, thread)
        if connection.vendor == "postgresql":
            # The server's threads hold their own connections; the test database must be droppable.
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        # Day partitions the server made outlive the transactional test's flush.
        partitions.drop_partitions_before(dt.date(9999, 1, 1))
        partitions.forget_cache()
