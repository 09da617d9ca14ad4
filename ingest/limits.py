"""The named limits of the ingest path, in one table.

Each can be overridden from the environment as TOOLWATCH_LIMIT_<NAME> (see
config/settings.py); the defaults follow the OTLP spec where it recommends one.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

MIB = 1024 * 1024
# A request's spans commit within MAX_WRITE of their received time (`now`, taken once the
# body is read), or not at all: the rollup job counts on it to know which late retries a
# bucket's rows already hold (dashboard/rollups/rows.py, RECEIVED_MARGIN). Three times the
# exporters' 10 s timeout: a write this slow has long been given up on and sent again.
MAX_WRITE = dt.timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class IngestLimits:
    # OTLP recommends 64 MiB, counted on the wire and again after decompression.
    max_body_bytes: int = 64 * MIB
    max_decompressed_bytes: int = 64 * MIB
    # More spans than this in one request: the whole request is refused (413).
    max_spans_per_request: int = 100_000
    # More log records than this in one request (POST /v1/logs): the whole request is refused (413).
    max_log_records_per_request: int = 100_000
    # More ResourceSpans / ResourceLogs / ResourceMetrics, or more ScopeSpans / ScopeLogs /
    # ScopeMetrics (all resources' together), or more Metrics than this in one request: the whole
    # request is refused (413). Each is read one by one in Python (~1 µs), and 64 MiB holds 32 M
    # empty ones: minutes of CPU (bench/hostile.py, pb_empty_resources). As many as spans, so a
    # request of one span per resource and scope (a collector merging single-span exports) passes.
    max_resources_per_request: int = 100_000
    max_scopes_per_request: int = 100_000
    # Metrics are not stored (their data points are counted as dropped), but each is read.
    max_metrics_per_request: int = 100_000
    # Per span: attributes beyond this count are dropped (and counted as dropped).
    max_attributes_per_span: int = 256
    max_events_per_span: int = 128
    max_links_per_span: int = 128
    # A string value longer than this is cut and marked (see redact.TRUNCATION_MARKER).
    max_attribute_value_chars: int = 16_384
    max_name_chars: int = 1_024
    max_attribute_key_chars: int = 256
    # Nesting depth of kvlist/array values kept; deeper values become a marker string.
    max_value_depth: int = 8
    # Items of one array value / entries of one kvlist value kept (at every depth): the first
    # ones, then a marker (redact.CUT_ITEMS_MARKER, redact.CUT_ENTRIES_KEY) saying how many
    # were cut. A 58 MB span of one array took a worker to 1.9 GB before these existed.
    max_array_items: int = 256
    max_kvlist_entries: int = 256
    # Attribute bytes stored per span (its own attributes, then its events' and links') and per
    # request (every span and log record, in order), counted as otlp.attribute_cost does: keys
    # and strings by their length, every other value, array item and kvlist entry 16 at least,
    # so a budget also bounds the Python objects a request makes. An attribute that does not fit
    # what is left is stored as redact.CUT_BUDGET_MARKER (the smallest are fitted first).
    # Per request: above the ~66 MiB that 64 MiB of ordinary protobuf spans spend (bench traffic).
    max_attribute_bytes_per_span: int = 256 * 1024
    max_attribute_bytes_per_request: int = 128 * MIB
    # OTLP/JSON only: more JSON values than this in one body (counted before parsing, as its
    # "{", "[" and "," bytes) and the request is refused (413). json parsing builds the whole
    # tree, then the protobuf message: ~225 bytes per value at the peak (bench/hostile.py:
    # 1.5 M values took a worker to 460 MB), so 1 M stay under the 400 MB a worker may use,
    # and hold ~10,000 spans of a typical exporter (its batches are 512).
    max_json_values: int = 1_000_000
    # A span starting more than this far in the future is refused (clock skew guard).
    max_future_skew_seconds: int = 24 * 3600


DEFAULT_LIMITS = IngestLimits()
