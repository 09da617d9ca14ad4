"""A trace's logical calls in a real browser: a call opens from the keyboard to its attempts, and
an attempt's link leads to its tool-call card on the same page."""

import re

import pytest
from playwright.sync_api import expect

from ingest.models import ToolCall
from tests.browser.conftest import ingest
from tests.otlp_builders import agent_with_tools

pytestmark = pytest.mark.browser

ORDER = {"gen_ai.tool.call.arguments": '{"order": 7}'}


def test_a_call_opens_to_its_attempts_and_an_attempt_leads_to_its_card(logged_in_page, live_server, project):
    ingest(live_server, project, lambda tracer: agent_with_tools(tracer, tools=[
        {"name": "lookup_order", "attributes": ORDER, "error": TimeoutError("upstream timed out after 30 s")},
        {"name": "lookup_order", "attributes": ORDER},  # the same arguments after a failure: a retry
        {"name": "search_kb"},
    ]))  # fmt: skip
    first, retry = ToolCall.objects.filter(project=project, tool="lookup_order").order_by("start_time")
    page = logged_in_page

    page.goto(f"{live_server.url}/p/{project.slug}/traces/{first.trace_id}/")
    calls = page.locator("details.trace-logical-call")
    expect(calls).to_have_count(2)  # lookup_order (2 attempts) and search_kb
    lookup = calls.first
    expect(lookup.locator("summary")).to_contain_text("2 attempts, 1 retry")
    attempt_link = lookup.get_by_role("link", name=re.compile(retry.span_id))
    expect(attempt_link).to_be_hidden()

    lookup.locator("summary").focus()
    page.keyboard.press("Enter")  # a <summary> opens from the keyboard
    expect(lookup).to_have_attribute("open", "")
    expect(attempt_link).to_be_visible()

    attempt_link.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"#call-{retry.span_id}$"))
    card = page.locator(f"#call-{retry.span_id}")
    expect(card).to_be_in_viewport()
    expect(card).to_contain_text("lookup_order")
