"""Raw spans, tool calls and log records go after the project's retention; rollups, alerts and eval
snapshots stay. On PostgreSQL whole day partitions are dropped once every project is
past them; a project keeping less than the longest retention loses its own older rows
by DELETE, which partition pruning confines to those old days.

A resource goes once it has not been seen for longer than the retention plus
resource_margin(): every span that refers to it started before the cutoff, so is gone
too. Its last_seen, renewed by ingest at least hourly while in use, answers that
without scanning the spans (ingest pays nothing), and a resource still in use is
never deleted under a request that refers to it.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db.models import Max

from ingest import partitions, storage
from ingest.models import ChangedBucket, IngestStat, LogRecord, Project, Resource, Span, ToolCall


def resource_margin() -> dt.timedelta:
    """How much later than its last_seen a resource's spans may start: ingest uses a known id
    for up to storage.RESOURCE_TOUCH without renewing last_seen, and a span may start up to
    the allowed clock skew after it is received."""
    return storage.RESOURCE_TOUCH + dt.timedelta(seconds=settings.INGEST_LIMITS.max_future_skew_seconds)


def retention_cutoff(project: Project, now: dt.datetime) -> dt.datetime:
    """Raw data of `project` starting before this moment is past its retention."""
    return now - dt.timedelta(days=project.retention_days)


def retention_apply(*, now: dt.datetime) -> dict[str, int]:
    """Delete what every project's retention has passed; returns counts for the log."""
    longest = Project.objects.aggregate(days=Max("retention_days"))["days"] or settings.DEFAULT_RETENTION_DAYS
    # A day partition goes when all of it is older than the longest retention.
    dropped = partitions.drop_partitions_before((now - dt.timedelta(days=longest)).date())
    deleted = resources = 0
    for project in Project.objects.all():
        cutoff = retention_cutoff(project, now)
        for model in (Span, ToolCall):
            deleted += model.objects.filter(project=project, start_time__lt=cutoff).delete()[0]
        # Log records: a plain table (not partitioned), deleted by time on every database.
        deleted += LogRecord.objects.filter(project=project, time__lt=cutoff).delete()[0]
        ChangedBucket.objects.filter(project=project, bucket_start__lt=cutoff).delete()
        # The health counters (a row per 5 minutes, outcome and reason) of data no longer kept.
        IngestStat.objects.filter(project=project, hour__lt=cutoff).delete()
        resources += Resource.objects.filter(project=project, last_seen__lt=cutoff - resource_margin()).delete()[0]
    return {"partitions_dropped": len(dropped), "rows_deleted": deleted, "resources_deleted": resources}
