import datetime as dt

from django.core.management.base import BaseCommand
from django.utils import timezone

from ingest import partitions


class Command(BaseCommand):
    help = "PostgreSQL: create the daily span and tool-call partitions ahead, and optionally drop old ones."

    def add_arguments(self, parser):
        parser.add_argument("--ahead", type=int, default=7, help="days ahead to create (default 7)")
        parser.add_argument(
            "--drop-older-than", type=int, metavar="DAYS", help="drop partitions wholly older than DAYS days"
        )

    def handle(self, *args, ahead: int, drop_older_than: int | None, **options):
        if not partitions.is_partitioned():
            self.stdout.write("This database has no partitions (SQLite); nothing to do.")
            return
        today = timezone.now().date()
        partitions.create_ahead(today, days_ahead=ahead)
        self.stdout.write(f"Partitions exist through {today + dt.timedelta(days=ahead)}.")
        if drop_older_than is not None:
            dropped = partitions.drop_partitions_before(today - dt.timedelta(days=drop_older_than))
            self.stdout.write(f"Dropped {len(dropped)} partition(s): {', '.join(dropped) or 'none'}.")
