"""The agent access log: who asked what, when, through the MCP server or the tool-health feed (issue 16 item 4)."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ('dashboard', '0008_token_scopes'),
        ('ingest', '0008_log_records'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='AgentAccess',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('surface', models.CharField(choices=[('mcp', 'MCP'), ('feed', 'tool-health feed')], max_length=8)),
                ('name', models.CharField(help_text='The MCP tool or the feed endpoint called.', max_length=128)),
                ('arguments', models.JSONField(blank=True, default=dict)),
                ('outcome', models.CharField(help_text='"ok", or the error class of the answer.', max_length=32)),
                ('duration_ms', models.PositiveIntegerField(default=0)),
                ('at', models.DateTimeField(default=django.utils.timezone.now)),
                ('project', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='ingest.project')),
                ('token', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='dashboard.apitoken')),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-at', '-id'],
                'indexes': [models.Index(fields=['project', '-at'], name='agentaccess_project_at')],
            },
        ),
    ]
