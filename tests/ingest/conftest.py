"""Fixtures of the ingest tests."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from waitress.server import create_server

from ingest import partitions


@pytest.fixture
def live_url(transactional_db):
    """The app served by waitress (it reads chunked bodies, as production's servers do) on a free
    loopback port, for the official exporters to send to."""
    partitions.forget_cache()
    server = create_server(WSGIHandler(), host="127.0.0.1", port=0, threads=2, clear_untrusted_proxy_headers=True)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.effective_port}"
    server.close()
    thread.join(timeout=5)
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
