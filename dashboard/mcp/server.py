"""The MCP server: the SDK's low-level `Server` with Toolwatch's tools (dashboard/mcp/tools.py).

The low-level Server rather than MCPServer: MCPServer answers a bad argument, a raised
exception and a refusal with text of its own (structured content null), and we want every
failure to be our envelope (dashboard/mcp/errors.py) so Toolwatch's own tools pass its own
contract checks; the schemas are written by hand (one per tool, in tools.py).

Every `tools/call` runs `run_tool` off the event loop (the ORM is synchronous): throttle per
token with the API's `agent` rate, check the token's scope, call the tool, and append one
row to the agent access log (dashboard/agent_access.py). Who calls is `CURRENT_SESSION`, set
by the transport: the /mcp view per request (http.py), `manage.py mcpserver` once (stdio).
"""

from __future__ import annotations

import contextvars
import logging
import math
import time
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import OperationalError, close_old_connections
from mcp.server import Server, ServerRequestContext
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams

from dashboard import agent_access, tokens
from dashboard.mcp.errors import RATE_LIMITED, ToolError, error_result, not_found
from dashboard.mcp.tools import TOOLS, TOOLS_BY_NAME, Call, Principal, principal_has_scope, scope_error
from dashboard.throttles import SharedLog
from ingest import taxonomy

logger = logging.getLogger(__name__)

SERVER_NAME = "toolwatch"
THROTTLE_SCOPE = "agent"
DEFAULT_AGENT_RATE = "600/min"  # until REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["agent"] says otherwise
RETRY_AFTER_BUSY_S = 2  # the database could not answer in time (as ingest's 503 Retry-After)
INSTRUCTIONS = (
    "Toolwatch observes the tool calls of AI agents: error classes, retries, contract checks, alerts and eval cases. "
    "Start with list_projects, then tool_health_overview; a failed tool call answers with an error envelope "
    "{error: {class, retryable, field, suggestion, retry_after, message}}."
)


@dataclass(frozen=True)
class Session:
    """What the transport knows of the caller. `stdio`: a long-lived process, whose database
    connection may go stale between calls (a request's is closed when the request ends)."""

    principal: Principal
    stdio: bool = False


CURRENT_SESSION: contextvars.ContextVar[Session] = contextvars.ContextVar("toolwatch_mcp_session")


class AgentThrottle(SharedLog):
    """DRF's rate throttle, counted as the API's are (dashboard/throttles.py SharedLog), per user:
    the key the feed's `agent` throttle counts under (dashboard/api/tool_health.py), so both
    surfaces share one budget."""

    scope = THROTTLE_SCOPE

    def get_rate(self) -> str:
        # Read at call time (SimpleRateThrottle reads its rates once, at import).
        rates = settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES") or {}
        return rates.get(THROTTLE_SCOPE) or DEFAULT_AGENT_RATE

    def get_cache_key(self, principal, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": principal.user.pk}


def throttle_check(principal: Principal) -> None:
    """A rate_limited ToolError, with the seconds to wait, when the caller is over the `agent` rate."""
    throttle = AgentThrottle()
    # SharedLog fails open by itself: with the cache down it counts in this process for a while.
    if not throttle.allow_request(principal, None):
        wait = math.ceil(throttle.wait() or 1)
        raise ToolError(
            RATE_LIMITED, f"too many calls: this user is limited to {throttle.rate} across Toolwatch's agent surfaces",
            suggestion=f"wait {wait} s before the next call", retry_after=wait,
        )  # fmt: skip


def run_tool(session: Session, name: str, arguments: dict) -> CallToolResult:
    """One tools/call, synchronously: throttle, scope, the tool, the access-log row. Never raises."""
    if session.stdio:
        close_old_connections()
    principal = session.principal
    call = Call(principal, arguments if isinstance(arguments, dict) else {})
    started = time.perf_counter()
    outcome = "ok"
    try:
        if session.stdio and principal.token is not None:
            # A stdio server lives as long as its host: a token revoked or expired since it
            # started (or its user deactivated) stops working at the next call, as over HTTP.
            try:
                tokens.api_token_recheck(principal.token)
            except tokens.TokenError as exc:
                raise ToolError(taxonomy.PERMISSION, str(exc), suggestion="restart the server with a valid token") from None
        throttle_check(principal)
        spec = TOOLS_BY_NAME.get(name)
        if spec is None:
            raise not_found("name", f"Toolwatch has no tool {name!r}", f"use one of {', '.join(TOOLS_BY_NAME)}")
        if not principal_has_scope(principal, spec.scope):
            raise scope_error(spec)
        result = spec.handler(call)
    except ToolError as exc:
        outcome, result = exc.outcome, error_result(exc)
    except OperationalError:
        logger.warning("MCP tool %s: the database could not answer", name, exc_info=True)
        busy = ToolError(
            taxonomy.TRANSIENT, "Toolwatch's database could not answer in time",
            suggestion=f"retry in {RETRY_AFTER_BUSY_S} s", retry_after=RETRY_AFTER_BUSY_S,
        )  # fmt: skip
        outcome, result = busy.outcome, error_result(busy)
    except Exception:
        logger.exception("MCP tool %s failed", name)
        fault = ToolError(
            taxonomy.FATAL, f"Toolwatch could not answer {name} with these arguments (a fault on the server, logged)",
            suggestion="do not retry this call unchanged; report it to the Toolwatch operators",
        )  # fmt: skip
        outcome, result = fault.outcome, error_result(fault)
    try:
        agent_access.record_access(
            surface="mcp", name=name, user=principal.user, token=principal.token, project=call.project,
            arguments=call.arguments, outcome=outcome, duration_ms=(time.perf_counter() - started) * 1000,
        )  # fmt: skip
    except Exception:  # the answer stands even when its log row cannot be written
        logger.exception("MCP tool %s: the access-log row was not written", name)
    return result


async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
    return ListToolsResult(tools=[spec.as_tool() for spec in TOOLS])


async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> CallToolResult:
    session = CURRENT_SESSION.get()  # set by the transport before any request is served
    # thread_sensitive: under the WSGI server this is the request's own thread and connection.
    return await sync_to_async(run_tool, thread_sensitive=True)(session, params.name, params.arguments or {})


server: Server = Server(
    SERVER_NAME, version="1", title="Toolwatch", instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool
)
