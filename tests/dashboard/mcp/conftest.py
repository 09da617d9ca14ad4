"""Fixtures of the MCP server tests: the whole app on a real WSGI server, tokens of the cast,
a project with failed tool calls, rollups and an open alert, and the SDK's own client."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor

import anyio
import httpx2
import pytest
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from dashboard import tokens
from dashboard.models import Alert
from dashboard.rollups.refresh import rollups_recompute
from ingest.otlp import JSON, decode_request
from ingest.services import spans_ingest
from tests.conftest import served_app
from tests.otlp_builders import json_bytes, json_request, json_span

HOUR = dt.timedelta(hours=1)
TRACE = "0af7651916cd43dd8448eb211c80319c"
FAILED_SPAN = "b7ad6b7169203331"
OK_SPAN = "00f067aa0ba902b7"


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.clear()  # the `agent` throttle's history lives in the default cache
    yield
    cache.clear()


@pytest.fixture
def live_server_url(transactional_db):
    """The app served by waitress on a free loopback port (tests/conftest.py's served_app)."""
    with served_app() as (url, _):
        yield url


def ingest(project, spans, *, service="support-agent"):
    """Spans through the real ingest service, then their rollups recomputed."""
    now = timezone.now()
    request = decode_request(json_bytes(json_request([({"service.name": service}, spans)])), JSON)
    spans_ingest(project=project, request=request, limits=settings.INGEST_LIMITS, now=now)
    rollups_recompute(project_id=project.pk, start=now - 2 * HOUR, end=now + HOUR)


@pytest.fixture
def traffic(project):
    """Alpha with one trace: lookup_order failed (a permission error), then succeeded; and an open alert."""
    start = timezone.now() - dt.timedelta(minutes=20)
    start_ns = int(start.timestamp() * 1e9)
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
            "gen_ai.tool.call.arguments": '{"order_id": "A-1"}'}  # fmt: skip
    ingest(project, [
        json_span(TRACE, FAILED_SPAN, "execute_tool lookup_order", attrs={**tool, "http.response.status_code": 403},
                  status_code=2, status_message="403 Forbidden: the order belongs to another account", start_ns=start_ns),
        json_span(TRACE, OK_SPAN, "execute_tool lookup_order", attrs={**tool, "gen_ai.tool.call.arguments": '{"order_id": "A-2"}'},
                  start_ns=start_ns + 10**9),
    ])  # fmt: skip
    alert = Alert.objects.create(
        project=project, tool="lookup_order", kind="error_rate_spike", opened_at=start, last_seen_at=start,
        summary="lookup_order's error rate rose",
    )  # fmt: skip
    return {"project": project, "alert": alert}


def token_for(user, *scopes: str) -> str:
    _, plain = tokens.api_token_create(user=user, name="ide", scopes=scopes or tokens.SCOPES)
    return plain


async def _with_client(url: str, token: str | None, mode: str, work):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client:
            return await work(client)


def run_async(function, *args):
    """anyio.run on a thread of its own: the browser tests' Playwright (its sync API) keeps an
    event loop running in the main thread for the whole session, and anyio refuses to start
    another there."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, function, *args).result()


def over_http(url: str, token: str | None, work, *, mode: str = "auto"):
    """Run `await work(client)` with the SDK's client connected to `url`/mcp over Streamable HTTP."""
    return run_async(_with_client, url, token, mode, work)


def call_tool(url: str, token: str, name: str, arguments: dict | None = None, *, mode: str = "auto"):
    async def work(client):
        return await client.call_tool(name, arguments or {})

    return over_http(url, token, work, mode=mode)
