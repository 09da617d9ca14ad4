"""Claude Code's own beta trace spans (docs/contract/spans.md#claude-code, taxonomy.NATIVE_TOOL_SPANS).

Shapes from code.claude.com/docs/en/monitoring-usage, "Traces (beta)": every span carries the
standard attributes (session.id, ...) and span.type; `claude_code.tool` has tool_name,
tool_use_id, gen_ai.tool.call.id and duration_ms and always ends with status UNSET; its child
`claude_code.tool.execution` has success, error ("Error:ENOENT", "ShellError", or the full
message with OTEL_LOG_TOOL_DETAILS=1) and, from v2.1.268, error_class, with status ERROR
when the tool failed.
"""

from __future__ import annotations

import pytest

from ingest import taxonomy
from ingest.models import ToolCall
from ingest.normalize import arguments_hash, is_tool_span, normalize_tool_call
from ingest.records import SpanRecord
from tests.factories import make_key
from tests.otlp_builders import json_bytes, json_request, json_span

UNSET, OK, ERROR = 0, 1, 2
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SESSION = {"session.id": "9f0c3b7e-2d1a-4c5e-8b6f-0a1b2c3d4e5f", "user.id": "u-1", "terminal.type": "vscode"}


def cc_span(
    name: str,
    span_id: str,
    *,
    parent: str = "",
    status_code: int = UNSET,
    status_message: str = "",
    end_ns: int = 3_000,
    **attributes,
) -> SpanRecord:
    span_type = name.removeprefix("claude_code.")
    return SpanRecord(
        trace_id=TRACE,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=1,
        start_ns=1_000,
        end_ns=end_ns,
        status_code=status_code,
        status_message=status_message,
        attributes={**SESSION, "span.type": span_type, **attributes},
    )


def tool_span(tool_name: str = "Bash", tool_use_id: str = "toolu_01A", **attributes) -> SpanRecord:
    return cc_span(
        "claude_code.tool", "00000000000000a1", parent="00000000000000a0",
        tool_name=tool_name, tool_use_id=tool_use_id, **{"gen_ai.tool.call.id": tool_use_id}, duration_ms=412,
        **attributes,
    )  # fmt: skip


def execution(
    *, status_code: int = UNSET, parent: str = "00000000000000a1", span_id: str = "00000000000000a3", **attributes
) -> SpanRecord:
    return cc_span(
        "claude_code.tool.execution", span_id, parent=parent, status_code=status_code,
        tool_use_id="toolu_01A", **{"gen_ai.tool.call.id": "toolu_01A"}, duration_ms=380, **attributes,
    )  # fmt: skip


def blocked_on_user() -> SpanRecord:
    return cc_span(
        "claude_code.tool.blocked_on_user",
        "00000000000000a2",
        parent="00000000000000a1",
        duration_ms=30,
        decision="accept",
        source="config",
    )


# --- recognition and fields --------------------------------------------------------------------


@pytest.mark.parametrize("tool_name", ["Bash", "Edit", "Read", "WebFetch", "Agent", "mcp__github__create_issue"])
def test_a_claude_code_tool_span_is_the_call_of_the_tool_it_names(tool_name):
    record = normalize_tool_call(tool_span(tool_name), children=[blocked_on_user(), execution(success=True)])

    assert record is not None
    assert (record.tool, record.convention, record.call_id) == (tool_name, "claude_code", "toolu_01A")
    assert record.ok and record.classified_by == ""


def test_only_the_tool_span_of_a_claude_code_trace_is_a_tool_call():
    spans = [
        cc_span("claude_code.interaction", "00000000000000a0", user_prompt="<REDACTED>", **{"interaction.sequence": 1}),
        cc_span(
            "claude_code.llm_request",
            "00000000000000b1",
            parent="00000000000000a0",
            model="claude-sonnet-4-5",
            success=False,
            error="overloaded",
        ),
        cc_span(
            "claude_code.hook",
            "00000000000000b2",
            parent="00000000000000a0",
            hook_event="PreToolUse",
            hook_name="PreToolUse:Bash",
        ),
        tool_span(),
        blocked_on_user(),
        execution(success=False, error="ShellError", status_code=ERROR),
    ]

    assert [is_tool_span(span) for span in spans] == ["", "", "", "claude_code", "", ""]
    assert [span.name for span in spans if normalize_tool_call(span) is not None] == ["claude_code.tool"]


def test_the_call_id_falls_back_to_the_genai_call_id():
    span = cc_span("claude_code.tool", "00000000000000a1", tool_name="Read", **{"gen_ai.tool.call.id": "toolu_02B"})

    assert normalize_tool_call(span).call_id == "toolu_02B"


def test_tool_input_of_detailed_beta_tracing_is_the_arguments():
    record = normalize_tool_call(tool_span("Read", tool_input='{"file_path": "/repo/README.md"}'))

    assert record.arguments == {"file_path": "/repo/README.md"}
    assert record.arguments_hash == arguments_hash({"file_path": "/repo/README.md"})


def test_session_and_subagent_ids_are_not_taken_for_an_agent_name():
    record = normalize_tool_call(tool_span(agent_id="a7f3c2", parent_agent_id="a1b2c3"))

    assert record.agent == ""  # left to gen_ai.agent.name ancestors (ingest.linking)
    assert normalize_tool_call(tool_span(**{"gen_ai.agent.name": "reviewer"})).agent == "reviewer"


def test_a_claude_code_tool_span_without_a_tool_name_is_unnamed_not_claude_code():
    span = cc_span("claude_code.tool", "00000000000000a1", tool_use_id="toolu_03C")

    assert normalize_tool_call(span).tool == "unnamed_tool"


# --- the generic "X.tool" rule stays for other senders ------------------------------------------


def test_other_senders_x_tool_spans_keep_the_span_name_rule():
    lookup = SpanRecord(TRACE, "00000000000000c1", "", "lookup_order.tool", 1, 1, 2, UNSET, "")
    bare = SpanRecord(TRACE, "00000000000000c2", "", "claude_code.tool", 1, 1, 2, UNSET, "")

    assert (normalize_tool_call(lookup).tool, normalize_tool_call(lookup).convention) == ("lookup_order", "span_name")
    # Nothing of Claude Code's shape (no span.type, tool_name or tool_use_id): a generic name.
    assert (normalize_tool_call(bare).tool, normalize_tool_call(bare).convention) == ("claude_code", "span_name")


def test_a_span_its_convention_calls_something_else_is_no_tool_by_this_name():
    span = cc_span("claude_code.tool", "00000000000000a1", tool_name="Bash", **{"gen_ai.operation.name": "chat"})

    assert is_tool_span(span) == ""


def test_a_genai_span_named_like_claude_code_still_reads_claude_codes_keys():
    span = cc_span(
        "claude_code.tool",
        "00000000000000a1",
        tool_name="Grep",
        tool_use_id="toolu_04D",
        **{"gen_ai.operation.name": "execute_tool"},
    )
    record = normalize_tool_call(span)

    assert (record.convention, record.tool, record.call_id) == ("genai", "Grep", "toolu_04D")


# --- failures: the execution child states them ------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "cls", "by", "error_type"),
    [
        (
            {"error": "Error:ENOENT"},
            taxonomy.NOT_FOUND,
            "claude_code.tool.execution:error=Error:ENOENT",
            "Error:ENOENT",
        ),
        (
            {"error": "Error:EACCES"},
            taxonomy.PERMISSION,
            "claude_code.tool.execution:error=Error:EACCES",
            "Error:EACCES",
        ),
        (
            {"error": "Error:ETIMEDOUT"},
            taxonomy.TRANSIENT,
            "claude_code.tool.execution:error=Error:ETIMEDOUT",
            "Error:ETIMEDOUT",
        ),
        ({"error": "AbortError"}, taxonomy.TRANSIENT, "claude_code.tool.execution:error=AbortError", "AbortError"),
        # v2.1.268+: error_class keeps the category in identifier form, read first.
        (
            {"error": "Error:ENOENT", "error_class": "Error_ENOENT"},
            taxonomy.NOT_FOUND,
            "claude_code.tool.execution:error_class=Error_ENOENT",
            "Error_ENOENT",
        ),
        # ShellError says only that the command failed: nothing decides.
        ({"error": "ShellError"}, taxonomy.UNKNOWN, "none", "ShellError"),
        ({}, taxonomy.UNKNOWN, "none", ""),
    ],
)
def test_the_execution_child_says_how_the_call_failed(outcome, cls, by, error_type):
    record = normalize_tool_call(
        tool_span(), children=[blocked_on_user(), execution(status_code=ERROR, success=False, **outcome)]
    )

    assert not record.ok and not record.soft_failure
    assert (record.error_class, record.classified_by, record.error_type) == (cls, by, error_type)
    assert record.fingerprint


def test_the_full_message_of_otel_log_tool_details_is_read_as_a_message():
    message = "cat: config/app.yaml: No such file or directory"
    record = normalize_tool_call(
        tool_span(), children=[execution(status_code=ERROR, success=False, error=message, error_class="ShellError")]
    )

    assert (record.error_class, record.classified_by) == (taxonomy.NOT_FOUND, 'message:"No such"')
    assert (record.message, record.error_type) == (message, "ShellError")


def test_success_false_alone_fails_the_call_even_without_an_error_status():
    record = normalize_tool_call(tool_span(), children=[execution(success="false")])

    assert not record.ok and record.error_class == taxonomy.UNKNOWN


def test_an_error_status_alone_fails_the_call_and_its_message_is_read():
    record = normalize_tool_call(
        tool_span(), children=[execution(status_code=ERROR, status_message="Request timed out")]
    )

    assert (record.ok, record.error_class, record.classified_by) == (False, taxonomy.TRANSIENT, 'message:"timed out"')


def test_a_succeeding_execution_leaves_the_call_ok():
    record = normalize_tool_call(tool_span(), children=[execution(success=True)])

    assert record.ok and record.error_class == ""


def test_children_of_other_spans_and_ok_executions_are_not_read():
    other_parent = execution(parent="00000000000000ff", success=False, error="Error:ENOENT", status_code=ERROR)
    handled = execution(status_code=OK, success=False, error="Error:ENOENT", span_id="00000000000000a4")

    assert normalize_tool_call(tool_span(), children=[other_parent, handled]).ok


def test_the_last_ending_execution_child_is_read():
    first = execution(success=False, error="Error:ETIMEDOUT", status_code=ERROR, span_id="00000000000000a4")
    last = execution(success=False, error="Error:ENOENT", status_code=ERROR, span_id="00000000000000a5")
    last.end_ns = first.end_ns + 1

    assert normalize_tool_call(tool_span(), children=[last, first]).error_class == taxonomy.NOT_FOUND


def test_without_its_execution_child_the_call_looks_ok():
    # Claude Code ends claude_code.tool with status UNSET: the outcome is only on the child.
    assert normalize_tool_call(tool_span()).ok


def test_outcome_attributes_on_the_tool_span_itself_are_read_too():
    record = normalize_tool_call(tool_span(success=False, error="Error:ENOENT"))

    assert (record.error_class, record.classified_by) == (taxonomy.NOT_FOUND, "claude_code.tool:error=Error:ENOENT")


# --- through /v1/traces --------------------------------------------------------------------------


@pytest.mark.django_db
def test_claude_code_tool_calls_are_stored_under_their_tool_names(client):
    _, key = make_key()
    spans = [
        json_span(TRACE, "00000000000000a0", "claude_code.interaction", attrs={**SESSION, "span.type": "interaction"}),
        json_span(
            TRACE, "00000000000000a1", "claude_code.tool", parent="00000000000000a0",
            attrs={
                **SESSION, "span.type": "tool", "tool_name": "Edit",
                "tool_use_id": "toolu_05E", "gen_ai.tool.call.id": "toolu_05E",
            },
        ),
        json_span(
            TRACE, "00000000000000a2", "claude_code.tool", parent="00000000000000a0",
            attrs={**SESSION, "span.type": "tool", "tool_name": "mcp__linear__get_issue", "tool_use_id": "toolu_06F"},
        ),
        json_span(
            TRACE, "00000000000000a3", "claude_code.tool.execution", parent="00000000000000a1",
            attrs={**SESSION, "span.type": "tool.execution", "success": True, "tool_use_id": "toolu_05E"},
        ),
    ]  # fmt: skip
    body = json_bytes(json_request([({"service.name": "claude-code", "service.version": "2.1.120"}, spans)]))

    response = client.generic(
        "POST", "/v1/traces", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )

    assert response.status_code == 200
    calls = {call.tool: (call.convention, call.call_id) for call in ToolCall.objects.all()}
    assert calls == {"Edit": ("claude_code", "toolu_05E"), "mcp__linear__get_issue": ("claude_code", "toolu_06F")}


# --- the outcome child in another request --------------------------------------------------------

FAILED_EXECUTION = {**SESSION, "span.type": "tool.execution", "success": False, "error": "Error:ENOENT",
                    "tool_use_id": "toolu_07G"}  # fmt: skip
TOOL = {**SESSION, "span.type": "tool", "tool_name": "Read", "tool_use_id": "toolu_07G"}


def _post(client, key, *spans):
    body = json_bytes(json_request([({"service.name": "claude-code"}, list(spans))]))
    response = client.generic("POST", "/v1/traces", body, content_type="application/json",
                              HTTP_AUTHORIZATION=f"Bearer {key}")  # fmt: skip
    assert response.status_code == 200, response.content


@pytest.mark.django_db
@pytest.mark.parametrize("order", ["child first", "tool span first", "one request"])
def test_the_execution_child_decides_whichever_request_brings_it(client, order):
    _, key = make_key()
    tool = json_span(TRACE, "00000000000000b1", "claude_code.tool", parent="00000000000000b0", attrs=TOOL)
    child = json_span(TRACE, "00000000000000b2", "claude_code.tool.execution", parent="00000000000000b1",
                      status_code=ERROR, attrs=FAILED_EXECUTION)  # fmt: skip
    if order == "one request":
        _post(client, key, tool, child)
    else:
        first, second = (child, tool) if order == "child first" else (tool, child)
        _post(client, key, first)
        _post(client, key, second)

    call = ToolCall.objects.get()
    assert (call.tool, call.ok, call.error_class) == ("Read", False, "not_found")
    assert call.classified_by.startswith("claude_code.tool.execution")
