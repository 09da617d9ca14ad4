"""The demo fleet as the load source of bench/rollup.py and bench/pages.py (`--source fleet`).

    history = fleet_history(url, project_id=1, first_day=day, days=30, calls=10_000_000, seed=1)

Millions of tool calls cannot come from the generator one by one (the SDK, the encoder and
the decode make under 2,000 tool calls a second here), so one day of its traffic is made
once and copied. Every day of the history is then the same traffic: fine for timing
rollups and pages, no use for drift detection (bench/drift_eval.py has its own scenarios).

1. Seed day (`seed_block`): demo.simulate's Simulator (the demo fleet: 23 tools, every
   kind of evidence of docs/contract/error-classes.md, explicit and implicit retries, escalations; no drift) makes
   one day of sessions in backfill mode (every session that starts and ends within the
   day) on the fixed day ANCHOR, so the block is the same whatever the date of the run, at
   the rate that gives about calls / days tool-call rows. `backfill` hands them, about
   5,000 spans at a time, to `RowExporter`, which serialises them with the official
   encoder (what OTLPSpanExporter sends), decodes them with ingest.otlp and builds the rows
   as spans_ingest does (otlp.iter_spans, linking, normalize.normalize_tool_call,
   storage.span_row / toolcall_row), then COPYs them (storage.copy_rows) into two staging
   tables. About 9 % of the fleet's tool-call rows fail (8.6 % of the seed day with seed 1:
   what its profile makes without drift; the SQL source of the benches fails ~30 %).
2. Copies (`replicate`): copy k is one INSERT … SELECT per table from the staging tables,
   every time (start, end, received_at, the events' time_ns) shifted by shifts[k], and each
   trace id's first 8 hex digits replaced by k's, so the copies' ids are unique as long as
   the seed's last 24 digits are (checked; span ids are kept, unique within a trace as in
   the seed). `fleet_history` shifts copy k by whole days: day k holds the seed day's
   traffic; with spans=False only the tool-call rows are copied (what bench/rollup.py needs).
3. The staging tables are dropped. Nothing is queued in ingest_changedbucket and no
   IngestStat is written: the benches compute the rollups themselves.

Needs Django set up on the bench database (bench.ingest.django_setup) and the target
day partitions created (ingest.partitions.ensure_partitions).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from bench.ingest import connect, run_on_connections

ANCHOR = dt.date(2025, 1, 1)  # the seed day is made here, then shifted
SPAN_STAGE = "bench_fleet_span"
CALL_STAGE = "bench_fleet_toolcall"
BATCH_SPANS = 5_000  # spans per encoded request, as demo.simulate.send batches them
CALIBRATION_CALLS = 5_000
DAY = dt.timedelta(days=1)


@dataclass
class SeedBlock:
    spans: int
    calls: int  # tool-call rows (attempts)
    failed: int
    traces: int
    seconds: float  # generate + encode + decode + COPY, wall clock
    cpu_seconds: float  # this process's CPU time for the same (the database's is not in it)


@dataclass
class FleetHistory:
    seed: SeedBlock
    rate: float  # the Simulator's rate: logical calls per hour
    spans: int
    calls: int
    seconds: float  # everything, wall clock
    replicate_seconds: float


def _default_log(message: str = "") -> None:
    print(message, flush=True)


# ---------------------------------------------------------------------------
# The seed block: the fleet through the official encoder and Toolwatch's decode
# ---------------------------------------------------------------------------


def request_rows(request, project_id: int, received_at: dt.datetime, escalation_tools: frozenset[str] = frozenset(),
                 limits=None):  # fmt: skip
    """(span_rows, toolcall_rows) of a decoded request, built as spans_ingest builds them; its
    resources are stored in ingest_resource (the rows refer to them).

    The agents of tool calls are resolved within the request: `demo.simulate.send` never
    splits a session, so every ancestor is there (spans_ingest settles the same way, plus
    ancestors stored by earlier requests)."""
    from ingest import linking, normalize, otlp, storage
    from ingest.limits import DEFAULT_LIMITS

    limits = limits or DEFAULT_LIMITS
    now_ns = int(received_at.timestamp()) * 1_000_000_000
    # Stored (or found) as spans_ingest does, in their own transaction: the rows refer to them.
    resources = otlp.request_resources(request, limits)
    resource_ids = storage.resource_ids(project_id, resources, received_at)
    parents, agents, spans = {}, {}, []
    for item in otlp.iter_spans(request, limits, now_ns=now_ns, resources=resources):
        if isinstance(item, otlp.RejectedSpan):
            raise RuntimeError(f"a generated span was rejected: {item}")
        key = (item.trace_id, item.span_id)
        parents[key] = item.parent_span_id
        agent = linking.span_agent(item.attributes)
        if agent:
            agents[key] = agent
        spans.append(item)
    span_rows = [
        storage.span_row(project_id, s, agents.get((s.trace_id, s.span_id), ""), received_at, resource_ids[s.resource_digest])
        for s in spans
    ]
    toolcall_rows = []
    for span in spans:
        call = normalize.normalize_tool_call(span, escalation_tools=escalation_tools)
        if call is None:
            continue
        if not call.agent:
            call.agent = linking.resolve_agent((span.trace_id, span.span_id), parents, agents)
        toolcall_rows.append(storage.toolcall_row(project_id, span, call, received_at))
    return span_rows, toolcall_rows


class RowExporter(SpanExporter):
    """Encodes the SDK's spans as OTLPSpanExporter does, decodes them with ingest.otlp and
    COPYs the span and tool-call rows into the staging tables (Django's connection)."""

    def __init__(self, project_id: int, escalation_tools: frozenset[str] = frozenset()):
        self.project_id = project_id
        self.escalation_tools = escalation_tools
        self.spans = self.calls = self.failed = 0

    def export(self, spans) -> SpanExportResult:
        from django.db import connection

        from ingest import otlp, storage

        body = encode_spans(spans).SerializePartialToString()
        request = otlp.decode_request(body, otlp.PROTOBUF)
        # Received a second after the batch's last span ended, as an exporter would send it.
        received_at = storage.ns_to_datetime(max(span.end_time for span in spans)) + dt.timedelta(seconds=1)
        span_rows, toolcall_rows = request_rows(request, self.project_id, received_at, self.escalation_tools)
        with connection.cursor() as cursor:
            storage.copy_rows(cursor, SPAN_STAGE, storage.SPAN_COLUMNS, storage.SPAN_TYPES, span_rows)
            storage.copy_rows(cursor, CALL_STAGE, storage.TOOLCALL_COLUMNS, storage.TOOLCALL_TYPES, toolcall_rows)
        self.spans += len(span_rows)
        self.calls += len(toolcall_rows)
        ok = storage.TOOLCALL_COLUMNS.index("ok")
        self.failed += sum(1 for row in toolcall_rows if not row[ok])
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def attempts_per_call(seed: int) -> float:
    """Tool-call rows per logical call of the fleet (retries and repairs add rows), from a sample."""
    from demo.simulate import Simulator

    sim = Simulator(seed=seed, rate=CALIBRATION_CALLS, daily_cycle=0.0)
    start = dt.datetime.combine(ANCHOR, dt.time(), tzinfo=dt.UTC)
    calls = attempts = 0
    for session in sim.sessions(start, start + dt.timedelta(hours=1)):
        calls += session.tool_calls
        attempts += sum(len(call.attempts) for call in session.calls)
    sim.shutdown()
    return attempts / calls


def _stage_tables() -> None:
    from django.db import connection

    from ingest.storage import SPAN_COLUMNS, TOOLCALL_COLUMNS

    with connection.cursor() as cursor:
        stages = ((SPAN_STAGE, "ingest_span", SPAN_COLUMNS), (CALL_STAGE, "ingest_toolcall", TOOLCALL_COLUMNS))
        for stage, table, columns in stages:
            cursor.execute(f"DROP TABLE IF EXISTS {stage}")
            # Unlogged: scratch data, rebuilt on every run.
            cursor.execute(f"CREATE UNLOGGED TABLE {stage} AS SELECT {', '.join(columns)} FROM {table} WITH NO DATA")


def _sort_stage(stage: str) -> None:
    """Rewrite a staging table in start order, so that the copies go in as ingest writes them (by time)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {stage}_sorted")
        cursor.execute(
            f"CREATE UNLOGGED TABLE {stage}_sorted AS SELECT * FROM {stage} ORDER BY start_time, trace_id, span_id"
        )
        cursor.execute(f"DROP TABLE {stage}")
        cursor.execute(f"ALTER TABLE {stage}_sorted RENAME TO {stage}")
        cursor.execute(f"ANALYZE {stage}")


def seed_block(*, project_id: int, start: dt.datetime, end: dt.datetime, rate: float, seed: int,
               escalation_tools: frozenset[str] = frozenset()) -> SeedBlock:  # fmt: skip
    """The fleet's sessions that start and end within [start, end), as rows in the staging tables.

    `rate` is the Simulator's: logical tool calls per hour at the daily mean (the fleet's
    daily cycle stays on). Deterministic for (seed, start, end, rate)."""
    from django.db import connection

    from demo.simulate import Simulator, backfill

    wall, cpu = time.perf_counter(), time.process_time()
    _stage_tables()
    sim = Simulator(seed=seed, rate=rate)
    exporter = RowExporter(project_id, escalation_tools)
    backfill(sim, exporter, start=start, end=end, batch_spans=BATCH_SPANS)
    sim.shutdown()
    _sort_stage(SPAN_STAGE)
    _sort_stage(CALL_STAGE)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), count(DISTINCT (trace_id, span_id)), count(DISTINCT trace_id), "
            f"count(DISTINCT substr(trace_id, 9)) FROM {SPAN_STAGE}"
        )
        rows, distinct, traces, suffixes = cursor.fetchone()
    if distinct != rows:
        raise RuntimeError(f"the seed block holds {rows - distinct} repeated (trace id, span id) pairs")
    if suffixes != traces:
        raise RuntimeError("two seed traces share their last 24 hex digits: the copies' trace ids would collide")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return SeedBlock(exporter.spans, exporter.calls, exporter.failed, traces, wall, cpu)


# ---------------------------------------------------------------------------
# The copies, in SQL
# ---------------------------------------------------------------------------


def _copy_sql(stage: str, table: str, columns: Sequence[str]) -> str:
    shifted = {
        "trace_id": "%(prefix)s || substr(trace_id, 9)",
        "start_time": "start_time + %(shift)s",
        "end_time": "end_time + %(shift)s",
        "received_at": "received_at + %(shift)s",
        # Exception and escalation events carry their own time. (Links, which name other traces,
        # are copied as they are: the fleet makes none.)
        "events": (
            # events is JSON text (ingest.models.WholeJSONField): worked on as jsonb, stored back as its text.
            "CASE WHEN events::jsonb = '[]'::jsonb THEN events::jsonb ELSE (SELECT jsonb_agg(e || jsonb_build_object("
            "'time_ns', (e ->> 'time_ns')::bigint + %(shift_ns)s::bigint) ORDER BY i) "
            "FROM jsonb_array_elements(events::jsonb) WITH ORDINALITY AS x(e, i)) END"
        ),
    }
    select = ", ".join(shifted.get(column, column) for column in columns)
    return f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select} FROM {stage}"


def _connect(url: str):
    # Two connections reading one big table would share a scan, each starting mid-table: keep start order.
    return connect(url, synchronize_seqscans="off")


def replicate(url: str, *, shifts: Sequence[dt.timedelta], workers: int = 2, spans: bool = True,
              on_copy: Callable[[int], None] | None = None) -> tuple[int, int]:  # fmt: skip
    """Copy k of the staging tables into ingest_span (unless not `spans`) and ingest_toolcall,
    times shifted by shifts[k] and trace ids prefixed with k (8 hex digits), `workers`
    connections at a time; returns (spans, tool calls) written. `on_copy(done)` runs after each copy."""
    from ingest.storage import SPAN_COLUMNS, TOOLCALL_COLUMNS

    if len(shifts) > 16**8:
        raise ValueError("at most 16**8 copies: the copy number is 8 hex digits")
    statements = {"ingest_toolcall": _copy_sql(CALL_STAGE, "ingest_toolcall", TOOLCALL_COLUMNS)}
    if spans:
        statements["ingest_span"] = _copy_sql(SPAN_STAGE, "ingest_span", SPAN_COLUMNS)
    written = dict.fromkeys(statements, 0)
    done = 0

    def copy(conn, k: int) -> dict[str, int]:
        shift_ns = shifts[k] // dt.timedelta(microseconds=1) * 1000
        params = {"prefix": f"{k:08x}", "shift": shifts[k], "shift_ns": shift_ns}
        return {table: conn.execute(statement, params).rowcount for table, statement in statements.items()}

    def copied(_k: int, counts: dict[str, int]) -> None:
        nonlocal done
        for table, count in counts.items():
            written[table] += count
        done += 1
        if on_copy is not None:
            on_copy(done)

    run_on_connections(lambda: _connect(url), range(len(shifts)), workers, copy, copied)
    return written.get("ingest_span", 0), written["ingest_toolcall"]


def drop_stage() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {SPAN_STAGE}, {CALL_STAGE}")


# ---------------------------------------------------------------------------
# What the benches call
# ---------------------------------------------------------------------------


def fleet_history(url: str, *, project_id: int, first_day: dt.date, days: int, calls: int, seed: int,
                  workers: int = 2, spans: bool = True, log: Callable[[str], None] = _default_log) -> FleetHistory:  # fmt: skip
    """About `calls` tool calls (and, with `spans`, their traces' spans) over `days` days from
    `first_day`: the fleet's seed day, copied to each day. The total is days × the seed day's
    rows, within about 1 % of `calls` (the fleet's sessions are Poisson draws)."""
    t0 = time.perf_counter()
    ratio = attempts_per_call(seed)
    rate = calls / days / 24 / ratio
    anchor = dt.datetime.combine(ANCHOR, dt.time(), tzinfo=dt.UTC)
    log(f"  seed day: the demo fleet at {rate:,.0f} calls/h ({ratio:.3f} tool-call rows per call), backfill of "
        f"{ANCHOR}, official encoder -> ingest.otlp decode -> rows -> COPY into {SPAN_STAGE} / {CALL_STAGE}")  # fmt: skip
    block = seed_block(project_id=project_id, start=anchor, end=anchor + DAY, rate=rate, seed=seed)
    log(f"  seed day: {block.calls:,} tool calls ({block.failed / max(block.calls, 1):.1%} failing), {block.spans:,} spans, "
        f"{block.traces:,} traces in {block.seconds:.1f} s ({block.calls / block.seconds:,.0f} calls/s; "
        f"{block.cpu_seconds:.1f} s CPU in this process)")  # fmt: skip
    offset = first_day - ANCHOR
    t = time.perf_counter()

    def progress(done: int) -> None:
        if done % max(1, days // 5) == 0 or done == days:
            elapsed = time.perf_counter() - t
            log(f"  {done}/{days} days copied, {done * block.calls:,} tool calls, {elapsed:.0f} s "
                f"({done * block.calls / elapsed:,.0f} calls/s)")  # fmt: skip

    shifts = [offset + k * DAY for k in range(days)]
    span_rows, tool_calls = replicate(url, shifts=shifts, workers=workers, spans=spans, on_copy=progress)
    replicate_s = time.perf_counter() - t
    drop_stage()
    return FleetHistory(block, rate, span_rows, tool_calls, time.perf_counter() - t0, replicate_s)
