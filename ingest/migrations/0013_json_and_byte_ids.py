"""Two more write costs of every span (docs/benchmarks.md, "Ingest at half the CPU").

- A tool call's arguments and result become PostgreSQL `json` (ingest.models.WholeJSONField), as
  a span's attributes did in 0012: written once and only ever read whole (the trace page, the
  explorer's call view, promoting a call to an eval case, the replay), never looked into by a
  query; jsonb's conversion of their ~230 characters cost ~5 µs a tool call at ingest.
  `contract` stays jsonb: the rollup job reads its keys in SQL.
- The trace and span ids of spans and tool calls are compared byte by byte (collation "C" on
  PostgreSQL, ingest.models.HexIdField): their unique indexes compared them through strcoll().

Both run on the partitioned parents, and so on every daily partition; they rewrite the stored
partitions and rebuild their indexes once.
"""

from django.db import migrations

import ingest.models


class Migration(migrations.Migration):
    dependencies = [("ingest", "0012_hot_path")]

    operations = [
        migrations.AlterField(
            model_name="toolcall", name="arguments", field=ingest.models.WholeJSONField(blank=True, null=True)
        ),
        migrations.AlterField(
            model_name="toolcall", name="result", field=ingest.models.WholeJSONField(blank=True, null=True)
        ),
        migrations.AlterField(model_name="span", name="trace_id", field=ingest.models.HexIdField(max_length=32)),
        migrations.AlterField(model_name="span", name="span_id", field=ingest.models.HexIdField(max_length=16)),
        migrations.AlterField(model_name="toolcall", name="trace_id", field=ingest.models.HexIdField(max_length=32)),
        migrations.AlterField(model_name="toolcall", name="span_id", field=ingest.models.HexIdField(max_length=16)),
    ]
