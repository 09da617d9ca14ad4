"""The eval pages say a case's true state, the promote form's failure fields are marked for the
script that hides them, and an eval-regression alert has its own page: the run, the cases, the diff."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from dashboard.models import Alert
from evals import services
from tests.evals.server_helpers import ingest_failure, project_key  # noqa: F401 - project_key: a fixture

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def case(client, project, project_key):  # noqa: F811
    call = ingest_failure(client, project_key[1], tool="search_flights", message="'date' must be set")
    return services.case_promote(project=project, trace_id=call.trace_id, span_id=call.span_id).case


def pin(case):
    services.case_pin(case=case, now=timezone.now() - dt.timedelta(hours=1))
    case.refresh_from_db()
    return case


def run(project, case, status, *, at, label, observed=None):
    version = case.versions.get(number=case.pinned_version)
    result = {"case_id": case.pk, "version": version.number, "content_hash": version.content_hash, "status": status,
              "reasons": [] if status == "passed" else ["expected success, got validation: <b>date</b> must be set"],
              "observed": observed}  # fmt: skip
    return services.run_record(project=project, label=label, started_at=at, finished_at=at, results=[result], now=at)


def html_of(client, url) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    return response.content.decode()


def test_a_draft_case_not_run_yet_says_to_pin_it(member_client, project, case):
    html = html_of(member_client, f"/p/{project.slug}/evals/cases/{case.pk}/")

    assert "it is a draft, which the export leaves out; pin it" in html


def test_a_pinned_case_not_run_yet_says_it_is_in_the_export_not_to_pin_it(member_client, project, case):
    pin(case)

    html = html_of(member_client, f"/p/{project.slug}/evals/cases/{case.pk}/")

    assert "pin it" not in html
    assert f"v{case.pinned_version} is pinned and in the export" in html


def test_the_promote_and_edit_forms_mark_the_failure_fields_for_their_script(member_client, project, case):
    html = html_of(member_client, f"/p/{project.slug}/evals/cases/{case.pk}/edit/")

    assert "<fieldset data-expect-failure>" in html and "js/expectation.js" in html


def test_an_eval_regression_alert_shows_the_run_the_case_and_the_diff_of_its_outcome(member_client, project, case):
    pin(case)
    run(project, case, "passed", at=T0, label="git:good", observed={"ok": True, "error_class": None, "message": ""})
    run(project, case, "failed", at=T0 + dt.timedelta(hours=1), label="git:<i>bad</i>",
        observed={"ok": False, "error_class": "validation", "message": "<b>date</b> must be set", "next_action": "repair"})
    alert = Alert.objects.get(project=project, kind="eval_regression")

    html = html_of(member_client, f"/p/{project.slug}/alerts/{alert.pk}/")

    assert "The outcome, before and now" in html
    assert "Passed in run" in html and "git:good" in html and "git:&lt;i&gt;bad&lt;/i&gt;" in html
    assert "&lt;b&gt;date&lt;/b&gt; must be set" in html and "<b>date</b>" not in html
    assert html.count('class="changed"') >= 2  # succeeded and class changed
    assert f"/p/{project.slug}/evals/cases/{case.pk}/" in html
    # Not a drift alert's page: no hourly-rate filler and no drift mute advice.
    assert "holds no hourly rates" not in html and "at the next evaluation" not in html
    assert "every case of this tool passes resolves it" in html
