"""Small factory functions for tests (no factory library: three models don't need one).

The users and their project (owner, member, outsider, project) are fixtures: tests/conftest.py.
"""

from __future__ import annotations

import itertools

from ingest.models import Project
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
