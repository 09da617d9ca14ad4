"""Resources: each resource's attributes stored once per project, spans referring to them."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.conf import settings
from django.db import connections, transaction

from ingest import otlp, storage
from ingest.models import Resource, Span
from ingest.records import ResourceRecord, resource_digest
from ingest.retention import resource_margin, retention_apply
from ingest.services import spans_ingest
from tests.factories import make_project
from tests.otlp_builders import json_bytes, json_request, json_span

NOW = dt.datetime(2026, 11, 29, 12, tzinfo=dt.UTC)
NOW_NS = int(NOW.timestamp()) * 10**9
TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture(autouse=True)
def _no_remembered_resources():
    storage.forget_resources()
    yield
    storage.forget_resources()


def request(*resources: tuple[dict, list[int]], start_ns: int = NOW_NS - 60 * 10**9):
    """[(resource attributes, span numbers)] -> a decoded request, one tool span per number."""
    document = json_request(
        [
            (attrs, [json_span(TRACE, f"{n:016x}", "execute_tool t", attrs={"gen_ai.tool.name": "t"}, start_ns=start_ns) for n in numbers])
            for attrs, numbers in resources
        ]
    )
    return otlp.decode_request(json_bytes(document), otlp.JSON)


def ingest(project, *resources, now: dt.datetime = NOW, **kwargs):
    return spans_ingest(project=project, request=request(*resources, **kwargs), limits=settings.INGEST_LIMITS, now=now)


def record(attributes: dict) -> ResourceRecord:
    return ResourceRecord(attributes=attributes, digest=resource_digest(attributes))


def test_the_digest_ignores_key_order_at_every_depth_and_keeps_huge_integers():
    assert resource_digest({"a": 1, "b": {"x": 1, "y": 2}}) == resource_digest({"b": {"y": 2, "x": 1}, "a": 1})
    assert resource_digest({"a": 1}) != resource_digest({"a": "1"})
    assert len(resource_digest({"n": 2**70})) == 16 and resource_digest({"n": 2**70}) != resource_digest({"n": 2**71})


@pytest.mark.django_db
def test_a_resource_is_stored_once_for_all_its_spans_and_requests():
    project = make_project()

    ingest(project, ({"service.name": "a", "host.name": "h1"}, [1, 2, 3]))
    ingest(project, ({"host.name": "h1", "service.name": "a"}, [4, 5]))

    resource = Resource.objects.get()
    assert (resource.project_id, resource.attributes) == (project.pk, {"service.name": "a", "host.name": "h1"})
    assert set(Span.objects.values_list("resource_id", flat=True)) == {resource.pk}


@pytest.mark.django_db
def test_the_same_attributes_in_two_projects_are_two_resources():
    first, second = make_project(), make_project()

    ingest(first, ({"service.name": "a"}, [1]))
    ingest(second, ({"service.name": "a"}, [1]))

    assert sorted(Resource.objects.values_list("project_id", flat=True)) == sorted([first.pk, second.pk])


@pytest.mark.django_db
def test_each_span_of_a_request_with_several_resources_reads_its_own():
    project = make_project()

    ingest(project, ({"service.name": "a"}, [1, 2]), ({"service.name": "b", "region": "eu"}, [3]), ({"service.name": "a"}, [4]))

    stored = dict(Span.objects.with_resource_attributes().values_list("span_id", "resource_attributes"))
    assert stored == {
        f"{1:016x}": {"service.name": "a"},
        f"{2:016x}": {"service.name": "a"},
        f"{3:016x}": {"service.name": "b", "region": "eu"},
        f"{4:016x}": {"service.name": "a"},
    }
    assert Resource.objects.count() == 2


@pytest.mark.django_db
def test_a_resource_without_spans_is_not_stored():
    project = make_project()

    ingest(project, ({"service.name": "empty"}, []), ({"service.name": "a"}, [1]))

    assert list(Resource.objects.values_list("attributes", flat=True)) == [{"service.name": "a"}]


@pytest.mark.django_db
def test_a_remembered_resource_costs_no_query(django_capture_on_commit_callbacks, django_assert_num_queries):
    project = make_project()
    resource = record({"service.name": "a"})
    with django_capture_on_commit_callbacks(execute=True):
        first = storage.resource_ids(project.pk, [resource], NOW)

    with django_assert_num_queries(0):
        again = storage.resource_ids(project.pk, [resource, None, resource], NOW + dt.timedelta(minutes=59))

    assert again == first == {resource.digest: Resource.objects.get().pk}


@pytest.mark.django_db
def test_a_resource_not_stored_yet_is_remembered_only_after_commit(django_capture_on_commit_callbacks):
    project = make_project()
    with django_capture_on_commit_callbacks() as callbacks:
        storage.resource_ids(project.pk, [record({"service.name": "a"})], NOW)

    assert storage._resources == {}  # a rollback now would leave a remembered id pointing at nothing
    for callback in callbacks:
        callback()
    assert list(storage._resources.values()) == [(Resource.objects.get().pk, NOW)]


@pytest.mark.django_db
def test_a_remembered_resource_renews_its_last_seen_after_an_hour(django_capture_on_commit_callbacks):
    project = make_project()
    resource = record({"service.name": "a"})
    with django_capture_on_commit_callbacks(execute=True):
        storage.resource_ids(project.pk, [resource], NOW)
    with django_capture_on_commit_callbacks(execute=True):
        storage.resource_ids(project.pk, [resource], NOW + dt.timedelta(minutes=30))
    assert Resource.objects.get().last_seen == NOW

    later = NOW + storage.RESOURCE_TOUCH
    with django_capture_on_commit_callbacks(execute=True):
        storage.resource_ids(project.pk, [resource], later)

    stored = Resource.objects.get()
    assert (stored.first_seen, stored.last_seen) == (NOW, later)


@pytest.mark.django_db
def test_retention_deletes_a_resource_only_once_its_spans_are_past_it():
    project = make_project(retention_days=7)
    day = dt.timedelta(days=1)
    # Seen last 7 days + margin ago: every span that can refer to it started before the cutoff.
    gone = NOW - 7 * day - resource_margin() - dt.timedelta(minutes=1)
    ingest(project, ({"service.name": "gone"}, [1]), now=gone, start_ns=int(gone.timestamp()) * 10**9 - 10**9)
    # Seen a little later: a span of it may still start within the retention, so it stays.
    kept = gone + dt.timedelta(minutes=2)
    ingest(project, ({"service.name": "kept"}, [2]), now=kept, start_ns=int(kept.timestamp()) * 10**9 - 10**9)
    # Its first span is long gone, but it was seen again today.
    ingest(project, ({"service.name": "busy"}, [3]), now=gone, start_ns=int(gone.timestamp()) * 10**9 - 10**9)
    ingest(project, ({"service.name": "busy"}, [4]), now=NOW)

    counts = retention_apply(now=NOW)

    assert counts["resources_deleted"] == 1
    names = sorted(attributes["service.name"] for attributes in Resource.objects.values_list("attributes", flat=True))
    assert names == ["busy", "kept"]
    referenced = set(Span.objects.values_list("resource_id", flat=True))
    assert referenced <= set(Resource.objects.values_list("pk", flat=True))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_storing_the_same_new_resource_both_get_its_one_id():
    project = make_project()
    resources = [record({"service.name": "new", "host.name": "h"}), record({"service.name": "other"})]
    barrier = threading.Barrier(2)
    results, errors = [], []

    def worker(order):
        try:
            barrier.wait()
            with transaction.atomic():
                results.append(storage.resource_ids(project.pk, order, NOW))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(order,)) for order in (resources, resources[::-1])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert errors == []
    assert results[0] == results[1]
    assert Resource.objects.count() == 2
    storage.forget_resources()



@pytest.mark.django_db
def test_the_admin_lists_and_shows_resources_read_only(admin_client):
    attributes = {"service.name": "<b>a</b>"}
    resource = Resource.objects.create(project=make_project(), digest=resource_digest(attributes), attributes=attributes)

    listing = admin_client.get("/admin/ingest/resource/")
    page = admin_client.get(f"/admin/ingest/resource/{resource.pk}/change/")

    assert listing.status_code == page.status_code == 200
    assert resource_digest(attributes).hex() in page.content.decode() and "<b>a</b>" not in page.content.decode()
    assert admin_client.get("/admin/ingest/resource/add/").status_code == 403
