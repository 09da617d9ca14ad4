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
