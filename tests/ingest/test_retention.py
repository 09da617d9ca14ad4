import datetime as dt

import pytest
from django.conf import settings

from dashboard.models import ToolRollup
from demo.quickstart import demo_request
from ingest import partitions
from ingest.models import IngestStat, Span, ToolCall
from ingest.retention import retention_apply
from ingest.services import spans_ingest
from tests.factories import make_project

NOW = dt.datetime(2026, 11, 29, 12, tzinfo=dt.UTC)


def load(project, days_ago: int):
    moment = NOW - dt.timedelta(days=days_ago)
    spans_ingest(project=project, request=demo_request(seed=days_ago, traces=6, hours=2, now_ns=int(moment.timestamp()) * 10**9),
                 limits=settings.INGEST_LIMITS, now=NOW)  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_raw_rows_past_each_projects_retention_go_and_rollups_stay():
    partitions.drop_partitions_before(dt.date(9999, 1, 1))
    partitions.forget_cache()
    short, long = make_project(retention_days=7), make_project(retention_days=30)
    for project in (short, long):
        load(project, days_ago=20)
        load(project, days_ago=1)
    ToolRollup.objects.create(project=short, resolution=3600, bucket_start=NOW - dt.timedelta(days=20), tool="t", service="s", calls=3)

    retention_apply(now=NOW)

    assert not Span.objects.filter(project=short, start_time__lt=NOW - dt.timedelta(days=7)).exists()
    assert Span.objects.filter(project=short).exists() and ToolCall.objects.filter(project=short).exists()
    assert Span.objects.filter(project=long, start_time__lt=NOW - dt.timedelta(days=7)).exists()
    assert ToolRollup.objects.filter(project=short).count() == 1
    partitions.drop_partitions_before(dt.date(9999, 1, 1))
    partitions.forget_cache()


@pytest.mark.django_db
def test_ingest_health_counters_past_the_retention_go():
    project = make_project(retention_days=7)
    for days_ago in (20, 1):
        IngestStat.objects.create(project=project, hour=NOW - dt.timedelta(days=days_ago), outcome=IngestStat.Outcome.ACCEPTED,
                                  reason="", count=5)  # fmt: skip

    retention_apply(now=NOW)

    assert list(IngestStat.objects.values_list("hour", flat=True)) == [NOW - dt.timedelta(days=1)]
    partitions.drop_partitions_before(dt.date(9999, 1, 1))
    partitions.forget_cache()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_day_partitions_past_the_longest_retention_are_dropped():
    partitions.drop_partitions_before(dt.date(9999, 1, 1))
    partitions.forget_cache()
    project = make_project(retention_days=10)
    load(project, days_ago=9)
    partitions.ensure_partitions([(NOW - dt.timedelta(days=12)).date()])

    result = retention_apply(now=NOW)

    assert result["partitions_dropped"] == 2  # the span and tool-call tables' day 12 days ago
    assert min(partitions.existing_partition_days("ingest_span")) >= (NOW - dt.timedelta(days=10)).date()
    partitions.drop_partitions_before(dt.date(9999, 1, 1))
    partitions.forget_cache()
