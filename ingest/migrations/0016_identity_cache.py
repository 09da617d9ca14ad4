"""The identity sequences of the tables ingest writes a row into for every span, tool call and log
record hand out their ids 1,000 at a time to each connection (CACHE 1000) instead of one by one.

Nothing reads these ids (rows are found by project, trace and span id; pages order by time), but
COPY still draws one per row, and with a cache of 1 each draw locks the sequence's page and every
32nd writes WAL: 0.27 µs a row against 0.10 with the cache (docs/benchmarks.md, "Session 11"). With a
cache the ids are still unique, but no longer in commit order across connections, and a closed
connection leaves a gap of what it had not used. Metadata only.
"""

import functools

from django.db import migrations

TABLES = ("ingest_span", "ingest_toolcall", "ingest_logrecord")


def _cache(apps, schema_editor, *, size: int) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "id" SET CACHE {size}')


class Migration(migrations.Migration):
    dependencies = [("ingest", "0015_lz4_whole_json")]

    operations = [migrations.RunPython(functools.partial(_cache, size=1000), functools.partial(_cache, size=1))]
