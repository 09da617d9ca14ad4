"""ingest.log_events (pure): agents' documented event shapes, the tool calls and evidence they give."""

from __future__ import annotations

from ingest import log_events, normalize
from ingest.log_events import LogRecordRecord, evidence_of, merged_evidence, qualified_event_name, tool_call_of
from ingest.records import SpanRecord

T = 1_790_000_000 * 10**9
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def record(event_name: str, attributes: dict, **fields) -> LogRecordRecord:
    item = LogRecordRecord(time_ns=fields.pop("time_ns", T), observed_ns=T, event_name=event_name, attributes=attributes, **fields)
    item.call_id = item.call_id or log_events.record_call_id(event_name, attributes, item.body)
    item.digest = log_events.record_digest(item)
    return item


def claude_result(**attributes) -> LogRecordRecord:
    base = {"event.name": "tool_result", "session.id": "sess-1", "tool_name": "Bash", "tool_use_id": "toolu_1",
            "success": "true", "duration_ms": "250", "decision_type": "accept", "decision_source": "config"}  # fmt: skip
    return record("claude_code.tool_result", {**base, **attributes})


# --- names ---------------------------------------------------------------------------------------


def test_claude_codes_event_name_is_qualified_from_its_body_or_its_scope():
    attributes = {"event.name": "tool_result"}
    assert qualified_event_name("", attributes, "claude_code.tool_result", "") == "claude_code.tool_result"
    assert qualified_event_name("", attributes, None, log_events.CLAUDE_CODE_SCOPE) == "claude_code.tool_result"
    assert qualified_event_name("", attributes, "some free text", "other") == "tool_result"


def test_the_records_own_event_name_wins_then_a_qualified_attribute():
    assert qualified_event_name("gen_ai.tool.message", {"event.name": "x.y"}, None, "") == "gen_ai.tool.message"
    assert qualified_event_name("", {"event.name": "gemini_cli.tool_call"}, "claude_code.tool_result", "") == "gemini_cli.tool_call"
    assert qualified_event_name("", {}, "plain body", "") == ""


# --- tool calls from events -----------------------------------------------------------------------


def test_a_successful_claude_code_tool_result_is_an_ok_call_of_its_sessions_trace():
    span, call = tool_call_of(claude_result())

    assert (call.tool, call.ok, call.call_id, call.convention) == ("Bash", True, "toolu_1", "claude_code.tool_result")
    assert span.trace_id == log_events.derived_trace_id("claude_code", "sess-1")
    assert span.end_ns - span.start_ns == 250 * 10**6 and span.end_ns == T
    # Another call of the same session is in the same trace, with its own span.
    other, _ = tool_call_of(claude_result(tool_use_id="toolu_2"))
    assert other.trace_id == span.trace_id and other.span_id != span.span_id


def test_a_failed_claude_code_tool_result_is_classified_by_the_span_classifier():
    _, call = tool_call_of(claude_result(success="false", error_type="Error:ENOENT",
                                         error="ENOENT: no such file or directory, open '/tmp/missing.txt'"))  # fmt: skip

    assert not call.ok
    assert call.error_class == "not_found"
    assert call.message.startswith("ENOENT")
    assert call.error_type == "Error:ENOENT"
    assert call.fingerprint


def test_the_same_event_gives_the_same_keys_and_a_session_less_event_its_own_trace():
    first, _ = tool_call_of(claude_result())
    again, _ = tool_call_of(claude_result())
    assert (first.trace_id, first.span_id) == (again.trace_id, again.span_id)
    lone, _ = tool_call_of(claude_result(**{"session.id": ""}))
    assert lone.trace_id != first.trace_id


def test_codex_tool_result_reads_its_documented_fields():
    item = record("codex.tool_result", {"tool_name": "shell", "call_id": "call_9", "conversation.id": "conv-1",
                                         "arguments": '{"command": ["ls"]}', "duration_ms": 12, "success": "false",
                                         "output": "permission denied: /root"})  # fmt: skip
    span, call = tool_call_of(item)

    assert (call.tool, call.call_id, call.ok, call.error_class) == ("shell", "call_9", False, "permission")
    assert call.arguments == {"command": ["ls"]}
    assert span.trace_id == log_events.derived_trace_id("codex", "conv-1")


def test_gemini_cli_tool_call_reads_its_documented_fields():
    item = record("gemini_cli.tool_call", {"function_name": "read_file", "function_args": '{"path": "a.txt"}',
                                            "duration_ms": 5, "success": False, "error": "Request timed out",
                                            "error_type": "TIMEOUT", "session.id": "g-1"})  # fmt: skip
    _, call = tool_call_of(item)

    assert (call.tool, call.ok, call.error_class, call.convention) == ("read_file", False, "transient", "gemini_cli.tool_call")


def test_a_rejected_gemini_call_is_a_permission_failure():
    item = record("gemini_cli.tool_call", {"function_name": "run_shell_command", "success": False, "decision": "reject",
                                            "session.id": "g-1"})  # fmt: skip
    _, call = tool_call_of(item)
    assert (call.ok, call.error_class) == (False, "permission")


def test_other_records_make_no_tool_call():
    assert tool_call_of(record("claude_code.api_request", {"session.id": "s"})) is None
    assert tool_call_of(record("", {"exception.type": "ValueError"})) is None


# --- evidence --------------------------------------------------------------------------------------


def test_an_exception_log_inside_a_span_is_span_keyed_evidence():
    item = record("", {"exception.type": "TimeoutError", "exception.message": "read timed out"}, trace_id=TRACE, span_id=SPAN)

    key, evidence = evidence_of(item)
    assert key == (log_events.SPAN_KEY, TRACE, SPAN)
    assert evidence.events[0]["name"] == "exception"
    assert evidence.events[0]["attributes"] == {"exception.type": "TimeoutError", "exception.message": "read timed out"}


def test_a_failed_tool_result_and_a_rejected_decision_are_call_keyed_evidence():
    failed = claude_result(success="false", error="boom")
    failed.trace_id = TRACE
    assert evidence_of(failed)[0] == (log_events.CALL_KEY, TRACE, "toolu_1")
    decision = record("claude_code.tool_decision", {"tool_name": "Bash", "tool_use_id": "toolu_1", "decision": "reject",
                                                     "source": "user_reject"}, trace_id=TRACE)  # fmt: skip
    key, evidence = evidence_of(decision)
    assert key == (log_events.CALL_KEY, TRACE, "toolu_1")
    assert evidence.events[0]["attributes"]["exception.type"] == "PermissionDenied"
    accepted = record("claude_code.tool_decision", {"tool_use_id": "toolu_1", "decision": "accept"}, trace_id=TRACE)
    assert evidence_of(accepted) is None
    assert evidence_of(claude_result()) is None  # ok, and no trace


def test_a_genai_tool_message_gives_the_result_of_its_call():
    item = record("gen_ai.tool.message", {}, trace_id=TRACE, body={"id": "call_1", "content": {"error": "not found"}})

    key, evidence = evidence_of(item)
    assert key == (log_events.CALL_KEY, TRACE, "call_1")
    assert evidence.attributes == {"gen_ai.tool.call.result": {"error": "not found"}}


def test_merged_evidence_does_not_depend_on_the_order_records_come_in():
    a = record("", {"exception.type": "ValueError", "exception.message": "a"}, trace_id=TRACE, span_id=SPAN, time_ns=T + 2)
    b = record("", {"exception.type": "KeyError", "exception.message": "b"}, trace_id=TRACE, span_id=SPAN, time_ns=T + 1)

    assert merged_evidence([a, b]) == merged_evidence([b, a])
    assert [e["attributes"]["exception.message"] for e in merged_evidence([a, b]).events] == ["b", "a"]
    assert merged_evidence([claude_result()]) is None


def test_normalize_takes_the_evidence_and_keeps_status_ok_final():
    span = SpanRecord(trace_id=TRACE, span_id=SPAN, parent_span_id="", name="execute_tool lookup", kind=1, start_ns=T,
                      end_ns=T + 10, status_code=0, status_message="",
                      attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"})  # fmt: skip
    item = record("", {"exception.type": "TimeoutError", "exception.message": "timed out"}, trace_id=TRACE, span_id=SPAN)
    evidence = merged_evidence([item])

    call = normalize.normalize_tool_call(span, log_evidence=evidence)
    assert (call.ok, call.error_class, call.classified_by) == (False, "transient", "exception.type=TimeoutError")
    assert normalize.normalize_tool_call(span).ok
    span.status_code = 1
    assert normalize.normalize_tool_call(span, log_evidence=evidence).ok


def test_every_tool_shape_names_a_documented_source():
    for shape in log_events.TOOL_SHAPES.values():
        assert shape.source.startswith("https://")
        assert len(shape.event_name) <= 32  # ToolCall.convention
