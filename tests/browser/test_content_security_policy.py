"""Every page works under the Content-Security-Policy it is sent with (config/security.py):
charts drawn, API docs rendered, and not one violation reported by the browser."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ingest
from tests.otlp_builders import agent_with_tools

pytestmark = pytest.mark.browser


@pytest.fixture
def violations(logged_in_page) -> list[str]:
    """What the browser says it refused under the policy (the console's CSP messages and
    securitypolicyviolation events)."""
    seen: list[str] = []
    logged_in_page.on(
        "console", lambda message: seen.append(message.text) if "Content Security Policy" in message.text else None
    )
    logged_in_page.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => console.error("
        "'Content Security Policy violation: ' + e.violatedDirective + ' ' + e.blockedURI));"
    )
    return seen


def test_the_chart_pages_draw_their_charts_with_no_policy_violation(logged_in_page, live_server, project, violations):
    page = logged_in_page
    ingest(live_server, project, lambda tracer: agent_with_tools(tracer, tools=[
        {"name": "lookup_order", "error": TimeoutError("upstream timed out after 30 s")},
    ]))  # fmt: skip

    response = page.goto(f"{live_server.url}/p/{project.slug}/tools/lookup_order/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    expect(page.locator(".js-plotly-plot").first).to_be_visible()
    page.goto(f"{live_server.url}/p/{project.slug}/health/")
    expect(page.locator(".js-plotly-plot").first).to_be_visible()
    page.goto(f"{live_server.url}/p/{project.slug}/traces/")
    page.locator("main table a[href*='/traces/']").first.click()
    expect(page).to_have_url(re.compile(r"/traces/[0-9a-f]{32}/"))

    assert violations == []


def test_the_api_docs_render_with_no_policy_violation(logged_in_page, live_server, violations):
    page = logged_in_page

    page.goto(f"{live_server.url}/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Toolwatch API")
    page.goto(f"{live_server.url}/api/redoc/")
    expect(page.get_by_role("heading", name=re.compile("Toolwatch API"))).to_be_visible()

    # Redoc's "powered by" logo is on its CDN: refused, as every CDN is. Nothing of ours is.
    assert [text for text in violations if "cdn.redoc.ly" not in text] == []
