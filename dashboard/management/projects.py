"""What the management commands share."""

from django.core.management.base import CommandError

from ingest.models import Project


def projects_named(slug: str | None):
    """Every project, or the one with `slug` (an error naming it when there is none)."""
    projects = Project.objects.all()
    if slug:
        projects = projects.filter(slug=slug)
        if not projects.exists():
            raise CommandError(f"no project with slug {slug!r}")
    return projects


def validation_message(exc) -> str:
    """A service's ValidationError ({field: [messages]}) as one line for a command's error."""
    if hasattr(exc, "message_dict"):
        return "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
    return " ".join(exc.messages)
