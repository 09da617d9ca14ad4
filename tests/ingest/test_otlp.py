"""ingest.otlp: media types, decompression, decoding, flattening and responses. Pure, no database."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import gzip
import inspect
import json
import math
import time
import tracemalloc
import zlib

import pytest
from google.protobuf import json_format
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from ingest import otlp
from ingest.limits import DEFAULT_LIMITS, MIB, IngestLimits
from ingest.records import SpanRecord, resource_digest
from ingest.redact import REDACTED, TRUNCATION_MARKER, redact_attributes
from tests.otlp_builders import agent_with_tools, sdk_spans

NOW_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
START_NS = NOW_NS - 60 * 10**9
TRACE_ID = bytes.fromhex("5b8efff798038103d269b633813fc60c")


# --- builders -------------------------------------------------------------------------


def any_value(value) -> AnyValue:
    if isinstance(value, AnyValue):
        return value
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=key_values(value)))
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[any_value(item) for item in value]))
    return AnyValue(string_value=value)


def key_values(mapping: dict) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in mapping.items()]


def pb_span(number: int = 1, *, attrs: dict | None = None, **fields) -> Span:
    span = {
        "trace_id": TRACE_ID,
        "span_id": number.to_bytes(8, "big"),
        "name": "execute_tool lookup_order",
        "kind": 1,
        "start_time_unix_nano": START_NS,
        "end_time_unix_nano": START_NS + 25_000_000,
    }
    span.update(fields)
    return Span(attributes=key_values(attrs or {}), **span)


def pb_request(*resources: tuple[dict, list[Span]], scope: str = "toolwatch.tests") -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=key_values(resource)),
                scope_spans=[ScopeSpans(scope=InstrumentationScope(name=scope, version="1.0"), spans=spans)],
            )
            for resource, spans in resources
        ]
    )


def js_json(request: ExportTraceServiceRequest) -> dict:
    """OTLP/JSON the way the JavaScript exporter writes it: lower-case hex ids, int64
    timestamps as strings, intValue as a JSON number, integer enums, and fields this
    receiver does not know (which it must ignore)."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)

    def hex_ids(obj: dict) -> None:
        for name in ("traceId", "spanId", "parentSpanId"):
            if name in obj:
                obj[name] = base64.b64decode(obj[name]).hex()

    def numbers(attributes: list) -> None:
        for attribute in attributes:
            value = attribute.get("value", {})
            if "intValue" in value:
                value["intValue"] = int(value["intValue"])
            for nested in (value.get("kvlistValue", {}).get("values", []),):
                numbers(nested)
            for item in value.get("arrayValue", {}).get("values", []):
                numbers([{"value": item}])

    document["aFieldFromTheFuture"] = True
    for rs in document.get("resourceSpans", []):
        numbers(rs.get("resource", {}).get("attributes", []))
        rs.setdefault("resource", {})["droppedAttributesCount"] = 0
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                hex_ids(span)
                span["unknownSpanField"] = {"nested": [1, 2]}
                numbers(span.get("attributes", []))
                for event in span.get("events", []):
                    numbers(event.get("attributes", []))
                for link in span.get("links", []):
                    hex_ids(link)
                    numbers(link.get("attributes", []))
    return document


def json_body(document) -> bytes:
    return json.dumps(document).encode()


def flatten(request: ExportTraceServiceRequest, limits: IngestLimits = DEFAULT_LIMITS, now_ns: int = NOW_NS):
    items = list(otlp.iter_spans(request, limits, now_ns=now_ns))
    records = [item for item in items if isinstance(item, SpanRecord)]
    rejected = [item for item in items if isinstance(item, otlp.RejectedSpan)]
    assert len(records) + len(rejected) == len(items)
    return records, rejected


def only_record(request: ExportTraceServiceRequest, limits: IngestLimits = DEFAULT_LIMITS) -> SpanRecord:
    records, rejected = flatten(request, limits)
    assert rejected == []
    (record,) = records
    return record


def only_records(request, limits=DEFAULT_LIMITS) -> list[SpanRecord]:
    records, rejected = flatten(request, limits)
    assert rejected == []
    return records


def only_rejection(request: ExportTraceServiceRequest) -> otlp.RejectedSpan:
    records, rejected = flatten(request)
    assert records == []
    (rejection,) = rejected
    return rejection


def refusal(call, *args) -> otlp.OtlpError:
    """The OtlpError that call(*args) raises."""
    with pytest.raises(otlp.OtlpError) as caught:
        call(*args)
    return caught.value


def sdk_request() -> ExportTraceServiceRequest:
    def build(tracer):
        agent_with_tools(
            tracer,
            tools=[
                {"name": "lookup_order", "attributes": {"gen_ai.tool.call.arguments": '{"order": 42}', "retries": [1, 2]}},
                {"name": "charge_card", "error": TimeoutError("upstream timed out"), "attributes": {"amount": 9.5}},
            ],
        )

    return encode_spans(sdk_spans(build))


# --- media type -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "header, media",
    [
        ("application/x-protobuf", "protobuf"),
        ("application/json", "json"),
        ("application/json; charset=utf-8", "json"),
        ("Application/JSON", "json"),
        (" application/x-protobuf ;foo=bar", "protobuf"),
    ],
)
def test_protobuf_and_json_are_recognised_ignoring_case_and_parameters(header, media):
    assert otlp.media_type(header) == media


@pytest.mark.parametrize("header", ["text/plain", "application/grpc", "application/protobuf+json", "multipart/form-data; boundary=x"])
def test_other_media_types_are_refused_with_415_naming_the_type(header):
    error = refusal(otlp.media_type, header)

    assert error.http_status == 415
    assert header.split(";")[0] in error.message
    assert "application/x-protobuf or application/json" in error.message


def test_a_missing_content_type_is_refused_with_415():
    assert refusal(otlp.media_type, "").http_status == 415


def test_each_media_has_its_content_type():
    assert otlp.content_type_for("protobuf") == "application/x-protobuf"
    assert otlp.content_type_for("json") == "application/json"


# --- decompression --------------------------------------------------------------------

PAYLOAD = pb_request(({"service.name": "s"}, [pb_span(n) for n in range(1, 50)])).SerializeToString()


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize(
    "encoding, encode",
    [
        ("gzip", gzip.compress),
        ("GZIP", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),  # what the Python exporter sends: the zlib wrapper
        ("deflate", raw_deflate),  # raw deflate, from senders that skip the wrapper
        ("identity", lambda data: data),
        ("", lambda data: data),
    ],
)
def test_gzip_deflate_and_identity_bodies_decompress_to_the_original(encoding, encode):
    assert otlp.decompress(encode(PAYLOAD), encoding, DEFAULT_LIMITS.max_decompressed_bytes) == PAYLOAD


def test_gzip_with_several_members_is_joined_like_gzip_does():
    body = gzip.compress(PAYLOAD[:1000]) + gzip.compress(PAYLOAD[1000:])

    assert otlp.decompress(body, "gzip", DEFAULT_LIMITS.max_decompressed_bytes) == PAYLOAD


def test_zero_padding_after_a_gzip_stream_is_tolerated():
    assert otlp.decompress(gzip.compress(PAYLOAD) + bytes(16), "gzip", 10 * MIB) == PAYLOAD


def test_an_empty_compressed_body_is_an_empty_request():
    assert otlp.decompress(b"", "gzip", 10 * MIB) == b""


def zeros_gzipped(size: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    megabyte = bytes(MIB)
    return b"".join([compressor.compress(megabyte) for _ in range(size // MIB)] + [compressor.flush()])


def test_a_gzip_bomb_is_refused_with_413_quickly_without_inflating_past_the_limit():
    bomb = zeros_gzipped(200 * MIB)  # about 200 KB on the wire
    limit = DEFAULT_LIMITS.max_decompressed_bytes

    tracemalloc.start()
    started = time.perf_counter()
    try:
        error = refusal(otlp.decompress, bomb, "gzip", limit)
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert error.http_status == 413
    assert error.message == f"decompressed body exceeds {limit} bytes"
    assert elapsed < 5
    assert peak < limit + 8 * MIB  # never the 200 MiB


def test_a_body_one_byte_over_the_limit_is_413_and_one_at_the_limit_passes():
    body = gzip.compress(bytes(1000))

    assert otlp.decompress(body, "gzip", 1000) == bytes(1000)
    assert refusal(otlp.decompress, body, "gzip", 999).http_status == 413
    assert refusal(otlp.decompress, bytes(1000), "identity", 999).http_status == 413


@pytest.mark.parametrize(
    "body, encoding, words",
    [
        (b"\x1f\x8b\x08\x00garbage", "gzip", "gzip"),
        (b"this is not compressed at all", "gzip", "gzip"),
        (gzip.compress(PAYLOAD)[:-30], "gzip", "truncated"),
        (gzip.compress(PAYLOAD) + b"trailing junk", "gzip", "unexpected data"),
        (zlib.compress(PAYLOAD)[:10] + b"\xff" * 40, "deflate", "deflate"),
    ],
    ids=["bad-header", "not-gzip", "truncated", "trailing-garbage", "corrupt-deflate"],
)
def test_corrupt_compressed_bodies_are_refused_with_400(body, encoding, words):
    error = refusal(otlp.decompress, body, encoding, DEFAULT_LIMITS.max_decompressed_bytes)

    assert error.http_status == 400
    assert words in error.message


def test_an_unknown_content_encoding_is_refused_with_415_naming_it():
    error = refusal(otlp.decompress, b"abc", "br", 10 * MIB)

    assert error.http_status == 415
    assert error.message == "unsupported Content-Encoding 'br'; use gzip, deflate or identity"


# --- decoding: protobuf ---------------------------------------------------------------


def test_the_official_sdk_encoder_output_decodes_and_flattens():
    body = sdk_request().SerializeToString()

    records, rejected = flatten(otlp.decode_request(body, "protobuf"), now_ns=time.time_ns())

    assert rejected == []
    assert {record.name for record in records} == {
        "invoke_agent support", "chat gpt-4o", "execute_tool lookup_order", "execute_tool charge_card",
    }  # fmt: skip
    assert {record.service for record in records} == {"support-agent"}
    assert {record.environment for record in records} == {"prod"}
    assert {record.scope_name for record in records} == {"toolwatch.tests"}
    lookup = next(record for record in records if record.name == "execute_tool lookup_order")
    assert lookup.attributes["retries"] == [1, 2]
    charge = next(record for record in records if record.name == "execute_tool charge_card")
    assert charge.status_code == 2
    assert charge.events[0]["name"] == "exception"
    assert charge.events[0]["attributes"]["exception.type"] == "TimeoutError"
    agent = next(record for record in records if record.name.startswith("invoke_agent"))
    assert agent.parent_span_id == ""
    assert charge.parent_span_id == agent.span_id
    assert all(len(record.trace_id) == 32 and len(record.span_id) == 16 for record in records)


@pytest.mark.parametrize("body", [b"\xff\xfe garbage", b"\x0a\xff\xff\xff\xff\x0f", b"\x0a\x05abc"])
def test_garbage_protobuf_is_refused_with_400(body):
    error = refusal(otlp.decode_request, body, "protobuf")

    assert error.http_status == 400
    assert error.message.startswith("body is not a valid ExportTraceServiceRequest protobuf: ")


def test_an_empty_body_is_an_empty_request_in_both_encodings():
    assert otlp.decode_request(b"", "protobuf") == ExportTraceServiceRequest()
    assert otlp.decode_request(b"", "json") == ExportTraceServiceRequest()
    assert otlp.decode_request(b"{}", "json") == ExportTraceServiceRequest()


# --- decoding: JSON -------------------------------------------------------------------


def rich_request() -> ExportTraceServiceRequest:
    """Every kind of value and field real senders use (bytes values aside)."""
    tool = pb_span(
        2,
        parent_span_id=(1).to_bytes(8, "big"),
        name="execute_tool refund",
        trace_state="vendor=x",
        flags=257,
        attrs={
            "gen_ai.tool.name": "refund",
            "count": -7,
            "big": 2**62,
            "ratio": 0.25,
            "ok": False,
            "tags": ["a", 1, True, 1.5],
            "args": {"order": {"id": 42, "lines": [{"sku": "x"}]}},
        },
        dropped_attributes_count=1,
        events=[Span.Event(time_unix_nano=START_NS + 5, name="retry", attributes=key_values({"attempt": 2}))],
        links=[Span.Link(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)), attributes=key_values({"k": "v"}))],
        status=Status(code=2, message="refund failed"),
    )
    resource = {"service.name": "billing", "service.version": "2.0", "deployment.environment.name": "prod"}
    return pb_request((resource, [pb_span(1, name="invoke_agent billing"), tool]), ({"service.name": "other"}, [pb_span(3)]))


def rich_request_single() -> ExportTraceServiceRequest:
    request = rich_request()
    tool = request.resource_spans[0].scope_spans[0].spans[1]
    return pb_request(({"service.name": "billing"}, [tool]))


def test_protobuf_and_json_of_the_same_spans_decode_to_equal_requests_and_records():
    request = rich_request()

    from_protobuf = otlp.decode_request(request.SerializeToString(), "protobuf")
    from_json = otlp.decode_request(json_body(js_json(request)), "json")

    assert from_json == from_protobuf == request
    assert flatten(from_json) == flatten(from_protobuf)


def test_the_sdk_spans_as_js_json_decode_to_the_sdk_request():
    request = sdk_request()

    assert otlp.decode_request(json_body(js_json(request)), "json") == request


def test_the_fast_json_path_is_taken_for_js_exporter_json_and_agrees_with_json_format():
    document = js_json(rich_request())

    fast = otlp._build_request(copy.deepcopy(document))  # raises if the fast path gave up
    authoritative = otlp._parse_with_json_format(copy.deepcopy(document))

    assert fast == authoritative


def with_span_fields(**fields) -> dict:
    document = js_json(pb_request(({"service.name": "s"}, [pb_span(1, attrs={"a": "b"})])))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0].update(fields)
    return document


LENIENT_JSON = [
    pytest.param(with_span_fields(kind="SPAN_KIND_CLIENT"), id="enum-name"),
    pytest.param(with_span_fields(startTimeUnixNano=START_NS, endTimeUnixNano=float(START_NS + 10**6)), id="int64-as-numbers"),
    pytest.param(with_span_fields(start_time_unix_nano=str(START_NS)), id="snake-case-name"),
    pytest.param(with_span_fields(attributes=[{"key": "d", "value": {"doubleValue": "NaN"}}]), id="quoted-nan"),
    pytest.param(with_span_fields(attributes=[{"key": "d", "value": {"doubleValue": None}}]), id="null-value"),
    pytest.param(with_span_fields(attributes=[{"key": "b", "value": {"bytesValue": "AAE="}}]), id="bytes-value"),
    pytest.param(with_span_fields(attributes=[{"key": "i", "value": {"intValue": "-12"}}]), id="int-as-string"),
    pytest.param(with_span_fields(attributes=[{"key": "k", "value": {"stringValue": "v", "extra": 1}}]), id="unknown-beside-a-value"),
    pytest.param(with_span_fields(status={"code": "STATUS_CODE_ERROR", "message": "x"}), id="status-enum-name"),
    pytest.param(with_span_fields(traceId="5B8EFFF798038103D269B633813FC60C"), id="upper-case-hex"),
]


@pytest.mark.parametrize("document", LENIENT_JSON)
def test_json_the_fast_path_does_not_know_is_decoded_exactly_as_json_format_decodes_it(document):
    decoded = otlp.decode_request(json_body(document), "json")

    assert decoded == otlp._parse_with_json_format(copy.deepcopy(document))
    assert otlp.count_spans(decoded) == 1


@pytest.mark.parametrize("value", ["!!!", "AAE=x", "A", "AAE==="])
def test_a_bytes_value_that_is_not_base64_is_refused_naming_it(value):
    document = with_span_fields(attributes=[{"key": "b", "value": {"kvlistValue": {"values": [{"key": "c", "value": {"bytesValue": value}}]}}}])

    with pytest.raises(otlp.OtlpError) as refused:
        otlp.decode_request(json_body(document), "json")

    where = "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.kvlistValue.values[0].value.bytesValue"
    assert refused.value.http_status == 400 and refused.value.field == where
    assert f"{where}: expected base64" in refused.value.message


@pytest.mark.parametrize(("value", "decoded"), [("AAE=", b"\x00\x01"), ("AAE", b"\x00\x01"), ("-_8=", b"\xfb\xff"), ("", b"")])
def test_standard_and_url_safe_base64_with_or_without_padding_are_bytes(value, decoded):
    document = with_span_fields(attributes=[{"key": "b", "value": {"bytesValue": value}}])

    request = otlp.decode_request(json_body(document), "json")

    assert request.resource_spans[0].scope_spans[0].spans[0].attributes[0].value.bytes_value == decoded


def test_int64_as_string_or_number_decode_the_same():
    as_strings = with_span_fields(startTimeUnixNano=str(START_NS), endTimeUnixNano=str(START_NS + 5))
    as_numbers = with_span_fields(startTimeUnixNano=START_NS, endTimeUnixNano=START_NS + 5)

    assert otlp.decode_request(json_body(as_strings), "json") == otlp.decode_request(json_body(as_numbers), "json")


def test_unknown_json_fields_are_ignored_everywhere():
    document = js_json(rich_request())
    document["resourceSpans"][0]["scopeSpans"][0]["newScopeField"] = [1]
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["events"][0]["eventExtra"] = "x"
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["status"]["statusExtra"] = {}

    assert otlp.decode_request(json_body(document), "json") == rich_request()


def test_base64_ids_from_non_compliant_senders_are_decoded():
    span = pb_span(1, parent_span_id=(9).to_bytes(8, "big"))
    document = js_json(pb_request(({"service.name": "s"}, [span])))
    json_span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for name in ("traceId", "spanId", "parentSpanId"):
        json_span[name] = base64.b64encode(bytes.fromhex(json_span[name])).decode()
    assert json_span["traceId"].endswith("==") and json_span["spanId"].endswith("=")

    record = only_record(otlp.decode_request(json_body(document), "json"))

    assert (record.trace_id, record.span_id, record.parent_span_id) == (TRACE_ID.hex(), "0000000000000001", "0000000000000009")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("traceId", "zz8efff798038103d269b633813fc60c", "traceId: expected 32 hex characters, got 'zz8efff798038103d269b633813fc60c', which is not hex"),
        ("traceId", "5b8efff798038103d269b633813fc60", "traceId: expected 32 hex characters, got 31"),
        ("spanId", "not-an-id", "spanId: expected 16 hex characters, got 'not-an-id', which is not hex"),
        ("parentSpanId", 12345, "parentSpanId: expected a hex string, got a number"),
    ],
)
def test_json_ids_that_are_not_hex_are_refused_with_400_naming_the_path(field, value, message):
    document = with_span_fields(**{field: value})

    error = refusal(otlp.decode_request, json_body(document), "json")

    assert error.http_status == 400
    assert error.message == f"resourceSpans[0].scopeSpans[0].spans[0].{message}"
    assert error.field == f"resourceSpans[0].scopeSpans[0].spans[0].{field}"


def test_ids_of_the_wrong_length_are_one_rejected_span_in_json_and_in_protobuf_alike():
    # Decodable ids of the wrong length are judged per span, the same for both encodings.
    short = bytes.fromhex("5b8efff798038103d269b633813fc6")  # 15 bytes, 30 hex characters
    protobuf = otlp.decode_request(pb_request(({"service.name": "s"}, [pb_span(1, trace_id=short)])).SerializeToString(), "protobuf")
    from_json = otlp.decode_request(json_body(with_span_fields(traceId=short.hex())), "json")

    for request in (protobuf, from_json):
        rejection = only_rejection(request)
        assert rejection.reason == "invalid trace id"
        assert rejection.detail == "trace_id has 15 bytes (30 hex characters), expected 16"
        assert rejection.trace_id == short.hex()
        assert rejection.count == 1


@pytest.mark.parametrize(
    "fields, reason",
    [
        ({"trace_id": b""}, "invalid trace id"),
        ({"trace_id": bytes(16)}, "invalid trace id"),
        ({"span_id": b"\x01" * 7}, "invalid span id"),
        ({"span_id": bytes(8)}, "invalid span id"),
        ({"parent_span_id": b"\x01" * 4}, "invalid parent span id"),
        ({"start_time_unix_nano": 0, "end_time_unix_nano": 5}, "missing start time"),
        ({"end_time_unix_nano": START_NS - 1}, "end before start"),
        ({"end_time_unix_nano": 0}, "end before start"),
        ({"start_time_unix_nano": NOW_NS + 25 * 3600 * 10**9, "end_time_unix_nano": NOW_NS + 26 * 3600 * 10**9}, "start time in the future"),
        ({"end_time_unix_nano": 2**64 - 1}, "end time in the future"),
    ],
)
def test_spans_that_cannot_be_stored_are_rejected_one_by_one_with_a_stable_reason(fields, reason):
    request = pb_request(({"service.name": "s"}, [pb_span(1, **fields), pb_span(2)]))

    records, rejected = flatten(request)

    assert [record.span_id for record in records] == ["0000000000000002"]
    assert [rejection.reason for rejection in rejected] == [reason]
    assert rejected[0].detail


def test_a_span_without_an_end_time_says_so_in_its_detail():
    records, rejected = flatten(pb_request(({"service.name": "s"}, [pb_span(1, end_time_unix_nano=0)])))

    assert not records and rejected[0].reason == "end before start"
    assert rejected[0].detail.startswith("end_time_unix_nano is 0 (missing")


def test_old_spans_and_spans_within_the_clock_skew_are_kept():
    old = pb_span(1, start_time_unix_nano=10**9, end_time_unix_nano=2 * 10**9)
    early = pb_span(2, start_time_unix_nano=NOW_NS + 3600 * 10**9, end_time_unix_nano=NOW_NS + 3601 * 10**9)

    records, rejected = flatten(pb_request(({"service.name": "s"}, [old, early])))

    assert rejected == [] and len(records) == 2


def test_an_all_zero_parent_span_id_means_a_root_span():
    assert only_record(pb_request(({}, [pb_span(1, parent_span_id=bytes(8))]))).parent_span_id == ""


@pytest.mark.parametrize(
    "document, path",
    [
        ([1, 2, 3], "top level: expected a JSON object (ExportTraceServiceRequest), got an array"),
        ({"resourceSpans": "nope"}, "resourceSpans: expected an array, got a string"),
        ({"resourceSpans": [5]}, "resourceSpans[0]: expected an object, got a number"),
        ({"resourceSpans": [{"scopeSpans": {}}]}, "resourceSpans[0].scopeSpans: expected an array, got an object"),
        ({"resourceSpans": [{"scopeSpans": [{"spans": "abc"}]}]}, "resourceSpans[0].scopeSpans[0].spans: expected an array, got a string"),
        ({"resourceSpans": [{"scopeSpans": [{"spans": [None, "x"]}]}]}, "resourceSpans[0].scopeSpans[0].spans[0]: expected an object, got null"),
        ({"resource_spans": [{"scope_spans": [{"spans": [[]]}]}]}, "resource_spans[0].scope_spans[0].spans[0]: expected an object, got an array"),
        ({"resourceSpans": [{"scopeSpans": [{"spans": [{"links": "x"}]}]}]}, "resourceSpans[0].scopeSpans[0].spans[0].links: expected an array, got a string"),
    ],
)
def test_json_of_the_wrong_shape_is_refused_with_400_naming_the_path(document, path):
    error = refusal(otlp.decode_request, json_body(document), "json")

    assert error.http_status == 400
    assert error.message == path


@pytest.mark.parametrize(
    "fields, path, words",
    [
        ({"attributes": 5}, "resourceSpans[0].scopeSpans[0].spans[0]", "attributes"),
        ({"attributes": [{"key": "a", "value": {"intValue": 1.5}}]}, "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.intValue", "1.5"),
        ({"startTimeUnixNano": "soon"}, "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano", "soon"),
        ({"name": 42}, "resourceSpans[0].scopeSpans[0].spans[0].name", "got 'int'"),
        ({"kind": [1]}, "resourceSpans[0].scopeSpans[0].spans[0].kind", "list"),
    ],
)
def test_values_json_format_cannot_map_are_refused_with_400_naming_the_path(fields, path, words):
    error = refusal(otlp.decode_request, json_body(with_span_fields(**fields)), "json")

    assert error.http_status == 400
    assert error.message.startswith(f"{path}: ")
    assert words in error.message
    assert error.field == path


@pytest.mark.parametrize(
    "body, words",
    [
        (b"{not json", "body is not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2 (char 1)"),
        (b'{"resourceSpans": [}', "line 1 column 20"),
        (b'{"a": "\xff"}', "not UTF-8"),
        (b"[" * 100_000, "JSON"),
    ],
)
def test_invalid_json_is_refused_with_400_naming_the_position(body, words):
    error = refusal(otlp.decode_request, body, "json")

    assert error.http_status == 400
    assert words in error.message


def test_lone_surrogates_in_json_strings_become_replacement_characters():
    # JSON.stringify escapes a JS string cut inside an emoji as a lone \ud83d.
    document = with_span_fields(name="cut emoji \ud83d")
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] = [{"key": "k\udc00", "value": {"stringValue": "x\ud83d"}}]
    body = json.dumps(document).encode()  # ensure_ascii: the surrogates travel as \u escapes
    assert b"\\ud83d" in body

    record = only_record(otlp.decode_request(body, "json"))

    assert record.name == "cut emoji \ufffd"
    assert record.attributes == {"k\ufffd": "x\ufffd"}


def test_a_whole_emoji_sent_as_an_escaped_pair_survives():
    body = json.dumps(with_span_fields(name="smile \U0001f600")).encode()

    assert only_record(otlp.decode_request(body, "json")).name == "smile \U0001f600"


# --- flattening -----------------------------------------------------------------------


def test_each_resource_keeps_its_own_service_and_attributes():
    request = pb_request(
        ({"service.name": "alpha", "deployment.environment.name": "prod", "service.version": "1.2"}, [pb_span(1)]),
        ({"service.name": "beta", "deployment.environment": "staging"}, [pb_span(2), pb_span(3)]),
        ({}, [pb_span(4)]),
    )

    records = {record.span_id[-1]: record for record in only_records(request)}

    assert {key: (r.service, r.environment, r.service_version) for key, r in records.items()} == {
        "1": ("alpha", "prod", "1.2"),
        "2": ("beta", "staging", ""),
        "3": ("beta", "staging", ""),
        "4": ("unknown_service", "", ""),
    }
    assert records["2"].resource_attributes == {"service.name": "beta", "deployment.environment": "staging"}
    assert records["4"].resource_attributes == {}


def test_each_resource_is_flattened_once_and_its_spans_carry_its_digest():
    request = pb_request(
        ({"service.name": "alpha", "secret_token": "sk-live-0123456789abcdef0123"}, [pb_span(1), pb_span(2)]),
        ({"service.name": "empty"}, []),
        ({"secret_token": "sk-live-0123456789abcdef0123", "service.name": "alpha"}, [pb_span(3)]),
    )

    alpha, empty, again = otlp.request_resources(request, DEFAULT_LIMITS)
    records = list(otlp.iter_spans(request, DEFAULT_LIMITS, now_ns=NOW_NS, resources=[alpha, empty, again]))

    assert empty is None  # no spans: nothing to store
    assert alpha.attributes["secret_token"] != "sk-live-0123456789abcdef0123"  # redacted before it is named
    assert alpha.digest == again.digest == resource_digest(alpha.attributes)  # same attributes, any order
    assert [record.resource_attributes for record in records] == [alpha.attributes, alpha.attributes, again.attributes]
    assert records[0].resource_attributes is alpha.attributes  # shared, not copied per span
    assert {record.resource_digest for record in records} == {alpha.digest}


def test_the_newer_environment_attribute_wins_over_the_deprecated_one():
    resource = {"deployment.environment": "old", "deployment.environment.name": "new"}

    assert only_record(pb_request((resource, [pb_span(1)]))).environment == "new"


def test_span_fields_are_flattened_with_hex_ids():
    record = only_record(rich_request_single())

    assert record.trace_id == TRACE_ID.hex()
    assert record.span_id == "0000000000000002"
    assert record.parent_span_id == "0000000000000001"
    assert (record.name, record.kind, record.status_code, record.status_message) == ("execute_tool refund", 1, 2, "refund failed")
    assert (record.start_ns, record.end_ns) == (START_NS, START_NS + 25_000_000)
    assert (record.trace_state, record.flags) == ("vendor=x", 257)
    assert (record.scope_name, record.scope_version) == ("toolwatch.tests", "1.0")
    assert record.events == [{"name": "retry", "time_ns": START_NS + 5, "attributes": {"attempt": 2}}]
    assert record.links == [{"trace_id": bytes(range(1, 17)).hex(), "span_id": bytes(range(1, 9)).hex(), "attributes": {"k": "v"}}]
    assert record.attributes[otlp.DROPPED_ATTRIBUTES] == 1  # as the sender reported


def test_any_values_become_json_ready_python():
    attrs = {
        "string": "x",
        "int": -5,
        "bool": True,
        "double": 1.5,
        "bytes": b"\x00\x01\xff",
        "array": [1, "a", [True, 2.5]],
        "kvlist": {"a": {"b": 1}, "c": []},
        "unset": AnyValue(),
        "strindex": AnyValue(string_value_strindex=3),  # profiles only
    }

    record = only_record(pb_request(({}, [pb_span(1, attrs=attrs)])))

    assert record.attributes == {
        "string": "x",
        "int": -5,
        "bool": True,
        "double": 1.5,
        "bytes": "AAH/",
        "array": [1, "a", [True, 2.5]],
        "kvlist": {"a": {"b": 1}, "c": []},
        "unset": None,
        "strindex": None,
    }
    json.dumps(record.attributes, allow_nan=False)


def test_nan_and_infinite_doubles_become_strings_postgresql_can_store():
    attrs = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "list": [math.nan], "map": {"x": math.inf}}

    record = only_record(pb_request(({"score": math.nan}, [pb_span(1, attrs=attrs)])))

    assert record.attributes == {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity", "list": ["NaN"], "map": {"x": "Infinity"}}
    assert record.resource_attributes == {"score": "NaN"}
    json.dumps([record.attributes, record.resource_attributes], allow_nan=False)


def test_quoted_nan_in_json_becomes_the_same_string():
    document = with_span_fields(attributes=[{"key": "d", "value": {"doubleValue": "-Infinity"}}])

    assert only_record(otlp.decode_request(json_body(document), "json")).attributes == {"d": "-Infinity"}


def test_nul_characters_are_replaced_in_every_stored_string():
    span = pb_span(
        1,
        name="na\x00me",
        trace_state="a=\x00",
        attrs={"k\x00": "v\x00", "list": ["\x00"]},
        status=Status(code=2, message="bad\x00"),
        events=[Span.Event(time_unix_nano=START_NS, name="ev\x00", attributes=key_values({"e": "\x00"}))],
    )
    request = pb_request(({"service.name": "svc\x00"}, [span]), scope="scope\x00")

    record = only_record(request)

    stored = json.dumps([record.name, record.trace_state, record.attributes, record.status_message, record.events,
                         record.service, record.resource_attributes, record.scope_name])  # fmt: skip
    assert "\\u0000" not in stored
    assert record.name == "na\ufffdme" and record.service == "svc\ufffd"


def test_secrets_are_redacted_in_attributes_resources_events_links_and_messages():
    span = pb_span(
        1,
        name="call with sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX",
        attrs={
            "http.request.header.authorization": "Bearer abc.def.ghi",
            "gen_ai.tool.call.arguments": json.dumps({"to": "a@example.com", "password": "hunter2"}),
            "gen_ai.usage.input_tokens": 1200,
            "gen_ai.usage.output_tokens": 80,
            "llm.token_count.prompt": 1200,
        },
        status=Status(code=2, message="auth failed for AKIAIOSFODNN7EXAMPLE"),
        events=[Span.Event(time_unix_nano=START_NS, name="exception", attributes=key_values({"exception.message": "token=abc123xyz rejected", "api_key": "k"}))],
        links=[Span.Link(trace_id=TRACE_ID, span_id=b"\x02" * 8, attributes=key_values({"cookie": "session=1"}))],
    )
    request = pb_request(({"service.name": "s", "openai.api_key": "sk-live"}, [span]))

    record = only_record(request)

    stored = json.dumps([record.name, record.attributes, record.status_message, record.events, record.links, record.resource_attributes])
    for secret in ("ABCDEFGHIJKLMNOP", "abc.def.ghi", "hunter2", "AKIAIOSFODNN7EXAMPLE", "abc123xyz", "session=1", "sk-live"):
        assert secret not in stored
    assert record.attributes["gen_ai.usage.input_tokens"] == 1200
    assert record.attributes["gen_ai.usage.output_tokens"] == 80
    assert record.attributes["llm.token_count.prompt"] == 1200
    assert record.events[0]["attributes"]["api_key"] == REDACTED


def _raw_attributes(span: Span) -> dict:
    return {item.key: otlp._value(item.value) for item in span.attributes}


def test_attributes_repeated_across_spans_and_requests_are_stored_as_the_first_time():
    # Repeated key-value pairs are remembered once redacted: later spans must get exactly
    # what redacting them afresh gives, secrets and cut values included.
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "http.request.header.authorization": "Bearer abcdefghij0123456789",
        "note": "retry with api_key=ABC123 later",
        "url.full": "https://bob:hunter2@api.example.com/v2",
        "nul": "a\x00b",
        "long": "y" * 20_000,
        "count": 3,
        "ok": True,
        "ratio": 0.5,
        "tags": ["a", "token=abcdef123"],
        "map": {"password": "x", "n": 1},
    }
    spans = [pb_span(n, attrs=attrs) for n in range(1, 4)]
    expected = redact_attributes(_raw_attributes(spans[0]), DEFAULT_LIMITS)

    first = only_records(pb_request(({"service.name": "s"}, spans)))
    again = only_records(pb_request(({"service.name": "s"}, [pb_span(9, attrs=attrs)])))

    for record in [*first, *again]:
        assert record.attributes == expected
    assert "hunter2" not in json.dumps(expected) and "ABC123" not in json.dumps(expected)


def test_nested_attribute_values_are_not_shared_between_spans():
    attrs = {"tags": ["a", "b"], "map": {"k": "v"}}
    one, two = only_records(pb_request(({}, [pb_span(1, attrs=attrs), pb_span(2, attrs=attrs)])))

    assert one.attributes == two.attributes
    assert one.attributes["tags"] is not two.attributes["tags"]
    assert one.attributes["map"] is not two.attributes["map"]


def test_a_repeated_value_is_stored_under_each_requests_own_limits():
    span = pb_span(1, attrs={"note": "z" * 200})

    cut = only_record(pb_request(({}, [span])), IngestLimits(max_attribute_value_chars=100)).attributes["note"]
    whole = only_record(pb_request(({}, [span]))).attributes["note"]

    assert cut.endswith(" chars]") and len(cut) == 100
    assert whole == "z" * 200


def test_a_key_sent_twice_keeps_its_first_place_and_its_last_value():
    span = pb_span(1)
    span.attributes.extend(key_values({"a": 1, "b": 2}) + key_values({"a": 3}))

    record = only_record(pb_request(({}, [span])))

    assert list(record.attributes.items()) == [("a", 3), ("b", 2)]


def test_attributes_over_the_limit_are_dropped_and_counted_with_the_senders_own_drops():
    limits = IngestLimits(max_attributes_per_span=3)
    span = pb_span(1, attrs={f"a{n}": n for n in range(5)}, dropped_attributes_count=2)

    record = only_record(pb_request(({f"r{n}": n for n in range(4)}, [span])), limits)

    assert record.attributes == {"a0": 0, "a1": 1, "a2": 2, otlp.DROPPED_ATTRIBUTES: 4}
    assert record.resource_attributes == {"r0": 0, "r1": 1, "r2": 2, otlp.DROPPED_ATTRIBUTES: 1}


def test_events_and_links_over_the_limit_are_dropped_and_counted():
    limits = IngestLimits(max_events_per_span=2, max_links_per_span=2)
    events = [Span.Event(time_unix_nano=START_NS + n, name=f"e{n}") for n in range(3)]
    links = [
        Span.Link(trace_id=TRACE_ID, span_id=b"\x01" * 8),
        Span.Link(trace_id=b"short", span_id=b"\x02" * 8),  # identifies nothing: dropped
        Span.Link(trace_id=TRACE_ID, span_id=b"\x03" * 8),  # over the limit: dropped
    ]
    span = pb_span(1, events=events, links=links, dropped_events_count=1)

    record = only_record(pb_request(({}, [span])), limits)

    assert [event["name"] for event in record.events] == ["e0", "e1"]
    assert [link["span_id"] for link in record.links] == ["01" * 8]
    assert record.attributes == {otlp.DROPPED_EVENTS: 2, otlp.DROPPED_LINKS: 2}


def test_names_keys_values_and_labels_are_cut_at_their_limits():
    limits = IngestLimits(max_name_chars=64, max_attribute_key_chars=40, max_attribute_value_chars=100)
    span = pb_span(
        1,
        name="n" * 500,
        attrs={"k" * 300: "v" * 5000},
        status=Status(code=2, message="m" * 5000),
        events=[Span.Event(time_unix_nano=START_NS, name="e" * 500)],
    )

    record = only_record(pb_request(({"service.name": "s" * 1000}, [span])), limits)

    assert len(record.name) == 64 and TRUNCATION_MARKER in record.name
    assert len(record.events[0]["name"]) == 64
    ((key, value),) = record.attributes.items()
    assert (len(key), len(value)) == (40, 100)
    assert len(record.status_message) == 100


def test_service_environment_version_and_scope_fit_their_256_character_columns():
    resource = {"service.name": "s" * 1000, "deployment.environment.name": "e" * 1000, "service.version": "v" * 1000}

    record = only_record(pb_request((resource, [pb_span(1)]), scope="x" * 1000))

    assert {len(record.service), len(record.environment), len(record.service_version), len(record.scope_name)} == {otlp.LABEL_CHARS}
    assert record.service.startswith("sss") and TRUNCATION_MARKER in record.service


def test_kvlists_nested_deeper_than_the_limit_become_a_marker():
    deep: dict = {"leaf": 1}
    for _ in range(10):
        deep = {"next": deep}

    record = only_record(pb_request(({}, [pb_span(1, attrs={"deep": deep})])), IngestLimits(max_value_depth=3))

    assert record.attributes == {"deep": {"next": {"next": {"next": "[nested too deep]"}}}}


def test_kinds_and_status_codes_outside_the_enums_are_stored_as_unspecified():
    span = pb_span(1, kind=9, status=Status(code=7))

    record = only_record(pb_request(({}, [span])))

    assert (record.kind, record.status_code) == (0, 0)


def test_spans_are_yielded_lazily_so_the_caller_can_write_in_slices():
    items = otlp.iter_spans(pb_request(({}, [pb_span(n) for n in range(1, 4)])), DEFAULT_LIMITS, now_ns=NOW_NS)

    assert inspect.isgenerator(items)
    assert next(items).span_id == "0000000000000001"


def test_more_spans_than_the_limit_is_413_before_anything_is_yielded():
    request = pb_request(({}, [pb_span(1), pb_span(2)]), ({}, [pb_span(3)]))

    error = refusal(lambda: otlp.iter_spans(request, IngestLimits(max_spans_per_request=2), now_ns=NOW_NS))

    assert error.http_status == 413
    assert error.message == "3 spans in one request exceeds the limit of 2"


def test_count_spans_counts_across_resources_and_scopes():
    request = pb_request(({}, [pb_span(1), pb_span(2)]), ({}, [pb_span(3)]))
    request.resource_spans[0].scope_spans.add().spans.append(pb_span(4))

    assert otlp.count_spans(request) == 4
    assert otlp.count_spans(ExportTraceServiceRequest()) == 0


def test_start_days_are_the_utc_days_of_span_starts_within_the_range():
    day = 86_400 * 10**9
    request = pb_request(({}, [pb_span(1), pb_span(2, start_time_unix_nano=NOW_NS - day), pb_span(3, start_time_unix_nano=10**9)]))

    days = otlp.start_days(request, min_ns=NOW_NS - 30 * day, max_ns=NOW_NS + day)

    assert days == {dt.date(2025, 12, 31)}
    assert otlp.start_days(request, min_ns=0, max_ns=NOW_NS) == {dt.date(2025, 12, 31), dt.date(1970, 1, 1)}


# --- responses ------------------------------------------------------------------------


def test_success_is_an_empty_response_in_each_encoding():
    assert otlp.success_body("protobuf") == b""
    assert not ExportTraceServiceResponse.FromString(otlp.success_body("protobuf")).HasField("partial_success")
    assert json.loads(otlp.success_body("json")) == {}
    assert json_format.Parse(otlp.success_body("json"), ExportTraceServiceResponse()) == ExportTraceServiceResponse()


def test_partial_success_round_trips_through_the_proto_classes():
    protobuf = ExportTraceServiceResponse.FromString(otlp.partial_success_body("protobuf", 2, "2 span(s) rejected: end before start"))
    as_json = otlp.partial_success_body("json", 2, "2 span(s) rejected: end before start")

    assert protobuf.partial_success.rejected_spans == 2
    assert protobuf.partial_success.error_message == "2 span(s) rejected: end before start"
    assert json.loads(as_json) == {"partialSuccess": {"rejectedSpans": "2", "errorMessage": "2 span(s) rejected: end before start"}}
    assert json_format.Parse(as_json, ExportTraceServiceResponse()) == protobuf


def test_a_huge_partial_success_message_is_shortened_well_under_the_4_mib_response_limit():
    for media in ("protobuf", "json"):
        body = otlp.partial_success_body(media, 1, "é" * (5 * MIB) + "\ud800")

        assert len(body) < 4 * MIB
        message = json.loads(body)["partialSuccess"]["errorMessage"] if media == "json" else (
            ExportTraceServiceResponse.FromString(body).partial_success.error_message
        )
        assert message.endswith("(shortened)")


@pytest.mark.parametrize(
    "http_status, code",
    [
        (400, code_pb2.INVALID_ARGUMENT),
        (401, code_pb2.UNAUTHENTICATED),
        (403, code_pb2.PERMISSION_DENIED),
        (405, code_pb2.UNIMPLEMENTED),
        (413, code_pb2.RESOURCE_EXHAUSTED),
        (415, code_pb2.INVALID_ARGUMENT),
        (429, code_pb2.RESOURCE_EXHAUSTED),
        (500, code_pb2.INTERNAL),
        (503, code_pb2.UNAVAILABLE),
    ],
)
def test_errors_are_a_google_rpc_status_with_the_matching_code_in_each_encoding(http_status, code):
    protobuf = status_pb2.Status.FromString(otlp.status_body("protobuf", http_status, "what went wrong"))
    as_json = otlp.status_body("json", http_status, "what went wrong")

    assert (protobuf.code, protobuf.message) == (code, "what went wrong")
    assert json.loads(as_json) == {"code": code, "message": "what went wrong"}
    assert json_format.Parse(as_json, status_pb2.Status()) == protobuf


def test_a_400_about_a_known_field_carries_a_bad_request_field_violation():
    error = refusal(otlp.decode_request, json_body({"resourceSpans": [{"scopeSpans": "x"}]}), "json")

    for media in ("protobuf", "json"):
        body = otlp.error_body(media, error)
        status = status_pb2.Status.FromString(body) if media == "protobuf" else json_format.Parse(body, status_pb2.Status())
        detail = error_details_pb2.BadRequest()
        assert status.details[0].Unpack(detail)
        assert detail.field_violations[0].field == "resourceSpans[0].scopeSpans"
        assert detail.field_violations[0].description == error.message


def test_errors_without_a_known_field_have_no_details():
    assert status_pb2.Status.FromString(otlp.status_body("protobuf", 400, "bad", field="")).details == []
    assert status_pb2.Status.FromString(otlp.status_body("protobuf", 413, "big", field="x")).details == []


# --- nesting past what protobuf decoders accept: the same answer in either encoding -------------


def _nested(kvlists: int, arrays: int = 0, innermost: AnyValue | None = None) -> AnyValue:
    value = innermost if innermost is not None else AnyValue(string_value="x")
    for _ in range(arrays):
        value = AnyValue(array_value=ArrayValue(values=[value]))
    for _ in range(kvlists):
        value = AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="k", value=value)]))
    return value


def _with_value_at(where: str, value: AnyValue) -> ExportTraceServiceRequest:
    request = pb_request(({"service.name": "s"}, [pb_span(1, attrs={"a": "b"})]))
    span = request.resource_spans[0].scope_spans[0].spans[0]
    target = {
        "span": span.attributes,
        "event": span.events.add(name="e", time_unix_nano=START_NS).attributes,
        "link": span.links.add(trace_id=span.trace_id, span_id=(7).to_bytes(8, "big")).attributes,
        "resource": request.resource_spans[0].resource.attributes,
        "scope": request.resource_spans[0].scope_spans[0].scope.attributes,
    }[where]
    target.add(key="deep", value=value)
    return request


def _verdict(body: bytes, media: str):
    try:
        return otlp.decode_request(body, media)
    except otlp.OtlpError as exc:
        assert exc.http_status == 400, exc.message
        return exc


# Around upb's limit (a request at level 1, a span attribute's value at 6; a kvlist adds 3 levels,
# an array 2): each shape on either side of it, in every place an attribute map sits.
NESTINGS = [
    pytest.param(where, kvlists, arrays, id=f"{where}-{kvlists}kv-{arrays}arr")
    for where in ("span", "event", "link", "resource", "scope")
    for kvlists, arrays in ((30, 0), (31, 0), (32, 0), (0, 46), (0, 47), (0, 48), (31, 1), (31, 2), (30, 2))
]


@pytest.mark.parametrize(("where", "kvlists", "arrays"), NESTINGS)
def test_nesting_protobuf_refuses_is_refused_as_json_too_and_what_it_takes_is_taken_alike(where, kvlists, arrays):
    request = _with_value_at(where, _nested(kvlists, arrays))
    document = js_json(request)

    from_protobuf = _verdict(request.SerializeToString(), "protobuf")
    from_json = _verdict(json_body(document), "json")
    # and on json_format's path (a bytesValue sends the request there)
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append({"key": "raw", "value": {"bytesValue": "AAE="}})
    from_json_format = _verdict(json_body(document), "json")

    if isinstance(from_protobuf, otlp.OtlpError):
        assert "nested more than 101 levels" in from_protobuf.message
        for refused in (from_json, from_json_format):
            assert isinstance(refused, otlp.OtlpError), "protobuf refuses this nesting: JSON must too"
            assert refused.field.startswith("resourceSpans[0]") and "deep" not in refused.field
            assert refused.message.startswith(f"{refused.field}: nested 102 messages deep, over the 101")
    else:
        assert from_json == request
        assert isinstance(from_json_format, ExportTraceServiceRequest)


def test_an_empty_value_at_the_limit_counts_as_a_level_in_either_encoding():
    fits = _with_value_at("span", _nested(31, 1, innermost=AnyValue()))  # the empty AnyValue at level 101
    over = _with_value_at("span", _nested(31, 1, innermost=AnyValue(kvlist_value=KeyValueList())))  # its KeyValueList at 102

    assert _verdict(fits.SerializeToString(), "protobuf") == fits == _verdict(json_body(js_json(fits)), "json")
    assert isinstance(_verdict(over.SerializeToString(), "protobuf"), otlp.OtlpError)
    assert isinstance(_verdict(json_body(js_json(over)), "json"), otlp.OtlpError)


@pytest.mark.parametrize("kvlists", [32, 33])
def test_a_log_body_nested_past_protobufs_limit_is_refused_in_either_encoding(kvlists):
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest()
    record = request.resource_logs.add().scope_logs.add().log_records.add(time_unix_nano=START_NS)
    record.body.CopyFrom(_nested(kvlists))  # the body is level 5, its innermost value 5 + 3 * kvlists

    verdicts = []
    for body, media in ((request.SerializeToString(), "protobuf"), (json_body(json_format.MessageToDict(request)), "json")):
        try:
            verdicts.append(otlp.decode_logs_request(body, media) == request)
        except otlp.OtlpError as exc:
            verdicts.append(exc.http_status)
    assert verdicts == ([True, True] if kvlists == 32 else [400, 400])
