"""The overview page: totals, open alerts on top, the tools table (sort, sparklines, drift badges),
range and filters kept in every link, scoped to members, escaped, with a flat query count."""

import json
import re
from html import unescape

import pytest

from tests.dashboard.selectors.test_selectors import (  # noqa: F401
    HOSTILE,
    HOUR,
    NOW,
    add_rollup,
    budget,
    frozen,
    ingest_demo,
    open_alert,
    without_csrf,
    without_totals,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy(frozen, member, project):  # noqa: F811
    """Five tools over the last day in the cast's project, one of them with an open alert; (its member, it)."""
    for n, tool in enumerate(("search", "refund", "lookup", "notify", "export")):
        for hour in range(1, 6):
            add_rollup(project, tool, NOW - hour * HOUR, service="svc-a" if n % 2 else "svc-b",
                       calls=10 * (n + 1), errors=n, retries=2 * n, latencies=[20.0 * (n + 1)] * 3)  # fmt: skip
    open_alert(project, "refund", summary="retry rate 0.2 vs baseline 0.1")
    return member, project


def page(client, user, url):
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    return response, response.content.decode()


def table_tools(html: str) -> list[str]:
    return [unescape(name) for name in re.findall(r'<th scope="row" class="toolname"><a [^>]*>([^<]*)</a>', html)]


def test_the_overview_needs_a_login_and_is_404_for_outsiders(client, busy, outsider):
    _, project = busy
    assert client.get(f"/p/{project.slug}/").status_code == 302
    client.force_login(outsider)

    assert client.get(f"/p/{project.slug}/").status_code == 404
    assert client.get("/p/no-such-project/").status_code == 404


def test_the_totals_are_the_rolled_up_numbers_of_the_range(client, busy):
    user, project = busy

    response, html = page(client, user, f"/p/{project.slug}/?range=24h")

    totals = response.context["totals"]
    assert totals["calls"] == 5 * (10 + 20 + 30 + 40 + 50)
    assert totals["errors"] == 5 * (0 + 1 + 2 + 3 + 4)
    assert "6.7 %" in html  # error rate 50 / 750
    rows = {row["tool"]: row for row in response.context["rows"]}
    assert rows["export"]["calls"] == 250 and rows["export"]["retry_rate"] == pytest.approx(8 / 50)


def test_open_alerts_are_listed_on_top_linking_to_their_pages(client, busy):
    user, project = busy
    alert = project.alerts.get()

    _, html = page(client, user, f"/p/{project.slug}/")

    assert html.index("Open alerts") < html.index('id="tools-heading"')
    assert f'href="/p/{project.slug}/alerts/{alert.pk}/"' in html
    assert "retry rate 0.2 vs baseline 0.1" in html


def test_each_tool_has_a_sparkline_and_its_open_alert_kinds_as_a_drift_badge(client, busy):
    user, project = busy

    response, html = page(client, user, f"/p/{project.slug}/")

    rows = {row["tool"]: row for row in response.context["rows"]}
    assert rows["refund"]["drift"] == ["retry_rise_flat_error"] and rows["search"]["drift"] == []
    assert html.count('<svg class="sparkline"') == 5
    assert re.search(r'<path d="M[0-9., ML]+"/>', html)


def test_the_table_sorts_server_side_and_the_header_says_how(client, busy):
    user, project = busy

    response, html = page(client, user, f"/p/{project.slug}/?range=7d&sort=-error_rate")

    assert table_tools(html) == ["export", "notify", "lookup", "refund", "search"]
    assert '<th scope="col" aria-sort="descending" class="num"><a href="?range=7d&amp;sort=error_rate">Error rate' in html
    assert '<th scope="col" aria-sort="none"><a href="?range=7d&amp;sort=tool">Tool' in html
    # The range form keeps the sort when the range changes.
    assert '<input type="hidden" name="sort" value="-error_rate">' in html
    _, html = page(client, user, f"/p/{project.slug}/?range=7d&sort=tool")
    assert table_tools(html) == ["export", "lookup", "notify", "refund", "search"]


def test_a_bad_sort_says_so_and_falls_back_to_calls(client, busy):
    user, project = busy

    response, html = page(client, user, f"/p/{project.slug}/?sort=colour")

    assert "sort=&#x27;colour&#x27; is not a column" in html
    assert table_tools(html)[0] == "export"


def test_a_bad_range_says_so_and_shows_the_default(client, busy):
    user, project = busy

    _, html = page(client, user, f"/p/{project.slug}/?range=2y")

    assert "range=&#x27;2y&#x27; is not one of" in html and "last 24 hours" in html


def test_filters_narrow_the_page_and_survive_in_tool_and_sort_links(client, busy):
    user, project = busy

    response, html = page(client, user, f"/p/{project.slug}/?range=custom&start=2026-11-20T00:00&end=2026-11-20T12:00&service=svc-a")

    assert sorted(row["tool"] for row in response.context["rows"]) == ["notify", "refund"]
    keep = "?range=custom&amp;start=2026-11-20T00%3A00&amp;end=2026-11-20T12%3A00&amp;service=svc-a"
    assert f'href="/p/{project.slug}/tools/refund/{keep}"' in html
    assert f'href="{keep}&amp;sort=-calls"' in html or f'href="{keep}&amp;sort=calls"' in html
    assert response.context["dimensions"]["service"] == ["svc-a", "svc-b"]
    assert '<option value="svc-a" selected>' in html


def test_a_range_without_calls_says_so(client, frozen, member, project):
    user = member

    _, html = page(client, user, f"/p/{project.slug}/")

    assert "No tool calls in the last 24 hours" in html


def test_hostile_tool_names_and_alert_summaries_render_as_text(client, frozen, member, project):
    user = member
    add_rollup(project, HOSTILE, NOW - HOUR, calls=3, errors=1, service=HOSTILE)
    open_alert(project, HOSTILE, summary=HOSTILE)

    _, html = page(client, user, f"/p/{project.slug}/")

    assert "<script>alert(1)</script>" not in html and "<b>x</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in html
    assert table_tools(html) == [HOSTILE]
    assert "/tools/%3Cscript%3Ealert(1)%3C/script%3E%3Cb%3Ex%3C/b%3E/" in html


def test_the_overview_makes_a_fixed_number_of_queries(client, busy, django_assert_max_num_queries):
    user, project = busy
    for n in range(20):
        add_rollup(project, f"extra_{n}", NOW - 2 * HOUR, calls=3, errors=1, latencies=[5.0], contract={"explicit_class": (1, 1)})
        open_alert(project, f"extra_{n}")
    client.force_login(user)

    # session, user, project, the user's projects, tools (counts, latency), alerts, dimensions
    with django_assert_max_num_queries(budget(8)):
        response = client.get(f"/p/{project.slug}/?range=7d")

    assert len(response.context["rows"]) == 25


def test_the_page_uses_no_inline_script_with_data(client, busy):
    user, project = busy

    _, html = page(client, user, f"/p/{project.slug}/")

    scripts = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html)
    assert all('type="application/json"' in tag for tag in scripts)
    assert "javascript:" not in html
    json.dumps(html)  # the page renders to a plain string


@pytest.mark.parametrize("query", ["range=1h", "range=24h", "range=30d&sort=-error_rate", "range=7d&sort=p95_ms"])
def test_the_overview_shows_the_same_numbers_with_and_without_the_per_tool_totals(client, frozen, member, project, monkeypatch, query):
    user = member
    ingest_demo(project)
    with_totals, html = page(client, user, f"/p/{project.slug}/?{query}")

    without_totals(monkeypatch)
    from_dimensions, html_from_dimensions = page(client, user, f"/p/{project.slug}/?{query}")

    assert with_totals.context["rows"] and with_totals.context["rows"] == from_dimensions.context["rows"]
    assert with_totals.context["totals"] == from_dimensions.context["totals"]
    assert without_csrf(html) == without_csrf(html_from_dimensions)


def test_the_overview_opens_on_a_trend_of_calls_error_and_retry_rate_over_the_range(client, busy):
    user, project = busy

    response, html = page(client, user, f"/p/{project.slug}/?range=24h")

    figure = response.context["trend_figure"]
    assert [trace["name"] for trace in figure["data"]] == ["logical calls", "error rate", "retry rate"]
    calls = figure["data"][0]["y"]
    assert sum(calls) == response.context["totals"]["calls"]  # the same rows as the totals
    assert figure["data"][1]["y"][0] is None  # no calls in the first hour: no line there, not 0 %
    assert figure["layout"]["yaxis"]["tickformat"] == ".1~%"
    assert 'data-figure="fig-trend"' in html and '<script id="fig-trend" type="application/json">' in html


def test_a_service_filter_filters_the_trend_and_the_open_alerts_too(client, busy):
    user, project = busy
    open_alert(project, "search", kind="error_rate_spike")  # search runs on svc-b only

    response, html = page(client, user, f"/p/{project.slug}/?range=24h&service=svc-a")

    assert {alert.tool for alert in response.context["alerts"]} == {"refund"}
    assert sum(response.context["trend_figure"]["data"][0]["y"]) == response.context["totals"]["calls"]
    assert "these are the open alerts of the tools these filters show" in html
    response, _ = page(client, user, f"/p/{project.slug}/?range=24h&service=svc-b")
    assert {alert.tool for alert in response.context["alerts"]} == {"search"}


def test_a_tool_with_calls_in_one_step_only_says_so_instead_of_a_stray_dot(client, frozen, member, project):  # noqa: F811
    add_rollup(project, "once", NOW - 2 * HOUR, calls=4, errors=1)

    response, html = page(client, member, f"/p/{project.slug}/?range=24h")

    row = response.context["rows"][0]
    assert row["spark_path"] == ""
    assert "calls in one hour only" in html
