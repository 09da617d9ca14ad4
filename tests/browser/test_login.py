"""(a) Logging in through the form, landing on the project overview, logging out; a wrong password."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PASSWORD, log_in, screenshot

pytestmark = pytest.mark.browser


def test_a_visitor_logs_in_lands_on_the_overview_and_logs_out(page, live_server, owner, project):
    user = owner
    page.goto(f"{live_server.url}/p/{project.slug}/")
    expect(page).to_have_url(re.compile(r"/login/\?next="))
    screenshot(page, "login")

    log_in(page, live_server, user.get_username(), PASSWORD, next_path=f"/p/{project.slug}/")

    expect(page).to_have_url(f"{live_server.url}/p/{project.slug}/")
    nav = page.get_by_role("navigation", name="Project")
    expect(nav.get_by_role("link", name="Overview")).to_have_attribute("aria-current", "page")
    expect(page).to_have_title(re.compile(project.name))
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(f"{live_server.url}/login/")
    page.goto(f"{live_server.url}/p/{project.slug}/")
    expect(page).to_have_url(re.compile(r"/login/\?next="))


def test_a_wrong_password_shows_the_error_and_stays_on_the_form(page, live_server, owner, project):
    user = owner

    log_in(page, live_server, user.get_username(), "not-the-password")

    expect(page.get_by_role("alert")).to_contain_text("didn't match")
    expect(page.get_by_label("Password")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/login/"))
