"""(c) A hostile tool name ingested through OTLP renders as text on the overview and traces pages."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ingest, screenshot
from tests.otlp_builders import agent_with_tools

pytestmark = pytest.mark.browser

HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def hostile_traffic(logged_in_page, live_server, project):
    ingest(live_server, project, lambda tracer: agent_with_tools(tracer, tools=[
        {"name": HOSTILE, "error": TimeoutError(f"upstream timed out {HOSTILE}")},
        {"name": HOSTILE},
    ]))  # fmt: skip
    return project


@pytest.mark.parametrize("page_path", ["", "traces/"])
def test_a_hostile_tool_name_shows_as_text_and_runs_nothing(logged_in_page, live_server, hostile_traffic, dialogs, page_path):
    page = logged_in_page

    page.goto(f"{live_server.url}/p/{hostile_traffic.slug}/{page_path}")

    expect(page.locator("main").get_by_text(HOSTILE, exact=True).filter(visible=True).first).to_be_visible()
    expect(page.locator("img[src='x']")).to_have_count(0)
    page.wait_for_load_state("networkidle")  # charts drawn, scripts run: a payload would have fired by now
    assert dialogs == []
    screenshot(page, f"escaping-{page_path.strip('/') or 'overview'}")
