"""evals.judge: a tool's outcome read by the server's classifier, and judged against an expectation."""

from __future__ import annotations

import pytest

from evals.judge import judge, observe, qualified_name, span_for_call
from ingest import otlp
from ingest.limits import DEFAULT_LIMITS
from ingest.normalize import normalize_tool_call
from tests.otlp_builders import protobuf_request, sdk_spans

HOSTILE = "<script>alert(1)</script><b>x</b>"
VALIDATION_ENVELOPE = {
    "isError": True,
    "error": {"type": "validation", "message": "date must be YYYY-MM-DD", "field": "date", "suggestion": "use 2026-01-31"},
}
ACTIONABLE = {
    "outcome": "error", "error_class": "validation", "contract_checks": ["field_named", "suggestion"], "next_action": "repair",
}  # fmt: skip


class QuotaError(Exception):
    pass


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001
        return caught


# --- the span -----------------------------------------------------------------------------------


def test_a_returned_value_becomes_a_genai_execute_tool_span_with_its_result_as_json():
    span = span_for_call("search_flights", {"date": "2026-01-31"}, result={"flights": []})
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["gen_ai.tool.name"] == "search_flights"
    assert span.attributes["gen_ai.tool.call.arguments"] == '{"date": "2026-01-31"}'
    assert span.attributes["gen_ai.tool.call.result"] == '{"flights": []}'
    assert span.status_code == 0 and span.events == []


def test_a_raised_exception_is_recorded_as_the_sdk_records_it():
    span = span_for_call("charge", None, exception=raised(QuotaError("over quota")))
    name = f"{__name__}.QuotaError"
    assert span.attributes["error.type"] == name
    assert (span.status_code, span.status_message) == (2, "QuotaError: over quota")
    [event] = span.events
    assert event["name"] == "exception"
    assert event["attributes"]["exception.type"] == name
    assert event["attributes"]["exception.message"] == "over quota"
    assert "Traceback" in event["attributes"]["exception.stacktrace"]
    assert "gen_ai.tool.call.result" not in span.attributes


def test_builtin_exceptions_are_named_without_a_module():
    assert qualified_name(ValueError) == "ValueError"
    assert qualified_name(QuotaError) == f"{__name__}.QuotaError"


def test_secrets_in_what_a_tool_returns_are_redacted_as_ingest_would():
    span = span_for_call("t", {"api_key": "sk-live-abcdefghijklmnopqrstuv"}, result="ok")
    assert "sk-live" not in span.attributes["gen_ai.tool.call.arguments"]


# --- observe --------------------------------------------------------------------------------------


def test_an_error_envelope_is_an_observed_failure_with_its_stated_fields():
    observed = observe("search_flights", {"date": "31/01"}, result=VALIDATION_ENVELOPE)
    assert observed["ok"] is False
    assert observed["error_class"] == "validation"
    assert observed["field"] == "date" and observed["suggestion"] == "use 2026-01-31"
    assert observed["contract"]["field_named"] is True
    assert observed["next_action"] == "repair" and observed["next_action_stated"] is False
    assert len(observed["fingerprint"]) == 16


@pytest.mark.parametrize(
    "result",
    [
        {"ok": False, "error": "refund exceeds the policy limit"},
        {"isError": True, "content": [{"type": "text", "text": "refund exceeds the policy limit"}]},
        {"error": {"message": "refund exceeds the policy limit"}},
    ],
)
def test_every_envelope_shape_the_classifier_knows_is_recognised(result):
    observed = observe("refund", None, result=result)
    assert (observed["ok"], observed["error_class"]) == (False, "business")


def test_a_plain_result_is_a_success():
    observed = observe("search_flights", None, result={"flights": [{"fare": 420}]})
    assert observed["ok"] is True and observed["error_class"] is None and observed["next_action"] is None


def test_a_next_action_stated_in_the_envelope_wins_over_the_recommended_one():
    observed = observe("refund", None, result={"ok": False, "error": "refund over limit", "next_action": "ask_user"})
    assert (observed["next_action"], observed["next_action_stated"]) == ("ask_user", True)


def test_a_raised_exception_is_classified_from_its_type():
    observed = observe("lookup", None, exception=raised(PermissionError("token lacks the orders:read scope")))
    assert observed["error_class"] == "permission"
    assert observed["classified_by"] == "error.type=PermissionError"
    assert observed["message"] == "token lacks the orders:read scope"


def test_a_hostile_message_is_kept_as_plain_text():
    observed = observe("q", None, result={"error": {"type": "validation", "message": HOSTILE}})
    assert observed["message"] == HOSTILE
    verdict = judge({"outcome": "success"}, observed)
    assert verdict.reasons == [f"expected success, got validation: {HOSTILE}"]


# --- one implementation: the runner reads a call as the server reads the same call ingested ---------


@pytest.mark.parametrize(
    ("error", "result"),
    [
        (ValueError("date must be YYYY-MM-DD"), None),
        (QuotaError("Something went wrong"), None),
        (TimeoutError("upstream timed out after 30 s"), None),
        (None, VALIDATION_ENVELOPE),
        (None, {"ok": False, "error": "Something went wrong"}),
    ],
)
def test_the_runner_and_the_ingest_path_classify_a_call_alike(error, result):
    import json

    def record(tracer):
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_flights"}
        attributes["gen_ai.tool.call.arguments"] = json.dumps({"date": "31/01"})
        with tracer.start_as_current_span("execute_tool search_flights", attributes=attributes) as span:
            if result is not None:
                span.set_attribute("gen_ai.tool.call.result", json.dumps(result))
            if error is not None:
                span.set_attribute("error.type", qualified_name(type(error)))
                raise error

    def swallow(tracer):
        try:
            record(tracer)
        except Exception:  # noqa: BLE001 - the SDK records it on the span, as in an agent
            pass

    body = protobuf_request(sdk_spans(swallow))
    [span] = otlp.iter_spans(otlp.decode_request(body, otlp.PROTOBUF), DEFAULT_LIMITS, now_ns=10**19)
    server = normalize_tool_call(span)
    runner = observe("search_flights", {"date": "31/01"}, result=result, exception=error)
    assert (runner["error_class"], runner["classified_by"], runner["message"], runner["contract"], runner["fingerprint"]) == (
        server.error_class, server.classified_by, server.message, server.contract, server.fingerprint,
    )  # fmt: skip


# --- judge ------------------------------------------------------------------------------------------


def test_a_success_expected_and_observed_passes():
    verdict = judge({"outcome": "success"}, observe("t", None, result="fine"))
    assert (verdict.status, verdict.reasons) == ("passed", [])


def test_a_failure_where_success_was_expected_says_what_failed():
    observed = observe("search_flights", None, exception=raised(ValueError("'date' must be YYYY-MM-DD")))
    verdict = judge({"outcome": "success"}, observed)
    assert verdict.status == "failed"
    assert verdict.reasons == ["expected success, got validation: 'date' must be YYYY-MM-DD"]


def test_a_success_where_an_error_was_expected_fails():
    assert judge(ACTIONABLE, observe("t", None, result="fine")).reasons == ["expected a validation error, got success"]
    assert judge({"outcome": "error"}, observe("t", None, result="fine")).reasons == ["expected an error, got success"]


def test_an_actionable_validation_error_passes_its_expectation():
    assert judge(ACTIONABLE, observe("search_flights", None, result=VALIDATION_ENVELOPE)).status == "passed"


def test_every_unmet_part_of_the_expectation_has_its_own_reason():
    observed = observe("search_flights", None, result={"ok": False, "error": "Something went wrong"})
    verdict = judge(ACTIONABLE, observed)
    assert verdict.status == "failed"
    assert verdict.reasons == [
        "expected class validation, got unknown: Something went wrong",
        "contract check field_named does not apply to an unknown error",
        "contract check suggestion does not apply to an unknown error",
        "expected next action repair, got none (recommended for unknown)",
    ]


def test_a_failed_contract_check_is_named_with_what_it_asks():
    observed = observe("search_flights", None, exception=raised(ValueError("date must be YYYY-MM-DD")))
    assert judge(ACTIONABLE, observed).reasons == [
        "contract check field_named failed: a validation error names the field to repair",
        "contract check suggestion failed: a validation error suggests the repair",
    ]


def test_a_wrong_stated_next_action_says_the_tool_stated_it():
    observed = observe("t", None, result={"error": {"type": "validation", "message": "bad date", "next_action": "stop"}})
    reasons = judge({"outcome": "error", "next_action": "repair"}, observed).reasons
    assert reasons == ["expected next action repair, got stop (stated by the tool)"]


def test_any_class_means_any_class():
    observed = observe("t", None, exception=raised(PermissionError("denied")))
    assert judge({"outcome": "error"}, observed).status == "passed"


def test_the_judge_reads_a_stored_observed_record_too():
    # The server keeps observed records as plain dicts: the judge needs only these keys.
    stored = {"error_class": "permission", "message": "denied", "contract": {"explicit_class": False}}
    verdict = judge({"outcome": "error", "contract_checks": ["explicit_class"], "next_action": "authorize"}, stored)
    assert verdict.reasons == ["contract check explicit_class failed: states an error class or code Toolwatch recognises"]


def test_a_returned_string_is_a_success_since_text_is_never_searched_for_error():
    assert observe("t", None, result="Error: nothing")["ok"] is True
