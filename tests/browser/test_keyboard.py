"""(d) The keyboard reaches the main navigation, and focus is visible."""

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

MAX_TABS = 15


def focused(page) -> dict:
    return page.evaluate(
        """() => {
            const el = document.activeElement;
            const style = getComputedStyle(el);
            return {text: el.textContent.trim(), inNav: !!el.closest('nav[aria-label="Project"]'),
                    outlineStyle: style.outlineStyle, outlineWidth: parseFloat(style.outlineWidth)};
        }"""
    )


def test_tab_reaches_every_main_nav_link_with_a_visible_outline(logged_in_page, live_server, project):
    page = logged_in_page
    page.goto(f"{live_server.url}/p/{project.slug}/")
    nav_links = page.get_by_role("navigation", name="Project").get_by_role("link")
    expect(nav_links.first).to_be_visible()
    wanted = set(nav_links.all_inner_texts())
    reached = {}

    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        state = focused(page)
        if state["inNav"] and state["text"] in wanted:
            reached[state["text"]] = state

    assert set(reached) == wanted
    for text, state in reached.items():
        assert state["outlineStyle"] != "none" and state["outlineWidth"] >= 2, f"no visible focus on {text!r}"


def test_the_skip_link_is_the_first_stop_and_leads_to_the_content(logged_in_page, live_server):
    page = logged_in_page
    page.goto(f"{live_server.url}/account/tokens/")

    page.keyboard.press("Tab")

    assert focused(page)["text"] == "Skip to content"
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: url.endswith("#main"))  # the fragment navigation lands a moment after the key
    assert page.url.endswith("#main")
