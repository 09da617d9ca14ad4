"""Fixtures of the ingest tests."""

from __future__ import annotations

import pytest

from tests.conftest import served_app


@pytest.fixture
def live_url(transactional_db):
    """The app served by waitress on a free loopback port, for the official exporters to send to."""
    with served_app() as (url, _):
        yield url
