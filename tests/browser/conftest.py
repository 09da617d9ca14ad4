"""Browser tests: Playwright driving Debian's chromium against Django's live server.

One browser per session; a fresh context (cookies, storage) per test. The live server
runs in a thread of this process on the test database (`transactional_db`), so data made
here is visible to it. Data goes in the way it does in production: OTLP over HTTP with
the official exporter to the live server's /v1/traces, then a rollup recompute.

    TOOLWATCH_SCREENSHOTS=1 .venv/bin/pytest tests/browser   # also writes docs/screenshots/*.png
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from django.utils import timezone

from ingest.models import Project
from tests.conftest import PASSWORD, require_service  # PASSWORD: every cast user's (tests/conftest.py)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
# A test that waits longer than this for an element fails, rather than hanging the suite. 5 s
# failed tests that passed on a machine at load 8 and more (plotly.js alone is 4.8 MB to parse).
TIMEOUT_MS = 10_000


@pytest.fixture(scope="session")
def browser():
    require_service(Path(CHROMIUM).exists(), f"needs chromium at {CHROMIUM}: install chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    # The sync API runs an event loop in this thread; Django's ORM refuses to run beside one unless told
    # it is safe, which it is here: the loop only drives the browser, never Django code.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()
    playwright.stop()
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(autouse=True)
def _live_database(transactional_db):
    """The live server's thread sees committed data only: every browser test gets a transactional db.
    (The fast password hasher is tests/conftest.py's, for the whole session, this thread and the server's.)"""


@pytest.fixture
def dialogs() -> list[str]:
    """The messages of every alert/confirm/prompt the page opened (an XSS would land here)."""
    return []


@pytest.fixture
def page(browser, dialogs):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()

    def on_dialog(dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    yield page
    context.close()


def log_in(page, live_server, username: str, password: str = PASSWORD, next_path: str = "") -> None:
    """Log in through the real form (as a person would), then wait for the page it leads to."""
    query = f"?next={next_path}" if next_path else ""
    page.goto(f"{live_server.url}/login/{query}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()


@pytest.fixture
def logged_in_page(page, live_server, owner, project):
    """`page`, logged in as `owner` (of `project`) through the login form (on whichever page the login leads to)."""
    log_in(page, live_server, owner.get_username())
    page.wait_for_url(lambda url: "/login/" not in url)
    return page


def screenshot(page, name: str) -> None:
    """docs/screenshots/<name>.png, only when TOOLWATCH_SCREENSHOTS=1 (README images, not assertions)."""
    if os.environ.get("TOOLWATCH_SCREENSHOTS") != "1":
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def ingest(live_server, project: Project, build: Callable, *, service: str = "support-agent") -> None:
    """Send the spans `build(tracer)` makes to the live server's /v1/traces with the official
    OTLP/HTTP exporter and a fresh project key, then recompute the rollups around now."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    from dashboard.rollups.refresh import rollups_recompute
    from ingest.services import api_key_create
    from tests.otlp_builders import sdk_spans

    _, key = api_key_create(project=project, name="browser tests")
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    try:
        assert exporter.export(sdk_spans(build, service=service)) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    now = timezone.now()
    rollups_recompute(project_id=project.pk, start=now - dt.timedelta(hours=2), end=now + dt.timedelta(hours=1))
