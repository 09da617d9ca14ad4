"""A span's attributes, events and links and a tool call's arguments and result become PostgreSQL
`text` (ingest.models.WholeJSONField): written once by ingest's own JSON encoder and only ever read
whole, so `json`'s check of every character on input (~10 % of PostgreSQL's CPU at ingest) bought
nothing (docs/benchmarks.md, "Session 10").

It runs on the partitioned parents, and so on every daily partition: like 0012 and 0013 it rewrites
the stored partitions and rebuilds their indexes once, under an exclusive lock (~15 µs a stored span
here: 8.8 s for 600,000 spans with their tool calls). A database migrated from scratch already has
text here (0012 and 0013 create the columns with the field's current type), and altering text to
text rewrites nothing. SQLite keeps its text.
"""

from django.db import migrations

COLUMNS = {
    "ingest_span": ("attributes", "events", "links"),
    "ingest_toolcall": ("arguments", "result"),
}


def _retype(schema_editor, kind: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, columns in COLUMNS.items():
        changes = ", ".join(f'ALTER COLUMN "{c}" TYPE {kind} USING "{c}"::{kind}' for c in columns)
        schema_editor.execute(f'ALTER TABLE "{table}" {changes}')


def to_text(apps, schema_editor):
    _retype(schema_editor, "text")


def to_json(apps, schema_editor):
    _retype(schema_editor, "json")


class Migration(migrations.Migration):
    dependencies = [("ingest", "0013_json_and_byte_ids")]

    operations = [migrations.RunPython(to_text, to_json)]
