"""What every project page shares: the scoped project, the range and filters from the URL."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils import timezone

from dashboard import scoping, timerange
from ingest.models import Project


@dataclass
class PageScope:
    project: Project
    time_range: timerange.TimeRange
    filters: timerange.Filters
    # A range the user asked for that could not be used: shown above the page, which falls back to the default.
    range_error: str = ""
    projects: list[Project] = field(default_factory=list)

    def querystring(self, **extra) -> str:
        return timerange.querystring(self.time_range, self.filters, **extra)

    def context(self, **extra) -> dict:
        return {
            "project": self.project,
            "projects": self.projects,
            "time_range": self.time_range,
            "filters": self.filters,
            "range_error": self.range_error,
            "range_presets": timerange.PRESET_LABELS,
            "keep": self.querystring(),
            **extra,
        }


def page_scope(request, slug: str) -> PageScope:
    """The project (404 unless the user is a member), range and filters of a project page."""
    project = scoping.project_for_user(request.user, slug)
    now = timezone.now()
    error = ""
    try:
        time_range = timerange.parse_range(request.GET, now)
    except timerange.RangeError as exc:
        error = str(exc)
        time_range = timerange.parse_range({}, now)
    return PageScope(
        project=project,
        time_range=time_range,
        filters=timerange.parse_filters(request.GET),
        range_error=error,
        projects=scoping.projects_for_user(request.user),
    )


def step_label(seconds: int) -> str:
    """A chart step in words: "5 minutes", "hour", "6 hours", "day", "week"."""
    if seconds % 86400 == 0:
        days = seconds // 86400
        return "day" if days == 1 else ("week" if days == 7 else f"{days} days")
    if seconds % 3600 == 0:
        return "hour" if seconds == 3600 else f"{seconds // 3600} hours"
    return f"{seconds // 60} minutes"
