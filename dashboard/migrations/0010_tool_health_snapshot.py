"""Tool-health feed snapshots (issue 16 item 2): one stored feed document per project (docs/contract/tool-health.md)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ('dashboard', '0009_agent_access_log'),
        ('ingest', '0008_log_records'),
    ]

    operations = [
        migrations.CreateModel(
            name='ToolHealthSnapshot',
            fields=[
                ('project', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='ingest.project')),
                ('payload', models.TextField(help_text="The feed's JSON document, as served.")),
                ('etag', models.CharField(help_text='A strong ETag of the payload, quoted.', max_length=66)),
                ('computed_at', models.DateTimeField()),
            ],
        ),
    ]
