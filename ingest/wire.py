"""Large protobuf trace and log bodies decoded in bounded memory, into exactly what the whole-message
path makes; large metrics bodies checked and their data points counted the same way.

upb's ParseFromString builds the whole message tree (~60 bytes per element) before any bound in
ingest/otlp.py runs: a 63 MiB span of one array of 15 M tiny ints took a worker to 1 GB
(bench/hostile.py). Bodies up to LARGE_BODY_BYTES still take that path (the worst shape costs
~17 bytes of RSS per body byte: ~140 MB there). A larger protobuf body is

1. checked and counted (`decode_traces`, `decode_logs`): the wire format is walked in order, and every run of
   whole fields of up to PIECE_BYTES is parsed by upb with the real classes inside an envelope of
   its ancestors (their tags, lengths of the run), so depth limits, UTF-8 checks and the error
   text are upb's own, as if the body were parsed whole; a message field longer than PIECE_BYTES
   is walked in turn. Each message walked keeps how many of each field it holds and where the
   first few are (`_Node`). Millions of small items are not read one by one in Python: identical
   ones are compared 64 at a time, ones alike in shape (one tag, short lengths) are delimited by a
   regular expression and counted by upb. The spans (log records) are counted, and a body of more
   than max_spans_per_request (max_log_records_per_request) is refused (413) as soon as that is
   known; so are more resources or scopes than max_resources_per_request / max_scopes_per_request
   (what is read one by one in Python is bounded by a limit).
2. flattened (`request_resources`, `iter_spans`; `log_resources`, `iter_log_records`): a resource,
   scope, span or log record of up to PIECE_BYTES (nearly all) is parsed with the real classes and
   flattened by otlp's own functions; a larger span (record) is parsed without its attributes,
   events and links (attributes and body), flattened by otlp._flatten (otlp.iter_log_records), and
   given what the bounds keep of those, read from their first pieces with the original counts
   (`_Reader`), so the markers, the dropped counts and the Cuts are the same.

Traces and logs have the same three levels with the same field numbers (`_Signal`). Metrics are
not stored, so `decode_metrics` only checks a large body the same way and counts its data points
(`_MetricsCheck`), Metrics per request bounded by max_metrics_per_request. The container limits
apply to the whole-message path too (`_check_containers`), so both paths refuse alike.

The edges call these in place of otlp's (ingest/views.py, ingest/grpc_edge.py, ingest/services.py);
anything else is handed to otlp unchanged. Pure: no Django. tests/ingest/test_large_bodies.py and
tests/ingest/test_large_logs_metrics.py hold the two paths to the same records for ordinary and
hostile requests. Some shapes differ on purpose. In a message over PIECE_BYTES, a singular field
sent more than once (a span's name, a log record's body, a ResourceSpans' resource), or an
attribute value that sets its oneof twice or carries unknown fields, is merged by upb but refused
here (413, `_refuse_merges`): merging the copies means parsing the message whole. And a body whose
walked messages (ResourceSpans and ScopeSpans too, and the tags inside groups) hold more than
MAX_FIELDS_ONE_BY_ONE fields that are not runs of one kind is refused (413): each is read in
Python, and millions of them would outlast the write deadline. So is a walked ResourceSpans' or
ScopeSpans' resource or scope (with their other fields but the scopes or spans) over MAX_HEAD_BYTES:
upb parses that part whole.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric, ResourceMetrics
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span

from ingest import otlp
from ingest.limits import DEFAULT_LIMITS, MIB, IngestLimits
from ingest.log_events import LogRecordRecord, qualified_event_name, record_call_id, record_digest
from ingest.records import ResourceRecord, SpanRecord
from ingest.redact import (
    CUT_BUDGET_MARKER,
    CUT_ENTRIES_KEY,
    DEPTH_MARKER,
    TRUNCATION_MARKER,
    cut_items_marker,
    redact_item,
    redact_string,
)

# Bodies above this take the walk; below it the worst shape stays far under 400 MB (bench/hostile.py).
LARGE_BODY_BYTES = 8 * MIB
# A message up to this is parsed whole (at worst ~30 MB while it lives); a longer one is walked.
PIECE_BYTES = 1 * MIB
# Attributes of up to this many bytes (re-serialised) are fitted first: otlp._STORED_PAIR_BYTES.
_SMALL_PAIR_BYTES = 512
# upb's nesting limit (upb_DecodeOptions_MaxDepth): deeper than this is a 400 whatever the path.
_MAX_DEPTH = 100
# Fields the walk reads one by one in Python (~1 µs each; runs of identical items and items alike
# in shape are counted in bulk, not one by one), per body: past this a body is a 413, so that no
# shape can keep a worker past the write deadline (32 M attributes and events in turn took 27 s idle).
MAX_FIELDS_ONE_BY_ONE = 4_000_000
# Field numbers a walked message may hold that its class does not define (each is noted apart: 3.9 M
# of them, each its own number, took a span's walk to ~1.9 GB); an OTLP message defines ~15.
MAX_UNKNOWN_NUMBERS = 64
# A walked ResourceSpans' (ScopeSpans') resource (scope) and other fields but its scopes (spans), in
# bytes: that part is parsed whole. Real resources are a few KB; past this, 413.
MAX_HEAD_BYTES = 1 * MIB

_SPAN_ATTRIBUTES, _SPAN_EVENTS, _SPAN_LINKS = 9, 11, 13
_EVENT_ATTRIBUTES, _LINK_ATTRIBUTES = 3, 4
_RECORD_ATTRIBUTES, _RECORD_BODY = 6, 5
_ARRAY_VALUE, _KVLIST_VALUE = 5, 6


class _Corrupt(Exception):
    """The walk met bytes that are not protobuf: upb is asked to say why."""


class _Unsure(Exception):
    """upb accepted what the walk refused: decode the whole body the ordinary way."""


@dataclass(slots=True)
class _Node:
    """A message the check walked (longer than PIECE_BYTES): its fields' counts, and the first
    `cap` of each as (field start, value start, end)."""

    counts: dict[int, int] = field(default_factory=dict)
    first: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)


@dataclass(slots=True)
class _ScopeIndex:
    start: int  # the ScopeSpans' payload
    end: int
    head: bytes = b""  # its fields other than the spans (walked ones only)
    spans: list[tuple[int, int]] | None = None  # walked ones only: each span's payload


@dataclass(slots=True)
class _ResourceIndex:
    start: int  # the ResourceSpans' payload (walked ones only)
    end: int
    whole: bytes = b""  # a small one, re-serialised
    head: bytes = b""  # walked ones only: fields other than scope_spans
    scopes: list[_ScopeIndex] | None = None  # walked ones only: the scopes holding spans


@dataclass(frozen=True)
class _Signal:
    """What differs between traces and logs (and metrics, only checked): the classes and the
    names of their three levels, whose field numbers are the same (1 resources, 2 scopes, 2 items)."""

    request: type
    resource: type
    item: type
    resources: str  # the request's repeated field
    scopes: str
    items: str
    noun: str  # in the 413 message
    limit: str  # the IngestLimits field bounding the items


TRACES = _Signal(ExportTraceServiceRequest, ResourceSpans, Span, "resource_spans", "scope_spans", "spans", "spans",
                 "max_spans_per_request")  # fmt: skip
LOGS = _Signal(ExportLogsServiceRequest, ResourceLogs, LogRecord, "resource_logs", "scope_logs", "log_records",
               "log records", "max_log_records_per_request")  # fmt: skip
METRICS = _Signal(ExportMetricsServiceRequest, ResourceMetrics, Metric, "resource_metrics", "scope_metrics", "metrics",
                  "metrics", "max_metrics_per_request")  # fmt: skip


@dataclass(eq=False)
class LargeRequest:
    """A checked ExportTraceServiceRequest or ExportLogsServiceRequest body, flattened piece by
    piece (see the module docstring)."""

    signal: _Signal
    data: bytes
    span_count: int  # spans or log records
    resources: list[_ResourceIndex]  # the ResourceSpans (ResourceLogs) holding items, in order
    nodes: dict[int, _Node]  # by payload start
    starts: list[int]  # the items' times (the first limit + 1)
    limits: IngestLimits


@dataclass(frozen=True)
class CountedMetrics:
    """A checked ExportMetricsServiceRequest body: its data points counted, nothing flattened."""

    data_points: int


def _decode(signal: _Signal, whole, body: bytes, media: str, limits: IngestLimits):
    if media != otlp.PROTOBUF or len(body) <= LARGE_BODY_BYTES:
        request = whole(body, media, limits)
        _check_containers(signal, request, limits)
        return request
    try:
        return (_MetricsCheck if signal is METRICS else _Check)(body, limits, signal).request()
    except _Unsure:
        request = whole(body, media, limits)
        _check_containers(signal, request, limits)
        return request


def decode_traces(body: bytes, media: str, limits: IngestLimits = DEFAULT_LIMITS):
    """otlp.decode_request, but a protobuf body over LARGE_BODY_BYTES becomes a LargeRequest:
    the same 400 for the same bytes, and the same records from the functions below. More
    ResourceSpans or ScopeSpans than the limits allow: 413, either way."""
    return _decode(TRACES, otlp.decode_request, body, media, limits)


def decode_logs(body: bytes, media: str, limits: IngestLimits = DEFAULT_LIMITS):
    """otlp.decode_logs_request, as decode_traces (ResourceLogs, ScopeLogs, log records)."""
    return _decode(LOGS, otlp.decode_logs_request, body, media, limits)


def decode_metrics(body: bytes, media: str, limits: IngestLimits = DEFAULT_LIMITS):
    """otlp.decode_metrics_request, but a protobuf body over LARGE_BODY_BYTES is only checked (the
    same 400) and its data points counted, as a CountedMetrics: metrics are not stored. More
    ResourceMetrics, ScopeMetrics or Metrics than the limits allow: 413, either way."""
    return _decode(METRICS, otlp.decode_metrics_request, body, media, limits)


def _too_many(what: str, count: int, limit: int, name: str, *, more: bool = False) -> otlp.OtlpError:
    said = f"more than {limit}" if more else str(count)
    return otlp.OtlpError(413, f"{said} {what} in one request exceeds the limit of {limit} ({name})")


def _check_containers(signal: _Signal, request, limits: IngestLimits) -> None:
    """The container limits on a whole decoded request (the walk applies them as it counts)."""
    resources = getattr(request, signal.resources)
    if len(resources) > limits.max_resources_per_request:
        raise _too_many(signal.resource.__name__, len(resources), limits.max_resources_per_request,
                        "max_resources_per_request")  # fmt: skip
    scopes = sum(len(getattr(resource, signal.scopes)) for resource in resources)
    if scopes > limits.max_scopes_per_request:
        raise _too_many(_scope_name(signal), scopes, limits.max_scopes_per_request, "max_scopes_per_request")
    if signal is METRICS:
        metrics = sum(len(scope.metrics) for resource in resources for scope in resource.scope_metrics)
        if metrics > limits.max_metrics_per_request:
            raise _too_many("metrics", metrics, limits.max_metrics_per_request, "max_metrics_per_request")


def _scope_name(signal: _Signal) -> str:
    return "Scope" + signal.resource.__name__.removeprefix("Resource")


def count_spans(request) -> int:
    if type(request) is LargeRequest:
        return request.span_count
    return otlp.count_spans(request)


def count_log_records(request) -> int:
    if type(request) is LargeRequest:
        return request.span_count
    return otlp.count_log_records(request)


def count_data_points(request) -> int:
    if type(request) is CountedMetrics:
        return request.data_points
    return otlp.count_data_points(request)


def _days(moments, min_ns: int, max_ns: int, *, before: bool = False) -> set[dt.date]:
    days = {moment // otlp._NS_PER_DAY for moment in moments if min_ns <= moment <= max_ns}
    if before:  # otlp.log_days: and the day before each
        days |= {day - 1 for day in days}
    epoch = dt.date(1970, 1, 1)
    return {epoch + dt.timedelta(days=day) for day in days}


def start_days(request, *, min_ns: int, max_ns: int) -> set[dt.date]:
    if type(request) is not LargeRequest:
        return otlp.start_days(request, min_ns=min_ns, max_ns=max_ns)
    return _days(request.starts, min_ns, max_ns)


def log_days(request, *, min_ns: int, max_ns: int) -> set[dt.date]:
    if type(request) is not LargeRequest:
        return otlp.log_days(request, min_ns=min_ns, max_ns=max_ns)
    return _days(request.starts, min_ns, max_ns, before=True)


def request_resources(request, limits: IngestLimits, *, cuts: otlp.Cuts | None = None) -> list[ResourceRecord | None]:
    """otlp.request_resources; for a LargeRequest, one per ResourceSpans holding spans (what iter_spans takes)."""
    if type(request) is not LargeRequest:
        return otlp.request_resources(request, limits, cuts=cuts)
    return _large_resources(request, limits, cuts)


def log_resources(request, limits: IngestLimits, *, cuts: otlp.Cuts | None = None) -> list[ResourceRecord | None]:
    """otlp.log_resources; for a LargeRequest, one per ResourceLogs holding records (what iter_log_records takes)."""
    if type(request) is not LargeRequest:
        return otlp.log_resources(request, limits, cuts=cuts)
    return _large_resources(request, limits, cuts)


def _large_resources(request: LargeRequest, limits: IngestLimits, cuts: otlp.Cuts | None):
    if cuts is None:
        cuts = otlp.Cuts()
    return [otlp._resource(_resource_head(request, index).resource, limits, cuts) for index in request.resources]


def iter_spans(request, limits: IngestLimits, *, now_ns: int, resources=None, cuts: otlp.Cuts | None = None):
    """otlp.iter_spans, for either kind of decoded request."""
    if type(request) is not LargeRequest:
        return otlp.iter_spans(request, limits, now_ns=now_ns, resources=resources, cuts=cuts)
    return _iter_large(request, limits, now_ns, resources, cuts)


def iter_log_records(request, limits: IngestLimits, *, now_ns: int, resources=None, cuts: otlp.Cuts | None = None):
    """otlp.iter_log_records, for either kind of decoded request."""
    if type(request) is not LargeRequest:
        return otlp.iter_log_records(request, limits, now_ns=now_ns, resources=resources, cuts=cuts)
    return _iter_large(request, limits, now_ns, resources, cuts)


def _iter_large(request: LargeRequest, limits: IngestLimits, now_ns: int, resources, cuts: otlp.Cuts | None):
    signal = request.signal
    limit = getattr(limits, signal.limit)
    if request.span_count > limit:
        raise otlp.OtlpError(413, f"{request.span_count} {signal.noun} in one request exceeds the limit of {limit}")
    if _cap(limits) > _cap(request.limits) or limit > getattr(request.limits, signal.limit):
        request = _Check(request.data, limits, signal).request()  # checked under smaller limits: it noted too little
    if cuts is None:
        cuts = otlp.Cuts()
    if resources is None:
        resources = _large_resources(request, limits, cuts)
    return _flatten(request, limits, now_ns, resources, cuts)


# ---------------------------------------------------------------------------
# The wire format
# ---------------------------------------------------------------------------


def _varint_bytes(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _ld(number: int, payload: bytes) -> bytes:
    return _varint_bytes(number << 3 | 2) + _varint_bytes(len(payload)) + payload


def _envelope(path: tuple[int, ...], payload: bytes) -> bytes:
    """`payload` as the fields of the message at `path` (field numbers from the request down)."""
    heads = []
    size = len(payload)
    for number in reversed(path):
        head = _varint_bytes(number << 3 | 2) + _varint_bytes(size)
        heads.append(head)
        size += len(head)
    heads.reverse()
    heads.append(payload)
    return b"".join(heads)


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(10):
        if pos >= end:
            raise _Corrupt
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise _Corrupt


def _skip(data: bytes, wire_type: int, number: int, pos: int, end: int) -> int:
    """The end of a field's value that is not length-delimited (a group's: _group_end)."""
    if wire_type == 0:
        return _varint(data, pos, end)[1]
    if wire_type == 1:
        pos += 8
    elif wire_type == 5:
        pos += 4
    elif wire_type == 3:
        return _group_end(data, number, pos, end, MAX_FIELDS_ONE_BY_ONE)[0]
    else:
        raise _Corrupt
    if pos > end:
        raise _Corrupt
    return pos


def _group_end(data: bytes, number: int, pos: int, end: int, most: int) -> tuple[int, int]:
    """(the end of a group's value, the tags read in it, nested groups' too), reading no more
    than `most` + 1 of them (past that, where it stopped: the caller refuses the body, 413).
    Groups are no part of OTLP, but protobuf skips them as unknown fields, so the walk does too,
    one tag at a time and in a loop: recursion took Python past its own limit at ~1,000 nested
    groups (a 500), and groups nested deeper than upb allows anywhere (_MAX_DEPTH) are _Corrupt
    (upb refuses them too: the same 400). What upb accepts and refuses inside a group is its own:
    any field number, 0 too; wire types 0-5; an end tag matching the group's number."""
    groups = [number]
    read = 0
    while read <= most:
        tag, pos = _varint(data, pos, end)
        # Inside a group upb accepts field number 0 (it skips by wire type alone), so the walk does
        # too: calling it corrupt sent the body to the whole parse (_Unsure) for upb to accept.
        if tag >> 32:
            raise _Corrupt
        read += 1
        wire_type = tag & 7
        if wire_type == 4:
            if tag >> 3 != groups.pop():
                raise _Corrupt
            if not groups:
                return pos, read
        elif wire_type == 3:
            if len(groups) >= _MAX_DEPTH:
                raise _Corrupt
            groups.append(tag >> 3)
        elif wire_type == 2:
            size, pos = _varint(data, pos, end)
            pos += size
            if pos > end:
                raise _Corrupt
        else:
            pos = _skip(data, wire_type, tag >> 3, pos, end)
    return pos, read


def _unknown(descriptor, seen: int) -> int:
    """One more field number `descriptor` does not define, in a walked message: past
    MAX_UNKNOWN_NUMBERS, 413 (each would be noted apart, ~350 bytes each)."""
    if seen >= MAX_UNKNOWN_NUMBERS:
        raise otlp.OtlpError(413, f"{_a(descriptor.name)} over {PIECE_BYTES:,} bytes carries more than "
                                  f"{MAX_UNKNOWN_NUMBERS} field numbers it does not define")  # fmt: skip
    return seen + 1


class _Head:
    """A walked ResourceSpans' (ScopeSpans') own fields: every field number counted (a singular field
    sent twice is refused at `finish`, as in other walked messages; past MAX_UNKNOWN_NUMBERS undefined
    numbers, 413), and the fields but its scopes (spans) kept, as joined ranges (millions of small fields
    in a row are one range), up to MAX_HEAD_BYTES: upb parses that part, the resource (scope), whole,
    and a Resource of 6.7 M attributes took a worker to 926 MB (bench/hostile.py's pb_big_resource)."""

    def __init__(self, descriptor, what: str):
        self.descriptor, self.what = descriptor, what
        self.counts: dict[int, int] = {}
        self.unknown = 0
        self.ranges: list[tuple[int, int]] = []
        self.size = 0

    def count(self, number: int) -> None:
        if number not in self.counts and number not in self.descriptor.fields_by_number:
            self.unknown = _unknown(self.descriptor, self.unknown)
        self.counts[number] = self.counts.get(number, 0) + 1

    def keep(self, start: int, end: int) -> None:
        self.size += end - start
        if self.size > MAX_HEAD_BYTES:
            descriptor, what = self.descriptor, self.what
            raise otlp.OtlpError(413, f"the {what} of {_a(descriptor.name)} (its fields but "
                                      f"{descriptor.fields_by_number[2].name}) exceeds {MAX_HEAD_BYTES:,} bytes: "
                                      f"a {what} of a few KB is what OTLP senders write")  # fmt: skip
        if self.ranges and self.ranges[-1][1] == start:
            self.ranges[-1] = (self.ranges[-1][0], end)
        else:
            self.ranges.append((start, end))

    def finish(self, data: bytes) -> bytes:
        _refuse_merges(self.descriptor, _Node(self.counts))
        return b"".join(data[a:b] for a, b in self.ranges)


def _one_by_one(name: str) -> otlp.OtlpError:
    return otlp.OtlpError(413, f"more than {MAX_FIELDS_ONE_BY_ONE:,} protobuf fields in messages over "
                               f"{PIECE_BYTES:,} bytes are not runs of one kind (as in a {name}): send each "
                               "repeated field's items together")  # fmt: skip


def _fields(check: _Check, start: int, end: int, name: str) -> Iterator[tuple[int, int, int, int, int]]:
    """(number, wire type, field start, value start, end) of each field of check.data[start:end],
    each (and each tag inside a group) counted in check.fields_read: past MAX_FIELDS_ONE_BY_ONE, 413."""
    data = check.data
    pos = start
    while pos < end:
        check.fields_read += 1
        if check.fields_read > MAX_FIELDS_ONE_BY_ONE:
            raise _one_by_one(name)
        field_start = pos
        tag, pos = _varint(data, pos, end)
        number, wire_type = tag >> 3, tag & 7
        if number == 0 or tag >> 32:
            raise _Corrupt
        if wire_type == 2:
            size, pos = _varint(data, pos, end)
            value_start, pos = pos, pos + size
            if pos > end or size >> 31:
                raise _Corrupt
        elif wire_type == 3:
            value_start = pos
            pos, read = _group_end(data, number, pos, end, MAX_FIELDS_ONE_BY_ONE - check.fields_read)
            check.fields_read += read
            if check.fields_read > MAX_FIELDS_ONE_BY_ONE:
                raise _one_by_one(name)
        else:
            value_start, pos = pos, _skip(data, wire_type, number, pos, end)
        yield number, wire_type, field_start, value_start, pos


# ---------------------------------------------------------------------------
# 1. The check
# ---------------------------------------------------------------------------


def _cap(limits: IngestLimits) -> int:
    """How many of each field of a walked message are noted: the most any bound keeps, and one."""
    return 1 + max(
        limits.max_attributes_per_span, limits.max_events_per_span, limits.max_links_per_span,
        limits.max_array_items, limits.max_kvlist_entries,
    )  # fmt: skip


class _Check:
    def __init__(self, data: bytes, limits: IngestLimits, signal: _Signal = TRACES):
        self.data = data
        self.limits = limits
        self.signal = signal
        self.cap = _cap(limits)
        self.nodes: dict[int, _Node] = {}
        self.spans = 0  # spans or log records
        self.indexed = 0  # items of walked scopes listed
        self.containers = {"resources": 0, "scopes": 0, "metrics": 0}
        self.starts: list[int] = []
        self.resources: list[_ResourceIndex] = []
        self.fields_read = 0  # one by one, by walk(): MAX_FIELDS_ONE_BY_ONE

    def request(self) -> LargeRequest:
        # The top level is walked by the hot loop too: 63 MiB can hold 32 M empty ResourceSpans.
        self.walk(0, len(self.data), (), self.signal.request.DESCRIPTOR, {1: self._resource_spans}, self.top_run)
        return LargeRequest(self.signal, self.data, self.spans, self.resources, self.nodes, self.starts, self.limits)

    def top_run(self, result) -> None:
        """The ResourceSpans of a parsed run of the top level: those holding spans are kept re-serialised."""
        signal = self.signal
        resources = getattr(result, signal.resources)
        self.add("resources", len(resources))  # before they are looked at one by one
        for rs in resources:
            scopes = getattr(rs, signal.scopes)
            self.add("scopes", len(scopes))
            if any(getattr(ss, signal.items) for ss in scopes):
                for ss in scopes:
                    self.count(getattr(ss, signal.items))
                self.resources.append(_ResourceIndex(-1, -1, whole=rs.SerializeToString()))

    def add(self, what: str, count: int) -> None:
        """Count containers; refused (413) as soon as over their limit, before they are read."""
        total = self.containers[what] = self.containers[what] + count
        name = f"max_{what}_per_request"
        limit = getattr(self.limits, name)
        if total > limit:
            signal = self.signal
            noun = {"resources": signal.resource.__name__, "scopes": _scope_name(signal), "metrics": "metrics"}[what]
            raise _too_many(noun, total, limit, name, more=True)

    def parse(self, path: tuple[int, ...], start: int, end: int):
        request = self.signal.request
        try:
            return request.FromString(_envelope(path, self.data[start:end]))
        except DecodeError as exc:
            raise otlp.OtlpError(400, f"body is not a valid {request.DESCRIPTOR.name} protobuf: {otlp.decode_problem(exc)}") from None

    def refute(self, path: tuple[int, ...], start: int, end: int) -> None:
        """The walk found bytes it cannot read at `start`: upb names the problem (or, if it reads
        them after all, the body goes the ordinary way)."""
        self.parse(path, start, end)
        raise _Unsure

    def count(self, items) -> None:
        if self.signal is LOGS:
            for record in items:
                self.add_span(record.time_unix_nano or record.observed_time_unix_nano)
            return
        for span in items:
            self.add_span(span.start_time_unix_nano)

    def add_span(self, start_ns: int) -> None:
        self.spans += 1
        self.starts.append(start_ns)
        limit = getattr(self.limits, self.signal.limit)
        if self.spans > limit:
            # Refused as soon as counted (the rest is not read): the same 413 as the edges' count,
            # before a 400 the rest might earn.
            noun = self.signal.noun
            raise otlp.OtlpError(413, f"more than {limit} {noun} in one request exceeds the limit of {limit}")

    def on_runs(self, path: tuple[int, ...], result, entries: list[tuple[int, int]]):
        signal = self.signal
        resource = getattr(result, signal.resources)[0]
        if path == (1,):
            scopes = self.resources[-1].scopes
            for (start, end), ss in zip(entries, getattr(resource, signal.scopes), strict=True):
                if getattr(ss, signal.items):
                    scopes.append(_ScopeIndex(start, end))
                    self.count(getattr(ss, signal.items))
        else:
            self.count(getattr(getattr(resource, signal.scopes)[0], signal.items))

    def _resource_spans(self, start: int, end: int) -> None:
        self.add("resources", 1)
        index = _ResourceIndex(start, end, scopes=[])
        self.resources.append(index)
        head = _Head(self.signal.resource.DESCRIPTOR, "resource")
        run = _Run(self, (1,))
        done = start
        try:
            for number, wire_type, field_start, value_start, stop in _fields(self, start, end, head.descriptor.name):
                head.count(number)
                if number == 2 and wire_type == 2:
                    self.add("scopes", 1)  # one by one in Python: bounded by the limit
                    if stop - value_start > PIECE_BYTES:
                        run.flush()
                        self._scope_spans(index, value_start, stop)
                    else:
                        run.add(field_start, stop, (value_start, stop))
                else:
                    head.keep(field_start, stop)
                    run.add(field_start, stop, None)
                done = stop
        except _Corrupt:
            run.flush()
            self.refute((1,), done, end)
        run.flush()
        index.head = head.finish(self.data)
        if not index.scopes:
            self.resources.pop()

    def _scope_spans(self, resource: _ResourceIndex, start: int, end: int) -> None:
        index = _ScopeIndex(start, end, spans=[])
        # ScopeSpans / ScopeLogs
        head = _Head(self.signal.resource.DESCRIPTOR.fields_by_number[2].message_type, "scope")
        run = _Run(self, (1, 2))
        most = getattr(self.limits, self.signal.limit) + 1
        item = self.signal.item
        done = start
        try:
            for number, wire_type, field_start, value_start, stop in _fields(self, start, end, head.descriptor.name):
                head.count(number)
                if number == 2 and wire_type == 2:
                    if self.indexed < most:  # past the limit the request is refused: count only
                        self.indexed += 1
                        index.spans.append((value_start, stop))
                    if stop - value_start > PIECE_BYTES:
                        run.flush()
                        self.walk(value_start, stop, (1, 2, 2), item.DESCRIPTOR)
                        self.count([_head(self, item, value_start, stop)])
                    else:
                        run.add(field_start, stop, None)
                else:
                    head.keep(field_start, stop)
                    run.add(field_start, stop, None)
                done = stop
        except _Corrupt:
            run.flush()
            self.refute((1, 2), done, end)
        run.flush()
        index.head = head.finish(self.data)
        if index.spans:
            resource.scopes.append(index)

    def walk(self, start: int, end: int, path: tuple[int, ...], descriptor, giant=None, on_run=None) -> None:
        """Check one message longer than PIECE_BYTES: runs of its fields parsed (and handed to
        `on_run`), longer message fields walked in turn (or handed to `giant`, by field number); note
        its fields (_Node). The loop is the hot one: a 63 MiB array has ~15 M items, so runs of
        identical items are skipped 64 at a time."""
        if len(path) > _MAX_DEPTH:  # upb refuses it; do not recurse further to find out
            self.refute(path, start, end)
        data = self.data
        node = self.nodes[start] = _Node()
        counts, first, cap = node.counts, node.first, self.cap
        by_number = descriptor.fields_by_number
        short = min(0x80, PIECE_BYTES + 1)  # a one-byte length, and never a message to walk
        run_start = -1
        pos = start
        field_start = start
        read, most = 0, MAX_FIELDS_ONE_BY_ONE - self.fields_read
        unknown = 0  # field numbers the class does not define
        try:
            while pos < end:
                read += 1
                if read > most:
                    raise _one_by_one(descriptor.name)
                field_start = pos
                byte = data[pos]
                if byte & 0x87 == 2 and pos + 1 < end and data[pos + 1] < short:  # the usual: short tag and length
                    size = data[pos + 1]
                    value_start = pos + 2
                    pos = value_start + size
                    if pos > end or byte < 8:
                        raise _Corrupt
                    number, wire_type = byte >> 3, 2
                    seen = counts.get(number, 0) + 1
                    if seen == 1 and number not in by_number:
                        unknown = _unknown(descriptor, unknown)
                    if seen <= cap:
                        first.setdefault(number, []).append((field_start, value_start, pos))
                    elif seen & 63 == 0:
                        block = data[field_start:pos] * 64
                        if run_start < 0:
                            run_start = field_start
                        while data.startswith(block, pos) and pos + len(block) <= end:
                            pos += len(block)
                            seen += 64
                            if pos - run_start >= PIECE_BYTES:
                                self.piece(path, run_start, pos, on_run)
                                run_start = pos
                        repeated = by_number.get(number)
                        if repeated is not None and repeated.is_repeated and repeated.message_type is not None:
                            # Items alike in shape only: a regular expression finds how far they go, upb counts them.
                            self.piece(path, run_start, pos, on_run)
                            run_start = -1
                            pattern = _items_pattern(byte)
                            while pos < end:
                                found = pattern.match(data, pos, min(end, pos + PIECE_BYTES))
                                if found is None:
                                    break
                                result = self.piece(path, pos, found.end(), on_run)
                                seen += len(_repeated_in(result, path, repeated))
                                pos = found.end()
                            run_start = pos  # a run starts after what was counted
                    counts[number] = seen
                    if run_start < 0:
                        run_start = field_start
                    elif pos - run_start >= PIECE_BYTES:
                        self.piece(path, run_start, pos, on_run)
                        run_start = -1
                    continue
                if byte < 0x80:
                    tag = byte
                    pos += 1
                else:
                    tag, pos = _varint(data, pos, end)
                    if tag >> 32:
                        raise _Corrupt
                number, wire_type = tag >> 3, tag & 7
                if number == 0:
                    raise _Corrupt
                size = 0
                if wire_type == 2:
                    if pos >= end:
                        raise _Corrupt
                    byte = data[pos]
                    if byte < 0x80:
                        size = byte
                        pos += 1
                    else:
                        size, pos = _varint(data, pos, end)
                        if size >> 31:
                            raise _Corrupt
                    value_start = pos
                    pos += size
                    if pos > end:
                        raise _Corrupt
                elif wire_type == 3:  # a group: its tags are read one by one too
                    value_start = pos
                    pos, inside = _group_end(data, number, pos, end, most - read)
                    read += inside
                    if read > most:
                        raise _one_by_one(descriptor.name)
                else:
                    value_start = pos
                    pos = _skip(data, wire_type, number, pos, end)
                seen = counts.get(number, 0) + 1
                if seen == 1 and number not in by_number:
                    unknown = _unknown(descriptor, unknown)
                if seen <= cap:
                    first.setdefault(number, []).append((field_start, value_start, pos))
                elif seen & 63 == 0 and size < 256:
                    # Identical items in a row (the usual hostile array): compare 64 at a time.
                    block = data[field_start:pos] * 64
                    if run_start < 0:
                        run_start = field_start
                    while data.startswith(block, pos) and pos + len(block) <= end:
                        pos += len(block)
                        seen += 64
                        if pos - run_start >= PIECE_BYTES:
                            self.piece(path, run_start, pos, on_run)
                            run_start = pos
                counts[number] = seen
                if size > PIECE_BYTES and giant is not None and number in giant and wire_type == 2:
                    if run_start >= 0:
                        self.piece(path, run_start, field_start, on_run)
                        run_start = -1
                    self.fields_read += read
                    giant[number](value_start, pos)
                    read, most = 0, MAX_FIELDS_ONE_BY_ONE - self.fields_read
                    continue
                if size > PIECE_BYTES:
                    described = by_number.get(number)
                    if described is not None and described.message_type is not None:
                        if run_start >= 0:
                            self.piece(path, run_start, field_start, on_run)
                            run_start = -1
                        self.fields_read += read
                        self.walk(value_start, pos, path + (number,), described.message_type)
                        read, most = 0, MAX_FIELDS_ONE_BY_ONE - self.fields_read
                        continue
                if run_start < 0:
                    run_start = field_start
                if pos - run_start >= PIECE_BYTES:
                    self.piece(path, run_start, pos, on_run)
                    run_start = -1
        except _Corrupt:
            if run_start >= 0:
                self.piece(path, run_start, field_start, on_run)
            self.refute(path, field_start, end)
        if run_start >= 0:
            self.piece(path, run_start, end, on_run)
        self.fields_read += read
        _refuse_merges(descriptor, node)


    def piece(self, path: tuple[int, ...], start: int, end: int, on_run):
        result = self.parse(path, start, end)
        if on_run is not None:
            on_run(result)
        return result


# Metric.data: the field numbers of gauge, sum, histogram, exponential_histogram and summary,
# each a message whose field 1 is its data points.
_METRIC_KINDS = frozenset((5, 7, 9, 10, 11))


class _MetricsCheck(_Check):
    """A metrics body, checked as a trace body is, its data points counted as it goes: every piece
    parsed counts what it holds (otlp.count_data_points, one level at a time, each level's
    containers counted against their limits before they are looked at), every message walked
    counts itself. Nothing is kept: metrics are not stored."""

    def request(self) -> CountedMetrics:
        self.points = 0
        self.walk(0, len(self.data), (), ExportMetricsServiceRequest.DESCRIPTOR)
        return CountedMetrics(self.points)

    def walk(self, start: int, end: int, path: tuple[int, ...], descriptor, giant=None, on_run=None) -> None:
        depth = len(path)
        if depth == 1:
            self.add("resources", 1)
        elif depth == 2:
            self.add("scopes", 1)
        elif depth == 3:
            self.add("metrics", 1)
        elif depth == 5 and path[3] in _METRIC_KINDS and path[4] == 1:
            self.points += 1  # one data point longer than a piece
        super().walk(start, end, path, descriptor, giant, on_run)

    def piece(self, path: tuple[int, ...], start: int, end: int, on_run):
        result = self.parse(path, start, end)
        message, depth = result, 0
        for number in path[:4]:  # down to the message the piece's fields belong to
            described = message.DESCRIPTOR.fields_by_number[number]
            message = getattr(message, described.name)
            if described.is_repeated:
                message = message[0]
            depth += 1
        if depth == 4:
            if path[3] in _METRIC_KINDS and len(path) == 4:
                self.points += len(message.data_points)
            return result
        if depth == 3:
            self.tally_metric(message)
            return result
        resources = [message] if depth == 1 else None
        scopes = [message] if depth == 2 else None
        if depth == 0:
            resources = message.resource_metrics
            self.add("resources", len(resources))
        if scopes is None:
            for resource in resources:
                self.add("scopes", len(resource.scope_metrics))
            scopes = [scope for resource in resources for scope in resource.scope_metrics]
        for scope in scopes:
            self.add("metrics", len(scope.metrics))
        for scope in scopes:
            for metric in scope.metrics:
                self.tally_metric(metric)
        return result

    def tally_metric(self, metric) -> None:
        kind = metric.WhichOneof("data")
        if kind is not None:
            self.points += len(getattr(metric, kind).data_points)


_ITEMS_PATTERNS: dict[int, re.Pattern] = {}


def _items_pattern(tag: int) -> re.Pattern:
    """Whole fields of this one-byte tag with one-byte lengths, one after the other (re runs in C)."""
    pattern = _ITEMS_PATTERNS.get(tag)
    if pattern is None:
        sizes = b"|".join(re.escape(bytes([n])) + (b"[\\s\\S]{%d}" % n if n else b"") for n in range(0x80))
        pattern = _ITEMS_PATTERNS[tag] = re.compile(b"(?:" + re.escape(bytes([tag])) + b"(?>" + sizes + b"))++")  # no backtracking state
    return pattern


def _repeated_in(result: ExportTraceServiceRequest, path: tuple[int, ...], field):
    """The repeated `field` of the message at `path` in a parsed envelope."""
    message = result
    for number in path:
        described = message.DESCRIPTOR.fields_by_number[number]
        message = getattr(message, described.name)
        if described.is_repeated:
            message = message[0]
    return getattr(message, field.name)


class _Run:
    """Consecutive whole fields of one message, parsed (in their envelope) once they reach PIECE_BYTES."""

    def __init__(self, check: _Check, path: tuple[int, ...]):
        self.check = check
        self.path = path
        self.start = -1
        self.end = -1
        self.entries: list[tuple[int, int]] = []

    def add(self, start: int, end: int, entry: tuple[int, int] | None) -> None:
        if self.start < 0:
            self.start = start
        self.end = end
        if entry is not None:
            self.entries.append(entry)
        if end - self.start >= PIECE_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.start < 0:
            return
        result = self.check.parse(self.path, self.start, self.end)
        self.check.on_runs(self.path, result, self.entries)
        self.start = -1
        self.entries = []


# ---------------------------------------------------------------------------
# 2. Flattening
# ---------------------------------------------------------------------------


def _resource_head(request: LargeRequest, index: _ResourceIndex):
    resource = request.signal.resource
    if index.scopes is None:  # parsed whole
        return resource.FromString(index.whole)
    return resource.FromString(index.head)


def _mini(signal: _Signal, scope_head: bytes, items: list[bytes]):
    """A request of one resource and one scope holding these items (otlp's flattening input)."""
    return signal.request.FromString(_ld(1, _ld(2, scope_head + b"".join(_ld(2, item) for item in items))))


def _flatten_whole(signal: _Signal, mini, limits: IngestLimits, now_ns: int, resource, cuts: otlp.Cuts):
    if signal is LOGS:
        return otlp.iter_log_records(mini, limits, now_ns=now_ns, resources=[resource], cuts=cuts)
    return otlp._flatten(mini, limits, now_ns, [resource], cuts)


def _flatten(request: LargeRequest, limits: IngestLimits, now_ns: int, resources, cuts: otlp.Cuts):
    data, signal = request.data, request.signal
    reader = _Reader(request, limits, cuts)
    large = reader.large_record if signal is LOGS else reader.large_span
    for index, resource in zip(request.resources, resources, strict=True):
        if index.scopes is None:
            mini = signal.request.FromString(_ld(1, index.whole))
            yield from _flatten_whole(signal, mini, limits, now_ns, resource, cuts)
            continue
        for scope in index.scopes:
            if scope.spans is None:
                mini = signal.request.FromString(_ld(1, _ld(2, data[scope.start : scope.end])))
                yield from _flatten_whole(signal, mini, limits, now_ns, resource, cuts)
                continue
            group: list[bytes] = []
            size = 0
            for start, end in scope.spans:
                if start not in request.nodes:
                    group.append(data[start:end])
                    size += end - start
                    if size >= PIECE_BYTES:
                        yield from _flatten_whole(signal, _mini(signal, scope.head, group), limits, now_ns, resource, cuts)
                        group, size = [], 0
                    continue
                if group:
                    yield from _flatten_whole(signal, _mini(signal, scope.head, group), limits, now_ns, resource, cuts)
                    group, size = [], 0
                yield from large(scope.head, start, end, now_ns, resource)
            if group:
                yield from _flatten_whole(signal, _mini(signal, scope.head, group), limits, now_ns, resource, cuts)


_HEAD_OMITS = {
    Span: (_SPAN_ATTRIBUTES, _SPAN_EVENTS, _SPAN_LINKS),
    Span.Event: (_EVENT_ATTRIBUTES,),
    Span.Link: (_LINK_ATTRIBUTES,),
    LogRecord: (_RECORD_ATTRIBUTES, _RECORD_BODY),
}


def _head(check_or_request, message_class, start: int, end: int):
    """A walked message without its repeated fields (those _HEAD_OMITS names), from the first
    copies the walk kept of the others. The check refused a singular field sent twice
    (`_refuse_merges`), so more copies than were kept is a 413 here too, never a whole parse."""
    data, node = check_or_request.data, check_or_request.nodes[start]
    omits = _HEAD_OMITS[message_class]
    pieces = []
    for number, found in node.first.items():
        if number in omits:
            continue
        if node.counts[number] > len(found):
            raise _repeated_too_often(message_class.DESCRIPTOR, number, node.counts[number])
        pieces += found
    pieces.sort()
    return message_class.FromString(b"".join(data[a:b] for a, _, b in pieces))


def _repeated_too_often(descriptor, number: int, count: int) -> otlp.OtlpError:
    name = descriptor.fields_by_number[number].name
    return otlp.OtlpError(
        413, f"field {name!r} of {_a(descriptor.name)} over {PIECE_BYTES:,} bytes is sent {count} times: a single "
        "field, which would have to be parsed whole to merge the copies; send it once"
    )  # fmt: skip


def _refuse_merges(descriptor, node: _Node) -> None:
    """A walked message (over PIECE_BYTES) in the form every exporter writes, else a 413: no
    singular field sent twice, and in the attribute values (AnyValue, ArrayValue, KeyValueList,
    KeyValue) no second value of the oneof and no unknown field. upb would merge such copies (the
    last string wins, arrays are concatenated), which only a whole parse of the message can tell,
    and a whole parse of it is the unbounded allocation the walk exists to avoid."""
    fields = descriptor.fields_by_number
    for number, count in node.counts.items():
        described = fields.get(number)
        if described is not None and count > 1 and not described.is_repeated:
            raise _repeated_too_often(descriptor, number, count)
    if descriptor not in _VALUE_MESSAGES:
        return
    unknown = sorted(set(node.counts) - set(fields))
    if unknown:
        raise otlp.OtlpError(413, f"{_a(descriptor.name)} over {PIECE_BYTES:,} bytes carries unknown fields {unknown}")
    if descriptor is AnyValue.DESCRIPTOR and len(node.counts) > 1:
        names = ", ".join(fields[number].name for number in sorted(node.counts))
        raise otlp.OtlpError(413, f"an AnyValue over {PIECE_BYTES:,} bytes sets more than one value ({names}): send one")


# The attribute-value messages, by descriptor (upb hands out one object per descriptor while it lives,
# and these references keep them alive; a descriptor hashes and compares by identity).
_VALUE_MESSAGES = frozenset(message.DESCRIPTOR for message in (AnyValue, ArrayValue, KeyValueList, KeyValue))


def _a(name: str) -> str:
    return f"{'an' if name[0] in 'AEIOU' else 'a'} {name}"


class _Reader:
    """What the bounds keep of walked spans: otlp._flatten's attributes, events and links, read
    from the first pieces with the original counts (the attribute rules of otlp._stored_attributes,
    the value rules of otlp._bounded); every piece of up to PIECE_BYTES goes to those functions."""

    def __init__(self, request: LargeRequest, limits: IngestLimits, cuts: otlp.Cuts):
        self.data = request.data
        self.nodes = request.nodes
        self.limits = limits
        self.cuts = cuts
        self.redaction = (limits.max_attribute_key_chars, limits.max_attribute_value_chars, limits.max_value_depth)

    def large_span(self, scope_head: bytes, start: int, end: int, now_ns: int, resource) -> Iterator:
        limits, cuts = self.limits, self.cuts
        head = _head(self, Span, start, end)
        (item,) = otlp._flatten(_mini(TRACES, scope_head, [head.SerializeToString()]), limits, now_ns, [resource], cuts)
        if not isinstance(item, SpanRecord):
            yield item
            return
        node = self.nodes[start]
        bound = otlp._Bound(limits, cuts)
        attributes, dropped = self.attributes(node, _SPAN_ATTRIBUTES, bound)
        dropped += head.dropped_attributes_count
        if dropped:
            attributes[otlp.DROPPED_ATTRIBUTES] = dropped

        events = []
        dropped_events = head.dropped_events_count
        count = node.counts.get(_SPAN_EVENTS, 0)
        if count > limits.max_events_per_span:
            dropped_events += count - limits.max_events_per_span
            cuts[otlp.CUT_EVENTS] += count - limits.max_events_per_span
        for _, piece_start, piece_end in node.first.get(_SPAN_EVENTS, [])[: limits.max_events_per_span]:
            event, event_attributes, dropped = self.with_attributes(Span.Event, piece_start, piece_end, bound)
            dropped += event.dropped_attributes_count
            if dropped:
                event_attributes[otlp.DROPPED_ATTRIBUTES] = dropped
            events.append(
                {
                    "name": otlp.redact_string(event.name, limits.max_name_chars),
                    "time_ns": event.time_unix_nano,
                    "attributes": event_attributes,
                }
            )
        if dropped_events:
            attributes[otlp.DROPPED_EVENTS] = dropped_events

        links = []
        dropped_links = head.dropped_links_count
        count = node.counts.get(_SPAN_LINKS, 0)
        if count > limits.max_links_per_span:
            dropped_links += count - limits.max_links_per_span
            cuts[otlp.CUT_LINKS] += count - limits.max_links_per_span
        for _, piece_start, piece_end in node.first.get(_SPAN_LINKS, [])[: limits.max_links_per_span]:
            link = self.message(Span.Link, piece_start, piece_end)
            if len(link.trace_id) != 16 or len(link.span_id) != 8:
                dropped_links += 1
                continue
            _, link_attributes, _ = self.with_attributes(Span.Link, piece_start, piece_end, bound)
            links.append({"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex(), "attributes": link_attributes})
        if dropped_links:
            attributes[otlp.DROPPED_LINKS] = dropped_links
        bound.close()
        item.attributes = attributes
        item.events = events
        item.links = links
        yield item

    def large_record(self, scope_head: bytes, start: int, end: int, now_ns: int, resource) -> Iterator:
        """otlp.iter_log_records of a walked log record: its other fields as they are, its
        attributes and then its body within the record's bound, as otlp._log_body bounds it."""
        limits = self.limits
        head = _head(self, LogRecord, start, end)
        mini = _mini(LOGS, scope_head, [head.SerializeToString()])
        (item,) = otlp.iter_log_records(mini, limits, now_ns=now_ns, resources=[resource], cuts=self.cuts)
        if not isinstance(item, LogRecordRecord):
            yield item
            return
        node = self.nodes[start]
        bound = otlp._Bound(limits, self.cuts)
        attributes, dropped = self.attributes(node, _RECORD_ATTRIBUTES, bound)
        dropped += head.dropped_attributes_count
        if dropped:
            attributes[otlp.DROPPED_ATTRIBUTES] = dropped
        bodies = node.first.get(_RECORD_BODY, [])
        if not bodies:  # (a body sent more than once was refused by the check)
            body = None
        elif bound.left <= 0:
            bound.cuts[bound.reason] += 1
            body = CUT_BUDGET_MARKER
        else:
            value = self.value(bodies[0][1], bodies[0][2], bound, 1)
            body = None if value is None else redact_item("body", value, self.redaction)[1]
        bound.close()
        # What iter_log_records derives from the attributes and the body, again with the real ones.
        item.attributes, item.body = attributes, body
        item.event_name = redact_string(
            qualified_event_name(head.event_name, attributes, body, item.scope_name), otlp.LABEL_CHARS
        )
        item.call_id = record_call_id(item.event_name, attributes, body)
        item.digest = record_digest(item)
        yield item

    def message(self, message_class, start: int, end: int):
        if start in self.nodes:
            return _head(self, message_class, start, end)
        return message_class.FromString(self.data[start:end])

    def with_attributes(self, message_class, start: int, end: int, bound) -> tuple[object, dict, int]:
        """(the event or link, its stored attributes, how many were dropped)."""
        if start not in self.nodes:
            message = message_class.FromString(self.data[start:end])
            attributes, dropped = otlp._stored_attributes(
                message.attributes, self.limits.max_attributes_per_span, self.redaction, bound
            )
            return message, attributes, dropped
        number = _HEAD_OMITS[message_class][0]
        attributes, dropped = self.attributes(self.nodes[start], number, bound)
        return _head(self, message_class, start, end), attributes, dropped

    def attributes(self, node: _Node, number: int, bound) -> tuple[dict, int]:
        """otlp._stored_attributes of the KeyValues of field `number` of a walked message.

        Each piece that can be parsed goes through otlp._stored_attributes alone, the ones of up
        to 512 bytes first and then the others in order, as that function takes them; a walked
        one is converted here by the same rules."""
        max_count = self.limits.max_attributes_per_span
        count = node.counts.get(number, 0)
        if count > max_count:
            self.cuts[otlp.CUT_ATTRIBUTES] += count - max_count
        kept = node.first.get(number, [])[:max_count]
        small, large = [], []
        for position, (_, start, end) in enumerate(kept):
            walked = self.walked_pair(start, end)
            if walked is None:
                size = KeyValue.FromString(self.data[start:end]).ByteSize()
                (small if size <= _SMALL_PAIR_BYTES else large).append((position, start, end, None))
            else:
                large.append((position, start, end, walked))
        found: list = [None] * len(kept)
        for position, start, end, walked in small + large:
            if walked is None:
                stored, _ = otlp._stored_attributes(
                    [KeyValue.FromString(self.data[start:end])], max_count, self.redaction, bound
                )
                found[position] = next(iter(stored.items()))
            else:
                found[position] = self.large_pair(walked, bound)
        return dict(found), max(count - max_count, 0)

    def walked_pair(self, start: int, end: int) -> tuple[str, int, int] | None:
        """(key, value start, value end) of a walked KeyValue of the usual shape (at most one key,
        one value, nothing else) whose value is a walked array or kvlist; else None: it is parsed.
        Such a pair is over 512 bytes re-serialised, as it is on the wire (over PIECE_BYTES),
        unless its items were encoded in a non-canonical way (repeated or overlong fields)."""
        node = self.nodes.get(start)
        if node is None or node.counts.get(2) != 1 or node.counts.get(1, 0) > 1 or set(node.counts) - {1, 2}:
            return None
        _, value_start, value_end = node.first[2][0]
        if self.container(value_start) is None:
            return None
        key = ""
        if 1 in node.first:
            key_start, _, key_end = node.first[1][0]
            key = KeyValue.FromString(self.data[key_start:key_end]).key
        return key, value_start, value_end

    def container(self, start: int) -> tuple[int, int, int] | None:
        """(kind, payload start, payload end) of a walked AnyValue holding only one walked array
        or kvlist value; None for any other (it is parsed)."""
        node = self.nodes.get(start)
        if node is None or len(node.counts) != 1:
            return None
        ((kind, seen),) = node.counts.items()
        if seen != 1 or kind not in (_ARRAY_VALUE, _KVLIST_VALUE):
            return None
        _, payload_start, payload_end = node.first[kind][0]
        payload = self.nodes.get(payload_start)
        if payload is None or set(payload.counts) - {1}:
            return None
        return kind, payload_start, payload_end

    def entries(self, value_start: int) -> tuple[int, list[tuple[int, int, int]]]:
        _, payload_start, _ = self.container(value_start)
        payload = self.nodes[payload_start]
        return payload.counts.get(1, 0), payload.first.get(1, [])

    def large_pair(self, walked: tuple[str, int, int], bound) -> tuple[str, object]:
        """otlp._stored_entry and the large-attribute step of otlp._stored_attributes, for a walked pair."""
        key, value_start, value_end = walked
        if bound.left <= 0:
            pair = (redact_item(key, CUT_BUDGET_MARKER, self.redaction)[0], CUT_BUDGET_MARKER)  # the key cleaned
        else:
            pair = redact_item(key, self.value(value_start, value_end, bound, 1), self.redaction)
        value = pair[1]
        cost = otlp.VALUE_COST + len(pair[0])
        if type(value) is str:
            cost += len(value)
            if len(value) == self.redaction[1] and value.endswith(" chars]") and TRUNCATION_MARKER in value:
                bound.cuts[otlp.CUT_VALUE_CHARS] += 1
        if cost > bound.left and type(value) is str:
            bound.cuts[bound.reason] += 1
            return (pair[0], CUT_BUDGET_MARKER)
        bound.left -= cost
        return pair

    def value(self, start: int, end: int, bound, depth: int):
        """otlp._bounded of the AnyValue at data[start:end], walked or not."""
        shape = self.container(start)
        if shape is None:
            return otlp._bounded(AnyValue.FromString(self.data[start:end]), bound, depth)
        kind = shape[0]
        if depth > bound.depth:
            bound.cuts[otlp.CUT_DEPTH] += 1
            bound.left -= otlp.VALUE_COST + len(DEPTH_MARKER)
            return DEPTH_MARKER
        bound.left -= otlp.VALUE_COST
        count, first = self.entries(start)
        if kind == _KVLIST_VALUE:
            out = {}
            for index, (_, entry_start, entry_end) in enumerate(first[: bound.entries]):
                if bound.left <= 0:
                    bound.cuts[bound.reason] += 1
                    out[CUT_ENTRIES_KEY] = count - index
                    return out
                walked = self.walked_pair(entry_start, entry_end)
                if walked is None:
                    item = KeyValue.FromString(self.data[entry_start:entry_end])
                    bound.left -= len(item.key)
                    out[item.key] = otlp._bounded(item.value, bound, depth + 1)
                else:
                    bound.left -= len(walked[0])
                    out[walked[0]] = self.value(walked[1], walked[2], bound, depth + 1)
            if count > bound.entries:
                bound.cuts[otlp.CUT_KVLIST_ENTRIES] += 1
                out[CUT_ENTRIES_KEY] = count - bound.entries
            return out
        out = []
        for index, (_, entry_start, entry_end) in enumerate(first[: bound.items]):
            if bound.left <= 0:
                bound.cuts[bound.reason] += 1
                out.append(cut_items_marker(count - index))
                return out
            out.append(self.value(entry_start, entry_end, bound, depth + 1))
        if count > bound.items:
            bound.cuts[otlp.CUT_ARRAY_ITEMS] += 1
            out.append(cut_items_marker(count - bound.items))
        return out
