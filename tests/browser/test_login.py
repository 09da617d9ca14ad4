"""(a) Logging in through the form, landing on the project overview, logging out; a wrong password;
too many wrong passwords, and the lockout's end."""

import datetime as dt
import re
import time

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


def test_wrong_passwords_lock_the_login_and_it_opens_again_after_the_cool_off(page, live_server, owner, project, settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = dt.timedelta(seconds=2)  # production: TOOLWATCH_LOGIN_LOCKOUT_MINUTES
    for n in range(3):
        log_in(page, live_server, owner.get_username(), f"wrong-{n}")
    expect(page.get_by_role("heading", name="Too many failed logins")).to_be_visible()

    log_in(page, live_server, owner.get_username(), PASSWORD)  # the right password, while locked

    expect(page.get_by_role("alert")).to_contain_text(f"After 3 wrong passwords, logging in as {owner.get_username()}")
    expect(page).to_have_url(re.compile(r"/login/"))

    time.sleep(2.5)  # past the cool-off
    log_in(page, live_server, owner.get_username(), PASSWORD, next_path=f"/p/{project.slug}/")

    expect(page).to_have_url(f"{live_server.url}/p/{project.slug}/")
