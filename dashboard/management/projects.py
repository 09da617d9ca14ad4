"""What the management commands share."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from ingest.models import Membership, Project


def projects_named(slug: str | None):
    """Every project, or the one with `slug` (an error naming it when there is none)."""
    projects = Project.objects.all()
    if slug:
        projects = projects.filter(slug=slug)
        if not projects.exists():
            raise CommandError(f"no project with slug {slug!r}")
    return projects


def user_named(username: str):
    """The user called `username`, or an error naming it (and the command that makes one)."""
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise CommandError(f"no user is called {username!r}; create it first (manage.py adduser)")
    return user


def membership_named(project: Project, username: str) -> Membership:
    """`username`'s membership of `project`, or an error saying they are not a member."""
    membership = Membership.objects.select_related("user").filter(project=project, user__username=username).first()
    if membership is None:
        user_named(username)  # an unknown user is told as such first
        raise CommandError(f"{username!r} is not a member of {project.slug} (add them with manage.py addmember)")
    return membership


def validation_message(exc) -> str:
    """A service's ValidationError ({field: [messages]}) as one line for a command's error."""
    if hasattr(exc, "message_dict"):
        return "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
    return " ".join(exc.messages)
