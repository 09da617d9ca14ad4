"""Two write costs of every span that earned nothing (docs/benchmarks.md, "Ingest at half the CPU").

- A span's attributes, events and links become PostgreSQL `json` (ingest.models.WholeJSONField):
  nothing queries into them, and jsonb's conversion cost ~4 µs a span at ingest.
- On PostgreSQL the span and tool-call tables lose their primary-key index, (id, start_time):
  nothing looks a span or a tool call up by id (they are read by project and trace, or by
  time, through their other indexes; ingest.storage updates a tool call by its unique key),
  and its upkeep cost ~2.5 µs a row. The id columns and their defaults stay, as Django's
  primary keys.

Both run on the partitioned parent, and so on every daily partition (ingest/partitions.py);
the type change rewrites the stored partitions once.
"""

from django.db import migrations

import ingest.models

TABLES = ("ingest_span", "ingest_toolcall")


def drop_primary_keys(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {table}_pkey")


def add_primary_keys(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(f"ALTER TABLE {table} ADD PRIMARY KEY (id, start_time)")


class Migration(migrations.Migration):
    dependencies = [("ingest", "0011_logrecord_session_trace")]

    operations = [
        migrations.AlterField(model_name="span", name="attributes", field=ingest.models.WholeJSONField(default=dict)),
        migrations.AlterField(model_name="span", name="events", field=ingest.models.WholeJSONField(default=list)),
        migrations.AlterField(model_name="span", name="links", field=ingest.models.WholeJSONField(default=list)),
        migrations.RunPython(drop_primary_keys, add_primary_keys),
    ]
