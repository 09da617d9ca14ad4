"""Server time of the main pages on PostgreSQL with 30 days of tool calls: overview, tool
detail, traces explorer and trace detail.

    .venv/bin/python bench/pages.py [--calls 10000000] [--days 30] [--tools 50] [--runs 20]
        [--database-url postgres://postgres@127.0.0.1:5432/toolwatch_pages_bench] [--reuse]
        [--source sql|fleet]

A benchmark that prints figures, not a test. Phases:

1. Setup (skipped by --reuse when the bench database holds data generated with the same
   --source/--calls/--days/--tools/--seed): drop and recreate the database, migrate, create a
   project, a member and the day partitions, then generate --calls tool-call rows over
   the --days days before today straight in PostgreSQL with bench/rollup.py's generator
   (`INSERT … SELECT … FROM generate_series` per day; its docstring describes the
   shapes: 50 tools, 4 services, 3 environments, 12 agents, ~10 % retried, ~30 %
   failing). Then the spans of every trace, derived from those rows in SQL: an
   `invoke_agent` root span per trace and an `execute_tool` span per tool call, with the
   attributes, resource and exception event ingest would store. With --source fleet, the
   calls and spans come from the demo fleet instead (bench/fleet_load.py): one day of
   demo.simulate's traces (agent, sub-agent, chat and tool spans of 23 tools, every kind
   of evidence, ~9 % of attempts failing, no drift), encoded by the official encoder,
   decoded and normalised by ingest's own code, then copied to each day in SQL (new trace
   ids, times shifted by whole days): about --calls calls, --tools unused. Then the
   rollups with `dashboard.rollups.rollups_recompute`, a day at a time, with five-minute
   rows for the last FINE_HORIZON only, as the scheduled jobs keep them (the slow part: ~14
   min for 10 M on a loaded box), and VACUUM ANALYZE, as autovacuum would have done to
   settled partitions. With --reuse, data generated with other rollup code
   (ROLLUPS_VERSION) is migrated and its rollups recomputed, keeping the calls and spans.
2. Pages: each URL requested --warmup times, then --runs times through Django's test
   `Client` (force_login as a project member, DEBUG off), timing the whole request;
   p50 / p95 / max per page, the response size, the number of queries and their time
   (one extra request under CaptureQueriesContext, with the two slowest), and the size of every chart's JSON (each
   `json_script` block in the page).

URLs: /p/<slug>/?range=30d, /p/<slug>/tools/<busiest tool>/?range=30d, /p/<slug>/traces/
(default range), /p/<slug>/traces/<the latest trace with a failure>/.
Targets: p95 ≤ 150 ms per page; chart data ≤ 200 KB per page. The last line is:
    overview_p95_ms=… tool_p95_ms=… traces_p95_ms=… trace_p95_ms=…
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.rollup import (  # noqa: E402 - after the sys.path line, so the script runs from anywhere
    _connect,
    _fmt,
    django_setup,
    generate_history,
    log,
    read_meta,
    recreate_database,
    write_meta,
)

META_VERSION = 1
# Bumped when the rollup tables change shape: --reuse then migrates and recomputes the rollups only.
ROLLUPS_VERSION = 2
PROJECT_SLUG = "pages-bench"
USERNAME = "bench"
TARGET_P95_MS = 150.0
TARGET_CHART_BYTES = 200 * 1024
JSON_SCRIPT = re.compile(r'<script id="([^"]+)" type="application/json">(.*?)</script>', re.S)

# One execute_tool span per generated tool-call row, and one invoke_agent root span per trace (the
# rows' shared parent_span_id), as ingest would have stored them: same ids, times and dimensions.
# One resource per (service, environment) of the generated tool calls, which the spans refer to.
# Its digest is not ingest's (ingest.records.resource_digest): nothing is ingested into this project.
RESOURCES_SQL = """
INSERT INTO ingest_resource (project_id, digest, attributes, first_seen, last_seen)
SELECT %(project_id)s, substring(sha256(convert_to(attributes::text, 'UTF8')) for 16), attributes, now(), now()
FROM (SELECT DISTINCT jsonb_build_object('service.name', service, 'deployment.environment.name', environment) AS attributes
      FROM ingest_toolcall WHERE project_id = %(project_id)s) AS distinct_resources
ON CONFLICT (project_id, digest) DO NOTHING
"""
SPANS_SQL = """
WITH res AS (
    SELECT id, attributes ->> 'service.name' AS res_service, attributes ->> 'deployment.environment.name' AS res_environment
    FROM ingest_resource
    WHERE project_id = %(project_id)s AND attributes - 'service.name' - 'deployment.environment.name' = '{}'::jsonb
)
INSERT INTO ingest_span (project_id, trace_id, span_id, parent_span_id, name, kind, start_time, end_time,
    status_code, status_message, service, environment, service_version, scope_name, scope_version, agent,
    attributes, resource_id, events, links, trace_state, flags, received_at)
SELECT project_id, trace_id, span_id, parent_span_id, 'execute_tool ' || tool, 1, start_time, end_time,
       CASE WHEN ok THEN 0 ELSE 2 END, message, service, environment, '1.4.2', 'bench.agent', '1.0', '',
       jsonb_build_object('gen_ai.operation.name', 'execute_tool', 'gen_ai.tool.name', tool,
                          'gen_ai.tool.call.id', call_id, 'gen_ai.tool.type', 'function')
         || CASE WHEN ok THEN '{}'::jsonb ELSE jsonb_build_object('error.type', error_type,
                'tool.error.class', error_class, 'tool.error.code', error_code) END,
       (SELECT id FROM res WHERE res_service = service AND res_environment = environment),
       CASE WHEN ok THEN '[]'::jsonb ELSE jsonb_build_array(jsonb_build_object(
           'name', 'exception',
           'time_ns', (extract(epoch FROM end_time) * 1e9)::bigint,
           'attributes', jsonb_build_object('exception.type', error_type, 'exception.message', message))) END,
       '[]'::jsonb, '', 1, received_at
FROM ingest_toolcall WHERE project_id = %(project_id)s AND start_time >= %(start)s AND start_time < %(end)s
UNION ALL
SELECT project_id, trace_id, parent_span_id, '', 'invoke_agent ' || min(agent), 1,
       min(start_time) - interval '40 milliseconds', max(end_time) + interval '40 milliseconds',
       0, '', min(service), min(environment), '1.4.2', 'bench.agent', '1.0', min(agent),
       jsonb_build_object('gen_ai.operation.name', 'invoke_agent', 'gen_ai.agent.name', min(agent)),
       (SELECT id FROM res WHERE res_service = min(service) AND res_environment = min(environment)),
       '[]'::jsonb, '[]'::jsonb, '', 1, max(received_at)
FROM ingest_toolcall WHERE project_id = %(project_id)s AND start_time >= %(start)s AND start_time < %(end)s
GROUP BY project_id, trace_id, parent_span_id
"""


def day_start(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)


def generate_spans(url: str, project_id: int, first_day: dt.date, days: int, workers: int) -> int:
    """The spans of every generated day, `workers` connections at a time; returns spans written."""

    with _connect(url) as conn:
        conn.execute(RESOURCES_SQL, {"project_id": project_id})

    def one_day(index: int) -> int:
        start = day_start(first_day + dt.timedelta(days=index))
        with _connect(url) as conn:
            cur = conn.execute(SPANS_SQL, {"project_id": project_id, "start": start, "end": start + dt.timedelta(days=1)})
            return cur.rowcount

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return sum(pool.map(one_day, range(days)))


def recompute_rollups(url: str, project_id: int, first_day: dt.date, days: int) -> int:
    """All rollups from scratch, a day at a time, then VACUUM ANALYZE; returns ToolRollup rows."""
    from django.db import connection

    from dashboard.rollups.refresh import rollups_recompute
    from dashboard.rollups.rows import FINE_HORIZON

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE dashboard_toolrollup, dashboard_toolrolluptotal")
    fine_since = dt.datetime.now(dt.UTC) - FINE_HORIZON
    written = 0
    for index in range(days):
        start = day_start(first_day + dt.timedelta(days=index))
        written += rollups_recompute(project_id=project_id, start=start, end=start + dt.timedelta(days=1), fine_since=fine_since)
    with _connect(url) as conn:
        conn.execute("VACUUM (ANALYZE) dashboard_toolrollup")
        conn.execute("VACUUM (ANALYZE) dashboard_toolrolluptotal")
    return written


def setup(args) -> dict:
    """Generate the bench data (or keep it with --reuse); returns the generation metadata."""
    url = args.database_url
    wanted = {"bench": "pages", "version": META_VERSION, "source": args.source, "calls": args.calls, "days": args.days,
              "tools": args.tools if args.source == "sql" else None, "seed": args.seed}  # fmt: skip
    meta = read_meta(url) if args.reuse else None
    if meta is not None:
        meta.setdefault("source", "sql")  # data generated before --source existed
    if meta is not None and all(meta.get(k) == v for k, v in wanted.items()):
        calls = meta.get("tool_calls", meta["calls"])  # the fleet makes about --calls
        log(f"[setup] --reuse: keeping the data generated on {meta['generated_on']} ({_fmt(calls)} calls, "
            f"{_fmt(meta['spans'])} spans, {_fmt(meta['rollup_rows'])} rollup rows)")  # fmt: skip
        django_setup(url)
        if meta.get("rollups_version") != ROLLUPS_VERSION:
            from django.core.management import call_command

            t = time.perf_counter()
            call_command("migrate", interactive=False, verbosity=0)
            meta["rollup_rows"] = recompute_rollups(url, meta["project_id"], dt.date.fromisoformat(meta["first_day"]), meta["days"])
            meta["rollups_version"] = ROLLUPS_VERSION
            write_meta(url, meta)
            log(f"  rollups from older code: migrated and recomputed ({_fmt(meta['rollup_rows'])} rows) in "
                f"{time.perf_counter() - t:.1f} s")  # fmt: skip
        return meta
    if args.reuse:
        log(f"[setup] --reuse: no matching data in the bench database ({meta}); generating")
    t0 = time.perf_counter()
    recreate_database(url)
    django_setup(url)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from ingest.models import Membership, Project
    from ingest.partitions import ensure_partitions

    call_command("migrate", interactive=False, verbosity=0)
    project = Project.objects.create(name="Pages bench", slug=PROJECT_SLUG)
    user = get_user_model().objects.create_user(USERNAME, password=None)
    Membership.objects.create(project=project, user=user)
    first_day = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=args.days)
    # The day before too: a root span starts 40 ms before its first call, which may be just after midnight.
    ensure_partitions(first_day + dt.timedelta(days=i) for i in range(-1, args.days + 2))
    log(f"[setup] database recreated, migrated, project and partitions in {time.perf_counter() - t0:.1f} s")

    log(f"[generate] {_fmt(args.calls)} tool calls over {first_day} .. {first_day + dt.timedelta(days=args.days - 1)}"
        f"{' from the demo fleet' if args.source == 'fleet' else ''}")  # fmt: skip
    if args.source == "fleet":
        from bench.fleet_load import fleet_history

        history = fleet_history(url, project_id=project.pk, first_day=first_day, days=args.days, calls=args.calls,
                                seed=args.seed, workers=args.workers, log=log)  # fmt: skip
        spans, calls = history.spans, history.calls
        log(f"  {_fmt(calls)} tool calls and {_fmt(spans)} spans in {history.seconds:.1f} s "
            f"({_fmt(calls / history.seconds)} calls/s; copies {history.replicate_seconds:.1f} s)")  # fmt: skip
    else:
        calls = args.calls
        seconds = generate_history(url, project.pk, first_day, args.days, args.calls, args.tools, args.seed, args.workers)
        log(f"  tool calls in {seconds:.1f} s")
        t = time.perf_counter()
        spans = generate_spans(url, project.pk, first_day, args.days, args.workers)
        log(f"  {_fmt(spans)} spans (a root per trace, one per tool call) in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    with _connect(url) as conn:
        conn.execute("VACUUM (ANALYZE) ingest_toolcall")
        conn.execute("VACUUM (ANALYZE) ingest_span")
    log(f"  VACUUM ANALYZE in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    rollup_rows = recompute_rollups(url, project.pk, first_day, args.days)
    log(f"  {_fmt(rollup_rows)} rollup rows (rollups_recompute a day at a time) in {time.perf_counter() - t:.1f} s")
    meta = {**wanted, "project_id": project.pk, "first_day": first_day.isoformat(), "tool_calls": calls, "spans": spans,
            "rollup_rows": rollup_rows, "rollups_version": ROLLUPS_VERSION,
            "generated_on": dt.date.today().isoformat()}  # fmt: skip
    write_meta(url, meta)
    log(f"[setup] done in {time.perf_counter() - t0:.0f} s")
    return meta


def targets(project_id: int, first_day: dt.date, days: int) -> dict[str, str]:
    """The four URLs: the busiest tool over the range, the latest trace with a failed call."""
    from urllib.parse import quote

    from django.db import connection

    end = day_start(first_day) + dt.timedelta(days=days)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tool FROM dashboard_toolrollup WHERE project_id = %s AND resolution = 3600 "
            "GROUP BY tool ORDER BY sum(calls) DESC LIMIT 1",
            [project_id],
        )
        tool = cursor.fetchone()[0]
        cursor.execute(
            "SELECT trace_id FROM ingest_toolcall WHERE project_id = %s AND NOT ok AND start_time >= %s "
            "AND start_time < %s ORDER BY start_time DESC LIMIT 1",
            [project_id, end - dt.timedelta(days=1), end],
        )
        trace_id = cursor.fetchone()[0]
    base = f"/p/{PROJECT_SLUG}"
    return {
        "overview": f"{base}/?range=30d",
        "tool": f"{base}/tools/{quote(tool)}/?range=30d",
        "traces": f"{base}/traces/",
        "trace": f"{base}/traces/{trace_id}/",
    }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def measure(client, url: str, runs: int, warmup: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(warmup):
        response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}:\n{response.content[:2000].decode(errors='replace')}")
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - t) * 1000)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    html = response.content.decode()
    charts = {name: len(body.encode()) for name, body in JSON_SCRIPT.findall(html)}
    timed = sorted(((float(q["time"]) * 1000, q["sql"]) for q in queries.captured_queries), reverse=True)
    return {
        "p50": statistics.median(times), "p95": percentile(times, 0.95), "max": max(times),
        "bytes": len(response.content), "queries": len(queries), "charts": charts,
        "sql_ms": sum(ms for ms, _ in timed), "slowest": timed[:2],
    }  # fmt: skip


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10_000_000, help="tool-call rows to generate (default 10,000,000)")
    parser.add_argument("--days", type=int, default=30, help="days they span, ending at today's midnight UTC (default 30)")
    parser.add_argument("--tools", type=int, default=50, help="distinct tools (default 50)")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/toolwatch_pages_bench")
    parser.add_argument("--reuse", action="store_true", help="keep the bench database when it holds data generated with the same parameters")
    parser.add_argument(
        "--source", choices=("sql", "fleet"), default="sql",
        help="sql (default): tool calls generated in SQL (~30%% failing) and spans derived from them; fleet: the "
        "demo fleet's traces (demo.simulate, ~9%% of attempts failing), one day decoded by ingest and copied "
        "to each day (bench/fleet_load.py)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="connections generating days at once (default 2)")
    parser.add_argument("--runs", type=int, default=20, help="timed requests per page (default 20)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed requests per page first (default 2)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    source = f"{args.tools} tools, generated in SQL" if args.source == "sql" else "the demo fleet (--source fleet)"
    log(f"[pages bench] {_fmt(args.calls)} calls, {args.days} days, {source}; {args.runs} timed runs per page")
    meta = setup(args)

    from django.contrib.auth import get_user_model
    from django.test import Client

    first_day = dt.date.fromisoformat(meta["first_day"])
    if (dt.datetime.now(dt.UTC).date() - first_day).days > args.days + 1:
        log(f"  note: the data ends {first_day + dt.timedelta(days=args.days)}; ranges ending now see less of it")
    urls = targets(meta["project_id"], first_day, args.days)
    from django.contrib.staticfiles.storage import staticfiles_storage
    from django.core.management import call_command

    from config.runtime import tune_gc

    # Pages name their static files by the manifest's hashed names (DEBUG off): a checkout where
    # neither the Quickstart nor the image ran collectstatic has none yet.
    if not staticfiles_storage.exists(staticfiles_storage.manifest_name):
        log("  collectstatic: no static manifest in STATIC_ROOT yet")
        call_command("collectstatic", interactive=False, verbosity=0)

    client = Client()
    client.force_login(get_user_model().objects.get(username=USERNAME))
    tune_gc()  # as config/wsgi.py does in the server

    results = {}
    for name, url in urls.items():
        result = results[name] = measure(client, url, args.runs, args.warmup)
        chart_total = sum(result["charts"].values())
        log(f"\n[{name}] {url}")
        log(f"  p50 {result['p50']:.1f} ms   p95 {result['p95']:.1f} ms   max {result['max']:.1f} ms   "
            f"target p95 ≤ {TARGET_P95_MS:.0f} ms: {'met' if result['p95'] <= TARGET_P95_MS else 'NOT met'}")  # fmt: skip
        log(f"  {result['bytes'] / 1024:.1f} KB of HTML, {result['queries']} queries taking {result['sql_ms']:.0f} ms "
            f"in all (one request)")  # fmt: skip
        for ms, sql in result["slowest"]:
            log(f"    {ms:7.1f} ms  {' '.join(sql.split())[:160]}")
        charts = ", ".join(f"{k} {v / 1024:.1f} KB" for k, v in sorted(result["charts"].items())) or "none"
        log(f"  chart JSON: {charts}; total {chart_total / 1024:.1f} KB   target ≤ {TARGET_CHART_BYTES // 1024} KB: "
            f"{'met' if chart_total <= TARGET_CHART_BYTES else 'NOT met'}")  # fmt: skip

    log("")
    log(" ".join(f"{name}_p95_ms={results[name]['p95']:.1f}" for name in urls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
