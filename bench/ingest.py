"""End-to-end durable ingest on PostgreSQL, and the ceiling of this machine, in one run.

    .venv/bin/python bench/ingest.py [--seconds 20] [--senders 4] [--workers 2] [--threads 1]
        [--database-url postgres://postgres@127.0.0.1:5432/toolwatch_bench] [--no-gzip] [--drop]
        [--no-analyze] [--skip-rss] [--profile] [--app module:callable]
        [--protocol http|grpc|both] [--grpc-threads 4]

About a minute with the defaults (--help lists every option).

A benchmark that prints figures, not a test. Phases:

1. Setup: drop and recreate the bench database, migrate it, create a project and an API key.
2. Traffic (bench/traffic.py): by default the module's own synthetic requests (~30 % of
   tool spans failing, as the target specifies); with --source simulate a cycle of requests
   from the demo fleet (demo.simulate: 23 tools, every kind of evidence, encoded by the
   official SDK encoder, ~7 % failing). Either way
   realistic OTLP/protobuf requests of 512 spans (GenAI agent traces, about half tool spans;
   the fleet fails ~7 % of its tool calls, the templates ~30 %), every request with unique
   trace ids, built and gzipped before anything is timed.
3. Ceiling, on this machine, from the same kind of bodies:
   (a) decode: one process, one core: gunzip, otlp.decode_request, otlp.iter_spans,
       linking, normalize.normalize_tool_call on tool spans, storage.span_row and
       storage.toolcall_row: all the Python CPU work of a span, and nothing else (the
       cycle's resources are stored on first sight, then found in the process's memory,
       as a running worker finds them); each pass over the cycle decodes a new copy of
       it (new ids), as a server only sees new ones;
   (b) COPY: the same span rows, pre-built, written with a binary COPY (psycopg 3,
       set_types) into a scratch table shaped like ingest_span (no indexes), committed
       every 512 rows as each request commits.
   Both are CPU-bound on the same box, so per span they add up and the cores share them:

       ceiling_spans_per_s = cores / (1 / decode_spans_per_s + 1 / copy_rows_per_s)

   with cores = os.cpu_count(). ratio = spans_per_s / ceiling_spans_per_s.
4. End to end: gunicorn (config.wsgi, sync workers unless --threads > 1, DEBUG=0) on the
   bench database; --senders threads POST the bodies over keep-alive http.client
   connections (Content-Type application/x-protobuf, Content-Encoding gzip, Bearer key),
   --warmup seconds, then --seconds timed. After the warm-up the day partitions are
   ANALYZEd, as autovacuum does within about a minute of a new partition filling
   (--no-analyze measures the never-analyzed state instead: the planner then reads the
   whole day partition for the agent look-ups of every request, see the report).
   Sync workers close the connection after each answer; http.client reopens it. With
   --threads > 1 (gthread) keep-alive connections stay with the worker that accepted
   them. Every answer must be a 200 with an empty
   body (no partial success); afterwards the stored Span count must equal the spans
   sent and the ToolCall count the tool spans sent (durable, nothing lost or doubled),
   each distinct resource of the traffic must be stored once, and every span must refer
   to a stored resource.
5. Peak RSS: a fresh gunicorn with one worker gets ONE request whose uncompressed
   protobuf is just under 64 MiB; the worker's VmHWM (/proc/<pid>/status) is the figure.

The last line is the figures as key=value:
    spans_per_s=… ceiling_spans_per_s=… ratio=… peak_rss_mb=… decode_spans_per_s=… copy_rows_per_s=… p95_ms=…
    worker_cpu_us_per_span=… db_cpu_us_per_span=…
(the CPU time the gunicorn workers and their PostgreSQL backends used in the timed window,
per span: on a machine shared with other work, the figure that still compares runs).
A run that loses, doubles or refuses anything ends with a FAILED line instead and exits 1.

--protocol grpc measures the OTLP/gRPC receiver instead of gunicorn (phases 4 and 5 on
`manage.py grpcserver --workers <--workers> --threads <--grpc-threads>`), --protocol both
measures gunicorn first and then the gRPC receiver on the same database with new copies,
and prints them side by side. Each gRPC sender keeps one channel (one HTTP/2 connection,
as an exporter does) and calls TraceService/Export with the request's protobuf bytes;
with gzip the gRPC client compresses each message itself (gRPC compression cannot take a
pre-compressed body), inside the timed window, on the same cores: `sender_cpu_us_per_span`
(this process's CPU in the window, per span) shows what that costs. With --workers > 1 the
server process receives and answers, and its worker processes (grpc_edge.WorkerPool) handle
the requests; "worker" CPU is theirs and the server process's together, and the CPU of each
is printed. Peak RSS: a fresh grpcserver (one process, --workers 1) gets the same
just-under-64 MiB request. The figures line
gains grpc_spans_per_s=… grpc_worker_cpu_us_per_span=… grpc_db_cpu_us_per_span=…
grpc_peak_rss_mb=… grpc_p95_ms=… (in grpc mode the unprefixed figures are the gRPC ones).
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import io
import math
import os
import pstats
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import traffic  # noqa: E402

MIB = 1024 * 1024
TARGET_SPANS_PER_S = 20_000
TARGET_RATIO = 0.5
TARGET_RSS_MB = 400
DEFAULT_SPAN_LIMIT = 100_000  # ingest.limits.IngestLimits.max_spans_per_request


def log(message: str = "") -> None:
    print(message, flush=True)


# ---------------------------------------------------------------------------
# Setup
# ---------------------------------------------------------------------------


def connect(url: str, **settings: str):
    """An autocommit connection for bench setup (UTC, commits not waited for), with more
    session `settings` (name=value)."""
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    conn.execute("SET TimeZone = 'UTC'")
    conn.execute("SET synchronous_commit = off")
    for name, value in settings.items():
        conn.execute(f"SET {name} = '{value}'")
    return conn


def run_on_connections(open_connection, items, workers: int, task, on_done=None) -> None:
    """task(conn, item) for every item, `workers` threads at a time, each on its own connection
    from open_connection(); on_done(item, result) runs under a lock as each finishes. The
    first error stops the others from taking more items and is raised here."""
    todo = list(items)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with open_connection() as conn:
                while True:
                    with lock:
                        if not todo or errors:
                            return
                        item = todo.pop(0)
                    result = task(conn, item)
                    if on_done is not None:
                        with lock:
                            on_done(item, result)
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(max(1, workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _admin_url(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not name:
        raise SystemExit(f"--database-url {url!r} names no database")
    return urlunsplit(parts._replace(path="/postgres")), name


def recreate_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


# With DEBUG off the settings refuse to start without a real key (config/security.py): the
# bench's own processes and its servers use this one unless SECRET_KEY is set.
BENCH_SECRET_KEY = "bench-ingest-not-a-secret-" + "k" * 32


def django_setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", BENCH_SECRET_KEY)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def migrate_and_create_key() -> tuple[int, str]:
    from django.core.management import call_command
    from django.db import connections

    from ingest.models import Project
    from ingest.services import api_key_create

    call_command("migrate", interactive=False, verbosity=0)
    project = Project.objects.create(name="Bench", slug="bench")
    _, plain = api_key_create(project=project, name="bench")
    connections.close_all()
    return project.pk, plain


# ---------------------------------------------------------------------------
# Ceiling (a): the Python CPU work of a span, one core
# ---------------------------------------------------------------------------


@dataclass
class DecodeResult:
    spans_per_s: float
    spans: int
    seconds: float
    span_rows: list  # the storage rows of one pass over the cycle, for the COPY ceiling
    tool_calls: int


def _decode_one(body: bytes, encoding: str, project_id: int, limits, escalation_tools, collect_rows: list | None) -> tuple[int, int]:
    """What spans_ingest does per request minus the database: mirrors services._write_slice."""
    from ingest.services import _gc_paused

    with _gc_paused():  # as spans_ingest runs
        return _decode_one_unpaused(body, encoding, project_id, limits, escalation_tools, collect_rows)


def _decode_one_unpaused(body, encoding, project_id, limits, escalation_tools, collect_rows) -> tuple[int, int]:
    from django.utils import timezone

    from bench.fleet_load import request_rows
    from ingest import otlp

    data = otlp.decompress(body, encoding, limits.max_decompressed_bytes)
    request = otlp.decode_request(data, otlp.PROTOBUF)
    del data
    span_rows, toolcall_rows = request_rows(request, project_id, timezone.now(), escalation_tools, limits=limits)
    if collect_rows is not None:
        collect_rows.extend(span_rows)
    return len(span_rows), len(toolcall_rows)


# Copy numbers of the ceiling's bodies: far from the senders' (1, 2, …), one per pass.
CEILING_COPIES = 1_000_000_000


def _ceiling_bodies(cycle, copy: int, gzip: bool) -> list[bytes]:
    return [traffic.gzip_body(traffic.instantiate(x, copy)) if gzip else traffic.instantiate(x, copy) for x in cycle]


def measure_decode(cycle, gzip: bool, project_id: int, min_seconds: float) -> DecodeResult:
    """Each pass decodes a new copy of the cycle (new trace ids and value ids, built untimed), as
    a server only ever sees new ones: caches of repeated attribute values (ingest.otlp) see each
    copy's ids once, not again on every pass."""
    from ingest.limits import DEFAULT_LIMITS

    encoding = "gzip" if gzip else ""
    rows: list = []
    escalation = frozenset()
    for body in _ceiling_bodies(cycle[:2], CEILING_COPIES - 1, gzip):  # warm the caches, as a running worker has them
        _decode_one(body, encoding, project_id, DEFAULT_LIMITS, escalation, None)
    spans = tools = 0
    passes = 0
    elapsed = 0.0
    while elapsed < min_seconds:
        bodies = _ceiling_bodies(cycle, CEILING_COPIES + passes, gzip)
        start = time.perf_counter()
        for body in bodies:
            n, t = _decode_one(body, encoding, project_id, DEFAULT_LIMITS, escalation, rows if passes == 0 else None)
            spans += n
            tools += t
        elapsed += time.perf_counter() - start
        passes += 1
    return DecodeResult(spans / elapsed, spans, elapsed, rows, tools)


def profile_decode(cycle, gzip: bool, project_id: int, top: int = 30) -> str:
    from ingest.limits import DEFAULT_LIMITS

    bodies = _ceiling_bodies(cycle, CEILING_COPIES - 2, gzip)  # a copy not decoded before
    encoding = "gzip" if gzip else ""
    profiler = cProfile.Profile()
    profiler.enable()
    for body in bodies:
        _decode_one(body, encoding, project_id, DEFAULT_LIMITS, frozenset(), None)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime")
    stats.print_stats(top)
    return out.getvalue()


# ---------------------------------------------------------------------------
# Ceiling (b): binary COPY of the same rows
# ---------------------------------------------------------------------------


@dataclass
class CopyResult:
    rows_per_s: float
    rows: int
    seconds: float
    commits: int


def measure_copy(url: str, rows: list, rows_per_commit: int, min_seconds: float) -> CopyResult:
    import psycopg

    from ingest.storage import SPAN_COLUMNS, SPAN_TYPES, register_jsonb_dumper

    with psycopg.connect(url) as conn:
        # The rows hold Python values for the jsonb columns, serialised as the server does.
        register_jsonb_dumper(conn)
        conn.execute("DROP TABLE IF EXISTS bench_copy_scratch")
        conn.execute("CREATE TABLE bench_copy_scratch (LIKE ingest_span INCLUDING DEFAULTS INCLUDING IDENTITY)")
        types = SPAN_TYPES
        conn.commit()
        statement = f"COPY bench_copy_scratch ({', '.join(SPAN_COLUMNS)}) FROM STDIN (FORMAT BINARY)"
        batches = [rows[i : i + rows_per_commit] for i in range(0, len(rows), rows_per_commit)]
        # One untimed batch: connection and plan warm, as a running server has them.
        with conn.cursor() as cur, cur.copy(statement) as copy:
            copy.set_types(types)
            for row in batches[0]:
                copy.write_row(row)
        conn.commit()
        written = commits = 0
        start = time.perf_counter()
        while True:
            for batch in batches:
                with conn.cursor() as cur, cur.copy(statement) as copy:
                    copy.set_types(types)
                    for row in batch:
                        copy.write_row(row)
                conn.commit()
                written += len(batch)
                commits += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        stored = conn.execute("SELECT count(*) FROM bench_copy_scratch").fetchone()[0]
        if stored != written + len(batches[0]):
            raise RuntimeError(f"COPY ceiling: {stored} rows in the scratch table, {written + len(batches[0])} written")
        conn.execute("DROP TABLE bench_copy_scratch")
        conn.commit()
    return CopyResult(written / elapsed, written, elapsed, commits)


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(p) for p in text.split()]
    except OSError:
        pass
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def proc_status_kb(pid: int, field_name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise KeyError(field_name)


class ServerProcess:
    """A server the bench starts in its own session on a free local port and stops gracefully:
    the subclass gives its command line (`args`), `_ready()` and `worker_pids()`."""

    name = "server"
    stop_timeout = 20

    def __init__(self, *, log_dir: str, label: str, env: dict):
        self.port = free_port()
        self.log_path = Path(log_dir) / f"{self.name}-{label}.log"
        self.env = env
        self.args: list[str] = []
        self.process: subprocess.Popen | None = None

    def __enter__(self):
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            self.args, cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
            if self._ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not answer within 60 s:\n{self.log_tail()}")

    def _ready(self) -> bool:
        raise NotImplementedError

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # graceful: the parent stops its workers
            try:
                self.process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)  # its own session: the parent and its workers
                self.process.wait()
        self._log.close()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Gunicorn(ServerProcess):
    """gunicorn config.wsgi:application as production runs it, on a free local port."""

    name = "gunicorn"

    def __init__(
        self, *, workers: int, threads: int, timeout: int, env: dict, log_dir: str, label: str,
        access_log: bool = False, app: str = "config.wsgi:application",
    ):  # fmt: skip
        super().__init__(log_dir=log_dir, label=label, env=env)
        self.workers = workers
        self.access_path = Path(log_dir) / f"gunicorn-{label}-access.log" if access_log else None
        self.args = [
            str(ROOT / ".venv" / "bin" / "gunicorn"), app,
            "--workers", str(workers), "--threads", str(threads), "--timeout", str(timeout),
            "--bind", f"127.0.0.1:{self.port}",
        ]  # fmt: skip
        if self.access_path:
            self.args += ["--access-logfile", str(self.access_path), "--access-logformat", "%(m)s %(U)s %(s)s %(D)s"]

    def _ready(self) -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            conn.request("GET", "/v1/traces")  # 405, and proof that a worker has the app loaded
            conn.getresponse().read()
            conn.close()
        except OSError:
            return False
        return len(self.worker_pids()) == self.workers

    def worker_pids(self) -> list[int]:
        return children_of(self.process.pid) if self.process else []


def durability_failures(counts: dict, *, spans: int, tools: int, failing: int, resources: int, label: str = "") -> list[str]:
    """What the stored counts (spans, distinct_spans, tool_calls, failed_calls, resources,
    dangling_spans) say went wrong against what was sent: every span once, every tool span a
    tool call, every failing one failed, every resource once and referred to."""
    found = []
    if counts["resources"] != resources or counts["dangling_spans"]:
        found.append(f"{label}resources stored {counts['resources']} != {resources} sent, or {counts['dangling_spans']} spans without one")
    if counts["spans"] != spans or counts["distinct_spans"] != counts["spans"]:
        found.append(f"{label}stored spans {counts['spans']} (distinct {counts['distinct_spans']}) != spans sent {spans}")
    if counts["tool_calls"] != tools:
        found.append(f"{label}stored tool calls {counts['tool_calls']} != tool spans sent {tools}")
    if counts["failed_calls"] != failing:
        found.append(f"{label}failed tool calls stored {counts['failed_calls']} != failing tool spans sent {failing}")
    return found


def server_env(url: str, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLWATCH_LIMIT_")}
    env.update(DATABASE_URL=url, DEBUG="0", DJANGO_SETTINGS_MODULE="config.settings", PYTHONUNBUFFERED="1")
    env.setdefault("SECRET_KEY", BENCH_SECRET_KEY)
    env.update(extra or {})
    return env


# ---------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------


@dataclass
class Sent:
    start: float
    end: float
    status: int | str
    spans: int
    tool_spans: int
    failing: int
    detail: str = ""


@dataclass
class SenderPlan:
    """One sender's requests, in order: whole cycles (copy, template 0..n-1), like one SDK's batches."""

    copies: list[int]
    bodies: list[bytes] = field(default_factory=list)  # pre-built (gzip), else built on the fly


def sender(plan: SenderPlan, cycle, gzip: bool, port: int, key: str, stop: threading.Event, out: list) -> None:
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}"}
    if gzip:
        headers["Content-Encoding"] = "gzip"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    index = 0
    for copy in plan.copies:
        for template in cycle:
            if stop.is_set():
                conn.close()
                return
            body = plan.bodies[index] if gzip else traffic.instantiate(template, copy)
            index += 1
            start = time.perf_counter()
            detail = ""
            try:
                conn.request("POST", "/v1/traces", body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                status = response.status
                if status != 200 or data:
                    detail = data[:300].decode("utf-8", "replace")
                    status = status if data == b"" else f"{status} partial success"
            except (OSError, http.client.HTTPException) as exc:
                status, detail = "connection error", repr(exc)
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            out.append(Sent(start, time.perf_counter(), status, template.spans, template.tool_spans, template.failing_tool_spans, detail))
    out.append(Sent(time.perf_counter(), time.perf_counter(), "exhausted", 0, 0, 0))
    conn.close()


@dataclass
class EndToEnd:
    spans_per_s: float
    requests_per_s: float
    p50_ms: float
    p95_ms: float
    window_s: float
    timed_requests: int
    all_sent: list
    exhausted: bool
    # CPU seconds used in the timed window, by the gunicorn workers and by their PostgreSQL backends
    worker_cpu_s: float = math.nan
    db_cpu_s: float = math.nan
    sender_cpu_s: float = math.nan  # this process (the sender threads) in the timed window
    worker_cpu_by_pid: dict = field(default_factory=dict)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client_backends(url: str) -> list[int]:
    """Process ids of the client backends connected to the bench database (the workers' connections)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
    return [pid for (pid,) in rows]


def run_end_to_end(
    cycle, plans, gzip: bool, port: int, key: str, warmup: float, seconds: float, after_warmup=None, cpu_pids=None,
    send=None,
) -> EndToEnd:  # fmt: skip
    send = send or sender
    stop = threading.Event()
    outs = [[] for _ in plans]
    threads = [
        threading.Thread(target=send, args=(plan, cycle, gzip, port, key, stop, out), daemon=True)
        for plan, out in zip(plans, outs)
    ]
    for thread in threads:
        thread.start()
    try:
        time.sleep(warmup)
        if after_warmup is not None:
            after_warmup()
        workers, backends = cpu_pids() if cpu_pids else ([], [])
        cpu0 = {pid: cpu_seconds(pid) for pid in workers + backends}
        own0 = time.process_time()
        t0 = time.perf_counter()
        time.sleep(seconds)
        t1 = time.perf_counter()
        cpu1 = {pid: cpu_seconds(pid) for pid in cpu0}
        own1 = time.process_time()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    sent = [s for out in outs for s in out if s.status != "exhausted"]
    exhausted_at = [s.start for out in outs for s in out if s.status == "exhausted"]
    if exhausted_at:
        t1 = min(t1, min(exhausted_at))
    window = [s for s in sent if t0 <= s.end <= t1]
    spans = sum(s.spans for s in window if s.status == 200)
    latencies = sorted((s.end - s.start) * 1000 for s in window)
    p50 = statistics.median(latencies) if latencies else math.nan
    p95 = latencies[min(len(latencies) - 1, int(math.ceil(0.95 * len(latencies))) - 1)] if latencies else math.nan
    used = {pid: cpu1[pid] - cpu0[pid] for pid in cpu0}
    worker_cpu = sum(used[pid] for pid in workers) if workers else math.nan
    db_cpu = sum(used[pid] for pid in backends) if backends else math.nan
    return EndToEnd(
        spans / (t1 - t0), len(window) / (t1 - t0), p50, p95, t1 - t0, len(window), sent, bool(exhausted_at),
        worker_cpu, db_cpu, own1 - own0, {pid: used[pid] for pid in workers},
    )  # fmt: skip


def analyze_partitions(url: str) -> list[str]:
    """ANALYZE the day partitions of ingest_span / ingest_toolcall, as autovacuum does within a minute
    of a new partition filling (its naptime is 1 min: longer than the whole timed window here)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname IN ('ingest_span', 'ingest_toolcall') ORDER BY 1"
            ).fetchall()
        ]
        for name in names:
            conn.execute(f'ANALYZE "{name}"')
    return names


def db_counts(url: str, project_id: int) -> dict:
    import psycopg

    with psycopg.connect(url) as conn:
        spans = conn.execute("SELECT count(*) FROM ingest_span WHERE project_id = %s", [project_id]).fetchone()[0]
        calls, failed, agentless = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE NOT ok), count(*) FILTER (WHERE agent = '') "
            "FROM ingest_toolcall WHERE project_id = %s",
            [project_id],
        ).fetchone()
        # Tool calls left without an agent although their trace's agent span is stored: settling missed them.
        unsettled = conn.execute(
            "SELECT count(*) FROM ingest_toolcall t WHERE t.project_id = %s AND t.agent = '' AND EXISTS "
            "(SELECT 1 FROM ingest_span s WHERE s.project_id = t.project_id AND s.trace_id = t.trace_id AND s.agent <> '')",
            [project_id],
        ).fetchone()[0]
        distinct = conn.execute(
            "SELECT count(*) FROM (SELECT DISTINCT trace_id, span_id FROM ingest_span WHERE project_id = %s) s", [project_id]
        ).fetchone()[0]
        resources = conn.execute("SELECT count(*) FROM ingest_resource WHERE project_id = %s", [project_id]).fetchone()[0]
        # Spans whose resource is not stored (their resource attributes would be lost): must be 0.
        dangling = conn.execute(
            "SELECT count(*) FROM ingest_span s WHERE s.project_id = %s AND NOT EXISTS "
            "(SELECT 1 FROM ingest_resource r WHERE r.id = s.resource_id)",
            [project_id],
        ).fetchone()[0]
    return {
        "spans": spans, "distinct_spans": distinct, "tool_calls": calls, "failed_calls": failed,
        "agentless_calls": agentless, "unsettled_calls": unsettled, "resources": resources, "dangling_spans": dangling,
    }  # fmt: skip


def cycle_resources(cycle) -> int:
    """Distinct resources (attribute sets) in the cycle's requests: each must be stored once."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from ingest import otlp
    from ingest.limits import DEFAULT_LIMITS

    digests = set()
    for template in cycle:
        resources = otlp.request_resources(ExportTraceServiceRequest.FromString(template.body), DEFAULT_LIMITS)
        digests.update(resource.digest for resource in resources if resource is not None)
    return len(digests)


# ---------------------------------------------------------------------------
# Peak RSS for a 64 MiB request
# ---------------------------------------------------------------------------


@dataclass
class BigRequest:
    spans: int
    tool_spans: int
    raw_bytes: int
    wire_bytes: int
    status: int | str
    client_s: float
    server_s: float | None
    baseline_rss_mb: float
    peak_rss_mb: float
    span_limit_env: str
    worker_survived: bool
    detail: str = ""


def run_big_request(
    cycle, first_copy: int, url: str, key: str, gzip: bool, threads: int, timeout: int, log_dir: str,
    app: str = "config.wsgi:application",
) -> tuple[BigRequest, int]:
    limit = 64 * MIB
    pieces, spans, tools, size, copy, index = [], 0, 0, 0, first_copy, 0
    while True:
        template = cycle[index % len(cycle)]
        if size + len(template.body) >= limit:  # strictly under 64 MiB
            break
        # Concatenated ExportTraceServiceRequest messages are one message with all their resource_spans.
        pieces.append(traffic.instantiate(template, copy))
        spans += template.spans
        tools += template.tool_spans
        size += len(template.body)
        index += 1
        if index % len(cycle) == 0:
            copy += 1
    body = traffic.gzip_pieces(pieces) if gzip else b"".join(pieces)
    del pieces
    extra, limit_note = {}, f"default {DEFAULT_SPAN_LIMIT}"
    if spans > DEFAULT_SPAN_LIMIT:
        extra["TOOLWATCH_LIMIT_MAX_SPANS_PER_REQUEST"] = str(spans)
        limit_note = f"TOOLWATCH_LIMIT_MAX_SPANS_PER_REQUEST={spans}"
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}"}
    if gzip:
        headers["Content-Encoding"] = "gzip"
    with Gunicorn(
        workers=1, threads=threads, timeout=timeout, env=server_env(url, extra), log_dir=log_dir, label="rss",
        access_log=True, app=app,
    ) as server:  # fmt: skip
        (pid,) = server.worker_pids()
        baseline = proc_status_kb(pid, "VmHWM") / 1024
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=900)
        start = time.perf_counter()
        detail = ""
        try:
            conn.request("POST", "/v1/traces", body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            status = response.status if not data else f"{response.status} with body"
            detail = data[:300].decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            status, detail = "connection error", repr(exc)
        client_s = time.perf_counter() - start
        conn.close()
        survived = pid in server.worker_pids()
        peak = proc_status_kb(pid, "VmHWM") / 1024 if survived else math.nan
        server_s = None
        time.sleep(0.2)
        for line in (server.access_path.read_text().splitlines() if server.access_path.exists() else []):
            parts = line.split()
            if len(parts) == 4 and parts[0] == "POST":
                server_s = int(parts[3]) / 1e6
        if not survived:
            detail += "\n" + server.log_tail()
    return (
        BigRequest(spans, tools, size, len(body), status, client_s, server_s, baseline, peak, limit_note, survived, detail),
        copy + 1,
    )


# ---------------------------------------------------------------------------
# The OTLP/gRPC receiver (--protocol grpc / both)
# ---------------------------------------------------------------------------

GRPC_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
GRPC_OK = 200  # a Sent.status for an OK answer with an empty response, so the HTTP bookkeeping applies


class GrpcServer(ServerProcess):
    """manage.py grpcserver as deployed (ingest/grpc_edge.py), on a free local port."""

    name = "grpcserver"
    stop_timeout = 30

    def __init__(self, *, workers: int, threads: int, env: dict, log_dir: str, label: str, key: str):
        super().__init__(log_dir=log_dir, label=label, env=env)
        self.workers = workers
        self.key = key
        self.args = [
            str(ROOT / ".venv" / "bin" / "python"), "manage.py", "grpcserver", "--host", "127.0.0.1",
            "--port", str(self.port), "--workers", str(workers), "--threads", str(threads),
        ]  # fmt: skip

    def _ready(self) -> bool:
        import grpc

        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        try:
            # An empty export: proof that the server answers with Django and the database ready
            # (the server listens only once its worker processes have started).
            channel.unary_unary(GRPC_EXPORT)(b"", metadata=(("authorization", f"Bearer {self.key}"),), timeout=5)
            return True
        except grpc.RpcError:
            return False
        finally:
            channel.close()

    def worker_pids(self) -> list[int]:
        """The server process, then its worker processes (none with --workers 1)."""
        if self.process is None:
            return []
        return [self.process.pid] + (children_of(self.process.pid) if self.workers > 1 else [])



def grpc_sender(plan: SenderPlan, cycle, gzip: bool, port: int, key: str, stop: threading.Event, out: list) -> None:
    """As `sender`, over one gRPC channel: the raw protobuf of each request, gRPC-compressed when gzip."""
    import grpc

    # Channels of one process with the same target share one connection (gRPC's global subchannel
    # pool); each sender stands for an exporter process of its own, with its own connection.
    options = [("grpc.max_send_message_length", -1), ("grpc.use_local_subchannel_pool", 1)]
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
    call = channel.unary_unary(GRPC_EXPORT)
    metadata = (("authorization", f"Bearer {key}"),)
    compression = grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression
    for copy in plan.copies:
        for template in cycle:
            if stop.is_set():
                channel.close()
                return
            body = traffic.instantiate(template, copy)
            start = time.perf_counter()
            detail = ""
            try:
                data = call(body, metadata=metadata, compression=compression, timeout=120)
                status = GRPC_OK if data == b"" else f"{GRPC_OK} partial success"
                detail = repr(data[:300]) if data else ""
            except grpc.RpcError as exc:
                status, detail = f"gRPC {exc.code().name}", exc.details() or ""
            out.append(Sent(start, time.perf_counter(), status, template.spans, template.tool_spans, template.failing_tool_spans, detail))
    out.append(Sent(time.perf_counter(), time.perf_counter(), "exhausted", 0, 0, 0))
    channel.close()


def big_request_pieces(cycle, first_copy: int, limit: int = 64 * MIB) -> tuple[list[bytes], int, int, int, int]:
    """(pieces, spans, tool spans, bytes, next copy) of one request just under `limit` bytes of protobuf."""
    pieces, spans, tools, size, copy, index = [], 0, 0, 0, first_copy, 0
    while True:
        template = cycle[index % len(cycle)]
        if size + len(template.body) >= limit:
            break
        pieces.append(traffic.instantiate(template, copy))
        spans += template.spans
        tools += template.tool_spans
        size += len(template.body)
        index += 1
        if index % len(cycle) == 0:
            copy += 1
    return pieces, spans, tools, size, copy + 1


def run_big_request_grpc(cycle, first_copy: int, url: str, key: str, gzip: bool, threads: int, log_dir: str) -> tuple[BigRequest, int]:
    """Peak RSS of a fresh grpcserver (one process) for ONE request just under 64 MiB."""
    import grpc

    pieces, spans, tools, size, next_copy = big_request_pieces(cycle, first_copy)
    body = b"".join(pieces)  # concatenated messages are one message with all their resource_spans
    del pieces
    extra, limit_note = {}, f"default {DEFAULT_SPAN_LIMIT}"
    if spans > DEFAULT_SPAN_LIMIT:
        extra["TOOLWATCH_LIMIT_MAX_SPANS_PER_REQUEST"] = str(spans)
        limit_note = f"TOOLWATCH_LIMIT_MAX_SPANS_PER_REQUEST={spans}"
    wire = len(traffic.gzip_body(body)) if gzip else len(body)  # about what gRPC's own gzip sends
    with GrpcServer(workers=1, threads=threads, env=server_env(url, extra), log_dir=log_dir, label="rss", key=key) as server:
        (pid,) = server.worker_pids()
        baseline = proc_status_kb(pid, "VmHWM") / 1024
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}", options=[("grpc.max_send_message_length", -1)])
        start = time.perf_counter()
        detail = ""
        try:
            data = channel.unary_unary(GRPC_EXPORT)(
                body, metadata=(("authorization", f"Bearer {key}"),), timeout=900,
                compression=grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression,
            )  # fmt: skip
            status = GRPC_OK if data == b"" else f"{GRPC_OK} with body"
            detail = repr(data[:300])
        except grpc.RpcError as exc:
            status, detail = f"gRPC {exc.code().name}", exc.details() or ""
        client_s = time.perf_counter() - start
        channel.close()
        survived = server.process.poll() is None
        peak = proc_status_kb(pid, "VmHWM") / 1024 if survived else math.nan
        if not survived:
            detail += "\n" + server.log_tail()
    return BigRequest(spans, tools, size, wire, status, client_s, None, baseline, peak, limit_note, survived, detail), next_copy


@dataclass
class GrpcPhase:
    e2e: EndToEnd
    worker_us: float
    db_us: float
    sender_us: float
    big: BigRequest | None
    failures: list[str]
    next_copy: int


def grpc_phase(args, cycle, key: str, project_id: int, first_copy: int, ceiling: float, log_dir: str, gzip: bool) -> GrpcPhase:
    """Phases 4 and 5 against manage.py grpcserver, on new copies of the cycle; checks what was stored."""
    failures: list[str] = []
    requests_needed = math.ceil(max(ceiling, TARGET_SPANS_PER_S) * 1.3 * (args.warmup + args.seconds) / traffic.SPANS_PER_REQUEST)
    cycles_per_sender = max(1, math.ceil(requests_needed / args.senders / len(cycle)))
    plans = [
        SenderPlan(copies=[first_copy + s + k * args.senders for k in range(cycles_per_sender)]) for s in range(args.senders)
    ]
    next_copy = first_copy + args.senders * cycles_per_sender
    log(f"\n[gRPC end to end] manage.py grpcserver --workers {args.workers} --threads {args.grpc_threads}; "
        f"{args.senders} senders (one channel each) × {cycles_per_sender * len(cycle)} requests available "
        f"(ids replaced on the fly; {'gRPC gzip by the client' if gzip else 'uncompressed'}); "
        f"warm-up {args.warmup:g} s, timed {args.seconds:g} s")  # fmt: skip
    before = db_counts(args.database_url, project_id)
    analyzed: list[str] = []

    def after_warmup() -> None:
        if not args.no_analyze:
            analyzed.extend(analyze_partitions(args.database_url))

    with GrpcServer(
        workers=args.workers, threads=args.grpc_threads, env=server_env(args.database_url), log_dir=log_dir, label="e2e", key=key
    ) as server:  # fmt: skip
        e2e = run_end_to_end(
            cycle, plans, gzip, server.port, key, args.warmup, args.seconds, after_warmup,
            cpu_pids=lambda: (server.worker_pids(), client_backends(args.database_url)), send=grpc_sender,
        )  # fmt: skip
        worker_hwm = [proc_status_kb(pid, "VmHWM") / 1024 for pid in server.worker_pids()]
        server_log_tail = server.log_tail()
    ok = [s for s in e2e.all_sent if s.status == GRPC_OK]
    bad = [s for s in e2e.all_sent if s.status != GRPC_OK]
    log(f"  after the warm-up: {'ANALYZE ' + ', '.join(analyzed) if analyzed else 'no ANALYZE (--no-analyze)'}")
    log(f"  {e2e.timed_requests} requests in the {e2e.window_s:.1f} s window: {_fmt(e2e.spans_per_s)} spans/s, "
        f"{e2e.requests_per_s:.1f} requests/s, latency p50 {e2e.p50_ms:.0f} ms, p95 {e2e.p95_ms:.0f} ms")  # fmt: skip
    window_spans = e2e.spans_per_s * e2e.window_s
    per_span = (lambda seconds: seconds * 1e6 / window_spans if window_spans else math.nan)
    worker_us, db_us, sender_us = per_span(e2e.worker_cpu_s), per_span(e2e.db_cpu_s), per_span(e2e.sender_cpu_s)
    log(f"  CPU per span in the window: grpcserver workers {worker_us:.1f} µs + their PostgreSQL backends {db_us:.1f} µs "
        f"= {worker_us + db_us:.1f} µs; the senders (this process) {sender_us:.1f} µs")  # fmt: skip
    log("  CPU of each process in the window (the server process first, then its workers): "
        + ", ".join(f"{seconds:.1f} s" for seconds in e2e.worker_cpu_by_pid.values()))  # fmt: skip
    log(f"  worker peak RSS (VmHWM) after the run: {', '.join(f'{x:.0f} MB' for x in worker_hwm)}")
    if e2e.exhausted:
        log("  WARNING: a sender ran out of requests; the window was cut at that moment")
    if bad:
        failures.append(f"gRPC: {len(bad)} of {len(e2e.all_sent)} requests not answered OK with an empty response")
        for s in bad[:5]:
            log(f"  NOT OK: {s.status} {s.detail[:200]}")
        log("  server log tail:\n" + server_log_tail)
    after = db_counts(args.database_url, project_id)
    sent_spans, sent_tools, sent_failing = (sum(getattr(s, name) for s in ok) for name in ("spans", "tool_spans", "failing"))
    stored = {name: after[name] - before[name] for name in ("spans", "distinct_spans", "tool_calls", "failed_calls")}
    log(f"  durability: {_fmt(stored['spans'])} spans stored / {_fmt(sent_spans)} sent in {len(ok)} requests answered OK; "
        f"{_fmt(stored['tool_calls'])} tool calls stored / {_fmt(sent_tools)} tool spans sent; "
        f"{_fmt(stored['failed_calls'])} failed calls stored / {_fmt(sent_failing)} failing sent")  # fmt: skip
    failures += durability_failures(
        {**stored, "resources": after["resources"], "dangling_spans": after["dangling_spans"]},
        spans=sent_spans, tools=sent_tools, failing=sent_failing, resources=cycle_resources(cycle), label="gRPC: ",
    )

    big = None
    if not args.skip_rss:
        log("\n[gRPC peak RSS] fresh grpcserver, 1 process, ONE request just under 64 MiB of protobuf")
        big, next_copy = run_big_request_grpc(cycle, next_copy, args.database_url, key, gzip, args.grpc_threads, log_dir)
        log(f"  {_fmt(big.spans)} spans, {big.raw_bytes / MIB:.2f} MiB protobuf, about {big.wire_bytes / MIB:.2f} MiB on the wire; "
            f"span limit: {big.span_limit_env}")  # fmt: skip
        log(f"  answer {big.status} after {big.client_s:.1f} s")
        log(f"  server VmHWM: {big.baseline_rss_mb:.0f} MB after boot, {big.peak_rss_mb:.0f} MB after the request")
        if big.status != GRPC_OK or not big.worker_survived:
            failures.append(f"gRPC 64 MiB request: {big.status} (server survived: {big.worker_survived}) {big.detail[:300]}")
        final = db_counts(args.database_url, project_id)
        if final["spans"] - after["spans"] != (big.spans if big.status == GRPC_OK else 0):
            failures.append(f"gRPC 64 MiB request: {final['spans'] - after['spans']} spans stored, {big.spans} sent")
    return GrpcPhase(e2e, worker_us, db_us, sender_us, big, failures, next_copy)


def grpc_summary(phase: GrpcPhase, http_e2e: EndToEnd | None = None) -> None:
    e2e = phase.e2e
    log(f"  gRPC end to end {_fmt(e2e.spans_per_s):>9} spans/s   target ≥ {_fmt(TARGET_SPANS_PER_S)}: "
        f"{'met' if e2e.spans_per_s >= TARGET_SPANS_PER_S else 'NOT met'}"
        + (f"; {e2e.spans_per_s / http_e2e.spans_per_s:.2f} × HTTP (target ≥ 1)" if http_e2e and http_e2e.spans_per_s else ""))  # fmt: skip
    log(f"  gRPC CPU/span   {phase.worker_us:>9.1f} µs worker + {phase.db_us:.1f} µs PostgreSQL (+ {phase.sender_us:.1f} µs senders)")
    if phase.big:
        log(f"  gRPC peak RSS   {phase.big.peak_rss_mb:>9.0f} MB        target ≤ {TARGET_RSS_MB} MB for a 64 MiB request: "
            f"{'met' if phase.big.peak_rss_mb <= TARGET_RSS_MB else 'NOT met'}")  # fmt: skip


def grpc_figures(phase: GrpcPhase, prefix: str = "grpc_") -> str:
    peak = phase.big.peak_rss_mb if phase.big else math.nan
    return (
        f"{prefix}spans_per_s={phase.e2e.spans_per_s:.0f} {prefix}peak_rss_mb={peak:.0f} {prefix}p95_ms={phase.e2e.p95_ms:.0f} "
        f"{prefix}worker_cpu_us_per_span={phase.worker_us:.1f} {prefix}db_cpu_us_per_span={phase.db_us:.1f} "
        f"{prefix}sender_cpu_us_per_span={phase.sender_us:.1f}"
    )


def main_grpc_only(args, cycle, key, project_id, ceiling, decode, copy, log_dir, run_start, gzip) -> int:
    """--protocol grpc: phases 4 and 5 against the gRPC receiver only, then the summary."""
    phase = grpc_phase(args, cycle, key, project_id, 1, ceiling, log_dir, gzip)
    if args.drop:
        drop_database(args.database_url)
    ratio = phase.e2e.spans_per_s / ceiling
    log("\n[summary]")
    grpc_summary(phase)
    log(f"  ceiling        {_fmt(ceiling):>10} spans/s   ratio {ratio:.2f} (target ≥ {TARGET_RATIO})")
    log(f"  total run time {time.perf_counter() - run_start:.0f} s; server logs in {log_dir}")
    if phase.failures:
        for failure in phase.failures:
            log(f"  FAILURE: {failure}")
        log("FAILED: " + "; ".join(phase.failures))
        return 1
    log(
        f"{grpc_figures(phase, prefix='')} ceiling_spans_per_s={ceiling:.0f} ratio={ratio:.2f} "
        f"decode_spans_per_s={decode.spans_per_s:.0f} copy_rows_per_s={copy.rows_per_s:.0f}"
    )
    return 0


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20, help="timed end-to-end seconds (default 20)")
    parser.add_argument("--warmup", type=float, default=3, help="end-to-end warm-up seconds before timing (default 3)")
    parser.add_argument("--senders", type=int, default=4, help="concurrent sender threads (default 4)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="gunicorn threads per worker; 1 = sync workers (default 1)")
    parser.add_argument("--timeout", type=int, default=30, help="gunicorn --timeout of the end-to-end server (default 30, as deployed)")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/toolwatch_bench")
    parser.add_argument("--no-gzip", action="store_true", help="send identity bodies instead of gzip")
    parser.add_argument("--drop", action="store_true", help="drop the bench database at the end")
    parser.add_argument("--templates", type=int, default=16, help="distinct requests per cycle (default 16)")
    parser.add_argument(
        "--source", choices=("templates", "simulate"), default="templates",
        help="templates (default): bench/traffic.py's synthetic traces, ~30%% of tool spans failing as the "
        "target specifies; simulate: the demo fleet's traffic (demo.simulate, the official encoder, ~7%% failing)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--decode-seconds", type=float, default=4, help="minimum time of the decode ceiling (default 4)")
    parser.add_argument("--copy-seconds", type=float, default=3, help="minimum time of the COPY ceiling (default 3)")
    parser.add_argument("--skip-rss", action="store_true", help="skip the 64 MiB request")
    parser.add_argument("--rss-timeout", type=int, default=300, help="gunicorn --timeout for the 64 MiB request (default 300)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the decode path (one pass over the cycle)")
    parser.add_argument(
        "--no-analyze", action="store_true",
        help="do not ANALYZE the day partitions after the warm-up (measures a never-analyzed partition, "
        "which production only has in the first minute of a day)",
    )  # fmt: skip
    parser.add_argument("--app", default="config.wsgi:application", help="WSGI app for gunicorn (A/B experiments; default config.wsgi:application)")
    parser.add_argument(
        "--protocol", choices=("http", "grpc", "both"), default="http",
        help="http (default): gunicorn and POST /v1/traces; grpc: manage.py grpcserver and TraceService/Export "
        "(--workers processes); both: HTTP, then gRPC on the same database, side by side",
    )  # fmt: skip
    parser.add_argument("--grpc-threads", type=int, default=4, help="grpcserver --threads per worker process (default 4)")
    parser.add_argument(
        "--redaction", action="store_true",
        help="only the redaction section: µs per span of flattening with ingest/redact.py before (bench/redact_before.py) "
        "and after gitleaks' rules, alternating in this process; no database",
    )  # fmt: skip
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------
# Redaction cost on the hot path (--redaction)
# ---------------------------------------------------------------------------


def _flatten_us_per_span(cycle, limits, copy: int) -> float:
    from ingest import otlp

    otlp._STORED_PAIRS.clear()  # each side starts from a cold pair cache, as a fresh worker does
    otlp._SEEN_ONCE.clear()
    spans, start = 0, time.process_time()
    for template in cycle:
        request = otlp.decode_request(traffic.instantiate(template, copy), otlp.PROTOBUF)
        spans += sum(1 for _ in otlp.iter_spans(request, limits, now_ns=time.time_ns()))
    return (time.process_time() - start) / spans * 1e6


def redaction_section(args) -> int:
    """µs per span of decode + flatten (every attribute, name and message through redaction) with
    the old and the new ingest/redact.py, alternating five times each on the same cycle; the
    difference is what the new rules cost per span. Also the scrub of strings that hold no secret."""
    from bench import redact_before
    from ingest import otlp, redact
    from ingest.limits import DEFAULT_LIMITS

    cycle = traffic.simulator_cycle(args.templates, seed=args.seed) if args.source == "simulate" else traffic.build_cycle(args.templates, seed=args.seed)
    new_names = {name: getattr(otlp, name) for name in ("redact_item", "redact_string", "clean_string")}
    sides = {"before": redact_before, "after": redact}
    results: dict[str, list[float]] = {"before": [], "after": []}
    copy = 10_000
    for _ in range(5):
        for side, module in sides.items():
            for name in new_names:
                setattr(otlp, name, getattr(module, name))
            copy += 1
            results[side].append(_flatten_us_per_span(cycle, DEFAULT_LIMITS, copy))
    for name, function in new_names.items():
        setattr(otlp, name, function)
    before, after = statistics.median(results["before"]), statistics.median(results["after"])
    texts = [
        "lookup_order raised TimeoutError after 30.0s while calling https://api.example.com/v1/orders/12345",
        '{"order_id": "A-1029", "customer": "Jane Doe", "items": [{"sku": "X-100", "qty": 2}], "note": "deliver by noon"}',
        "the task runner could not find the file /home/agent/.config/tool/settings.json",
    ]
    scrub = {}
    for side, module in sides.items():
        start = time.perf_counter()
        for _ in range(20_000):
            for text in texts:
                module.scrub_text(text)
        scrub[side] = (time.perf_counter() - start) / (20_000 * len(texts)) * 1e6
    log(f"load average: {os.getloadavg()}")
    log(f"decode + flatten, µs per span (median of 5, CPU time): before {before:.2f}, after {after:.2f}, "
        f"ratio {after / before:.3f}; runs before {[round(x, 2) for x in results['before']]} after {[round(x, 2) for x in results['after']]}")  # fmt: skip
    log(f"scrub_text of a secret-free string, µs: before {scrub['before']:.2f}, after {scrub['after']:.2f}")
    print(
        f"redact_us_per_span_before={before:.2f} redact_us_per_span_after={after:.2f} ratio={after / before:.3f} "
        f"scrub_us_before={scrub['before']:.2f} scrub_us_after={scrub['after']:.2f}"
    )
    return 0


def _fmt(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.redaction:
        return redaction_section(args)
    gzip = not args.no_gzip
    cores = os.cpu_count() or 1
    failures: list[str] = []
    run_start = time.perf_counter()
    log_dir = tempfile.mkdtemp(prefix="toolwatch-bench-")

    log(f"Toolwatch ingest benchmark: {cores} cores, database {args.database_url}")
    if args.protocol != "http":
        log(f"  protocol {args.protocol}: manage.py grpcserver --workers {args.workers} --threads {args.grpc_threads}")
    log(f"  gunicorn --workers {args.workers} --threads {args.threads} --timeout {args.timeout}; "
        f"{args.senders} senders; {traffic.SPANS_PER_REQUEST} spans per request; {'gzip' if gzip else 'identity'} bodies")  # fmt: skip

    # 1. Setup
    t = time.perf_counter()
    recreate_database(args.database_url)
    django_setup(args.database_url)
    project_id, key = migrate_and_create_key()
    log(f"\n[setup] database recreated and migrated, project {project_id} and key {key[:11]}… in {time.perf_counter() - t:.1f} s")

    # 2. Traffic
    t = time.perf_counter()
    if args.source == "simulate":
        cycle = traffic.simulator_cycle(args.templates, seed=args.seed)
    else:
        cycle = traffic.build_cycle(args.templates, seed=args.seed)
    cycle_spans = sum(x.spans for x in cycle)
    cycle_tools = sum(x.tool_spans for x in cycle)
    cycle_failing = sum(x.failing_tool_spans for x in cycle)
    raw = sum(len(x.body) for x in cycle) / len(cycle)
    ceiling_bodies = _ceiling_bodies(cycle, CEILING_COPIES - 1, gzip)
    wire = sum(len(b) for b in ceiling_bodies) / len(ceiling_bodies)
    log(f"[traffic] cycle of {len(cycle)} requests, {cycle_spans} spans: {cycle_tools / cycle_spans:.0%} tool spans, "
        f"{cycle_failing / cycle_tools:.0%} of them failing; {raw / 1024:.0f} KiB per request "
        f"({raw / traffic.SPANS_PER_REQUEST:.0f} B/span), {wire / 1024:.0f} KiB on the wire; built in {time.perf_counter() - t:.1f} s")  # fmt: skip

    # 3. Ceiling
    log(f"\n[ceiling a] decode alone, one process: {'gunzip + ' if gzip else ''}decode_request + iter_spans + normalize + span_row/toolcall_row")
    decode = measure_decode(cycle, gzip, project_id, args.decode_seconds)
    log(f"  {_fmt(decode.spans)} spans in {decode.seconds:.2f} s = {_fmt(decode.spans_per_s)} spans/s on one core "
        f"({1e6 / decode.spans_per_s:.1f} µs/span)")  # fmt: skip
    if args.profile:
        log(profile_decode(cycle, gzip, project_id))
    log("[ceiling b] binary COPY alone of the same span rows into a scratch table shaped like ingest_span (no indexes), commit per 512 rows")
    copy = measure_copy(args.database_url, decode.span_rows, traffic.SPANS_PER_REQUEST, args.copy_seconds)
    log(f"  {_fmt(copy.rows)} rows in {copy.seconds:.2f} s, {copy.commits} commits = {_fmt(copy.rows_per_s)} rows/s "
        f"({1e6 / copy.rows_per_s:.1f} µs/row)")  # fmt: skip
    ceiling = cores / (1 / decode.spans_per_s + 1 / copy.rows_per_s)
    log(f"  ceiling = cores / (1/decode + 1/copy) = {cores} / (1/{decode.spans_per_s:.0f} + 1/{copy.rows_per_s:.0f}) "
        f"= {_fmt(ceiling)} spans/s")  # fmt: skip
    if args.protocol == "grpc":
        return main_grpc_only(args, cycle, key, project_id, ceiling, decode, copy, log_dir, run_start, gzip)

    # 4. End to end
    # Enough for the ceiling rate and a margin; should a sender still run out, the window ends there.
    requests_needed = math.ceil(max(ceiling, TARGET_SPANS_PER_S) * 1.3 * (args.warmup + args.seconds) / traffic.SPANS_PER_REQUEST)
    cycles_per_sender = max(1, math.ceil(requests_needed / args.senders / len(cycle)))
    plans = [SenderPlan(copies=[1 + s + k * args.senders for k in range(cycles_per_sender)]) for s in range(args.senders)]
    next_copy = 1 + args.senders * cycles_per_sender
    t = time.perf_counter()
    if gzip:
        for plan in plans:
            plan.bodies = [traffic.gzip_body(traffic.instantiate(x, c)) for c in plan.copies for x in cycle]
    log(f"\n[end to end] {args.senders} senders × {cycles_per_sender * len(cycle)} requests available "
        f"({'pre-built' if gzip else 'ids replaced on the fly'} in {time.perf_counter() - t:.1f} s); "
        f"warm-up {args.warmup:g} s, timed {args.seconds:g} s")  # fmt: skip
    analyzed: list[str] = []

    def after_warmup() -> None:
        if not args.no_analyze:
            analyzed.extend(analyze_partitions(args.database_url))

    with Gunicorn(
        workers=args.workers, threads=args.threads, timeout=args.timeout, env=server_env(args.database_url),
        log_dir=log_dir, label="e2e", app=args.app,
    ) as server:  # fmt: skip
        e2e = run_end_to_end(
            cycle, plans, gzip, server.port, key, args.warmup, args.seconds, after_warmup,
            cpu_pids=lambda: (server.worker_pids(), client_backends(args.database_url)),
        )  # fmt: skip
        worker_hwm = [proc_status_kb(pid, "VmHWM") / 1024 for pid in server.worker_pids()]
        server_log_tail = server.log_tail()
    sent_ok = [s for s in e2e.all_sent if s.status == 200]
    bad = [s for s in e2e.all_sent if s.status != 200]
    sent_spans = sum(s.spans for s in sent_ok)
    sent_tools = sum(s.tool_spans for s in sent_ok)
    sent_failing = sum(s.failing for s in sent_ok)
    log(f"  after the warm-up: {'ANALYZE ' + ', '.join(analyzed) if analyzed else 'no ANALYZE (--no-analyze): never-analyzed day partitions'}")
    log(f"  {e2e.timed_requests} requests in the {e2e.window_s:.1f} s window: {_fmt(e2e.spans_per_s)} spans/s, "
        f"{e2e.requests_per_s:.1f} requests/s, latency p50 {e2e.p50_ms:.0f} ms, p95 {e2e.p95_ms:.0f} ms")  # fmt: skip
    window_spans = e2e.spans_per_s * e2e.window_s
    worker_us = e2e.worker_cpu_s * 1e6 / window_spans if window_spans else math.nan
    db_us = e2e.db_cpu_s * 1e6 / window_spans if window_spans else math.nan
    # On a machine shared with other work the rate above says little; the CPU per span does.
    log(f"  CPU per span in the window: gunicorn workers {worker_us:.1f} µs + their PostgreSQL backends {db_us:.1f} µs "
        f"= {worker_us + db_us:.1f} µs (CPU time also grows on a busy machine: compare runs made under like load)")  # fmt: skip
    log(f"  worker peak RSS (VmHWM) after the run: {', '.join(f'{x:.0f} MB' for x in worker_hwm)}")
    if e2e.exhausted:
        log("  WARNING: a sender ran out of pre-built requests; the window was cut at that moment")
    if bad:
        failures.append(f"{len(bad)} of {len(e2e.all_sent)} requests not answered 200 with an empty body")
        for s in bad[:5]:
            log(f"  NOT 200: {s.status} {s.detail[:200]}")
        log("  server log tail:\n" + server_log_tail)
    counts = db_counts(args.database_url, project_id)
    log(f"  durability: {_fmt(counts['spans'])} spans stored / {_fmt(sent_spans)} sent in {len(sent_ok)} requests answered 200; "
        f"{_fmt(counts['tool_calls'])} tool calls stored / {_fmt(sent_tools)} tool spans sent; "
        f"{_fmt(counts['failed_calls'])} failed calls stored / {_fmt(sent_failing)} failing sent")  # fmt: skip
    log(f"  tool calls without an agent: {counts['agentless_calls']} (the senders stopped before their trace's root span), "
        f"of which {counts['unsettled_calls']} have their agent span stored (should be 0)")  # fmt: skip
    if counts["unsettled_calls"]:
        log("  WARNING: tool calls whose agent span is stored were left without an agent")
    sent_resources = cycle_resources(cycle)
    log(f"  resources: {counts['resources']} stored / {sent_resources} distinct sent; "
        f"{counts['dangling_spans']} spans refer to no stored resource (should be 0)")  # fmt: skip
    failures += durability_failures(
        counts, spans=sent_spans, tools=sent_tools, failing=sent_failing, resources=sent_resources
    )

    # 5. Peak RSS for a 64 MiB request
    big = None
    if not args.skip_rss:
        log("\n[peak RSS] fresh gunicorn, 1 worker, ONE request just under 64 MiB of protobuf")
        big, next_copy = run_big_request(
            cycle, next_copy, args.database_url, key, gzip, args.threads, args.rss_timeout, log_dir, args.app
        )
        log(f"  {_fmt(big.spans)} spans, {big.raw_bytes / MIB:.2f} MiB protobuf, {big.wire_bytes / MIB:.2f} MiB on the wire; "
            f"span limit: {big.span_limit_env}")  # fmt: skip
        server_s = f"{big.server_s:.1f} s" if big.server_s is not None else "n/a"
        log(f"  answer {big.status} after {big.client_s:.1f} s (server time {server_s}; "
            f"{'within' if (big.server_s or big.client_s) <= args.timeout else 'OVER'} the deployed --timeout {args.timeout} s)")  # fmt: skip
        log(f"  worker VmHWM: {big.baseline_rss_mb:.0f} MB after boot, {big.peak_rss_mb:.0f} MB after the request")
        if big.status != 200 or not big.worker_survived:
            failures.append(f"64 MiB request: {big.status} (worker survived: {big.worker_survived}) {big.detail[:300]}")
        after = db_counts(args.database_url, project_id)
        if after["spans"] - counts["spans"] != (big.spans if big.status == 200 else 0):
            failures.append(f"64 MiB request: {after['spans'] - counts['spans']} spans stored, {big.spans} sent")
        if after["tool_calls"] - counts["tool_calls"] != (big.tool_spans if big.status == 200 else 0):
            failures.append(f"64 MiB request: {after['tool_calls'] - counts['tool_calls']} tool calls stored, {big.tool_spans} sent")

    grpc = None
    if args.protocol == "both":
        grpc = grpc_phase(args, cycle, key, project_id, next_copy, ceiling, log_dir, gzip)
        failures.extend(grpc.failures)

    if args.drop:
        drop_database(args.database_url)

    # Report
    ratio = e2e.spans_per_s / ceiling
    peak = big.peak_rss_mb if big else math.nan
    log("\n[summary]")
    log(f"  end to end     {_fmt(e2e.spans_per_s):>10} spans/s   target ≥ {_fmt(TARGET_SPANS_PER_S)}: "
        f"{'met' if e2e.spans_per_s >= TARGET_SPANS_PER_S else 'NOT met'}")  # fmt: skip
    log(f"  ceiling        {_fmt(ceiling):>10} spans/s   (decode {_fmt(decode.spans_per_s)}/s/core, COPY {_fmt(copy.rows_per_s)} rows/s, {cores} cores)")
    log(f"  ratio          {ratio:>10.2f}           target ≥ {TARGET_RATIO}: {'met' if ratio >= TARGET_RATIO else 'NOT met'}")
    if big:
        log(f"  peak RSS       {peak:>10.0f} MB        target ≤ {TARGET_RSS_MB} MB for a 64 MiB request: "
            f"{'met' if peak <= TARGET_RSS_MB else 'NOT met'}")  # fmt: skip
    if grpc is not None:
        grpc_summary(grpc, e2e)
    log(f"  total run time {time.perf_counter() - run_start:.0f} s; server logs in {log_dir}")
    if failures:
        for failure in failures:
            log(f"  FAILURE: {failure}")
        log("FAILED: " + "; ".join(failures))
        return 1
    log(
        f"spans_per_s={e2e.spans_per_s:.0f} ceiling_spans_per_s={ceiling:.0f} ratio={ratio:.2f} "
        f"peak_rss_mb={peak:.0f} decode_spans_per_s={decode.spans_per_s:.0f} copy_rows_per_s={copy.rows_per_s:.0f} "
        f"p95_ms={e2e.p95_ms:.0f} worker_cpu_us_per_span={worker_us:.1f} db_cpu_us_per_span={db_us:.1f}"
        + (f" {grpc_figures(grpc)}" if grpc is not None else "")
    )
    return 0


def _terminate(signum, frame):
    raise KeyboardInterrupt  # unwinds through the `with Gunicorn(...)` blocks, which stop the server


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; gunicorn stopped", file=sys.stderr)
        sys.exit(130)
