"""Run the scheduled jobs once, in this process, without a worker: for scripts, CI and debugging."""

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from dashboard.alerting import delivery, evaluation
from dashboard.management.projects import projects_named
from dashboard.rollups import refresh
from ingest import partitions
from ingest.retention import retention_apply

JOBS = ("rollups", "drift", "deliveries", "partitions", "retention")


class Command(BaseCommand):
    help = "Run the periodic jobs once now (default: rollups, drift, deliveries), optionally for one project."

    def add_arguments(self, parser):
        parser.add_argument("jobs", nargs="*", help=f"which jobs (default: rollups drift deliveries; all: {' '.join(JOBS)})")
        parser.add_argument("--project", help="a project slug (rollups and drift only)")

    def handle(self, *args, jobs, project, **options):
        unknown = sorted(set(jobs) - set(JOBS))
        if unknown:
            raise CommandError(f"unknown job(s): {', '.join(unknown)}; choose from {', '.join(JOBS)}")
        jobs = jobs or ["rollups", "drift", "deliveries"]
        projects = projects_named(project)
        now = timezone.now()
        ids = list(projects.values_list("pk", flat=True))
        if "partitions" in jobs:
            partitions.create_ahead(now.date(), days_ahead=7)
            self.stdout.write("partitions: created a week ahead")
        if "rollups" in jobs:
            for project_id in ids:
                written = refresh.rollups_refresh(project_id=project_id, now=now, everything=True)
                state = "busy (another run holds the project)" if written is None else f"{written} rows"
                self.stdout.write(f"rollups: project {project_id}: {state}")
        if "drift" in jobs:
            for project_id in ids:
                findings = evaluation.drift_evaluate(project_id=project_id, now=now)
                self.stdout.write(f"drift: project {project_id}: {findings} finding(s) applied to alerts")
        if "deliveries" in jobs:
            due = delivery.deliveries_due(now=now)
            for delivery_id in due:
                delivery.delivery_send(delivery_id=delivery_id, now=now)
            self.stdout.write(f"deliveries: {len(due)} due, tried")
        if "retention" in jobs:
            counts = retention_apply(now=now)
            self.stdout.write("retention: " + ", ".join(f"{name} {count}" for name, count in counts.items()))
