"""Small factory functions for tests (no factory library: three models don't need one)."""

from __future__ import annotations

import itertools

from django.contrib.auth import get_user_model

from ingest.models import Membership, Project
from ingest.services import api_key_create

_counter = itertools.count(1)


def make_project(name: str | None = None, **fields) -> Project:
    n = next(_counter)
    name = name or f"Project {n}"
    return Project.objects.create(name=name, slug=fields.pop("slug", f"project-{n}"), **fields)


def make_key(project: Project | None = None) -> tuple[Project, str]:
    project = project or make_project()
    _, plain = api_key_create(project=project)
    return project, plain


def make_member(username: str = "alice") -> tuple:
    """A user (password pw-<username>-123) who belongs to a new project "Alpha" (slug alpha)."""
    user = get_user_model().objects.create_user(username, password=f"pw-{username}-123")
    project = make_project("Alpha", slug="alpha")
    Membership.objects.create(project=project, user=user)
    return user, project
