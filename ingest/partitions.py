"""Daily range partitions of the span and tool-call tables on PostgreSQL.

Partitions are created on demand before a write (cached per process) and ahead of
time by the scheduled job; old ones are dropped whole, which is how retention stays
cheap. `CREATE TABLE … PARTITION OF` locks the parent, so it runs in its own short
transaction before the ingest transaction, never inside it. SQLite has no
partitions: every function here is a no-op there.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

from django.db import connection, transaction

PARTITIONED_TABLES = ("ingest_span", "ingest_toolcall")
_NAME_RE = re.compile(r"_p(\d{8})$")
# Arbitrary constant: serialises partition DDL across processes.
_DDL_LOCK_KEY = 7_310_020_001

_known: set[tuple[str, dt.date]] = set()


def is_partitioned() -> bool:
    return connection.vendor == "postgresql"


def partition_name(table: str, day: dt.date) -> str:
    return f"{table}_p{day:%Y%m%d}"


def partition_tables(table: str) -> list[str]:
    """The names of `table`'s partitions on PostgreSQL (none elsewhere)."""
    if not is_partitioned():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT child.relname FROM pg_inherits
            JOIN pg_class parent ON parent.oid = pg_inherits.inhparent
            JOIN pg_class child ON child.oid = pg_inherits.inhrelid
            WHERE parent.relname = %s
            """,
            [table],
        )
        return [row[0] for row in cursor.fetchall()]


def existing_partition_days(table: str) -> list[dt.date]:
    days = []
    for name in partition_tables(table):
        match = _NAME_RE.search(name)
        if match:
            days.append(dt.datetime.strptime(match.group(1), "%Y%m%d").date())
    return sorted(days)


def ensure_partitions(days: Iterable[dt.date]) -> None:
    """Make sure every table has a partition for each day; cheap when they exist."""
    if not is_partitioned():
        return
    missing = {(table, day) for day in days for table in PARTITIONED_TABLES} - _known
    if not missing:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_DDL_LOCK_KEY])
        for table, day in sorted(missing):
            start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
            end = start + dt.timedelta(days=1)
            cursor.execute(
                f'CREATE TABLE IF NOT EXISTS "{partition_name(table, day)}" '
                f'PARTITION OF "{table}" FOR VALUES FROM (%s) TO (%s)',
                [start, end],
            )
    # Only remember them once committed: a rolled-back DDL must be retried.
    transaction.on_commit(lambda: _known.update(missing))


def create_ahead(today: dt.date, days_ahead: int = 7, days_back: int = 1) -> None:
    ensure_partitions(today + dt.timedelta(days=offset) for offset in range(-days_back, days_ahead + 1))


def drop_partitions_before(day: dt.date) -> list[str]:
    """Drop every daily partition wholly before `day`; returns the dropped table names."""
    if not is_partitioned():
        return []
    dropped = []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_DDL_LOCK_KEY])
        for table in PARTITIONED_TABLES:
            for partition_day in existing_partition_days(table):
                if partition_day < day:
                    name = partition_name(table, partition_day)
                    cursor.execute(f'DROP TABLE IF EXISTS "{name}"')
                    _known.discard((table, partition_day))
                    dropped.append(name)
    return dropped


def forget_cache() -> None:
    """Tests drop and recreate the database; the process-wide cache must not outlive it."""
    _known.clear()


# --- migration helpers: raw SQL beside the migration that uses it ---------------------------


def convert_to_partitioned(schema_editor, model, unique_name: str) -> None:
    """Recreate an (empty) table as a partitioned one, keeping Django's columns and indexes."""
    table = model._meta.db_table
    quote = schema_editor.quote_name
    execute = schema_editor.execute
    execute(
        f"CREATE TABLE {quote(table + '_new')} (LIKE {quote(table)} INCLUDING DEFAULTS INCLUDING IDENTITY) "
        f"PARTITION BY RANGE (start_time)"
    )
    execute(f"DROP TABLE {quote(table)}")
    execute(f"ALTER TABLE {quote(table + '_new')} RENAME TO {quote(table)}")
    execute(f"ALTER TABLE {quote(table)} ADD PRIMARY KEY (id, start_time)")
    execute(
        f"ALTER TABLE {quote(table)} ADD CONSTRAINT {quote(unique_name + '_day')} "
        f"UNIQUE (project_id, trace_id, span_id, start_time)"
    )
    for index in model._meta.indexes:
        schema_editor.add_index(model, index)


def convert_to_plain(schema_editor, model, unique_name: str) -> None:
    """The reverse: a plain table with Django's own constraints, data copied over."""
    table = model._meta.db_table
    quote = schema_editor.quote_name
    execute = schema_editor.execute
    execute(f"CREATE TABLE {quote(table + '_old')} (LIKE {quote(table)} INCLUDING DEFAULTS INCLUDING IDENTITY)")
    execute(f"INSERT INTO {quote(table + '_old')} SELECT * FROM {quote(table)}")
    execute(f"DROP TABLE {quote(table)}")
    execute(f"ALTER TABLE {quote(table + '_old')} RENAME TO {quote(table)}")
    execute(f"ALTER TABLE {quote(table)} ADD PRIMARY KEY (id)")
    execute(
        f"ALTER TABLE {quote(table)} ADD CONSTRAINT {quote(unique_name)} UNIQUE (project_id, trace_id, span_id)"
    )
    for index in model._meta.indexes:
        schema_editor.add_index(model, index)
    forget_cache()
