"""The rollup queue holds 5-minute buckets instead of hours (dashboard.rollups.rollups_refresh
recomputes 5 minutes at a time): each queued hour becomes its twelve buckets."""

import datetime as dt

from django.db import migrations, models


def hours_to_buckets(apps, schema_editor):
    ChangedBucket = apps.get_model("ingest", "ChangedBucket")
    hours = list(ChangedBucket.objects.values_list("project_id", "bucket_start"))
    ChangedBucket.objects.bulk_create(
        [
            ChangedBucket(project_id=project_id, bucket_start=hour + dt.timedelta(minutes=5 * n))
            for project_id, hour in hours
            for n in range(1, 12)
        ],
        ignore_conflicts=True,
    )


def buckets_to_hours(apps, schema_editor):
    ChangedBucket = apps.get_model("ingest", "ChangedBucket")
    for bucket in ChangedBucket.objects.all():
        hour = bucket.bucket_start.replace(minute=0, second=0, microsecond=0)
        if hour != bucket.bucket_start:
            ChangedBucket.objects.get_or_create(project_id=bucket.project_id, bucket_start=hour)
            bucket.delete()


class Migration(migrations.Migration):
    dependencies = [
        ("ingest", "0005_toolcall_explorer_indexes"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="changedhour", name="changedhour_unique"),
        migrations.RenameModel(old_name="ChangedHour", new_name="ChangedBucket"),
        migrations.RenameField(model_name="changedbucket", old_name="hour", new_name="bucket_start"),
        migrations.AddConstraint(
            model_name="changedbucket",
            constraint=models.UniqueConstraint(fields=("project", "bucket_start"), name="changedbucket_unique"),
        ),
        migrations.RunPython(hours_to_buckets, buckets_to_hours),
    ]
