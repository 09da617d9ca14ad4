"""The dashboard as a person uses it, in a real browser: from the overview to a failed call's
waterfall, a range and filter that survive a reload, an alert acknowledged and resolved, and a
project key created (shown once) and revoked."""

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from dashboard.models import Alert
from tests.browser.conftest import ingest, screenshot
from tests.otlp_builders import agent_with_tools

pytestmark = pytest.mark.browser


@pytest.fixture
def traffic(logged_in_page, live_server, project):
    ingest(live_server, project, lambda tracer: agent_with_tools(tracer, tools=[
        {"name": "lookup_order", "error": TimeoutError("upstream timed out after 30 s")},
        {"name": "search_kb"},
    ]))  # fmt: skip
    ingest(live_server, project, lambda tracer: agent_with_tools(tracer, tools=[{"name": "search_kb"}]), service="billing-agent")
    return project


def test_from_the_overview_through_a_tool_to_a_failed_calls_waterfall(logged_in_page, live_server, traffic):
    page = logged_in_page

    page.goto(f"{live_server.url}/p/{traffic.slug}/")
    page.get_by_role("link", name="lookup_order", exact=True).first.click()
    expect(page).to_have_url(re.compile(rf"/p/{traffic.slug}/tools/lookup_order/"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("lookup_order")

    page.locator("main table a[href*='/traces/']").first.click()
    expect(page).to_have_url(re.compile(rf"/p/{traffic.slug}/traces/[0-9a-f]{{32}}/"))
    expect(page.get_by_role("heading", name="Waterfall")).to_be_visible()
    waterfall = page.locator("table.trace-waterfall")
    for name in ("invoke_agent support", "chat gpt-4o", "execute_tool lookup_order", "execute_tool search_kb"):
        expect(waterfall.get_by_role("link", name=name)).to_be_visible()
    expect(page.locator("main").get_by_text("transient").first).to_be_visible()
    expect(page.get_by_role("link", name="Promote to eval case")).to_have_count(1)  # failed calls only
    screenshot(page, "flow-trace")


def test_the_range_and_filters_survive_a_reload_and_follow_the_links(logged_in_page, live_server, traffic):
    page = logged_in_page
    page.goto(f"{live_server.url}/p/{traffic.slug}/")

    page.locator("select[name='range']").select_option("7d")
    page.locator("select[name='service']").select_option("support-agent")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"range=7d"))
    expect(page).to_have_url(re.compile(r"service=support-agent"))
    page.reload()

    expect(page.locator("select[name='range']")).to_have_value("7d")
    expect(page.locator("select[name='service']")).to_have_value("support-agent")
    page.get_by_role("link", name="lookup_order", exact=True).first.click()
    expect(page).to_have_url(re.compile(r"/tools/lookup_order/\?.*range=7d"))
    expect(page).to_have_url(re.compile(r"service=support-agent"))


def test_an_alert_is_acknowledged_then_resolved(logged_in_page, live_server, owner, project):
    user = owner  # the one logged_in_page logged in
    now = timezone.now()
    alert = Alert.objects.create(
        project=project, tool="search_kb", kind="retry_rise_flat_error", opened_at=now, last_seen_at=now,
        summary="retry rate 0.31 vs baseline 0.12 while error rate 0.04 vs 0.04",
    )  # fmt: skip
    page = logged_in_page

    page.goto(f"{live_server.url}/p/{project.slug}/alerts/")
    page.get_by_role("link", name=re.compile("Retry rate up")).first.click()
    expect(page).to_have_url(re.compile(rf"/alerts/{alert.pk}/"))
    page.get_by_role("button", name="Acknowledge").click()
    expect(page.locator(".alertstatus").first).to_have_text("acknowledged")
    page.get_by_role("button", name="Resolve").click()

    expect(page.locator(".alertstatus").first).to_have_text("resolved")
    expect(page.get_by_role("button", name="Resolve")).to_have_count(0)
    alert.refresh_from_db()
    assert alert.status == "resolved" and alert.resolved_by == user.get_username()
    assert alert.acknowledged_by == user.get_username()


def test_a_project_key_is_shown_once_then_revoked(logged_in_page, live_server, project):
    page = logged_in_page
    page.goto(f"{live_server.url}/p/{project.slug}/settings/")

    page.get_by_label("Key name").fill("checkout-prod")  # its own label, not the project's name field
    page.get_by_role("button", name="Create API key").click()
    key = page.locator("#plain-key").input_value()
    assert key.startswith("tw_")
    expect(page.locator("#env-lines")).to_contain_text(f"Authorization=Bearer {key}")

    page.get_by_role("link", name=re.compile("back to the API keys")).click()
    expect(page.locator("main")).not_to_contain_text(key)
    row = page.locator("#keys tr", has_text="checkout-prod")
    expect(row).to_contain_text("active")
    row.get_by_role("button", name=re.compile("Revoke key")).click()

    expect(page.locator("#keys tr", has_text="checkout-prod")).to_contain_text("revoked")
    page.reload()
    expect(page.locator("main")).not_to_contain_text(key)
