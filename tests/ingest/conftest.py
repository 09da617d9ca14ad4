"""Fixtures of the ingest tests."""

from __future__ import annotations

import datetime as dt

import pytest

from ingest import partitions
from tests.conftest import served_app


@pytest.fixture
def no_partitions():
    """No day partitions before or after the test (they outlive a transactional test's flush)."""
    partitions.drop_partitions_before(dt.date(9999, 1, 1))
    yield
    partitions.drop_partitions_before(dt.date(9999, 1, 1))


@pytest.fixture
def live_url(transactional_db):
    """The app served by waitress on a free loopback port, for the official exporters to send to."""
    with served_app() as (url, _):
        yield url
