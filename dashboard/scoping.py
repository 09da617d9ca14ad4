"""Every page and API call is scoped to the user's projects: an outsider gets 404, never data."""

from __future__ import annotations

from django.http import Http404

from ingest.models import Membership, Project


def projects_for_user(user) -> list[Project]:
    if not user.is_authenticated:
        return []
    if user.is_superuser:
        return list(Project.objects.order_by("name"))
    return list(Project.objects.filter(members=user).order_by("name"))


def project_for_user(user, slug: str) -> Project:
    """The project with this slug if the user may see it; otherwise 404 (the same answer as no such project)."""
    if not user.is_authenticated:
        raise Http404("no such project")
    query = Project.objects.filter(slug=slug)
    if not user.is_superuser:
        query = query.filter(members=user)
    project = query.first()
    if project is None:
        raise Http404("no such project")
    return project


def is_owner(user, project: Project) -> bool:
    """Owners (and superusers) change settings, keys, channels and members."""
    if user.is_superuser:
        return True
    return Membership.objects.filter(project=project, user=user, role=Membership.Role.OWNER).exists()
