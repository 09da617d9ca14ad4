"""Shared fixtures and builders for the eval server tests: the project's key, failures ingested through OTLP.

The users and the project are tests/conftest.py's cast; `project_key` is that project with a key
(import it: `from tests.evals.server_helpers import project_key`).
"""

from __future__ import annotations

import json
import secrets
import time

import pytest

from ingest.models import ToolCall
from tests.conftest import member, project  # noqa: F401 - re-exported: tests/evals/test_runner_end_to_end.py imports them from here
from tests.factories import make_key
from tests.otlp_builders import json_bytes, json_request, json_span

HOSTILE = "<script>alert(1)</script><b>x</b>"


@pytest.fixture
def project_key(project):
    """(`project`, a plain API key of it)."""
    return make_key(project)


def new_ids() -> tuple[str, ...]:
    return secrets.token_hex(16), *(secrets.token_hex(8) for _ in range(7))


def failing_trace(
    *,
    tool: str = "search_flights",
    message: str = "'date' must be YYYY-MM-DD",
    error: dict | None = None,
    arguments: dict | None = None,
    start_ns: int | None = None,
    service: str = "support-agent",
) -> tuple[str, str, dict]:
    """An agent trace with a failed tool call; returns (trace_id, tool span_id, OTLP/JSON request).

    invoke_agent ─┬─ chat
                  ├─ execute_tool <tool>  (failed)  ── GET /flights (its HTTP span)
                  ├─ execute_tool lookup_order (ok)
                  └─ invoke_agent planner ── chat (another branch: not in a snapshot)
    """
    trace, root, chat, call, http, ok_call, sub, sub_chat = new_ids()
    start = start_ns if start_ns is not None else time.time_ns() - 120_000_000_000
    error = error if error is not None else {"code": "invalid_argument", "message": message, "field": "date"}
    tool_attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.arguments": json.dumps(arguments if arguments is not None else {"date": "tomorrow", "to": "LIS"}),
        "gen_ai.tool.call.result": json.dumps({"error": error}),
    }
    spans = [
        json_span(trace, root, "invoke_agent support", attrs={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}, start_ns=start, duration_ns=900_000_000),
        json_span(trace, chat, "chat gpt-4o", parent=root, attrs={"gen_ai.operation.name": "chat"}, start_ns=start + 10_000_000),
        json_span(trace, call, f"execute_tool {tool}", parent=root, attrs=tool_attrs, status_code=2, status_message=message,
                  start_ns=start + 100_000_000, duration_ns=50_000_000,
                  events=[{"name": "exception", "timeUnixNano": str(start + 140_000_000), "attributes": [{"key": "exception.message", "value": {"stringValue": message}}]}]),
        json_span(trace, http, "GET /flights", parent=call, attrs={"http.response.status_code": 400}, start_ns=start + 110_000_000, duration_ns=20_000_000),
        json_span(trace, ok_call, "execute_tool lookup_order", parent=root, attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"}, start_ns=start + 300_000_000),
        json_span(trace, sub, "invoke_agent planner", parent=root, attrs={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}, start_ns=start + 400_000_000),
        json_span(trace, sub_chat, "chat planner", parent=sub, attrs={"gen_ai.operation.name": "chat"}, start_ns=start + 410_000_000),
    ]  # fmt: skip
    request = json_request([({"service.name": service, "deployment.environment.name": "prod"}, spans)])
    return trace, call, request


def ingest(client, key: str, request: dict) -> None:
    response = client.generic(
        "POST", "/v1/traces", json_bytes(request), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 200, response.content


def ingest_failure(client, key: str, **kwargs) -> ToolCall:
    """Ingest a failing trace through /v1/traces and return the failed tool call's row."""
    trace, span, request = failing_trace(**kwargs)
    ingest(client, key, request)
    return ToolCall.objects.get(trace_id=trace, span_id=span)
