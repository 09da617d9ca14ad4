"""The eval pages: cases list, promote, case detail and its actions, runs; scoping, escaping, query budgets."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from evals import services
from evals.models import EvalCase
from ingest.models import ToolCall
from tests.evals.server_helpers import HOSTILE, ingest_failure, project_key  # noqa: F401 - project_key: a fixture

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def failure(client, project_key):
    return ingest_failure(client, project_key[1])


def promote(project, call, **kwargs) -> EvalCase:
    return services.case_promote(project=project, trace_id=call.trace_id, span_id=call.span_id, **kwargs).case


def pin(case) -> EvalCase:
    services.case_pin(case=case)
    case.refresh_from_db()
    return case


def run(project, cases_statuses, at=T0, label="git:abc"):
    results = []
    for case, status in cases_statuses:
        version = case.versions.get(number=case.pinned_version)
        results.append({"case_id": case.pk, "version": version.number, "content_hash": version.content_hash,
                        "status": status, "reasons": [] if status == "passed" else [f"expected success, got {HOSTILE}"]})  # fmt: skip
    return services.run_record(project=project, label=label, started_at=at, finished_at=at, results=results, now=at)


@pytest.fixture
def several_cases(client, project, project_key):
    """Five pinned cases with tags, two runs (the second with regressions) and a recurrence."""
    cases = []
    for n in range(5):
        call = ingest_failure(client, project_key[1], tool=f"tool_{n}", message=f"'field{n}' must be set")
        case = promote(project, call, tags=["p1", f"t{n}"])
        services.case_pin(case=case, now=timezone.now() - dt.timedelta(hours=1))
        case.refresh_from_db()
        cases.append(case)
    ingest_failure(client, project_key[1], tool="tool_0", message="'field0' must be set")
    run(project, [(case, "passed") for case in cases], at=T0)
    run(project, [(case, "failed" if case is cases[0] else "passed") for case in cases], at=T0 + dt.timedelta(hours=1))
    return cases


def url(name, project, *args):
    return reverse(name, args=[project.slug, *args])


# --- cases list --------------------------------------------------------------------------


def test_the_cases_list_shows_status_tool_tags_last_result_and_badges(member_client, project, several_cases, django_assert_max_num_queries):
    with django_assert_max_num_queries(8):
        response = member_client.get(url("eval-cases", project))

    page = response.content.decode()
    assert response.status_code == 200 and "<h1>Eval cases</h1>" in page
    for case in several_cases:
        assert f"#{case.pk} {escape(case.title)}" in page
    assert page.count("regression</span>") == 1
    assert "recurring: 1" in page
    assert "Download JSONL" in page and 'class="evaltag"' in page


def test_the_cases_list_filters_by_status_tool_tag_and_search_in_the_url(member_client, project, several_cases, failure):
    draft = promote(project, failure)
    cases_url = url("eval-cases", project)

    assert f"#{draft.pk} " in member_client.get(cases_url, {"status": "draft"}).content.decode()
    pinned_only = member_client.get(cases_url, {"status": "pinned"}).content.decode()
    assert f"#{draft.pk} " not in pinned_only and f"#{several_cases[0].pk} " in pinned_only
    by_tool = member_client.get(cases_url, {"tool": "tool_3"}).content.decode()
    assert f"#{several_cases[3].pk} " in by_tool and f"#{several_cases[2].pk} " not in by_tool
    by_tag = member_client.get(cases_url, {"tag": "t2"}).content.decode()
    assert f"#{several_cases[2].pk} " in by_tag and f"#{several_cases[1].pk} " not in by_tag
    by_message = member_client.get(cases_url, {"q": "field4"}).content.decode()
    assert f"#{several_cases[4].pk} " in by_message and f"#{several_cases[0].pk} " not in by_message
    assert "export.jsonl?tag=t2" in by_tag


def test_a_bad_status_filter_is_named_and_the_list_still_shows(member_client, project, several_cases):
    page = member_client.get(url("eval-cases", project), {"status": "bogus"}).content.decode()
    assert "status: unknown status &#x27;bogus&#x27;" in page and f"#{several_cases[0].pk} " in page


def test_the_cases_list_is_paginated(member_client, project, several_cases, monkeypatch):
    monkeypatch.setattr("dashboard.views.evals.PAGE_SIZE", 2)
    page = member_client.get(url("eval-cases", project), {"tag": "p1", "page": 2}).content.decode()
    assert "Page 2 of 3" in page and "?tag=p1&amp;page=3" in page


def test_download_jsonl_respects_the_pages_filters_and_exports_pinned_cases_only(member_client, project, several_cases, failure):
    promote(project, failure)  # a draft: never exported
    response = member_client.get(url("eval-export", project), {"tag": "t1"})

    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert response["Content-Type"] == "application/x-ndjson"
    assert "attachment" in response["Content-Disposition"]
    assert [line["case_id"] for line in lines] == [several_cases[1].pk]


# --- promote -----------------------------------------------------------------------------


def test_the_promote_page_is_prefilled_from_the_failure(member_client, project, failure, django_assert_max_num_queries):
    with django_assert_max_num_queries(6):
        response = member_client.get(url("eval-promote", project, failure.trace_id, failure.span_id))

    page = response.content.decode()
    assert response.status_code == 200 and "<h1>Promote to eval case</h1>" in page
    assert ">Promote to eval case</button>" in page
    assert 'value="search_flights: validation: &#x27;date&#x27; must be YYYY-MM-DD"' in page
    assert 'value="error" required id="id_outcome_1" checked' in page
    assert 'value="field_named" id="id_contract_checks_3" checked' in page
    assert '<option value="repair" selected>' in page
    assert "csrfmiddlewaretoken" in page
    # The tags' help text sits under the field and describes it; the heading comes before the csrf input.
    assert 'aria-describedby="id_tags_helptext"' in page and '<p class="helptext muted" id="id_tags_helptext">' in page
    assert page.index('id="expect-heading"') < page.index("csrfmiddlewaretoken", page.index('class="card evalform"'))


def test_posting_the_promote_form_creates_the_case_and_shows_it(member_client, project, failure):
    response = member_client.post(
        url("eval-promote", project, failure.trace_id, failure.span_id),
        {"title": "Dates must be ISO", "outcome": "error", "error_class": "validation",
         "contract_checks": ["field_named", "suggestion"], "next_action": "repair", "timeout_s": 10, "tags": "checkout, P1"},
    )  # fmt: skip

    case = EvalCase.objects.get()
    assert response.status_code == 302 and response["Location"] == url("eval-case", project, case.pk)
    assert case.title == "Dates must be ISO" and sorted(t.name for t in case.tags.all()) == ["checkout", "p1"]
    version = case.versions.get()
    assert version.timeout_s == 10 and version.expect["contract_checks"] == ["field_named", "suggestion"]
    assert "Promoted to eval case" in member_client.get(response["Location"]).content.decode()


def test_a_bad_expectation_in_the_form_is_named_on_its_field(member_client, project, failure):
    response = member_client.post(
        url("eval-promote", project, failure.trace_id, failure.span_id),
        {"title": "x", "outcome": "error", "error_class": "permission", "contract_checks": ["field_named"], "timeout_s": 10},
    )
    page = response.content.decode()
    assert response.status_code == 200 and not EvalCase.objects.exists()
    assert "field_named only applies to validation errors, not permission" in page


def test_promoting_the_same_failure_again_goes_to_the_existing_case_and_says_so(member_client, project, failure):
    case = promote(project, failure)
    response = member_client.get(url("eval-promote", project, failure.trace_id, failure.span_id), follow=True)
    assert response.redirect_chain[-1][0] == url("eval-case", project, case.pk)
    assert f"promoted already: it is eval case #{case.pk}" in response.content.decode()


def test_promoting_an_ok_call_or_an_unknown_span_is_refused_clearly(member_client, project, failure):
    ok = ToolCall.objects.get(tool="lookup_order")
    refused = member_client.get(url("eval-promote", project, ok.trace_id, ok.span_id))
    assert refused.status_code == 400 and "only failed calls can be promoted" in refused.content.decode()
    missing = member_client.get(url("eval-promote", project, failure.trace_id, "00000000000000ff"))
    assert missing.status_code == 404 and "no tool call 00000000000000ff" in missing.content.decode()


# --- case detail and actions -------------------------------------------------------------


def test_the_case_page_shows_snapshot_observed_expectation_versions_runs_and_recurrence(member_client, project, several_cases, django_assert_max_num_queries):
    case = several_cases[0]
    with django_assert_max_num_queries(11):
        response = member_client.get(url("eval-case", project, case.pk))

    page = response.content.decode()
    assert response.status_code == 200 and f"Eval case #{case.pk}" in page
    assert "Trace snapshot" in page and "execute_tool tool_0" in page and "GET /flights" in page
    assert "<details>" in page and "promoted call" in page
    assert "Fails as validation, passing field_named and suggestion, leading to repair." in page
    assert "sha256:" in page and 'class="regressed"' in page
    assert "Recurring:</strong> 1 call with this failure" in page and "the latest trace</a>" in page
    assert ">Edit</a>" in page and ">Retire</button>" in page and ">Pin</button>" not in page
    assert 'class="button secondary"' in page  # Edit looks like Retire: both secondary
    # The promoted call failed: its snapshot row and bar are drawn failed, as in the trace waterfall.
    assert 'class="role-tool span-failed"' in page and "wf-bar role-tool wf-failed" in page


def test_hostile_strings_from_ingest_render_as_text_everywhere(client, member_client, project, project_key):
    call = ingest_failure(client, project_key[1], tool=HOSTILE, message=HOSTILE, arguments={"q": HOSTILE})
    case = pin(promote(project, call))
    run_ = run(project, [(case, "passed")], label=HOSTILE)
    run(project, [(case, "failed")], at=T0 + dt.timedelta(hours=1))

    pages = [
        url("eval-promote", project, call.trace_id, call.span_id),  # redirects to the case: follow
        url("eval-cases", project),
        url("eval-case", project, case.pk),
        url("eval-case-edit", project, case.pk),
        url("eval-runs", project),
        url("eval-run", project, run_.pk + 1),
    ]
    for page_url in pages:
        page = member_client.get(page_url, follow=True).content.decode()
        assert "<script>alert(1)</script>" not in page and "<b>x</b>" not in page, page_url
        assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in page, page_url


def test_pin_retire_restore_and_tags_are_post_only_buttons(member_client, project, failure):
    case = promote(project, failure)
    assert member_client.get(url("eval-case-pin", project, case.pk)).status_code == 405

    member_client.post(url("eval-case-pin", project, case.pk))
    case.refresh_from_db()
    assert case.pinned_version == 1

    member_client.post(url("eval-case-tags", project, case.pk), {"tags": "smoke nightly"})
    assert sorted(case.tags.values_list("name", flat=True)) == ["nightly", "smoke"]
    bad = member_client.post(url("eval-case-tags", project, case.pk), {"tags": "<b>"}, follow=True)
    assert "Tags not saved: &#x27;&lt;b&gt;&#x27; is not a tag" in bad.content.decode()

    member_client.post(url("eval-case-retire", project, case.pk))
    case.refresh_from_db()
    assert case.status == "retired"
    assert ">Restore</button>" in member_client.get(url("eval-case", project, case.pk)).content.decode()
    member_client.post(url("eval-case-retire", project, case.pk), {"restore": "1"})
    case.refresh_from_db()
    assert case.status == "pinned"


def test_editing_a_pinned_case_through_the_form_makes_version_2(member_client, project, failure):
    case = pin(promote(project, failure))
    form = member_client.get(url("eval-case-edit", project, case.pk)).content.decode()
    assert "saving makes draft version 2" in form and "&quot;tomorrow&quot;" in form

    response = member_client.post(
        url("eval-case-edit", project, case.pk),
        {"title": "Now succeeds", "outcome": "success", "timeout_s": 15, "arguments": '{"date": "2025-01-01"}'},
        follow=True,
    )
    assert "saved as draft version 2" in response.content.decode()
    draft = case.versions.get(number=2)
    assert draft.arguments == {"date": "2025-01-01"} and draft.expect["outcome"] == "success"
    assert ">Pin</button>" in response.content.decode()


def test_bad_json_arguments_are_named_on_the_field(member_client, project, failure):
    case = promote(project, failure)
    response = member_client.post(
        url("eval-case-edit", project, case.pk),
        {"title": "x", "outcome": "success", "timeout_s": 15, "arguments": "{nope"},
    )
    assert response.status_code == 200 and "not valid JSON" in response.content.decode()


# --- runs --------------------------------------------------------------------------------


def test_the_runs_list_and_a_run_show_passed_failed_and_regressed_cases(member_client, project, several_cases, django_assert_max_num_queries):
    with django_assert_max_num_queries(6):
        runs = member_client.get(url("eval-runs", project)).content.decode()
    assert "<h1>Eval runs</h1>" in runs and runs.count('class="regressed"') == 1

    latest = several_cases[0].results.order_by("-run_id").first().run
    with django_assert_max_num_queries(6):
        page = member_client.get(url("eval-run", project, latest.pk)).content.decode()
    assert "4 passed, 1 failed, 0 errors, <strong>1 regression</strong>" in page
    assert page.count('class="regressed"') == 1 and "expected success, got &lt;script&gt;" in page


# --- scoping -----------------------------------------------------------------------------


def test_outsiders_get_404_on_every_eval_page(client, outsider, project, several_cases):
    case = several_cases[0]
    run_id = case.results.first().run_id
    client.force_login(outsider)
    gets = [
        url("eval-cases", project), url("eval-export", project), url("eval-case", project, case.pk),
        url("eval-case-edit", project, case.pk), url("eval-promote", project, case.trace_id, case.span_id),
        url("eval-runs", project), url("eval-run", project, run_id),
    ]  # fmt: skip
    for page_url in gets:
        assert client.get(page_url).status_code == 404, page_url
    for action in ("eval-case-pin", "eval-case-retire", "eval-case-tags"):
        assert client.post(url(action, project, case.pk)).status_code == 404, action


def test_a_case_of_another_project_is_404_under_this_one(client, member_client, project, several_cases):
    from tests.factories import make_key

    other, key = make_key()
    other_case = promote(other, ingest_failure(client, key))
    assert member_client.get(url("eval-case", project, other_case.pk)).status_code == 404


def test_pages_need_a_login(client, project):
    response = client.get(url("eval-cases", project))
    assert response.status_code == 302 and "/login/" in response["Location"]
