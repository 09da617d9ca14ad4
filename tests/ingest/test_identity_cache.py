"""Migration 0016: the identity sequences of the per-span tables hand out ids 1,000 at a time."""

from __future__ import annotations

import datetime as dt
import importlib
import threading

import pytest
from django.db import connection, connections

from ingest import partitions
from ingest.models import Span
from tests.factories import make_project

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_partitions")]

MIGRATION = importlib.import_module("ingest.migrations.0016_identity_cache")


def _cache_sizes() -> dict[str, int]:
    with connection.cursor() as cursor:
        sizes = {}
        for table in MIGRATION.TABLES:
            cursor.execute(
                "SELECT s.cache_size FROM pg_sequences s WHERE s.schemaname || '.' || s.sequencename"
                " = pg_get_serial_sequence(%s, 'id')",
                [table],
            )
            (sizes[table],) = cursor.fetchone()
        return sizes


def test_the_per_span_tables_draw_ids_a_thousand_at_a_time_and_the_migration_goes_back():
    assert _cache_sizes() == dict.fromkeys(MIGRATION.TABLES, 1000)
    with connection.schema_editor() as editor:
        MIGRATION._cache(None, editor, size=1)
    try:
        assert _cache_sizes() == dict.fromkeys(MIGRATION.TABLES, 1)
    finally:
        with connection.schema_editor() as editor:
            MIGRATION._cache(None, editor, size=1000)
    assert _cache_sizes() == dict.fromkeys(MIGRATION.TABLES, 1000)


def test_ids_stay_unique_across_connections():
    """Each connection takes its own block of ids: rows written by two connections never share one."""
    project = make_project()
    start = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)

    def write(prefix: str) -> None:
        try:
            Span.objects.bulk_create(
                Span(project=project, trace_id=f"{prefix}{n:031x}", span_id=f"{n:016x}", name="s", start_time=start,
                     end_time=start, resource_id=0)
                for n in range(50)
            )  # fmt: skip
        finally:
            connections.close_all()

    partitions.ensure_partitions({start.date()})
    threads = [threading.Thread(target=write, args=(prefix,)) for prefix in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = list(Span.objects.filter(project=project).values_list("id", flat=True))
    assert len(ids) == 100 and len(set(ids)) == 100
    assert max(ids) - min(ids) >= 1000  # the second connection's block starts 1,000 after the first's
