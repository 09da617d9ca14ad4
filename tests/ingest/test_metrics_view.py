"""POST /v1/metrics: answered per OTLP (accepted, every data point dropped as a partial success), never stored."""

from __future__ import annotations

import json

import pytest
from django.db import OperationalError
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult
from opentelemetry.sdk.resources import Resource

from dashboard.selectors.health import ingest_health
from ingest.models import IngestStat, LogRecord, Span
from ingest.services import METRICS_NOT_STORED
from tests.factories import make_key

PB = "application/x-protobuf"
JSON = "application/json"


def metrics_data():
    """Three data points (a counter with two attribute sets, a histogram) from the SDK."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(resource=Resource.create({"service.name": "claude-code"}), metric_readers=[reader])
    meter = provider.get_meter("com.anthropic.claude_code", "2.1.0")
    counter = meter.create_counter("claude_code.token.usage")
    counter.add(10, {"type": "input"})
    counter.add(3, {"type": "output"})
    meter.create_histogram("tool.latency").record(12.5)
    data = reader.get_metrics_data()
    provider.shutdown()
    return data


def post(client, body: bytes, key: str | None, content_type: str = PB, path: str = "/v1/metrics"):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key is not None else {}
    return client.generic("POST", path, body, content_type=content_type, **headers)


@pytest.fixture
def project_key(db):
    return make_key()



def test_the_official_python_metric_exporter_succeeds_and_the_drop_is_counted(live_url):
    project, key = make_key()
    exporter = OTLPMetricExporter(endpoint=f"{live_url}/v1/metrics", headers={"Authorization": f"Bearer {key}"})

    assert exporter.export(metrics_data()) == MetricExportResult.SUCCESS
    exporter.shutdown()

    stat = IngestStat.objects.get(project=project)
    assert (stat.outcome, stat.reason, stat.count) == ("rejected", METRICS_NOT_STORED, 3)
    assert Span.objects.count() == LogRecord.objects.count() == 0


def test_the_answer_is_a_partial_success_naming_the_dropped_points_in_either_encoding(client, project_key):
    project, key = project_key
    request = encode_metrics(metrics_data())

    response = post(client, request.SerializeToString(), key)
    answer = ExportMetricsServiceResponse.FromString(response.content)
    assert (response.status_code, response["Content-Type"]) == (200, PB)
    assert answer.partial_success.rejected_data_points == 3
    assert answer.partial_success.error_message == "Toolwatch stores traces and logs; 3 metric data points dropped"

    response = post(client, json.dumps(json_format.MessageToDict(request)).encode(), key, JSON, path="/v1/metrics/")
    assert (response.status_code, response["Content-Type"]) == (200, JSON)
    assert json.loads(response.content) == {
        "partialSuccess": {"rejectedDataPoints": "3", "errorMessage": "Toolwatch stores traces and logs; 3 metric data points dropped"}
    }
    assert IngestStat.objects.get(project=project, outcome="rejected").count == 6


def test_the_drop_shows_on_the_ingest_health_reasons(client, project_key):
    import datetime as dt

    from django.utils import timezone

    project, key = project_key
    post(client, encode_metrics(metrics_data()).SerializeToString(), key)

    now = timezone.now()
    report = ingest_health(project, now - dt.timedelta(hours=2), now + dt.timedelta(hours=1))
    assert [(row.outcome, row.reason, row.count) for row in report.reasons] == [("rejected", METRICS_NOT_STORED, 3)]


def test_an_empty_request_is_a_plain_success(client, project_key):
    project, key = project_key
    response = post(client, b"{}", key, JSON)  # (the test client sends no Content-Type with an empty body)
    assert (response.status_code, response.content) == (200, b"{}")
    assert not IngestStat.objects.filter(project=project, outcome="rejected").exists()


def test_exemplar_ids_in_json_are_hex_and_bad_ones_are_a_400_naming_the_field(client, project_key):
    _, key = project_key
    document = json_format.MessageToDict(encode_metrics(metrics_data()))
    point = document["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]["sum"]["dataPoints"][0]
    point["exemplars"] = [{"asInt": "1", "timeUnixNano": "1", "traceId": "ab" * 16, "spanId": "cd" * 8}]
    assert post(client, json.dumps(document).encode(), key, JSON).status_code == 200

    point["exemplars"][0]["spanId"] = "zz"
    response = post(client, json.dumps(document).encode(), key, JSON)
    assert response.status_code == 400
    field = "resourceMetrics[0].scopeMetrics[0].metrics[0].sum.dataPoints[0].exemplars[0].spanId"
    assert json.loads(response.content)["message"].startswith(f"{field}: expected 16 hex characters")


@pytest.mark.parametrize(
    ("body", "content_type", "status", "words"),
    [
        (b"\x0a\xff\xff", PB, 400, "not a valid ExportMetricsServiceRequest protobuf"),
        (b"[1, 2]", JSON, 400, "expected a JSON object (ExportMetricsServiceRequest)"),
        (b"x", "text/csv", 415, "unsupported media type 'text/csv'"),
    ],
)
def test_bad_input_is_refused_naming_the_problem(client, project_key, body, content_type, status, words):
    project, key = project_key
    response = post(client, body, key, content_type)
    assert response.status_code == status
    assert response["Content-Type"] == (PB if content_type == PB else JSON)
    if response["Content-Type"] == JSON:
        assert words in json.loads(response.content)["message"]
    else:
        assert words.encode() in response.content  # a google.rpc.Status: its message is in the bytes
    assert IngestStat.objects.filter(project=project, outcome="refused").exists()
    assert not IngestStat.objects.filter(project=project, outcome="rejected").exists()


def test_keys_methods_and_database_errors_are_answered_as_for_traces(client, project_key):
    from unittest import mock

    _, key = project_key
    body = encode_metrics(metrics_data()).SerializeToString()
    assert post(client, body, None).status_code == 401
    assert client.get("/v1/metrics").status_code == 405
    with mock.patch("ingest.services.metrics_dropped", side_effect=OperationalError("down")):
        response = post(client, body, key)
    assert response.status_code == 503 and response["Retry-After"]
