"""Migration 0007: stored spans' resource attributes become resources, and back."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from ingest import partitions, storage
from ingest.records import resource_digest

BEFORE = [("ingest", "0006_changed_buckets")]
AFTER = [("ingest", "0007_resource")]
START = dt.datetime(2026, 1, 5, 10, tzinfo=dt.UTC)


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


@pytest.fixture
def at_0006(transactional_db):
    partitions.ensure_partitions([START.date()])
    apps = migrate(BEFORE)
    yield apps
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
    partitions.drop_partitions_before(dt.date(9999, 1, 1))
    partitions.forget_cache()
    storage.forget_resources()


def test_each_distinct_resource_of_each_project_becomes_one_resource_and_comes_back(at_0006):
    Project, Span = at_0006.get_model("ingest", "Project"), at_0006.get_model("ingest", "Span")
    first = Project.objects.create(name="First", slug="first")
    second = Project.objects.create(name="Second", slug="second")
    a, b = {"service.name": "a", "n": 1}, {"service.name": "b", "nested": {"y": [1, 2], "x": "é"}}
    spans = [(first, "1", a), (first, "2", a), (first, "3", b), (second, "1", a)]
    for project, span_id, attributes in spans:
        Span.objects.create(project=project, trace_id="f" * 32, span_id=span_id * 16, name="s", start_time=START,
                            end_time=START, resource_attributes=attributes, received_at=START)  # fmt: skip

    apps = migrate(AFTER)

    Resource, Span = apps.get_model("ingest", "Resource"), apps.get_model("ingest", "Span")
    resources = {(r.project_id, bytes(r.digest)): r for r in Resource.objects.all()}
    assert set(resources) == {(first.pk, resource_digest(a)), (first.pk, resource_digest(b)), (second.pk, resource_digest(a))}
    assert all(r.first_seen == r.last_seen == START for r in resources.values())
    for project, span_id, attributes in spans:
        span = Span.objects.get(project_id=project.pk, span_id=span_id * 16)
        assert span.resource_id == resources[(project.pk, resource_digest(attributes))].pk
        assert Resource.objects.get(pk=span.resource_id).attributes == attributes

    apps = migrate(BEFORE)

    Span = apps.get_model("ingest", "Span")
    back = {(span.project_id, span.span_id): span.resource_attributes for span in Span.objects.all()}
    assert back == {(project.pk, span_id * 16): attributes for project, span_id, attributes in spans}
