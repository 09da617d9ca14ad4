import datetime as dt

import pytest
from django.db import connection

from ingest import partitions

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _no_partitions():
    # Partitions are tables: a flush between tests does not remove them.
    partitions.drop_partitions_before(dt.date(9999, 1, 1))
    yield
    partitions.drop_partitions_before(dt.date(9999, 1, 1))


def test_the_span_and_tool_call_tables_are_partitioned_by_day():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_partkeydef(c.oid) FROM pg_partitioned_table p "
            "JOIN pg_class c ON c.oid = p.partrelid ORDER BY c.relname"
        )
        assert cursor.fetchall() == [
            ("ingest_span", "RANGE (start_time)"),
            ("ingest_toolcall", "RANGE (start_time)"),
        ]


def test_partitions_are_created_ahead_and_on_demand_once():
    today = dt.date(2026, 11, 29)

    partitions.create_ahead(today, days_ahead=3, days_back=1)
    partitions.ensure_partitions([dt.date(2026, 11, 1), today])  # one new, one existing

    expected = [dt.date(2026, 11, 1)] + [today + dt.timedelta(days=d) for d in range(-1, 4)]
    assert partitions.existing_partition_days("ingest_span") == expected
    assert partitions.existing_partition_days("ingest_toolcall") == expected


def test_old_partitions_are_dropped_whole():
    partitions.ensure_partitions([dt.date(2026, 10, 1), dt.date(2026, 10, 2), dt.date(2026, 11, 29)])

    dropped = partitions.drop_partitions_before(dt.date(2026, 10, 2))

    assert sorted(dropped) == ["ingest_span_p20261001", "ingest_toolcall_p20261001"]
    assert partitions.existing_partition_days("ingest_span") == [dt.date(2026, 10, 2), dt.date(2026, 11, 29)]


def test_a_span_row_lands_in_its_days_partition():
    from ingest.models import Resource, Span
    from tests.factories import make_project

    project = make_project()
    resource = Resource.objects.create(project=project, digest=b"r" * 16)
    start = dt.datetime(2026, 11, 28, 23, 59, 59, 999999, tzinfo=dt.UTC)
    partitions.ensure_partitions([start.date()])
    Span.objects.create(project=project, trace_id="a" * 32, span_id="b" * 16, name="x", start_time=start, end_time=start, resource=resource)

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM ingest_span_p20261128")
        assert cursor.fetchone()[0] == 1
    assert Span.objects.get().start_time == start  # microseconds survive


def test_the_partitions_command_creates_ahead_and_drops_old_ones():
    from io import StringIO

    from django.core.management import call_command
    from django.utils import timezone

    today = timezone.now().date()
    partitions.ensure_partitions([today - dt.timedelta(days=40)])
    out = StringIO()

    call_command("partitions", "--ahead", "2", "--drop-older-than", "30", stdout=out)

    assert partitions.existing_partition_days("ingest_span") == [today + dt.timedelta(days=d) for d in range(-1, 3)]
    assert "Dropped 2 partition(s)" in out.getvalue()
