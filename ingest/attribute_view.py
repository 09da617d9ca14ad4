"""OTLP's ScopeSpans with every span's, event's and link's attributes left serialised.

ingest/otlp.py stores an attribute through a cache keyed by the KeyValue's own bytes, and most
attributes repeat from span to span. Read from the real classes, each KeyValue costs a Python
object and a SerializeToString before the cache is even asked; read as bytes, the decode path
costs 5 % fewer instructions and ~10 % less time a span (docs/benchmarks.md, "Session 11").
These classes are the real ones with one change: `attributes` of Span, Span.Event and Span.Link
is `repeated bytes` (the same wire format as the repeated message, field 9 / 3 / 4,
length-delimited), so upb hands over each KeyValue's bytes as it parses and only the pairs the
cache has not seen are parsed as KeyValue.

They live in a descriptor pool of their own (the same names as the real classes, never mixed
with them). A view is parsed from bytes that the real classes have already parsed, so what upb
checks there (UTF-8, nesting depth, the wire format) has been checked for the attributes too.
Pure: no Django.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

# The messages of trace.proto whose `attributes` stay bytes.
_SERIALISED = {"Span", "Span.Event", "Span.Link"}


def _file(module) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(proto)
    return proto


def _serialise_attributes(message: descriptor_pb2.DescriptorProto, path: str) -> None:
    if path in _SERIALISED:
        for field in message.field:
            if field.name == "attributes":
                field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                field.ClearField("type_name")
    for nested in message.nested_type:
        _serialise_attributes(nested, f"{path}.{nested.name}")


def _scope_spans_class():
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file(common_pb2))
    pool.Add(_file(resource_pb2))
    trace = _file(trace_pb2)
    for message in trace.message_type:
        _serialise_attributes(message, message.name)
    pool.Add(trace)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("opentelemetry.proto.trace.v1.ScopeSpans"))


ScopeSpansView = _scope_spans_class()


def view(scope_spans: trace_pb2.ScopeSpans):
    """The same ScopeSpans as a ScopeSpansView: its spans' `attributes` (and their events' and
    links') are lists of serialised KeyValues, in order, exactly as SerializeToString makes them."""
    return ScopeSpansView.FromString(scope_spans.SerializeToString())
