"""Read-side queries for the pages: every one is scoped to the projects a user belongs to."""

from __future__ import annotations

import datetime as dt

from django.db.models import Count, Q

from ingest.models import Project, ToolCall


def projects_for_user(user) -> list[Project]:
    if user.is_superuser:
        return list(Project.objects.all())
    return list(Project.objects.filter(members=user))


def project_summaries(projects: list[Project], since: dt.datetime) -> list[dict]:
    """Per project: tool calls (all / failed) since a time, in one query."""
    ids = [project.pk for project in projects]
    calls = {
        row["project"]: row
        for row in ToolCall.objects.filter(project__in=ids, start_time__gte=since)
        .values("project")
        .annotate(calls=Count("id"), failed=Count("id", filter=Q(ok=False)))
    }
    return [
        {
            "project": project,
            "calls": calls.get(project.pk, {}).get("calls", 0),
            "failed": calls.get(project.pk, {}).get("failed", 0),
        }
        for project in projects
    ]


def recent_failed_calls(projects: list[Project], limit: int = 25) -> list[ToolCall]:
    return list(
        ToolCall.objects.filter(project__in=[p.pk for p in projects], ok=False)
        .select_related("project")
        .only(
            "project__name", "trace_id", "span_id", "start_time", "tool", "error_class", "classified_by",
            "message", "service", "agent", "soft_failure",
        )
        .order_by("-start_time")[:limit]
    )  # fmt: skip
