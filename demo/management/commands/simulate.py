"""python manage.py simulate: send realistic agent traffic to Toolwatch (docs/demo-traffic.md)."""

from __future__ import annotations

import datetime as dt
import json
import signal
import threading
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from demo.simulate import (
    DRIFT_KINDS,
    DriftSpec,
    IngestExporter,
    SimulationError,
    Simulator,
    backfill,
    http_exporter,
    live,
)
from ingest.models import Project


def history_start(now: dt.datetime, days: float, retention_days: int | None) -> dt.datetime:
    """`days` before `now`, but never past the project's retention (those spans would be refused)."""
    start = now - dt.timedelta(days=days)
    if retention_days is not None:
        start = max(start, now - dt.timedelta(days=retention_days) + dt.timedelta(hours=1))
    return start


class Command(BaseCommand):
    help = (
        "Send realistic agent traces (invoke_agent -> chat -> execute_tool, about 20 tools that fail "
        "in their own ways) through the official OpenTelemetry SDK: --days N of history, and/or a --live "
        "trickle until stopped. To a server (--url and --key or --key-file) or into a project in process (--project)."
    )

    def add_arguments(self, parser):
        target = parser.add_argument_group("target (one of)")
        target.add_argument("--url", help="Toolwatch base URL, e.g. http://127.0.0.1:8000 (the exporter adds /v1/traces)")
        target.add_argument("--key", help="the project's API key (tw_...)")
        target.add_argument("--key-file", help="read the API key from this file instead of the command line")
        target.add_argument("--project", help="slug of a project to ingest into directly, without a server")
        parser.add_argument(
            "--days", type=float, default=0, help="backfill this many days ending now (at most the project's retention)"
        )
        parser.add_argument("--live", action="store_true", help="then keep sending at the current time until stopped")
        parser.add_argument("--interval", type=float, default=5.0, help="seconds between live sends (default 5)")
        parser.add_argument("--rate", type=float, default=150.0, help="tool calls per hour in all (default 150)")
        parser.add_argument("--seed", type=int, default=7, help="same seed, same traffic (default 7)")
        parser.add_argument(
            "--drift", action="append", default=[], metavar="TOOL:KIND[:START_HOURS_AGO]",
            help=f"inject drift into a tool from that many hours ago (default 24); kinds: {', '.join(DRIFT_KINDS)}",
        )  # fmt: skip
        parser.add_argument("--tools", help="only these tools, comma-separated")
        parser.add_argument(
            "--dense-days", type=float, default=7.0, help="the last N days run at the full rate, older ones at 30%% (default 7)"
        )
        parser.add_argument("--batch-spans", type=int, default=5000, help="spans per backfill request (default 5000)")
        parser.add_argument("--truth", action="store_true", help="print the ground truth per tool as JSON at the end")

    def handle(self, *args, **options):
        now = timezone.now()
        exporter, retention_days = self._exporter(options)
        try:
            drifts = tuple(DriftSpec.parse(text, now=now) for text in options["drift"])
            tools = frozenset(t.strip() for t in options["tools"].split(",") if t.strip()) if options["tools"] else None
            sim = Simulator(
                seed=options["seed"], rate=options["rate"], drifts=drifts, tools=tools,
                dense_since=now - dt.timedelta(days=options["dense_days"]),
            )  # fmt: skip
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if not options["days"] and not options["live"]:
            raise CommandError("nothing to do: give --days N (history), --live (a trickle), or both")
        try:
            if options["days"]:
                start = history_start(now, options["days"], retention_days)
                stats = backfill(sim, exporter, start=start, end=now, batch_spans=options["batch_spans"])
                self.stdout.write(
                    f"Sent {stats.spans} spans in {stats.requests} requests: {stats.sessions} traces, "
                    f"{stats.tool_calls} tool calls from {start:%Y-%m-%d %H:%M} to {now:%Y-%m-%d %H:%M} UTC."
                )
            if options["live"]:
                self._live(sim, exporter, options, since=now)
        except SimulationError as exc:
            raise CommandError(str(exc)) from None
        finally:
            sim.shutdown()
        if options["truth"]:
            truth = {tool: counts.as_dict() for tool, counts in sim.truth.by("tool").items()}
            self.stdout.write(json.dumps(truth, sort_keys=True))

    def _exporter(self, options):
        if options["project"]:
            if options["url"] or options["key"] or options["key_file"]:
                raise CommandError("give either --project (in process) or --url with --key/--key-file, not both")
            project = Project.objects.filter(slug=options["project"]).first()
            if project is None:
                raise CommandError(f"no project with slug {options['project']!r}; create one with createproject")
            return IngestExporter(project), project.retention_days
        if not options["url"]:
            raise CommandError("give a target: --url URL with --key KEY (or --key-file PATH), or --project SLUG")
        key = options["key"]
        if options["key_file"]:
            path = Path(options["key_file"])
            if not path.is_file():
                raise CommandError(f"--key-file {path}: no such file")
            key = path.read_text().strip()
        if not key:
            raise CommandError("--url needs the project's API key: --key tw_... or --key-file PATH")
        # A remote project's retention is unknown here: assume the default, or older spans are refused.
        from django.conf import settings

        return http_exporter(options["url"], key), settings.DEFAULT_RETENTION_DAYS

    def _live(self, sim, exporter, options, *, since):
        stop = threading.Event()
        previous = signal.getsignal(signal.SIGTERM)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
        self.stdout.write(f"Sending live traffic every {options['interval']:g} s (Ctrl-C stops).")
        self.stdout.flush()
        try:
            stats = live(
                sim, exporter, since=since, interval=options["interval"], stop=stop,
                on_error=lambda exc: self.stderr.write(f"live send failed, will retry: {exc}"),
            )  # fmt: skip
        except KeyboardInterrupt:
            stats = None
        finally:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, previous)
        if stats is not None:
            self.stdout.write(f"Live: sent {stats.spans} spans, {stats.tool_calls} tool calls.")
