"""Crash-safe rollup claims (issue 14 item 1): a queued bucket is leased by the rollup run
that claims it (claimed_at, claimed_by) and deleted only once its rows are written, instead
of being deleted before the recompute. Both columns are cheap to add (a null and a constant
default: no table rewrite on PostgreSQL); the database default keeps raw inserts of
(project_id, bucket_start) working."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [('ingest', '0008_log_records')]

    operations = [
        migrations.AddField(
            model_name='changedbucket',
            name='claimed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='changedbucket',
            name='claimed_by',
            field=models.CharField(blank=True, db_default='', default='', max_length=64),
        ),
    ]
