"""Policy replay results (issue 17, docs/replay.md): the ReplayResult table."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [('dashboard', '0010_tool_health_snapshot'), ('ingest', '0008_log_records')]

    operations = [
        migrations.CreateModel(
            name='ReplayResult',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tool', models.CharField(blank=True, default='', max_length=256)),
                ('policy', models.CharField(blank=True, default='', max_length=32)),
                ('start', models.DateTimeField()),
                ('end', models.DateTimeField()),
                ('params_hash', models.CharField(max_length=64)),
                ('params', models.JSONField(blank=True, default=dict)),
                ('fingerprint', models.CharField(blank=True, default='', max_length=64)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('done', 'Done'), ('failed', 'Failed')], default='queued', max_length=8)),
                ('progress', models.PositiveSmallIntegerField(default=0)),
                ('result', models.JSONField(blank=True, null=True)),
                ('error', models.TextField(blank=True, default='')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('computed_at', models.DateTimeField(blank=True, null=True)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='ingest.project')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('project', 'tool', 'policy', 'start', 'end', 'params_hash'), name='replayresult_unique')],
            },
        ),
    ]
