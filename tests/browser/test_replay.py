"""The policy replay in a real browser: from the project's navigation to the table of policies, and
from a ranked fix to its tool's replay and back to the tool page."""

import re

import pytest
from playwright.sync_api import expect

from tests.dashboard.replay.conftest import send_seed_traffic

pytestmark = pytest.mark.browser


def test_the_nav_leads_to_the_policies_and_a_fix_to_its_tools_replay(logged_in_page, live_server, project):
    send_seed_traffic(project)
    page = logged_in_page

    page.goto(f"{live_server.url}/p/{project.slug}/?range=24h")
    page.get_by_role("navigation", name="Project").get_by_role("link", name="Replay").click()
    expect(page).to_have_url(re.compile(r"/p/alpha/replay/\?range=24h$"))
    expect(page.get_by_role("heading", name="Policy replay")).to_be_visible()
    rows = page.locator("[data-replay-policies] tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.nth(3)).to_contain_text("route by class, with field and suggestion")
    expect(page.locator("[data-replay-fixes] li").first).to_contain_text("state the error class")

    page.locator("[data-replay-fixes] li a").first.click()
    expect(page).to_have_url(re.compile(r"/p/alpha/replay/tools/[a-z_]+/\?range=24h$"))
    tool = page.url.split("/tools/")[1].split("/")[0]
    expect(page.get_by_role("heading", name=f"Replay of {tool}")).to_be_visible()

    page.get_by_role("navigation", name="Breadcrumb").get_by_role("link", name=tool).click()
    expect(page).to_have_url(re.compile(rf"/p/alpha/tools/{tool}/\?range=24h$"))
    page.locator("[data-replay-link]").click()
    expect(page.locator("[data-replay-policies] tbody tr")).to_have_count(4)
