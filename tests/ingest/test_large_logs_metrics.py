"""Large protobuf logs and metrics bodies (ingest/wire.py), and the container limits of every signal.

Logs are walked and flattened in pieces into exactly what the whole-message path makes (records,
resources, cuts, counts, days, the same 400); metrics are walked and their data points counted.
The thresholds are lowered so that small requests take the walk (as in test_large_bodies.py)."""

from __future__ import annotations

import dataclasses
import time

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from ingest import grpc_edge, otlp, views, wire
from ingest.limits import DEFAULT_LIMITS
from ingest.models import IngestStat
from ingest.models import LogRecord as StoredRecord
from ingest.services import METRICS_NOT_STORED
from tests.factories import make_key
from tests.ingest.test_large_bodies import NOW_NS, SMALL, array, deep, kvlist, request, resource_spans, span, string


@pytest.fixture
def walked(monkeypatch):
    monkeypatch.setattr(wire, "LARGE_BODY_BYTES", 0)
    monkeypatch.setattr(wire, "PIECE_BYTES", 40)


def record(number: int, attributes=(), body=None, **fields) -> LogRecord:
    fields.setdefault("time_unix_nano", NOW_NS - number)
    fields.setdefault("trace_id", bytes(range(1, 17)))
    if body is not None:
        fields["body"] = body
    return LogRecord(
        span_id=number.to_bytes(8, "big"), severity_number=9, severity_text="INFO",
        attributes=[KeyValue(key=k, value=v) for k, v in attributes], **fields,
    )  # fmt: skip


def logs(*resource_logs) -> bytes:
    return ExportLogsServiceRequest(resource_logs=list(resource_logs)).SerializeToString()


def resource_logs(records, *, service="svc", scopes=1, scope_name="scope") -> ResourceLogs:
    per = max(1, len(records) // scopes)
    groups = [records[i : i + per] for i in range(0, len(records), per)] or [[]]
    return ResourceLogs(
        resource=Resource(attributes=[KeyValue(key="service.name", value=string(service))]),
        scope_logs=[ScopeLogs(scope={"name": f"{scope_name}{i}"}, log_records=g) for i, g in enumerate(groups)],
    )


def _outcome(request, limits, module):
    otlp._STORED_PAIRS.clear()
    otlp._SEEN_ONCE.clear()
    count = module.count_log_records(request)
    days = module.log_days(request, min_ns=NOW_NS - 86_400 * 10**9 * 30, max_ns=NOW_NS + 86_400 * 10**9)
    cuts = otlp.Cuts()
    resources = [r for r in module.log_resources(request, limits, cuts=cuts) if r is not None]
    try:
        records = list(module.iter_log_records(request, limits, now_ns=NOW_NS, cuts=cuts))
    except otlp.OtlpError as exc:
        records = (exc.http_status, exc.message)
    return count, days, resources, records, dict(cuts), cuts.left


def both(body: bytes, limits):
    whole = _outcome(otlp.decode_logs_request(body, otlp.PROTOBUF, limits), limits, otlp)
    lean = wire.decode_logs(body, otlp.PROTOBUF, limits)
    assert type(lean) is wire.LargeRequest
    return whole, _outcome(lean, limits, wire)


ints = lambda n: array(AnyValue(int_value=1) for _ in range(n))  # noqa: E731

LOG_CASES = {
    "ordinary records": lambda: logs(
        resource_logs([record(i, [("event.name", string("tool_result")), ("tool_name", string(f"t{i % 3}")),
                                  ("tool_use_id", string(f"toolu_{i}"))], body=string("claude_code.tool_result"))
                       for i in range(1, 20)], scopes=2, scope_name="com.anthropic.claude_code"),
        resource_logs([record(100 + i, [("n", AnyValue(int_value=i))], body=string("plain")) for i in range(4)], service="other"),
    ),  # fmt: skip
    "a body of one huge array of tiny ints": lambda: logs(resource_logs([record(1, [("k", string("v"))], body=ints(3000))])),
    "an attribute of one huge array, beside an event name": lambda: logs(
        resource_logs([record(1, [("event.name", string("app.tool_decision")), ("list", ints(3000))], body=string("x"))])
    ),
    "a body alike in shape only": lambda: logs(
        resource_logs([record(1, body=array(string("s" * (i % 9)) if i % 4 else AnyValue(bool_value=True) for i in range(3000)))])
    ),
    "many tiny attributes": lambda: logs(resource_logs([record(1, [(f"k{i}", string("v")) for i in range(2000)], body=ints(50))])),
    "deep kvlist bodies": lambda: logs(resource_logs([record(i, [("deep", deep(6, 3))], body=deep(7, 3)) for i in range(1, 5)])),
    "kvlist bodies over the budget": lambda: logs(
        resource_logs([record(i, [(f"big{j}", kvlist((f"e{k}", array(string("y" * 30) for _ in range(50))) for k in range(9)))
                                  for j in range(3)], body=kvlist((f"b{k}", array(string("z" * 30) for _ in range(60))) for k in range(9)))
                       for i in range(1, 4)])
    ),  # fmt: skip
    "rejected and recordless": lambda: logs(
        resource_logs([]),
        resource_logs([record(1, body=ints(300), time_unix_nano=0), record(2, body=ints(300), trace_id=b"bad"),
                       record(3, body=ints(300), observed_time_unix_nano=NOW_NS - 5, time_unix_nano=0),
                       record(4, [("l", ints(200))], time_unix_nano=NOW_NS * 2)]),
    ),  # fmt: skip
    "no body at all": lambda: logs(resource_logs([record(1, [("l", ints(300))]), record(2, [("s", string("w" * 100))])])),
}


@pytest.mark.parametrize("name", LOG_CASES)
@pytest.mark.parametrize("limits", [SMALL, DEFAULT_LIMITS], ids=["small limits", "default limits"])
def test_the_walk_makes_the_log_records_the_whole_message_makes(walked, name, limits):
    whole, lean = both(LOG_CASES[name](), limits)
    assert lean == whole
    assert whole[0] > 0 or name == "rejected and recordless"


def test_a_walked_body_keeps_its_first_items_and_counts_the_rest(walked):
    _, lean = both(LOG_CASES["a body of one huge array of tiny ints"](), SMALL)
    (item,) = lean[3]
    assert item.body == [1, 1, 1, 1, 1, "[cut: 2995 more items]"]
    assert lean[4][otlp.CUT_ARRAY_ITEMS] == 1


def test_a_walked_record_with_its_body_sent_twice_is_refused_not_parsed_whole(walked):
    # upb merges the copies (the arrays concatenated), which only a whole parse of the record
    # tells: for a record over PIECE_BYTES that is the unbounded parse the walk avoids.
    head = record(1).SerializeToString()
    body = ints(30).SerializeToString()
    data = wire._ld(1, wire._ld(2, wire._ld(2, head + wire._ld(5, body) + wire._ld(5, body))))
    assert otlp.decode_logs_request(data, otlp.PROTOBUF).resource_logs  # the whole path merges it
    with pytest.raises(otlp.OtlpError) as refused:
        wire.decode_logs(data, otlp.PROTOBUF, SMALL)
    assert (refused.value.http_status, refused.value.message) == (
        413, "field 'body' of a LogRecord over 40 bytes is sent 2 times: a single field, which would have to be parsed "
        "whole to merge the copies; send it once"
    )  # fmt: skip


def test_too_many_log_records_are_refused_as_soon_as_counted(walked):
    body = logs(resource_logs([record(i, body=string("v" * 50)) for i in range(1, 80)], scopes=3))
    with pytest.raises(otlp.OtlpError) as refused:
        wire.decode_logs(body, otlp.PROTOBUF, dataclasses.replace(SMALL, max_log_records_per_request=50))
    assert (refused.value.http_status, refused.value.message) == (
        413, "more than 50 log records in one request exceeds the limit of 50"
    )  # fmt: skip


@pytest.mark.parametrize("cut", [-3, -1])
def test_bad_log_protobuf_is_the_same_400_either_way(walked, cut):
    body = LOG_CASES["a body of one huge array of tiny ints"]()[:cut]
    with pytest.raises(otlp.OtlpError) as whole:
        otlp.decode_logs_request(body, otlp.PROTOBUF)
    with pytest.raises(otlp.OtlpError) as lean:
        wire.decode_logs(body, otlp.PROTOBUF)
    assert lean.value.message == whole.value.message
    assert whole.value.message.startswith("body is not a valid ExportLogsServiceRequest protobuf: ")


# --- metrics --------------------------------------------------------------------------------------


def metric(name: str, kind: str, points: int, **extra) -> m.Metric:
    point = {"histogram": m.HistogramDataPoint, "exponential_histogram": m.ExponentialHistogramDataPoint,
             "summary": m.SummaryDataPoint}.get(kind, m.NumberDataPoint)  # fmt: skip
    data = {"gauge": m.Gauge, "sum": m.Sum, "histogram": m.Histogram, "exponential_histogram": m.ExponentialHistogram,
            "summary": m.Summary}[kind]  # fmt: skip
    values = [point(time_unix_nano=NOW_NS - i, **extra) for i in range(points)]
    return m.Metric(name=name, **{kind: data(data_points=values)})


def metrics(*groups) -> bytes:
    return ExportMetricsServiceRequest(
        resource_metrics=[m.ResourceMetrics(scope_metrics=[m.ScopeMetrics(metrics=group)]) for group in groups]
    ).SerializeToString()


METRIC_CASES = {
    "every kind": lambda: metrics(
        [metric("g", "gauge", 3, as_int=4), metric("s", "sum", 2, as_double=1.5), metric("h", "histogram", 4, count=2)],
        [metric("e", "exponential_histogram", 5, count=1), metric("q", "summary", 2, count=3), m.Metric(name="empty")],
    ),
    "one gauge of many identical points": lambda: metrics([metric("g", "gauge", 3000)]),
    "points alike in shape only": lambda: metrics(
        [m.Metric(name="g", gauge=m.Gauge(data_points=[m.NumberDataPoint(as_int=i % 100) for i in range(3000)]))]
    ),
    "many small metrics": lambda: metrics([metric(f"m{i}", "sum", i % 3) for i in range(300)]),
    "a huge data point": lambda: metrics(
        [m.Metric(name="h", histogram=m.Histogram(data_points=[m.HistogramDataPoint(bucket_counts=list(range(2000)))] * 3))]
    ),
}


@pytest.mark.parametrize("name", METRIC_CASES)
def test_the_walk_counts_the_data_points_the_whole_message_holds(walked, name):
    body = METRIC_CASES[name]()
    counted = wire.decode_metrics(body, otlp.PROTOBUF)
    assert type(counted) is wire.CountedMetrics
    assert wire.count_data_points(counted) == otlp.count_data_points(otlp.decode_metrics_request(body, otlp.PROTOBUF)) > 0


@pytest.mark.parametrize("cut", [-3, -1])
def test_bad_metrics_protobuf_is_the_same_400_either_way(walked, cut):
    body = METRIC_CASES["one gauge of many identical points"]()[:cut]
    with pytest.raises(otlp.OtlpError) as whole:
        otlp.decode_metrics_request(body, otlp.PROTOBUF)
    with pytest.raises(otlp.OtlpError) as lean:
        wire.decode_metrics(body, otlp.PROTOBUF)
    assert lean.value.message == whole.value.message


def test_both_edges_decode_large_logs_and_metrics_bodies_in_pieces(walked):
    body = LOG_CASES["a body of one huge array of tiny ints"]()
    assert type(grpc_edge.LOGS.decode(body)) is wire.LargeRequest
    assert type(views.LOGS.decode(body, otlp.PROTOBUF, DEFAULT_LIMITS)) is wire.LargeRequest
    body = METRIC_CASES["every kind"]()
    assert grpc_edge.METRICS.count(grpc_edge.METRICS.decode(body)) == 16
    assert views.METRICS.count(views.METRICS.decode(body, otlp.PROTOBUF, DEFAULT_LIMITS)) == 16


# --- container limits -----------------------------------------------------------------------------

FEW = dataclasses.replace(SMALL, max_resources_per_request=4, max_scopes_per_request=6, max_metrics_per_request=5)


def _refusals(body: bytes, decode, monkeypatch) -> list[tuple[int, str]]:
    """The refusal of the whole-message path and of the walk (a piece of 40 bytes, or of 1 MiB)."""
    out = []
    for large, piece in ((10**9, 40), (0, 40), (0, 1 << 20)):
        monkeypatch.setattr(wire, "LARGE_BODY_BYTES", large)
        monkeypatch.setattr(wire, "PIECE_BYTES", piece)
        with pytest.raises(otlp.OtlpError) as refused:
            decode(body, otlp.PROTOBUF, FEW)
        out.append((refused.value.http_status, refused.value.message))
    return out


@pytest.mark.parametrize(
    "body, decode, message",
    [
        (lambda: b"\n\x00" * 9, wire.decode_traces, "ResourceSpans in one request exceeds the limit of 4 (max_resources_per_request)"),
        (lambda: request(resource_spans([span(i) for i in range(1, 9)], scopes=8)), wire.decode_traces,
         "ScopeSpans in one request exceeds the limit of 6 (max_scopes_per_request)"),
        (lambda: b"\n\x00" * 9, wire.decode_logs, "ResourceLogs in one request exceeds the limit of 4 (max_resources_per_request)"),
        (lambda: logs(*[resource_logs([record(1)], scopes=1)] * 2, resource_logs([record(i) for i in range(1, 9)], scopes=8)),
         wire.decode_logs, "ScopeLogs in one request exceeds the limit of 6 (max_scopes_per_request)"),
        (lambda: b"\n\x00" * 9, wire.decode_metrics, "ResourceMetrics in one request exceeds the limit of 4 (max_resources_per_request)"),
        (lambda: metrics([m.Metric(name="x")] * 9), wire.decode_metrics, "metrics in one request exceeds the limit of 5 (max_metrics_per_request)"),
    ],
    ids=["resource spans", "scope spans", "resource logs", "scope logs", "resource metrics", "metrics"],
)  # fmt: skip
def test_too_many_containers_are_refused_on_every_path(monkeypatch, body, decode, message):
    refusals = _refusals(body(), decode, monkeypatch)
    assert all(status == 413 and text.endswith(message) for status, text in refusals), refusals
    assert refusals[0][1].split()[0].isdigit()  # the whole-message path knows the count
    assert all(text.startswith("more than ") for _, text in refusals[1:])  # the walk stops at the limit


def test_empty_resource_spans_past_the_limit_are_refused_from_the_first_piece(monkeypatch):
    body = b"\n\x00" * (4 << 20)  # 4 M empty ResourceSpans
    monkeypatch.setattr(wire, "LARGE_BODY_BYTES", 0)
    parsed = []
    parse = wire._Check.parse
    monkeypatch.setattr(wire._Check, "parse", lambda check, *args: parsed.append(args) or parse(check, *args))
    with pytest.raises(otlp.OtlpError) as refused:
        wire.decode_traces(body, otlp.PROTOBUF)
    assert refused.value.http_status == 413
    assert len(parsed) == 1


# --- through the HTTP edge ------------------------------------------------------------------------


def _post(client, path: str, body: bytes, key: str):
    return client.generic("POST", path, body, content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {key}")


def test_a_large_logs_body_is_stored_with_its_cuts_counted(walked, client, db):

    project, key = make_key()
    now = time.time_ns()
    body = logs(resource_logs([record(1, [("k", string("v"))], body=ints(3000), time_unix_nano=now)]))

    assert _post(client, "/v1/logs", body, key).status_code == 200
    (stored,) = StoredRecord.objects.all()
    assert stored.body[-1] == f"[cut: {3000 - DEFAULT_LIMITS.max_array_items} more items]"
    cut = IngestStat.objects.get(project=project, outcome="cut")
    assert (cut.reason, cut.count) == (f"log records: {otlp.CUT_ARRAY_ITEMS}", 1)


def test_a_large_metrics_body_is_counted_as_dropped(walked, client, db):

    project, key = make_key()
    response = _post(client, "/v1/metrics", METRIC_CASES["one gauge of many identical points"](), key)

    assert response.status_code == 200
    stat = IngestStat.objects.get(project=project)
    assert (stat.outcome, stat.reason, stat.count) == ("rejected", METRICS_NOT_STORED, 3000)


def test_too_many_resource_spans_are_a_413_counted_as_refused(walked, client, db, settings):

    project, key = make_key()
    settings.INGEST_LIMITS = FEW
    response = _post(client, "/v1/traces", b"\n\x00" * 9, key)

    assert response.status_code == 413
    stat = IngestStat.objects.get(project=project)
    assert (stat.outcome, stat.reason) == ("refused", "413 Request Entity Too Large")
