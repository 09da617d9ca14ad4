"""python manage.py grpcserver [--host 0.0.0.0] [--port 4317] [--workers N] [--threads T] [--grace S]

Serves OTLP/gRPC (ingest/grpc_edge.py) until SIGTERM or SIGINT, then stops gracefully:
no new RPCs, and those in flight get --grace seconds to finish (a write cut short is rolled
back; the exporter, seeing no answer, resends and the resend is deduplicated).

A gRPC server is one Python process, whose RPCs share one interpreter lock: it ingests on
about one core. With --workers N > 1 the server's threads only receive and answer, and each
request is handled by one of N worker processes (grpc_edge.WorkerPool), so requests, not
connections, spread over the cores, however few exporters (or Collectors) are connected.
--threads is the number of RPCs received at once (default: 8, or 2 per worker if more);
the rest wait in gRPC's queue.
"""

from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ingest import grpc_edge


class Command(BaseCommand):
    help = "Serve OTLP/gRPC (TraceService, LogsService, MetricsService) on --host:--port until SIGTERM/SIGINT."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
        parser.add_argument(
            "--port", type=int, default=None,
            help="port (default settings.OTLP_GRPC_PORT: $TOOLWATCH_OTLP_GRPC_PORT, else 4317; 0 = any free port)",
        )  # fmt: skip
        parser.add_argument(
            "--workers", type=int, default=1,
            help="worker processes handling the requests (default 1: handled in the server process itself)",
        )  # fmt: skip
        parser.add_argument("--threads", type=int, default=None, help="RPCs received at once (default max(8, 2 × workers))")
        parser.add_argument("--grace", type=float, default=10.0, help="seconds in-flight RPCs get to finish on stop (default 10)")

    def handle(self, *args, host: str, port: int | None, workers: int, threads: int | None, grace: float, **options):
        port = settings.OTLP_GRPC_PORT if port is None else port
        threads = threads if threads is not None else max(grpc_edge.DEFAULT_THREADS, 2 * workers)
        if workers < 1 or threads < 1:
            raise CommandError("--workers and --threads must be at least 1")
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        pool = grpc_edge.WorkerPool(workers) if workers > 1 else None
        try:
            if pool is not None:
                pool.start()  # before the server exists: no worker is forked from gRPC's threads
            server = grpc_edge.create_server(threads=threads, workers=pool)
            try:
                bound = grpc_edge.bind(server, host, port)
            except RuntimeError as exc:
                raise CommandError(f"cannot listen on {grpc_edge.address(host, port)}: {exc}") from None
            server.start()
            mode = f"{workers} worker processes" if pool is not None else "1 process"
            self.stdout.write(
                f"OTLP/gRPC receiver on {grpc_edge.address(host, bound)} ({mode}, {threads} threads; SIGTERM or Ctrl-C stops)"
            )
            self.stdout.flush()
            while not stop.wait(1):
                pass
            server.stop(grace).wait()
        finally:
            if pool is not None:
                pool.shutdown()
