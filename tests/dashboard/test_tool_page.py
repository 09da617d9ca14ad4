"""The tool page: rates against their baseline band, volume, errors by class, latency, top
fingerprints, contract checks, recent failed calls and alerts, from ingested and rolled-up calls."""

import datetime as dt
import json
import re

import pytest

from tests.dashboard.selectors.test_selectors import (  # noqa: F401
    HOSTILE,
    HOUR,
    NOW,
    add_rollup,
    budget,
    frozen,
    ingest_demo,
    ingest_spans,
    open_alert,
    tool_span,
    without_csrf,
    without_totals,
)

pytestmark = pytest.mark.django_db
MINUTE = dt.timedelta(minutes=1)


@pytest.fixture
def searched(frozen, member, project):  # noqa: F811
    """`search` over the last hours in the cast's project: successes, timeouts, a permission failure;
    a week of baseline. (Its member, it.)"""
    spans = []
    for minute in range(5, 240, 5):
        spans.append(tool_span("search", NOW - minute * MINUTE))
        if minute % 20 == 0:
            spans.append(tool_span("search", NOW - minute * MINUTE, ok=False, message="upstream timed out after 30s"))
    spans.append(tool_span("search", NOW - 7 * MINUTE, ok=False, message="permission denied: missing scope orders.read"))
    ingest_spans(project, spans)
    for hour in range(25, 25 + 168, 3):  # the week before the range, as rollups only (its raw calls are gone)
        add_rollup(project, "search", NOW - hour * HOUR, calls=40, errors=4, retries=2)
    return member, project


def page(client, user, url):
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    return response, response.content.decode()


def figure(html: str, figure_id: str) -> dict:
    match = re.search(rf'<script id="{figure_id}" type="application/json">(.*?)</script>', html, re.S)
    assert match, figure_id
    return json.loads(match.group(1))


def test_the_tool_page_is_404_for_outsiders(client, searched, outsider):
    _, project = searched
    client.force_login(outsider)

    assert client.get(f"/p/{project.slug}/tools/search/").status_code == 404


def test_the_numbers_are_those_ingested(client, searched):
    user, project = searched

    response, html = page(client, user, f"/p/{project.slug}/tools/search/?range=24h")

    totals = response.context["totals"]
    assert totals["calls"] == 47 + 11 + 1
    assert totals["errors"] == 12 and totals["err_transient"] == 11 and totals["err_permission"] == 1
    assert "20.3 %" in html  # 12 / 59


def test_rates_are_drawn_against_the_baseline_band_with_a_caption(client, searched):
    user, project = searched

    _, html = page(client, user, f"/p/{project.slug}/tools/search/?range=24h")

    errors = figure(html, "fig-error-rate")
    names = [trace["name"] for trace in errors["data"]]
    assert names == ["band low", "baseline band", "baseline", "Error rate, search"]
    baseline = [value for value in errors["data"][2]["y"] if value is not None]
    assert baseline and all(value == pytest.approx(0.1) for value in baseline)
    assert "The shaded band is what the baseline predicts" in html
    for figure_id in ("fig-retry-rate", "fig-escalation-rate", "fig-volume", "fig-classes", "fig-latency"):
        assert f'data-figure="{figure_id}"' in html and figure(html, figure_id)["data"]


def test_errors_stack_by_class_and_latency_has_three_percentiles(client, searched):
    user, project = searched

    _, html = page(client, user, f"/p/{project.slug}/tools/search/?range=24h")

    classes = figure(html, "fig-classes")
    assert [trace["name"] for trace in classes["data"]] == ["transient", "permission"]
    assert sum(classes["data"][0]["y"]) == 11
    latency = figure(html, "fig-latency")
    assert [trace["name"] for trace in latency["data"]] == ["p50", "p95", "p99"]
    assert any(value == pytest.approx(25, rel=0.1) for value in latency["data"][1]["y"] if value)


def test_top_fingerprints_and_recent_failures_link_to_their_traces(client, searched):
    user, project = searched

    response, html = page(client, user, f"/p/{project.slug}/tools/search/?range=24h")

    fingerprints = response.context["fingerprints"]
    assert [(row["count"], row["error_class"]) for row in fingerprints] == [(11, "transient"), (1, "permission")]
    assert "upstream timed out after 30s" in html
    latest = response.context["failed_calls"][0]
    assert latest.message.startswith("permission denied")
    assert f'href="/p/{project.slug}/traces/{latest.trace_id}/"' in html


def test_the_contract_breakdown_shows_passed_over_applicable(client, searched):
    user, project = searched

    response, html = page(client, user, f"/p/{project.slug}/tools/search/?range=24h")

    checks = {row["check"]: (row["passed"], row["applicable"]) for row in response.context["detail"]["contract"]}
    assert checks["specific_message"] == (12, 12)
    assert "12 / 12" in html


def test_alerts_on_the_tool_are_listed_and_a_spot_waits_for_recurring_eval_cases(client, searched):
    user, project = searched
    alert = open_alert(project, "search", summary="retry rate up")

    response, html = page(client, user, f"/p/{project.slug}/tools/search/")

    assert f'href="/p/{project.slug}/alerts/{alert.pk}/"' in html and "retry rate up" in html
    assert response.context["recurring_cases"] == []


def test_a_tool_without_calls_in_range_says_so(client, searched):
    user, project = searched

    response, html = page(client, user, f"/p/{project.slug}/tools/search/?range=1h&service=nobody")

    assert "No calls of this tool in the last 1 hour with these filters" in html
    assert "data-figure" not in html


def test_the_range_and_filters_survive_on_the_way_back(client, searched):
    user, project = searched

    _, html = page(client, user, f"/p/{project.slug}/tools/search/?range=7d&service=svc")

    assert f'href="/p/{project.slug}/?range=7d&amp;service=svc"' in html


def test_hostile_names_and_messages_render_as_text_on_the_page_and_in_charts(client, frozen, member, project):
    user = member
    ingest_spans(project, [tool_span(HOSTILE, NOW - 5 * MINUTE, ok=False, message=f"timed out {HOSTILE}")])

    _, html = page(client, user, f"/p/{project.slug}/tools/{HOSTILE}/")

    assert "<script>alert(1)</script>" not in html and "<b>x</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in html
    rate = figure(html, "fig-error-rate")
    assert rate["data"][-1]["name"] == "Error rate, &lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;"


def test_the_tool_page_makes_a_fixed_number_of_queries(client, searched, django_assert_max_num_queries):
    user, project = searched
    for n in range(5):
        open_alert(project, "search", kind=f"kind_{n}")
    client.force_login(user)

    # session, user, project, projects, series (+ contract), latency, baseline, fingerprints, failed calls,
    # alerts, dimensions, recurring eval cases
    with django_assert_max_num_queries(budget(12)):
        response = client.get(f"/p/{project.slug}/tools/search/?range=7d")

    assert response.status_code == 200 and len(response.context["alerts"]) == 5


@pytest.mark.parametrize("query", ["range=1h", "range=24h", "range=7d"])
def test_the_tool_page_shows_the_same_numbers_with_and_without_the_per_tool_totals(client, frozen, member, project, monkeypatch, query):
    from dashboard.models import ToolRollup, ToolRollupTotal
    from ingest.models import ToolCall

    user = member
    ingest_demo(project)
    from django.db.models import Count

    busiest = ToolCall.objects.filter(project=project, ok=False).values("tool").annotate(n=Count("id")).order_by("-n", "tool")
    tool = busiest[0]["tool"]
    url = f"/p/{project.slug}/tools/{tool}/?{query}"
    with_totals, html = page(client, user, url)

    # Without the totals: the dimensioned rows, and the fingerprints grouped from the calls.
    without_totals(monkeypatch)
    from_dimensions, html_from_dimensions = page(client, user, url)

    assert with_totals.context["detail"]["has_calls"]
    assert with_totals.context["detail"] == from_dimensions.context["detail"]
    assert with_totals.context["fingerprints"] and with_totals.context["fingerprints"] == from_dimensions.context["fingerprints"]
    assert without_csrf(html) == without_csrf(html_from_dimensions)
    # The totals did sum several dimensioned rows per bucket.
    assert ToolRollup.objects.filter(project=project, tool=tool).count() > ToolRollupTotal.objects.filter(project=project, tool=tool).count()


def test_per_call_and_per_attempt_figures_are_labelled_as_such(client, searched):
    user, project = searched

    _, html = page(client, user, f"/p/{project.slug}/tools/search/?range=24h")

    assert "Logical calls" in html and "attempts (spans)" in html
    assert 'Error rate <span class="unit">per call</span>' in html
    assert "Recent failed attempts" in html and "Each row is one attempt (a span) that failed" in html
    assert "Failed attempts (spans, retries included)" in html
    assert "Failed calls by class" in html
    assert [trace["name"] for trace in figure(html, "fig-volume")["data"]] == ["logical calls, search", "attempts (spans)"]


def test_a_tool_name_with_a_nul_is_looked_up_as_ingest_stores_it(client, searched):
    """PostgreSQL text cannot hold a NUL (not even as a query parameter): the page asks for U+FFFD."""
    member, project = searched

    response, html = page(client, member, f"/p/{project.slug}/tools/sea%00rch/")

    assert "sea\ufffdrch" in html
