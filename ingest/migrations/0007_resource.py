"""Each resource's attributes are stored once (ingest_resource) and spans refer to them.

The data step makes one resource per distinct (project, resource attributes) of the stored
spans and points the spans at it: one grouping scan and, on PostgreSQL, one UPDATE joined
to a temporary map, so a big span table is read twice, not once per resource. The digest
is ingest's own (ingest.records.resource_digest), so ingest finds the migrated resources.
"""

import json

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

from ingest.records import resource_digest


def spans_to_resources(apps, schema_editor):
    connection = schema_editor.connection
    postgres = connection.vendor == "postgresql"
    jsonb = "%s::jsonb" if postgres else "%s"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT project_id, resource_attributes, min(received_at), max(received_at) FROM ingest_span "
            "GROUP BY project_id, resource_attributes"
        )
        groups = cursor.fetchall()
        if not groups:
            return
        resources: dict[tuple[int, bytes], list] = {}  # (project, digest) -> [attributes, first, last]
        mapping = []  # (project, attributes as stored on the spans, digest)
        for project_id, attributes, first_seen, last_seen in groups:
            text = attributes if isinstance(attributes, str) else json.dumps(attributes)
            digest = resource_digest(json.loads(text))
            mapping.append((project_id, text, digest))
            known = resources.setdefault((project_id, digest), [text, first_seen, last_seen])
            known[1], known[2] = min(known[1], first_seen), max(known[2], last_seen)
        cursor.executemany(
            "INSERT INTO ingest_resource (project_id, digest, attributes, first_seen, last_seen) "
            f"VALUES (%s, %s, {jsonb}, %s, %s)",
            [(project_id, digest, *values) for (project_id, digest), values in resources.items()],
        )
        if postgres:
            cursor.execute("CREATE TEMP TABLE tw_resource_map (project_id bigint, attributes jsonb, digest bytea)")
            cursor.executemany("INSERT INTO tw_resource_map VALUES (%s, %s::jsonb, %s)", mapping)
            cursor.execute(
                "UPDATE ingest_span s SET resource_id = r.id FROM tw_resource_map m "
                "JOIN ingest_resource r ON r.project_id = m.project_id AND r.digest = m.digest "
                "WHERE s.project_id = m.project_id AND s.resource_attributes = m.attributes"
            )
            cursor.execute("DROP TABLE tw_resource_map")
        else:  # SQLite: development databases, small
            for project_id, text, digest in mapping:
                cursor.execute(
                    "UPDATE ingest_span SET resource_id = "
                    "(SELECT id FROM ingest_resource WHERE project_id = %s AND digest = %s) "
                    "WHERE project_id = %s AND resource_attributes = %s",
                    [project_id, digest, project_id, text],
                )


def resources_to_spans(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "UPDATE ingest_span SET resource_attributes = COALESCE("
            "(SELECT attributes FROM ingest_resource r WHERE r.id = ingest_span.resource_id), '{}')"
        )


class Migration(migrations.Migration):
    dependencies = [("ingest", "0006_changed_buckets")]

    operations = [
        migrations.CreateModel(
            name="Resource",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("digest", models.BinaryField(max_length=16)),
                ("attributes", models.JSONField(default=dict)),
                ("first_seen", models.DateTimeField(default=django.utils.timezone.now)),
                ("last_seen", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "project",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        to="ingest.project",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("project", "digest"), name="resource_unique_digest")
                ],
            },
        ),
        migrations.AddField(
            model_name="span",
            name="resource",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="ingest.resource",
            ),
        ),
        migrations.RunPython(spans_to_resources, resources_to_spans),
        migrations.AlterField(
            model_name="span",
            name="resource",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="ingest.resource",
            ),
        ),
        migrations.RemoveField(model_name="span", name="resource_attributes"),
    ]
