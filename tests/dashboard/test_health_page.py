"""The ingest health page: arrivals per hour by outcome, refusals by reason, the project's keys."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import pytest
from django.utils import timezone

from dashboard.rollups.rows import floor_time
from ingest.models import ApiKey, IngestStat, Membership
from ingest.services import api_key_create, api_key_revoke, ingest_stats_add
from tests.factories import make_project

pytestmark = pytest.mark.django_db
HOSTILE = "<script>alert(1)</script><b>x</b>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;"
HOUR = dt.timedelta(hours=1)


def stat(project, outcome: str, count: int, reason: str = "", hours_ago: int = 0) -> IngestStat:
    hour = floor_time(timezone.now(), 3600) - hours_ago * HOUR
    return IngestStat.objects.create(project=project, hour=hour, outcome=outcome, reason=reason, count=count)


def some_traffic(project) -> None:
    stat(project, "accepted", 900, hours_ago=3)
    stat(project, "accepted", 100)
    stat(project, "duplicate", 7)
    stat(project, "rejected", 4, "span start is older than the project's retention", hours_ago=3)
    stat(project, "refused", 2, "415 unsupported media type text/plain")


def test_the_page_charts_each_outcome_and_totals_them_over_the_range(member_client, project):
    some_traffic(project)
    stat(project, "accepted", 5000, hours_ago=30)  # outside the default 24 h

    response = member_client.get("/p/alpha/health/")
    html = response.content.decode()

    assert response.context["health"].totals == {"accepted": 1000, "duplicate": 7, "rejected": 4, "refused": 2}
    assert 'data-figure="ingest-health"' in html and 'id="ingest-health"' in html
    names = [trace["name"] for trace in response.context["figure"]["data"]]
    assert names == ["accepted spans", "duplicate spans", "rejected spans", "refused requests"]
    assert "Refused requests" in html


def test_totals_read_with_thousands_separators_and_only_problems_above_zero_are_coloured(member_client, project):
    stat(project, "accepted", 20076)
    stat(project, "refused", 3, "415 unsupported media type text/plain")

    html = member_client.get("/p/alpha/health/").content.decode()

    assert "<dd>20,076</dd>" in html
    assert 'class="total total-refused nonzero"' in html
    assert 'class="total total-rejected"' in html  # 0 rejected: not in the alarm colour


def test_the_num_filter_writes_counts_the_same_way_everywhere():
    from dashboard.templatetags.toolwatch import num

    assert [num(20076), num(0), num(None), num(1234.0), num(12.5), num("7")] == ["20,076", "0", "—", "1,234", "12.5", "7"]


def test_the_range_of_the_page_is_the_range_counted(member_client, project):
    stat(project, "accepted", 5000, hours_ago=30)

    week = member_client.get("/p/alpha/health/?range=7d")
    day = member_client.get("/p/alpha/health/?range=24h")

    assert week.context["health"].totals["accepted"] == 5000
    assert day.context["health"].totals["accepted"] == 0


def test_rejections_and_refusals_are_listed_by_reason(member_client, project):
    some_traffic(project)
    stat(project, "rejected", 3, "span start is older than the project's retention", hours_ago=1)

    response = member_client.get("/p/alpha/health/")
    html = response.content.decode()

    reasons = [(r.outcome, r.reason, r.count) for r in response.context["health"].reasons]
    assert reasons == [
        ("rejected", "span start is older than the project's retention", 7),
        ("refused", "415 unsupported media type text/plain", 2),
    ]
    assert "span start is older than the project&#x27;s retention" in html


def test_hostile_reasons_render_as_text_on_the_page_and_in_the_chart(member_client, project):
    stat(project, "refused", 1, HOSTILE)
    stat(project, "rejected", 1, HOSTILE)

    html = member_client.get("/p/alpha/health/").content.decode()

    assert HOSTILE not in html
    assert ESCAPED in html
    figure = json.loads(html.split('id="ingest-health" type="application/json">')[1].split("</script>")[0])
    assert "<b>" not in json.dumps(figure)
    assert ESCAPED in figure["data"][3]["hovertext"][-1]


def test_the_keys_are_listed_by_prefix_and_dates_never_the_key(member_client, project):
    key, plain = api_key_create(project=project)
    revoked, _ = api_key_create(project=project)
    api_key_revoke(key=revoked)
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now(), name="ci <exporter>")

    response = member_client.get("/p/alpha/health/")
    html = response.content.decode()

    assert plain not in html and key.hashed_key not in html
    assert f"{key.prefix}…" in html and "ci &lt;exporter&gt;" in html
    assert [k.pk for k in response.context["api_keys"]] == [revoked.pk, key.pk]
    assert 'class="revoked"' in html
    assert "never" in html  # the revoked key was never used


def test_a_project_that_never_received_anything_says_so_and_how_to_send_spans(member_client, project):
    html = member_client.get("/p/alpha/health/").content.decode()

    assert "Nothing has arrived yet" in html
    assert "OTEL_EXPORTER_OTLP_ENDPOINT=http://testserver" in html
    assert 'data-figure="ingest-health"' not in html


def test_a_project_quiet_over_the_range_is_told_apart_from_one_that_never_received_anything(member_client, project):
    stat(project, "accepted", 10, hours_ago=48)

    html = member_client.get("/p/alpha/health/").content.decode()

    assert "Nothing arrived over the last 24 hours" in html
    assert "Nothing has arrived yet" not in html


def test_a_bad_range_is_named_and_the_default_shown(member_client, project):
    response = member_client.get("/p/alpha/health/?range=3y")

    assert response.status_code == 200
    assert "range=&#x27;3y&#x27; is not one of" in response.content.decode()


def test_the_page_makes_a_fixed_number_of_queries(member_client, project, django_assert_max_num_queries):
    some_traffic(project)
    for n in range(5):
        stat(project, "refused", 1, f"reason {n}", hours_ago=n)
        api_key_create(project=project)

    # session, user, project, the nav's projects, the counters, the keys
    with django_assert_max_num_queries(6):
        assert member_client.get("/p/alpha/health/?range=7d").status_code == 200


def test_outsiders_get_404(client, project, outsider):
    stat(project, "accepted", 10)
    Membership.objects.create(project=make_project("Own", slug="own"), user=outsider)
    client.force_login(outsider)

    assert client.get("/p/alpha/health/").status_code == 404


def test_a_one_hour_range_is_drawn_at_five_minutes_from_the_five_minute_counters(member_client, project):
    now = timezone.now()
    ingest_stats_add(project=project, now=now - dt.timedelta(minutes=20), counts=Counter({("accepted", ""): 9}))
    ingest_stats_add(project=project, now=now, counts=Counter({("accepted", ""): 4}))

    response = member_client.get(f"/p/{project.slug}/health/?range=1h")
    html = response.content.decode()

    assert "Arrivals per 5 minutes" in html
    report = response.context["health"]
    assert report.step == 300 and len(report.hours) >= 12
    assert sorted(count for count in report.series["accepted"] if count) == [4, 9]
    assert IngestStat.objects.filter(project=project).first().hour.minute % 5 == 0
