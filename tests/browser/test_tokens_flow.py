"""(b) A personal API token: created on account/tokens/ with the scopes picked, shown once, gone on
reload, refused outside its scopes, revoked."""

import json
import re
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser


def scope_box(page, scope: str):
    return page.get_by_role("checkbox", name=re.compile(f"^{scope} "))


def api_get(url: str, token: str) -> tuple[int, dict | str]:
    """A script's request with the token (no browser cookies): (status, JSON body or text)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_token_is_shown_once_then_revoked(logged_in_page, live_server):
    page = logged_in_page
    page.goto(f"{live_server.url}/account/tokens/")
    expect(page).to_have_url(f"{live_server.url}/account/tokens/")
    expect(page.get_by_role("heading", level=1)).to_have_text("API tokens")

    page.get_by_label("Name").fill("CI eval runner")
    page.get_by_label("Expires").select_option(label="In 90 days")
    expect(scope_box(page, "read")).to_be_checked()
    scope_box(page, "read").uncheck()
    scope_box(page, "runs").check()
    page.get_by_role("button", name="Create token").click()

    plain = page.locator("#new-token").inner_text()
    assert re.fullmatch(r"twu_[A-Za-z0-9_-]{43}", plain)
    screenshot(page, "api-token-created")
    row = page.get_by_role("row").filter(has_text="CI eval runner")
    expect(row).to_contain_text(plain[:12] + "…")
    expect(row).to_contain_text("Active")
    expect(row.get_by_role("cell").nth(2)).to_have_text("runs")
    status, body = api_get(f"{live_server.url}/api/v1/projects/", plain)
    assert (status, body) == (403, {"detail": "This token lacks the 'read' scope.", "required_scope": "read"})
    assert api_get(f"{live_server.url}/api/v1/projects/alpha/eval-cases/export.jsonl", plain)[0] == 200

    page.reload()
    expect(page.get_by_text(plain)).to_have_count(0)
    expect(page.locator("#new-token")).to_have_count(0)

    row.get_by_role("button", name="Revoke CI eval runner").click()
    expect(page.get_by_role("status")).to_contain_text("revoked")
    expect(row).to_contain_text("Revoked")
    expect(row.get_by_role("button")).to_have_count(0)


def test_a_token_without_a_scope_is_refused_with_a_message(logged_in_page, live_server):
    page = logged_in_page
    page.goto(f"{live_server.url}/account/tokens/")

    page.get_by_label("Name").fill("nothing at all")
    scope_box(page, "read").uncheck()
    page.get_by_role("button", name="Create token").click()

    expect(page.get_by_role("alert")).to_contain_text("Pick at least one scope")
    expect(page.get_by_label("Name")).to_have_value("nothing at all")
    expect(page.get_by_role("cell", name="No tokens yet.")).to_be_visible()


def test_a_token_without_a_name_is_refused_with_a_message(logged_in_page, live_server):
    page = logged_in_page
    page.goto(f"{live_server.url}/account/tokens/")

    page.get_by_role("button", name="Create token").click()

    expect(page.get_by_role("alert")).to_contain_text("Name the token")
    expect(page.get_by_label("Name")).to_have_attribute("aria-invalid", "true")
