"""Bounded hostile input: array, kvlist, depth and attribute-budget limits while flattening, the
JSON value limit before parsing, and what was cut counted in ingest health (docs/contract/limits.md)."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from ingest import otlp
from ingest.limits import DEFAULT_LIMITS, IngestLimits
from ingest.models import IngestStat
from ingest.models import Span as StoredSpan
from ingest.redact import CUT_BUDGET_MARKER, CUT_ENTRIES_KEY, DEPTH_MARKER, cut_items_marker
from ingest.services import spans_ingest
from tests.factories import make_key

NOW_NS = 1_800_000_000 * 10**9


def string(text: str) -> AnyValue:
    return AnyValue(string_value=text)


def array(values: list[AnyValue]) -> AnyValue:
    return AnyValue(array_value=ArrayValue(values=values))


def kvlist(pairs: dict[str, AnyValue]) -> AnyValue:
    return AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key=k, value=v) for k, v in pairs.items()]))


def span(attributes: dict[str, AnyValue], number: int = 1, events: list | None = None) -> Span:
    return Span(
        trace_id=bytes(range(1, 17)),
        span_id=number.to_bytes(8, "big"),
        name="execute_tool lookup_order",
        start_time_unix_nano=NOW_NS - 10**9,
        end_time_unix_nano=NOW_NS,
        attributes=[KeyValue(key=k, value=v) for k, v in attributes.items()],
        events=events or [],
    )


def request(*spans: Span) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])])


def flatten(req, limits: IngestLimits = DEFAULT_LIMITS) -> tuple[list, otlp.Cuts]:
    cuts = otlp.Cuts()
    return list(otlp.iter_spans(req, limits, now_ns=NOW_NS, cuts=cuts)), cuts


def nested(depth: int) -> AnyValue:
    value = string("leaf")
    for _ in range(depth):
        value = kvlist({"a": value})
    return value


def test_a_huge_array_keeps_its_first_items_and_says_how_many_were_cut():
    [record], cuts = flatten(request(span({"list": array([AnyValue(int_value=i) for i in range(10_000)])})))

    stored = record.attributes["list"]
    assert stored[:256] == list(range(256))
    assert stored[256:] == [cut_items_marker(10_000 - 256)]
    assert cuts == {otlp.CUT_ARRAY_ITEMS: 1}


def test_a_long_kvlist_keeps_its_first_entries_and_a_count_of_the_rest():
    limits = IngestLimits(max_kvlist_entries=3)
    [record], cuts = flatten(request(span({"map": kvlist({f"k{i}": AnyValue(int_value=i) for i in range(10)})})), limits)

    assert record.attributes["map"] == {"k0": 0, "k1": 1, "k2": 2, CUT_ENTRIES_KEY: 7}
    assert cuts == {otlp.CUT_KVLIST_ENTRIES: 1}


def test_nesting_deeper_than_the_limit_is_replaced_by_the_depth_marker_and_counted():
    [record], cuts = flatten(request(span({"deep": nested(20)})))

    value, depth = record.attributes["deep"], 0
    while isinstance(value, dict):
        value, depth = value["a"], depth + 1
    assert (depth, value) == (DEFAULT_LIMITS.max_value_depth, DEPTH_MARKER)
    assert cuts == {otlp.CUT_DEPTH: 1}


def test_arrays_of_arrays_are_bounded_at_every_depth():
    inner = array([AnyValue(int_value=1)] * 300)
    [record], cuts = flatten(request(span({"grid": array([inner] * 300)})))

    grid = record.attributes["grid"]
    assert len(grid) <= 257 and isinstance(grid[-1], str) and grid[-1].startswith("[cut: ")
    assert cuts[otlp.CUT_ARRAY_ITEMS] >= 1 and cuts[otlp.CUT_SPAN_BYTES] >= 1  # 300 x 300 ints do not fit 256 KiB
    # within the budget, give or take the markers (not charged: at most one per array or kvlist)
    assert otlp.attribute_cost("grid", grid) <= DEFAULT_LIMITS.max_attribute_bytes_per_span * 1.05


def test_over_the_span_budget_the_small_attributes_are_kept_and_the_large_ones_marked():
    limits = IngestLimits(max_attribute_bytes_per_span=20_000, max_attribute_value_chars=8_000)
    big = {f"blob.{i}": string("x" * 8_000) for i in range(5)}
    [record], cuts = flatten(request(span({**big, "gen_ai.tool.name": string("lookup_order"), "error.type": string("Timeout")})), limits)

    attributes = record.attributes
    assert attributes["gen_ai.tool.name"] == "lookup_order" and attributes["error.type"] == "Timeout"
    kept = [key for key in big if attributes[key] != CUT_BUDGET_MARKER]
    assert kept == ["blob.0", "blob.1"]  # the first ones that fit, in order
    assert cuts == {otlp.CUT_SPAN_BYTES: 3}
    assert list(attributes)[:5] == list(big)  # the stored order is the sender's


def test_a_nested_value_past_the_budget_is_marked_under_its_cleaned_key():
    # An array's items are charged as they are converted, so it can spend the budget past zero;
    # a nested value after it is then not converted at all.
    limits = IngestLimits(max_attribute_bytes_per_span=1_000, max_attribute_key_chars=16)
    long_key = "nested.\x00" + "k" * 40  # a NUL, and longer than max_attribute_key_chars
    attributes = {"numbers": array([AnyValue(int_value=n) for n in range(100)]), long_key: kvlist({"a": string("b")})}
    [record], cuts = flatten(request(span(attributes)), limits)

    (key,) = [key for key in record.attributes if key.startswith("nested.")]
    assert len(key) <= 16 and "\x00" not in key
    assert record.attributes[key] == CUT_BUDGET_MARKER
    assert cuts[otlp.CUT_SPAN_BYTES] == 2  # the rest of the array, then the kvlist


def test_events_draw_on_the_same_span_budget():
    limits = IngestLimits(max_attribute_bytes_per_span=10_000)
    events = [Span.Event(name="log", time_unix_nano=NOW_NS, attributes=[KeyValue(key="text", value=string("y" * 4_000))]) for _ in range(5)]
    [record], cuts = flatten(request(span({"gen_ai.tool.name": string("t")}, events=events)), limits)

    texts = [event["attributes"]["text"] for event in record.events]
    assert texts.count(CUT_BUDGET_MARKER) == 3
    assert cuts == {otlp.CUT_SPAN_BYTES: 3}


def test_once_the_request_budget_is_spent_later_spans_keep_only_what_fits():
    limits = IngestLimits(max_attribute_bytes_per_request=30_000, max_attribute_value_chars=8_000)
    spans = [span({"gen_ai.tool.name": string("t"), "blob": string("z" * 8_000)}, number=n) for n in range(1, 6)]
    records, cuts = flatten(request(*spans), limits)

    assert [r.attributes["blob"] == CUT_BUDGET_MARKER for r in records] == [False, False, False, True, True]
    assert all(r.attributes["gen_ai.tool.name"] == "t" for r in records)
    assert cuts == {otlp.CUT_REQUEST_BYTES: 2}


def test_the_same_hostile_request_is_cut_the_same_way_every_time():
    req = request(span({"list": array([string(str(i)) for i in range(5_000)]), "deep": nested(12)}))

    first, second = flatten(req), flatten(req)

    assert first[0][0].attributes == second[0][0].attributes and first[1] == second[1]


def test_strings_cut_at_the_value_limit_are_counted():
    [record], cuts = flatten(request(span({"long": string("a" * 20_000), "nested": array([string("b" * 20_000)])})))

    assert len(record.attributes["long"]) == DEFAULT_LIMITS.max_attribute_value_chars
    assert cuts == {otlp.CUT_VALUE_CHARS: 2}


def test_a_log_record_body_is_bounded_like_an_attribute():
    record = LogRecord(time_unix_nano=NOW_NS, body=array([AnyValue(int_value=i) for i in range(1_000)]))
    req = ExportLogsServiceRequest(resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=[record])])])
    cuts = otlp.Cuts()

    [item] = otlp.iter_log_records(req, DEFAULT_LIMITS, now_ns=NOW_NS, cuts=cuts)

    assert item.body[-1] == cut_items_marker(1_000 - 256) and len(item.body) == 257
    assert cuts == {otlp.CUT_ARRAY_ITEMS: 1}


def test_a_json_body_of_too_many_values_is_refused_before_it_is_parsed():
    values = ",".join('{"intValue":1}' for _ in range(2_000))
    body = (
        '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10",'
        '"spanId":"0102030405060708","name":"x","startTimeUnixNano":"1","endTimeUnixNano":"2",'
        '"attributes":[{"key":"k","value":{"arrayValue":{"values":[' + values + "]}}}]}]}]}]}"
    ).encode()
    assert otlp.json_values(body) > 4_000

    with pytest.raises(otlp.OtlpError) as refused:
        otlp.decode_request(body, otlp.JSON, IngestLimits(max_json_values=4_000))
    assert refused.value.http_status == 413 and "values" in refused.value.message
    assert otlp.decode_request(body, otlp.JSON, IngestLimits(max_json_values=5_000)).resource_spans


def test_the_settings_carry_the_new_limits(settings):
    for name in ("max_attribute_bytes_per_span", "max_attribute_bytes_per_request", "max_json_values"):
        assert getattr(settings.INGEST_LIMITS, name) == getattr(DEFAULT_LIMITS, name)


@pytest.mark.django_db
def test_what_was_cut_is_counted_with_the_requests_ingest_stats_and_the_span_stored(member_client, project):
    from django.utils import timezone

    hostile = request(span({"list": array([AnyValue(int_value=i) for i in range(1_000)]), "deep": nested(12)}))
    now = timezone.now()
    hostile.resource_spans[0].scope_spans[0].spans[0].start_time_unix_nano = int(now.timestamp()) * 10**9 - 10**9
    hostile.resource_spans[0].scope_spans[0].spans[0].end_time_unix_nano = int(now.timestamp()) * 10**9

    result = spans_ingest(project=project, request=hostile, limits=DEFAULT_LIMITS, now=now)

    assert result.accepted == 1 and result.cuts == {otlp.CUT_ARRAY_ITEMS: 1, otlp.CUT_DEPTH: 1}
    cut = {row.reason: row.count for row in IngestStat.objects.filter(project=project, outcome="cut")}
    assert cut == {"max_array_items": 1, "max_value_depth": 1}
    assert StoredSpan.objects.get().attributes["list"][-1] == cut_items_marker(1_000 - 256)

    response = member_client.get(f"/p/{project.slug}/health/")
    html = response.content.decode()
    assert [(row.reason, row.count) for row in response.context["health"].cuts] == [("max_array_items", 1), ("max_value_depth", 1)]
    assert "<code>max_array_items</code>" in html
    assert response.context["health"].totals["accepted"] == 1  # cuts are not arrivals


@pytest.mark.django_db
def test_the_http_edge_refuses_a_json_body_over_the_value_limit_and_counts_the_refusal(client, settings):
    project, key = make_key()
    settings.INGEST_LIMITS = IngestLimits(max_json_values=100)
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{}] * 200}]}]}).encode()

    response = client.generic("POST", "/v1/traces", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}")

    assert response.status_code == 413
    assert IngestStat.objects.get(project=project, outcome="refused").reason == "413 Request Entity Too Large"
