"""The OTLP/gRPC receiver (ingest/grpc_edge.py) on a real server: official exporters and raw stubs.

The server runs in this process on a free loopback port, on the test database, as
`manage.py grpcserver` runs it; `transactional_db` because its threads commit on their own
connections. The official Python exporter (opentelemetry-exporter-otlp-proto-grpc) and the
official Node exporter (@opentelemetry/exporter-trace-otlp-grpc, installed once per session
from tests/ingest/node_grpc/ into a cache outside the repository) are used unmodified; raw
stubs check each status rule of docs/contract/ingest-grpc.md.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from django.db import OperationalError, connection
from google.rpc import code_pb2, error_details_pb2
from grpc_status import rpc_status
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest import grpc_edge, partitions, services
from ingest.limits import IngestLimits
from ingest.models import ApiKey, IngestStat, Span, ToolCall
from tests.conftest import require_service
from tests.factories import make_key, make_project
from tests.otlp_builders import agent_with_tools, sdk_spans

ROOT = Path(__file__).resolve().parents[2]
NODE_PROJECT = Path(__file__).resolve().parent / "node_grpc"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


# --- the server -------------------------------------------------------------------------------


@pytest.fixture
def start_server(transactional_db):
    """start_server(limits=None) -> "127.0.0.1:<port>" of a fresh in-process gRPC receiver."""
    servers = []

    def start(limits: IngestLimits | None = None) -> str:
        server = grpc_edge.create_server(threads=4, limits=limits)
        port = grpc_edge.bind(server, "127.0.0.1", 0)
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    partitions.forget_cache()
    yield start
    for server in servers:
        server.stop(None).wait()
    if connection.vendor == "postgresql":
        # The server's threads hold their own connections; the test database must be droppable.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
    partitions.forget_cache()


@pytest.fixture
def target(start_server) -> str:
    return start_server()


@pytest.fixture
def export(target):
    """export(body_bytes, key=..., **call options) through a raw channel: bytes in, the call's answer out."""
    channel = grpc.insecure_channel(target)
    call = channel.unary_unary(EXPORT)

    def send(body: bytes, key: str | None, *, metadata: tuple = (), compression=None):
        md = (("authorization", f"Bearer {key}"),) if key is not None else ()
        return call(body, metadata=md + tuple(metadata), compression=compression, timeout=10)

    yield send
    channel.close()


def refused(excinfo) -> tuple[grpc.StatusCode, str]:
    return excinfo.value.code(), excinfo.value.details()


def stored() -> tuple[int, int]:
    return Span.objects.count(), ToolCall.objects.count()


def tool_spans(service: str = "helpdesk-agent", padding: int = 0):
    def build(tracer):
        agent_with_tools(
            tracer,
            tools=[
                {"name": "search_kb", "attributes": {"gen_ai.tool.call.arguments": "q" * padding} if padding else {}},
                {"name": "create_ticket", "attributes": {"http.response.status_code": 403}, "error": PermissionError("scope tickets:write missing")},
            ],
        )

    return sdk_spans(build, service=service)


def request_bytes(padding: int = 0) -> bytes:
    return encode_spans(tool_spans(padding=padding)).SerializeToString()


# --- (a) the official Python exporter ------------------------------------------------------------


def test_the_official_python_grpc_exporter_with_gzip_lands_every_span_once(target):
    _, key = make_key()
    exporter = OTLPSpanExporter(endpoint=target, insecure=True, headers={"authorization": f"Bearer {key}"}, compression=grpc.Compression.Gzip)
    spans = tool_spans()

    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert exporter.export(spans) == SpanExportResult.SUCCESS  # a resend after a lost answer

    assert Span.objects.count() == len(spans) == 4
    calls = {call.tool: call for call in ToolCall.objects.all()}
    assert calls["search_kb"].ok
    assert (calls["create_ticket"].ok, calls["create_ticket"].error_class, calls["create_ticket"].agent) == (False, "permission", "support")
    exporter.shutdown()


def test_the_zero_code_configuration_from_the_readme_works(target, monkeypatch):
    """What `opentelemetry-instrument` users (and Claude Code's monitoring docs) set: variables only."""
    _, key = make_key()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://{target}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer {key}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    exporter = OTLPSpanExporter()

    assert exporter.export(tool_spans()) == SpanExportResult.SUCCESS
    assert stored() == (4, 2)
    exporter.shutdown()


def test_the_python_exporter_gives_up_at_once_on_a_wrong_key(target):
    make_key()
    exporter = OTLPSpanExporter(endpoint=target, insecure=True, headers={"authorization": "Bearer tw_wrong"})

    started = time.monotonic()
    assert exporter.export(tool_spans()) == SpanExportResult.FAILURE
    assert time.monotonic() - started < 2  # UNAUTHENTICATED is not retried
    assert stored() == (0, 0)
    exporter.shutdown()


def test_the_python_exporter_waits_the_retry_delay_and_resends_when_the_database_was_busy(target, monkeypatch, settings):
    settings.INGEST_RETRY_AFTER_SECONDS = 1
    _, key = make_key()
    real = services.spans_ingest
    calls = []

    def busy_once(**kwargs):
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise OperationalError("could not obtain lock on relation ingest_span")
        return real(**kwargs)

    monkeypatch.setattr(services, "spans_ingest", busy_once)
    exporter = OTLPSpanExporter(endpoint=target, insecure=True, headers={"authorization": f"Bearer {key}"})

    assert exporter.export(tool_spans()) == SpanExportResult.SUCCESS
    assert len(calls) == 2
    assert calls[1] - calls[0] >= 0.9  # RetryInfo's delay, not the exporter's own first backoff (about 1 s ± 20 %)
    assert stored() == (4, 2)
    exporter.shutdown()


# --- (b) the official Node exporter -------------------------------------------------------------


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """The Node sender's dependencies, installed once per package.json/lock into a cache outside the repo."""
    node, npm = shutil.which("node"), shutil.which("npm")
    require_service(bool(node and npm), "needs Node.js 18+ (`node` and `npm` on PATH; apt-get install nodejs npm)")
    sources = [NODE_PROJECT / "package.json", NODE_PROJECT / "package-lock.json"]
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in sources)).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolwatch" / f"node-grpc-{digest}"
    if not (cache / "node_modules" / ".installed").exists():
        staging = cache.with_name(f"{cache.name}.tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for path in sources:
            shutil.copy(path, staging / path.name)
        result = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=staging, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, f"npm install failed:\n{result.stdout}\n{result.stderr}"
        (staging / "node_modules" / ".installed").touch()
        try:
            staging.rename(cache)  # atomic: a concurrent session either wins or finds it done
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    return cache / "node_modules"


def node_send(node_modules: Path, target: str, key: str) -> dict:
    env = {
        **os.environ,
        "NODE_PATH": str(node_modules),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{target}",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer {key}",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
        "OTEL_SERVICE_NAME": "node-agent",
    }
    result = subprocess.run(["node", str(NODE_PROJECT / "send.js")], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_official_node_grpc_exporter_lands_its_spans_and_tool_calls(node_modules, target):
    _, key = make_key()

    outcome = node_send(node_modules, target, key)

    assert outcome["code"] == 0, outcome  # ExportResultCode.SUCCESS
    assert stored() == (outcome["spans"], 2) == (3, 2)
    assert set(Span.objects.values_list("trace_id", flat=True)) == {outcome["traceId"]}
    assert set(Span.objects.values_list("service", flat=True)) == {"node-agent"}
    calls = {call.tool: call for call in ToolCall.objects.all()}
    assert calls["search_docs"].ok and calls["search_docs"].agent == "planner"
    assert (calls["create_issue"].ok, calls["create_issue"].error_class) == (False, "transient")


def test_the_node_exporter_is_told_its_key_is_not_recognised(node_modules, target):
    make_key()

    outcome = node_send(node_modules, target, "tw_wrong")

    assert outcome["code"] == 1, outcome  # ExportResultCode.FAILED
    assert "UNAUTHENTICATED" in outcome["error"] and "not recognised" in outcome["error"]
    assert stored() == (0, 0)


# --- (c) the status rules, with raw stubs -----------------------------------------------------------


def test_every_span_stored_is_ok_with_an_empty_response(export):
    project, key = make_key()

    answer = export(request_bytes(), key)

    assert answer == b""  # an empty ExportTraceServiceResponse: partial_success unset
    assert stored() == (4, 2)
    assert IngestStat.objects.get(project=project, outcome="accepted").count == 4
    assert ApiKey.objects.get(project=project).last_used_at is not None


def test_the_generated_stub_reads_the_answer_as_an_export_response(target):
    _, key = make_key()
    stub = trace_service_pb2_grpc.TraceServiceStub(grpc.insecure_channel(target))

    answer = stub.Export(ExportTraceServiceRequest.FromString(request_bytes()), metadata=[("authorization", f"Bearer {key}")], timeout=10)

    assert answer == ExportTraceServiceResponse() and not answer.HasField("partial_success")


def test_an_empty_request_succeeds(export):
    _, key = make_key()

    assert export(b"", key) == b""
    assert stored() == (0, 0)


def test_the_same_request_twice_is_stored_once(export):
    project, key = make_key()
    body = request_bytes()

    assert export(body, key) == b""
    assert export(body, key) == b""

    assert stored() == (4, 2)
    assert IngestStat.objects.get(project=project, outcome="duplicate").count == 4


def test_a_gzip_compressed_request_is_stored(export):
    _, key = make_key()

    assert export(request_bytes(), key, compression=grpc.Compression.Gzip) == b""
    assert stored() == (4, 2)


def test_a_missing_key_is_unauthenticated(export):
    make_key()

    with pytest.raises(grpc.RpcError) as excinfo:
        export(request_bytes(), None)

    code, message = refused(excinfo)
    assert code == grpc.StatusCode.UNAUTHENTICATED
    assert "authorization" in message
    assert stored() == (0, 0)


def test_an_unknown_key_is_unauthenticated(export):
    make_key()

    with pytest.raises(grpc.RpcError) as excinfo:
        export(request_bytes(), "tw_not-a-real-key")

    assert refused(excinfo) == (grpc.StatusCode.UNAUTHENTICATED, "API key not recognised")
    status = rpc_status.from_call(excinfo.value)
    assert status.code == code_pb2.UNAUTHENTICATED and status.message == "API key not recognised"


def test_a_revoked_key_is_permission_denied(export):
    project, key = make_key()
    services.api_key_revoke(key=ApiKey.objects.get(project=project))

    with pytest.raises(grpc.RpcError) as excinfo:
        export(request_bytes(), key)

    code, message = refused(excinfo)
    assert code == grpc.StatusCode.PERMISSION_DENIED and "revoked" in message
    assert stored() == (0, 0)


def test_a_key_of_another_project_than_x_toolwatch_project_is_permission_denied(export):
    make_project("Target", slug="target")
    _, key = make_key()

    with pytest.raises(grpc.RpcError) as excinfo:
        export(request_bytes(), key, metadata=(("x-toolwatch-project", "target"),))

    code, message = refused(excinfo)
    assert code == grpc.StatusCode.PERMISSION_DENIED and "another project" in message
    assert stored() == (0, 0)


def test_the_right_x_toolwatch_project_is_accepted(export):
    project, key = make_key()

    assert export(request_bytes(), key, metadata=(("x-toolwatch-project", project.slug),)) == b""
    assert stored() == (4, 2)


def test_garbage_is_invalid_argument_naming_the_problem_and_counted(export):
    project, key = make_key()

    with pytest.raises(grpc.RpcError) as excinfo:
        export(b"\xff\xfe garbage", key)

    code, message = refused(excinfo)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "ExportTraceServiceRequest protobuf" in message
    assert rpc_status.from_call(excinfo.value).code == code_pb2.INVALID_ARGUMENT
    assert stored() == (0, 0)
    refusal = IngestStat.objects.get(project=project, outcome="refused")
    assert (refusal.reason, refusal.count) == ("gRPC INVALID_ARGUMENT", 1)


def test_a_span_outside_retention_is_a_partial_success(export):
    _, key = make_key()
    request = encode_spans(tool_spans())
    old = request.resource_spans[0].scope_spans[0].spans.add()
    old.CopyFrom(request.resource_spans[0].scope_spans[0].spans[0])
    old.span_id = b"\x00\x00\x00\x00\x00\x00\x00\x09"
    old.start_time_unix_nano = 1_000_000_000  # 1970: older than any retention
    old.end_time_unix_nano = 2_000_000_000

    answer = ExportTraceServiceResponse.FromString(export(request.SerializeToString(), key))

    assert answer.partial_success.rejected_spans == 1
    assert "retention" in answer.partial_success.error_message
    assert stored() == (4, 2)


def test_a_trace_id_of_the_wrong_length_is_a_rejected_span_as_over_http(export):
    _, key = make_key()
    request = encode_spans(tool_spans())
    request.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x01" * 15

    answer = ExportTraceServiceResponse.FromString(export(request.SerializeToString(), key))

    assert answer.partial_success.rejected_spans == 1
    assert "invalid trace id" in answer.partial_success.error_message
    assert Span.objects.count() == 3


def test_a_database_that_cannot_take_the_write_is_unavailable_with_retry_info(export, monkeypatch, settings):
    settings.INGEST_RETRY_AFTER_SECONDS = 3
    _, key = make_key()

    def unavailable(**kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(services, "spans_ingest", unavailable)

    with pytest.raises(grpc.RpcError) as excinfo:
        export(request_bytes(), key)

    code, message = refused(excinfo)
    assert code == grpc.StatusCode.UNAVAILABLE and "retry" in message
    status = rpc_status.from_call(excinfo.value)  # grpc-status-details-bin: what the Go and .NET exporters and the Collector read
    retry = error_details_pb2.RetryInfo()
    assert [detail.Unpack(retry) for detail in status.details] == [True]
    assert (retry.retry_delay.seconds, retry.retry_delay.nanos) == (3, 0)
    trailers = dict(excinfo.value.trailing_metadata())  # what the Python exporter reads
    assert error_details_pb2.RetryInfo.FromString(trailers[grpc_edge.RETRY_INFO_TRAILER]) == retry
    assert stored() == (0, 0)
    assert not IngestStat.objects.filter(outcome="refused").exists()  # a 5xx-class answer is not a refusal


def test_too_many_spans_is_resource_exhausted_without_retry_info(export, settings):
    project, key = make_key()
    settings.INGEST_LIMITS = IngestLimits(max_spans_per_request=2)

    with pytest.raises(grpc.RpcError) as excinfo:
        export(request_bytes(), key)

    code, message = refused(excinfo)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "4 spans" in message and "limit of 2" in message
    assert grpc_edge.RETRY_INFO_TRAILER not in dict(excinfo.value.trailing_metadata())
    assert not rpc_status.from_call(excinfo.value).details
    assert stored() == (0, 0)
    assert IngestStat.objects.get(project=project, outcome="refused").reason == "gRPC RESOURCE_EXHAUSTED"


def test_a_message_over_the_size_limit_is_refused_by_grpc_itself(start_server):
    _, key = make_key()
    target = start_server(IngestLimits(max_body_bytes=4096, max_decompressed_bytes=4096))
    call = grpc.insecure_channel(target).unary_unary(EXPORT)
    body = request_bytes(padding=6000)
    assert len(body) > 4096

    with pytest.raises(grpc.RpcError) as excinfo:
        call(body, metadata=[("authorization", f"Bearer {key}")], timeout=10)

    code, message = refused(excinfo)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in message
    assert grpc_edge.RETRY_INFO_TRAILER not in dict(excinfo.value.trailing_metadata() or ())
    assert stored() == (0, 0)


def test_a_gzip_bomb_is_refused_after_decompression(start_server):
    _, key = make_key()
    target = start_server(IngestLimits(max_body_bytes=64 * 1024, max_decompressed_bytes=64 * 1024))
    call = grpc.insecure_channel(target).unary_unary(EXPORT)
    bomb = b"\0" * (4 * 1024 * 1024)  # 4 MiB of zeros: a few KiB on the wire
    assert len(gzip.compress(bomb)) < 64 * 1024

    with pytest.raises(grpc.RpcError) as excinfo:
        call(bomb, metadata=[("authorization", f"Bearer {key}")], compression=grpc.Compression.Gzip, timeout=10)

    assert excinfo.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "decompressed" in excinfo.value.details().lower()


def test_the_decompressed_limit_applies_when_it_is_below_the_wire_limit(export, settings):
    project, key = make_key()
    settings.INGEST_LIMITS = IngestLimits(max_decompressed_bytes=4096)

    with pytest.raises(grpc.RpcError) as excinfo:
        export(request_bytes(padding=6000), key, compression=grpc.Compression.Gzip)

    code, message = refused(excinfo)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "limit of 4096 bytes" in message
    assert stored() == (0, 0)
    assert IngestStat.objects.get(project=project, outcome="refused").reason == "gRPC RESOURCE_EXHAUSTED"


def test_an_unexpected_error_is_internal_without_internals(export, monkeypatch):
    _, key = make_key()

    def broken(**kwargs):
        raise KeyError("secret internal detail")

    monkeypatch.setattr(services, "spans_ingest", broken)

    with pytest.raises(grpc.RpcError) as excinfo:
        export(request_bytes(), key)

    code, message = refused(excinfo)
    assert code == grpc.StatusCode.INTERNAL and "secret" not in message


def test_status_messages_fit_in_trailers():
    status = grpc_edge.status_for(400, "x" * 100_000)

    assert len(status.details.encode()) <= grpc_edge.MAX_STATUS_MESSAGE_BYTES
    assert sum(len(value) for _, value in status.trailing_metadata) < 4096


# --- logs and metrics, on the same server -------------------------------------------------------------

LOGS_EXPORT = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
METRICS_EXPORT = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"


def sdk_log_records(*bodies: str) -> list:
    """Log records as the official SDK hands them to its exporters."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({"service.name": "claude-code"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    logger = provider.get_logger("com.anthropic.claude_code.events", "2.1.0")
    for body in bodies:
        logger.emit(body=body, event_name="claude_code.user_prompt", attributes={"prompt_length": len(body)})
    provider.shutdown()
    return list(memory.get_finished_logs())


def test_the_official_python_grpc_log_exporter_lands_its_records_once(target):
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs.export import LogRecordExportResult

    from ingest.models import LogRecord

    _, key = make_key()
    exporter = OTLPLogExporter(endpoint=target, insecure=True, headers={"authorization": f"Bearer {key}"}, compression=grpc.Compression.Gzip)
    records = sdk_log_records("fix the flaky test", "and then run it")

    assert exporter.export(records) == LogRecordExportResult.SUCCESS
    assert exporter.export(records) == LogRecordExportResult.SUCCESS  # a resend: stored once

    assert LogRecord.objects.count() == 2
    assert set(LogRecord.objects.values_list("event_name", flat=True)) == {"claude_code.user_prompt"}
    exporter.shutdown()


def test_a_log_record_outside_retention_is_a_partial_success(target):
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
        ExportLogsServiceResponse,
    )
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord as LogRecordProto

    _, key = make_key()
    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    scope.log_records.add().CopyFrom(LogRecordProto(time_unix_nano=time.time_ns() - 10**9, severity_number=9))
    scope.log_records[0].body.string_value = "kept"
    scope.log_records.add().CopyFrom(LogRecordProto(time_unix_nano=10**9, severity_number=9))  # 1970
    scope.log_records[1].body.string_value = "too old"
    call = grpc.insecure_channel(target).unary_unary(LOGS_EXPORT)

    answer = ExportLogsServiceResponse.FromString(call(request.SerializeToString(), metadata=[("authorization", f"Bearer {key}")], timeout=10))

    assert answer.partial_success.rejected_log_records == 1
    assert "retention" in answer.partial_success.error_message


def test_garbage_on_the_logs_service_is_invalid_argument(target):
    _, key = make_key()
    call = grpc.insecure_channel(target).unary_unary(LOGS_EXPORT)

    with pytest.raises(grpc.RpcError) as excinfo:
        call(b"\xff\xfe garbage", metadata=[("authorization", f"Bearer {key}")], timeout=10)

    assert excinfo.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "ExportLogsServiceRequest" in excinfo.value.details()


def test_metrics_are_answered_as_dropped_not_stored(target):
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
        ExportMetricsServiceResponse,
    )

    project, key = make_key()
    request = ExportMetricsServiceRequest()
    metric = request.resource_metrics.add().scope_metrics.add().metrics.add(name="claude_code.token.usage")
    metric.sum.data_points.add(as_int=1200, time_unix_nano=time.time_ns())
    metric.sum.data_points.add(as_int=300, time_unix_nano=time.time_ns())
    call = grpc.insecure_channel(target).unary_unary(METRICS_EXPORT)

    answer = ExportMetricsServiceResponse.FromString(call(request.SerializeToString(), metadata=[("authorization", f"Bearer {key}")], timeout=10))

    assert answer.partial_success.rejected_data_points == 2  # a partial success: not retried
    assert "dropped" in answer.partial_success.error_message
    assert IngestStat.objects.get(project=project, outcome="rejected").count == 2


def test_the_other_services_are_unimplemented(target):
    call = grpc.insecure_channel(target).unary_unary("/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export")

    with pytest.raises(grpc.RpcError) as excinfo:
        call(b"", timeout=10)

    assert excinfo.value.code() == grpc.StatusCode.UNIMPLEMENTED


# --- the management command ------------------------------------------------------------------------


def start_command(*args: str, env: dict) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "manage.py", "grpcserver", "--host", "127.0.0.1", *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = process.stdout.readline()
    assert "OTLP/gRPC receiver on 127.0.0.1:" in line, line + process.stderr.read()
    return process, line.split()[3]


def test_grpcserver_serves_and_stops_gracefully_on_sigterm(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'unused.sqlite3'}"}
    process, address = start_command("--port", "0", env=env)
    try:
        channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(channel).result(timeout=10)
        channel.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_grpcserver_with_worker_processes_stores_what_it_answers(tmp_path):
    """--workers 2: requests handled in spawned worker processes, on a database of their own here."""
    database = tmp_path / "workers.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}"}
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=120)
    made = subprocess.run([*manage, "createproject", "Workers"], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    key = made.stdout.strip().splitlines()[-1]
    process, address = start_command("--port", "0", "--workers", "2", env=env)
    try:
        for index in range(4):
            exporter = OTLPSpanExporter(endpoint=address, insecure=True, headers={"authorization": f"Bearer {key}"})
            assert exporter.export(tool_spans(service=f"agent-{index}")) == SpanExportResult.SUCCESS
            exporter.shutdown()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    import sqlite3

    with sqlite3.connect(database) as db:
        assert db.execute("SELECT count(*) FROM ingest_span").fetchone() == (16,)
        assert db.execute("SELECT count(*) FROM ingest_toolcall").fetchone() == (8,)


def test_a_worker_that_dies_is_replaced_and_its_request_answered_unavailable(settings):
    settings.INGEST_RETRY_AFTER_SECONDS = 2
    pool = grpc_edge.WorkerPool(1)
    pool.start()
    try:
        (pid,) = list(pool._executor._processes)
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.3)

        lost = pool(grpc_edge.TRACES, grpc_edge.Message(b""), {})
        answered = pool(grpc_edge.TRACES, grpc_edge.Message(b""), {})  # by a new worker (no key: no database needed)

        assert lost.code == grpc.StatusCode.UNAVAILABLE and grpc_edge.RETRY_INFO_TRAILER in dict(lost.trailing_metadata)
        assert answered.code == grpc.StatusCode.UNAUTHENTICATED
    finally:
        pool.shutdown()


@pytest.mark.postgres
def test_grpcserver_workers_store_what_they_answer_on_postgres(transactional_db):
    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "DATABASE_CONN_MAX_AGE": "0",
    }
    _, key = make_key()
    process, address = start_command("--port", "0", "--workers", "2", env=env)
    try:
        exporters = [OTLPSpanExporter(endpoint=address, insecure=True, headers={"authorization": f"Bearer {key}"}) for _ in range(4)]
        for index, exporter in enumerate(exporters):
            assert exporter.export(tool_spans(service=f"agent-{index}")) == SpanExportResult.SUCCESS
            exporter.shutdown()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert stored() == (16, 8)
