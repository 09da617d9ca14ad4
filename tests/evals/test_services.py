"""Promote, edit, pin, retire, tag; runs, regressions and their alerts; recurrence."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from dashboard.models import Alert, AlertChannel, Delivery
from evals import expectations, selectors, services
from evals.models import EvalCase, EvalCaseVersion, EvalResult, SnapshotSpan
from ingest.models import Resource, Span, ToolCall
from tests.evals.server_helpers import ingest_failure, project_key  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


@pytest.fixture
def failure(client, project_key):
    return ingest_failure(client, project_key[1])


def promote(project, call, **kwargs) -> EvalCase:
    return services.case_promote(project=project, trace_id=call.trace_id, span_id=call.span_id, **kwargs).case


def pinned_case(project, call, now=None) -> EvalCase:
    case = promote(project, call)
    services.case_pin(case=case, now=now)
    case.refresh_from_db()
    return case


# --- promotion ---------------------------------------------------------------------------


def test_promoting_a_failure_ingested_through_otlp_keeps_tool_arguments_and_observed_outcome(project, failure):
    promotion = services.case_promote(project=project, trace_id=failure.trace_id, span_id=failure.span_id)

    case = promotion.case
    assert promotion.created
    assert case.tool == "search_flights"
    assert case.error_class == failure.error_class == "validation"
    assert case.observed["message"] == failure.message
    assert case.observed["field"] == "date"
    assert case.observed["contract"] == failure.contract
    assert case.observed["fingerprint"] == case.fingerprint == failure.fingerprint != ""
    version = case.versions.get()
    assert version.number == 1 and not version.is_pinned
    assert version.arguments == {"date": "tomorrow", "to": "LIS"}
    assert version.expect == expectations.suggest(case.observed)


def test_promoting_the_same_failure_twice_finds_the_existing_case(project, failure):
    first = services.case_promote(project=project, trace_id=failure.trace_id, span_id=failure.span_id)
    again = services.case_promote(project=project, trace_id=failure.trace_id, span_id=failure.span_id, title="other")

    assert again.case.pk == first.case.pk and not again.created
    assert EvalCase.objects.count() == 1 and again.case.title == first.case.title


def test_promoting_an_ok_call_is_refused_and_says_why(client, project, project_key):
    ingest_failure(client, project_key[1])
    ok = ToolCall.objects.get(tool="lookup_order")

    with pytest.raises(services.EvalError, match="succeeded: only failed calls can be promoted") as refused:
        services.case_promote(project=project, trace_id=ok.trace_id, span_id=ok.span_id)
    assert refused.value.field == "span_id" and not refused.value.missing


def test_promoting_an_unknown_span_is_refused_as_missing(project):
    with pytest.raises(services.EvalError, match="no tool call 00000000000000aa in trace") as refused:
        services.case_promote(project=project, trace_id="ab" * 16, span_id="00000000000000aa")
    assert refused.value.missing


def test_the_snapshot_keeps_the_tool_span_its_ancestors_siblings_and_descendants_only(project, failure):
    case = promote(project, failure)

    rows = list(case.snapshot.values_list("name", "role", "depth"))
    assert rows == [
        ("invoke_agent support", "ancestor", 0),
        ("chat gpt-4o", "sibling", 1),
        ("execute_tool search_flights", "tool", 1),
        ("GET /flights", "descendant", 2),
        ("execute_tool lookup_order", "sibling", 1),
        ("invoke_agent planner", "sibling", 1),
    ]
    tool = case.snapshot.get(role="tool")
    assert tool.tool_call["error_class"] == "validation" and tool.tool_call["span_id"] == failure.span_id
    assert tool.events[0]["name"] == "exception"
    assert tool.attributes["gen_ai.tool.name"] == "search_flights"


def test_the_snapshot_survives_deleting_the_spans_and_tool_calls(project, failure):
    case = promote(project, failure)

    Span.objects.all().delete()
    ToolCall.objects.all().delete()

    assert SnapshotSpan.objects.filter(case=case).count() == 6
    assert EvalCase.objects.get(pk=case.pk).observed["message"] == failure.message


def test_each_snapshot_span_keeps_its_own_copy_of_its_resources_attributes(project, failure):
    case = promote(project, failure)

    Span.objects.all().delete()
    Resource.objects.all().delete()

    resources = [span.resource_attributes for span in SnapshotSpan.objects.filter(case=case)]
    assert resources == [{"service.name": "support-agent", "deployment.environment.name": "prod"}] * 6


def test_a_bad_expectation_at_promotion_names_its_field(project, failure):
    with pytest.raises(services.EvalError) as refused:
        promote(project, failure, expect={"outcome": "error", "error_class": "nope"})
    assert refused.value.field == "error_class"


def test_tags_are_lower_cased_deduplicated_and_checked(project, failure):
    case = promote(project, failure, tags=["Checkout", "checkout", "p1"])
    assert sorted(case.tags.values_list("name", flat=True)) == ["checkout", "p1"]

    with pytest.raises(services.EvalError, match="is not a tag") as refused:
        services.case_set_tags(case=case, tags=["no spaces allowed"])
    assert refused.value.field == "tags"
    assert services.case_set_tags(case=case, tags=["p2"]) == ["p2"]
    assert list(case.tags.values_list("name", flat=True)) == ["p2"]


# --- versions ----------------------------------------------------------------------------


def test_pinning_freezes_the_draft_with_the_shared_content_hash(project, failure):
    case = promote(project, failure)
    version = services.case_pin(case=case)

    assert version.content_hash == expectations.content_hash(
        case.tool, version.arguments, version.expect, version.timeout_s
    )
    assert version.content_hash.startswith("sha256:")
    case.refresh_from_db()
    assert case.status == "pinned" and case.pinned_version == 1 and not case.has_draft


def test_pinning_twice_is_refused(project, failure):
    case = pinned_case(project, failure)
    with pytest.raises(services.EvalError, match="pinned already"):
        services.case_pin(case=case)


def test_editing_a_draft_changes_it_in_place(project, failure):
    case = promote(project, failure)
    version = services.case_edit(case=case, expect={"outcome": "success"}, timeout_s=5)

    assert version.number == 1 and EvalCaseVersion.objects.filter(case=case).count() == 1
    assert version.expect["outcome"] == "success" and version.timeout_s == 5


def test_editing_a_pinned_case_makes_a_new_draft_version_and_leaves_the_pinned_one_alone(project, failure):
    case = pinned_case(project, failure)
    pinned = case.versions.get(number=1)

    draft = services.case_edit(case=case, arguments={"date": "2025-01-01"})

    assert draft.number == 2 and not draft.is_pinned and draft.arguments == {"date": "2025-01-01"}
    assert draft.expect == pinned.expect
    assert EvalCaseVersion.objects.get(pk=pinned.pk).arguments == {"date": "tomorrow", "to": "LIS"}
    case.refresh_from_db()
    assert case.latest_version == 2 and case.pinned_version == 1 and case.has_draft
    v2 = services.case_pin(case=case)
    assert v2.number == 2 and v2.content_hash != pinned.content_hash


def test_an_edit_that_changes_nothing_makes_no_version(project, failure):
    case = pinned_case(project, failure)
    same = services.case_edit(case=case, expect=case.versions.get().expect)
    assert same.number == 1 and case.versions.count() == 1


def test_a_bad_timeout_or_expectation_names_the_field(project, failure):
    case = promote(project, failure)
    with pytest.raises(services.EvalError) as bad:
        services.case_edit(case=case, timeout_s=0)
    assert bad.value.field == "timeout_s"
    with pytest.raises(services.EvalError) as bad:
        services.case_edit(case=case, expect={"outcome": "success", "next_action": "retry"})
    assert bad.value.field == "next_action"


def test_a_retired_case_is_not_exported_and_cannot_be_edited_until_restored(project, failure):
    case = pinned_case(project, failure)
    services.case_retire(case=case)

    assert case.status == "retired"
    assert selectors.export_records(project, selectors.CaseFilters()) == []
    with pytest.raises(services.EvalError, match="retired"):
        services.case_edit(case=case, timeout_s=3)
    services.case_restore(case=case)
    assert [r["case_id"] for r in selectors.export_records(project, selectors.CaseFilters())] == [case.pk]


# --- runs and regressions ----------------------------------------------------------------

T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def result(case: EvalCase, status: str = "passed", **extra) -> dict:
    version = case.versions.get(number=case.pinned_version)
    return {"case_id": case.pk, "version": version.number, "content_hash": version.content_hash, "status": status,
            "reasons": [] if status == "passed" else ["expected success, got validation"], **extra}  # fmt: skip


def post_run(project, results, *, at=T0, label="git:abc"):
    return services.run_record(
        project=project, label=label, started_at=at, finished_at=at + dt.timedelta(seconds=3), results=results, now=at
    )


def test_a_run_records_each_result_and_its_tally(project, failure):
    case = pinned_case(project, failure)
    run = post_run(project, [result(case, "failed", observed={"ok": False}, duration_ms=12)])

    assert (run.passed, run.failed, run.errors, run.regressions) == (0, 1, 0, 0)
    stored = run.results.get()
    assert stored.version.number == 1 and stored.reasons == ["expected success, got validation"]
    assert stored.observed == {"ok": False} and stored.duration_ms == 12 and not stored.regression


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"case_id": 999999}, "results[0].case_id", "no eval case 999999"),
        ({"version": 7}, "results[0].version", "has no version 7"),
        ({"content_hash": "sha256:00"}, "results[0].content_hash", "is not the hash of case"),
        ({"status": "skipped"}, "results[0].status", "must be one of passed, failed, error"),
        ({"case_id": "12"}, "results[0].case_id", "must be an integer"),
        ({"reasons": "nope"}, "results[0].reasons", "must be a list of strings"),
    ],
)
def test_a_bad_result_is_refused_naming_its_field(project, failure, change, field, message):
    case = pinned_case(project, failure)
    with pytest.raises(services.EvalError, match=message) as refused:
        post_run(project, [{**result(case), **change}])
    assert refused.value.field == field
    assert not EvalResult.objects.exists()


def test_a_draft_version_or_a_case_twice_is_refused(project, failure):
    case = promote(project, failure)
    with pytest.raises(services.EvalError, match="is a draft"):
        post_run(project, [{"case_id": case.pk, "version": 1, "content_hash": "", "status": "passed"}])
    services.case_pin(case=case)
    case.refresh_from_db()
    with pytest.raises(services.EvalError, match="appears twice") as refused:
        post_run(project, [result(case), result(case)])
    assert refused.value.field == "results[1].case_id"


def test_another_projects_case_is_unknown(client, project, failure):
    from tests.factories import make_key

    other, other_key = make_key()
    other_case = pinned_case(other, ingest_failure(client, other_key))
    with pytest.raises(services.EvalError, match=f"no eval case {other_case.pk}"):
        post_run(project, [result(other_case)])


def test_passed_then_failed_is_a_regression_and_alerts_through_the_projects_channels(project, failure):
    channel = AlertChannel.objects.create(project=project, kind="webhook", name="ci", target="https://example.invalid/h")
    case = pinned_case(project, failure)
    post_run(project, [result(case, "passed")], at=T0)

    run = post_run(project, [result(case, "failed")], at=T0 + dt.timedelta(hours=1), label="git:def")

    assert run.regressions == 1 and run.results.get().regression
    alert = Alert.objects.get(project=project, kind="eval_regression")
    assert alert.tool == "search_flights" and alert.is_open
    assert f"#{case.pk}" in alert.summary and "git:def" in alert.summary
    assert alert.evidence["cases"][0]["case_id"] == case.pk
    delivery = Delivery.objects.get(alert=alert)
    assert delivery.channel == channel and delivery.status == "pending" and delivery.event == "opened"


def test_failing_again_is_not_a_new_regression_and_passing_again_resolves_the_alert(project, failure):
    case = pinned_case(project, failure)
    post_run(project, [result(case, "passed")], at=T0)
    post_run(project, [result(case, "error")], at=T0 + dt.timedelta(hours=1))

    still = post_run(project, [result(case, "failed")], at=T0 + dt.timedelta(hours=2))
    assert still.regressions == 0
    assert Alert.objects.get(kind="eval_regression").is_open

    post_run(project, [result(case, "passed")], at=T0 + dt.timedelta(hours=3))
    assert Alert.objects.get(kind="eval_regression").status == "resolved"


def test_a_first_failure_is_not_a_regression(project, failure):
    case = pinned_case(project, failure)
    run = post_run(project, [result(case, "failed")])
    assert run.regressions == 0 and not Alert.objects.exists()


def test_the_previous_result_is_the_latest_earlier_run_by_start_time(project, failure):
    case = pinned_case(project, failure)
    post_run(project, [result(case, "failed")], at=T0 + dt.timedelta(hours=2))
    post_run(project, [result(case, "passed")], at=T0 + dt.timedelta(hours=1))  # posted late, started earlier

    run = post_run(project, [result(case, "failed")], at=T0 + dt.timedelta(hours=3))
    assert run.regressions == 0  # the latest earlier run (hour 2) had failed already


# --- recurrence --------------------------------------------------------------------------


def test_a_pinned_cases_failure_coming_back_in_live_traffic_is_recurrence(client, project, project_key, failure):
    case = pinned_case(project, failure, now=timezone.now() - dt.timedelta(minutes=30))
    again = ingest_failure(client, project_key[1])  # same tool and message: the same fingerprint
    later = ingest_failure(client, project_key[1], start_ns=int((timezone.now() - dt.timedelta(minutes=1)).timestamp() * 1e9))

    found = selectors.recurring_cases(project)

    assert [r.case.pk for r in found] == [case.pk]
    assert found[0].calls == 2 and found[0].last_trace_id == later.trace_id and found[0].last_span_id == later.span_id
    assert again.fingerprint == case.fingerprint
    assert selectors.recurring_cases(project, tool="lookup_order") == []
    assert selectors.recurring_cases(project, since=timezone.now()) == []


def test_failures_before_the_pin_a_draft_or_another_message_are_not_recurrence(client, project, project_key, failure):
    case = promote(project, failure)
    ingest_failure(client, project_key[1])
    assert selectors.recurring_cases(project) == []  # a draft is not watched

    services.case_pin(case=case)  # pinned now: the calls above came before
    ingest_failure(client, project_key[1], message="'to' must be an airport code")
    assert selectors.recurring_cases(project) == []
    assert selectors.case_recurrence(EvalCase.objects.get(pk=case.pk)) is None


def test_the_tool_page_says_when_a_pinned_cases_failure_recurs(client, project, project_key, failure, member):
    case = pinned_case(project, failure, now=timezone.now() - dt.timedelta(minutes=30))
    later = ingest_failure(client, project_key[1], start_ns=int((timezone.now() - dt.timedelta(minutes=1)).timestamp() * 1e9))
    client.force_login(member)

    page = client.get(f"/p/{project.slug}/tools/{case.tool}/?range=24h").content.decode()

    assert "Recurring:" in page
    assert f"/p/{project.slug}/evals/cases/{case.pk}/" in page and f"/p/{project.slug}/traces/{later.trace_id}/" in page
