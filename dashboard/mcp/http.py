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
"""

from __future__ import annotations

import json

import anyio
from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from dashboard import tokens
from dashboard.api.auth import SCHEMES
from dashboard.mcp.server import CURRENT_SESSION, Session, server
from dashboard.mcp.tools import Principal
from ingest import taxonomy

REALM = "Toolwatch MCP"
MAX_BODY_BYTES = 1024 * 1024  # a tools/call is a few hundred bytes; the SDK's own limit is 4 MiB
SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)


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


async def _serve(session: Session, scope: dict, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Run the SDK's transport for one request; the response's status, headers and body."""
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
        async with manager.run():
            await manager.handle_request(scope, receive, send)
    finally:
        CURRENT_SESSION.reset(reset)
        done.set()
    return status, headers, b"".join(chunks)


@csrf_exempt
async def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    try:
        principal = await sync_to_async(authenticate, thread_sensitive=True)(request)
    except Unauthenticated as exc:
        return _refusal(401, str(exc), "create a personal API token under /account/tokens/ and send it as a Bearer token")
    body = request.body
    if len(body) > MAX_BODY_BYTES:
        return HttpResponse(status=413)
    status, headers, content = await _serve(Session(principal), _scope(request, body), body)
    response = HttpResponse(content, status=status)
    for name, value in headers:
        if name.lower() not in (b"content-length", b"connection", b"transfer-encoding"):
            response[name.decode("latin-1")] = value.decode("latin-1")
    return response
