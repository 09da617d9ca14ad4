"""On PostgreSQL, turn the span and tool-call tables into daily range partitions.

SQLite keeps plain tables. The SQL lives in ingest.partitions, beside its helpers.
"""

from django.db import migrations

from ingest.partitions import convert_to_partitioned, convert_to_plain

TABLES = (("Span", "span_unique_ids"), ("ToolCall", "toolcall_unique_ids"))


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for model_name, unique_name in TABLES:
        convert_to_partitioned(schema_editor, apps.get_model("ingest", model_name), unique_name)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for model_name, unique_name in TABLES:
        convert_to_plain(schema_editor, apps.get_model("ingest", model_name), unique_name)


class Migration(migrations.Migration):
    # DDL on partitioned tables must not share a transaction with the CREATE TABLEs before it.
    atomic = True

    dependencies = [("ingest", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards)]
