"""A trace of log records alone (an agent that reports its tool uses as log events, no spans):
its page and its API show its tool calls, and a failed call can be promoted."""

from __future__ import annotations

import pytest

from ingest.models import ToolCall
from tests.factories import make_key
from tests.ingest.test_logs_view import log_batch, pb, post, tool_result

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def session_trace(project, client):
    _, key = make_key(project)

    def emit(logger):
        tool_result(logger, tool_use_id="toolu_a", success=False, error_type="Error:ENOENT",
                    error=f"ENOENT: no such file or directory, open '{HOSTILE}'")  # fmt: skip
        tool_result(logger, tool_use_id="toolu_b", success=True)

    assert post(client, pb(log_batch(emit)), key).status_code == 200
    return ToolCall.objects.get(project=project, call_id="toolu_a")


def test_the_page_of_a_trace_without_spans_shows_its_tool_calls(member_client, project, session_trace):
    response = member_client.get(f"/p/{project.slug}/traces/{session_trace.trace_id}/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "log records only" in html
    assert "Bash" in html and "not_found" in html
    assert f"/evals/promote/{session_trace.trace_id}/{session_trace.span_id}/" in html  # promotable
    assert HOSTILE not in html and "&lt;script&gt;" in html


def test_the_trace_explorer_jump_finds_a_trace_without_spans(member_client, project, session_trace):
    response = member_client.get(f"/p/{project.slug}/traces/", {"trace": session_trace.trace_id})

    assert response.status_code == 302 and session_trace.trace_id in response["Location"]


def test_the_api_of_a_trace_without_spans_has_its_calls(member_client, project, session_trace):
    response = member_client.get(f"/api/v1/projects/{project.slug}/traces/{session_trace.trace_id}/")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["spans"] == [] and {call["tool"] for call in body["tool_calls"]} == {"Bash"}
    # The events carried no trace context: the session's trace lists them as its records.
    assert len(body["logs"]) == 2 and body["start_time"] and body["duration_ms"] >= 0
    assert {log["event_name"] for log in body["logs"]} == {"claude_code.tool_result"}
    assert [call["tool"] for call in body["calls"]] == ["Bash", "Bash"]


def test_a_trace_id_with_nothing_is_still_a_404(member_client, project, session_trace):
    response = member_client.get(f"/p/{project.slug}/traces/{'f' * 32}/")

    assert response.status_code == 404
