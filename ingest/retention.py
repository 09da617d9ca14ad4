"""Raw spans and tool calls go after the project's retention; rollups, alerts and eval
snapshots stay. On PostgreSQL whole day partitions are dropped once every project is
past them; a project keeping less than the longest retention loses its own older rows
by DELETE, which partition pruning confines to those old days.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import Max

from ingest import partitions
from ingest.models import ChangedBucket, Project, Span, ToolCall


def retention_cutoff(project: Project, now: dt.datetime) -> dt.datetime:
    """Raw data of `project` starting before this moment is past its retention."""
    return now - dt.timedelta(days=project.retention_days)


def retention_apply(*, now: dt.datetime) -> dict[str, int]:
    """Delete what every project's retention has passed; returns counts for the log."""
    longest = Project.objects.aggregate(days=Max("retention_days"))["days"] or settings.DEFAULT_RETENTION_DAYS
    # A day partition goes when all of it is older than the longest retention.
    dropped = partitions.drop_partitions_before((now - dt.timedelta(days=longest)).date())
    deleted = 0
    for project in Project.objects.all():
        cutoff = retention_cutoff(project, now)
        for model in (Span, ToolCall):
            deleted += model.objects.filter(project=project, start_time__lt=cutoff).delete()[0]
        ChangedBucket.objects.filter(project=project, bucket_start__lt=cutoff).delete()
    return {"partitions_dropped": len(dropped), "rows_deleted": deleted}
