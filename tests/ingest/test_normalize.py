"""ingest.normalize and ingest.taxonomy: pure, no database."""

from __future__ import annotations

import json

import pytest

from ingest import taxonomy
from ingest.normalize import (
    arguments_hash,
    contract_checks,
    fingerprint_message,
    is_tool_span,
    normalize_tool_call,
    parse_value,
    recommended_action,
    record_fingerprint,
)
from ingest.records import SpanRecord, ToolCallRecord

UNSET, OK, ERROR = 0, 1, 2


def make_span(
    name: str = "execute_tool get_weather",
    *,
    attributes: dict | None = None,
    status_code: int = UNSET,
    status_message: str = "",
    events: list | None = None,
) -> SpanRecord:
    return SpanRecord(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        parent_span_id="",
        name=name,
        kind=1,
        start_ns=1_700_000_000_000_000_000,
        end_ns=1_700_000_000_250_000_000,
        status_code=status_code,
        status_message=status_message,
        attributes=attributes or {},
        events=events or [],
    )


def tool_span(*, status_code: int = UNSET, status_message: str = "", events: list | None = None, **attributes) -> SpanRecord:
    """A current GenAI execute_tool span; keyword attributes use "__" for ".": http__response__status_code."""
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"}
    attrs.update({key.replace("__", "."): value for key, value in attributes.items()})
    return make_span(attributes=attrs, status_code=status_code, status_message=status_message, events=events)


def failed_with(result=None, *, status_code: int = ERROR, status_message: str = "", **attributes) -> ToolCallRecord:
    if result is not None:
        attributes["gen_ai__tool__call__result"] = result
    record = normalize_tool_call(tool_span(status_code=status_code, status_message=status_message, **attributes))
    assert record is not None
    return record


def exception_event(exc_type: str = "", message: str = "", name: str = "exception") -> dict:
    attrs = {}
    if exc_type:
        attrs["exception.type"] = exc_type
    if message:
        attrs["exception.message"] = message
    return {"name": name, "time_ns": 1_700_000_000_100_000_000, "attributes": attrs}


# --- recognition -----------------------------------------------------------------------------


def test_current_genai_execute_tool_span_is_a_genai_tool_call():
    span = make_span(
        "execute_tool get_weather",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_mszuSIzqtI65i1wAUOE8w5H4",
            "gen_ai.tool.type": "function",
            "gen_ai.agent.name": "Weather agent",
            "gen_ai.tool.call.arguments": {"city": "Paris"},
            "gen_ai.tool.call.result": {"temp_c": 21},
        },
    )
    record = normalize_tool_call(span)
    assert is_tool_span(span) == "genai"
    assert (record.tool, record.convention, record.call_id, record.tool_type) == (
        "get_weather", "genai", "call_mszuSIzqtI65i1wAUOE8w5H4", "function",
    )  # fmt: skip
    assert record.agent == "Weather agent"
    assert record.arguments == {"city": "Paris"}
    assert record.result == {"temp_c": 21}
    assert record.ok and not record.soft_failure
    assert (record.error_class, record.classified_by, record.fingerprint, record.contract) == ("", "", "", {})


def test_genai_v1_36_span_with_only_its_name_and_tool_name_is_a_genai_tool_call():
    span = make_span("execute_tool get_weather", attributes={"gen_ai.tool.name": "get_weather", "gen_ai.system": "openai"})
    assert is_tool_span(span) == "genai"
    assert normalize_tool_call(span).tool == "get_weather"


def test_openinference_tool_span_reads_input_and_output_value_and_ok_status():
    span = make_span(
        "get_weather",
        attributes={
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "tool.id": "call_1",
            "tool.parameters": '{"type": "object", "properties": {"city": {"type": "string"}}}',
            "input.value": '{"city": "Paris"}',
            "input.mime_type": "application/json",
            "output.value": '{"temp_c": 21}',
        },
        status_code=OK,
    )
    record = normalize_tool_call(span)
    assert record.convention == "openinference"
    assert record.call_id == "call_1"
    # tool.parameters is the schema, never the arguments.
    assert record.arguments == {"city": "Paris"}
    assert record.result == {"temp_c": 21}
    assert record.ok


def test_openinference_handoff_is_a_tool_call_named_after_its_span():
    span = make_span(
        "handoff to Billing",
        attributes={"openinference.span.kind": "TOOL", "input.value": "Triage", "output.value": "Billing"},
        status_code=OK,
    )
    record = normalize_tool_call(span)
    assert (record.convention, record.tool, record.arguments, record.result) == (
        "openinference", "handoff to Billing", "Triage", "Billing",
    )  # fmt: skip


def test_openllmetry_tool_span_takes_kwargs_as_arguments_and_keeps_a_truncated_output_as_text():
    truncated = '{"results": [{"title": "Paris weather", "summary": "Sunny with a high of 2'
    span = make_span(
        "search_web.tool",
        attributes={
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "search_web",
            "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"query": "paris weather", "limit": 3}}),
            "traceloop.entity.output": truncated,
        },
        status_code=OK,
    )
    record = normalize_tool_call(span)
    assert (record.convention, record.tool) == ("openllmetry", "search_web")
    assert record.arguments == {"query": "paris weather", "limit": 3}
    assert record.result == truncated
    assert record.ok


def test_openllmetry_positional_arguments_keep_the_whole_args_and_kwargs_record():
    entity_input = {"args": ["paris weather"], "kwargs": {"limit": 3}}
    span = make_span(
        "search_web.tool", attributes={"traceloop.span.kind": "tool", "traceloop.entity.input": json.dumps(entity_input)}
    )
    assert normalize_tool_call(span).arguments == entity_input


def test_mcp_tools_call_span_with_a_json_rpc_invalid_params_code_is_validation():
    span = make_span(
        "tools/call get_forecast",
        attributes={
            "mcp.method.name": "tools/call",
            "mcp.request.argument": '{"date": "next friday"}',
            "rpc.response.status_code": "-32602",
            "error.type": "-32602",
        },
        status_code=ERROR,
        status_message="Invalid params: date",
    )
    record = normalize_tool_call(span)
    assert (record.convention, record.tool) == ("mcp", "get_forecast")
    assert record.arguments == {"date": "next friday"}
    assert (record.error_class, record.classified_by) == ("validation", "rpc.response.status_code=-32602")
    assert record.message == "Invalid params: date"


def test_traceloop_mcp_tool_span_unwraps_its_arguments_and_reads_its_error_output():
    span = make_span(
        "get_forecast.tool",
        attributes={
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "get_forecast",
            "traceloop.entity.input": json.dumps({"tool_name": "get_forecast", "arguments": {"city": "Paris"}}),
            "traceloop.entity.output": json.dumps({"result": "Forecast backend returned 503", "is_error": True}),
            "error.type": "SERVICE_UNAVAILABLE",
        },
        status_code=ERROR,
        status_message="Forecast backend returned 503",
    )
    record = normalize_tool_call(span)
    assert (record.convention, record.tool, record.arguments) == ("openllmetry", "get_forecast", {"city": "Paris"})
    assert (record.error_class, record.classified_by) == ("transient", "error.type=SERVICE_UNAVAILABLE")
    assert record.message == "Forecast backend returned 503"


def test_mcp_semconv_span_that_also_says_execute_tool_is_recognised_by_the_first_rule():
    span = make_span(
        "tools/call get_forecast",
        attributes={"gen_ai.operation.name": "execute_tool", "mcp.method.name": "tools/call", "gen_ai.tool.name": "get_forecast"},
    )
    assert is_tool_span(span) == "genai"


@pytest.mark.parametrize(
    ("name", "tool"),
    [("execute_tool get_weather", "get_weather"), ("tools/call get_forecast", "get_forecast"), ("lookup_order.tool", "lookup_order")],
)
def test_a_span_named_like_a_tool_call_is_one_by_its_name(name, tool):
    span = make_span(name)
    assert is_tool_span(span) == "span_name"
    assert normalize_tool_call(span).tool == tool


@pytest.mark.parametrize(
    ("name", "attributes"),
    [
        ("chat gpt-4o", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}),
        ("invoke_agent Planner", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Planner"}),
        ("invoke_agent", {}),
        ("GET /v1/orders", {"http.request.method": "GET"}),
        ("ChatCompletion", {"openinference.span.kind": "LLM"}),
        ("summarise.tool", {"traceloop.span.kind": "task"}),
        ("tools/list", {"mcp.method.name": "tools/list"}),
    ],
)
def test_spans_that_are_not_tool_calls_are_not_normalised(name, attributes):
    span = make_span(name, attributes=attributes)
    assert is_tool_span(span) == ""
    assert normalize_tool_call(span) is None


def test_tool_name_prefers_gen_ai_tool_name_then_tool_name_then_traceloop_entity_name():
    attrs = {"traceloop.span.kind": "tool", "traceloop.entity.name": "c", "tool.name": "b", "gen_ai.tool.name": "a"}
    assert normalize_tool_call(make_span("x.tool", attributes=attrs)).tool == "a"
    del attrs["gen_ai.tool.name"]
    assert normalize_tool_call(make_span("x.tool", attributes=attrs)).tool == "b"
    del attrs["tool.name"]
    assert normalize_tool_call(make_span("x.tool", attributes=attrs)).tool == "c"
    del attrs["traceloop.entity.name"]
    assert normalize_tool_call(make_span("x.tool", attributes=attrs)).tool == "x"


def test_call_id_prefers_gen_ai_tool_call_id_then_tool_id_then_tool_call_id():
    attrs = {"tool_call.id": "c", "tool.id": "b", "gen_ai.tool.call.id": "a"}
    assert normalize_tool_call(tool_span(**{k.replace(".", "__"): v for k, v in attrs.items()})).call_id == "a"
    assert normalize_tool_call(tool_span(tool__id="b", tool_call__id="c")).call_id == "b"
    assert normalize_tool_call(tool_span(tool_call__id="c")).call_id == "c"


# --- arguments and results ---------------------------------------------------------------------


def test_arguments_as_a_json_string_are_parsed():
    record = normalize_tool_call(tool_span(gen_ai__tool__call__arguments='{"city": "Paris", "days": 3}'))
    assert record.arguments == {"city": "Paris", "days": 3}


def test_a_truncated_json_string_stays_a_string():
    assert parse_value('{"city": "Par') == '{"city": "Par'
    assert parse_value("plain text") == "plain text"
    assert parse_value("42") == "42"  # text that merely looks numeric is not reinterpreted
    assert parse_value({"already": "structured"}) == {"already": "structured"}


def test_json_nested_deeper_than_storage_keeps_stays_a_string():
    deep = "[" * 100 + "]" * 100
    assert parse_value(deep) == deep
    assert parse_value("[[[1]]]") == [[[1]]]


def test_input_value_outside_an_openinference_tool_span_is_not_read_as_arguments():
    record = normalize_tool_call(tool_span(input__value='{"messages": []}'))
    assert record.arguments is None
    assert record.arguments_hash == ""


def test_arguments_hash_ignores_key_order_and_is_empty_without_arguments():
    assert arguments_hash({"a": 1, "b": [1, 2]}) == arguments_hash({"b": [1, 2], "a": 1})
    assert len(arguments_hash({"a": 1})) == 16
    assert arguments_hash({"a": 1}) != arguments_hash({"a": 2})
    assert arguments_hash(None) == ""
    assert arguments_hash("") == ""


def test_arguments_hash_of_a_json_string_equals_the_hash_of_the_same_structured_arguments():
    as_text = normalize_tool_call(tool_span(gen_ai__tool__call__arguments='{"b": 2, "a": 1}'))
    as_kvlist = normalize_tool_call(tool_span(gen_ai__tool__call__arguments={"a": 1, "b": 2}))
    assert as_text.arguments_hash == as_kvlist.arguments_hash != ""


# --- failure detection --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "span",
    [
        tool_span(status_code=ERROR),
        tool_span(error__type="timeout"),
        tool_span(events=[exception_event("TimeoutError", "timed out")]),
        tool_span(events=[exception_event("TimeoutError", "timed out", name="gen_ai.client.operation.exception")]),
        tool_span(tool__error__class="validation"),
    ],
    ids=["status-error", "error-type", "exception-event", "genai-exception-event", "tool-error-class"],
)
def test_each_span_level_signal_marks_a_failure(span):
    record = normalize_tool_call(span)
    assert not record.ok
    assert not record.soft_failure


def test_status_ok_is_final_so_handled_errors_on_the_span_do_not_fail_it():
    span = tool_span(status_code=OK, error__type="TimeoutError", events=[exception_event("TimeoutError", "timed out")])
    record = normalize_tool_call(span)
    assert record.ok
    assert (record.error_class, record.error_type, record.message) == ("", "", "")


@pytest.mark.parametrize("status_code", [UNSET, OK])
def test_an_error_envelope_result_without_status_error_is_a_soft_failure(status_code):
    result = {"content": [{"type": "text", "text": "Rate limit exceeded, retry in 30s"}], "isError": True}
    record = failed_with(result, status_code=status_code)
    assert not record.ok
    assert record.soft_failure
    assert (record.error_class, record.classified_by) == ("transient", 'message:"Rate limit"')
    assert record.message == "Rate limit exceeded, retry in 30s"


def test_an_error_envelope_result_with_status_error_is_a_hard_failure():
    record = failed_with({"isError": True, "content": [{"type": "text", "text": "Order not found"}]})
    assert not record.ok and not record.soft_failure


@pytest.mark.parametrize(
    "result",
    [
        {"code": "US", "name": "United States"},
        {"class": "business", "seat": "2A"},
        {"job_id": "j1", "status": "failed"},
        {"error": None, "items": []},
        {"error": "", "items": []},
        {"isError": False, "content": [{"type": "text", "text": "Error budget is 3%"}]},
        "Error: this text is data, not an envelope",
        ["error"],
    ],
    ids=["code-field", "class-field", "job-status", "null-error", "empty-error", "is-error-false", "text", "list"],
)
def test_a_successful_result_that_merely_mentions_errors_is_not_a_failure(result):
    record = normalize_tool_call(tool_span(gen_ai__tool__call__result=result))
    assert record.ok


@pytest.mark.parametrize(
    "result",
    [
        {"isError": True, "content": []},
        {"isError": "true"},
        {"error": "Card declined"},
        {"error": {"message": "Card declined"}},
        {"success": False, "message": "Card declined"},
        {"ok": False, "message": "Card declined"},
        {"errorCategory": "business", "description": "Card declined"},
        {"code": "BUSINESS", "message": "Card declined"},
        {"code": -32603, "message": "Card declined"},
        '{"isError": true, "content": [{"type": "text", "text": "Card declined"}]}',
    ],
    ids=["isError", "isError-string", "error-string", "error-object", "success-false", "ok-false",
         "error-category", "code-and-message", "json-rpc-error", "json-string"],
)  # fmt: skip
def test_each_error_envelope_shape_fails_the_call(result):
    record = failed_with(result, status_code=UNSET)
    assert not record.ok and record.soft_failure


# --- classification: one row per kind of evidence -------------------------------------------------


CLASSIFICATION_CASES = [
    # 1. explicit envelope on the span
    ("attr-class", {"tool__error__class": "validation"}, "validation", "envelope:tool.error.class=validation"),
    ("attr-code", {"tool__error__code": "RATE_LIMITED"}, "transient", "envelope:tool.error.code=RATE_LIMITED"),
    ("attr-auth-required", {"tool__error__class": "authRequired"}, "permission", "envelope:tool.error.class=authRequired"),
    ("attr-beats-http", {"tool__error__class": "business", "http__response__status_code": 503}, "business",
     "envelope:tool.error.class=business"),
    # 1. explicit envelope in the result, in each seed's spelling
    ("seed0-code", {"result": {"code": "NOT_FOUND", "message": "Order 42 does not exist", "retryable": False}},
     "not_found", "result:code=NOT_FOUND"),
    ("seed0-transient", {"result": {"code": "TRANSIENT", "message": "Gateway busy", "retryable": True, "retryAfterMs": 500}},
     "transient", "result:code=TRANSIENT"),
    ("seed1-invalid-arguments", {"result": {"status": "error", "error_type": "invalid_arguments", "message": "customer_id is required",
                                            "retryable": False}}, "validation", "result:error_type=invalid_arguments"),
    ("seed1-auth-error", {"result": {"ok": False, "error_type": "auth_error", "content": "Permission denied: x"}}, "permission",
     "result:error_type=auth_error"),
    ("seed2-retryable", {"result": {"error": "Slow upstream", "class": "retryable", "retryAfterSeconds": 30}}, "transient",
     "result:class=retryable"),
    ("seed2-user-input", {"result": {"class": "userInput", "message": '3 contacts match "Alex"'}}, "user_input",
     "result:class=userInput"),
    ("seed2-permanent-404", {"result": {"error": "Lookup refused", "class": "permanent"}, "http__response__status_code": 404},
     "not_found", "result:class=permanent + http.response.status_code=404"),
    ("seed2-permanent-not-found-text", {"result": {"error": "User not found", "class": "permanent"}}, "not_found",
     'result:class=permanent + message:"not found"'),
    ("seed2-permanent-alone", {"result": {"error": "Lookup refused", "class": "permanent"}}, "validation", "result:class=permanent"),
    ("seed2-permanent-rules-out-transient", {"result": {"error": "Lookup refused", "class": "permanent"},
                                             "http__response__status_code": 503}, "validation", "result:class=permanent"),
    ("seed3-error-category", {"result": {"isError": True, "errorCategory": "Business", "isRetryable": False,
                                         "description": "A 750 refund exceeds the 500 automatic limit"}}, "business",
     "result:errorCategory=Business"),
    ("nested-error-object", {"result": {"error": {"code": "VALIDATION", "message": "date must be ISO-8601"}}}, "validation",
     "result:code=VALIDATION"),
    ("mcp-text-envelope", {"result": {"isError": True, "content": [{"type": "text", "text": json.dumps(
        {"errorCategory": "permission", "isRetryable": False, "description": "The key has no access to that resource"})}]}},
     "permission", "result:errorCategory=permission"),
    ("gh-aw-recoverable", {"result": {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "Script exceeded 30s",
                                                                          "data": {"recoverable": True}}}},
     "transient", "result:recoverable=true"),
    ("business-logic", {"result": {"error": "Refused", "error_type": "business_logic"}}, "business", "result:error_type=business_logic"),
    ("non-recoverable", {"result": {"error": "Tool removed", "errorCategory": "non_recoverable"}}, "fatal",
     "result:errorCategory=non_recoverable"),
    ("project-code-suffix", {"result": {"code": "USER_NOT_FOUND", "message": "No user with that id"}}, "not_found",
     "result:code=USER_NOT_FOUND"),
    ("oauth-word-code", {"result": {"error": "invalid_grant", "error_description": "Refresh token expired"}}, "permission",
     "result:error=invalid_grant"),
    ("word-code", {"result": {"error": "rate_limited"}}, "transient", "result:error=rate_limited"),
    ("retryable-flag-alone", {"result": {"error": "Upstream hiccup", "retryable": True}}, "transient", "result:retryable=true"),
    # 2. status codes
    ("http-503", {"http__response__status_code": 503}, "transient", "http.response.status_code=503"),
    ("http-429", {"http__response__status_code": 429}, "transient", "http.response.status_code=429"),
    ("http-408", {"http__response__status_code": 408}, "transient", "http.response.status_code=408"),
    ("http-500", {"http__response__status_code": 500}, "transient", "http.response.status_code=500"),
    ("http-400", {"http__response__status_code": 400}, "validation", "http.response.status_code=400"),
    ("http-413", {"http__response__status_code": 413}, "validation", "http.response.status_code=413"),
    ("http-422", {"http__response__status_code": 422}, "validation", "http.response.status_code=422"),
    ("http-401", {"http__response__status_code": 401}, "permission", "http.response.status_code=401"),
    ("http-403", {"http__response__status_code": 403}, "permission", "http.response.status_code=403"),
    ("http-404-string", {"http__response__status_code": "404"}, "not_found", "http.response.status_code=404"),
    ("http-410", {"http__response__status_code": 410}, "not_found", "http.response.status_code=410"),
    ("http-409", {"http__response__status_code": 409}, "business", "http.response.status_code=409"),
    ("error-type-503", {"error__type": "503"}, "transient", "error.type=503"),
    ("envelope-http-status", {"result": {"error": {"code": 404, "message": "Requested entity was not found."}}}, "not_found",
     "result:code=404"),
    ("grpc-14", {"rpc__grpc__status_code": 14}, "transient", "rpc.grpc.status_code=14"),
    ("grpc-5", {"rpc__grpc__status_code": 5}, "not_found", "rpc.grpc.status_code=5"),
    ("grpc-7", {"rpc__grpc__status_code": 7}, "permission", "rpc.grpc.status_code=7"),
    ("grpc-3", {"rpc__grpc__status_code": 3}, "validation", "rpc.grpc.status_code=3"),
    ("grpc-16", {"rpc__grpc__status_code": 16}, "permission", "rpc.grpc.status_code=16"),
    ("grpc-name", {"rpc__response__status_code": "UNAVAILABLE"}, "transient", "rpc.response.status_code=UNAVAILABLE"),
    ("rpc-status-code", {"rpc__status_code": "DEADLINE_EXCEEDED"}, "transient", "rpc.status_code=DEADLINE_EXCEEDED"),
    ("jsonrpc-32601", {"rpc__response__status_code": "-32601"}, "not_found", "rpc.response.status_code=-32601"),
    ("jsonrpc-32700", {"rpc__response__status_code": "-32700"}, "validation", "rpc.response.status_code=-32700"),
    ("jsonrpc-unknown-tool", {"rpc__response__status_code": "-32602", "status_message": "Unknown tool: get_wether"}, "not_found",
     'rpc.response.status_code=-32602 + message:"Unknown tool"'),
    # 3. error.type and exception.type names
    ("error-type-timeout-error", {"error__type": "TimeoutError"}, "transient", "error.type=TimeoutError"),
    ("error-type-timeout", {"error__type": "timeout"}, "transient", "error.type=timeout"),
    ("exception-httpx", {"events": [exception_event("httpx.ReadTimeout")]}, "transient", "exception.type=httpx.ReadTimeout"),
    ("exception-requests", {"events": [exception_event("requests.exceptions.ReadTimeout")]}, "transient",
     "exception.type=requests.exceptions.ReadTimeout"),
    ("exception-rate-limit", {"events": [exception_event("openai.RateLimitError")]}, "transient",
     "exception.type=openai.RateLimitError"),
    ("exception-last-component", {"events": [exception_event("anthropic.APIConnectionError")]}, "transient",
     "exception.type=anthropic.APIConnectionError"),
    ("exception-permission", {"events": [exception_event("PermissionError")]}, "permission", "exception.type=PermissionError"),
    ("exception-auth", {"events": [exception_event("openai.AuthenticationError")]}, "permission",
     "exception.type=openai.AuthenticationError"),
    ("exception-value", {"events": [exception_event("ValueError")]}, "validation", "exception.type=ValueError"),
    ("exception-key", {"events": [exception_event("KeyError")]}, "validation", "exception.type=KeyError"),
    ("exception-pydantic", {"events": [exception_event("pydantic_core._pydantic_core.ValidationError")]}, "validation",
     "exception.type=pydantic_core._pydantic_core.ValidationError"),
    ("exception-json", {"events": [exception_event("json.decoder.JSONDecodeError")]}, "validation",
     "exception.type=json.decoder.JSONDecodeError"),
    ("exception-file-not-found", {"events": [exception_event("FileNotFoundError")]}, "not_found",
     "exception.type=FileNotFoundError"),
    ("exception-openai-not-found", {"events": [exception_event("openai.NotFoundError")]}, "not_found",
     "exception.type=openai.NotFoundError"),
    ("exception-not-implemented", {"events": [exception_event("NotImplementedError")]}, "fatal", "exception.type=NotImplementedError"),
    ("exception-java-pattern", {"events": [exception_event("java.net.SocketTimeoutException")]}, "transient",
     "exception.type=java.net.SocketTimeoutException"),
    # 3. message patterns, last
    ("mcp-tool-error-text", {"error__type": "tool_error", "status_message": "Order 8812 does not exist"}, "not_found",
     'message:"does not exist"'),
    ("traceloop-mcp-tool-error", {"error__type": "MCPToolError", "status_message": "Refused: rate_limited by upstream"},
     "transient", 'message:"rate_limit"'),
    ("message-connection-reset", {"events": [exception_event(message="Connection reset by peer")]}, "transient",
     'message:"Connection reset"'),
    ("message-scope", {"status_message": "Missing scope orders:write"}, "permission", 'message:"Missing scope"'),
    ("message-expired-token", {"status_message": "Token has expired"}, "permission", 'message:"Token has expired"'),
    ("message-policy-limit", {"status_message": "Refund of 750 exceeds the automatic limit"}, "business",
     'message:"exceeds the automatic limit"'),
    ("message-ambiguous", {"status_message": '3 contacts match "Alex"'}, "user_input", 'message:"3 contacts match"'),
    ("message-format", {"status_message": "date must be YYYY-MM-DD"}, "validation", 'message:"must be"'),
    ("message-no-such", {"status_message": "No such file or directory"}, "not_found", 'message:"No such"'),
    ("message-status-code", {"status_message": "upstream returned 502"}, "transient", 'message:"returned 502"'),
    ("python-sdk-status", {"status_message": "RuntimeError: request timed out after 30s"}, "transient", 'message:"timed out"'),
    # 4. nothing decides
    ("unknown", {"status_message": "Something went wrong"}, "unknown", "none"),
    ("jsonrpc-internal-alone", {"rpc__response__status_code": "-32603", "status_message": "Script crashed"}, "unknown", "none"),
]


@pytest.mark.parametrize(
    ("attributes", "error_class", "classified_by"),
    [case[1:] for case in CLASSIFICATION_CASES],
    ids=[case[0] for case in CLASSIFICATION_CASES],
)
def test_each_kind_of_evidence_classifies_the_failure(attributes, error_class, classified_by):
    attributes = dict(attributes)
    record = failed_with(
        attributes.pop("result", None),
        status_message=attributes.pop("status_message", ""),
        events=attributes.pop("events", None),
        **attributes,
    )
    assert not record.ok
    assert (record.error_class, record.classified_by) == (error_class, classified_by)


def test_http_503_is_transient():
    assert failed_with(http__response__status_code=503).error_class == "transient"


def test_recoverable_false_alone_says_not_retryable_but_picks_no_class():
    record = failed_with({"code": -32603, "message": "Script crashed", "data": {"recoverable": False}})
    assert (record.error_class, record.retryable) == ("unknown", False)


def test_openai_agents_contrib_bridge_status_message_yields_the_tools_own_error():
    detail = {"tool_name": "get_weather", "error": "Tool 'get_weather' timed out after 5 seconds."}
    record = failed_with(status_message=f"Error running tool (non-fatal): {detail}")
    assert record.message == "Tool 'get_weather' timed out after 5 seconds."
    assert (record.error_class, record.classified_by) == ("transient", 'message:"timed out"')


def test_traceloop_agents_bridge_dict_repr_status_message_yields_the_tools_own_error():
    error = {"message": "Error running tool", "data": {"tool_name": "get_weather", "error": "Invalid JSON input for tool"}}
    record = failed_with(status_message=str(error))
    assert record.message == "Invalid JSON input for tool"
    assert record.error_class == "validation"


def test_an_mcp_status_message_holding_a_json_envelope_is_read_as_one():
    text = json.dumps({"errorCategory": "transient", "isRetryable": True, "retryAfterMs": 2000, "description": "Gateway slow"})
    record = failed_with(error__type="tool_error", status_message=text)
    assert (record.error_class, record.classified_by) == ("transient", "status_message:errorCategory=transient")
    assert (record.retryable, record.retry_after_ms, record.message) == (True, 2000, "Gateway slow")


# --- envelope fields --------------------------------------------------------------------------------


def test_a_full_seed_envelope_fills_every_field():
    record = failed_with(
        {
            "code": "VALIDATION",
            "message": "date must be an ISO-8601 date",
            "retryable": False,
            "field": "date",
            "suggestion": "Use 2026-10-20 for next Tuesday",
            "traceId": "0af7651916cd43dd8448eb211c80319c",
        }
    )
    assert (record.error_code, record.message, record.retryable, record.field, record.suggestion) == (
        "VALIDATION", "date must be an ISO-8601 date", False, "date", "Use 2026-10-20 for next Tuesday",
    )  # fmt: skip


def test_span_envelope_attributes_fill_every_field():
    record = failed_with(
        tool__error__class="transient",
        tool__error__code="UPSTREAM_TIMEOUT",
        tool__error__retryable="true",
        tool__error__retry_after_ms="1500",
        tool__error__message="Forecast service slow",
        tool__error__field="region",
        tool__error__suggestion="Retry in 2s",
    )
    assert (record.error_class, record.error_code, record.retryable, record.retry_after_ms) == (
        "transient", "UPSTREAM_TIMEOUT", True, 1500,
    )  # fmt: skip
    assert (record.message, record.field, record.suggestion) == ("Forecast service slow", "region", "Retry in 2s")


def test_a_one_word_error_is_a_code_and_the_description_the_message():
    record = failed_with({"error": "invalid_grant", "error_description": "Refresh token expired"})
    assert (record.error_code, record.message) == ("invalid_grant", "Refresh token expired")
    assert record.contract["explicit_class"] is True


def test_recovery_steps_are_joined_into_one_suggestion():
    record = failed_with(
        {
            "error": "User not found",
            "class": "permanent",
            "reason": 'No user matches "jon smith"',
            "recoverySteps": ['Call search_users(query="jon smith")', "Retry with the user's email address"],
            "suggestions": [{"id": "usr_1", "name": "Jon Smyth"}],
        }
    )
    assert record.suggestion == 'Call search_users(query="jon smith"); Retry with the user\'s email address'
    assert record.message == "User not found"
    assert record.error_code == "permanent"


@pytest.mark.parametrize(
    ("envelope", "milliseconds"),
    [({"retryAfterMs": 250}, 250), ({"retryAfterSeconds": 30}, 30_000), ({"retryAfterSeconds": "1.5"}, 1500),
     ({"retryAfter": 2}, 2000), ({"retryAfter": "Wed, 21 Oct 2026 07:28:00 GMT"}, None)],
)  # fmt: skip
def test_retry_after_is_read_in_milliseconds(envelope, milliseconds):
    record = failed_with({"code": "RATE_LIMITED", "message": "Slow down", **envelope})
    assert record.retry_after_ms == milliseconds


def test_message_prefers_the_envelope_then_exception_message_then_status_message():
    events = [exception_event("ValueError", "bad city")]
    assert failed_with({"error": "City unknown"}, status_message="ValueError: bad city", events=events).message == "City unknown"
    assert failed_with(status_message="ValueError: bad city!", events=events).message == "bad city"
    assert failed_with(status_message="ValueError: bad city").message == "ValueError: bad city"


def test_a_generic_envelope_message_is_kept_over_a_specific_exception_message():
    # The contract check must judge what the tool told the model, not what tracing recorded.
    record = failed_with({"error": "Something went wrong"}, events=[exception_event("KeyError", "'city'")])
    assert record.message == "Something went wrong"
    assert record.contract["specific_message"] is False


def test_a_long_message_is_capped():
    assert len(failed_with(status_message="x" * 10_000).message) == 4096


def test_error_type_prefers_error_type_then_exception_type():
    assert failed_with(error__type="timeout", events=[exception_event("httpx.ReadTimeout")]).error_type == "timeout"
    assert failed_with(events=[exception_event("httpx.ReadTimeout")]).error_type == "httpx.ReadTimeout"


def test_retryable_is_none_unless_stated():
    assert failed_with(http__response__status_code=503).retryable is None
    assert failed_with({"error": "x", "isRetryable": "false"}).retryable is False


def test_long_values_are_cut_to_their_column_widths():
    record = failed_with(gen_ai__tool__name="t" * 1000, error__type="E" * 1000, tool__next_action="a" * 100)
    assert (len(record.tool), len(record.error_type), len(record.next_action)) == (256, 256, 32)


# --- retries and escalation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "attempt", "resend_count"),
    [
        ({"tool__call__attempt": 2}, 2, None),
        ({"tool__call__attempt": "3"}, 3, None),
        ({"http__request__resend_count": "1"}, None, 1),
        ({"http__request__resend_count": 2, "tool__call__attempt": 1}, 1, 2),
        ({"tool__call__attempt": "second"}, None, None),
        ({"tool__call__attempt": True}, None, None),
        ({"tool__call__attempt": 2**40}, None, None),
        ({}, None, None),
    ],
)
def test_retry_markers_are_read_as_integers(attributes, attempt, resend_count):
    record = normalize_tool_call(tool_span(**attributes))
    assert (record.attempt, record.resend_count) == (attempt, resend_count)


@pytest.mark.parametrize(
    ("attributes", "events", "escalation_tools"),
    [
        ({"tool__escalated": True}, [], frozenset()),
        ({"tool__escalated": "true"}, [], frozenset()),
        ({"tool__next_action": "authorize"}, [], frozenset()),
        ({"tool__next_action": "ask_user"}, [], frozenset()),
        ({"tool__next_action": "escalate"}, [], frozenset()),
        ({}, [{"name": "escalation", "time_ns": 1, "attributes": {}}], frozenset()),
        ({}, [], frozenset({"get_weather"})),
    ],
    ids=["flag", "flag-string", "authorize", "ask-user", "escalate", "event", "escalation-tool"],
)
def test_each_of_the_four_ways_marks_an_escalation(attributes, events, escalation_tools):
    record = normalize_tool_call(tool_span(events=events, **attributes), escalation_tools=escalation_tools)
    assert record.escalated


def test_a_call_without_any_escalation_sign_is_not_escalated():
    record = normalize_tool_call(
        tool_span(tool__escalated="false", tool__next_action="retry"), escalation_tools=frozenset({"handoff_to_human"})
    )
    assert not record.escalated
    assert record.next_action == "retry"


def test_next_action_is_recorded_as_taken():
    assert normalize_tool_call(tool_span(tool__next_action="authorize")).next_action == "authorize"


# --- fingerprints ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "template"),
    [
        ("Order 8812 not found", "Order <n> not found"),
        ("User 'jon smith' can't be found", "User <value> can't be found"),
        ('No user matches "alex"', "No user matches <value>"),
        ("Request 3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f failed", "Request <uuid> failed"),
        ("Mail to jon@example.com bounced", "Mail to <email> bounced"),
        ("GET https://api.example.com/v1/orders/17 returned 503", "GET <url> returned <n>"),
        ("Object 0x7f3a2b at deadbeef01 leaked", "Object <hex> at <hex> leaked"),
        ("Charge ch_8FQ2ZK9 refused", "Charge ch_<id> refused"),
        ("  spaced \n out  ", "spaced out"),
    ],
)
def test_fingerprint_message_replaces_variable_parts_with_placeholders(message, template):
    assert fingerprint_message(message) == template


def test_a_message_gets_the_same_template_remembered_long_or_asked_twice():
    short = "Order 8812 not found in 'eu-west-1'"
    long = short + " " + "x" * 600  # longer messages are not remembered

    assert fingerprint_message(short) == fingerprint_message(short) == "Order <n> not found in <value>"
    assert fingerprint_message(long) == "Order <n> not found in <value> " + "x" * 600


def test_the_same_failure_with_different_ids_and_numbers_has_the_same_fingerprint():
    first = failed_with({"code": "NOT_FOUND", "message": "Order 8812 (req 3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f) not found"})
    second = failed_with({"code": "NOT_FOUND", "message": "Order 17 (req 00000000-1111-2222-3333-444444444444) not found"})
    assert first.fingerprint == second.fingerprint
    assert len(first.fingerprint) == 16


def test_a_different_class_has_a_different_fingerprint():
    not_found = failed_with({"code": "NOT_FOUND", "message": "Order 8812 unavailable"})
    transient = failed_with({"code": "TRANSIENT", "message": "Order 8812 unavailable"})
    assert not_found.fingerprint != transient.fingerprint


def test_a_successful_call_has_no_fingerprint():
    record = normalize_tool_call(tool_span())
    assert record.fingerprint == record_fingerprint(record) == ""


# --- contract quality -------------------------------------------------------------------------------------


def test_contract_checks_follow_the_taxonomy_order():
    record = failed_with(http__response__status_code=503)
    assert list(record.contract) == [name for name, _ in taxonomy.CONTRACT_CHECKS]


def test_a_full_actionable_validation_envelope_passes_every_check():
    record = failed_with(
        {"code": "VALIDATION", "message": "date must be YYYY-MM-DD", "retryable": False, "field": "date",
         "suggestion": "Send 2026-10-20 for next Tuesday"}
    )  # fmt: skip
    assert record.contract == {
        "explicit_class": True, "explicit_retryable": True, "retry_after": None, "field_named": True,
        "suggestion": True, "specific_message": True, "no_internals": True, "retryable_consistent": True,
    }  # fmt: skip


def test_a_full_actionable_transient_envelope_passes_every_check():
    record = failed_with({"code": "TRANSIENT", "message": "Forecast service overloaded", "retryable": True, "retryAfterMs": 800})
    assert all(record.contract[name] is True for name in ("explicit_class", "explicit_retryable", "retry_after",
                                                          "specific_message", "no_internals", "retryable_consistent"))  # fmt: skip
    assert record.contract["field_named"] is None and record.contract["suggestion"] is None


def test_a_transient_error_without_retry_after_fails_that_check():
    assert failed_with({"code": "TRANSIENT", "message": "Busy", "retryable": True}).contract["retry_after"] is False


def test_a_validation_error_without_a_field_fails_field_named_and_suggestion():
    contract = failed_with({"code": "VALIDATION", "message": "date must be YYYY-MM-DD"}).contract
    assert (contract["field_named"], contract["suggestion"]) == (False, False)


@pytest.mark.parametrize("message", ["Something went wrong", "Operation failed", "Invalid input.", "Error", "",
                                     "An error occurred", "Internal error", "Error: something went wrong!", "503 Service Unavailable"])  # fmt: skip
def test_a_generic_message_fails_specific_message(message):
    record = failed_with({"error": {"code": "TRANSIENT", "message": message}})
    assert record.contract["specific_message"] is False


@pytest.mark.parametrize(
    "message",
    [
        'Traceback (most recent call last):\n  File "/app/tools.py", line 12, in get_weather\n    raise KeyError(city)',
        '  File "/app/tools.py", line 12, in get_weather',
        "java.lang.NullPointerException\n\tat com.acme.Orders.lookup(Orders.java:42)",
        "TypeError: x is undefined\n    at lookup (/app/src/orders.js:10:5)",
        "KeyError('city')",
        "unexpected <class 'decimal.Decimal'>",
        "SELECT id, total FROM orders WHERE customer_id = 7",
        "psycopg.errors.UniqueViolation: duplicate key",
        "upstream said: Authorization: Bearer abcdef1234567890",
        "using key sk-proj-abcdefghijklmnop1234",
        "aws key AKIAIOSFODNN7EXAMPLE rejected",
        "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ],
    ids=["traceback", "python-frame", "java-frame", "js-frame", "exception-repr", "class-repr", "sql", "psycopg",
         "bearer", "openai-key", "aws-key", "jwt"],
)  # fmt: skip
def test_internals_in_the_message_fail_no_internals(message):
    record = failed_with({"code": "VALIDATION", "message": message, "field": "city"})
    assert record.contract["no_internals"] is False


def test_retryable_true_on_a_validation_error_fails_retryable_consistent():
    record = failed_with({"code": "VALIDATION", "message": "date must be YYYY-MM-DD", "retryable": True})
    assert record.contract["retryable_consistent"] is False


def test_retryable_consistent_does_not_apply_when_retryable_is_unstated_or_the_class_unknown():
    assert failed_with(http__response__status_code=503).contract["retryable_consistent"] is None
    assert failed_with({"error": "Something went wrong", "retryable": False}).contract["retryable_consistent"] is None


def test_a_status_code_or_retry_flag_is_not_an_explicit_class():
    assert failed_with(http__response__status_code=404).contract["explicit_class"] is False
    assert failed_with({"error": "x", "recoverable": True}).contract["explicit_class"] is False


def test_contract_checks_run_on_a_record_built_by_hand():
    record = ToolCallRecord(tool="book_flight", convention="genai", ok=False, error_class="business",
                            error_code="policy_violation", message="Fares above 900 EUR need approval", retryable=False)  # fmt: skip
    assert contract_checks(record) == {
        "explicit_class": True, "explicit_retryable": True, "retry_after": None, "field_named": None,
        "suggestion": None, "specific_message": True, "no_internals": True, "retryable_consistent": True,
    }  # fmt: skip
    assert contract_checks(ToolCallRecord(tool="book_flight", convention="genai")) == {}


# --- the taxonomy itself ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error_class", "action"),
    [("transient", "retry"), ("validation", "repair"), ("permission", "authorize"), ("not_found", "replace"),
     ("business", "escalate"), ("user_input", "ask_user"), ("fatal", "stop"), ("unknown", "none"), ("", "none")],
)  # fmt: skip
def test_recommended_action_follows_the_class_table(error_class, action):
    assert recommended_action(error_class) == action
    assert action in taxonomy.NEXT_ACTIONS


def test_every_class_states_whether_it_is_retryable():
    assert {name: cls.retryable for name, cls in taxonomy.CLASSES.items()} == {
        "transient": True, "validation": False, "permission": False, "not_found": False, "business": False,
        "user_input": False, "fatal": False, "unknown": None,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("spelling", "error_class"),
    [("TRANSIENT", "transient"), ("retryable", "transient"), ("rate-limited", "transient"), ("RateLimited", "transient"),
     ("timeout", "transient"), ("invalid_arguments", "validation"), ("VALIDATION", "validation"),
     ("invalid_params", "validation"), ("authRequired", "permission"), ("auth_error", "permission"),
     ("PERMISSION", "permission"), ("unauthorized", "permission"), ("forbidden", "permission"),
     ("NOT_FOUND", "not_found"), ("not-found", "not_found"), ("userInput", "user_input"),
     ("business_logic", "business"), ("non_recoverable", "fatal"), ("PermissionError", "permission"),
     ("permanent", None), ("tool_error", None), ("_OTHER", None), ("E1234", None)],
)  # fmt: skip
def test_synonyms_ignore_case_underscores_and_hyphens(spelling, error_class):
    assert taxonomy.class_for_spelling(spelling) == error_class


# --- hostile strings -------------------------------------------------------------------------------------
# SpanRecord strings never hold NUL (the decoder refuses it for PostgreSQL), so none appear here.


def test_html_in_tool_names_and_messages_passes_through_unchanged():
    # Escaping happens where it is displayed; the record keeps what the agent sent.
    name = "<script>alert(1)</script>"
    message = '<img src=x onerror="alert(1)"> not found'
    record = failed_with({"error": message}, gen_ai__tool__name=name)
    assert record.tool == name
    assert record.message == message
    assert record.error_class == "not_found"


def test_html_in_a_span_name_passes_through_as_the_tool_name():
    record = normalize_tool_call(make_span("<b onmouseover=alert(1)>x</b>.tool"))
    assert record.tool == "<b onmouseover=alert(1)>x</b>"
