"""The alerts list, one alert's page, and the actions taken from it (acknowledge, resolve, mute)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.models import Alert, AlertChannel, Delivery
from ingest.models import Membership
from tests.factories import make_project

pytestmark = pytest.mark.django_db
HOSTILE = "<script>alert(1)</script><b>x</b>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;"
HOUR = dt.timedelta(hours=1)
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CHANNEL_TARGET = "https://hooks.example.com/services/T000/B000/very-secret-path"


def make_alert(
    project, *, tool="lookup_order", kind="retry_rise_flat_error", status="open", age_hours=1, **fields
) -> Alert:
    now = timezone.now()
    opened = now - age_hours * HOUR
    hourly = [
        {"start": (opened - (6 - i) * HOUR).isoformat(), "calls": 100, "error_rate": 0.03,
         "retry_rate": 0.05 * (i + 1), "escalation_rate": 0.01}  # fmt: skip
        for i in range(8)
    ]
    evidence = {
        "statistics": {
            "recent_calls": 2480, "recent_retry_rate": 0.42, "retry_z": 9.713, "thresholds": {"z_open": 4.5},
        },  # fmt: skip
        "recent": [(opened - 2 * HOUR).isoformat(), opened.isoformat()],
        "baseline": [(opened - 6 * HOUR).isoformat(), (opened - 4 * HOUR).isoformat()],
        "hourly": hourly,
        "sample_trace_ids": [TRACE_ID],
    }
    resolved = status == Alert.Status.RESOLVED
    return Alert.objects.create(
        project=project, tool=tool, kind=kind, status=status, opened_at=opened, last_seen_at=opened,
        resolved_at=now if resolved else None, resolved_by="auto" if resolved else "",
        summary=fields.pop("summary", f"retry rate 0.42 vs baseline 0.08 on {tool}"), evidence=evidence, **fields,
    )  # fmt: skip


def make_delivery(alert, *, name="Ops webhook", status="failed", **fields) -> Delivery:
    channel = AlertChannel.objects.create(project=alert.project, kind="webhook", name=name, target=CHANNEL_TARGET)
    return Delivery.objects.create(
        alert=alert, channel=channel, event="opened", status=status, attempts=fields.pop("attempts", 6),
        last_error=fields.pop("last_error", "HTTP 503: upstream down"), response_code=fields.pop("response_code", 503),
        **fields,
    )  # fmt: skip


def page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


# --- the list -----------------------------------------------------------------------------------


def test_the_list_shows_open_and_acknowledged_alerts_before_resolved_ones_newest_first(member_client, project):
    old_resolved = make_alert(project, tool="a", status="resolved", age_hours=30)
    new_resolved = make_alert(project, tool="b", status="resolved", age_hours=2)
    old_open = make_alert(project, tool="c", age_hours=50)
    acknowledged = make_alert(project, tool="d", status="acknowledged", age_hours=5)

    response = member_client.get("/p/alpha/alerts/")

    shown = [a.pk for a in response.context["alerts"]]
    assert shown == [acknowledged.pk, old_open.pk, new_resolved.pk, old_resolved.pk]


def test_each_row_has_the_kind_label_a_link_to_the_tool_the_status_and_the_summary(member_client, project):
    make_alert(project, tool="lookup_order", summary="retries per call rose from 0.08 to 0.42")

    html = page(member_client, "/p/alpha/alerts/")

    assert "Retry rate up, error rate flat" in html
    assert 'href="/p/alpha/tools/lookup_order/"' in html
    assert "retries per call rose from 0.08 to 0.42" in html
    assert 'class="alertstatus alertstatus-open"' in html


def test_the_list_filters_by_status_kind_and_tool(member_client, project):
    spike = make_alert(project, tool="search", kind="error_rate_spike")
    make_alert(project, tool="search", kind="wasted_retries")
    make_alert(project, tool="lookup", kind="error_rate_spike", status="resolved")

    def shown(query: str) -> list[int]:
        return [a.pk for a in member_client.get(f"/p/alpha/alerts/?{query}").context["alerts"]]

    assert shown("status=open&kind=error_rate_spike&tool=search") == [spike.pk]
    assert len(shown("status=resolved")) == 1
    assert len(shown("tool=search")) == 2


def test_a_bad_filter_is_named_and_the_list_shows_every_alert(member_client, project):
    make_alert(project)

    response = member_client.get("/p/alpha/alerts/?status=burning")

    assert "status=&#x27;burning&#x27; is not one of open, acknowledged, resolved" in response.content.decode()
    assert len(response.context["alerts"]) == 1


def test_the_list_is_paginated_and_its_page_links_keep_the_filters(member_client, project):
    for n in range(55):
        make_alert(project, tool=f"tool{n:02}", kind="error_rate_spike", age_hours=n + 1)

    first = member_client.get("/p/alpha/alerts/?kind=error_rate_spike")
    second = member_client.get("/p/alpha/alerts/?kind=error_rate_spike&page=2")

    assert len(first.context["alerts"]) == 50
    assert 'href="?kind=error_rate_spike&amp;page=2"' in first.content.decode()
    assert [a.tool for a in second.context["alerts"]] == ["tool50", "tool51", "tool52", "tool53", "tool54"]


def test_the_list_makes_a_fixed_number_of_queries(member_client, project, django_assert_max_num_queries):
    for n in range(6):
        alert = make_alert(project, tool=f"tool{n}", status="resolved" if n % 2 else "open")
        make_delivery(alert, name=f"channel {n}")

    # session, user, project, the nav's projects, the count, the page, the tool filter's choices
    with django_assert_max_num_queries(7):
        assert member_client.get("/p/alpha/alerts/").status_code == 200


def test_the_list_says_plainly_when_there_are_no_alerts(member_client, project):
    assert "No alerts yet." in page(member_client, "/p/alpha/alerts/")


# --- one alert ----------------------------------------------------------------------------------


def test_the_alert_page_explains_the_kind_and_shows_the_evidence_chart_numbers_and_sample_traces(member_client, project):
    alert = make_alert(project)

    response = member_client.get(f"/p/alpha/alerts/{alert.pk}/")
    html = response.content.decode()

    assert "Retries per call rose significantly while the error rate stayed flat" in html
    assert 'data-figure="alert-evidence"' in html
    figure = response.context["figure"]
    assert [shape["fillcolor"] for shape in figure["layout"]["shapes"]]  # baseline and recent shaded
    assert "Recent calls" in html and "2,480" in html and "9.713" in html
    assert "Thresholds used" in html
    assert f'href="/p/alpha/traces/{TRACE_ID}/"' in html


def test_the_alert_page_lists_each_sample_trace_once_in_the_order_sampled(member_client, project):
    other = "a" * 32
    alert = make_alert(project)
    alert.evidence["sample_trace_ids"] = [TRACE_ID, TRACE_ID, other, TRACE_ID, other]
    alert.save(update_fields=["evidence"])

    response = member_client.get(f"/p/alpha/alerts/{alert.pk}/")

    assert [trace_id for trace_id, _ in response.context["samples"]] == [TRACE_ID, other]
    assert response.content.decode().count(f'href="/p/alpha/traces/{TRACE_ID}/"') == 1


def test_the_alert_page_shows_the_delivery_log_but_never_the_channels_target_or_secret(member_client, project):
    alert = make_alert(project)
    delivery = make_delivery(alert, last_error="HTTP 503: upstream down", response_code=503, attempts=6)

    html = page(member_client, f"/p/alpha/alerts/{alert.pk}/")

    assert "Ops webhook" in html and "HTTP 503: upstream down" in html and ">503<" in html and ">6<" in html
    assert "very-secret-path" not in html
    assert delivery.channel.secret not in html


def test_the_alert_page_shows_who_acknowledged_and_resolved(member_client, project):
    now = timezone.now()
    alert = make_alert(project, status="resolved", acknowledged_at=now - HOUR, acknowledged_by="bob")
    Alert.objects.filter(pk=alert.pk).update(resolved_by="carol")

    html = page(member_client, f"/p/alpha/alerts/{alert.pk}/")

    assert "Opened by the drift evaluation" in html
    assert "Acknowledged by bob" in html
    assert "Resolved by carol" in html


def test_the_alert_page_makes_a_fixed_number_of_queries(member_client, project, django_assert_max_num_queries):
    alert = make_alert(project)
    for n in range(5):
        make_delivery(alert, name=f"channel {n}")

    # session, user, project, the nav's projects, the alert, its deliveries with their channels
    with django_assert_max_num_queries(6):
        assert member_client.get(f"/p/alpha/alerts/{alert.pk}/").status_code == 200


def test_hostile_tool_names_and_summaries_render_as_text_on_both_pages_and_in_the_chart(member_client, project):
    alert = make_alert(project, tool=HOSTILE, summary=f"it broke {HOSTILE}")
    make_delivery(alert, name=HOSTILE, last_error=HOSTILE)

    for url in ("/p/alpha/alerts/", f"/p/alpha/alerts/{alert.pk}/"):
        html = page(member_client, url)
        assert HOSTILE not in html
        assert ESCAPED in html
    chart_json = page(member_client, f"/p/alpha/alerts/{alert.pk}/").split('id="alert-evidence"')[1].split("</script>")[0]
    figure = json.loads(chart_json.split(">", 1)[1])
    assert "<b>" not in json.dumps(figure)
    assert ESCAPED in json.dumps(figure)


# --- actions ------------------------------------------------------------------------------------


def test_acknowledging_records_who_and_says_so(member_client, project):
    alert = make_alert(project)

    response = member_client.post(f"/p/alpha/alerts/{alert.pk}/acknowledge/", follow=True)

    alert.refresh_from_db()
    assert (alert.status, alert.acknowledged_by) == ("acknowledged", "alice")
    assert response.redirect_chain[-1][0] == f"/p/alpha/alerts/{alert.pk}/"
    assert messages_of(response) == [f"Alert #{alert.pk} acknowledged."]


def test_resolving_records_who_and_a_second_resolve_is_a_clear_no_op(member_client, project):
    alert = make_alert(project, status="acknowledged")

    member_client.post(f"/p/alpha/alerts/{alert.pk}/resolve/")
    again = member_client.post(f"/p/alpha/alerts/{alert.pk}/resolve/", follow=True)

    alert.refresh_from_db()
    assert (alert.status, alert.resolved_by) == ("resolved", "alice")
    assert again.status_code == 200
    first, second = messages_of(again)  # the first redirect's message was not read yet
    assert first.startswith(f"Alert #{alert.pk} resolved.")
    assert "was already resolved by alice" in second and second.endswith("nothing changed.")


def test_acknowledging_a_resolved_alert_says_there_is_nothing_to_acknowledge(member_client, project):
    alert = make_alert(project, status="resolved")

    response = member_client.post(f"/p/alpha/alerts/{alert.pk}/acknowledge/", follow=True)

    alert.refresh_from_db()
    assert alert.status == "resolved" and alert.acknowledged_by == ""
    assert messages_of(response) == [f"Alert #{alert.pk} is resolved; there is nothing to acknowledge."]


def test_muting_for_a_period_and_unmuting(member_client, project):
    alert = make_alert(project)
    before = timezone.now()

    muted = member_client.post(f"/p/alpha/alerts/{alert.pk}/mute/", {"period": "8h"}, follow=True)
    alert.refresh_from_db()
    assert before + 8 * HOUR <= alert.muted_until <= timezone.now() + 8 * HOUR
    assert "muted until" in messages_of(muted)[0]
    assert "Unmute" in muted.content.decode()

    unmuted = member_client.post(f"/p/alpha/alerts/{alert.pk}/unmute/", follow=True)
    alert.refresh_from_db()
    assert alert.muted_until is None
    assert messages_of(unmuted) == [f"Alert #{alert.pk} unmuted: its messages will be sent again."]


def test_a_mute_period_that_is_not_offered_is_named(member_client, project):
    alert = make_alert(project)

    response = member_client.post(f"/p/alpha/alerts/{alert.pk}/mute/", {"period": "forever"}, follow=True)

    alert.refresh_from_db()
    assert alert.muted_until is None
    assert "period='forever' is not one of 1 hour, 8 hours, 24 hours, 7 days" in messages_of(response)[0]


def test_actions_need_a_post(member_client, project):
    alert = make_alert(project)

    assert member_client.get(f"/p/alpha/alerts/{alert.pk}/resolve/").status_code == 405
    alert.refresh_from_db()
    assert alert.status == "open"


def test_actions_are_refused_without_a_csrf_token(member, project):
    alert = make_alert(project)
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)

    response = client.post(f"/p/alpha/alerts/{alert.pk}/resolve/")

    assert response.status_code == 403
    alert.refresh_from_db()
    assert alert.status == "open"


def test_the_forms_on_the_alert_page_carry_a_csrf_token(member, project):
    alert = make_alert(project)
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)

    html = page(client, f"/p/alpha/alerts/{alert.pk}/")
    token = html.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
    response = client.post(f"/p/alpha/alerts/{alert.pk}/acknowledge/", {"csrfmiddlewaretoken": token})

    assert response.status_code == 302
    alert.refresh_from_db()
    assert alert.status == "acknowledged"


# --- scoping ------------------------------------------------------------------------------------


def test_outsiders_get_404_for_the_pages_and_the_actions(client, project, outsider):
    alert = make_alert(project)
    Membership.objects.create(project=make_project("Own", slug="own"), user=outsider)
    client.force_login(outsider)

    assert client.get("/p/alpha/alerts/").status_code == 404
    assert client.get(f"/p/alpha/alerts/{alert.pk}/").status_code == 404
    for action in ("acknowledge", "resolve", "mute", "unmute"):
        assert client.post(f"/p/alpha/alerts/{alert.pk}/{action}/", {"period": "1h"}).status_code == 404
    # Nor through a project of their own.
    assert client.get(f"/p/own/alerts/{alert.pk}/").status_code == 404
    assert client.post(f"/p/own/alerts/{alert.pk}/resolve/").status_code == 404
    alert.refresh_from_db()
    assert (alert.status, alert.muted_until) == ("open", None)


def test_the_pages_need_a_login(client, project):
    response = client.get("/p/alpha/alerts/")

    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_an_eval_regression_alert_is_labelled_and_links_its_run_and_cases(client, member, project):
    now = timezone.now()
    alert = Alert.objects.create(
        project=project, tool="search_flights", kind="eval_regression", opened_at=now, last_seen_at=now,
        summary="1 eval case of search_flights regressed in run git:abc",
        evidence={"run_id": 7, "run_label": "git:abc", "git_sha": "abc", "cases": [
            {"case_id": 3, "version": 2, "title": "<b>bad date</b>", "status": "failed", "reasons": ["expected success"]}]},
    )  # fmt: skip
    client.force_login(member)

    page = client.get(f"/p/{project.slug}/alerts/{alert.pk}/").content.decode()
    listing = client.get(f"/p/{project.slug}/alerts/?kind=eval_regression").content.decode()

    assert "Eval regression" in page and "the bug it pins is back" in page
    assert f"/p/{project.slug}/evals/runs/7/" in page and f"/p/{project.slug}/evals/cases/3/" in page
    assert "&lt;b&gt;bad date&lt;/b&gt;" in page and "Opened by eval run git:abc" in page
    assert "search_flights" in listing and "is not one of" not in listing


def test_an_alerts_rates_read_as_percentages_like_every_other_page(client, member, project):
    alert = make_alert(project)
    alert.evidence["statistics"].update(baseline_retry_rate=0.001308, thresholds={"z_open": 4.5, "wasted_floor": 0.05})
    alert.save()
    client.force_login(member)

    html = page(client, f"/p/{project.slug}/alerts/{alert.pk}/")

    assert ">42.0 %</td>" in html and ">0.1 %</td>" in html and ">5.0 %</td>" in html
    assert ">0.42</td>" not in html and "0.001308" not in html
    assert ">2,480</td>" in html and ">9.713</td>" in html  # counts and test statistics stay numbers


# --- a drift alert explains itself (issue 15) -------------------------------------------------


def _evaluated_alert(project):
    """A real alert: the S2 ramp's rollups, evaluated hourly until it opened, then 3 h more (hold)."""
    from dashboard.alerting.evaluation import drift_evaluate
    from demo import scenarios
    from tests.dashboard.alerting.test_evaluation import run_hourly, store

    scenario = scenarios.generate("s2_retry_ramp", 4)
    expected = scenario.expected[0]
    store(project, scenario)
    run_hourly(project, expected.onset, expected.deadline + 2 * HOUR)
    alert = Alert.objects.get(project=project)
    drift_evaluate(project_id=project.pk, now=alert.opened_at + 3 * HOUR)
    alert.refresh_from_db()
    return alert


def test_a_drift_alert_page_leads_with_the_sentence_of_its_opening_even_after_later_evaluations(
    member_client, project
):
    alert = _evaluated_alert(project)
    assert alert.evidence["statistics"]["mode"] == "hold"

    response = member_client.get(f"/p/alpha/alerts/{alert.pk}/")
    html = response.content.decode()

    lead = html.split('class="alert-summary">')[1].split("</p>")[0]
    assert lead.startswith(f"Retry rate of {alert.tool} rose from ") and " % of calls (" in lead
    assert "Mode" not in lead and "open for less than" not in lead
    # One chart, then the sample traces, then the numbers folded: at the opening and the latest.
    assert html.index('data-figure="alert-evidence"') < html.index("Sample traces") < html.index("<details class=\"evidence-opening\"")
    assert "When it opened" in html and "Latest evaluation" in html
    # The list, the overview and the tool page show the same sentence.
    for url in ("/p/alpha/alerts/", f"/p/alpha/tools/{alert.tool}/"):
        assert lead[:60] in member_client.get(url).content.decode()


def test_the_alert_chart_draws_the_whole_baseline_with_its_band_from_the_opening(member_client, project):
    alert = _evaluated_alert(project)

    figure = member_client.get(f"/p/alpha/alerts/{alert.pk}/").context["figure"]

    names = [trace.get("name") for trace in figure["data"]]
    assert "baseline band" in names and "baseline" in names and "retries per call (tested)" in names
    bars = next(trace for trace in figure["data"] if trace["type"] == "bar")
    baseline = [dt.datetime.fromisoformat(m) for m in alert.opening_evidence["baseline"]]
    first = dt.datetime.fromisoformat(bars["x"][0].replace("Z", "+00:00"))
    assert first == baseline[0] and len(bars["x"]) >= 168  # every hour of the week, not the last 72
    assert sum(1 for calls in bars["y"] if calls) >= 168
