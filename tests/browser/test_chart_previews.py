"""The server-drawn chart previews (dashboard/charts/preview.py) in a real browser: the first
screen shows them before plotly.js has run, and Plotly's charts replace them in the same boxes."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ingest
from tests.otlp_builders import agent_with_tools

pytestmark = pytest.mark.browser

# The boxes' size and what is in them, for every chart on the page.
BOXES_JS = """() => [...document.querySelectorAll("[data-figure]")].map(el => {
  const box = el.getBoundingClientRect(), preview = el.querySelector(":scope > svg.chart-preview");
  return { id: el.dataset.figure, top: box.top, height: box.height, width: box.width, role: el.getAttribute("role"),
           label: el.getAttribute("aria-label"), drawn: el.hasAttribute("data-drawn"),
           preview: preview && { height: preview.getBoundingClientRect().height,
                                 hidden: preview.getAttribute("aria-hidden"),
                                 marks: preview.querySelectorAll("path").length },
           plotly: !!el.querySelector(".plot-container .main-svg") };
})"""
# Layout shifts from here on (Chromium's Layout Instability API), summed.
SHIFTS_JS = """() => { window.__shifts = 0; new PerformanceObserver(list => {
  for (const entry of list.getEntries()) window.__shifts += entry.value; }).observe({ type: "layout-shift" }); }"""


@pytest.fixture
def tool_page(logged_in_page, live_server, project):
    for _ in range(2):
        ingest(live_server, project, lambda tracer: agent_with_tools(tracer, tools=[
            {"name": "lookup_order", "error": TimeoutError("upstream timed out after 30 s")}, {"name": "search_kb"},
        ]))  # fmt: skip
    return f"{live_server.url}/p/{project.slug}/tools/lookup_order/"


def test_the_first_screen_shows_previews_until_plotly_replaces_them_in_the_same_boxes(logged_in_page, tool_page):
    page = logged_in_page
    held = []
    page.route("**/vendor/plotly.min*.js", lambda route: held.append(route))  # answered once the previews are checked
    page.goto(tool_page, wait_until="commit")
    page.wait_for_selector('[data-figure="fig-latency"] > svg.chart-preview')  # the last chart: the HTML is in

    before = page.evaluate(BOXES_JS)
    on_screen = [box for box in before if box["top"] < 800]
    assert len(before) == 6 and len(on_screen) == 3
    for box in before:  # every chart has its preview, filling its box, hidden from assistive technology
        assert not box["drawn"] and not box["plotly"], box
        assert box["preview"] and box["preview"]["hidden"] == "true" and box["preview"]["marks"] > 0, box
        assert box["preview"]["height"] == box["height"], box
        assert box["role"] == "img" and box["label"]
    page.evaluate(SHIFTS_JS)

    assert held, "plotly.js was requested"
    held[0].continue_()
    for box in before:
        expect(page.locator(f'[data-figure="{box["id"]}"]')).to_have_attribute("data-drawn", "1")
    after = {box["id"]: box for box in page.evaluate(BOXES_JS)}
    for box in before:
        now = after[box["id"]]
        assert now["plotly"] and now["preview"] is None, now  # the preview gave way to the interactive chart
        assert (now["top"], now["height"], now["width"]) == (box["top"], box["height"], box["width"]), (box, now)
        assert (now["role"], now["label"]) == (box["role"], box["label"])
    assert page.evaluate("() => window.__shifts") == 0, "nothing moved when the charts were swapped"
