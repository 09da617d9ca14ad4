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
    # A span starting more than this far in the future is refused (clock skew guard).
    max_future_skew_seconds: int = 24 * 3600


DEFAULT_LIMITS = IngestLimits()
