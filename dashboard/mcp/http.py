"""`/mcp`: the MCP server over Streamable HTTP, as a Django view on the app's own WSGI server.

Why a view and not the SDK's Starlette app behind an ASGI-to-WSGI bridge: Toolwatch is served
by waitress and gunicorn (WSGI), and the SDK's app needs its session manager's task group
running for the life of the process (a lifespan no WSGI server runs). In stateless mode with
JSON responses, one HTTP request is one self-contained exchange (a 2026-07-28 request always
is; an older client's initialize / tools/list / tools/call each stand alone), so a view can
run a fresh `StreamableHTTPSessionManager` per request and hand it the request as ASGI:
the SDK's own transport answers (status, headers, JSON-RPC body), nothing of the protocol is
written here. The view only authenticates the bearer token first, with the REST API's
lookup (dashboard/tokens.py), so no MCP message is read for an unknown caller.

DNS-rebinding protection is off in the SDK: Django's ALLOWED_HOSTS already checks Host, and
the endpoint takes no cookies (a bearer token only), so a rebound page has nothing to replay.

POST only. Stateless with JSON responses, the server offers no SSE stream at the endpoint, so a
GET is a 405 (the spec's "MUST either return Content-Type: text/event-stream ... or else return
HTTP 405 Method Not Allowed"), as is any other method, answered here after authentication: the
SDK's legacy transport would open a GET's event stream and never end it (nor would anything
else end it: a WSGI server cannot tell the view its client left), holding a worker thread.
Nothing may hold one for good, so `_serve` gives the SDK `TOOLWATCH_MCP_REQUEST_TIMEOUT`
seconds (a 503 then).
"""

from __future__ import annotations

import json
import logging
import math

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import INTERNAL_ERROR, INVALID_REQUEST

from dashboard import tokens
from dashboard.api.auth import SCHEMES
from dashboard.mcp.server import CURRENT_SESSION, RETRY_AFTER_BUSY_S, Session, server
from dashboard.mcp.tools import Principal
from ingest import taxonomy

REALM = "Toolwatch MCP"
MAX_BODY_BYTES = 1024 * 1024  # a tools/call is a few hundred bytes; the SDK's own limit is 4 MiB
SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)
ALLOWED_METHODS = "POST"  # stateless, JSON: no GET stream, no session to DELETE
# Seconds the SDK has to answer one request (settings.TOOLWATCH_MCP_REQUEST_TIMEOUT overrides):
# under gunicorn's --timeout 30 (the Dockerfile's default, compose's otlp service) and compose's
# DATABASE_STATEMENT_TIMEOUT_MS=30000, so the caller gets a 503 rather than a killed worker.
DEFAULT_REQUEST_TIMEOUT_S = 25
NOT_ALLOWED = {
    "GET": "Method Not Allowed: this server offers no SSE stream (stateless, JSON responses); POST JSON-RPC messages",
    "DELETE": "Method Not Allowed: Session termination not supported (stateless: no sessions)",
}

logger = logging.getLogger(__name__)


class Unauthenticated(Exception):
    pass


def _refusal(status: int, message: str, suggestion: str) -> HttpResponse:
    body = {
        "error": {"class": taxonomy.PERMISSION, "retryable": False, "field": "Authorization", "suggestion": suggestion,
                  "retry_after": None, "message": message}
    }  # fmt: skip
    response = HttpResponse(json.dumps(body), status=status, content_type="application/json")
    if status == 401:
        response["WWW-Authenticate"] = f'Bearer realm="{REALM}"'
    return response


def _jsonrpc_error(status: int, code: int, message: str) -> HttpResponse:
    """An HTTP error with a JSON-RPC error body of no id, as the SDK's transport writes them."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return HttpResponse(json.dumps(body), status=status, content_type="application/json")


def _not_allowed(method: str) -> HttpResponse:
    response = _jsonrpc_error(405, INVALID_REQUEST, NOT_ALLOWED.get(method, "Method Not Allowed"))
    response["Allow"] = ALLOWED_METHODS
    return response


def request_timeout() -> float:
    """Seconds the SDK has to answer one request, from settings (at call time) or the default."""
    seconds = getattr(settings, "TOOLWATCH_MCP_REQUEST_TIMEOUT", None)
    try:
        seconds = float(seconds) if seconds is not None else DEFAULT_REQUEST_TIMEOUT_S
    except (TypeError, ValueError):
        seconds = DEFAULT_REQUEST_TIMEOUT_S
    return seconds if math.isfinite(seconds) and seconds > 0 else DEFAULT_REQUEST_TIMEOUT_S


class TimedOut(Exception):
    pass


def authenticate(request: HttpRequest) -> Principal:
    """The caller of `Authorization: Bearer twu_…`, or Unauthenticated saying why (the REST API's words)."""
    parts = request.headers.get("Authorization", "").split()
    if not parts or parts[0].lower().encode() not in SCHEMES:
        raise Unauthenticated("send a personal API token: 'Authorization: Bearer twu_…'")
    if len(parts) != 2:
        raise Unauthenticated("Authorization header must be 'Bearer <token>', with one token and no spaces")
    now = timezone.now()
    try:
        token = tokens.api_token_authenticate(parts[1], now=now)
    except tokens.TokenError as exc:
        raise Unauthenticated(str(exc)) from None
    tokens.api_token_touch(token=token, now=now)
    return Principal(user=token.user, token=token)


def _scope(request: HttpRequest, body: bytes) -> dict:
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()]
    if not request.headers.get("Content-Length"):
        headers.append((b"content-length", str(len(body)).encode()))
    host, port = split_domain_port(request.get_host())  # "[::1]:8000" too
    port = port or request.get_port()
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
        "scheme": request.scheme, "path": "/mcp", "raw_path": request.path.encode(), "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"), "headers": headers,
        "client": (request.META.get("REMOTE_ADDR", ""), 0), "server": (host, int(port or 80)),
    }  # fmt: skip


async def _serve(
    session: Session, scope: dict, body: bytes, *, timeout: float
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Run the SDK's transport for one request; the response's status, headers and body, or
    TimedOut when no complete response came within `timeout` seconds (the SDK's tasks cancelled).

    `receive()` behaves as an ASGI server's: the body, then nothing until the response is
    complete (the client cannot have left: it waits on this thread), then `http.disconnect`.
    It must not report a disconnect once the body is read: the SDK takes one for the client
    gone and cancels the request (sse_starlette's disconnect listener, the 2026 transport's
    `watch_disconnect`), so the deadline, not `receive()`, ends what would never end.
    """
    done = anyio.Event()
    delivered = False
    status, headers, chunks = 500, [], []

    async def receive() -> dict:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # the client "disconnects" only once the answer is complete
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status, headers = message["status"], list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                done.set()

    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True, security_settings=SECURITY)
    reset = CURRENT_SESSION.set(session)
    try:
        # Cancelling the scope cancels the SDK's request and its server task (manager.run()'s task
        # group); the transport's own `finally` terminates it, shielded. A synchronous tool call
        # already running (sync_to_async) is waited for: no thread can be stopped from outside,
        # so a database query stays bounded by its statement timeout.
        with anyio.move_on_after(timeout) as deadline:
            async with manager.run():
                await manager.handle_request(scope, receive, send)
    finally:
        CURRENT_SESSION.reset(reset)
        complete = done.is_set()
        done.set()
    if deadline.cancelled_caught and not complete:
        raise TimedOut(f"no complete response within {timeout:g} s")
    return status, headers, b"".join(chunks)


@csrf_exempt
async def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    try:
        principal = await sync_to_async(authenticate, thread_sensitive=True)(request)
    except Unauthenticated as exc:
        return _refusal(401, str(exc), "create a personal API token under /account/tokens/ and send it as a Bearer token")
    if request.method != "POST":
        return _not_allowed(request.method)
    body = request.body
    if len(body) > MAX_BODY_BYTES:
        return HttpResponse(status=413)
    timeout = request_timeout()
    try:
        status, headers, content = await _serve(Session(principal), _scope(request, body), body, timeout=timeout)
    except TimedOut as exc:
        logger.warning("MCP request by %s: %s; answered 503", principal.user, exc)
        response = _jsonrpc_error(503, INTERNAL_ERROR, f"Toolwatch's MCP server did not answer within {timeout:g} s")
        response["Retry-After"] = str(RETRY_AFTER_BUSY_S)
        return response
    response = HttpResponse(content, status=status)
    for name, value in headers:
        if name.lower() not in (b"content-length", b"connection", b"transfer-encoding"):
            response[name.decode("latin-1")] = value.decode("latin-1")
    return response
