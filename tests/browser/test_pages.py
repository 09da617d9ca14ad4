"""Issue 15's page fixes in a real browser: the overview's trend chart, charts whose ticks fit,
the explorer as one form with rows that open their trace and a disabled "Newer" on the first
page, the promote form showing only the fields that apply, and the eval-regression alert page."""

import re

import pytest
from playwright.sync_api import expect

from ingest.models import ToolCall
from tests.browser.conftest import ingest
from tests.otlp_builders import agent_with_tools

pytestmark = pytest.mark.browser


@pytest.fixture
def traffic(logged_in_page, live_server, project):
    for _ in range(3):
        ingest(live_server, project, lambda tracer: agent_with_tools(tracer, tools=[
            {"name": "lookup_order", "error": TimeoutError("upstream timed out after 30 s")},
            {"name": "search_kb"},
        ]))  # fmt: skip
    return project


def drawn(page, figure_id: str):
    chart = page.locator(f'[data-figure="{figure_id}"]')
    expect(chart).to_have_attribute("data-drawn", "1")
    return chart


def ticks_inside(page, chart) -> None:
    """Every tick label of the chart lies inside the chart's box: none is clipped."""
    box = chart.bounding_box()
    labels = chart.locator("g.xtick text, g.ytick text, g.y2tick text")
    assert labels.count() > 0
    for index in range(labels.count()):
        label = labels.nth(index).bounding_box()
        if not label:
            continue
        assert label["x"] >= box["x"] - 1 and label["x"] + label["width"] <= box["x"] + box["width"] + 1
        assert label["y"] >= box["y"] - 1 and label["y"] + label["height"] <= box["y"] + box["height"] + 1


def test_the_overview_opens_on_a_trend_chart_whose_ticks_fit(logged_in_page, live_server, traffic):
    page = logged_in_page

    page.goto(f"{live_server.url}/p/{traffic.slug}/?range=1h")

    chart = drawn(page, "fig-trend")
    expect(page.get_by_role("heading", name="Trend")).to_be_visible()
    expect(chart.locator(".legendtext")).to_have_text(["logical calls", "error rate", "retry rate"])
    ticks_inside(page, chart)


def test_the_tool_pages_charts_keep_their_ticks_and_label_calls_and_attempts(logged_in_page, live_server, traffic):
    page = logged_in_page

    page.goto(f"{live_server.url}/p/{traffic.slug}/tools/lookup_order/?range=24h")

    for figure_id in ("fig-error-rate", "fig-volume", "fig-classes"):
        ticks_inside(page, drawn(page, figure_id))
    expect(page.get_by_role("heading", name="Recent failed attempts")).to_be_visible()
    expect(page.locator(".stat-label").first).to_have_text("Logical calls")


def test_the_explorer_is_one_form_its_rows_open_their_trace_and_newer_is_disabled(logged_in_page, live_server, traffic):
    page = logged_in_page

    page.goto(f"{live_server.url}/p/{traffic.slug}/traces/?range=24h")

    expect(page.locator("form.rangebar")).to_have_count(1)
    drawn(page, "fig-calls")
    outcome = page.locator('select[name="outcome"]')
    outcome.select_option("soft_failure")
    assert outcome.evaluate("el => el.scrollWidth <= el.clientWidth + 1")  # the long label is not clipped
    outcome.select_option("failed")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"outcome=failed"))
    expect(page.locator("table.trace-calls tbody tr.rowlink")).to_have_count(3)

    row = page.locator("table.trace-calls tbody tr.rowlink").first
    expect(row.get_by_role("link", name="lookup_order")).to_have_attribute("href", re.compile(r"/tools/lookup_order/"))
    row.locator("td.message").click()
    expect(page).to_have_url(re.compile(rf"/p/{traffic.slug}/traces/[0-9a-f]{{32}}/"))


def test_the_first_page_of_the_explorer_shows_newer_as_plainly_disabled(logged_in_page, live_server, traffic):
    from dashboard.selectors import traces

    page = logged_in_page
    traces.PAGE_SIZE, size = 2, traces.PAGE_SIZE  # the live server runs in this process
    try:
        page.goto(f"{live_server.url}/p/{traffic.slug}/traces/?range=24h")
        newer = page.locator(".trace-pager .pager-off").first
        expect(newer).to_have_text("← Newer")
        assert newer.evaluate("el => el.tagName") == "SPAN"
        assert newer.evaluate("el => getComputedStyle(el).cursor") == "not-allowed"
        expect(page.locator(".trace-pager a[rel=next]").first).to_be_visible()
    finally:
        traces.PAGE_SIZE = size


def test_the_promote_form_shows_the_failure_fields_only_when_a_failure_is_expected(logged_in_page, live_server, traffic):
    page = logged_in_page
    call = ToolCall.objects.filter(project=traffic, ok=False).first()

    page.goto(f"{live_server.url}/p/{traffic.slug}/evals/promote/{call.trace_id}/{call.span_id}/")

    failure = page.locator("fieldset[data-expect-failure]")
    page.get_by_label("The call now succeeds").check()
    expect(failure).to_be_hidden()
    page.get_by_label("The call fails, in an actionable way").check()
    expect(failure).to_be_visible()
    expect(failure.locator("select").first).to_be_enabled()
