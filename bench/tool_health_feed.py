"""Requests per second and latency of the tool-health feed (docs/contract/tool-health.md) on one
server process, polled with and without If-None-Match, through the old path (Django and DRF:
`config.wsgi:django_application`), the new one (the fast path in front of it,
dashboard/feed/fast.py: `config.wsgi:application`) and `prev`, the new path with the throttles
counting as they did before dashboard/throttles.py's SharedLog (DRF's cache get and set of the
pickled history: `prev_throttle_app`), in one run on the same setup.

    .venv/bin/python bench/tool_health_feed.py [--tools 50] [--tokens 300] [--connections 8]
        [--seconds 5] [--warmup 2] [--server gunicorn|granian] [--worker-class gthread|sync] [--threads 4]
        [--rounds 1] [--cache-url redis://127.0.0.1:6379/13]
        [--load-generator wrk|python] [--paths old,prev,new,bare]
        [--database-url postgres://postgres@127.0.0.1:5432/toolwatch_feed_bench]

A benchmark that prints figures, not a test. Setup: drop and recreate the bench database,
migrate, a project with `--tokens` members, each with a personal token (`read` scope): an
agent fleet, so that each user's `agent` throttle history is what production keeps (600
entries at most at the default rate), not one user's 120,000 a minute. `--tools` tools'
5-minute rollups in the window and hourly ones over the baseline week, an open alert, and the
snapshot computed. Then, per path and round, one real server process: gunicorn, one worker
(`-w 1`), its gthread worker with `--threads` threads (keep-alive; `--worker-class sync`: the
otlp service's sync worker, one request per connection), or `--server granian` (compose's web
service: one worker, `--threads` blocking threads), DEBUG off, the `agent`
throttle on with a rate no bench reaches (TOOLWATCH_THROTTLE_AGENT, counted in the default
cache: this process's memory, or `--cache-url`'s Redis as compose runs it). The load: `wrk`
(Debian's package) on `--connections` keep-alive connections, each request with the next
token of the fleet (a Lua script sets Authorization and If-None-Match), or, without wrk,
`--connections` Python client processes (which are then the limit). After a `--warmup` (2 s; every
token's first lookup, its last-use write and its access-log row), `--seconds` with the ETag
(every answer a 304), then without (every answer the whole document, 200). Per path and mode:
requests/s, p50 / p99 / max latency, errors, the body size, and the CPU time per request of the
worker and of Redis (when it runs here: it serves other clients too). `bare`, a WSGI callable that
answers a fixed 304 and does nothing, is the same server's ceiling at that moment. The load generator shares the
machine's cores with the server, so on a 2-core box the figures are floors; the load average
is printed beside each phase, and CPU per request is what load changes least. The target: 2,000
requests/s of 304s on one worker. The last two lines hold, per path and mode (200, 304), the best
round's figures, then the median round's CPU per request (worker + Redis) and the requests/s
that allows a worker with a core of its own:
    new_200_rps=… new_200_p99_ms=… new_304_rps=… new_304_p99_ms=… old_200_rps=… …
    new_200_cpu_us=… new_200_per_core_rps=… …
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import multiprocessing
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

APPS = {"old": "config.wsgi:django_application", "prev": "bench.tool_health_feed:prev_throttle_app()",
        "new": "config.wsgi:application", "bare": "bench.tool_health_feed:bare"}
RATE = "100000000/min"  # never reached: the bench measures the work of counting, not refusals

WRK_SCRIPT = r"""
local path, etag = os.getenv("FEED_PATH"), os.getenv("FEED_ETAG")
local tokens = {}
for line in io.lines(os.getenv("FEED_TOKENS")) do tokens[#tokens + 1] = line end
local requests, n = {}, 0
function init(args)
  for i, token in ipairs(tokens) do
    local headers = {["Authorization"] = "Bearer " .. token, ["Accept"] = "application/json"}
    if etag ~= "" then headers["If-None-Match"] = etag end
    requests[i] = wrk.format("GET", path, headers)
  end
  n = math.random(#requests)
end
function request()
  n = n % #requests + 1
  return requests[n]
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK requests=%d duration_us=%d p50_us=%d p99_us=%d max_us=%d status_errors=%d socket_errors=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max, e.status,
    e.connect + e.read + e.write + e.timeout))
end
"""


def bare(environ, start_response):
    """The server's ceiling: a WSGI callable that answers every request with a fixed 304 and no work."""
    start_response("304 Not Modified", [("ETag", environ.get("HTTP_IF_NONE_MATCH") or '"x"'), ("Content-Length", "0")])
    return [b""]


def prev_throttle_app():
    """gunicorn's factory of `prev`: the fast path in front of Django, the throttles counting as DRF
    does on its own (a cache get and set of the pickled history), as before SharedLog."""
    from rest_framework.throttling import SimpleRateThrottle

    from dashboard import throttles

    throttles.SharedLog.allow_request = SimpleRateThrottle.allow_request
    throttles.SharedLog.wait = SimpleRateThrottle.wait
    from config.wsgi import application

    return application


def setup(url: str, tools: int, fleet: int) -> tuple[str, list[str]]:
    """The bench database, its project and the fleet's tokens; returns (slug, tokens)."""
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = url
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))  # the server process inherits it
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connections
    from django.utils import timezone

    from dashboard import tokens
    from dashboard.feed.snapshot import baseline_window, feed_window, tool_health_refresh
    from dashboard.models import Alert, ToolRollup, ToolRollupTotal
    from ingest.models import Membership, Project

    call_command("migrate", interactive=False, verbosity=0)
    project = Project.objects.create(name="Feed bench", slug="feed-bench")
    User = get_user_model()  # noqa: N806
    users = User.objects.bulk_create([User(username=f"agent{n:04d}", password="!") for n in range(fleet)])
    Membership.objects.bulk_create([Membership(project=project, user=user, role=Membership.Role.MEMBER) for user in users])
    plain = [tokens.api_token_create(user=user, name="bench", scopes=["read"])[1] for user in users]
    now = timezone.now()
    start, end = feed_window(now)
    base_start, base_end = baseline_window(now)
    rows = []
    for n in range(tools):
        tool = f"tool_{n:02d}"
        for k in range(3):
            rows.append(ToolRollupTotal(project=project, resolution=ToolRollup.Resolution.FIVE_MINUTES,
                                        bucket_start=start + dt.timedelta(minutes=5 * k), tool=tool, calls=100,
                                        errors=n % 7, err_transient=n % 7, retries=n % 11))  # fmt: skip
        hour = base_start
        while hour < base_end:
            rows.append(ToolRollupTotal(project=project, resolution=ToolRollup.Resolution.HOUR, bucket_start=hour,
                                        tool=tool, calls=1200, errors=12, err_transient=12, retries=60))  # fmt: skip
            hour += dt.timedelta(hours=1)
    ToolRollupTotal.objects.bulk_create(rows, batch_size=5000)
    Alert.objects.create(project=project, tool="tool_03", kind="retry_rise_flat_error", opened_at=now, last_seen_at=now,
                         summary="retries up 2.1x while errors stay flat")  # fmt: skip
    tool_health_refresh(project_id=project.pk, now=now)
    connections.close_all()
    return project.slug, plain


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(url: str, app: str, server_kind: str, worker: str, threads: int, cache_url: str) -> tuple[subprocess.Popen, int]:
    port = 0
    env = {**os.environ, "DATABASE_URL": url, "DEBUG": "0", "TOOLWATCH_THROTTLE_AGENT": RATE,
           "TOOLWATCH_CACHE_URL": cache_url}  # fmt: skip
    if server_kind == "granian":
        port = free_port()
        factory = ["--factory"] if app.endswith("()") else []  # `prev`: gunicorn's call syntax, granian's flag
        command = [sys.executable, "-m", "granian", "--interface", "wsgi", "--workers", "1",
                   "--blocking-threads", str(threads), "--host", "127.0.0.1", "--port", str(port),
                   "--no-ws", *factory, app.removesuffix("()")]  # fmt: skip
        # granian's workers listen only once they have imported the app.
        listening = re.compile(r"Started worker-1()")
    else:
        command = [sys.executable, "-m", "gunicorn", app, "-w", "1", "-k", worker, "--threads", str(threads),
                   "-b", "127.0.0.1:0", "--keep-alive", "30", "--log-level", "info"]  # fmt: skip
        listening = re.compile(r"Listening at: http://127\.0\.0\.1:(\d+)")
    server = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.STDOUT if server_kind == "granian" else subprocess.PIPE,
                              stdout=subprocess.PIPE if server_kind == "granian" else None, text=True)  # fmt: skip
    stream = server.stdout if server_kind == "granian" else server.stderr
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = stream.readline()
        found = listening.search(line)
        if found:
            # Keep reading its log so that the pipe never fills and blocks the server.
            threading.Thread(target=_drain, args=(stream,), daemon=True).start()
            return server, int(found.group(1) or port)
        if server.poll() is not None:
            break
    server.kill()
    raise SystemExit("the server did not start")


def _drain(stream) -> None:
    for line in stream:
        if "Traceback" in line or "ERROR" in line:
            print("server:", line.rstrip(), file=sys.stderr)


def get(port: int, path: str, headers: dict) -> tuple[int, bytes, str | None]:
    # The first request waits for the worker to import Django, which a loaded machine makes slow.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, body, response.getheader("ETag")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children's threads so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker_pid(arbiter: int) -> int:
    """gunicorn's one worker: the arbiter's child (it forks it after binding)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{arbiter}/task/{arbiter}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)
    raise SystemExit("gunicorn started no worker")


def redis_pid(cache_url: str) -> int | None:
    """The Redis server's process id, when it runs on this machine (its CPU per poll is the bench's too)."""
    if not cache_url.startswith("redis://127.0.0.1"):
        return None
    import redis

    return int(redis.Redis.from_url(cache_url).info("server")["process_id"])


def wrk_load(port: int, path: str, token_file: str, etag: str, connections: int, seconds: float) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT)
    env = {**os.environ, "FEED_PATH": path, "FEED_ETAG": etag, "FEED_TOKENS": token_file}
    try:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "-s", script.name,
             f"http://127.0.0.1:{port}{path}"],
            env=env, capture_output=True, text=True, timeout=seconds + 60, check=True,
        ).stdout  # fmt: skip
    finally:
        os.unlink(script.name)
    figures = dict(re.findall(r"(\w+)=(\d+)", out.split("WRK ", 1)[1]))
    n, duration = int(figures["requests"]), int(figures["duration_us"]) / 1e6
    return {"rps": n / duration, "p50_ms": int(figures["p50_us"]) / 1000, "p99_ms": int(figures["p99_us"]) / 1000,
            "max_ms": int(figures["max_us"]) / 1000, "errors": int(figures["status_errors"]) + int(figures["socket_errors"])}  # fmt: skip


def client(port: int, path: str, tokens: list[str], etag: str, seconds: float, out) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    latencies, errors, n = [], 0, secrets.randbelow(len(tokens))
    stop = time.monotonic() + seconds
    while (began := time.perf_counter()) and time.monotonic() < stop:
        n = (n + 1) % len(tokens)
        headers = {"Authorization": f"Bearer {tokens[n]}", "Accept": "application/json"}
        if etag:
            headers["If-None-Match"] = etag
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        latencies.append(time.perf_counter() - began)
        errors += response.status >= 400
    conn.close()
    out.put((latencies, errors))


def python_load(port: int, path: str, tokens: list[str], etag: str, connections: int, seconds: float) -> dict:
    out = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=client, args=(port, path, tokens, etag, seconds, out))
               for _ in range(connections)]  # fmt: skip
    began = time.perf_counter()
    for worker in workers:
        worker.start()
    results = [out.get() for _ in workers]
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - began
    latencies = sorted(x for lat, _ in results for x in lat)
    q = statistics.quantiles(latencies, n=100)
    return {"rps": len(latencies) / elapsed, "p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000,
            "max_ms": latencies[-1] * 1000, "errors": sum(e for _, e in results)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/toolwatch_feed_bench")
    parser.add_argument("--tools", type=int, default=50)
    parser.add_argument("--tokens", type=int, default=300, help="agents polling, each its own user and token")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--worker-class", choices=("gthread", "sync"), default="gthread",
                        help="gunicorn's: gthread keeps connections alive; sync (compose's) answers one per connection")
    parser.add_argument("--server", choices=("gunicorn", "granian"), default="gunicorn",
                        help="gunicorn (the OTLP/HTTP service's) or granian (the web service's: docs/deploy.md)")
    parser.add_argument("--threads", type=int, default=4, help="gunicorn gthread's threads, granian's blocking threads")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0,
                        help="seconds of polls before measuring (more on a loaded machine: every token is looked up)")
    parser.add_argument("--rounds", type=int, default=1, help="old and new paths alternated this many times")
    parser.add_argument("--paths", default="old,prev,new,bare",
                        help="prev: the new path with the throttles as before SharedLog; bare: a WSGI callable "
                        "doing nothing, the server's ceiling")
    parser.add_argument("--cache-url", default="", help="TOOLWATCH_CACHE_URL of the server (default: its memory)")
    parser.add_argument("--load-generator", choices=("wrk", "python"), default="wrk" if shutil.which("wrk") else "python")
    args = parser.parse_args()

    print(f"load average at start: {os.getloadavg()}", flush=True)
    slug, tokens = setup(args.database_url, args.tools, args.tokens)
    path = f"/api/v1/projects/{slug}/tool-health/"
    with tempfile.NamedTemporaryFile("w", suffix=".tokens", delete=False) as token_file:
        token_file.write("\n".join(tokens) + "\n")

    def load(port: int, etag: str, seconds: float) -> dict:
        if args.load_generator == "wrk":
            return wrk_load(port, path, token_file.name, etag, args.connections, seconds)
        return python_load(port, path, tokens, etag, args.connections, seconds)

    figures: dict[tuple[str, str], list[dict]] = {}
    cache_pid = redis_pid(args.cache_url)
    try:
        for _ in range(args.rounds):
            for name in args.paths.split(","):
                server, port = serve(args.database_url, APPS[name], args.server, args.worker_class, args.threads, args.cache_url)
                try:
                    status, body, etag = get(port, path, {"Authorization": f"Bearer {tokens[0]}"})
                    assert (status == 304) if name == "bare" else (status == 200 and etag), (status, body[:300])
                    unchanged = get(port, path, {"Authorization": f"Bearer {tokens[1]}", "If-None-Match": etag})[0]
                    assert unchanged == 304, unchanged
                    load(port, etag, args.warmup)  # every token's lookup, last-use write and access-log row
                    worker = worker_pid(server.pid)
                    for mode, sent in (("304", etag), ("200", "")) if name != "bare" else (("304", etag),):
                        loadavg = os.getloadavg()
                        cpu, cache_cpu = cpu_seconds(worker), cpu_seconds(cache_pid) if cache_pid else 0.0
                        result = load(port, sent, args.seconds)
                        served = result["rps"] * args.seconds
                        # CPU per request: what load on the machine changes least (requests/s falls with it).
                        result["cpu_us"] = (cpu_seconds(worker) - cpu) / served * 1e6
                        result["redis_us"] = ((cpu_seconds(cache_pid) - cache_cpu) / served * 1e6) if cache_pid else 0.0
                        result["bytes"], result["load"] = (0 if sent else len(body)), loadavg
                        figures.setdefault((name, mode), []).append(result)
                        print(f"{name} path {mode}: {result['rps']:7.0f} requests/s  p50 {result['p50_ms']:6.2f} ms  "
                              f"p99 {result['p99_ms']:6.2f} ms  max {result['max_ms']:7.1f} ms  errors {result['errors']}  "
                              f"body {result['bytes']} bytes  worker CPU {result['cpu_us']:4.0f} us/request  "
                              f"redis CPU {result['redis_us']:3.0f} us/request  "
                              f"load {loadavg[0]:.2f} {loadavg[1]:.2f} {loadavg[2]:.2f}",
                              flush=True)  # fmt: skip
                finally:
                    server.terminate()
                    server.wait(timeout=10)
    finally:
        os.unlink(token_file.name)

    cache = args.cache_url or "the worker's memory"
    if args.server == "granian":
        worker = f"WSGI, {args.threads} blocking threads, keep-alive"
    elif args.worker_class == "gthread":
        worker = f"gthread, {args.threads} threads, keep-alive"
    else:
        worker = "sync (a connection a request)"
    print(f"server: {args.server}, 1 worker process, {worker}; load: {args.load_generator}, "
          f"{args.connections} connections, {args.tokens} tokens in turn; {args.tools} tools; throttle counts in {cache}; "
          f"{os.cpu_count()} cores shared with the load generator")  # fmt: skip
    print(f"load average at end: {os.getloadavg()}")
    best = {key: max(runs, key=lambda r: r["rps"]) for key, runs in figures.items()}
    print(" ".join(f"{name}_{mode}_rps={best[name, mode]['rps']:.0f} {name}_{mode}_p99_ms={best[name, mode]['p99_ms']:.2f}"
                   for name, mode in sorted(best)))  # fmt: skip
    # The median round's CPU per request, and the requests/s it allows one worker with a core of its own.
    cpu = {key: statistics.median(r["cpu_us"] + r["redis_us"] for r in runs) for key, runs in figures.items()}
    print(" ".join(f"{name}_{mode}_cpu_us={cpu[name, mode]:.0f} {name}_{mode}_per_core_rps={1e6 / cpu[name, mode]:.0f}"
                   for name, mode in sorted(cpu)))  # fmt: skip


if __name__ == "__main__":
    main()
