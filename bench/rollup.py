"""Rollups on PostgreSQL: a full recompute of 30 days of tool calls, and the every-minute
incremental job under live ingest, in one run.

    .venv/bin/python bench/rollup.py [--calls 10000000] [--days 30] [--tools 50]
        [--database-url postgres://postgres@127.0.0.1:5432/toolwatch_rollup_bench] [--reuse]
        [--minutes 16] [--live-spans-per-s 20000] [--profile] [--source sql|fleet]

With the defaults about 19 minutes on this machine (2 cores), over the ten wanted: ~3 min
generating 10 M rows, ~10.5 min for the full recompute (the figure is the point) and ~5.5
min for three simulated minutes of live ingest, each refresh taking longer than the minute
it stands for. --reuse skips the generation on a rerun when the data is there. For a
quick run (~3 min): --calls 1000000 --minutes 2 --live-spans-per-s 2000 (--days and
--tools keep their meaning; the incremental phase is sized by --live-spans-per-s, not by
--calls). Sparser data makes more rollup rows per call, so a small run's calls/s is no
guide to the 10 M figure. --help lists every option.

A benchmark that prints figures, not a test. Phases:

1. Setup: drop and recreate the bench database, migrate it, create a project, create the
   day partitions (ingest.partitions.ensure_partitions), then generate --calls tool-call
   rows over --days days straight in PostgreSQL: one `INSERT … SELECT … FROM
   generate_series` per day, two connections at a time. The shapes: traces of 5 logical
   calls a few seconds apart; a trace has one service (4, weighted), environment (prod,
   staging, dev) and agent (3 per service); each service calls ~15 of the --tools tools,
   skewed towards a few; ~10 % of calls are retried once (same trace and call_id,
   `attempt` = 2, after a failed first attempt), ~30 % of attempts fail, with a class mix
   (transient, validation, permission, not_found, business, user_input, fatal, unknown) and
   the contract checks of a failure; latencies log-normal around a per-tool median (20 ms
   to 0.5 s, capped at 30 s). With --source fleet the calls come from the demo fleet
   instead (bench/fleet_load.py): one day of demo.simulate's traffic (23 tools, 7
   deployments, every kind of evidence, ~9 % of attempts failing, no drift) encoded by the
   official encoder, decoded and normalised by ingest's own code, then copied to each of
   the --days days in SQL (new trace ids, times shifted by whole days): about --calls rows
   (days × the seed day's), --tools unused; the live minutes of phase 3 still come from
   the SQL generator. Then VACUUM ANALYZE, as autovacuum would have done to settled day
   partitions. --reuse keeps an existing bench database whose data was generated with the
   same --source/--calls/--days/--tools/--seed.
2. Full recompute: the rollups table emptied, then `dashboard.rollups.refresh.rollups_rebuild` (what
   `manage.py rebuild_rollups` runs) over the whole range: a day at a time, --rebuild-workers
   days at once on their own connections. Timed as a whole; with --rebuild-workers 1, where
   the time goes is measured per kind of SQL statement (a Django execute wrapper), the rest
   being the Python linking of the calls with several attempts (in this process only).
   Peak RSS of this process: resource.getrusage(RUSAGE_SELF).ru_maxrss.
3. Incremental: the every-minute `refresh-rollups` job at --live-spans-per-s of live
   ingest, of which --tool-share are tool spans: each simulated minute inserts that
   minute's tool calls (20,000 × 60 × 0.5 = 600k) into the current hour (the hour after
   the generated days), --late-share of them (1 %) into hours up to --late-hours old, and
   queues their 5-minute buckets in ingest_changedbucket in the same statement, as ingest
   does; then `rollups_refresh(project_id=…, now=…)` is timed, at 5 s past the minute.
   The filling bucket holds far more than OPEN_BUCKET_CALLS, so it waits until it has
   settled (SETTLE after its end) and is rolled up once; the late buckets are done every
   minute. So the work comes in 5-minute waves: incremental_share = the mean refresh
   seconds over whole waves in the steady state / 60: from the first refresh that finds a
   settled bucket (minute 7: the first bucket settles SETTLE after minute 5) on, a multiple
   of 5 minutes (minutes 7–16 of the default 16).
   Afterwards the live rows are deleted again and the rollups of the hours they touched
   recomputed, so the database holds the generated data only (for --reuse).
4. With --profile: cProfile of one --profile-hours chunk of the full recompute (untimed),
   top functions by own time and the phases by cumulative time.

The last line is the figures as key=value:
    full_recompute_s=… incremental_share=… calls=… full_calls_per_s=… peak_rss_mb=…
(peak_rss_mb: the process's peak after the full recompute; the incremental phase's is in
the report.) Targets: full recompute of 10 M calls ≤ 120 s; incremental share ≤ 0.10.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import json
import math
import os
import pstats
import resource
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The bench databases are made the same way for every benchmark (bench/pages.py imports them from here).
from bench.ingest import _admin_url, connect, django_setup, recreate_database, run_on_connections  # noqa: E402,F401

TARGET_FULL_S = 120.0  # for 10 M calls
TARGET_FULL_CALLS = 10_000_000
TARGET_SHARE = 0.10
JOB_INTERVAL_S = 60.0
REFRESH_OFFSET_S = 5  # each simulated minute's refresh runs this long past it
META_TABLE = "bench_rollup_meta"
META_VERSION = 1
LIVE_CONVENTION = "bench_live"  # marks the rows of the incremental phase, deleted afterwards
CALLS_PER_TRACE = 5
RETRIED_SHARE = 0.10
HOUR = dt.timedelta(hours=1)
MIB = 1024 * 1024


def log(message: str = "") -> None:
    print(message, flush=True)


def _fmt(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# ---------------------------------------------------------------------------
# Setup
# ---------------------------------------------------------------------------


def read_meta(url: str) -> dict | None:
    """The generation parameters of an existing bench database, or None."""
    import psycopg

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            return None
    with psycopg.connect(url, autocommit=True) as conn:
        if not conn.execute("SELECT to_regclass(%s)", [META_TABLE]).fetchone()[0]:
            return None
        row = conn.execute(f"SELECT value FROM {META_TABLE} WHERE key = 'generation'").fetchone()
    return json.loads(row[0]) if row else None


def write_meta(url: str, meta: dict) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key text PRIMARY KEY, value text NOT NULL)")
        conn.execute(
            f"INSERT INTO {META_TABLE} (key, value) VALUES ('generation', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            [json.dumps(meta)],
        )


def migrate_and_create_project() -> int:
    from django.core.management import call_command

    from ingest.models import Project

    call_command("migrate", interactive=False, verbosity=0)
    return Project.objects.create(name="Rollup bench", slug="rollup-bench").pk


# ---------------------------------------------------------------------------
# Synthetic tool calls, generated in PostgreSQL
# ---------------------------------------------------------------------------

SERVICES = ("support-agent", "billing-agent", "search-api", "ops-bot")  # weights 40/25/20/15 %
AGENTS = (
    ("triage", "refunds", "researcher"),
    ("billing", "invoices", "collections"),
    ("search", "ranker", "summarizer"),
    ("oncall", "deployer", "reporter"),
)  # fmt: skip
ENVIRONMENTS = ("prod", "staging", "dev")  # 85/12/3 %
_VERBS = ("get", "search", "create", "update", "list", "send", "cancel", "lookup", "refund", "summarize")
_NOUNS = ("order", "customer", "invoice", "ticket", "document", "payment", "shipment", "account", "report", "email",
          "subscription", "product", "user", "incident", "deployment")  # fmt: skip
TOOLS_PER_SERVICE = 15
# Cumulative shares of the error classes of a failed attempt.
CLASS_MIX = (
    ("transient", 0.35), ("validation", 0.55), ("permission", 0.63), ("not_found", 0.73),
    ("business", 0.85), ("user_input", 0.90), ("fatal", 0.93), ("unknown", 1.0),
)  # fmt: skip
MESSAGES = {
    "transient": "upstream timed out after 10s", "validation": "field 'query' is required",
    "permission": "caller may not read this resource", "not_found": "no such record",
    "business": "order already shipped", "user_input": "ambiguous customer name",
    "fatal": "internal error", "unknown": "something went wrong",
}  # fmt: skip


def tool_names(count: int) -> list[str]:
    names = [f"{verb}_{noun}" for noun in _NOUNS for verb in _VERBS]
    if count > len(names):
        names += [f"tool_{i}" for i in range(len(names), count)]
    return names[:count]


_COLUMNS = (
    "project_id", "trace_id", "span_id", "parent_span_id", "start_time", "end_time", "latency_ms", "tool",
    "convention", "tool_type", "call_id", "attempt", "resend_count", "arguments", "arguments_hash", "result", "ok",
    "soft_failure", "error_class", "classified_by", "error_type", "error_code", "message", "retryable", "field",
    "suggestion", "retry_after_ms", "escalated", "next_action", "agent", "service", "environment", "fingerprint",
    "contract", "received_at",
)  # fmt: skip


def _case(expr: str, pairs: list[tuple[str, str]], default: str) -> str:
    return "CASE " + " ".join(f"WHEN {expr} {cond} THEN {value}" for cond, value in pairs) + f" ELSE {default} END"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _array(values) -> str:
    return "ARRAY[" + ", ".join(_literal(v) for v in values) + "]::text[]"


# Trace starts: spread evenly over a window, or (late calls) in one of the hours before `now_hour`,
# most of them recent: 1 + floor((late_hours - 1) * u^3) hours back.
_WINDOW_START = "%(window_start)s::timestamptz + make_interval(secs => (t + h_u1) * %(spacing)s::float8)"
_LATE_START = (
    "date_trunc('hour', %(window_start)s::timestamptz) "
    "- make_interval(hours => 1 + floor((%(late_hours)s::int - 1) * h_u1 * h_u1 * h_u1)::int) "
    "+ make_interval(secs => h_u2 * 3540)"
)


def generation_sql(tools: int, trace_start: str, mark_changed_buckets: bool) -> str:
    """One statement inserting %(n_calls)s logical calls (%(n_retried)s of them retried once) as tool-call rows."""
    cls_case = _case("u_cls", [(f"< {share}", _literal(name)) for name, share in CLASS_MIX[:-1]], _literal(CLASS_MIX[-1][0]))
    message = _case("ecls", [(f"= {_literal(k)}", _literal(v)) for k, v in MESSAGES.items()], "''")
    stride = max(1, tools // len(SERVICES))
    ctes = f"""
WITH base AS MATERIALIZED (
    SELECT c, c / {CALLS_PER_TRACE} AS t, mod(c, {CALLS_PER_TRACE}) AS k,
           mod(%(mult)s::bigint * c + %(add)s::bigint, %(n_calls)s::bigint) < %(n_retried)s::bigint AS retried,
           random() AS u_fail1, random() AS u_fail2, random() AS u_cls1, random() AS u_cls2, random() AS u_tool,
           1 - random() AS u_lat1a, random() AS u_lat1b, 1 - random() AS u_lat2a, random() AS u_lat2b,
           random() AS u_jit, random() AS u_esc, random() AS u_con1, random() AS u_con2, random() AS u_con3
    FROM generate_series(0::bigint, %(n_calls)s::bigint - 1) AS c
), traced AS (
    SELECT b.*,
           mod(abs(hashint8extended(t, %(seed)s::bigint)), 100) AS h_svc,
           mod(abs(hashint8extended(t, %(seed)s::bigint + 1)), 100) AS h_env,
           mod(abs(hashint8extended(t, %(seed)s::bigint + 2)), 3)::int AS h_agent,
           mod(abs(hashint8extended(t, %(seed)s::bigint + 3)), 1000000) / 1000000.0::float8 AS h_u1,
           mod(abs(hashint8extended(t, %(seed)s::bigint + 4)), 1000000) / 1000000.0::float8 AS h_u2
    FROM base b
), shaped AS (
    SELECT x.*,
           CASE WHEN h_svc < 40 THEN 0 WHEN h_svc < 65 THEN 1 WHEN h_svc < 85 THEN 2 ELSE 3 END AS svc,
           CASE WHEN h_env < 85 THEN 1 WHEN h_env < 97 THEN 2 ELSE 3 END AS env,
           {trace_start} AS trace_start
    FROM traced x
), tooled AS (
    SELECT s.*, mod(svc * {stride} + floor({TOOLS_PER_SERVICE} * u_tool * u_tool)::int, {tools}) AS tool_idx
    FROM shaped s
), calls AS (
    SELECT o.*,
           retried OR u_fail1 < 0.08 + 0.28 * mod(tool_idx * 7, 10) / 9.0 AS fail1,
           least(30000.0, 20.0 * power(1.35::float8, mod(tool_idx, 12))
                 * exp(0.9 * sqrt(-2 * ln(u_lat1a)) * cos(2 * pi() * u_lat1b))) AS lat1,
           least(30000.0, 20.0 * power(1.35::float8, mod(tool_idx, 12))
                 * exp(0.9 * sqrt(-2 * ln(u_lat2a)) * cos(2 * pi() * u_lat2b))) AS lat2,
           trace_start + make_interval(secs => k * 3 + u_jit * 2) AS start1
    FROM tooled o
)"""
    columns = ", ".join(_COLUMNS)
    select = f"""
SELECT %(project_id)s::bigint, md5(%(ns)s::text || ':' || t), left(md5(%(ns)s::text || ':' || c || ':' || a.n), 16),
       left(md5(%(ns)s::text || ':' || t || ':agent'), 16), st, st + make_interval(secs => lat / 1000.0), lat,
       ({_array(tool_names(tools))})[tool_idx + 1], %(convention)s, 'function',
       'call_' || left(md5(%(ns)s::text || ':' || c || ':call'), 24), CASE WHEN a.n = 2 THEN 2 END, NULL,
       NULL, left(md5(%(ns)s::text || ':' || c || ':args'), 16), NULL, ok,
       false, ecls, CASE WHEN ok THEN '' ELSE 'envelope:error_class=' || ecls END,
       CASE WHEN ok THEN '' ELSE 'ToolError' END, upper(ecls), {message},
       CASE WHEN NOT ok AND u_con1 < 0.3 THEN ecls = 'transient' END,
       CASE WHEN ecls = 'validation' AND u_con2 < 0.6 THEN 'query' ELSE '' END, '',
       CASE WHEN ecls = 'transient' AND u_con1 < 0.2 THEN 1000 END, u_esc < 0.005,
       CASE WHEN ok THEN '' WHEN ecls IN ('transient', 'unknown') THEN 'retry' WHEN ecls = 'validation' THEN 'repair'
            ELSE 'stop' END,
       ({_array(a for agents in AGENTS for a in agents)})[svc * 3 + h_agent + 1], ({_array(SERVICES)})[svc + 1],
       ({_array(ENVIRONMENTS)})[env],
       CASE WHEN ok THEN '' ELSE left(md5(tool_idx || ecls), 16) END,
       CASE WHEN ok THEN '{{}}'::jsonb ELSE jsonb_build_object(
           'explicit_class', u_con1 < 0.4, 'explicit_retryable', u_con1 < 0.3,
           'retry_after', CASE WHEN ecls = 'transient' THEN u_con1 < 0.2 END,
           'field_named', CASE WHEN ecls = 'validation' THEN u_con2 < 0.6 END,
           'suggestion', CASE WHEN ecls = 'validation' THEN u_con2 < 0.35 END,
           'specific_message', u_con2 < 0.8, 'no_internals', u_con3 < 0.9,
           'retryable_consistent', CASE WHEN u_con1 < 0.3 THEN true END) END,
       st + interval '2 seconds'
FROM calls
CROSS JOIN LATERAL (VALUES (1), (2)) AS a(n)
CROSS JOIN LATERAL (
    SELECT CASE WHEN a.n = 1 THEN start1 ELSE start1 + make_interval(secs => (lat1 + 200) / 1000.0) END AS st,
           CASE WHEN a.n = 1 THEN lat1 ELSE lat2 END AS lat,
           CASE WHEN a.n = 1 THEN NOT fail1 ELSE u_fail2 >= 0.35 END AS ok,
           CASE WHEN a.n = 1 THEN u_cls1 ELSE u_cls2 END AS u_cls
) AS att
CROSS JOIN LATERAL (SELECT CASE WHEN att.ok THEN '' ELSE {cls_case} END AS ecls) AS e
WHERE a.n = 1 OR retried"""
    insert = f"INSERT INTO ingest_toolcall ({columns}){select}"
    if not mark_changed_buckets:
        return f"{ctes}\n{insert}"
    # As ingest does: the 5-minute buckets of the stored calls queued in the same transaction.
    return (
        f"{ctes}, ins AS ({insert}\nRETURNING start_time)\n"
        "INSERT INTO ingest_changedbucket (project_id, bucket_start) "
        "SELECT DISTINCT %(project_id)s::bigint, date_bin('5 minutes', start_time, TIMESTAMPTZ '1970-01-01 00:00:00+00') "
        "FROM ins ON CONFLICT (project_id, bucket_start) DO NOTHING"
    )


def call_params(*, rows: int, project_id: int, ns: str, seed: int, window_start: dt.datetime,
                window_seconds: float, convention: str = "genai", late_hours: int = 48) -> dict:  # fmt: skip
    """Parameters for `rows` rows exactly: n_calls logical calls, rows - n_calls of them retried."""
    n_calls = max(1, round(rows / (1 + RETRIED_SHARE)))
    n_retried = rows - n_calls
    mult = 2_654_435_761  # a prime: c -> (mult * c + add) mod n_calls is a permutation, so exactly n_retried retried
    n_traces = math.ceil(n_calls / CALLS_PER_TRACE)
    return {
        "project_id": project_id, "ns": ns, "seed": seed, "n_calls": n_calls, "n_retried": n_retried,
        "mult": mult, "add": (seed * 7_919) % n_calls, "window_start": window_start,
        "spacing": window_seconds / n_traces, "convention": convention, "late_hours": late_hours,
    }  # fmt: skip


def _connect(url: str):
    return connect(url, work_mem="64MB")


def _setseed(conn, seed: int, salt: int) -> None:
    conn.execute("SELECT setseed(%s)", [((seed * 1_000_003 + salt * 7_919) % 20_000) / 10_000 - 1])


def generate_history(url: str, project_id: int, first_day: dt.date, days: int, rows_total: int, tools: int,
                     seed: int, workers: int) -> float:  # fmt: skip
    """The generated days, `workers` connections at a time; returns seconds."""
    statement = generation_sql(tools, _WINDOW_START, mark_changed_buckets=False)
    per_day = [rows_total // days + (1 if i < rows_total % days else 0) for i in range(days)]
    done: list[int] = []
    start = time.perf_counter()

    def generate(conn, index: int) -> None:
        day = first_day + dt.timedelta(days=index)
        day_start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
        _setseed(conn, seed, index)
        # A minute of margin: a trace's last attempt stays inside its day partition.
        params = call_params(rows=per_day[index], project_id=project_id, ns=f"h{seed}:{day:%Y%m%d}",
                             seed=seed, window_start=day_start, window_seconds=86_400 - 60)  # fmt: skip
        conn.execute(statement, params)

    def generated(index: int, _result) -> None:
        done.append(index)
        if len(done) % max(1, days // 5) == 0 or len(done) == days:
            elapsed = time.perf_counter() - start
            rows = sum(per_day[i] for i in done)
            log(f"  {len(done)}/{days} days, {_fmt(rows)} rows, {elapsed:.0f} s ({_fmt(rows / elapsed)} rows/s)")

    run_on_connections(lambda: _connect(url), range(days), workers, generate, generated)
    return time.perf_counter() - start


def insert_live_minute(conn, *, project_id: int, hour: dt.datetime, minute: int, rows: int, late_rows: int,
                       late_hours: int, tools: int, seed: int) -> None:  # fmt: skip
    """One minute of live ingest: `rows` calls in minute `minute` of `hour`, `late_rows` of them late."""
    _setseed(conn, seed, 100_000 + minute)
    current = rows - late_rows
    params = call_params(rows=current, project_id=project_id, ns=f"l{seed}:{hour:%Y%m%d%H}:{minute}", seed=seed,
                         window_start=hour + dt.timedelta(minutes=minute - 1), window_seconds=60,
                         convention=LIVE_CONVENTION)  # fmt: skip
    conn.execute(generation_sql(tools, _WINDOW_START, mark_changed_buckets=True), params)
    if late_rows:
        params = call_params(rows=late_rows, project_id=project_id, ns=f"late{seed}:{hour:%Y%m%d%H}:{minute}",
                             seed=seed + minute, window_start=hour, window_seconds=3600,
                             convention=LIVE_CONVENTION, late_hours=late_hours)  # fmt: skip
        conn.execute(generation_sql(tools, _LATE_START, mark_changed_buckets=True), params)
    # What autovacuum does to a partition growing this fast (it analyses one after 10 % of it
    # changed, every minute here): without it the planner takes the live hour for empty.
    from ingest.partitions import partition_name

    conn.execute(f"ANALYZE {partition_name('ingest_toolcall', hour.date())}")


def delete_live_rows(conn, project_id: int, end: dt.datetime, late_hours: int) -> int:
    cur = conn.execute(
        "DELETE FROM ingest_toolcall WHERE project_id = %s AND convention = %s AND start_time >= %s",
        [project_id, LIVE_CONVENTION, end - dt.timedelta(hours=late_hours + 1)],
    )
    conn.execute("DELETE FROM ingest_changedbucket WHERE project_id = %s", [project_id])
    if cur.rowcount:
        # As autovacuum would: a rerun (--reuse) must not scan the dead rows of this one.
        conn.execute("VACUUM (ANALYZE) ingest_toolcall")
    return cur.rowcount


def data_profile(conn, project_id: int, day: dt.datetime) -> dict:
    """The shape of the generated data, exactly, over one day (a day partition is a fair sample)."""
    where = "project_id = %s AND convention <> %s AND start_time >= %s AND start_time < %s"
    params = [project_id, LIVE_CONVENTION, day, day + dt.timedelta(days=1)]
    row = conn.execute(
        f"""
        SELECT count(*), count(*) FILTER (WHERE NOT ok), count(*) FILTER (WHERE attempt = 2),
               count(DISTINCT trace_id), count(DISTINCT tool), count(DISTINCT (service, environment, agent)),
               count(DISTINCT (tool, service, environment, agent)),
               percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY latency_ms),
               pg_size_pretty(pg_total_relation_size('ingest_toolcall')
                   + (SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits
                      WHERE inhparent = 'ingest_toolcall'::regclass))
        FROM ingest_toolcall WHERE {where}
        """,
        params,
    ).fetchone()
    classes = conn.execute(
        f"SELECT error_class, count(*) FROM ingest_toolcall WHERE {where} AND NOT ok GROUP BY 1 ORDER BY 2 DESC", params
    ).fetchall()
    rows, failed, retries, traces, tools, dims, combos, pct, size = row
    rows = max(rows, 1)
    return {
        "rows": rows, "failed": failed / rows, "retries": retries / rows, "per_trace": rows / max(traces, 1),
        "tools": tools, "dims": dims, "combos": combos, "p50": pct[0] or 0, "p95": pct[1] or 0, "p99": pct[2] or 0,
        "size": size, "classes": {name: n / failed for name, n in classes} if failed else {},
    }  # fmt: skip


def count_rows(conn, project_id: int) -> int:
    return conn.execute(
        "SELECT count(*) FROM ingest_toolcall WHERE project_id = %s AND convention <> %s", [project_id, LIVE_CONVENTION]
    ).fetchone()[0]


# ---------------------------------------------------------------------------
# Phase timing: wrap the module-level steps of rollups_recompute (this process only)
# ---------------------------------------------------------------------------


class PhaseTimer:
    """Where a recompute's time goes: the SQL statements by kind (a Django execute wrapper) and,
    as the rest, the Python linking of the calls with several attempts (with the COPY of their
    rows to temporary tables). Counts the attempts linked in Python by wrapping
    dashboard.rollups.rows.attempts_from_rows, which the SQL path looks up at call time."""

    KINDS = (
        ("CREATE TEMP TABLE tw_range", "SQL: copy the range's calls"),
        ("CREATE TEMP TABLE tw_traces", "SQL: look up the link slack"),
        ("CREATE TEMP TABLE tw_around", "SQL: look up the link slack"),
        ("CREATE TEMP TABLE tw_multi", "SQL: find and order repeated (trace, tool)"),
        ("CREATE TEMP TABLE tw_attempts", "SQL: find and order repeated (trace, tool)"),
        ("ANALYZE", "SQL: ANALYZE the temporary tables"),
        ("SELECT COUNT(*)", "SQL: count calls (is a bucket small, a range busy)"),
        ("CREATE TEMP TABLE tw_calls", "SQL: link them into calls"),
        ("INSERT INTO tw_extra", "SQL: the linked calls' part of the rows"),
        ("SELECT trace_id, span_id", "SQL: load the groups linked in Python"),
        ("WITH singles", "SQL: group the calls, write 5-min/hour rows"),
        ("WITH dimensioned", "SQL: sum hour/day rows from finer ones"),
        ("DELETE", "SQL: delete the rows replaced"),
        ("", "SQL: other (temp tables, ANALYZE, queue)"),
    )

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.attempts_loaded = 0
        self._original = None

    def install(self) -> None:
        from django.db import connection

        from dashboard.rollups import rows

        self._original = rows.attempts_from_rows

        def counted(rows):
            attempts = self._original(rows)
            self.attempts_loaded += len(attempts)
            return attempts

        rows.attempts_from_rows = counted
        connection.execute_wrappers.append(self._time_statement)

    def uninstall(self) -> None:
        from django.db import connection

        from dashboard.rollups import rows

        rows.attempts_from_rows = self._original
        connection.execute_wrappers.remove(self._time_statement)

    def _time_statement(self, execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            text = sql.lstrip()
            label = next(label for prefix, label in self.KINDS if text.startswith(prefix))
            self.seconds[label] += time.perf_counter() - start

    def reset(self) -> None:
        self.seconds.clear()
        self.attempts_loaded = 0

    def report(self, total: float) -> str:
        parts = [(label, self.seconds.get(label, 0.0)) for label in dict.fromkeys(label for _, label in self.KINDS)]
        parts.append(("Python: link, aggregate, COPY (the rest)", total - sum(s for _, s in parts)))
        return "\n".join(f"    {name:<44} {s:8.1f} s  {s / total:6.1%}" for name, s in parts)


# ---------------------------------------------------------------------------
# Phases
# ---------------------------------------------------------------------------


def full_recompute(project_id: int, start: dt.datetime, end: dt.datetime, workers: int, timer: PhaseTimer) -> dict:
    from django.db import connection

    from dashboard.rollups.refresh import rollups_rebuild

    with connection.cursor() as cursor:  # a rebuild from nothing, run after run (one project in this database)
        cursor.execute("TRUNCATE dashboard_toolrollup, dashboard_toolrolluptotal")
    timer.reset()
    t0 = time.perf_counter()
    # As `manage.py rebuild_rollups` does: a day at a time, `workers` days at once, 5-minute rows
    # only for the last FINE_HORIZON of the data (now = the end of the data).
    written = rollups_rebuild(project_id=project_id, start=start, end=end, now=end, workers=workers)
    return {"seconds": time.perf_counter() - t0, "rows": written}


def profile_chunk(project_id: int, start: dt.datetime, end: dt.datetime, top: int = 25) -> str:
    from dashboard.rollups.refresh import rollups_recompute

    profiler = cProfile.Profile()
    t = time.perf_counter()
    profiler.runcall(rollups_recompute, project_id=project_id, start=start, end=end)
    wall = time.perf_counter() - t
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    total = max(v[3] for v in stats.stats.values())
    phases = []
    wanted = {
        ("sql.py", "_link"): "_link (SQL: groups to link; Python: link them, COPY)",
        ("rows.py", "attempts_from_rows"): "  of which Attempt objects",
        ("attempts.py", "link_attempts"): "  of which link_attempts",
        ("rows.py", "aggregate"): "  of which aggregate",
        ("sql.py", "_insert_rows"): "_insert_rows (SQL: group and write)",
        ("sql.py", "_sum_rows"): "_sum_rows (SQL: day rows)",
        ("sql.py", "_delete"): "_delete",
    }
    for (suffix, name), label in wanted.items():
        for (filename, _, func), (_, _, _, cumulative, _) in stats.stats.items():
            if filename.endswith(suffix) and func == name:
                phases.append((label, cumulative))
    lines = [f"  cProfile of rollups_recompute over [{start:%Y-%m-%d %H:%M}, {end:%Y-%m-%d %H:%M}): "
             f"{wall:.1f} s under the profiler (cumulative {total:.1f} s)"]  # fmt: skip
    for label, cumulative in phases:
        lines.append(f"    {label:<44} {cumulative:7.2f} s  {cumulative / total:6.1%}")
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    lines.append(out.getvalue())
    return "\n".join(lines)


def first_wave_minute() -> int:
    """The first simulated minute whose refresh (at 5 s past it) finds the hour's first bucket settled."""
    from dashboard.rollups.refresh import SETTLE
    from dashboard.rollups.rows import BUCKET

    return math.ceil(((BUCKET + SETTLE).total_seconds() - REFRESH_OFFSET_S) / 60)


def incremental(args, url: str, project_id: int, hour: dt.datetime, timer: PhaseTimer) -> dict:
    from dashboard.rollups.refresh import rollups_refresh
    from ingest.partitions import ensure_partitions

    ensure_partitions([hour.date(), (hour + HOUR).date()])
    per_minute = round(args.live_spans_per_s * 60 * args.tool_share)
    late = round(per_minute * args.late_share)
    results = []
    with _connect(url) as conn:
        for minute in range(1, args.minutes + 1):
            t = time.perf_counter()
            insert_live_minute(conn, project_id=project_id, hour=hour, minute=minute, rows=per_minute, late_rows=late,
                               late_hours=args.late_hours, tools=args.tools, seed=args.seed)  # fmt: skip
            insert_s = time.perf_counter() - t
            queued = conn.execute("SELECT count(*) FROM ingest_changedbucket WHERE project_id = %s", [project_id]).fetchone()[0]
            timer.reset()
            now = hour + dt.timedelta(minutes=minute, seconds=REFRESH_OFFSET_S)
            t = time.perf_counter()
            written = rollups_refresh(project_id=project_id, now=now)
            refresh_s = time.perf_counter() - t
            if written is None:
                raise RuntimeError("rollups_refresh found the project locked")
            in_hour = minute * (per_minute - late)
            result = {
                "minute": minute, "in_hour": in_hour, "insert_s": insert_s, "refresh_s": refresh_s, "queued": queued,
                "attempts": timer.attempts_loaded, "rows": written, "rss": peak_rss_mb(),
                "phases": dict(timer.seconds),
            }  # fmt: skip
            results.append(result)
            phases = ", ".join(f"{k} {v:.1f}" for k, v in timer.seconds.items())
            log(f"  minute {minute}: inserted {_fmt(per_minute)} calls ({_fmt(late)} late) in {insert_s:.1f} s; "
                f"refresh of {queued} queued 5-minute buckets: {refresh_s:.1f} s, {_fmt(timer.attempts_loaded)} attempts "
                f"linked in Python ({_fmt(in_hour)} calls in the current hour so far), "
                f"{_fmt(written)} rollup rows; peak RSS {result['rss']:.0f} MB")  # fmt: skip
            log(f"            ({phases})")
        # Back to the generated data only: the live rows out, the rollups of the hours they touched redone.
        t = time.perf_counter()
        deleted = delete_live_rows(conn, project_id, hour + HOUR, args.late_hours)
    from dashboard.models import ToolRollup, ToolRollupTotal
    from dashboard.rollups.refresh import rollups_recompute

    for model in (ToolRollup, ToolRollupTotal):
        model.objects.filter(project_id=project_id, bucket_start__gte=hour).delete()
    rollups_recompute(project_id=project_id, start=hour - dt.timedelta(hours=args.late_hours + 1), end=hour)
    log(f"  cleanup: {_fmt(deleted)} live rows deleted, the rollups of the last {args.late_hours + 1} h recomputed "
        f"in {time.perf_counter() - t:.1f} s")  # fmt: skip
    return {"per_minute": per_minute, "late": late, "minutes": results}


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10_000_000, help="tool-call rows to generate (default 10,000,000; 1,000,000 for a quick run)")
    parser.add_argument("--days", type=int, default=30, help="days they span, ending at today's midnight UTC (default 30)")
    parser.add_argument("--tools", type=int, default=50, help="distinct tools (default 50)")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/toolwatch_rollup_bench")
    parser.add_argument("--reuse", action="store_true", help="keep the bench database when it holds data generated with the same parameters")
    parser.add_argument(
        "--source", choices=("sql", "fleet"), default="sql",
        help="sql (default): the tool calls generated in SQL (~30%% failing); fleet: the demo fleet's traffic "
        "(demo.simulate, ~9%% of attempts failing), one day decoded by ingest and copied to each day (bench/fleet_load.py)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="connections generating days at once (default 2)")
    parser.add_argument("--rebuild-workers", type=int, default=2, help="days recomputed at once in the full recompute (default 2)")
    parser.add_argument("--minutes", type=int, default=16, help="simulated minutes of live ingest, each followed by a timed refresh "
                        "(default 16: the share is the mean over minutes 7-16, two whole 5-minute waves)")
    parser.add_argument("--live-spans-per-s", type=float, default=20_000, help="live ingest rate in spans/s (default 20,000)")
    parser.add_argument("--tool-share", type=float, default=0.5, help="share of tool spans among them (default 0.5)")
    parser.add_argument("--late-share", type=float, default=0.01, help="share of each minute's calls landing in older hours (default 0.01)")
    parser.add_argument("--late-hours", type=int, default=48, help="how old the late calls' hours can be (default 48)")
    parser.add_argument("--skip-full", action="store_true", help="skip the full recompute (needs the rollups of an earlier run)")
    parser.add_argument("--skip-incremental", action="store_true", help="skip the incremental phase")
    parser.add_argument("--profile", action="store_true", help="cProfile one --profile-hours chunk of the full recompute (untimed)")
    parser.add_argument("--profile-hours", type=int, default=24, help="hours of the profiled chunk (default 24)")
    args = parser.parse_args(argv)
    if args.minutes > 59:
        parser.error("--minutes must stay within one hour (at most 59)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    run_start = time.perf_counter()
    url = args.database_url
    log(f"Toolwatch rollup benchmark: {os.cpu_count()} cores, database {url}")
    source = f"{args.tools} tools, generated in SQL" if args.source == "sql" else "the demo fleet (--source fleet)"
    log(f"  {_fmt(args.calls)} tool calls over {args.days} days, {source}; incremental: "
        f"{args.minutes} minutes at {_fmt(args.live_spans_per_s)} spans/s ({args.tool_share:.0%} tool spans)")  # fmt: skip

    # 1. Setup
    wanted = {"version": META_VERSION, "source": args.source, "calls": args.calls, "days": args.days,
              "tools": args.tools if args.source == "sql" else None, "seed": args.seed}  # fmt: skip
    meta = read_meta(url) if args.reuse else None
    if meta is not None:
        meta.setdefault("source", "sql")  # data generated before --source existed
    reuse = meta is not None and all(meta.get(k) == v for k, v in wanted.items())
    t = time.perf_counter()
    django_setup(url)  # connects lazily: after the database is (re)created
    if reuse:
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0)
        project_id = meta["project_id"]
        first_day = dt.date.fromisoformat(meta["first_day"])
        with _connect(url) as conn:
            stored = count_rows(conn, project_id)
        if stored != meta["rows"]:
            log(f"\n[setup] --reuse: {_fmt(stored)} rows stored, {_fmt(meta['rows'])} generated: regenerating")
            reuse = False
        else:
            log(f"\n[setup] --reuse: the bench database holds {_fmt(stored)} generated rows "
                f"(generated in {meta['generation_s']:.0f} s); generation skipped")  # fmt: skip
            generation_s = meta["generation_s"]
    if not reuse:
        if args.reuse:
            log(f"\n[setup] --reuse: no matching data in the bench database ({'none' if meta is None else meta}); generating")
        from django.db import connections

        connections.close_all()
        recreate_database(url)
        project_id = migrate_and_create_project()
        first_day = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=args.days)
        from ingest.partitions import ensure_partitions

        ensure_partitions(first_day + dt.timedelta(days=i) for i in range(args.days + 2))
        log(f"\n[setup] database recreated and migrated, project {project_id}, {args.days + 2} day partitions "
            f"in {time.perf_counter() - t:.1f} s")  # fmt: skip
        how = "INSERT … SELECT per day" if args.source == "sql" else "the demo fleet's seed day copied to each day"
        log(f"[generate] {_fmt(args.calls)} tool calls, {first_day} to {first_day + dt.timedelta(days=args.days - 1)}, "
            f"{how}, {args.workers} connections")  # fmt: skip
        expected = args.calls
        if args.source == "fleet":
            from bench.fleet_load import fleet_history

            history = fleet_history(url, project_id=project_id, first_day=first_day, days=args.days, calls=args.calls,
                                    seed=args.seed, workers=args.workers, spans=False, log=log)  # fmt: skip
            generation_s, expected = history.seconds, history.calls  # days × the seed day's calls, about --calls
        else:
            generation_s = generate_history(url, project_id, first_day, args.days, args.calls, args.tools, args.seed, args.workers)
        t = time.perf_counter()
        with _connect(url) as conn:
            conn.execute("VACUUM (ANALYZE) ingest_toolcall")
            vacuum_s = time.perf_counter() - t
            stored = count_rows(conn, project_id)
        log(f"  generated in {generation_s:.1f} s ({_fmt(stored / generation_s)} rows/s); VACUUM ANALYZE {vacuum_s:.1f} s")
        if stored != expected:
            log(f"FAILED: {_fmt(stored)} rows stored, {_fmt(expected)} wanted")
            return 1
        write_meta(url, {**wanted, "project_id": project_id, "first_day": first_day.isoformat(), "rows": stored,
                         "generation_s": generation_s})  # fmt: skip
    with _connect(url) as conn:
        deleted = delete_live_rows(conn, project_id, dt.datetime.combine(first_day, dt.time(), tzinfo=dt.UTC)
                                   + dt.timedelta(days=args.days + 1), args.late_hours + 24)  # fmt: skip
        if deleted:
            log(f"  {_fmt(deleted)} live rows of an interrupted run deleted")
        profile = data_profile(conn, project_id, dt.datetime.combine(first_day, dt.time(), tzinfo=dt.UTC))
    log(f"  row count: {_fmt(stored)} tool calls; table with indexes {profile['size']}")
    log(f"  shape of the first day ({_fmt(profile['rows'])} rows): {profile['failed']:.1%} of attempts failing, "
        f"{profile['retries']:.1%} of them retries (attempt 2), {profile['per_trace']:.1f} attempts per trace, "
        f"{profile['tools']} tools, {profile['dims']} service × environment × agent combinations, "
        f"{profile['combos']} with the tool; latency p50 {profile['p50']:.0f} ms, p95 {profile['p95']:.0f} ms, "
        f"p99 {profile['p99']:.0f} ms")  # fmt: skip
    log("  failure classes: " + ", ".join(f"{k} {v:.0%}" for k, v in profile["classes"].items()))

    start = dt.datetime.combine(first_day, dt.time(), tzinfo=dt.UTC)
    end = start + dt.timedelta(days=args.days)
    timer = PhaseTimer()
    timer.install()

    # 2. Full recompute
    full = None
    full_rss = peak_rss_mb()
    if not args.skip_full:
        log(f"\n[full recompute] rollups_recompute over [{start:%Y-%m-%d %H:%M}, {end:%Y-%m-%d %H:%M}) "
            f"with rollups_rebuild, a day at a time, {args.rebuild_workers} at once, rollups emptied first; "
            f"RSS before {full_rss:.0f} MB")  # fmt: skip
        full = full_recompute(project_id, start, end, args.rebuild_workers, timer)
        full_rss = peak_rss_mb()
        log(f"  {full['seconds']:.1f} s for {_fmt(stored)} calls = {_fmt(stored / full['seconds'])} calls/s; "
            f"{_fmt(timer.attempts_loaded)} attempts linked in Python (the rest grouped in SQL); "
            f"{_fmt(full['rows'])} rollup rows written")  # fmt: skip
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT resolution, count(*) FROM dashboard_toolrollup WHERE project_id = %s GROUP BY 1 ORDER BY 1", [project_id])
            by_resolution = ", ".join(f"{_fmt(n)} at {r // 60} min" for r, n in cursor.fetchall())
        log(f"  rollup rows by resolution: {by_resolution} ({full['rows'] / stored:.2f} rows per call)")
        log(f"  peak RSS {full_rss:.0f} MB")
        if args.rebuild_workers == 1:
            log("  where the time goes (SQL statements by kind, whole run):")
            log(timer.report(full["seconds"]))
        else:
            log("  (the time by kind of statement: with --rebuild-workers 1)")
    if args.profile:
        pstart = start + dt.timedelta(days=min(1, args.days - 1))
        log("\n[profile]")
        timer.uninstall()
        log(profile_chunk(project_id, pstart, min(end, pstart + dt.timedelta(hours=args.profile_hours))))
        timer.install()

    # 3. Incremental
    inc = None
    if not args.skip_incremental:
        per_minute = round(args.live_spans_per_s * 60 * args.tool_share)
        log(f"\n[incremental] each minute: {_fmt(per_minute)} new tool calls ({_fmt(args.live_spans_per_s)} spans/s × 60 s × "
            f"{args.tool_share:g}) in the current hour {end:%Y-%m-%d %H:00}, {args.late_share:.0%} of them in hours up to "
            f"{args.late_hours} h old, hours queued as ingest does; then rollups_refresh timed")  # fmt: skip
        inc = incremental(args, url, project_id, end, timer)
    timer.uninstall()

    # Report
    log("\n[summary]")
    full_s = full["seconds"] if full else math.nan
    full_rate = stored / full_s if full else math.nan
    projected_10m = TARGET_FULL_CALLS / full_rate if full else math.nan
    if full:
        log(f"  full recompute   {full_s:8.1f} s for {_fmt(stored)} calls ({_fmt(full_rate)} calls/s; 10 M: "
            f"{projected_10m:.0f} s at this rate)   target ≤ {TARGET_FULL_S:.0f} s for 10 M: "
            f"{'met' if projected_10m <= TARGET_FULL_S else 'NOT met'}")  # fmt: skip
        log(f"  peak RSS         {full_rss:8.0f} MB after the full recompute ({args.rebuild_workers} workers)")
    share = math.nan
    if inc:
        # Whole 5-minute waves in the steady state: from the first refresh that finds a settled
        # bucket, a multiple of 5 minutes (all the minutes when there are too few).
        steady = inc["minutes"][first_wave_minute() - 1:]
        whole = len(steady) // 5 * 5
        times = [m["refresh_s"] for m in (steady[:whole] if whole else inc["minutes"])]
        share = statistics.mean(times) / JOB_INTERVAL_S
        log(f"  incremental      mean {statistics.mean(times):.1f} s, max {max(times):.1f} s per refresh over the last "
            f"{len(times)} minutes; share of the 60 s interval {share:.2f}   target ≤ {TARGET_SHARE:.2f}: "
            f"{'met' if share <= TARGET_SHARE else 'NOT met'}")  # fmt: skip
        rss = inc["minutes"][-1]["rss"]
        log(f"  peak RSS         {rss:8.0f} MB after the incremental phase")
        # A busy project's filling bucket waits until it has settled, so the work comes in
        # 5-minute waves: the mean over whole waves is the job's share; the worst refresh is shown too.
        worst = max(inc["minutes"], key=lambda m: m["refresh_s"])
        log(f"  worst refresh    {worst['refresh_s']:.1f} s at minute {worst['minute']} (a settled 5-minute bucket of "
            f"{_fmt(inc['per_minute'] * 5)} calls is rolled up then)")  # fmt: skip
    log(f"  total run time {time.perf_counter() - run_start:.0f} s; the bench database stays ({url})")
    log(
        f"full_recompute_s={full_s:.1f} incremental_share={share:.3f} calls={stored} "
        f"full_calls_per_s={full_rate:.0f} peak_rss_mb={full_rss:.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
