"""Counts of what the input bounds cut (issue 14 item 3): IngestStat's "cut" outcome, one counter
per limit (docs/contract/limits.md#what-was-cut). Only the choices change; no column or row does."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [('ingest', '0009_changed_bucket_lease')]

    operations = [
        migrations.AlterField(
            model_name='ingeststat',
            name='outcome',
            field=models.CharField(
                choices=[
                    ('accepted', 'Accepted'),
                    ('duplicate', 'Duplicate'),
                    ('rejected', 'Rejected'),
                    ('refused', 'Refused'),
                    ('cut', 'Cut'),
                ],
                max_length=16,
            ),
        ),
    ]
