"""Log records keep the derived trace of the agent session they belong to (docs/contract/logs.md#sessions)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ingest", "0010_ingest_cuts")]

    operations = [
        migrations.AddField(
            model_name="logrecord",
            name="session_trace_id",
            field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AddIndex(
            model_name="logrecord",
            index=models.Index(
                condition=models.Q(("session_trace_id", ""), _negated=True),
                fields=["project", "session_trace_id"],
                name="logrecord_session_trace",
            ),
        ),
    ]
