"""ingest.attribute_view: the real ScopeSpans with attributes left serialised, and otlp's storing
of attributes from either form alike."""

from __future__ import annotations

from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span, Status

from ingest import attribute_view, otlp
from ingest.limits import DEFAULT_LIMITS, IngestLimits
from tests.ingest.test_otlp import START_NS, TRACE_ID, key_values, pb_span, rich_request

REDACTION = (
    DEFAULT_LIMITS.max_attribute_key_chars,
    DEFAULT_LIMITS.max_attribute_value_chars,
    DEFAULT_LIMITS.max_value_depth,
)


def _without_attributes(span) -> bytes:
    """A span's bytes (of the real class or the view's) with its own, its events' and its links'
    attributes removed."""
    copy = type(span).FromString(span.SerializeToString())
    copy.ClearField("attributes")
    for item in (*copy.events, *copy.links):
        item.ClearField("attributes")
    return copy.SerializeToString()


def test_a_view_holds_each_keyvalue_as_its_own_serialisation_and_everything_else_unchanged():
    scope_spans = rich_request().resource_spans[0].scope_spans[0]
    view = attribute_view.view(scope_spans)

    assert len(view.spans) == len(scope_spans.spans) == 2
    assert view.scope.name == "toolwatch.tests"
    for real, seen in zip(scope_spans.spans, view.spans, strict=True):
        assert list(seen.attributes) == [item.SerializeToString() for item in real.attributes]
        for real_item, seen_item in zip((*real.events, *real.links), (*seen.events, *seen.links), strict=True):
            assert list(seen_item.attributes) == [item.SerializeToString() for item in real_item.attributes]
        # Every other field reads as in the real class.
        assert _without_attributes(seen) == _without_attributes(real)
    tool = view.spans[1]
    assert (tool.name, tool.status.code, tool.trace_state, tool.flags) == ("execute_tool refund", 2, "vendor=x", 257)


def test_a_view_keeps_unknown_fields_of_a_keyvalue_in_its_bytes():
    item = KeyValue(key="k").SerializeToString() + b"\x18\x07"  # field 3, varint 7: no such field in KeyValue
    span = Span.FromString(pb_span(1).SerializeToString() + b"\x4a" + bytes([len(item)]) + item)
    (seen,) = attribute_view.view(ScopeSpans(spans=[span])).spans
    assert list(seen.attributes) == [item]


def test_the_view_classes_are_not_the_real_ones():
    view = attribute_view.view(ScopeSpans(spans=[pb_span(1, attrs={"a": "b"})]))
    assert type(view) is not ScopeSpans
    assert type(view.spans[0].attributes[0]) is bytes
    assert type(ScopeSpans(spans=[pb_span(1, attrs={"a": "b"})]).spans[0].attributes[0]) is KeyValue


def test_attributes_are_stored_alike_from_messages_and_from_their_bytes():
    """What otlp._stored_attributes makes of KeyValues is what it makes of their bytes: redaction,
    truncation, nesting, budget cuts and the order of large values (> 512 bytes) included."""
    mapping = {
        "gen_ai.tool.name": "refund",
        "password": "hunter2-hunter2",
        "auth": "Bearer sk-live-0123456789abcdef0123456789abcdef",
        "count": -7,
        "ok": True,
        "ratio": float("nan"),
        "nested": {"order": {"id": 42, "lines": [{"sku": "x"}] * 3}},
        "long": "x" * 5000,
        "list": list(range(40)),
        "after": "small after large",
    }
    for limits in (DEFAULT_LIMITS, IngestLimits(max_attribute_bytes_per_span=3_000, max_attributes_per_span=8)):
        items = key_values(mapping)
        outcomes = []
        for form in (items, [item.SerializeToString() for item in items]):
            otlp._STORED_PAIRS.clear()
            otlp._SEEN_ONCE.clear()
            for _ in range(3):  # unseen, seen once, then remembered
                cuts = otlp.Cuts()
                bound = otlp._Bound(limits, cuts)
                stored = otlp._stored_attributes(form, limits.max_attributes_per_span, REDACTION, bound)
                bound.close()
                outcomes.append((stored, dict(cuts), cuts.left))
        assert outcomes[:3] == outcomes[3:]
        assert outcomes[0] == outcomes[1] == outcomes[2]
    assert "hunter2" not in repr(outcomes)


def test_spans_flatten_the_same_whatever_the_cache_has_seen():
    """iter_spans reads attributes through the view: the same records on the first sight of a
    request as on the third, for spans, events and links."""
    span = pb_span(
        1,
        attrs={"gen_ai.tool.name": "lookup", "api_key": "sk-abcdefghijklmnopqrstuvwxyz012345", "n": 3},
        events=[Span.Event(time_unix_nano=START_NS + 1, name="exception", attributes=key_values({"exception.type": "E"}))],
        links=[Span.Link(trace_id=TRACE_ID, span_id=(9).to_bytes(8, "big"), attributes=key_values({"k": "v"}))],
        status=Status(code=2, message="boom"),
    )
    request = rich_request()
    request.resource_spans[0].scope_spans.append(ScopeSpans(scope=InstrumentationScope(name="second"), spans=[span]))
    otlp._STORED_PAIRS.clear()
    otlp._SEEN_ONCE.clear()
    runs = [list(otlp.iter_spans(request, DEFAULT_LIMITS, now_ns=START_NS + 10**9)) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    (last,) = [record for record in runs[0] if record.scope_name == "second"]
    assert last.attributes["gen_ai.tool.name"] == "lookup" and "abcdefghij" not in last.attributes["api_key"]
    assert last.events[0]["attributes"] == {"exception.type": "E"}
    assert last.links[0]["attributes"] == {"k": "v"}

