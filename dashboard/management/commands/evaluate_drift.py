"""Evaluate drift over a past range as the scheduled job would have: every 15 minutes where the 5-minute rollups
are kept, hourly before (docs/drift.md#past-hours)."""

import datetime as dt

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from dashboard.alerting.evaluation import drift_evaluate_range
from dashboard.management.projects import projects_named
from dashboard.rollups.rows import floor_time


def _moment(value: str) -> dt.datetime:
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"{value!r} is not an ISO 8601 time, e.g. 2025-01-12T14:00Z") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


class Command(BaseCommand):
    help = (
        "Evaluate drift in (--since, --until] (whole hours; default: until the last complete hour) for history "
        "that arrived after its hours were judged, as the job would have: every 15 minutes on the 5-minute rollups "
        "(kept 3 days), hourly before that. Alerts open at the quarter hour they would have opened (an episode "
        "already over is recorded resolved, without notices), and nothing already alerted is alerted again."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", help="a project slug (default: every project)")
        parser.add_argument("--since", required=True, help="ISO 8601, UTC unless it says otherwise")
        parser.add_argument("--until", help="ISO 8601 (default: the last complete hour)")

    def handle(self, *args, project, since, until, **options):
        start = _moment(since)
        end = _moment(until) if until else floor_time(timezone.now(), 3600)
        if end <= start:
            raise CommandError("--until must be after --since")
        for item in projects_named(project):
            made = drift_evaluate_range(project_id=item.pk, since=start, until=end)
            self.stdout.write(f"drift evaluated: project {item.slug}, {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC: "
                              f"{len(made)} alert{'s' if len(made) != 1 else ''}")  # fmt: skip
            for alert in made:
                self.stdout.write(f"  #{alert.pk} {alert.kind} on {alert.tool}, opened {alert.opened_at:%Y-%m-%d %H:%M}"
                                  f" ({alert.status}): {alert.summary}")  # fmt: skip
