"""The one database seam of the write path.

PostgreSQL: binary COPY of each slice straight into the partitioned table inside a
savepoint. COPY cannot skip conflicts, so when a span is already stored (a resend)
the savepoint is rolled back and the slice goes the slow way: COPY into a temporary
staging table, then `INSERT … SELECT … ON CONFLICT DO NOTHING RETURNING` in the same
transaction. Rows are sorted by key either way, so concurrent senders cannot deadlock
on the unique index. Tool-call rows are then COPYed in for the spans that were new.

SQLite: read which keys exist, bulk-insert the rest. Writes are serialised by
SQLite's IMMEDIATE transactions, so nothing can slip in between.

Resources (a span's resource attributes) are stored once per project and digest and
spans carry their id: `resource_ids` finds or stores a request's few resources before
its span transaction, remembering committed ids per process.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import psycopg
from django.db import IntegrityError, connection, transaction
from django.db.models import JSONField, OuterRef, Subquery
from psycopg.adapt import Dumper
from psycopg.pq import Format

from ingest import log_events
from ingest.json_text import dumps_json
from ingest.log_events import LogRecordRecord
from ingest.models import LogRecord, Resource, Span, ToolCall
from ingest.records import ResourceRecord, SpanRecord, ToolCallRecord

SPAN_COLUMNS = (
    "project_id", "trace_id", "span_id", "parent_span_id", "name", "kind", "start_time", "end_time",
    "status_code", "status_message", "service", "environment", "service_version", "scope_name",
    "scope_version", "agent", "attributes", "resource_id", "events", "links", "trace_state",
    "flags", "received_at",
)  # fmt: skip
TOOLCALL_COLUMNS = (
    "project_id", "trace_id", "span_id", "parent_span_id", "start_time", "end_time", "latency_ms",
    "tool", "convention", "tool_type", "call_id", "attempt", "resend_count", "arguments",
    "arguments_hash", "result", "ok", "soft_failure", "error_class", "classified_by", "error_type",
    "error_code", "message", "retryable", "field", "suggestion", "retry_after_ms", "escalated",
    "next_action", "agent", "service", "environment", "fingerprint", "contract", "received_at",
)  # fmt: skip

Key = tuple[str, str]  # (trace_id, span_id)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


def ns_to_datetime(ns: int) -> dt.datetime:
    # Integer arithmetic keeps microseconds exact (a float of ns since 1970 would not);
    # adding a timedelta costs a fifth of fromtimestamp().replace(), and runs several times a span.
    return _EPOCH + _MICROSECOND * (ns // 1000)


class JsonbBinaryDumper(Dumper):
    """jsonb for binary COPY: the version byte 1, then `dumps_json` of the value.

    What psycopg's own jsonb dumper writes with set_json_dumps(dumps_json), minus its
    wrapper layers (about a tenth of the client's COPY time; most events and links are
    empty, and their JSON is a constant).
    """

    format = Format.BINARY
    oid = 3802  # jsonb

    def dump(self, obj) -> bytes:
        if not obj and (type(obj) is list or type(obj) is dict):
            return b"\x01[]" if type(obj) is list else b"\x01{}"
        return b"\x01" + dumps_json(obj)


class JsonBinaryDumper(JsonbBinaryDumper):
    """JSON text for binary COPY (a span's attributes, events and links, a tool call's arguments
    and result: ingest.models.WholeJSONField, PostgreSQL `text`). Binary COPY sends no type with a
    field: "json" in SPAN_TYPES and TOOLCALL_TYPES only picks this dumper for a dict or list, and
    the text column takes its bytes as they are (json's and text's binary forms are both the text)."""

    oid = 114  # json

    def dump(self, obj) -> bytes:
        if not obj and (type(obj) is list or type(obj) is dict):
            return b"[]" if type(obj) is list else b"{}"
        return dumps_json(obj)


def register_jsonb_dumper(context) -> None:
    """Use JsonbBinaryDumper and JsonBinaryDumper for the jsonb and json columns of binary COPYs
    in `context` (a psycopg connection or cursor)."""
    context.adapters.register_dumper(None, JsonbBinaryDumper)
    context.adapters.register_dumper(None, JsonBinaryDumper)


def _widths(model) -> dict[str, int]:
    return {f.name: f.max_length for f in model._meta.concrete_fields if getattr(f, "max_length", None)}


# varchar columns refuse longer values on PostgreSQL: cut ingested strings to fit.
_SPAN_W = _widths(Span)
_CALL_W = _widths(ToolCall)


def _fit(value: str, width: int) -> str:
    return value if len(value) <= width else value[:width]


def span_row(project_id: int, span: SpanRecord, agent: str, received_at: dt.datetime, resource_id: int) -> tuple:
    """One ingest_span row in SPAN_COLUMNS order; JSON columns hold Python values.
    `resource_id` is the stored resource of span.resource_digest (resource_ids)."""
    w = _SPAN_W
    return (
        project_id, span.trace_id, span.span_id, span.parent_span_id, span.name, span.kind,
        ns_to_datetime(span.start_ns), ns_to_datetime(span.end_ns), span.status_code, span.status_message,
        _fit(span.service, w["service"]), _fit(span.environment, w["environment"]),
        _fit(span.service_version, w["service_version"]), _fit(span.scope_name, w["scope_name"]),
        _fit(span.scope_version, w["scope_version"]), _fit(agent, w["agent"]),
        span.attributes, resource_id, span.events, span.links, span.trace_state, span.flags,
        received_at,
    )  # fmt: skip


def toolcall_row(project_id: int, span: SpanRecord, call: ToolCallRecord, received_at: dt.datetime) -> tuple:
    """One ingest_toolcall row in TOOLCALL_COLUMNS order; JSON columns hold Python values."""
    w = _CALL_W
    return (
        project_id, span.trace_id, span.span_id, span.parent_span_id, ns_to_datetime(span.start_ns),
        ns_to_datetime(span.end_ns), (span.end_ns - span.start_ns) / 1e6, _fit(call.tool, w["tool"]),
        _fit(call.convention, w["convention"]), _fit(call.tool_type, w["tool_type"]),
        _fit(call.call_id, w["call_id"]), call.attempt, call.resend_count, call.arguments,
        call.arguments_hash, call.result, call.ok, call.soft_failure,
        _fit(call.error_class, w["error_class"]), _fit(call.classified_by, w["classified_by"]),
        _fit(call.error_type, w["error_type"]), _fit(call.error_code, w["error_code"]), call.message,
        call.retryable, _fit(call.field, w["field"]), call.suggestion, call.retry_after_ms, call.escalated,
        _fit(call.next_action, w["next_action"]), _fit(call.agent, w["agent"]), _fit(span.service, w["service"]),
        _fit(span.environment, w["environment"]), call.fingerprint, call.contract, received_at,
    )  # fmt: skip


# (project id, digest) -> (resource id, when this process last renewed its last_seen). Only
# committed ids go in (transaction.on_commit), so a rolled-back insert never leaves an id
# pointing at nothing. Bounded: a sender of ever-new resources only resets it.
_resources: dict[tuple[int, bytes], tuple[int, dt.datetime]] = {}
RESOURCES_CACHED_MAX = 10_000
# How long a remembered id is used before last_seen is renewed: retention keeps a resource
# until its last_seen is older than the retention by more than this and the clock skew allowed.
RESOURCE_TOUCH = dt.timedelta(hours=1)


def resource_ids(project_id: int, resources: Iterable[ResourceRecord | None], now: dt.datetime) -> dict[bytes, int]:
    """digest -> stored resource id for each resource of a request (None entries are skipped).

    Resources this process has not used within RESOURCE_TOUCH are upserted (stored if new,
    last_seen renewed if not) in their own short transaction, so call this before the
    span transaction: a resource row is then never locked for the length of a request,
    and concurrent requests bringing the same new resource both get its one id. A
    resource whose spans then roll back stays until retention removes it.
    """
    ids: dict[bytes, int] = {}
    stale: dict[bytes, dict] = {}
    for resource in resources:
        if resource is None or resource.digest in ids or resource.digest in stale:
            continue
        known = _resources.get((project_id, resource.digest))
        if known is not None and dt.timedelta(0) <= now - known[1] < RESOURCE_TOUCH:
            ids[resource.digest] = known[0]
        else:
            stale[resource.digest] = resource.attributes
    if stale:
        stored = _upsert_resources(project_id, stale, now)
        ids.update(stored)
        transaction.on_commit(lambda: _remember_resources(project_id, stored, now))
    return ids


def _upsert_resources(project_id: int, stale: dict[bytes, dict], now: dt.datetime) -> dict[bytes, int]:
    # Sorted by digest: concurrent upserts of several resources lock them in the same order.
    rows = [
        Resource(project_id=project_id, digest=digest, attributes=attributes, first_seen=now, last_seen=now)
        for digest, attributes in sorted(stale.items())
    ]
    with transaction.atomic():
        Resource.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["project", "digest"], update_fields=["last_seen"]
        )
    return {bytes(row.digest): row.pk for row in rows}


def _remember_resources(project_id: int, stored: dict[bytes, int], now: dt.datetime) -> None:
    if len(_resources) + len(stored) > RESOURCES_CACHED_MAX:
        _resources.clear()
    for digest, resource_id in stored.items():
        _resources[(project_id, digest)] = (resource_id, now)


def forget_resources() -> None:
    """Tests drop and recreate the database; the process-wide cache must not outlive it."""
    _resources.clear()


def insert_spans(span_rows: Sequence[tuple]) -> set[Key]:
    """Insert span rows, skipping ones already stored; returns the keys that were new.

    Rows with the same key within `span_rows` are stored once (the first wins)."""
    unique: dict[Key, tuple] = {}
    for row in span_rows:
        unique.setdefault((row[1], row[2]), row)
    if not unique:
        return set()
    if connection.vendor == "postgresql":
        return _pg_insert_spans(list(unique.values()))
    return _orm_insert_spans(list(unique.values()))


def insert_toolcalls(toolcall_rows: Sequence[tuple]) -> None:
    """Insert tool-call rows of spans that `insert_spans` just reported new."""
    if not toolcall_rows:
        return
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            copy_rows(cursor, "ingest_toolcall", TOOLCALL_COLUMNS, TOOLCALL_TYPES, toolcall_rows)
        return
    ToolCall.objects.bulk_create([ToolCall(**dict(zip(TOOLCALL_COLUMNS, row))) for row in toolcall_rows], batch_size=500)


# PostgreSQL types of the COPY columns, in order: binary COPY needs them exactly (but "json": the
# JSON text of a WholeJSONField's text column, JsonBinaryDumper).
SPAN_TYPES = (
    "int8", "text", "text", "text", "text", "int2", "timestamptz", "timestamptz", "int2", "text", "text",
    "text", "text", "text", "text", "text", "json", "int8", "json", "json", "text", "int8", "timestamptz",
)  # fmt: skip
TOOLCALL_TYPES = (
    "int8", "text", "text", "text", "timestamptz", "timestamptz", "float8", "text", "text", "text", "text",
    "int4", "int4", "json", "text", "json", "bool", "bool", "text", "text", "text", "text", "text", "bool",
    "text", "text", "int8", "bool", "text", "text", "text", "text", "text", "jsonb", "timestamptz",
)  # fmt: skip


def copy_rows(cursor, table: str, columns: Sequence[str], types: Sequence[str], rows: Sequence[tuple]) -> None:
    """Binary COPY of `rows` (tuples in `columns` order) into `table` on PostgreSQL."""
    raw = cursor.cursor  # the psycopg cursor under Django's wrapper
    register_jsonb_dumper(raw)
    # Django's own exception classes, as for any query (the view answers 503 on them).
    with connection.wrap_database_errors:
        with raw.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)


def _pg_insert_spans(span_rows: list[tuple]) -> set[Key]:
    keys = {(row[1], row[2]) for row in span_rows}
    # Fast path: resends are rare, so COPY straight in, sorted by key so concurrent
    # senders lock index entries in the same order. A unique violation (a resend, or a
    # concurrent copy of the same batch) rolls back to the savepoint and takes the
    # staging path, which skips stored spans.
    span_rows = sorted(span_rows, key=lambda row: (row[1], row[2]))
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            copy_rows(cursor, "ingest_span", SPAN_COLUMNS, SPAN_TYPES, span_rows)
        return keys
    except IntegrityError as exc:
        if not isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
            raise
    columns = ", ".join(SPAN_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS tw_span_stage ON COMMIT DELETE ROWS AS "
            f"SELECT {columns} FROM ingest_span WITH NO DATA"
        )
        # A connection reused after an aborted transaction may hold leftovers.
        cursor.execute("TRUNCATE tw_span_stage")
        copy_rows(cursor, "tw_span_stage", SPAN_COLUMNS, SPAN_TYPES, span_rows)
        cursor.execute(
            f"INSERT INTO ingest_span ({columns}) SELECT {columns} FROM tw_span_stage "
            "ORDER BY trace_id, span_id ON CONFLICT DO NOTHING RETURNING trace_id, span_id"
        )
        return {(trace_id, span_id) for trace_id, span_id in cursor.fetchall()}


def _orm_insert_spans(span_rows: list[tuple]) -> set[Key]:
    project_id = span_rows[0][0]
    trace_ids = sorted({row[1] for row in span_rows})
    existing: set[Key] = set()
    for start in range(0, len(trace_ids), 500):
        existing.update(
            Span.objects.filter(project_id=project_id, trace_id__in=trace_ids[start : start + 500]).values_list(
                "trace_id", "span_id"
            )
        )
    new_rows = [row for row in span_rows if (row[1], row[2]) not in existing]
    Span.objects.bulk_create([Span(**dict(zip(SPAN_COLUMNS, row))) for row in new_rows], batch_size=500)
    return {(row[1], row[2]) for row in new_rows}


def find_agent_spans(project_id: int, trace_ids: Sequence[str], since: dt.datetime) -> list[tuple[str, str, str, str]]:
    """(trace_id, span_id, parent_span_id, agent) of stored spans of these traces since a time."""
    rows: list[tuple[str, str, str, str]] = []
    for start in range(0, len(trace_ids), 500):
        rows.extend(
            Span.objects.filter(
                project_id=project_id, trace_id__in=trace_ids[start : start + 500], start_time__gte=since
            ).values_list("trace_id", "span_id", "parent_span_id", "agent")
        )
    return rows


def find_toolcalls_without_agent(project_id: int, trace_ids: Sequence[str], since: dt.datetime) -> list[Key]:
    rows: list[Key] = []
    for start in range(0, len(trace_ids), 500):
        rows.extend(
            ToolCall.objects.filter(
                project_id=project_id, trace_id__in=trace_ids[start : start + 500], start_time__gte=since, agent=""
            ).values_list("trace_id", "span_id")
        )
    return rows


def set_toolcall_agents(project_id: int, agents: dict[Key, str], since: dt.datetime) -> list[dt.datetime]:
    """Give stored tool calls without an agent theirs; returns the start times of those changed
    (their rollup buckets must be recomputed: the agent is a rollup dimension)."""
    if not agents:
        return []
    items = sorted((key, _fit(agent, _CALL_W["agent"])) for key, agent in agents.items())
    if connection.vendor == "postgresql":
        # One statement for the whole request: this runs on most requests, since agent
        # spans end (and are exported) after their tool calls.
        values = ", ".join(["(%s, %s, %s)"] * len(items))
        params = [value for (trace_id, span_id), agent in items for value in (trace_id, span_id, agent)]
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE ingest_toolcall AS t SET agent = v.agent FROM (VALUES {values}) AS v(trace_id, span_id, agent) "
                "WHERE t.project_id = %s AND t.trace_id = v.trace_id AND t.span_id = v.span_id "
                "AND t.start_time >= %s AND t.agent = '' RETURNING t.start_time",
                [*params, project_id, since],
            )
            return [row[0] for row in cursor.fetchall()]
    changed = []
    for (trace_id, span_id), agent in items:
        calls = ToolCall.objects.filter(project_id=project_id, trace_id=trace_id, span_id=span_id, start_time__gte=since, agent="")
        changed += calls.values_list("start_time", flat=True)
        calls.update(agent=agent)
    return changed


BUCKET_NS = 300 * 1_000_000_000  # the rollup job's unit (dashboard.rollups.BUCKET)


_marks = threading.local()


def mark_changed_buckets(project_id: int, buckets: set[int]) -> None:
    """Queue 5-minute buckets (as BUCKET_NS since the epoch) for the rollup job; already queued
    ones stay once, and a bucket a rollup run has claimed meanwhile loses its claim, so it is
    queued again for the calls that run may not have read (dashboard/rollups/refresh.py).

    Inside `changed_buckets_marked_last` the buckets are gathered and marked when it ends."""
    pending = getattr(_marks, "pending", None)
    if pending is not None:
        pending.setdefault(project_id, set()).update(buckets)
        return
    if not buckets:
        return
    values = ", ".join(["(%s, %s)"] * len(buckets))
    params = [value for bucket in sorted(buckets) for value in (project_id, ns_to_datetime(bucket * BUCKET_NS))]
    with connection.cursor() as cursor:
        # DO UPDATE, not DO NOTHING: it locks the queued row until this transaction commits,
        # so a rollup run claiming meanwhile skips it (SKIP LOCKED) instead of reading the
        # bucket without these calls and deleting its row; rows in sorted order, so two
        # writers cannot deadlock here.
        cursor.execute(
            f"INSERT INTO ingest_changedbucket (project_id, bucket_start) VALUES {values} "
            "ON CONFLICT (project_id, bucket_start) DO UPDATE SET claimed_at = NULL, claimed_by = '' "
            "WHERE ingest_changedbucket.claimed_at IS NOT NULL",
            params,
        )


@contextmanager
def changed_buckets_marked_last() -> Iterator[None]:
    """Gather the buckets marked inside, and mark them in one statement as it ends (on
    success): the last write of the ingest transaction it is entered in, so the queued rows
    it locks are held for the commit only, not for the rest of the request."""
    if getattr(_marks, "pending", None) is not None:  # nested: the outer one marks
        yield
        return
    _marks.pending = {}
    try:
        yield
        pending, _marks.pending = _marks.pending, None
        for project_id, buckets in sorted(pending.items()):
            mark_changed_buckets(project_id, buckets)
    finally:
        _marks.pending = None


# --- log records (POST /v1/logs; docs/contract/logs.md) ----------------------------------------

LOG_COLUMNS = (
    "project_id", "time", "observed_time", "trace_id", "span_id", "session_trace_id", "severity_number", "severity_text",
    "event_name", "body", "attributes", "flags", "call_id", "resource_id", "scope_name", "scope_version",
    "digest", "received_at",
)  # fmt: skip
_LOG_W = _widths(LogRecord)
_LOG_DIGEST = LOG_COLUMNS.index("digest")
LogKey = tuple[dt.datetime, bytes]  # (time, digest): with the project, a stored record's unique key


def log_row(project_id: int, record: LogRecordRecord, resource_id: int, received_at: dt.datetime) -> tuple:
    """One ingest_logrecord row in LOG_COLUMNS order; JSON columns hold Python values."""
    w = _LOG_W
    return (
        project_id, ns_to_datetime(record.time_ns),
        ns_to_datetime(record.observed_ns) if record.observed_ns else None, record.trace_id, record.span_id,
        log_events.session_trace_id(record), record.severity_number, _fit(record.severity_text, w["severity_text"]), _fit(record.event_name, w["event_name"]),
        record.body, record.attributes, record.flags, _fit(record.call_id, w["call_id"]), resource_id,
        _fit(record.scope_name, w["scope_name"]), _fit(record.scope_version, w["scope_version"]), record.digest,
        received_at,
    )  # fmt: skip


def insert_log_records(rows: Sequence[tuple]) -> set[LogKey]:
    """Insert log-record rows, skipping ones already stored; returns the (time, digest) keys that were new.

    Rows with the same key within `rows` are stored once. On PostgreSQL one
    `INSERT … ON CONFLICT DO NOTHING RETURNING` per batch, rows sorted by key (concurrent
    senders lock index entries in the same order); on SQLite (writes serialised) the ORM.
    """
    unique: dict[LogKey, tuple] = {}
    for row in rows:
        unique.setdefault((row[1], bytes(row[_LOG_DIGEST])), row)
    if not unique:
        return set()
    ordered = [unique[key] for key in sorted(unique)]
    if connection.vendor == "postgresql":
        return _pg_insert_log_records(ordered)
    return _orm_insert_log_records(ordered)


_JSON_LOG_COLUMNS = {LOG_COLUMNS.index("body"), LOG_COLUMNS.index("attributes")}


def _pg_insert_log_records(rows: list[tuple]) -> set[LogKey]:
    placeholder = "(" + ", ".join("%s::jsonb" if i in _JSON_LOG_COLUMNS else "%s" for i in range(len(LOG_COLUMNS))) + ")"
    new: set[LogKey] = set()
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 500):
            batch = rows[start : start + 500]
            params = [
                (None if value is None else dumps_json(value).decode()) if i in _JSON_LOG_COLUMNS else value
                for row in batch
                for i, value in enumerate(row)
            ]
            cursor.execute(
                f"INSERT INTO ingest_logrecord ({', '.join(LOG_COLUMNS)}) VALUES {', '.join([placeholder] * len(batch))} "
                "ON CONFLICT (project_id, time, digest) DO NOTHING RETURNING time, digest",
                params,
            )
            new.update((time, bytes(digest)) for time, digest in cursor.fetchall())
    return new


def _orm_insert_log_records(rows: list[tuple]) -> set[LogKey]:
    project_id = rows[0][0]
    existing: set[LogKey] = set()
    digests = [row[_LOG_DIGEST] for row in rows]
    for start in range(0, len(digests), 500):
        existing.update(
            (time, bytes(digest))
            for time, digest in LogRecord.objects.filter(
                project_id=project_id, digest__in=digests[start : start + 500]
            ).values_list("time", "digest")
        )
    new_rows = [row for row in rows if (row[1], bytes(row[_LOG_DIGEST])) not in existing]
    LogRecord.objects.bulk_create([LogRecord(**dict(zip(LOG_COLUMNS, row))) for row in new_rows], batch_size=500)
    return {(row[1], bytes(row[_LOG_DIGEST])) for row in new_rows}


def datetime_to_ns(moment: dt.datetime) -> int:
    return (moment - _EPOCH) // _MICROSECOND * 1000


_RESOURCE_ATTRIBUTES = Subquery(
    Resource.objects.filter(pk=OuterRef("resource_id")).values("attributes")[:1], output_field=JSONField()
)


def stored_log_record(row: LogRecord) -> LogRecordRecord:
    """A stored log record as the record log_events reads (its resource is not needed there)."""
    return LogRecordRecord(
        time_ns=datetime_to_ns(row.time),
        observed_ns=datetime_to_ns(row.observed_time) if row.observed_time else 0,
        trace_id=row.trace_id, span_id=row.span_id, severity_number=row.severity_number,
        severity_text=row.severity_text, event_name=row.event_name, body=row.body, attributes=row.attributes or {},
        flags=row.flags, scope_name=row.scope_name, scope_version=row.scope_version, call_id=row.call_id,
        digest=bytes(row.digest), resource_attributes=getattr(row, "resource_attributes", None) or {},
    )  # fmt: skip


def find_trace_log_records(project_id: int, trace_ids: Sequence[str]) -> list[LogRecordRecord]:
    """The stored log records of these traces (the joins read them; a trace holds few)."""
    found: list[LogRecordRecord] = []
    trace_ids = sorted(set(trace_ids))
    for start in range(0, len(trace_ids), 500):
        rows = (
            LogRecord.objects.filter(project_id=project_id, trace_id__in=trace_ids[start : start + 500])
            .only(
                "time", "observed_time", "trace_id", "span_id", "severity_number", "severity_text", "event_name",
                "body", "attributes", "flags", "scope_name", "scope_version", "call_id", "digest",
            )  # fmt: skip
            .annotate(resource_attributes=_RESOURCE_ATTRIBUTES)
        )
        found.extend(stored_log_record(row) for row in rows)
    return found


def find_toolcalls_in_traces(project_id: int, trace_ids: Sequence[str]) -> list[ToolCall]:
    """The stored tool calls of these traces: key, call id, convention, start time."""
    found: list[ToolCall] = []
    trace_ids = sorted(set(trace_ids))
    for start in range(0, len(trace_ids), 500):
        found.extend(
            ToolCall.objects.filter(project_id=project_id, trace_id__in=trace_ids[start : start + 500]).only(
                "trace_id", "span_id", "call_id", "convention", "start_time"
            )
        )
    return found


def existing_toolcall_keys(project_id: int, keys: Iterable[Key]) -> set[Key]:
    keys = sorted(set(keys))
    found: set[Key] = set()
    for start in range(0, len(keys), 500):
        batch = keys[start : start + 500]
        found.update(
            (trace_id, span_id)
            for trace_id, span_id in ToolCall.objects.filter(
                project_id=project_id, trace_id__in=[k[0] for k in batch], span_id__in=[k[1] for k in batch]
            ).values_list("trace_id", "span_id")
            if (trace_id, span_id) in set(batch)
        )
    return found


def trace_span_records(project_id: int, trace_ids: Iterable[str]) -> list[SpanRecord]:
    """Every stored span of these traces as the records normalize reads (for re-classifying
    their tool calls: a tool span, and the child spans some senders state its outcome on)."""
    out: list[SpanRecord] = []
    traces = sorted(set(trace_ids))
    for start in range(0, len(traces), 500):
        rows = Span.objects.filter(project_id=project_id, trace_id__in=traces[start : start + 500]).with_resource_attributes()
        for row in rows.order_by("start_time", "span_id"):
            out.append(
                SpanRecord(
                    trace_id=row.trace_id, span_id=row.span_id, parent_span_id=row.parent_span_id, name=row.name,
                    kind=row.kind, start_ns=datetime_to_ns(row.start_time), end_ns=datetime_to_ns(row.end_time),
                    status_code=row.status_code, status_message=row.status_message, attributes=row.attributes or {},
                    resource_attributes=row.resource_attributes or {}, scope_name=row.scope_name,
                    scope_version=row.scope_version, events=row.events or [], links=row.links or [],
                    trace_state=row.trace_state, flags=row.flags, service=row.service, environment=row.environment,
                    service_version=row.service_version,
                )  # fmt: skip
            )
    return out


# The fields of a tool call that classification fills (the rest is the span's own and stays).
FAILURE_FIELDS = (
    "ok", "soft_failure", "error_class", "classified_by", "error_type", "error_code", "message", "retryable",
    "field", "suggestion", "retry_after_ms", "fingerprint", "contract", "result",
)  # fmt: skip


def update_toolcall_failure(project_id: int, key: Key, call: ToolCallRecord) -> dt.datetime | None:
    """Give a stored tool call the classification of `call`; returns its start time when anything
    changed (its rollup bucket must be recomputed), else None."""
    stored = ToolCall.objects.filter(project_id=project_id, trace_id=key[0], span_id=key[1]).first()
    if stored is None:
        return None
    values = {name: getattr(call, name) for name in FAILURE_FIELDS}
    for name in ("error_class", "classified_by", "error_type", "error_code", "field"):
        values[name] = _fit(values[name], _CALL_W[name])
    if all(getattr(stored, name) == value for name, value in values.items()):
        return None
    # By its unique key with the start time (one partition, one index probe): the table has no
    # index on id (ingest/migrations/0012_hot_path.py).
    ToolCall.objects.filter(
        project_id=project_id, trace_id=key[0], span_id=key[1], start_time=stored.start_time
    ).update(**values)
    return stored.start_time


def delete_toolcalls(project_id: int, keys: Iterable[Key]) -> list[dt.datetime]:
    """Delete these tool calls; returns their start times (their buckets must be recomputed)."""
    starts: list[dt.datetime] = []
    for trace_id, span_id in sorted(set(keys)):
        calls = ToolCall.objects.filter(project_id=project_id, trace_id=trace_id, span_id=span_id)
        starts += calls.values_list("start_time", flat=True)
        calls.delete()
    return starts
