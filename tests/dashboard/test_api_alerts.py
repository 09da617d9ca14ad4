"""The alerts and ingest health API: /api/v1/projects/<slug>/alerts/… and …/ingest-health/."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from dashboard.models import Alert
from ingest.models import Membership
from tests.dashboard.test_alert_pages import CHANNEL_TARGET, HOSTILE, TRACE_ID, make_alert, make_delivery
from tests.dashboard.test_health_page import stat
from tests.factories import make_project

pytestmark = pytest.mark.django_db
HOUR = dt.timedelta(hours=1)
API = "/api/v1/projects/alpha"  # the cast's project


def post(client, url: str, body: dict | None = None):
    return client.post(url, body or {}, content_type="application/json")


# --- reading -----------------------------------------------------------------------------------


def test_the_list_puts_open_alerts_first_newest_first_and_is_paginated(member_client, project):
    resolved = make_alert(project, tool="a", status="resolved", age_hours=1)
    old_open = make_alert(project, tool="b", age_hours=9)
    new_open = make_alert(project, tool="c", age_hours=3)

    body = member_client.get(f"{API}/alerts/").json()

    assert body["count"] == 3 and body["next"] is None
    assert [row["id"] for row in body["results"]] == [new_open.pk, old_open.pk, resolved.pk]
    first = body["results"][0]
    assert first["kind_label"] == "Retry rate up, error rate flat"
    assert "evidence" not in first


def test_the_list_filters_by_status_kind_and_tool(member_client, project):
    spike = make_alert(project, tool="search", kind="error_rate_spike")
    make_alert(project, tool="search", kind="wasted_retries", status="resolved")
    make_alert(project, tool="lookup", kind="error_rate_spike")

    body = member_client.get(f"{API}/alerts/?status=open&kind=error_rate_spike&tool=search").json()

    assert [row["id"] for row in body["results"]] == [spike.pk]


def test_a_bad_filter_is_a_400_naming_it(member_client, project):
    assert member_client.get(f"{API}/alerts/?status=burning").json() == {
        "status": ["status='burning' is not one of open, acknowledged, resolved"]
    }
    response = member_client.get(f"{API}/alerts/?kind=vibes")
    assert response.status_code == 400 and list(response.json()) == ["kind"]


def test_the_list_makes_a_fixed_number_of_queries(member_client, project, django_assert_max_num_queries):
    for n in range(6):
        make_delivery(make_alert(project, tool=f"tool{n}"), name=f"channel {n}")

    # session, user, project, the count, the page
    with django_assert_max_num_queries(5):
        assert len(member_client.get(f"{API}/alerts/").json()["results"]) == 6


def test_one_alert_comes_with_its_evidence_and_delivery_log_but_no_channel_target_or_secret(member_client, project):
    alert = make_alert(project)
    Alert.objects.filter(pk=alert.pk).update(opening_evidence={"statistics": {"recent_calls": 1200}})
    delivery = make_delivery(alert)

    response = member_client.get(f"{API}/alerts/{alert.pk}/")
    body = response.json()

    assert body["opening_evidence"] == {"statistics": {"recent_calls": 1200}}  # why it opened, beside the latest

    assert body["evidence"]["sample_trace_ids"] == [TRACE_ID]
    assert body["evidence"]["statistics"]["recent_calls"] == 2480
    assert body["kind_explanation"].startswith("Retries per call rose significantly")
    assert body["deliveries"] == [
        {
            "id": delivery.pk, "channel": "Ops webhook", "channel_kind": "webhook", "event": "opened",
            "status": "failed", "attempts": 6, "response_code": 503, "last_error": "HTTP 503: upstream down",
            "created_at": body["deliveries"][0]["created_at"], "sent_at": None,
        }  # fmt: skip
    ]
    assert CHANNEL_TARGET not in response.content.decode()
    assert delivery.channel.secret not in response.content.decode()


def test_hostile_strings_come_back_as_plain_json_data(member_client, project):
    alert = make_alert(project, tool=HOSTILE, summary=HOSTILE)

    body = member_client.get(f"{API}/alerts/{alert.pk}/").json()

    assert (body["tool"], body["summary"]) == (HOSTILE, HOSTILE)


def test_the_alert_of_another_project_is_not_found(member_client, project):
    other = make_alert(make_project("Other", slug="other"))

    assert member_client.get(f"{API}/alerts/{other.pk}/").status_code == 404
    assert post(member_client, f"{API}/alerts/{other.pk}/resolve/").status_code == 404


# --- actions -----------------------------------------------------------------------------------


def test_acknowledge_records_who_and_a_second_one_says_it_did_not_apply(member_client, project):
    alert = make_alert(project)

    first = post(member_client, f"{API}/alerts/{alert.pk}/acknowledge/").json()
    second = post(member_client, f"{API}/alerts/{alert.pk}/acknowledge/").json()

    assert first["changed"] is True and first["alert"]["status"] == "acknowledged"
    assert first["alert"]["acknowledged_by"] == "alice"
    assert second["changed"] is False
    assert "already acknowledged by alice" in second["detail"]


def test_resolve_records_who_and_resolving_again_is_a_no_op(member_client, project):
    alert = make_alert(project)

    first = post(member_client, f"{API}/alerts/{alert.pk}/resolve/")
    second = post(member_client, f"{API}/alerts/{alert.pk}/resolve/")

    assert first.status_code == second.status_code == 200
    assert first.json()["alert"]["resolved_by"] == "alice"
    assert second.json()["changed"] is False
    assert "already resolved by alice" in second.json()["detail"]
    alert.refresh_from_db()
    assert alert.status == Alert.Status.RESOLVED


def test_mute_for_minutes_or_until_a_time_and_unmute_with_zero_or_null(member_client, project):
    alert = make_alert(project)
    url = f"{API}/alerts/{alert.pk}/mute/"
    before = timezone.now()

    assert post(member_client, url, {"minutes": 60}).json()["changed"] is True
    alert.refresh_from_db()
    assert before + HOUR <= alert.muted_until <= timezone.now() + HOUR

    until = (timezone.now() + 8 * HOUR).replace(microsecond=0)
    post(member_client, url, {"until": until.isoformat()})
    alert.refresh_from_db()
    assert alert.muted_until == until

    assert post(member_client, url, {"minutes": 0}).json()["alert"]["muted_until"] is None
    assert post(member_client, url, {"until": None}).json()["changed"] is False  # not muted any more


@pytest.mark.parametrize(
    "body, field",
    [
        ({"minutes": -5}, "minutes"),
        ({"minutes": "soon"}, "minutes"),
        ({"minutes": 10**7}, "minutes"),
        ({"until": "next tuesday"}, "until"),
        ({"until": "2001-01-01T00:00:00Z"}, "until"),
        ({"minutes": 5, "until": None}, "until"),
        ({}, "minutes"),
    ],
)
def test_a_bad_mute_is_a_400_naming_the_field(member_client, project, body, field):
    alert = make_alert(project)

    response = post(member_client, f"{API}/alerts/{alert.pk}/mute/", body)

    assert response.status_code == 400
    assert list(response.json()) == [field]
    alert.refresh_from_db()
    assert alert.muted_until is None


# --- ingest health -------------------------------------------------------------------------------


def test_ingest_health_gives_the_series_totals_and_reasons_over_the_range(member_client, project):
    stat(project, "accepted", 900, hours_ago=3)
    stat(project, "accepted", 100)
    stat(project, "refused", 2, HOSTILE)
    stat(project, "rejected", 4, "span too old", hours_ago=30)

    day = member_client.get(f"{API}/ingest-health/").json()
    week = member_client.get(f"{API}/ingest-health/?range=7d").json()

    assert day["range"]["key"] == "24h"
    assert day["totals"] == {"accepted": 1000, "duplicate": 0, "rejected": 0, "refused": 2}
    assert len(day["series"]) in (24, 25)  # every hour of the range, zero-filled
    assert day["series"][-1] == {**day["series"][-1], "accepted": 100, "refused": 2}
    assert day["reasons"] == [{"outcome": "refused", "reason": HOSTILE, "count": 2}]
    assert week["totals"]["rejected"] == 4


def test_ingest_health_names_a_bad_range(member_client, project):
    response = member_client.get(f"{API}/ingest-health/?range=3y")

    assert response.status_code == 400
    assert list(response.json()) == ["range"]


def test_ingest_health_makes_a_fixed_number_of_queries(member_client, project, django_assert_max_num_queries):
    for n in range(8):
        stat(project, "refused", 1, f"reason {n}", hours_ago=n)
        stat(project, "accepted", 10, hours_ago=n)

    # session, user, project, the counters
    with django_assert_max_num_queries(4):
        assert member_client.get(f"{API}/ingest-health/?range=7d").status_code == 200


# --- scoping -------------------------------------------------------------------------------------


def test_outsiders_get_404_everywhere(client, project, outsider):
    alert = make_alert(project)
    Membership.objects.create(project=make_project("Own", slug="own"), user=outsider)
    client.force_login(outsider)

    assert client.get(f"{API}/alerts/").status_code == 404
    assert client.get(f"{API}/alerts/{alert.pk}/").status_code == 404
    assert client.get(f"{API}/ingest-health/").status_code == 404
    for action, body in (("acknowledge", {}), ("resolve", {}), ("mute", {"minutes": 60})):
        assert post(client, f"{API}/alerts/{alert.pk}/{action}/", body).status_code == 404
    alert.refresh_from_db()
    assert (alert.status, alert.muted_until) == ("open", None)


def test_the_api_needs_authentication(client, project):
    assert client.get(f"{API}/alerts/").status_code in (401, 403)
