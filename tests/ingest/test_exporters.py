"""Real senders against a real server: the official Python OTLP exporter, and a chunked JSON sender.

The app runs under waitress on a loopback port, as the Quickstart serves it, with
the test database; `transactional_db` because the server thread commits.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse

import pytest
from django.db import connection
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.models import Span, ToolCall
from tests.factories import make_key
from tests.otlp_builders import agent_with_tools, json_bytes, json_request, json_span, sdk_spans


def tool_spans():
    def build(tracer):
        agent_with_tools(
            tracer,
            tools=[
                {"name": "search_kb"},
                {"name": "create_ticket", "attributes": {"http.response.status_code": 403}, "error": PermissionError("scope tickets:write missing")},
            ],
        )

    return sdk_spans(build, service="helpdesk-agent")


def test_the_official_python_exporter_with_gzip_lands_every_span_once(live_url):
    _, key = make_key()
    exporter = OTLPSpanExporter(
        endpoint=f"{live_url}/v1/traces", headers={"Authorization": f"Bearer {key}"}, compression=Compression.Gzip
    )
    spans = tool_spans()

    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert exporter.export(spans) == SpanExportResult.SUCCESS  # a resend after a lost response

    assert Span.objects.count() == len(spans) == 4
    calls = {call.tool: call for call in ToolCall.objects.all()}
    assert calls["search_kb"].ok
    assert (calls["create_ticket"].error_class, calls["create_ticket"].agent) == ("permission", "support")
    exporter.shutdown()


def test_the_exporter_is_refused_with_a_wrong_key(live_url):
    make_key()
    exporter = OTLPSpanExporter(endpoint=f"{live_url}/v1/traces", headers={"Authorization": "Bearer tw_wrong"})

    assert exporter.export(tool_spans()) == SpanExportResult.FAILURE
    assert Span.objects.count() == 0
    exporter.shutdown()


def post_chunked(url: str, body: bytes, headers: dict, chunk: int = 1000) -> tuple[int, bytes, dict]:
    """POST with Transfer-Encoding: chunked and no Content-Length, as the Node exporter does."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    pieces = (body[i : i + chunk] for i in range(0, len(body), chunk))
    conn.request("POST", parts.path, body=pieces, headers={**headers, "Transfer-Encoding": "chunked"}, encode_chunked=True)
    response = conn.getresponse()
    result = response.status, response.read(), dict(response.getheaders())
    conn.close()
    return result


def test_a_chunked_json_body_without_content_length_is_read_in_full(live_url):
    _, key = make_key()
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    spans = [
        json_span(trace, f"{i:016x}", "execute_tool lookup", attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "padding": "x" * 200})
        for i in range(1, 41)
    ]
    body = json_bytes(json_request([({"service.name": "node-agent"}, spans)]))
    assert len(body) > 10_000  # many chunks

    status, content, headers = post_chunked(
        f"{live_url}/v1/traces", body, {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    )

    assert status == 200, content
    assert headers["Content-Type"] == "application/json"
    assert json.loads(content) == {}
    assert Span.objects.count() == 40
    assert ToolCall.objects.count() == 40


@pytest.mark.postgres
def test_a_database_that_cannot_take_the_write_answers_503_with_retry_after(live_url, settings):
    import psycopg

    settings.INGEST_STATEMENT_TIMEOUT_MS = 300
    _, key = make_key()
    body = json_bytes(json_request([({"service.name": "s"}, [json_span("4bf92f3577b34da6a3ce929d0e0e4737", "0000000000000001", "chat")])]))
    # Warm up the partitions so the lock below is what blocks.
    post_chunked(f"{live_url}/v1/traces", body, {"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    Span.objects.all().delete()
    params = connection.get_connection_params()
    blocker = psycopg.connect(**{k: v for k, v in params.items() if k in ("host", "port", "user", "dbname", "password")})
    try:
        blocker.execute("LOCK TABLE ingest_span IN ACCESS EXCLUSIVE MODE")
        status, content, headers = post_chunked(
            f"{live_url}/v1/traces", body, {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        )
    finally:
        blocker.rollback()
        blocker.close()

    assert status == 503
    assert int(headers["Retry-After"]) <= 5
    assert "retry" in json.loads(content)["message"]
    assert Span.objects.count() == 0


def test_a_write_slower_than_allowed_is_rolled_back_and_answered_503(live_url, monkeypatch):
    from ingest import services

    # The rollup job trusts every stored call to have committed within MAX_WRITE of its received time.
    monkeypatch.setattr(services, "MAX_WRITE", services.dt.timedelta(0))
    _, key = make_key()
    body = json_bytes(json_request([({"service.name": "s"}, [json_span("4bf92f3577b34da6a3ce929d0e0e4737", "0000000000000001", "chat")])]))

    status, content, headers = post_chunked(
        f"{live_url}/v1/traces", body, {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    )

    assert status == 503
    assert "retry" in json.loads(content)["message"]
    assert Span.objects.count() == 0


@pytest.fixture
def gunicorn_url(transactional_db, tmp_path):
    """The production server, as a subprocess on the test database (PostgreSQL only: it must share it)."""
    import os
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    database = connection.settings_dict
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "DATABASE_CONN_MAX_AGE": "0",
    }
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "config.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.postgres
def test_gunicorn_in_production_reads_a_chunked_body_in_full(gunicorn_url):
    _, key = make_key()
    spans = [json_span("4bf92f3577b34da6a3ce929d0e0e4738", f"{i:016x}", "chat", attrs={"pad": "y" * 300}) for i in range(1, 31)]
    body = json_bytes(json_request([({"service.name": "node-agent"}, spans)]))

    status, content, _ = post_chunked(
        f"{gunicorn_url}/v1/traces", body, {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    )

    assert status == 200, content
    assert Span.objects.count() == 30
