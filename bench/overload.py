"""Overload and faults on PostgreSQL, measured (a benchmark that prints counts, not a test).

    .venv/bin/python bench/overload.py --pg-cluster 15/overload \\
        --database-url postgres://postgres@127.0.0.1:5440/toolwatch_overload [--rate R] [--factor 2]
        [--seconds 60] [--outage-seconds 10] [--protocol http|grpc|both] [--phases ramp,overload,outage]

The restart phase stops and starts a PostgreSQL server, so it needs one of its own, never the
shared one. Make it once (as root; the server runs as postgres):

    pg_createcluster 15 overload --port 5440 -- --auth=trust
    pg_ctlcluster 15 overload start          # pg_lsclusters shows it online on 5440

Without --pg-cluster the bench refuses the outage phase (and runs the others); it also refuses
a cluster named main, or one whose port is not the --database-url's.

Phases, each on the production server shape (gunicorn config.wsgi, --workers sync workers,
--timeout 30; with --protocol grpc/both also manage.py grpcserver --workers N):

1. ramp: the sustainable rate, closed loop (bench/ingest.py's senders and run_end_to_end:
   2 × workers senders back to back for --ramp-seconds); its requests per second is the rate.
   --rate R skips it.
2. overload: --factor × that rate (default 2×) for --seconds (60), open loop: requests leave
   at fixed times whatever the answers (one new connection each, as many as are in flight),
   so the server cannot slow the senders down and overload really happens.
3. outage: --outage-factor × the rate (0.5) for --outage-run seconds (40); after
   --outage-at (10 s) the bench stops its PostgreSQL (pg_ctlcluster … stop -m immediate), and
   starts it again --outage-seconds (10) later.

Every request is one template of bench/traffic.py's cycle (512 spans) under a copy number of its
own, so its trace ids end with a marker no other request has: what is stored is counted per
request (total and distinct (trace id, span id)). A request answered 200 must have every span
stored exactly once; a refused one (429/503) none; one without an answer (reset, timeout) all
or none, never part. The client timeout is the exporters' 10 s (--client-timeout).

Printed per phase: requests sent; answered 200 / 429 / 503 / 500 / other; refusals carrying
Retry-After; connection resets, refused connections and client timeouts; spans acknowledged
and stored (lost, doubled, stored without a success); server peak RSS per worker (sampled
VmRSS and VmHWM) against the 400 MB a worker may use (bench/ingest.py TARGET_RSS_MB); worker
restarts (gunicorn's timeout kill); p50/p99 latency of answers and of successes; the load
average. A phase that loses, doubles, 500s, resets or times out ends the run with a FAILED
line (exit 1); the last line is the figures as key=value.
"""

from __future__ import annotations

import argparse
import http.client
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import traffic  # noqa: E402
from bench.ingest import (  # noqa: E402
    GRPC_EXPORT,
    TARGET_RSS_MB,
    GrpcServer,
    Gunicorn,
    SenderPlan,
    django_setup,
    grpc_sender,
    log,
    migrate_and_create_key,
    proc_status_kb,
    recreate_database,
    run_end_to_end,
    sender,
    server_env,
)

# Copy numbers of each phase's requests: apart, so markers never repeat across phases.
PHASE_COPIES = {"ramp": 1_000_000, "overload": 2_000_000, "outage": 3_000_000}
GRPC_COPY_OFFSET = 10_000_000


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


# ---------------------------------------------------------------------------
# One request and what became of it
# ---------------------------------------------------------------------------


@dataclass
class Shot:
    copy: int
    spans: int
    scheduled: float
    start: float = math.nan
    end: float = math.nan
    outcome: str = ""  # "200", "429", "503", "500", "<status>", "partial", "reset", "timeout", "refused", "not sent"
    retry_after: str | None = None
    detail: str = ""


def _classify(exc: BaseException) -> str:
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, http.client.RemoteDisconnected)):
        return "reset"
    return f"error {type(exc).__name__}"


def http_shot(shot: Shot, body: bytes, port: int, key: str, gzip: bool, timeout: float) -> None:
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}"}
    if gzip:
        headers["Content-Encoding"] = "gzip"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    shot.start = time.perf_counter()
    try:
        conn.request("POST", "/v1/traces", body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        shot.outcome = str(response.status) if response.status != 200 or not data else "partial"
        shot.retry_after = response.getheader("Retry-After")
        if response.status != 200 or data:
            shot.detail = data[:200].decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        shot.outcome, shot.detail = _classify(exc), repr(exc)[:200]
    finally:
        shot.end = time.perf_counter()
        conn.close()


def open_loop(rate: float, seconds: float, first_copy: int, cycle, fire, pool: int, at=()) -> list[Shot]:
    """fire(shot, body) for a request every 1/rate s for `seconds`, each on a thread of its own
    (at most `pool` in flight: one more is "not sent"); `at` = ((offset_s, callable), …) run on
    the way, on their own threads."""
    count = max(1, int(rate * seconds))
    shots: list[Shot] = []
    in_flight = [0]
    lock = threading.Lock()

    def run(shot: Shot, template) -> None:
        try:
            fire(shot, template)
        finally:
            with lock:
                in_flight[0] -= 1

    side = [threading.Thread(target=_after, args=(offset, action), daemon=True) for offset, action in at]
    t0 = time.perf_counter()
    for thread in side:
        thread.start()
    with ThreadPoolExecutor(max_workers=pool) as executor:
        for index in range(count):
            due = t0 + index / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            template = cycle[index % len(cycle)]
            shot = Shot(first_copy + index, template.spans, due)
            shots.append(shot)
            with lock:
                full = in_flight[0] >= pool
                if not full:
                    in_flight[0] += 1
            if full:
                shot.outcome = "not sent"
                continue
            executor.submit(run, shot, template)
    for thread in side:
        thread.join()
    return shots


def _after(offset: float, action) -> None:
    time.sleep(offset)
    action()


# ---------------------------------------------------------------------------
# gRPC: one channel, open loop on futures (HTTP/2 carries every call at once)
# ---------------------------------------------------------------------------


def grpc_firer(port: int, key: str, gzip: bool, timeout: float):
    import grpc
    from google.rpc import error_details_pb2, status_pb2

    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", -1)])
    call = channel.unary_unary(GRPC_EXPORT)
    metadata = (("authorization", f"Bearer {key}"),)
    compression = grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression
    names = {
        grpc.StatusCode.UNAVAILABLE: "503", grpc.StatusCode.RESOURCE_EXHAUSTED: "429",
        grpc.StatusCode.INTERNAL: "500", grpc.StatusCode.UNKNOWN: "500", grpc.StatusCode.DEADLINE_EXCEEDED: "timeout",
        grpc.StatusCode.CANCELLED: "reset",
    }  # fmt: skip

    def retry_delay(error) -> str | None:
        for item in error.trailing_metadata() or ():
            if item.key == "grpc-status-details-bin":
                status = status_pb2.Status.FromString(item.value)
                for detail in status.details:
                    if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                        info = error_details_pb2.RetryInfo()
                        detail.Unpack(info)
                        return str(info.retry_delay.seconds)
        return None

    def fire(shot: Shot, template) -> None:
        body = traffic.instantiate(template, shot.copy)
        shot.start = time.perf_counter()
        done = threading.Event()
        future = call.future(body, metadata=metadata, compression=compression, timeout=timeout)

        def finished(result) -> None:
            shot.end = time.perf_counter()
            try:
                data = result.result()
                shot.outcome = "200" if data == b"" else "partial"
            except grpc.RpcError as exc:
                shot.outcome = names.get(exc.code(), f"gRPC {exc.code().name}")
                shot.detail = (exc.details() or "")[:200]
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
                    shot.retry_after = retry_delay(exc)
            done.set()

        future.add_done_callback(finished)
        done.wait()

    return fire, channel


# ---------------------------------------------------------------------------
# Server memory, durability, the report
# ---------------------------------------------------------------------------


class RssSampler:
    """The peak VmRSS of every worker process seen (sampled every 0.25 s), and their VmHWM."""

    def __init__(self, server):
        self.server = server
        self.peak_kb: dict[int, int] = {}
        self.first = set(server.worker_pids())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(0.25)

    def sample(self) -> None:
        for pid in self.server.worker_pids():
            for name in ("VmRSS", "VmHWM"):
                try:
                    self.peak_kb[pid] = max(self.peak_kb.get(pid, 0), proc_status_kb(pid, name))
                except (OSError, KeyError):
                    pass

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    @property
    def restarts(self) -> int:
        return len(set(self.peak_kb) - self.first)


def stored_by_copy(url: str, project_id: int, shots: list[Shot]) -> dict[int, tuple[int, int]]:
    """copy -> (spans stored, distinct (trace id, span id)) for the copies of `shots`."""
    import psycopg

    by_marker = {traffic.copy_marker(shot.copy).hex(): shot.copy for shot in shots}
    out: dict[int, tuple[int, int]] = {}
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT right(trace_id, 16), count(*), count(DISTINCT (trace_id, span_id)) FROM ingest_span "
            "WHERE project_id = %s GROUP BY 1",
            [project_id],
        ).fetchall()
    for marker, total, distinct in rows:
        copy = by_marker.get(marker)
        if copy is not None:
            out[copy] = (total, distinct)
    return out


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    values = sorted(values)
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


@dataclass
class Report:
    label: str
    counts: Counter
    figures: dict = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


REFUSALS = ("429", "503")
NO_ANSWER = ("reset", "timeout", "refused")


def report(label: str, shots: list[Shot], stored: dict, rss: RssSampler | None, seconds: float, extra: str = "") -> Report:
    counts = Counter(shot.outcome for shot in shots)
    acked = [s for s in shots if s.outcome == "200"]
    refused = [s for s in shots if s.outcome in REFUSALS]
    unanswered = [s for s in shots if s.outcome in NO_ANSWER]
    with_retry_after = sum(1 for s in refused if s.retry_after)
    acked_spans = sum(s.spans for s in acked)
    stored_acked = sum(stored.get(s.copy, (0, 0))[0] for s in acked)
    lost = sum(max(0, s.spans - stored.get(s.copy, (0, 0))[1]) for s in acked)
    doubled = sum(total - distinct for total, distinct in stored.values())
    refused_stored = sum(1 for s in refused if stored.get(s.copy, (0, 0))[0])
    unanswered_full = sum(1 for s in unanswered if stored.get(s.copy, (0, 0))[1] == s.spans)
    partial = sum(1 for s in shots if 0 < stored.get(s.copy, (0, 0))[1] < s.spans)
    answered_ms = [(s.end - s.start) * 1000 for s in shots if s.outcome not in NO_ANSWER and s.outcome != "not sent"]
    ok_ms = [(s.end - s.start) * 1000 for s in acked]
    other = {k: v for k, v in counts.items() if k not in ("200", "429", "503", "500", "not sent", *NO_ANSWER)}
    peaks = {pid: kb / 1024 for pid, kb in rss.peak_kb.items()} if rss else {}
    peak = max(peaks.values()) if peaks else math.nan

    log(f"\n[{label}] {len(shots)} requests in {seconds:.0f} s ({extra}); {load()}")
    log(f"  answered: 200 {counts['200']}, 429 {counts['429']}, 503 {counts['503']}, 500 {counts['500']}, other {dict(other) or 0}")
    log(f"  refusals with Retry-After: {with_retry_after} of {len(refused)}; not sent (the bench's --pool in flight): {counts['not sent']}")
    log(f"  no answer: {counts['reset']} connection resets, {counts['refused']} connections refused, {counts['timeout']} client timeouts "
        f"({unanswered_full} of these {len(unanswered)} stored in full)")  # fmt: skip
    log(f"  spans acknowledged {acked_spans:,}, stored of those {stored_acked:,}: lost {lost}, doubled {doubled}; "
        f"refused requests stored anyway {refused_stored}; requests stored in part {partial}")  # fmt: skip
    log(f"  latency: answers p50 {percentile(answered_ms, 0.5):.0f} ms p99 {percentile(answered_ms, 0.99):.0f} ms; "
        f"successes p50 {percentile(ok_ms, 0.5):.0f} ms p99 {percentile(ok_ms, 0.99):.0f} ms")  # fmt: skip
    if rss:
        log(f"  server peak RSS per process: {', '.join(f'{mb:.0f} MB' for mb in peaks.values())} "
            f"(bound {TARGET_RSS_MB} MB); worker restarts {rss.restarts}")  # fmt: skip
    for sample in [s for s in shots if s.outcome not in ("200", *REFUSALS)][:3]:
        log(f"  e.g. {sample.outcome}: {sample.detail[:160]}")

    failures = []
    if counts["500"] or other:
        failures.append(f"{label}: {counts['500']} answered 500, other answers {dict(other)}")
    if with_retry_after != len(refused):
        failures.append(f"{label}: {len(refused) - with_retry_after} refusals without Retry-After")
    if unanswered:
        failures.append(f"{label}: {len(unanswered)} requests without an answer ({counts['reset']} resets, "
                        f"{counts['refused']} refused connections, {counts['timeout']} timeouts)")  # fmt: skip
    if lost or doubled or partial:
        failures.append(f"{label}: {lost} acknowledged spans lost, {doubled} doubled, {partial} requests stored in part")
    if peak > TARGET_RSS_MB:
        failures.append(f"{label}: server peak RSS {peak:.0f} MB over {TARGET_RSS_MB} MB")
    if rss and rss.restarts:
        failures.append(f"{label}: {rss.restarts} worker processes replaced")
    prefix = label.replace(" ", "_")
    figures = {
        f"{prefix}_sent": len(shots), f"{prefix}_ok": counts["200"], f"{prefix}_429": counts["429"],
        f"{prefix}_503": counts["503"], f"{prefix}_500": counts["500"], f"{prefix}_retry_after": with_retry_after,
        f"{prefix}_reset": counts["reset"], f"{prefix}_timeout": counts["timeout"], f"{prefix}_lost": lost,
        f"{prefix}_doubled": doubled, f"{prefix}_peak_rss_mb": round(peak), f"{prefix}_p99_ms": round(percentile(answered_ms, 0.99)),
    }  # fmt: skip
    return Report(label, counts, figures, failures)


# ---------------------------------------------------------------------------
# PostgreSQL of the bench's own
# ---------------------------------------------------------------------------


class Cluster:
    """pg_ctlcluster <version> <name>: a cluster this bench may stop (never the shared one)."""

    def __init__(self, spec: str, url: str):
        match = re.fullmatch(r"(\d+)[/ ]([\w-]+)", spec)
        if not match:
            raise SystemExit(f"--pg-cluster {spec!r}: expected <version>/<name>, e.g. 15/overload")
        self.version, self.name = match.groups()
        if self.name == "main":
            raise SystemExit("--pg-cluster main is the shared server: the bench stops only a cluster of its own")
        port = urlsplit(url).port or 5432
        listed = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=True).stdout.split("\n")
        ports = {(row.split()[0], row.split()[1]): int(row.split()[2]) for row in listed if row.strip()}
        if ports.get((self.version, self.name)) != port:
            raise SystemExit(f"--pg-cluster {spec}: not a cluster on the --database-url's port {port} (pg_lsclusters: {ports})")

    def ctl(self, *args: str) -> float:
        start = time.perf_counter()
        subprocess.run(["pg_ctlcluster", self.version, self.name, *args], check=True, capture_output=True)
        return time.perf_counter() - start


# ---------------------------------------------------------------------------
# Phases
# ---------------------------------------------------------------------------


def ramp(args, cycle, key: str, port: int, grpc: bool) -> float:
    """Requests per second the server sustains, closed loop (bench/ingest.py's senders)."""
    senders = 2 * args.workers
    per_sender = math.ceil(args.ramp_seconds * 60 / senders / len(cycle)) + 1  # ≤ 60 requests/s
    base = PHASE_COPIES["ramp"] + (GRPC_COPY_OFFSET if grpc else 0)
    plans = [SenderPlan(copies=[base + s + k * senders for k in range(per_sender)]) for s in range(senders)]
    if not args.no_gzip and not grpc:
        for plan in plans:
            plan.bodies = [traffic.gzip_body(traffic.instantiate(x, c), 1) for c in plan.copies for x in cycle]
    e2e = run_end_to_end(cycle, plans, not args.no_gzip, port, key, 3, args.ramp_seconds, send=grpc_sender if grpc else sender)
    bad = Counter(s.status for s in e2e.all_sent if s.status != 200)
    log(f"\n[ramp{' gRPC' if grpc else ''}] closed loop, {senders} senders back to back: {e2e.requests_per_s:.1f} requests/s "
        f"({e2e.spans_per_s:,.0f} spans/s), p50 {e2e.p50_ms:.0f} ms; not 200: {dict(bad) or 0}; {load()}")  # fmt: skip
    return e2e.requests_per_s


def http_server(args, log_dir: str, label: str) -> Gunicorn:
    return Gunicorn(workers=args.workers, threads=1, timeout=args.timeout, env=server_env(args.database_url), log_dir=log_dir, label=label)


def grpc_server(args, log_dir: str, label: str, key: str) -> GrpcServer:
    return GrpcServer(workers=args.workers, threads=args.grpc_threads, env=server_env(args.database_url), log_dir=log_dir, label=label, key=key)


def run_phase(args, label: str, rate: float, seconds: float, server, fire_for, project_id: int, cycle, copy_base: int, at=()) -> Report:
    with RssSampler(server) as rss:
        fire = fire_for(server.port)
        # Enough connections for every request to wait out its timeout: the senders never slow down.
        pool = args.pool or math.ceil(rate * (args.client_timeout + 2)) + 8
        shots = open_loop(rate, seconds, copy_base, cycle, fire, pool, at)
        time.sleep(1)  # answers of the last requests
    tail = server.log_tail(8)
    stored = stored_by_copy(args.database_url, project_id, shots)
    result = report(label, shots, stored, rss, seconds, f"open loop at {rate:.1f}/s")
    if result.failures:
        log("  server log tail:\n    " + tail.replace("\n", "\n    "))
    return result


def main(argv=None) -> int:
    args = parse_args(argv)
    phases = set(args.phases.split(","))
    cluster = Cluster(args.pg_cluster, args.database_url) if args.pg_cluster else None
    if "outage" in phases and cluster is None:
        log("outage phase skipped: it stops PostgreSQL, and no --pg-cluster of the bench's own was given "
            "(see the docstring: pg_createcluster 15 overload --port 5440)")  # fmt: skip
        phases.discard("outage")
    log_dir = tempfile.mkdtemp(prefix="toolwatch-overload-")
    # DEBUG is off in the servers, as deployed, and then Django needs a key (config/security.py).
    os.environ.setdefault("SECRET_KEY", "overload-bench-" + os.urandom(24).hex())
    gzip = not args.no_gzip
    log(f"Toolwatch overload bench: {os.cpu_count()} cores, {load()}, database {args.database_url}, "
        f"{args.workers} workers, client timeout {args.client_timeout:g} s, phases {sorted(phases)}")  # fmt: skip
    recreate_database(args.database_url)
    django_setup(args.database_url)
    project_id, key = migrate_and_create_key()
    cycle = traffic.build_cycle(args.templates, seed=args.seed)

    def http_fire(port):
        def fire(shot, template):
            body = traffic.instantiate(template, shot.copy)
            http_shot(shot, traffic.gzip_body(body, 1) if gzip else body, port, key, gzip, args.client_timeout)

        return fire

    reports: list[Report] = []
    protocols = ["http", "grpc"] if args.protocol == "both" else [args.protocol]
    for protocol in protocols:
        grpc = protocol == "grpc"
        name = "grpc " if grpc else ""
        offset = GRPC_COPY_OFFSET if grpc else 0
        fires = []

        def fire_for(port, grpc=grpc):
            if not grpc:
                return http_fire(port)
            fire, channel = grpc_firer(port, key, gzip, args.client_timeout)
            fires.append(channel)
            return fire

        def make_server(label, grpc=grpc):
            return grpc_server(args, log_dir, label, key) if grpc else http_server(args, log_dir, label)

        rate = args.rate
        if rate is None:
            with make_server("ramp") as server:
                rate = ramp(args, cycle, key, server.port, grpc)
        if "overload" in phases:
            with make_server("overload") as server:
                reports.append(run_phase(args, f"{name}overload", rate * args.factor, args.seconds, server, fire_for,
                                         project_id, cycle, PHASE_COPIES["overload"] + offset))  # fmt: skip
        if "outage" in phases:
            marks: dict[str, float] = {}

            def stop():
                marks["stop"] = time.perf_counter()
                cluster.ctl("stop", "-m", "immediate")
                log(f"  PostgreSQL stopped (immediate) {marks['stop'] - t0[0]:.1f} s into the run")

            def start():
                cluster.ctl("start")
                marks["start"] = time.perf_counter()
                log(f"  PostgreSQL started again {marks['start'] - t0[0]:.1f} s into the run")

            t0 = [time.perf_counter()]
            at = ((args.outage_at, stop), (args.outage_at + args.outage_seconds, start))
            try:
                with make_server("outage") as server:
                    t0[0] = time.perf_counter()
                    result = run_phase(args, f"{name}outage", rate * args.outage_factor, args.outage_run, server, fire_for,
                                       project_id, cycle, PHASE_COPIES["outage"] + offset, at)  # fmt: skip
            finally:
                if "stop" in marks and "start" not in marks:
                    cluster.ctl("start")  # never leave the cluster down
            reports.append(result)
        for channel in fires:
            channel.close()

    failures = [f for r in reports for f in r.failures]
    log(f"\n[summary] {load()}; server logs in {log_dir}")
    for failure in failures:
        log(f"  FAILURE: {failure}")
    figures = " ".join(f"{k}={v}" for r in reports for k, v in r.figures.items())
    if failures:
        log("FAILED: " + "; ".join(failures))
        log(figures)
        return 1
    log(figures)
    return 0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5440/toolwatch_overload")
    parser.add_argument("--pg-cluster", default="", help="<version>/<name> of the bench's own cluster (pg_ctlcluster), e.g. 15/overload")
    parser.add_argument("--phases", default="overload,outage", help="comma-separated: overload, outage (default both)")
    parser.add_argument("--protocol", choices=("http", "grpc", "both"), default="http")
    parser.add_argument("--rate", type=float, default=None, help="sustainable requests/s (default: measured by a closed-loop ramp)")
    parser.add_argument("--ramp-seconds", type=float, default=12)
    parser.add_argument("--factor", type=float, default=2.0, help="overload: this × the sustainable rate (default 2)")
    parser.add_argument("--seconds", type=float, default=60, help="overload duration (default 60)")
    parser.add_argument("--outage-factor", type=float, default=0.5, help="outage run: this × the sustainable rate (default 0.5)")
    parser.add_argument("--outage-run", type=float, default=40, help="outage run duration (default 40)")
    parser.add_argument("--outage-at", type=float, default=10, help="PostgreSQL stopped this many seconds in (default 10)")
    parser.add_argument("--outage-seconds", type=float, default=10, help="and started again this much later (default 10)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--grpc-threads", type=int, default=4)
    parser.add_argument("--timeout", type=int, default=30, help="gunicorn --timeout (default 30, as deployed)")
    parser.add_argument("--client-timeout", type=float, default=10, help="per request, the exporters' default (10 s)")
    parser.add_argument("--pool", type=int, default=0, help="most requests in flight at once (default: rate × (client timeout + 2 s))")
    parser.add_argument("--templates", type=int, default=16)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--no-gzip", action="store_true")
    return parser.parse_args(argv)


def _terminate(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
