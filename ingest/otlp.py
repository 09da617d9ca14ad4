"""OTLP/HTTP traces in and out: media type, decompression, decoding, flattening, responses.

Logs and metrics use the same helpers (the section at the end: decode_logs_request,
iter_log_records, decode_metrics_request, count_data_points and their responses).

Pure: no Django, no database. The /v1/traces view calls, in order:

    media = media_type(content_type)            # 415 unless protobuf or JSON
    body = decompress(body, encoding, limit)     # 413 past the limit, 400 corrupt, 415 unknown coding
    request = decode_request(body, media)        # 400 naming the problem (and the JSON path)
    for item in iter_spans(request, limits, now_ns=...):   # 413 over max_spans_per_request
        SpanRecord (flattened, redacted, truncated) or RejectedSpan (counted for partial success)

and answers with success_body / partial_success_body / status_body in the request's
own encoding (content_type_for). Every failure is an OtlpError carrying its HTTP status.

Where a problem is judged (the same for both encodings):
- The whole request is refused (OtlpError) when it cannot be decoded at all: bad
  protobuf, bad JSON, JSON of the wrong shape, an id in JSON that is neither hex nor
  base64, a value json_format cannot map. OTLP says 400 for these and clients do not retry.
- One span is refused (RejectedSpan, reported as partial success) when it decodes but
  cannot be stored: a trace id that is not 16 bytes or all zero, a span id that is
  not 8 bytes or all zero, a parent span id that is neither empty nor 8 bytes, no
  start time, an end before the start, a start or end further in the future than
  limits.max_future_skew_seconds. So the same bytes get the same answer whichever
  encoding carried them: a 30-hex-character traceId in JSON and a 15-byte trace_id
  in protobuf are both one rejected span. Too-old spans are the caller's business
  (it knows the project's retention).

Limits applied while flattening (see ingest.limits): attributes beyond
max_attributes_per_span, events beyond max_events_per_span and links beyond
max_links_per_span are dropped, and how many were dropped (plus what the sender
itself reported dropping) is recorded in the integer attributes
DROPPED_ATTRIBUTES / DROPPED_EVENTS / DROPPED_LINKS, present only when non-zero (an
event's own dropped attributes are counted in the event's attributes). Names are cut
at max_name_chars, keys at max_attribute_key_chars, string values at
max_attribute_value_chars, and everything passes through ingest.redact.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import orjson
from google.protobuf import json_format, message_factory
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsPartialSuccess,
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from ingest import attribute_view
from ingest.limits import DEFAULT_LIMITS, IngestLimits
from ingest.log_events import LogRecordRecord, qualified_event_name, record_call_id, record_digest
from ingest.records import ResourceRecord, SpanRecord, resource_digest
from ingest.redact import (
    CUT_BUDGET_MARKER,
    CUT_ENTRIES_KEY,
    DEPTH_MARKER,
    TRUNCATION_MARKER,
    clean_string,
    cut_items_marker,
    redact_item,
    redact_string,
)

PROTOBUF = "protobuf"
JSON = "json"
_CONTENT_TYPES = {PROTOBUF: "application/x-protobuf", JSON: "application/json"}
_MEDIA_TYPES = {value: key for key, value in _CONTENT_TYPES.items()}

# Bookkeeping attributes written by the flattener (only when non-zero).
DROPPED_ATTRIBUTES = "toolwatch.dropped_attributes_count"
DROPPED_EVENTS = "toolwatch.dropped_events_count"
DROPPED_LINKS = "toolwatch.dropped_links_count"

# Per-span rejection reasons: short and stable, they key the ingest-health counters.
REJECT_TRACE_ID = "invalid trace id"
REJECT_SPAN_ID = "invalid span id"
REJECT_PARENT_SPAN_ID = "invalid parent span id"
REJECT_NO_START = "missing start time"
REJECT_END_BEFORE_START = "end before start"
REJECT_START_IN_FUTURE = "start time in the future"
REJECT_END_IN_FUTURE = "end time in the future"

# service, environment, service_version, scope name and version are stored in
# 256-character columns.
LABEL_CHARS = 256
# OTLP: responses must stay under 4 MiB; a message this long is already unreadable.
MAX_MESSAGE_BYTES = 64 * 1024
_SHORTENED = " … (shortened)"

_NS_PER_DAY = 86_400 * 10**9
_NAME_CACHE_MAX = 1024
_ZERO_TRACE_ID = bytes(16)
_ZERO_SPAN_ID = bytes(8)


class OtlpError(Exception):
    """A request Toolwatch refuses as a whole; `http_status` is 400, 413 or 415.

    `message` is developer-facing English naming the problem; `field` is the JSON
    path or protobuf field at fault when one is known (for google.rpc.BadRequest).
    """

    def __init__(self, http_status: int, message: str, *, field: str = ""):
        super().__init__(message)
        self.http_status = http_status
        self.message = message
        self.field = field


@dataclass(frozen=True, slots=True)
class RejectedSpan:
    """One span refused while flattening; the request itself is still accepted."""

    reason: str  # one of the REJECT_* constants
    detail: str = ""  # the particulars, e.g. "trace_id has 15 bytes, expected 16"
    count: int = 1
    trace_id: str = ""  # hex of whatever the sender sent (may be the wrong length)
    span_id: str = ""


# ---------------------------------------------------------------------------
# Media type and content encoding
# ---------------------------------------------------------------------------


def media_type(content_type_header: str) -> str:
    """PROTOBUF or JSON for a Content-Type header (parameters ignored), else OtlpError(415)."""
    mime = content_type_header.split(";", 1)[0].strip().lower()
    media = _MEDIA_TYPES.get(mime)
    if media is None:
        if not mime:
            raise OtlpError(415, "missing Content-Type; use application/x-protobuf or application/json")
        raise OtlpError(415, f"unsupported media type {mime[:100]!r}; use application/x-protobuf or application/json")
    return media


def content_type_for(media: str) -> str:
    return _CONTENT_TYPES[media]


# Input is fed in slices and output taken in chunks, so refusing a bomb never holds
# more than about `limit` bytes, and no copy of a large unconsumed tail is made per step.
_IN_SLICE = 256 * 1024
_OUT_CHUNK = 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b"


def decompress(body: bytes, content_encoding: str, limit: int) -> bytes:
    """The body decoded per Content-Encoding, never more than `limit` bytes.

    gzip (several members are joined, as gzip -d does), deflate (the zlib wrapper
    the Python exporter sends, raw deflate when the zlib header is absent), identity
    or none. Past the limit: OtlpError(413), raised as soon as the limit is crossed.
    Corrupt or truncated data: 400. Another coding: 415. An empty body stays empty
    (an empty request is a success in OTLP).
    """
    coding = content_encoding.strip().lower()
    if coding in ("", "identity"):
        if len(body) > limit:
            raise OtlpError(413, f"body of {len(body)} bytes exceeds {limit} bytes")
        return body
    if coding not in ("gzip", "x-gzip", "deflate"):
        shown = content_encoding.strip()[:100]
        raise OtlpError(415, f"unsupported Content-Encoding {shown!r}; use gzip, deflate or identity")
    if not body:
        return b""
    if coding == "deflate":
        if body[:2] == _GZIP_MAGIC:
            return _inflate(body, 16 + zlib.MAX_WBITS, limit, "deflate")
        zlib_header = len(body) >= 2 and body[0] & 0x0F == 8 and ((body[0] << 8) | body[1]) % 31 == 0
        return _inflate(body, zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS, limit, "deflate")
    return _inflate(body, 16 + zlib.MAX_WBITS, limit, "gzip")


def _inflate(data: bytes, wbits: int, limit: int, label: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    view = memoryview(data)
    while True:  # one pass per gzip member
        inflater = zlib.decompressobj(wbits)
        pos = 0
        try:
            while not inflater.eof and pos < len(view):
                piece = view[pos : pos + _IN_SLICE]
                pos += len(piece)
                while piece:
                    out = inflater.decompress(piece, min(_OUT_CHUNK, limit - total + 1))
                    total += len(out)
                    if total > limit:
                        raise OtlpError(413, f"decompressed body exceeds {limit} bytes")
                    if out:
                        chunks.append(out)
                    if inflater.eof:
                        break
                    piece = inflater.unconsumed_tail
        except zlib.error as exc:
            raise OtlpError(400, f"body is not valid {label} data: {exc}") from None
        if not inflater.eof:
            raise OtlpError(400, f"{label} body is truncated: the compressed stream does not end")
        rest = inflater.unused_data + view[pos:].tobytes()
        if not rest.strip(b"\0"):  # gzip itself tolerates zero padding after the last member
            return b"".join(chunks)
        if wbits == 16 + zlib.MAX_WBITS and rest[:2] == _GZIP_MAGIC:
            view = memoryview(rest)
            continue
        raise OtlpError(400, f"{len(rest)} bytes of unexpected data after the end of the {label} stream")


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------


def decode_request(body: bytes, media: str, limits: IngestLimits = DEFAULT_LIMITS) -> ExportTraceServiceRequest:
    """The ExportTraceServiceRequest in a (decompressed) body, or OtlpError(400).

    JSON is OTLP/JSON: hex trace/span ids (case-insensitive; base64 from
    non-compliant senders is accepted when it ends in "="), int64 as string or number,
    integer enums, unknown fields ignored. Wrong shapes are refused naming the JSON path.
    A JSON body of more than limits.max_json_values values is refused (413) unparsed.
    """
    if media == PROTOBUF:
        return _decode_protobuf(body, ExportTraceServiceRequest)
    if media == JSON:
        return _decode_json(body, limits)
    raise ValueError(f"unknown media {media!r}")


# Lone surrogates (a JS string cut inside an emoji, then escaped by JSON.stringify)
# cannot be stored in a protobuf string; json_format would refuse the whole request.
_SURROGATE_HINT = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _decode_json(body: bytes, limits: IngestLimits = DEFAULT_LIMITS) -> ExportTraceServiceRequest:
    if not body or body.isspace():
        return ExportTraceServiceRequest()
    document = _json_document(body, limits)
    # The fast builder maps the shapes real exporters send straight into protobuf
    # constructors (about 5x faster than json_format). Anything it does not know
    # for certain goes to json_format, which is the authority on OTLP/JSON.
    try:
        return _build_request(document)
    except _TooDeep:
        _check_message_levels(document)  # raises, naming where
    except (_Unsupported, TypeError, ValueError, OverflowError, RecursionError):
        pass
    return _parse_with_json_format(document)


def json_values(body: bytes) -> int:
    """An upper bound of the values (objects, arrays and their members) a JSON body parses into:
    its "{", "[" and "," bytes (those inside strings count too). bytes.count runs at memory speed."""
    return body.count(b"{") + body.count(b"[") + body.count(b",")


def _json_document(body: bytes, limits: IngestLimits = DEFAULT_LIMITS):
    """The parsed JSON of a body, or OtlpError(400) saying where it is not JSON.

    Refused (413) before parsing when it holds more than limits.max_json_values values: a
    parser builds the whole tree, ~100 bytes of Python per value, so a 64 MiB body of tiny
    values would take a worker past 1 GB (docs/contract/limits.md#ingest-limits)."""
    values = json_values(body)
    if values > limits.max_json_values:
        raise OtlpError(
            413,
            f"JSON body holds about {values} values, over the limit of {limits.max_json_values}; "
            "send smaller batches, or protobuf",
        )
    try:
        if (b"\\u" in body or b"\xed" in body) and _SURROGATE_HINT.search(body):
            document = json.loads(body, object_pairs_hook=_pairs_without_surrogates)
        else:
            document = _loads(body)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno} (char {exc.pos})"
        raise OtlpError(400, f"body is not valid JSON: {exc.msg} at {where}") from None
    except UnicodeDecodeError as exc:
        raise OtlpError(400, f"body is not valid JSON: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except RecursionError:
        raise OtlpError(400, "body is not valid JSON: nested too deeply") from None
    return document


def _loads(body: bytes):
    # orjson parses several times faster than json and makes less garbage; json stays
    # the authority for what orjson refuses (integers beyond 64 bits) and for errors.
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def _pairs_without_surrogates(pairs: list) -> dict:
    out = {}
    for key, value in pairs:
        if type(key) is str and _SURROGATE.search(key):
            key = _SURROGATE.sub("\ufffd", key)
        if type(value) is str and _SURROGATE.search(value):
            value = _SURROGATE.sub("\ufffd", value)
        elif type(value) is list:
            value = [_SURROGATE.sub("\ufffd", v) if type(v) is str else v for v in value]
        out[key] = value
    return out


def _json_id(value: str) -> bytes | None:
    """Bytes of a JSON trace/span id: hex per OTLP/JSON, or base64 from senders that
    used plain proto3 JSON (it always ends in "=" at these lengths); None if neither."""
    if value.endswith("=") and len(value) % 4 == 0:
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error:
            return None
    try:
        return binascii.a2b_hex(value)
    except (binascii.Error, ValueError):
        return None


class _Unsupported(Exception):
    """Raised by the fast JSON builder: let json_format decide."""


def _fast_str(value):
    if type(value) is str:
        return value
    raise _Unsupported


def _fast_uint(value):
    if type(value) is int:
        return value  # the protobuf setter checks the range
    if type(value) is str and value.isdigit() and value.isascii():
        return int(value)
    raise _Unsupported


def _fast_int(value):
    if type(value) is int:
        return value
    if type(value) is str and value.isascii() and value.lstrip("-").isdigit() and value.count("-") <= 1:
        return int(value)
    raise _Unsupported


def _fast_enum(value):
    if type(value) is int:
        return value
    raise _Unsupported


def _fast_id(value):
    if type(value) is str:
        decoded = _json_id(value)
        if decoded is not None:
            return decoded
    raise _Unsupported


# upb (the protobuf decoder of every edge) refuses a message nested more than 100 levels below the
# request: the request is level 1, a span's attribute value (AnyValue) level 6, each kvlist inside
# adds 3 levels and each array 2. The JSON path refuses the same nesting (_TooDeep), so a request
# gets the same answer in either encoding.
MAX_MESSAGE_LEVELS = 101


class _TooDeep(Exception):
    """A JSON value nests messages past MAX_MESSAGE_LEVELS (_decode_json names where)."""


def _fast_any(value, level: int) -> dict:
    """`value` (a JSON AnyValue) as AnyValue keyword arguments; `level` is its message level."""
    if level > MAX_MESSAGE_LEVELS:
        raise _TooDeep
    if type(value) is not dict or len(value) != 1:
        if value == {}:
            return {}
        raise _Unsupported
    for key, inner in value.items():
        break
    kind = type(inner)
    if key == "stringValue":
        if kind is str:
            return {"string_value": inner}
    elif key == "intValue":
        return {"int_value": _fast_int(inner)}
    elif key == "boolValue":
        if kind is bool:
            return {"bool_value": inner}
    elif key == "doubleValue":
        # json_format refuses a bare NaN/Infinity and reads quoted ones: leave both to it.
        if kind is int or (kind is float and inner - inner == 0.0):
            return {"double_value": inner}
    elif key == "arrayValue" or key == "kvlistValue":
        if level + 1 > MAX_MESSAGE_LEVELS:  # the ArrayValue or KeyValueList message itself
            raise _TooDeep
        if key == "arrayValue":
            return {"array_value": {"values": [_fast_any(item, level + 2) for item in _fast_values(inner)]}}
        return {"kvlist_value": {"values": _fast_attributes(_fast_values(inner), level + 2)}}
    raise _Unsupported


def _fast_values(value) -> list:
    if type(value) is dict:
        if not value:
            return []
        if len(value) == 1:
            items = value.get("values")
            if type(items) is list:
                return items
    raise _Unsupported


def _fast_attributes(items, level: int) -> list:
    """JSON KeyValues as KeyValue keyword arguments; `level` is their message level."""
    if type(items) is not list:
        raise _Unsupported
    if items and level > MAX_MESSAGE_LEVELS:
        raise _TooDeep
    scalar = level < MAX_MESSAGE_LEVELS  # whether their values (one level down) may be inlined
    out = []
    append = out.append
    for item in items:
        # Inline the shape nearly every attribute has: {"key": k, "value": {"stringValue" | "intValue": v}}
        try:
            key = item["key"]
            value = item["value"]
            if scalar and len(item) == 2 and len(value) == 1 and type(key) is str:
                if "stringValue" in value:
                    inner = value["stringValue"]
                    if type(inner) is str:
                        append({"key": key, "value": {"string_value": inner}})
                        continue
                elif "intValue" in value:
                    inner = value["intValue"]
                    if type(inner) is int:
                        append({"key": key, "value": {"int_value": inner}})
                        continue
        except (KeyError, TypeError, IndexError):
            pass
        append(_fast_key_value(item, level))
    return out


def _attributes_at(level: int):
    """The converter of a message's attributes, KeyValues at message level `level`."""
    return lambda items: _fast_attributes(items, level)


def _fast_key_value(item, level: int) -> dict:
    if type(item) is not dict:
        raise _Unsupported
    key = item.get("key", "")
    if type(key) is not str:
        raise _Unsupported
    if len(item) == 2 and "value" in item:
        return {"key": key, "value": _fast_any(item["value"], level + 1)}
    if len(item) == 1 and "key" in item:
        return {"key": key}
    raise _Unsupported  # keyStrindex, or unknown fields beside: json_format


def _fast_list(convert):
    def converter(value):
        if type(value) is not list:
            raise _Unsupported
        return [convert(item) for item in value]

    return converter


def _fast_message(descriptor, table: dict):
    """A converter of one message's JSON object into constructor keyword arguments.

    Known fields missing from `table` (snake_case spellings, fields real exporters do
    not send) make it give up rather than drop them; unknown fields are ignored as
    OTLP requires.
    """
    known = {field.name for field in descriptor.fields} | {field.json_name for field in descriptor.fields}

    def converter(value):
        if type(value) is not dict:
            raise _Unsupported
        out = {}
        for key, inner in value.items():
            entry = table.get(key)
            if entry is None:
                if key in known:
                    raise _Unsupported
                continue
            out[entry[0]] = entry[1](inner)
        return out

    return converter


_fast_status = _fast_message(Status.DESCRIPTOR, {"code": ("code", _fast_enum), "message": ("message", _fast_str)})
_fast_event = _fast_message(
    Span.Event.DESCRIPTOR,
    {
        "timeUnixNano": ("time_unix_nano", _fast_uint),
        "name": ("name", _fast_str),
        "attributes": ("attributes", _attributes_at(6)),
        "droppedAttributesCount": ("dropped_attributes_count", _fast_uint),
    },
)
_fast_link = _fast_message(
    Span.Link.DESCRIPTOR,
    {
        "traceId": ("trace_id", _fast_id),
        "spanId": ("span_id", _fast_id),
        "traceState": ("trace_state", _fast_str),
        "attributes": ("attributes", _attributes_at(6)),
        "droppedAttributesCount": ("dropped_attributes_count", _fast_uint),
        "flags": ("flags", _fast_uint),
    },
)
_fast_span = _fast_message(
    Span.DESCRIPTOR,
    {
        "traceId": ("trace_id", _fast_id),
        "spanId": ("span_id", _fast_id),
        "traceState": ("trace_state", _fast_str),
        "parentSpanId": ("parent_span_id", _fast_id),
        "flags": ("flags", _fast_uint),
        "name": ("name", _fast_str),
        "kind": ("kind", _fast_enum),
        "startTimeUnixNano": ("start_time_unix_nano", _fast_uint),
        "endTimeUnixNano": ("end_time_unix_nano", _fast_uint),
        "attributes": ("attributes", _attributes_at(5)),
        "droppedAttributesCount": ("dropped_attributes_count", _fast_uint),
        "events": ("events", _fast_list(_fast_event)),
        "droppedEventsCount": ("dropped_events_count", _fast_uint),
        "links": ("links", _fast_list(_fast_link)),
        "droppedLinksCount": ("dropped_links_count", _fast_uint),
        "status": ("status", _fast_status),
    },
)
_fast_scope = _fast_message(
    InstrumentationScope.DESCRIPTOR,
    {
        "name": ("name", _fast_str),
        "version": ("version", _fast_str),
        "attributes": ("attributes", _attributes_at(5)),
        "droppedAttributesCount": ("dropped_attributes_count", _fast_uint),
    },
)
_fast_resource = _fast_message(
    Resource.DESCRIPTOR,
    {
        "attributes": ("attributes", _attributes_at(4)),
        "droppedAttributesCount": ("dropped_attributes_count", _fast_uint),
    },
)
_fast_scope_spans = _fast_message(
    ScopeSpans.DESCRIPTOR,
    {
        "scope": ("scope", _fast_scope),
        "spans": ("spans", _fast_list(_fast_span)),
        "schemaUrl": ("schema_url", _fast_str),
    },
)
_fast_resource_spans = _fast_message(
    ResourceSpans.DESCRIPTOR,
    {
        "resource": ("resource", _fast_resource),
        "scopeSpans": ("scope_spans", _fast_list(_fast_scope_spans)),
        "schemaUrl": ("schema_url", _fast_str),
    },
)
_fast_request = _fast_message(
    ExportTraceServiceRequest.DESCRIPTOR, {"resourceSpans": ("resource_spans", _fast_list(_fast_resource_spans))}
)


def _build_request(document) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest(**_fast_request(document))


def _parse_with_json_format(document, message_class=ExportTraceServiceRequest, check=None):
    """The authoritative (slow) path: check the shape, turn ids into base64, ParseDict.

    `message_class` is the export request of the signal, `check` its shape-and-ids walker
    (the traces one by default)."""
    (check or _check_shape_and_ids)(document)
    _check_bytes_values(document, "")
    _check_message_levels(document)
    try:
        # Nesting is judged by _check_message_levels (upb's limit); json_format's own stops one level short.
        return json_format.ParseDict(
            document, message_class(), ignore_unknown_fields=True, max_recursion_depth=MAX_MESSAGE_LEVELS + 1
        )
    except json_format.ParseError as exc:
        message, field = _parse_error_message(str(exc), document, message_class)
        raise OtlpError(400, message, field=field) from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise OtlpError(400, f"body is not a valid {message_class.DESCRIPTOR.name}: {exc}") from None


def _check_message_levels(document) -> None:
    """OtlpError(400) naming the first JSON object nested past MAX_MESSAGE_LEVELS. In OTLP/JSON every
    object is a message (there are no maps), so an object's level is the objects on its path."""
    stack = [(document, "", 1)]
    while stack:
        node, path, level = stack.pop()
        if type(node) is dict:
            if level > MAX_MESSAGE_LEVELS:
                raise OtlpError(
                    400,
                    f"{path}: nested {level} messages deep, over the {MAX_MESSAGE_LEVELS} that OTLP's protobuf "
                    "decoders accept (the same request as protobuf is refused too); send the value flatter",
                    field=path,
                )
            children = [(value, f"{path}.{key}" if path else key, level + 1) for key, value in node.items()]
        elif type(node) is list:
            children = [(value, f"{path}[{index}]", level) for index, value in enumerate(node)]
        else:
            continue
        stack.extend(child for child in reversed(children) if type(child[0]) is dict or type(child[0]) is list)


# proto3 JSON's bytes: standard or URL-safe base64, with or without padding. json_format decodes
# leniently (it drops what is not in the alphabet: "!!!" became b""), so a value is checked first.
_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")
_BYTES_VALUE_KEYS = frozenset({"bytesValue", "bytes_value"})


def _check_bytes_values(node, path: str) -> None:
    """OtlpError(400) naming the first AnyValue whose bytesValue is not base64 (only on the
    json_format path: the fast builder leaves every bytesValue to it)."""
    if type(node) is dict:
        for key, value in node.items():
            where = f"{path}.{key}" if path else key
            if key in _BYTES_VALUE_KEYS and type(value) is str:
                if not _BASE64_TEXT.fullmatch(value) or len(value.rstrip("=")) % 4 == 1:
                    raise OtlpError(400, f"{where}: expected base64, got {value[:40]!r}", field=where)
            elif type(value) is dict or type(value) is list:
                _check_bytes_values(value, where)
    elif type(node) is list:
        for index, value in enumerate(node):
            if type(value) is dict or type(value) is list:
                _check_bytes_values(value, f"{path}[{index}]")


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _expect(value, kind: type, path: str):
    if not isinstance(value, kind):
        wanted = "an object" if kind is dict else "an array"
        raise OtlpError(400, f"{path}: expected {wanted}, got {_kind(value)}", field=path)
    return value


def _spelled(container: dict, *names: str) -> list[tuple[str, object]]:
    # json_format also accepts the proto field names (snake_case); check whichever is present.
    return [(name, container[name]) for name in names if container.get(name) is not None]


def _check_shape_and_ids(document) -> None:
    if not isinstance(document, dict):
        raise OtlpError(400, f"top level: expected a JSON object (ExportTraceServiceRequest), got {_kind(document)}")
    for rs_name, resource_spans in _spelled(document, "resourceSpans", "resource_spans"):
        for i, rs in enumerate(_expect(resource_spans, list, rs_name)):
            rs_path = f"{rs_name}[{i}]"
            _expect(rs, dict, rs_path)
            for ss_name, scope_spans in _spelled(rs, "scopeSpans", "scope_spans"):
                for j, ss in enumerate(_expect(scope_spans, list, f"{rs_path}.{ss_name}")):
                    ss_path = f"{rs_path}.{ss_name}[{j}]"
                    _expect(ss, dict, ss_path)
                    for _, spans in _spelled(ss, "spans"):
                        for k, span in enumerate(_expect(spans, list, f"{ss_path}.spans")):
                            span_path = f"{ss_path}.spans[{k}]"
                            _expect(span, dict, span_path)
                            _ids_to_base64(span, span_path, _SPAN_ID_FIELDS)
                            for _, links in _spelled(span, "links"):
                                for m, link in enumerate(_expect(links, list, f"{span_path}.links")):
                                    link_path = f"{span_path}.links[{m}]"
                                    _expect(link, dict, link_path)
                                    _ids_to_base64(link, link_path, _LINK_ID_FIELDS)


_ID_HEX_CHARS = {"traceId": 32, "trace_id": 32, "spanId": 16, "span_id": 16, "parentSpanId": 16, "parent_span_id": 16}
_SPAN_ID_FIELDS = tuple(_ID_HEX_CHARS)
_LINK_ID_FIELDS = ("traceId", "trace_id", "spanId", "span_id")


def _ids_to_base64(container: dict, path: str, names: tuple[str, ...]) -> None:
    for name in names:
        value = container.get(name)
        if value is None:
            continue
        field = f"{path}.{name}"
        if not isinstance(value, str):
            raise OtlpError(400, f"{field}: expected a hex string, got {_kind(value)}", field=field)
        decoded = _json_id(value)
        if decoded is None:
            wanted = _ID_HEX_CHARS[name]
            if len(value) != wanted and all(c in "0123456789abcdefABCDEF" for c in value):
                problem = f"got {len(value)}"
            else:
                problem = f"got {value[:40]!r}, which is not hex"
            raise OtlpError(400, f"{field}: expected {wanted} hex characters, {problem}", field=field)
        container[name] = base64.b64encode(decoded).decode("ascii")


_PARSE_ERROR = re.compile(
    r"^(?P<chain>(?:Failed to parse \w+ field: )*)(?P<detail>.*?)"
    r"(?: at Export(?:Trace|Logs|Metrics)ServiceRequest\.(?P<path>\S+?))?\.*$",
    re.S,
)
_CHAIN_FIELD = re.compile(r"Failed to parse (\w+) field: ")


def _parse_error_message(text: str, document: dict, message_class=ExportTraceServiceRequest) -> tuple[str, str]:
    """json_format's "Failed to parse a field: … at Request.a[0].b" -> ("a[0].b: …", "a[0].b").

    Some of its errors name only the chain of fields, not the indices: those are
    found by parsing the elements along the chain one by one (only ever on this error path).
    """
    name = message_class.DESCRIPTOR.name
    match = _PARSE_ERROR.match(text)
    if match is None:
        return f"body is not a valid {name}: {text}", ""
    path = match.group("path") or _locate(document, _CHAIN_FIELD.findall(match.group("chain")), message_class.DESCRIPTOR)
    if not path:
        return f"body is not a valid {name}: {text}", ""
    return f"{path}: {match.group('detail')}", path


def _locate(document: dict, names: list[str], request_descriptor=ExportTraceServiceRequest.DESCRIPTOR) -> str:
    parts = []
    node, descriptor = document, request_descriptor
    for name in names:
        field = descriptor.fields_by_camelcase_name.get(name) or descriptor.fields_by_name.get(name)
        if field is None or not isinstance(node, dict):
            break
        value = node.get(name)
        if field.message_type is None or not field.is_repeated or not isinstance(value, list):
            parts.append(name)
            node = value
        else:
            message_class = message_factory.GetMessageClass(field.message_type)
            index = next((i for i, item in enumerate(value) if not _parses(item, message_class)), None)
            if index is None:
                parts.append(name)
                break
            parts.append(f"{name}[{index}]")
            node = value[index]
        if field.message_type is None:
            break
        descriptor = field.message_type
    return ".".join(parts)


def _parses(item, message_class) -> bool:
    try:
        json_format.ParseDict(item, message_class(), ignore_unknown_fields=True, max_recursion_depth=MAX_MESSAGE_LEVELS + 1)
    except (json_format.ParseError, TypeError, ValueError, RecursionError):
        return False
    return True


# ---------------------------------------------------------------------------
# Flattening
# ---------------------------------------------------------------------------

# What the bounds cut, by limit: the reasons of IngestStat's "cut" counters. One per value cut
# (an array or kvlist shortened, a string cut, a value too deep, an attribute over a budget)
# and one per attribute, event or link dropped (docs/contract/limits.md#what-was-cut).
CUT_ARRAY_ITEMS = "max_array_items"
CUT_KVLIST_ENTRIES = "max_kvlist_entries"
CUT_DEPTH = "max_value_depth"
CUT_VALUE_CHARS = "max_attribute_value_chars"
CUT_SPAN_BYTES = "max_attribute_bytes_per_span"
CUT_REQUEST_BYTES = "max_attribute_bytes_per_request"
CUT_ATTRIBUTES = "max_attributes_per_span"
CUT_EVENTS = "max_events_per_span"
CUT_LINKS = "max_links_per_span"
# What one value costs of an attribute budget besides its characters (see attribute_cost).
VALUE_COST = 16


class Cuts(Counter):
    """What the bounds cut in one request, by limit (the CUT_* names), and what is left of its
    attribute budget (None until the first span or record draws on it). Pass one to
    request_resources and iter_spans (log_resources and iter_log_records) of a request."""

    left: int | None = None


def attribute_cost(key: str, value) -> int:
    """What one stored attribute costs of a budget: its key's and its string's characters, plus
    VALUE_COST for it and for every array item and kvlist entry inside (so a budget also
    bounds the Python objects made: ~4 bytes of memory per unit at worst)."""
    if type(value) is str:
        return VALUE_COST + len(key) + len(value)
    if type(value) is dict:
        return VALUE_COST + len(key) + sum(attribute_cost(k, v) for k, v in value.items())
    if type(value) is list:
        return VALUE_COST + len(key) + sum(attribute_cost("", v) for v in value)
    return VALUE_COST + len(key)


class _Bound:
    """The attribute budget of one span (or log record, or resource) while it is flattened."""

    __slots__ = ("start", "left", "reason", "items", "entries", "depth", "value_chars", "cuts")

    def __init__(self, limits: IngestLimits, cuts: Cuts):
        if cuts.left is None:
            cuts.left = limits.max_attribute_bytes_per_request
        span = limits.max_attribute_bytes_per_span
        if cuts.left < span:
            self.start, self.reason = max(cuts.left, 0), CUT_REQUEST_BYTES
        else:
            self.start, self.reason = span, CUT_SPAN_BYTES
        self.left = self.start
        self.items = limits.max_array_items
        self.entries = limits.max_kvlist_entries
        self.depth = limits.max_value_depth
        self.value_chars = limits.max_attribute_value_chars
        self.cuts = cuts

    def close(self) -> None:
        """Charge what was spent to the request."""
        self.cuts.left -= self.start - max(self.left, 0)


def _bounded(value: AnyValue, bound: _Bound, depth: int):
    """AnyValue -> JSON-ready Python, as _value, within the bounds: an array keeps its first
    max_array_items items, a kvlist its first max_kvlist_entries entries, each then marked
    (redact.cut_items_marker, redact.CUT_ENTRIES_KEY); a kvlist or array deeper than
    max_value_depth becomes DEPTH_MARKER; and when the budget runs out the rest of an array
    or kvlist is marked the same way. Cut items are never converted: a 58 MB array costs
    the items kept, not 1.9 GB. `depth` is that of `value` (1 for an attribute's own value)."""
    kind = _WHICH_ONE_OF(value, "value")
    if kind == "string_value":
        text = value.string_value
        if len(text) > bound.value_chars:
            bound.cuts[CUT_VALUE_CHARS] += 1
            bound.left -= VALUE_COST + bound.value_chars
        else:
            bound.left -= VALUE_COST + len(text)
        return text
    if kind == "kvlist_value" or kind == "array_value":
        if depth > bound.depth:
            bound.cuts[CUT_DEPTH] += 1
            bound.left -= VALUE_COST + len(DEPTH_MARKER)
            return DEPTH_MARKER
        bound.left -= VALUE_COST
        if kind == "kvlist_value":
            entries = value.kvlist_value.values
            count = len(entries)
            out = {}
            for index, item in enumerate(entries if count <= bound.entries else entries[: bound.entries]):
                if bound.left <= 0:
                    bound.cuts[bound.reason] += 1
                    out[CUT_ENTRIES_KEY] = count - index
                    return out
                key = item.key
                bound.left -= len(key)
                out[key] = _bounded(item.value, bound, depth + 1)
            if count > bound.entries:
                bound.cuts[CUT_KVLIST_ENTRIES] += 1
                out[CUT_ENTRIES_KEY] = count - bound.entries
            return out
        items = value.array_value.values
        count = len(items)
        out = []
        for index, item in enumerate(items if count <= bound.items else items[: bound.items]):
            if bound.left <= 0:
                bound.cuts[bound.reason] += 1
                out.append(cut_items_marker(count - index))
                return out
            out.append(_bounded(item, bound, depth + 1))
        if count > bound.items:
            bound.cuts[CUT_ARRAY_ITEMS] += 1
            out.append(cut_items_marker(count - bound.items))
        return out
    bound.left -= VALUE_COST
    return _value(value)


def count_spans(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def start_days(request: ExportTraceServiceRequest, *, min_ns: int, max_ns: int) -> set[dt.date]:
    """UTC days of the spans' start times within [min_ns, max_ns] (for creating partitions)."""
    days = set()
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                start = span.start_time_unix_nano
                if min_ns <= start <= max_ns:
                    days.add(start // _NS_PER_DAY)
    epoch = dt.date(1970, 1, 1)
    return {epoch + dt.timedelta(days=day) for day in days}


def request_resources(
    request: ExportTraceServiceRequest, limits: IngestLimits, *, cuts: Cuts | None = None
) -> list[ResourceRecord | None]:
    """Each ResourceSpans' resource, flattened and redacted, in request order; None for one
    without spans (nothing will refer to it). Pass the list on to iter_spans, which then
    does not flatten the resources again. What the bounds cut is added to `cuts` (each
    resource has a span's attribute budget, drawn from the request's)."""
    if cuts is None:
        cuts = Cuts()
    return [
        _resource(rs.resource, limits, cuts) if any(ss.spans for ss in rs.scope_spans) else None
        for rs in request.resource_spans
    ]


def _resource(resource: Resource, limits: IngestLimits, cuts: Cuts) -> ResourceRecord:
    redaction = (limits.max_attribute_key_chars, limits.max_attribute_value_chars, limits.max_value_depth)
    bound = _Bound(limits, cuts)
    attributes, dropped = _stored_attributes(resource.attributes, limits.max_attributes_per_span, redaction, bound)
    bound.close()
    dropped += resource.dropped_attributes_count
    if dropped:
        attributes[DROPPED_ATTRIBUTES] = dropped
    environment = _label(attributes.get("deployment.environment.name")) or _label(attributes.get("deployment.environment"))
    return ResourceRecord(
        attributes=attributes,
        digest=resource_digest(attributes),
        service=_label(attributes.get("service.name")) or "unknown_service",
        environment=environment,
        service_version=_label(attributes.get("service.version")),
    )


def iter_spans(
    request: ExportTraceServiceRequest,
    limits: IngestLimits,
    *,
    now_ns: int,
    resources: list[ResourceRecord | None] | None = None,
    cuts: Cuts | None = None,
) -> Iterator[SpanRecord | RejectedSpan]:
    """Each span of the request, flattened, as a SpanRecord, or a RejectedSpan.

    Raises OtlpError(413) here, before anything is yielded, when the request holds
    more than limits.max_spans_per_request spans. Records are made one at a time, so
    the caller can write them in slices. Each ResourceSpans' resource attributes go to
    its own spans only; the resource_attributes dict is shared by the spans of one
    resource (treat it as read-only). `resources` is request_resources(request, limits)
    when the caller already has it. What the bounds cut (array, kvlist, depth and budget
    limits; attributes, events and links dropped) is added to `cuts` as it goes.
    """
    total = count_spans(request)
    if total > limits.max_spans_per_request:
        raise OtlpError(413, f"{total} spans in one request exceeds the limit of {limits.max_spans_per_request}")
    if cuts is None:
        cuts = Cuts()
    if resources is None:
        resources = request_resources(request, limits, cuts=cuts)
    return _flatten(request, limits, now_ns, resources, cuts)


def _nonfinite(number: float) -> str:
    # PostgreSQL jsonb (and JSON) have no NaN or infinities.
    if number != number:
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


def _value(value: AnyValue):
    """AnyValue -> JSON-ready Python. Unset and string_value_strindex (profiles only) -> None."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        number = value.double_value
        return number if number - number == 0.0 else _nonfinite(number)  # x - x is NaN only for NaN and ±inf
    if kind == "kvlist_value":
        return {item.key: _value(item.value) for item in value.kvlist_value.values}
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return None


_WHICH_ONE_OF = AnyValue.WhichOneof
_KEY_VALUE_FROM_STRING = KeyValue.FromString


# Serialised KeyValue -> what it is stored as, per (key chars, value chars, depth) limits: an
# entry (_entry). Most attributes repeat from span to span (operation names, models, hosts, tool
# descriptions, ports): for those, a lookup of its bytes replaces reading the message field
# by field (~0.8 µs an attribute), redacting it again and pricing it. A pair is remembered
# from its second sighting, so the ids and arguments seen once (a few per span) do not crowd
# out the values that repeat; only small scalar pairs are kept, since a nested value would be
# shared by every span that has it. Both maps are bounded (a sender of ever-new values only
# resets them): a few MB per process.
_STORED_PAIRS: dict[tuple[int, int, int], dict[bytes, tuple]] = {}
_SEEN_ONCE: set[bytes] = set()
_STORED_PAIR_BYTES = 512
_STORED_PAIRS_MAX = 20_000

def _entry(pair: tuple[str, object], value_chars: int) -> tuple:
    """(the (key, value) as stored, its cost of the budget (attribute_cost; a nested value's items
    were charged as they were converted), whether it is a string (only a string is cut to
    CUT_BUDGET_MARKER when it does not fit), whether max_attribute_value_chars cut it)."""
    value = pair[1]
    if type(value) is str:
        cut = len(value) == value_chars and value.endswith(" chars]") and TRUNCATION_MARKER in value
        return pair, VALUE_COST + len(pair[0]) + len(value), True, cut
    return pair, VALUE_COST + len(pair[0]), False, False


def _stored_attributes(
    items, max_count: int, limits: tuple[int, int, int], bound: _Bound, messages=None
) -> tuple[dict, int]:
    """The first max_count KeyValues, redacted (redact.redact_item), as a dict, and how
    many were left out: what redact.redact_attributes makes of them, for a fraction of the cost.

    `items` are KeyValue messages or their bytes (an attribute_view's). For bytes, `messages`
    may give the same KeyValues as messages (a function, called only if need be): a large one is
    then read from there rather than parsed a second time (a 60 MB array would be held twice).

    Each is charged to `bound` (attribute_cost); one that does not fit what is left is stored
    as CUT_BUDGET_MARKER. Attributes of up to _STORED_PAIR_BYTES as received (names, ids,
    codes, short messages: what a tool call is recognised and classified by) are fitted
    first, then the larger ones in order, so one huge value cannot crowd them out."""
    count = len(items)
    if count > max_count:
        bound.cuts[CUT_ATTRIBUTES] += count - max_count
    entries = _STORED_PAIRS.get(limits)
    if entries is None:
        entries = _STORED_PAIRS[limits] = {}
    known = entries.get
    found = []
    large = None
    for item in items if count <= max_count else items[:max_count]:
        data = item if type(item) is bytes else item.SerializeToString()
        if len(data) > _STORED_PAIR_BYTES:
            if large is None:
                large = []
            large.append((len(found), item, data))
            found.append(None)
            continue
        entry = known(data)
        if entry is None:
            entry = _stored_entry(item, data, entries, limits, bound)
        pair, cost, text, cut = entry
        if cut:
            bound.cuts[CUT_VALUE_CHARS] += 1
        if text and cost > bound.left:
            bound.cuts[bound.reason] += 1
            pair = (pair[0], CUT_BUDGET_MARKER)
        else:
            bound.left -= cost
        found.append(pair)
    if large is not None:
        parsed = messages() if messages is not None and type(large[0][1]) is bytes else None
        for position, item, data in large:
            pair, cost, text, cut = _stored_entry(item if parsed is None else parsed[position], data, entries, limits, bound)
            if cut:
                bound.cuts[CUT_VALUE_CHARS] += 1
            # A nested value was converted within what was left (and cut inside if need be): kept.
            if text and cost > bound.left:
                bound.cuts[bound.reason] += 1
                pair = (pair[0], CUT_BUDGET_MARKER)
            else:
                bound.left -= cost
            found[position] = pair
    # dict() keeps the first position and the last value of a repeated key, as assignments do.
    return dict(found), max(count - max_count, 0)


def _stored_entry(item, data: bytes, entries: dict, limits: tuple[int, int, int], bound: _Bound) -> tuple:
    if type(item) is bytes:  # from an attribute_view: parsed only now, when the cache has not seen it
        item = _KEY_VALUE_FROM_STRING(item)
    value = item.value
    kind = _WHICH_ONE_OF(value, "value")
    if kind == "string_value":
        raw = value.string_value
    elif kind == "int_value":
        raw = value.int_value
    elif kind == "bool_value":
        raw = value.bool_value
    elif kind == "kvlist_value" or kind == "array_value":
        if bound.left <= 0:  # not converted at all: the caller counts the cut (the key is still cleaned)
            return _entry((redact_item(item.key, CUT_BUDGET_MARKER, limits)[0], CUT_BUDGET_MARKER), limits[1])
        raw = _bounded(value, bound, 1)
    else:
        # A double, bytes or an unset value is charged by the caller alone, as when it comes
        # from the cache (_bounded would charge it once more on first sight).
        raw = _value(value)
    entry = _entry(redact_item(item.key, raw, limits), limits[1])
    if len(data) <= _STORED_PAIR_BYTES and type(raw) is not dict and type(raw) is not list:
        if data in _SEEN_ONCE:
            if len(entries) >= _STORED_PAIRS_MAX:
                entries.clear()
            entries[data] = entry
        else:
            if len(_SEEN_ONCE) >= _STORED_PAIRS_MAX:
                _SEEN_ONCE.clear()
            _SEEN_ONCE.add(data)
    return entry


def _label(value) -> str:
    if value is None:
        return ""
    if type(value) is not str:
        value = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return clean_string(value, LABEL_CHARS)


def _flatten(
    request: ExportTraceServiceRequest,
    limits: IngestLimits,
    now_ns: int,
    resources: list[ResourceRecord | None],
    cuts: Cuts,
) -> Iterator[SpanRecord | RejectedSpan]:
    max_attributes = limits.max_attributes_per_span
    max_events = limits.max_events_per_span
    max_links = limits.max_links_per_span
    name_chars = limits.max_name_chars
    value_chars = limits.max_attribute_value_chars
    latest_ns = now_ns + limits.max_future_skew_seconds * 1_000_000_000
    names: dict[str, str] = {}  # span name -> as stored: a request has few distinct names
    redaction = (limits.max_attribute_key_chars, value_chars, limits.max_value_depth)

    for rs, resource in zip(request.resource_spans, resources, strict=True):
        if resource is None:  # no spans
            continue
        resource_attributes = resource.attributes
        digest = resource.digest
        service = resource.service
        environment = resource.environment
        service_version = resource.service_version

        for ss in rs.scope_spans:
            scope = ss.scope
            scope_name = clean_string(scope.name, LABEL_CHARS)
            scope_version = clean_string(scope.version, LABEL_CHARS)

            real_spans = ss.spans  # what the view holds as bytes, as messages: only large values are read here
            for index, span in enumerate(attribute_view.view(ss).spans if real_spans else ()):
                trace_id = span.trace_id
                span_id = span.span_id
                parent_id = span.parent_span_id
                start_ns = span.start_time_unix_nano
                end_ns = span.end_time_unix_nano
                problem = _span_problem(trace_id, span_id, parent_id, start_ns, end_ns, latest_ns)
                if problem is not None:
                    yield RejectedSpan(problem[0], problem[1], 1, trace_id[:32].hex(), span_id[:32].hex())
                    continue

                bound = _Bound(limits, cuts)
                attributes, dropped_attributes = _stored_attributes(
                    span.attributes, max_attributes, redaction, bound, lambda index=index: real_spans[index].attributes
                )
                dropped_attributes += span.dropped_attributes_count
                if dropped_attributes:
                    attributes[DROPPED_ATTRIBUTES] = dropped_attributes

                events = []
                dropped_events = span.dropped_events_count
                source = span.events
                if source:
                    if len(source) > max_events:
                        dropped_events += len(source) - max_events
                        cuts[CUT_EVENTS] += len(source) - max_events
                    for number, event in enumerate(source if len(source) <= max_events else source[:max_events]):
                        event_attributes, dropped = _stored_attributes(
                            event.attributes, max_attributes, redaction, bound,
                            lambda index=index, number=number: real_spans[index].events[number].attributes,
                        )  # fmt: skip
                        dropped += event.dropped_attributes_count
                        if dropped:
                            event_attributes[DROPPED_ATTRIBUTES] = dropped
                        events.append(
                            {
                                "name": redact_string(event.name, name_chars),
                                "time_ns": event.time_unix_nano,
                                "attributes": event_attributes,
                            }
                        )
                if dropped_events:
                    attributes[DROPPED_EVENTS] = dropped_events

                links = []
                dropped_links = span.dropped_links_count
                source = span.links
                if source:
                    if len(source) > max_links:
                        dropped_links += len(source) - max_links
                        cuts[CUT_LINKS] += len(source) - max_links
                    for number, link in enumerate(source if len(source) <= max_links else source[:max_links]):
                        link_trace, link_span = link.trace_id, link.span_id
                        if len(link_trace) != 16 or len(link_span) != 8:
                            dropped_links += 1  # a link to nothing identifiable
                            continue
                        link_attributes, _ = _stored_attributes(
                            link.attributes, max_attributes, redaction, bound,
                            lambda index=index, number=number: real_spans[index].links[number].attributes,
                        )  # fmt: skip
                        links.append(
                            {"trace_id": link_trace.hex(), "span_id": link_span.hex(), "attributes": link_attributes}
                        )
                if dropped_links:
                    attributes[DROPPED_LINKS] = dropped_links
                bound.close()

                raw_name = span.name
                name = names.get(raw_name)
                if name is None:
                    if len(names) >= _NAME_CACHE_MAX:
                        names.clear()
                    name = names[raw_name] = redact_string(raw_name, name_chars)
                status = span.status
                kind = span.kind
                status_code = status.code
                yield SpanRecord(
                    trace_id=trace_id.hex(),
                    span_id=span_id.hex(),
                    parent_span_id=parent_id.hex() if parent_id and parent_id != _ZERO_SPAN_ID else "",
                    name=name,
                    # Open enums: a value outside the spec's range is stored as unspecified / unset.
                    kind=kind if 0 <= kind <= 5 else 0,
                    start_ns=start_ns,
                    end_ns=end_ns,
                    status_code=status_code if 0 <= status_code <= 2 else 0,
                    status_message=redact_string(status.message, value_chars) if status.message else "",
                    attributes=attributes,
                    resource_attributes=resource_attributes,
                    resource_digest=digest,
                    scope_name=scope_name,
                    scope_version=scope_version,
                    events=events,
                    links=links,
                    trace_state=clean_string(span.trace_state, value_chars) if span.trace_state else "",
                    flags=span.flags,
                    service=service,
                    environment=environment,
                    service_version=service_version,
                )


def _span_problem(
    trace_id: bytes, span_id: bytes, parent_id: bytes, start_ns: int, end_ns: int, latest_ns: int
) -> tuple[str, str] | None:
    """(reason, detail) when a span cannot be stored, else None."""
    if len(trace_id) != 16:
        return REJECT_TRACE_ID, f"trace_id has {len(trace_id)} bytes ({2 * len(trace_id)} hex characters), expected 16"
    if trace_id == _ZERO_TRACE_ID:
        return REJECT_TRACE_ID, "trace_id is all zeros"
    if len(span_id) != 8:
        return REJECT_SPAN_ID, f"span_id has {len(span_id)} bytes ({2 * len(span_id)} hex characters), expected 8"
    if span_id == _ZERO_SPAN_ID:
        return REJECT_SPAN_ID, "span_id is all zeros"
    if parent_id and len(parent_id) != 8:
        return REJECT_PARENT_SPAN_ID, f"parent_span_id has {len(parent_id)} bytes, expected 8 or none"
    if start_ns == 0:
        return REJECT_NO_START, "start_time_unix_nano is 0"
    if end_ns < start_ns:
        if end_ns == 0:  # counted with the ends before their start; the detail says which it is
            return REJECT_END_BEFORE_START, "end_time_unix_nano is 0 (missing: a span is exported once it has ended)"
        return REJECT_END_BEFORE_START, f"end_time_unix_nano {end_ns} is before start_time_unix_nano {start_ns}"
    if start_ns > latest_ns:
        return REJECT_START_IN_FUTURE, f"start_time_unix_nano {start_ns} is past the allowed clock skew"
    if end_ns > latest_ns:
        return REJECT_END_IN_FUTURE, f"end_time_unix_nano {end_ns} is past the allowed clock skew"
    return None


# ---------------------------------------------------------------------------
# Responses (always in the request's own encoding)
# ---------------------------------------------------------------------------

# HTTP status -> google.rpc.Code (google/rpc/code.proto gives the HTTP mapping of each
# code; OTLP clients ignore `code`, but it should not contradict the HTTP status):
# - 413 has no HTTP twin in code.proto. RESOURCE_EXHAUSTED is what gRPC itself answers
#   for a message over the size limit, and OTLP/gRPC retries it only when the server
#   adds RetryInfo (we never do), matching 413's "do not retry". OUT_OF_RANGE would be
#   wrong: OTLP lists it as retryable.
# - 415 and 411: INVALID_ARGUMENT, a property of the request itself that no retry fixes
#   (UNIMPLEMENTED would suggest the server lacks a feature it might gain).
# - 405: UNIMPLEMENTED, "not supported by this service" for that method.
RPC_CODES = {
    400: code_pb2.INVALID_ARGUMENT,
    401: code_pb2.UNAUTHENTICATED,
    403: code_pb2.PERMISSION_DENIED,
    404: code_pb2.NOT_FOUND,
    405: code_pb2.UNIMPLEMENTED,
    408: code_pb2.DEADLINE_EXCEEDED,
    409: code_pb2.ABORTED,
    411: code_pb2.INVALID_ARGUMENT,
    413: code_pb2.RESOURCE_EXHAUSTED,
    415: code_pb2.INVALID_ARGUMENT,
    429: code_pb2.RESOURCE_EXHAUSTED,
    500: code_pb2.INTERNAL,
    501: code_pb2.UNIMPLEMENTED,
    502: code_pb2.UNAVAILABLE,
    503: code_pb2.UNAVAILABLE,
    504: code_pb2.DEADLINE_EXCEEDED,
}


def rpc_code(http_status: int) -> int:
    if http_status in RPC_CODES:
        return RPC_CODES[http_status]
    if 400 <= http_status < 500:
        return code_pb2.INVALID_ARGUMENT
    if http_status >= 500:
        return code_pb2.INTERNAL
    return code_pb2.UNKNOWN


def _shorten(message: str, max_bytes: int = MAX_MESSAGE_BYTES) -> str:
    # encode(errors="replace") also makes lone surrogates safe for a protobuf string.
    encoded = message.encode("utf-8", "replace")
    if len(encoded) <= max_bytes:
        return encoded.decode("utf-8")
    return encoded[: max_bytes - len(_SHORTENED.encode())].decode("utf-8", "ignore") + _SHORTENED


def _json_body(message) -> bytes:
    return json.dumps(json_format.MessageToDict(message), ensure_ascii=False, separators=(",", ":")).encode()


def success_body(media: str) -> bytes:
    """An empty ExportTraceServiceResponse: b"" in protobuf, {} in JSON."""
    return b"{}" if media == JSON else b""


def partial_success_body(media: str, rejected: int, message: str) -> bytes:
    """ExportTraceServiceResponse with partial_success; JSON: {"partialSuccess": {"rejectedSpans": "2", …}}."""
    response = ExportTraceServiceResponse(
        partial_success=ExportTracePartialSuccess(rejected_spans=rejected, error_message=_shorten(message))
    )
    return _json_body(response) if media == JSON else response.SerializeToString()


def status_body(media: str, http_status: int, message: str, *, field: str = "") -> bytes:
    """A google.rpc.Status for an error response; a 400 naming a field carries a BadRequest detail."""
    message = _shorten(message)
    status = status_pb2.Status(code=rpc_code(http_status), message=message)
    if field and http_status == 400:
        violation = error_details_pb2.BadRequest.FieldViolation(field=field[:1024], description=message)
        status.details.add().Pack(error_details_pb2.BadRequest(field_violations=[violation]))
    return _json_body(status) if media == JSON else status.SerializeToString()


def error_body(media: str, error: OtlpError) -> bytes:
    return status_body(media, error.http_status, error.message, field=error.field)


# ---------------------------------------------------------------------------
# Logs and metrics (POST /v1/logs, POST /v1/metrics): the same rules as traces
# ---------------------------------------------------------------------------
# Decoding: protobuf, or OTLP/JSON with hex ids (base64 ending in "=" accepted), int64 as
# string or number, unknown fields ignored; a body that does not decode is an OtlpError(400)
# naming the field. Per record (partial success, as for spans): a trace id that is neither
# empty nor 16 bytes, a span id neither empty nor 8 bytes, no time at all, a time past the
# clock skew. An all-zero trace or span id means "none" (the log data model makes both optional).

REJECT_NO_TIME = "missing time"
REJECT_TIME_IN_FUTURE = "time in the future"
SEVERITY_TEXT_CHARS = 64


def _decode_protobuf(body: bytes, message_class):
    request = message_class()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpError(400, f"body is not a valid {message_class.DESCRIPTOR.name} protobuf: {decode_problem(exc)}") from None
    return request


def decode_problem(exc: DecodeError) -> str:
    """upb's DecodeError, said plainly where it is terse (its depth limit: MAX_MESSAGE_LEVELS)."""
    text = str(exc)
    if "MaxDepth" in text:
        return (
            f"messages nested more than {MAX_MESSAGE_LEVELS} levels deep (an attribute value of kvlists or "
            f"arrays nested some 30 levels), which protobuf decoders refuse; send the value flatter ({text})"
        )
    return text


def decode_logs_request(body: bytes, media: str, limits: IngestLimits = DEFAULT_LIMITS) -> ExportLogsServiceRequest:
    """The ExportLogsServiceRequest in a (decompressed) body, or OtlpError(400)."""
    if media == PROTOBUF:
        return _decode_protobuf(body, ExportLogsServiceRequest)
    if media == JSON:
        if not body or body.isspace():
            return ExportLogsServiceRequest()
        return _parse_with_json_format(_json_document(body, limits), ExportLogsServiceRequest, _check_logs_shape_and_ids)
    raise ValueError(f"unknown media {media!r}")


def decode_metrics_request(body: bytes, media: str, limits: IngestLimits = DEFAULT_LIMITS) -> ExportMetricsServiceRequest:
    """The ExportMetricsServiceRequest in a (decompressed) body, or OtlpError(400)."""
    if media == PROTOBUF:
        return _decode_protobuf(body, ExportMetricsServiceRequest)
    if media == JSON:
        if not body or body.isspace():
            return ExportMetricsServiceRequest()
        return _parse_with_json_format(_json_document(body, limits), ExportMetricsServiceRequest, _check_metrics_shape_and_ids)
    raise ValueError(f"unknown media {media!r}")


def _walk(container, path: str, names: tuple[str, ...]):
    """(path, item) of each element of the list under one spelling of a repeated field."""
    for name, items in _spelled(container, *names):
        for index, item in enumerate(_expect(items, list, f"{path}{name}")):
            item_path = f"{path}{name}[{index}]"
            yield item_path, _expect(item, dict, item_path)


def _check_logs_shape_and_ids(document) -> None:
    if not isinstance(document, dict):
        raise OtlpError(400, f"top level: expected a JSON object (ExportLogsServiceRequest), got {_kind(document)}")
    for rl_path, rl in _walk(document, "", ("resourceLogs", "resource_logs")):
        for sl_path, sl in _walk(rl, rl_path + ".", ("scopeLogs", "scope_logs")):
            for record_path, record in _walk(sl, sl_path + ".", ("logRecords", "log_records")):
                _ids_to_base64(record, record_path, _LINK_ID_FIELDS)


_METRIC_KINDS = ("gauge", "sum", "histogram", "exponentialHistogram", "exponential_histogram", "summary")


def _check_metrics_shape_and_ids(document) -> None:
    if not isinstance(document, dict):
        raise OtlpError(400, f"top level: expected a JSON object (ExportMetricsServiceRequest), got {_kind(document)}")
    for rm_path, rm in _walk(document, "", ("resourceMetrics", "resource_metrics")):
        for sm_path, sm in _walk(rm, rm_path + ".", ("scopeMetrics", "scope_metrics")):
            for metric_path, metric in _walk(sm, sm_path + ".", ("metrics",)):
                for kind, data in _spelled(metric, *_METRIC_KINDS):
                    data_path = f"{metric_path}.{kind}"
                    _expect(data, dict, data_path)
                    for point_path, point in _walk(data, data_path + ".", ("dataPoints", "data_points")):
                        for exemplar_path, exemplar in _walk(point, point_path + ".", ("exemplars",)):
                            _ids_to_base64(exemplar, exemplar_path, _LINK_ID_FIELDS)


def count_log_records(request: ExportLogsServiceRequest) -> int:
    return sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)


def count_data_points(request: ExportMetricsServiceRequest) -> int:
    """Every data point of every metric (gauge, sum, histogram, exponential histogram, summary)."""
    total = 0
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                kind = metric.WhichOneof("data")
                if kind is not None:
                    total += len(getattr(metric, kind).data_points)
    return total


def log_resources(
    request: ExportLogsServiceRequest, limits: IngestLimits, *, cuts: Cuts | None = None
) -> list[ResourceRecord | None]:
    """Each ResourceLogs' resource, flattened and redacted as for spans; None for one without records."""
    if cuts is None:
        cuts = Cuts()
    return [
        _resource(rl.resource, limits, cuts) if any(sl.log_records for sl in rl.scope_logs) else None
        for rl in request.resource_logs
    ]


def log_days(request: ExportLogsServiceRequest, *, min_ns: int, max_ns: int) -> set[dt.date]:
    """UTC days of the records' times within [min_ns, max_ns], and of the day before each (a
    tool call made from a record starts its duration earlier): for creating partitions."""
    days = set()
    for rl in request.resource_logs:
        for sl in rl.scope_logs:
            for record in sl.log_records:
                moment = record.time_unix_nano or record.observed_time_unix_nano
                if min_ns <= moment <= max_ns:
                    days.add(moment // _NS_PER_DAY)
                    days.add(moment // _NS_PER_DAY - 1)
    epoch = dt.date(1970, 1, 1)
    return {epoch + dt.timedelta(days=day) for day in days}


def iter_log_records(
    request: ExportLogsServiceRequest,
    limits: IngestLimits,
    *,
    now_ns: int,
    resources: list[ResourceRecord | None] | None = None,
    cuts: Cuts | None = None,
) -> Iterator[LogRecordRecord | RejectedSpan]:
    """Each log record of the request, flattened (attributes and body redacted and bounded as a
    span's attributes are), as a LogRecordRecord with its digest, or a RejectedSpan (reason).

    Raises OtlpError(413) before yielding anything when the request holds more than
    limits.max_log_records_per_request records."""
    total = count_log_records(request)
    if total > limits.max_log_records_per_request:
        raise OtlpError(
            413, f"{total} log records in one request exceeds the limit of {limits.max_log_records_per_request}"
        )
    if cuts is None:
        cuts = Cuts()
    if resources is None:
        resources = log_resources(request, limits, cuts=cuts)
    max_attributes = limits.max_attributes_per_span
    value_chars = limits.max_attribute_value_chars
    redaction = (limits.max_attribute_key_chars, value_chars, limits.max_value_depth)
    latest_ns = now_ns + limits.max_future_skew_seconds * 1_000_000_000
    for rl, resource in zip(request.resource_logs, resources, strict=True):
        if resource is None:
            continue
        for sl in rl.scope_logs:
            scope_name = clean_string(sl.scope.name, LABEL_CHARS)
            scope_version = clean_string(sl.scope.version, LABEL_CHARS)
            for record in sl.log_records:
                trace_id, span_id = record.trace_id, record.span_id
                problem = _log_problem(record, latest_ns)
                if problem is not None:
                    yield RejectedSpan(problem[0], problem[1], 1, trace_id[:32].hex(), span_id[:32].hex())
                    continue
                bound = _Bound(limits, cuts)
                attributes, dropped = _stored_attributes(record.attributes, max_attributes, redaction, bound)
                dropped += record.dropped_attributes_count
                if dropped:
                    attributes[DROPPED_ATTRIBUTES] = dropped
                body = _log_body(record, redaction, bound)
                bound.close()
                event_name = redact_string(
                    qualified_event_name(record.event_name, attributes, body, scope_name), LABEL_CHARS
                )
                item = LogRecordRecord(
                    time_ns=record.time_unix_nano or record.observed_time_unix_nano,
                    observed_ns=record.observed_time_unix_nano,
                    trace_id=trace_id.hex() if trace_id and trace_id != _ZERO_TRACE_ID else "",
                    span_id=span_id.hex() if span_id and span_id != _ZERO_SPAN_ID else "",
                    severity_number=record.severity_number if 0 <= record.severity_number <= 24 else 0,
                    severity_text=clean_string(record.severity_text, SEVERITY_TEXT_CHARS),
                    event_name=event_name,
                    body=body,
                    attributes=attributes,
                    flags=record.flags,
                    resource_attributes=resource.attributes,
                    resource_digest=resource.digest,
                    scope_name=scope_name,
                    scope_version=scope_version,
                    service=resource.service,
                    environment=resource.environment,
                    call_id=record_call_id(event_name, attributes, body),
                )
                item.digest = record_digest(item)
                yield item


def _log_body(record, redaction: tuple[int, int, int], bound: _Bound):
    if not record.HasField("body"):
        return None
    if bound.left <= 0:
        bound.cuts[bound.reason] += 1
        return CUT_BUDGET_MARKER
    value = _bounded(record.body, bound, 1)
    if value is None:
        return None
    return redact_item("body", value, redaction)[1]


def _log_problem(record, latest_ns: int) -> tuple[str, str] | None:
    trace_id, span_id = record.trace_id, record.span_id
    if trace_id and len(trace_id) != 16:
        return REJECT_TRACE_ID, f"trace_id has {len(trace_id)} bytes ({2 * len(trace_id)} hex characters), expected 16 or none"
    if span_id and len(span_id) != 8:
        return REJECT_SPAN_ID, f"span_id has {len(span_id)} bytes ({2 * len(span_id)} hex characters), expected 8 or none"
    moment = record.time_unix_nano or record.observed_time_unix_nano
    if moment == 0:
        return REJECT_NO_TIME, "time_unix_nano and observed_time_unix_nano are both 0"
    if moment > latest_ns:
        return REJECT_TIME_IN_FUTURE, f"time {moment} is past the allowed clock skew"
    return None


def logs_partial_success_body(media: str, rejected: int, message: str) -> bytes:
    """ExportLogsServiceResponse with partial_success; JSON: {"partialSuccess": {"rejectedLogRecords": "2", …}}."""
    response = ExportLogsServiceResponse(
        partial_success=ExportLogsPartialSuccess(rejected_log_records=rejected, error_message=_shorten(message))
    )
    return _json_body(response) if media == JSON else response.SerializeToString()


def metrics_partial_success_body(media: str, rejected: int, message: str) -> bytes:
    """ExportMetricsServiceResponse with partial_success; JSON: {"partialSuccess": {"rejectedDataPoints": "2", …}}."""
    response = ExportMetricsServiceResponse(
        partial_success=ExportMetricsPartialSuccess(rejected_data_points=rejected, error_message=_shorten(message))
    )
    return _json_body(response) if media == JSON else response.SerializeToString()
