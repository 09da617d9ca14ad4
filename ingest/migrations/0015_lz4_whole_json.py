"""The JSON text columns that grow past PostgreSQL's 2 kB TOAST threshold (a span's attributes,
events and links; a tool call's arguments and result) are compressed with lz4 instead of pglz.

Only a few large rows are compressed at all, but pglz's attempt on them was 2.6 % of PostgreSQL's
CPU at ingest, where lz4 costs a fraction, and lz4 also reads back faster on the trace page
(docs/benchmarks.md, "Session 10"). Metadata only: rows already stored keep their compression.
New day partitions take the parent's setting; the existing ones are set one by one, since the
parent's does not reach them. A server built without lz4 keeps pglz (nothing changes).
"""

import functools
import importlib

from django.db import migrations

from ingest.partitions import partition_tables

COLUMNS = importlib.import_module("ingest.migrations.0014_whole_json_as_text").COLUMNS


def _compress_with(apps, schema_editor, *, method: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT %s = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'", [method])
        row = cursor.fetchone()
        if not (row and row[0]):
            return
    for parent, columns in COLUMNS.items():
        tables = [parent, *partition_tables(parent)]
        changes = ", ".join(f'ALTER COLUMN "{c}" SET COMPRESSION {method}' for c in columns)
        for table in tables:
            schema_editor.execute(f'ALTER TABLE ONLY "{table}" {changes}')


to_lz4 = functools.partial(_compress_with, method="lz4")
to_pglz = functools.partial(_compress_with, method="pglz")


class Migration(migrations.Migration):
    dependencies = [("ingest", "0014_whole_json_as_text")]

    operations = [migrations.RunPython(to_lz4, to_pglz)]
