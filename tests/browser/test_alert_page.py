"""A drift alert's page as an engineer meets it: the sentence first, one chart of the whole
baseline against the recent window, then sample traces, the statistics folded below; and the
sentence unchanged after later evaluations (issue 15 item 1)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from playwright.sync_api import expect

from dashboard.models import Alert
from demo import scenarios
from tests.browser.conftest import screenshot
from tests.dashboard.alerting.test_evaluation import run_hourly, store

pytestmark = pytest.mark.browser


@pytest.fixture
def drift_alert(project):
    scenario = scenarios.generate("s2_retry_ramp", 4)
    expected = scenario.expected[0]
    store(project, scenario)
    run_hourly(project, expected.onset, expected.deadline + dt.timedelta(hours=2))
    alert = Alert.objects.get(project=project)
    # Later evaluations (the condition still holding) must not replace why it opened.
    run_hourly(project, alert.opened_at + dt.timedelta(hours=3), alert.opened_at + dt.timedelta(hours=4))
    alert.refresh_from_db()
    return alert


def test_the_alert_page_leads_with_its_sentence_and_one_chart_then_the_folded_statistics(logged_in_page, live_server, project,
                                                                                         drift_alert):  # fmt: skip
    page = logged_in_page
    page.goto(f"{live_server.url}/p/{project.slug}/alerts/")
    page.get_by_role("link", name=re.compile("Retry rate up")).first.click()
    expect(page).to_have_url(re.compile(rf"/alerts/{drift_alert.pk}/"))

    sentence = drift_alert.summary
    assert re.search(r"Retry rate of \S+ rose from [\d.]+ % to [\d.]+ %", sentence), sentence
    expect(page.get_by_text(sentence, exact=True).first).to_be_visible()
    chart = page.locator("[data-figure='alert-evidence']")
    expect(chart.locator(".main-svg").first).to_be_attached()  # drawn by plotly.js
    # The whole baseline is drawn: the chart's first point is the baseline's first hour.
    first_x = page.evaluate("() => document.querySelector(\"[data-figure='alert-evidence']\").data[0].x[0]")
    baseline_start = dt.datetime.fromisoformat(drift_alert.opening_evidence["baseline"][0])
    assert dt.datetime.fromisoformat(first_x.replace(" ", "T")).replace(tzinfo=dt.UTC) <= baseline_start.astimezone(dt.UTC)

    opened, latest = page.locator("details.evidence-opening"), page.locator("details.evidence-latest")
    expect(opened).not_to_have_attribute("open", "")  # folded
    expect(latest).not_to_have_attribute("open", "")
    opened.locator("summary").click()
    expect(opened.locator("table").first).to_be_visible()
    screenshot(page, "alert")
