"""The MCP server over Streamable HTTP at /mcp, driven by the SDK's own client against the
whole app on a real WSGI server: every tool, auth, scopes, outsiders, bad arguments, throttling."""

from __future__ import annotations

import time

import anyio
import httpx2
import pytest
from django.test import override_settings
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from dashboard.mcp import http
from dashboard.mcp.server import Session
from dashboard.mcp.tools import TOOLS
from dashboard.models import AgentAccess, Alert
from evals.models import EvalCase
from tests.dashboard.mcp.conftest import FAILED_SPAN, TRACE, call_tool, over_http, run_async, token_for

QUICK_S = 5  # a client timeout: a request that hangs fails the test instead of hanging it


def envelope(result) -> dict:
    assert result.is_error, result
    return result.structured_content["error"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_client_lists_every_tool_in_either_protocol_era(live_server_url, member, project, mode):
    token = token_for(member, "read")

    async def work(client):
        return await client.list_tools()

    listed = over_http(live_server_url, token, work, mode=mode)

    assert [tool.name for tool in listed.tools] == [spec.name for spec in TOOLS]
    by_name = {tool.name: tool for tool in listed.tools}
    assert by_name["tool_report"].input_schema["required"] == ["project", "tool"]
    assert by_name["acknowledge_alert"].annotations.read_only_hint is False


def test_the_overview_shows_the_failing_tool_and_the_open_alert(live_server_url, member, traffic):
    result = call_tool(live_server_url, token_for(member, "read"), "tool_health_overview", {"project": "alpha", "range": "24h"})

    assert not result.is_error
    data = result.structured_content
    assert data["totals"]["calls"] == 2 and data["totals"]["errors"] == 1
    (row,) = data["tools"]
    assert row["tool"] == "lookup_order" and row["errors_by_class"] == {"permission": 1}
    assert row["open_alert_kinds"] == ["error_rate_spike"]
    assert [alert["id"] for alert in data["open_alerts"]] == [traffic["alert"].pk]
    assert result.content[0].text.startswith("alpha, last 24 hours: 2 calls")


def test_a_tools_report_has_classes_fingerprints_and_contract_checks(live_server_url, member, traffic):
    result = call_tool(live_server_url, token_for(member), "tool_report", {"project": "alpha", "tool": "lookup_order", "range": "7d"})

    data = result.structured_content
    assert not result.is_error and data["errors_by_class"] == {"permission": 1}
    assert data["fingerprints"][0]["error_class"] == "permission"
    assert {check["check"] for check in data["contract_checks"]} >= {"explicit_class", "specific_message"}
    assert 1 <= len(data["series"]) <= 24


def test_a_tool_without_calls_is_not_found_naming_the_tools_that_have(live_server_url, member, traffic):
    error = envelope(call_tool(live_server_url, token_for(member), "tool_report", {"project": "alpha", "tool": "lookup_ordr"}))

    assert error["class"] == "not_found" and error["field"] == "tool" and "lookup_order" in error["suggestion"]


def test_failed_calls_are_searched_and_a_trace_shows_its_logical_calls(live_server_url, member, traffic):
    token = token_for(member, "read")
    found = call_tool(live_server_url, token, "search_failed_calls", {"project": "alpha", "tool": "lookup_order"})

    assert [row["span_id"] for row in found.structured_content["calls"]] == [FAILED_SPAN]
    trace = call_tool(live_server_url, token, "get_trace", {"project": "alpha", "trace_id": TRACE.upper()})
    data = trace.structured_content
    assert len(data["tool_calls"]) == 2 and len(data["spans"]) == 2
    # Different arguments (order A-1, then A-2): two logical calls, as the rollups count them.
    assert [(call["ok"], call["error_class"], call["attempt_count"]) for call in data["calls"]] == [
        (False, "permission", 1), (True, None, 1),
    ]  # fmt: skip


def test_alerts_are_listed_and_acknowledged_with_the_admin_scope(live_server_url, member, traffic):
    token = token_for(member, "read", "admin")
    listed = call_tool(live_server_url, token, "list_alerts", {"project": "alpha", "status": "open"})
    assert [alert["id"] for alert in listed.structured_content["alerts"]] == [traffic["alert"].pk]

    acked = call_tool(live_server_url, token, "acknowledge_alert", {"project": "alpha", "alert_id": traffic["alert"].pk})

    assert acked.structured_content["changed"] is True
    alert = Alert.objects.get(pk=traffic["alert"].pk)
    assert alert.status == "acknowledged" and alert.acknowledged_by == "alice"


def test_a_failed_call_is_promoted_and_listed_with_the_eval_cases(live_server_url, member, traffic):
    token = token_for(member, "read", "admin")
    promoted = call_tool(live_server_url, token, "promote_failed_call",
                         {"project": "alpha", "trace_id": TRACE, "span_id": FAILED_SPAN, "tags": ["mcp"]})  # fmt: skip

    assert promoted.structured_content["created"] is True
    case = EvalCase.objects.get()
    assert case.tool == "lookup_order"
    listed = call_tool(live_server_url, token, "list_eval_cases", {"project": "alpha"})
    assert [row["id"] for row in listed.structured_content["cases"]] == [case.pk]
    again = call_tool(live_server_url, token, "promote_failed_call", {"project": "alpha", "trace_id": TRACE, "span_id": FAILED_SPAN})
    assert again.structured_content["created"] is False


def test_a_read_only_token_cannot_acknowledge_or_promote(live_server_url, member, traffic):
    token = token_for(member, "read")

    for name, arguments in (
        ("acknowledge_alert", {"project": "alpha", "alert_id": traffic["alert"].pk}),
        ("promote_failed_call", {"project": "alpha", "trace_id": TRACE, "span_id": FAILED_SPAN}),
    ):
        error = envelope(call_tool(live_server_url, token, name, arguments))
        assert error["class"] == "permission" and "'admin' scope" in error["message"] and error["retryable"] is False
    assert Alert.objects.get().status == "open" and not EvalCase.objects.exists()


def test_a_runs_only_token_cannot_read(live_server_url, member, project):
    error = envelope(call_tool(live_server_url, token_for(member, "runs"), "list_projects"))

    assert error["class"] == "permission" and "'read' scope" in error["message"]


def test_an_outsiders_project_is_not_found_like_one_that_does_not_exist(live_server_url, outsider, traffic):
    token = token_for(outsider)

    theirs = envelope(call_tool(live_server_url, token, "list_alerts", {"project": "alpha"}))
    nobody = envelope(call_tool(live_server_url, token, "list_alerts", {"project": "no-such"}))

    assert theirs["class"] == nobody["class"] == "not_found" and theirs["field"] == "project"
    assert theirs["message"].replace("alpha", "X") == nobody["message"].replace("no-such", "X")
    assert call_tool(live_server_url, token, "list_projects").structured_content == {"projects": []}


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("tool_health_overview", {"project": "alpha", "range": "2w"}, "range"),
        ("tool_health_overview", {}, "project"),
        ("search_failed_calls", {"project": "alpha", "error_class": "explody"}, "error_class"),
        ("search_failed_calls", {"project": "alpha", "limit": 0}, "limit"),
        ("search_failed_calls", {"project": "alpha", "cursor": "zzz"}, "cursor"),
        ("get_trace", {"project": "alpha", "trace_id": "nope"}, "trace_id"),
        ("list_alerts", {"project": "alpha", "kind": "weird"}, "kind"),
        ("acknowledge_alert", {"project": "alpha", "alert_id": "1"}, "alert_id"),
        ("promote_failed_call", {"project": "alpha", "trace_id": TRACE, "span_id": "0000000000000001"}, "span_id"),
        ("list_eval_cases", {"project": "alpha", "status": "gone"}, "status"),
    ],
)
def test_a_bad_argument_is_a_validation_envelope_naming_it(live_server_url, member, project, name, arguments, field):
    error = envelope(call_tool(live_server_url, token_for(member), name, arguments))

    assert error["class"] in ("validation", "not_found") and error["field"] == field
    assert error["suggestion"] and error["message"] and error["retryable"] is False and error["retry_after"] is None


def test_an_unknown_tool_is_not_found(live_server_url, member, project):
    error = envelope(call_tool(live_server_url, token_for(member), "drop_tables", {}))

    assert error["class"] == "not_found" and error["field"] == "name" and "tool_health_overview" in error["suggestion"]


def test_no_token_or_a_bad_one_is_a_401_before_any_mcp_message_is_read(live_server_url, member, project):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    for authorization in (None, "Bearer twu_not-a-token", "Bearer tw_an-ingest-key"):
        sent = {**headers, **({"Authorization": authorization} if authorization else {})}
        response = httpx2.post(f"{live_server_url}/mcp", json=body, headers=sent)
        assert response.status_code == 401 and response.headers["WWW-Authenticate"].startswith("Bearer")
        assert response.json()["error"]["class"] == "permission"

    with pytest.raises(Exception):  # the SDK's client refuses to connect
        over_http(live_server_url, None, lambda client: client.list_tools())


def test_a_throttled_call_is_rate_limited_with_retry_after(live_server_url, member, project):
    token = token_for(member, "read")
    with override_settings(REST_FRAMEWORK={"DEFAULT_THROTTLE_RATES": {"agent": "2/min"}}):

        async def work(client):
            return [await client.call_tool("list_projects", {}) for _ in range(3)]

        results = over_http(live_server_url, token, work)

    assert [result.is_error for result in results] == [False, False, True]
    error = envelope(results[2])
    assert error["class"] == "rate_limited" and error["retryable"] is True and 1 <= error["retry_after"] <= 60


def test_every_call_is_in_the_access_log_with_redacted_arguments(live_server_url, member, outsider, traffic):
    token = token_for(member, "read")
    call_tool(live_server_url, token, "search_failed_calls", {"project": "alpha", "q": "Bearer sk-abcdefghijklmnopqrstuvwx"})
    call_tool(live_server_url, token, "acknowledge_alert", {"project": "alpha", "alert_id": traffic["alert"].pk})
    call_tool(live_server_url, token_for(outsider), "list_alerts", {"project": "alpha"})

    rows = list(AgentAccess.objects.order_by("id"))
    assert [(row.name, row.outcome, row.user.username) for row in rows] == [
        ("search_failed_calls", "ok", "alice"), ("acknowledge_alert", "permission", "alice"),
        ("list_alerts", "not_found", "mallory"),
    ]  # fmt: skip
    assert rows[0].project == traffic["project"] and rows[0].surface == "mcp" and rows[0].token.name == "ide"
    assert "sk-abcdefghijklmnopqrstuvwx" not in rows[0].arguments["q"]
    assert rows[2].project is None  # an outsider's call names no project its owners see


@pytest.mark.parametrize("accept", ["text/event-stream", "*/*", None])
def test_a_get_is_a_405_at_once_allowing_post(live_server_url, member, project, accept):
    # The spec: a server that offers no SSE stream at the endpoint MUST answer a GET with 405.
    # The SDK's stateless transport opened an event stream it never ended: the GET never returned.
    headers = {"Authorization": f"Bearer {token_for(member, 'read')}", **({"Accept": accept} if accept else {})}
    started = time.monotonic()
    response = httpx2.get(f"{live_server_url}/mcp", headers=headers, timeout=QUICK_S)

    assert response.status_code == 405 and response.headers["Allow"] == "POST"
    assert time.monotonic() - started < QUICK_S
    error = response.json()
    assert error["jsonrpc"] == "2.0" and error["id"] is None and error["error"]["code"] == -32600
    assert "no SSE stream" in error["error"]["message"]


def test_every_other_method_is_a_405_allowing_post_and_no_token_still_a_401(live_server_url, member, project):
    headers = {"Authorization": f"Bearer {token_for(member, 'read')}"}
    for method in ("GET", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD"):
        response = httpx2.request(method, f"{live_server_url}/mcp", headers=headers, timeout=QUICK_S)
        assert (response.status_code, response.headers["Allow"]) == (405, "POST"), method

    for method in ("GET", "DELETE"):  # authentication first, as for a POST
        response = httpx2.request(method, f"{live_server_url}/mcp", timeout=QUICK_S)
        assert response.status_code == 401 and response.headers["WWW-Authenticate"].startswith("Bearer")


async def _never_answers(self, scope, receive, send):
    await anyio.sleep_forever()


async def _never_ends_its_stream(self, scope, receive, send):
    # What the SDK's legacy transport does with a GET: headers and a stream that never ends.
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
    await anyio.sleep_forever()


@pytest.mark.parametrize("handler", [_never_answers, _never_ends_its_stream], ids=["silent", "endless-stream"])
def test_an_answer_that_never_comes_is_a_503_in_time(live_server_url, member, project, monkeypatch, handler):
    token = token_for(member, "read")
    monkeypatch.setattr(StreamableHTTPSessionManager, "handle_request", handler)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip

    with override_settings(TOOLWATCH_MCP_REQUEST_TIMEOUT=0.5):
        # More of them than the server has threads (2): each one must have let go of its own.
        for _ in range(3):
            started = time.monotonic()
            response = httpx2.post(f"{live_server_url}/mcp", json=body, headers=headers, timeout=QUICK_S)
            assert response.status_code == 503 and response.headers["Retry-After"] == "2"
            assert 0.5 <= time.monotonic() - started < QUICK_S
            error = response.json()["error"]
            assert error["code"] == -32603 and "did not answer within 0.5 s" in error["message"]

    monkeypatch.undo()  # the SDK answers again, and a thread is free to serve it
    listed = over_http(live_server_url, token, lambda client: client.list_tools())
    assert [tool.name for tool in listed.tools] == [spec.name for spec in TOOLS]


def test_the_sdks_own_endless_get_stream_is_cut_off_at_the_deadline():
    # Below the view: _serve given the SDK's real GET handling (an event stream it never ends).
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"",
        "headers": [(b"host", b"testserver"), (b"accept", b"text/event-stream")],
        "client": ("127.0.0.1", 0), "server": ("testserver", 80),
    }  # fmt: skip

    async def serve():
        with anyio.fail_after(QUICK_S):
            await http._serve(Session(principal=None), scope, b"", timeout=0.3)

    started = time.monotonic()
    with pytest.raises(http.TimedOut):
        run_async(serve)
    assert time.monotonic() - started < QUICK_S
