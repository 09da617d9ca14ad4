"""POST /v1/logs: the official Python log exporter, the OTLP answers, storage, and what log records do.

Agents' tool events become tool calls (rolled up like span-based ones); evidence joins
stored tool spans whichever arrives first; a span and an event of one tool use count once.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from unittest import mock

import pytest
from django.conf import settings
from django.db import OperationalError
from django.test import override_settings
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, LogRecordExportResult, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from dashboard.models import ToolRollup
from dashboard.rollups.refresh import rollups_refresh
from ingest import log_events, otlp, partitions, storage
from ingest.limits import IngestLimits
from ingest.models import ChangedBucket, IngestStat, LogRecord, Project, ToolCall
from ingest.retention import retention_apply
from tests.factories import make_key
from tests.otlp_builders import json_bytes, json_request, json_span

PB = "application/x-protobuf"
JSON = "application/json"
TRACE = "5b8efff798038103d269b633813fc60c"
TOOL_SPAN = "eee19b7ec3c1b174"
CC_SCOPE = log_events.CLAUDE_CODE_SCOPE


# --- building requests with the official SDK ---------------------------------------------------


def log_batch(emit, *, service: str = "claude-code", scope: str = CC_SCOPE) -> list:
    """The ReadableLogRecords the SDK's LoggerProvider makes of `emit(logger)`."""
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({"service.name": service, "deployment.environment.name": "dev"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    emit(provider.get_logger(scope, "2.1.0"))
    provider.force_flush()
    batch = list(exporter.get_finished_logs())
    provider.shutdown()
    return batch


def in_span(trace_id: str = TRACE, span_id: str = TOOL_SPAN):
    context = SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=False, trace_flags=TraceFlags(1))
    return trace.set_span_in_context(NonRecordingSpan(context))


def ago(seconds: float) -> int:
    return time.time_ns() - int(seconds * 1e9)


def tool_result(logger, *, tool_use_id="toolu_01", success=True, session="sess-1", context=None, at=None, **extra):
    attributes = {
        "event.name": "tool_result", "event.timestamp": "2026-01-01T00:00:00Z", "session.id": session,
        "tool_name": "Bash", "tool_use_id": tool_use_id, "success": "true" if success else "false",
        "duration_ms": "1500", "decision_type": "accept", "decision_source": "config", **extra,
    }  # fmt: skip
    logger.emit(body="claude_code.tool_result", attributes=attributes, timestamp=at or ago(30), context=context)


def pb(batch) -> bytes:
    return encode_logs(batch).SerializeToString()


def as_json(batch) -> dict:
    """OTLP/JSON of a batch: proto3 JSON with the trace and span ids in hex, as OTLP/JSON wants."""
    document = json_format.MessageToDict(encode_logs(batch))
    for rl in document.get("resourceLogs", []):
        for sl in rl.get("scopeLogs", []):
            for record in sl.get("logRecords", []):
                for name in ("traceId", "spanId"):
                    if name in record:
                        record[name] = base64.b64decode(record[name]).hex()
    return document


def post(client, body: bytes, key: str | None, content_type: str = PB, path: str = "/v1/logs", **headers):
    if key is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    return client.generic("POST", path, body, content_type=content_type, **headers)


def status_message(response) -> str:
    if response["Content-Type"].startswith(JSON):
        return json.loads(response.content)["message"]
    status = status_pb2.Status()
    status.ParseFromString(response.content)
    return status.message


def post_spans(client, key: str, spans: list[dict]):
    response = client.generic("POST", "/v1/traces", json_bytes(json_request([({"service.name": "claude-code"}, spans)])),
                              content_type=JSON, HTTP_AUTHORIZATION=f"Bearer {key}")  # fmt: skip
    assert response.status_code == 200, response.content
    return response


@pytest.fixture(autouse=True)
def _fresh_caches():
    partitions.forget_cache()
    storage.forget_resources()
    yield
    partitions.forget_cache()
    storage.forget_resources()


@pytest.fixture
def project_key(db):
    return make_key()


# --- the official exporter ---------------------------------------------------------------------



def test_the_official_python_log_exporter_lands_every_record_once(live_url):
    project, key = make_key()

    def emit(logger):
        logger.emit(body="user asked for the weather", severity_text="INFO", attributes={"session.id": "sess-1"})
        logger.emit(body="lookup failed", severity_text="ERROR", context=in_span(),
                    attributes={"exception.type": "TimeoutError", "exception.message": "read timed out"})  # fmt: skip
        tool_result(logger, success=False, error_type="ShellError", error="command timed out after 120s")

    batch = log_batch(emit)
    exporter = OTLPLogExporter(endpoint=f"{live_url}/v1/logs", headers={"Authorization": f"Bearer {key}"}, compression=Compression.Gzip)

    assert exporter.export(batch) == LogRecordExportResult.SUCCESS
    assert exporter.export(batch) == LogRecordExportResult.SUCCESS  # a resend after a lost response
    exporter.shutdown()

    assert LogRecord.objects.filter(project=project).count() == 3
    linked = LogRecord.objects.get(project=project, severity_text="ERROR")
    assert (linked.trace_id, linked.span_id, linked.body) == (TRACE, TOOL_SPAN, "lookup failed")
    result = LogRecord.objects.get(project=project, event_name="claude_code.tool_result")
    assert result.call_id == "toolu_01" and result.scope_name == CC_SCOPE
    call = ToolCall.objects.get(project=project)
    assert (call.tool, call.ok, call.error_class, call.convention) == ("Bash", False, "transient", "claude_code.tool_result")
    stats = {(row.outcome, row.reason): row.count for row in IngestStat.objects.filter(project=project)}
    assert stats == {("accepted", "log records"): 3, ("duplicate", "log records"): 3}


def test_the_exporter_is_refused_with_a_wrong_key(live_url):
    make_key()
    exporter = OTLPLogExporter(endpoint=f"{live_url}/v1/logs", headers={"Authorization": "Bearer tw_wrong"})

    assert exporter.export(log_batch(lambda logger: logger.emit(body="x"))) == LogRecordExportResult.FAILURE
    assert LogRecord.objects.count() == 0
    exporter.shutdown()


# --- answers per OTLP ----------------------------------------------------------------------------


def test_protobuf_and_json_are_answered_in_their_own_encoding_with_and_without_a_slash(client, project_key):
    project, key = project_key
    batch = log_batch(lambda logger: logger.emit(body="hello", attributes={"n": 1}))

    response = post(client, pb(batch), key)
    assert (response.status_code, response["Content-Type"], response.content) == (200, PB, b"")
    response = post(client, json_bytes(as_json(batch)), key, JSON, path="/v1/logs/")
    assert (response.status_code, response["Content-Type"], response.content) == (200, JSON, b"{}")
    assert LogRecord.objects.filter(project=project).count() == 1  # the same record in both encodings


def test_otlp_json_hex_ids_string_int64_and_unknown_fields_are_read(client, project_key):
    project, key = project_key
    document = {"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]},
        "futureField": 1,
        "scopeLogs": [{"scope": {"name": "app"}, "logRecords": [{
            "timeUnixNano": str(ago(5)), "severityNumber": 17, "severityText": "ERROR", "traceId": TRACE.upper(),
            "spanId": TOOL_SPAN, "eventName": "app.failure", "body": {"kvlistValue": {"values": [
                {"key": "detail", "value": {"stringValue": "it broke"}}]}},
            "attributes": [{"key": "attempt", "value": {"intValue": "3"}}], "someNewField": True}]}]}]}  # fmt: skip

    response = post(client, json_bytes(document), key, JSON)

    assert response.status_code == 200, response.content
    record = LogRecord.objects.get(project=project)
    assert (record.trace_id, record.span_id, record.event_name) == (TRACE, TOOL_SPAN, "app.failure")
    assert (record.severity_number, record.body, record.attributes) == (17, {"detail": "it broke"}, {"attempt": 3})
    assert record.resource.attributes == {"service.name": "agent"}


@pytest.mark.parametrize(
    ("body", "content_type", "status", "words"),
    [
        (b"\x0a\xff\xff\xff", PB, 400, "not a valid ExportLogsServiceRequest protobuf"),
        (b"{not json", JSON, 400, "not valid JSON"),
        (b'{"resourceLogs": {}}', JSON, 400, "resourceLogs: expected an array"),
        (b"hello", "text/plain", 415, "unsupported media type 'text/plain'"),
    ],
)
def test_bad_input_is_refused_naming_the_problem_and_stores_nothing(client, project_key, body, content_type, status, words):
    project, key = project_key

    response = post(client, body, key, content_type)

    assert response.status_code == status
    assert words in status_message(response)
    assert LogRecord.objects.count() == 0
    assert IngestStat.objects.filter(project=project, outcome="refused").exists()


def test_a_json_id_that_is_not_hex_is_a_400_naming_its_field(client, project_key):
    _, key = project_key
    document = as_json(log_batch(lambda logger: logger.emit(body="x", context=in_span())))
    document["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["spanId"] = "not-a-span-id!!!"

    response = post(client, json_bytes(document), key, JSON)

    body = json.loads(response.content)
    assert response.status_code == 400
    assert body["message"].startswith("resourceLogs[0].scopeLogs[0].logRecords[0].spanId: expected 16 hex characters")
    assert body["details"][0]["fieldViolations"][0]["field"] == "resourceLogs[0].scopeLogs[0].logRecords[0].spanId"
    assert LogRecord.objects.count() == 0


def test_ids_of_the_wrong_length_reject_their_record_as_a_partial_success(client, project_key):
    project, key = project_key
    request = encode_logs(log_batch(lambda logger: (logger.emit(body="good"), logger.emit(body="bad", context=in_span()))))
    request.resource_logs[0].scope_logs[0].log_records[1].trace_id = b"\x01" * 15

    response = post(client, request.SerializeToString(), key)

    answer = ExportLogsServiceResponse()
    answer.ParseFromString(response.content)
    assert response.status_code == 200
    assert answer.partial_success.rejected_log_records == 1
    assert answer.partial_success.error_message == (
        "1 log record(s) rejected: invalid trace id (first: trace_id has 15 bytes (30 hex characters), expected 16 or none)"
    )
    assert list(LogRecord.objects.values_list("body", flat=True)) == ["good"]
    assert IngestStat.objects.get(project=project, outcome="rejected").reason == "log records: invalid trace id"


def test_more_records_than_the_limit_are_a_413(client, project_key):
    _, key = project_key
    batch = log_batch(lambda logger: [logger.emit(body=f"r{n}") for n in range(3)])

    with override_settings(INGEST_LIMITS=IngestLimits(max_log_records_per_request=2)):
        response = post(client, pb(batch), key)

    assert response.status_code == 413
    assert status_message(response) == "3 log records in one request exceeds the limit of 2"
    assert LogRecord.objects.count() == 0


def test_keys_and_methods_are_checked_as_for_traces(client, project_key):
    body = pb(log_batch(lambda logger: logger.emit(body="x")))
    assert post(client, body, None).status_code == 401
    assert post(client, body, "tw_unknown").status_code == 401
    response = client.get("/v1/logs")
    assert (response.status_code, response["Allow"]) == (405, "POST")
    assert "POST OTLP/HTTP logs here" in status_message(response)
    assert LogRecord.objects.count() == 0


def test_a_database_that_cannot_take_the_write_is_a_503_with_retry_after(client, project_key):
    _, key = project_key
    with mock.patch("ingest.services.logs_ingest", side_effect=OperationalError("down")):
        response = post(client, pb(log_batch(lambda logger: logger.emit(body="x"))), key)
    assert (response.status_code, response["Retry-After"]) == (503, str(settings.INGEST_RETRY_AFTER_SECONDS))


def test_secrets_are_redacted_and_long_values_cut_before_storage(client, project_key):
    _, key = project_key

    def emit(logger):
        logger.emit(body="calling with Authorization: Bearer abcdefghijklmnop1234", attributes={
            "api_key": "sk-live-123", "note": "x" * 20_000, "prompt": "my key is sk-abcdefghijklmnopqrstuvwxyz12"})  # fmt: skip

    assert post(client, pb(log_batch(emit)), key).status_code == 200
    record = LogRecord.objects.get()
    assert "abcdefghijklmnop1234" not in record.body and "[REDACTED]" in record.body
    assert record.attributes["api_key"] == "[REDACTED]"
    assert "sk-abcdefghijklmnopqrstuvwxyz12" not in record.attributes["prompt"]
    assert len(record.attributes["note"]) == settings.INGEST_LIMITS.max_attribute_value_chars
    assert "…[truncated" in record.attributes["note"]


def test_a_record_without_a_time_uses_its_observed_time_and_one_with_none_is_rejected(client, project_key):
    _, key = project_key
    observed = ago(10)
    request = encode_logs(log_batch(lambda logger: (logger.emit(body="a"), logger.emit(body="b"))))
    first, second = request.resource_logs[0].scope_logs[0].log_records
    first.time_unix_nano, first.observed_time_unix_nano = 0, observed
    second.time_unix_nano = second.observed_time_unix_nano = 0

    response = post(client, request.SerializeToString(), key)

    answer = ExportLogsServiceResponse.FromString(response.content)
    assert answer.partial_success.error_message == (
        "1 log record(s) rejected: missing time (first: time_unix_nano and observed_time_unix_nano are both 0)"
    )
    assert LogRecord.objects.get().time == storage.ns_to_datetime(observed)


def test_retention_removes_log_records(client, project_key):
    project, key = project_key
    assert post(client, pb(log_batch(lambda logger: logger.emit(body="old news"))), key).status_code == 200

    retention_apply(now=dt.datetime.now(dt.UTC) + dt.timedelta(days=project.retention_days + 1))

    assert LogRecord.objects.count() == 0


# --- agents' tool events become tool calls ---------------------------------------------------------


def test_a_claude_code_tool_result_becomes_a_classified_tool_call_that_rolls_up(client, project_key):
    project, key = project_key

    def emit(logger):
        tool_result(logger, tool_use_id="toolu_a", success=False, error_type="Error:ENOENT",
                    error="ENOENT: no such file or directory, open 'notes.md'")  # fmt: skip
        tool_result(logger, tool_use_id="toolu_b", success=True)

    assert post(client, pb(log_batch(emit)), key).status_code == 200

    calls = {call.call_id: call for call in ToolCall.objects.filter(project=project)}
    assert set(calls) == {"toolu_a", "toolu_b"}
    failed = calls["toolu_a"]
    assert (failed.tool, failed.ok, failed.error_class, failed.service, failed.environment) == ("Bash", False, "not_found", "claude-code", "dev")
    assert failed.latency_ms == pytest.approx(1500)
    assert failed.trace_id == calls["toolu_b"].trace_id == log_events.derived_trace_id("claude_code", "sess-1")
    assert ChangedBucket.objects.filter(project=project).exists()

    rollups_refresh(project_id=project.pk, everything=True)

    hourly = ToolRollup.objects.filter(project=project, resolution=ToolRollup.Resolution.HOUR, tool="Bash")
    assert sum(row.calls for row in hourly) == 2
    assert sum(row.errors for row in hourly) == 1
    assert sum(row.err_not_found for row in hourly) == 1


def test_a_replayed_tool_event_is_one_tool_call(client, project_key):
    project, key = project_key
    body = pb(log_batch(lambda logger: tool_result(logger, success=False, error="boom")))

    for _ in range(2):
        assert post(client, body, key).status_code == 200

    assert ToolCall.objects.filter(project=project).count() == 1
    assert LogRecord.objects.filter(project=project).count() == 1


def claude_tool_span(status_code: int = 0) -> dict:
    """Claude Code's `claude_code.tool` span of the tool use toolu_01 (traces beta)."""
    return json_span(TRACE, TOOL_SPAN, "claude_code.tool", start_ns=ago(32), duration_ns=1_600_000_000, status_code=status_code,
                     attrs={"span.type": "claude_code.tool", "tool_name": "Bash", "tool_use_id": "toolu_01",
                            "gen_ai.tool.call.id": "toolu_01", "duration_ms": 1600, "session.id": "sess-1"})  # fmt: skip


def failed_event_in_trace() -> bytes:
    # Records emitted during an interaction carry the interaction span's ids (Claude Code's docs).
    interaction = in_span(TRACE, "aaaaaaaaaaaaaaaa")
    return pb(log_batch(lambda logger: tool_result(logger, success=False, context=interaction, error_type="ShellError",
                                                   error="Command timed out after 2m")))  # fmt: skip


@pytest.mark.parametrize("span_first", [True, False], ids=["span-then-event", "event-then-span"])
def test_a_span_and_an_event_of_one_tool_use_count_once_whichever_comes_first(client, project_key, span_first):
    project, key = project_key
    if span_first:
        post_spans(client, key, [claude_tool_span()])
        assert post(client, failed_event_in_trace(), key).status_code == 200
    else:
        assert post(client, failed_event_in_trace(), key).status_code == 200
        assert ToolCall.objects.filter(project=project).count() == 1  # the event's own call, for now
        post_spans(client, key, [claude_tool_span()])

    call = ToolCall.objects.get(project=project)
    assert (call.trace_id, call.span_id, call.call_id) == (TRACE, TOOL_SPAN, "toolu_01")
    assert (call.ok, call.error_class) == (False, "transient")
    assert call.classified_by == 'message:"timed out"'

    rollups_refresh(project_id=project.pk, everything=True)
    assert sum(ToolRollup.objects.filter(project=project, resolution=ToolRollup.Resolution.HOUR).values_list("calls", flat=True)) == 1


@pytest.mark.parametrize("span_first", [True, False], ids=["span-then-log", "log-then-span"])
def test_an_exception_log_inside_a_tool_span_classifies_it_whichever_comes_first(client, project_key, span_first):
    project, key = project_key
    span = json_span(TRACE, TOOL_SPAN, "execute_tool lookup_order", start_ns=ago(40),
                     attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"})  # fmt: skip
    log = pb(log_batch(lambda logger: logger.emit(body="lookup failed", severity_text="ERROR", context=in_span(),
                                                  attributes={"exception.type": "PermissionError",
                                                              "exception.message": "token lacks orders:read"}),
                       service="orders-agent", scope="orders"))  # fmt: skip
    if span_first:
        post_spans(client, key, [span])
        assert ToolCall.objects.get(project=project).ok
        assert post(client, log, key).status_code == 200
    else:
        assert post(client, log, key).status_code == 200
        post_spans(client, key, [span])

    call = ToolCall.objects.get(project=project)
    assert (call.ok, call.error_class, call.classified_by) == (False, "permission", "exception.type=PermissionError")
    assert call.message == "token lacks orders:read"


# --- the trace page and its API ------------------------------------------------------------------


def test_the_trace_page_and_api_show_the_traces_log_records_escaped(client, project_key):
    from ingest.models import Membership
    from tests.conftest import _user

    project, key = project_key
    user = _user("logreader")
    Membership.objects.create(project=project, user=user, role=Membership.Role.MEMBER)
    post_spans(client, key, [json_span(TRACE, TOOL_SPAN, "execute_tool lookup", start_ns=ago(40),
                                       attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"})])  # fmt: skip
    log = pb(log_batch(lambda logger: logger.emit(body="<script>alert(1)</script>", severity_text="WARN", context=in_span(),
                                                  event_name="app.warning", attributes={"k": "<b>v</b>"})))  # fmt: skip
    assert post(client, log, key).status_code == 200
    assert Project.objects.get(pk=project.pk).logs_since is not None

    client.force_login(user)
    html = client.get(f"/p/{project.slug}/traces/{TRACE}/").content.decode()
    assert 'id="logs"' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert "&lt;b&gt;v&lt;/b&gt;" in html
    assert f'href="#call-{TOOL_SPAN}"' in html and "app.warning" in html

    data = client.get(f"/api/v1/projects/{project.slug}/traces/{TRACE}/").json()
    assert [(item["event_name"], item["severity"], item["body"], item["span_id"]) for item in data["logs"]] == [
        ("app.warning", "WARN", "<script>alert(1)</script>", TOOL_SPAN)
    ]


def test_a_limit_raised_inside_the_write_is_its_own_4xx_counted_as_refused_not_a_500(client, project_key):
    project, key = project_key
    refusal = otlp.OtlpError(413, "a limit the write applies itself")
    with mock.patch("ingest.services.logs_ingest", side_effect=refusal):
        response = post(client, pb(log_batch(lambda logger: logger.emit(body="x"))), key)
    assert response.status_code == 413
    assert "a limit the write applies itself" in status_message(response)
    stat = IngestStat.objects.get(project=project)
    assert (stat.outcome, stat.reason) == ("refused", "413 Request Entity Too Large")
    assert LogRecord.objects.count() == 0
