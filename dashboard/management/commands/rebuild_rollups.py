"""Recompute a project's rollups over a range from the stored tool calls, several days at once."""

import datetime as dt

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from dashboard.management.projects import projects_named
from dashboard.rollups.refresh import rollups_rebuild
from dashboard.rollups.rows import HOUR, floor_time


class Command(BaseCommand):
    help = (
        "Recompute every rollup bucket of the last --days days (default: the project's retention) from the stored "
        "tool calls: for history loaded without the ingest queue, or after a change to the rollup code."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", help="a project slug (default: every project)")
        parser.add_argument("--days", type=int, help="how many days back (default: the project's retention)")
        parser.add_argument("--workers", type=int, default=2, help="days recomputed at once (default 2)")

    def handle(self, *args, project, days, workers, **options):
        if workers < 1 or (days is not None and days < 1):
            raise CommandError("--workers and --days must be at least 1")
        projects = projects_named(project)
        now = timezone.now()
        end = floor_time(now, 3600) + HOUR
        for item in projects:
            start = floor_time(now - dt.timedelta(days=days or item.retention_days), 3600)
            written = rollups_rebuild(project_id=item.pk, start=start, end=end, now=now, workers=workers)
            state = "busy (another run holds the project)" if written is None else f"{written} rows"
            self.stdout.write(f"rollups rebuilt: project {item.slug}: {state}")
