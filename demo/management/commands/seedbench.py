"""python manage.py seedbench: reproduce seed 0's benchmark through real OTLP ingest (docs/contract/seed-benchmark.md)."""

from __future__ import annotations

import datetime as dt
import json
import threading
from contextlib import contextmanager

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from dashboard.rollups.refresh import rollups_recompute
from dashboard.selectors.tools import COUNT_FIELDS, metric_series, tools_table
from demo import seedbench as sb
from demo.simulate import IngestExporter, SimulationError, http_exporter
from demo.simulate.generator import to_ns
from demo.simulate.truth import COUNTS
from ingest.models import ApiKey, Project, Span, ToolCall, hash_api_key
from ingest.services import api_key_create

PROJECT_SLUG = "seedbench"
HOUR = dt.timedelta(hours=1)
BATCH_SPANS = 5_000
# The counts compared with the ground truth, exactly (err_* are the outcome classes).
EXACT = tuple(name for name in COUNT_FIELDS if name in COUNTS or name.startswith("err_"))


class Command(BaseCommand):
    help = (
        "Replay seed 0's three error-contract strategies as OTLP traffic (one service each), run the "
        "rollups, and print Toolwatch's figures beside the ground truth and the seed's table. The last "
        "line is JSON. Exit 1 if Toolwatch differs from the ground truth, 2 if the seed's table is not "
        "reproduced within sampling error."
    )

    def add_arguments(self, parser):
        parser.add_argument("--runs", type=int, default=sb.RUNS, help=f"runs per strategy (default {sb.RUNS})")
        parser.add_argument("--ops", type=int, default=sb.OPERATIONS, help=f"operations per run (default {sb.OPERATIONS})")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--url", help="a running Toolwatch on this same database (default: waitress on a loopback port)")
        parser.add_argument("--key", help="with --url: the API key of an otherwise unused project")
        parser.add_argument("--in-process", action="store_true", help="skip HTTP: hand the encoded requests to ingest directly")

    def handle(self, *args, runs: int, ops: int, seed: int, url: str | None, key: str | None, in_process: bool, **options):
        if runs < 1 or ops < 1:
            raise CommandError("--runs and --ops must be at least 1")
        if bool(url) != bool(key):
            raise CommandError("--url and --key go together")
        now = timezone.now()
        end = now.replace(minute=0, second=0, microsecond=0)
        start = end - 2 * HOUR
        project, key = self._project(key)
        operations = sb.operations(seed=seed, runs=runs, per_run=ops)
        traffic = {
            strategy: sb.build_traffic(
                strategy, operations, seed=seed, start_ns=to_ns(start), run_spacing_ns=(to_ns(end) - to_ns(start)) // runs
            )
            for strategy in sb.STRATEGIES
        }  # fmt: skip
        with self._target(project, key, url, in_process, now) as (exporter, where):
            self.stdout.write(
                f"Seed benchmark: {runs} runs x {ops} operations per strategy, seed {seed}, sent {where}."
            )
            try:
                for strategy in sb.STRATEGIES:
                    _send(exporter, traffic[strategy].spans)
            except SimulationError as exc:
                raise CommandError(str(exc)) from None
        rollups_recompute(project_id=project.pk, start=start, end=end + HOUR)
        self._report(project, traffic, start, end + HOUR, runs * ops)

    def _project(self, key: str | None) -> tuple[Project, str]:
        if key:
            stored = ApiKey.objects.select_related("project").filter(hashed_key=hash_api_key(key)).first()
            if stored is None:
                raise CommandError("--key is not a key of a project in this database (seedbench reads its figures here)")
            return stored.project, key
        with transaction.atomic():
            old = Project.objects.filter(slug=PROJECT_SLUG).first()
            if old is not None:  # replaced on each run, so figures never mix runs
                Span.objects.filter(project=old).delete()
                ToolCall.objects.filter(project=old).delete()
                old.delete()
            project = Project.objects.create(slug=PROJECT_SLUG, name="Seed benchmark")
            _, plain = api_key_create(project=project, name="seedbench")
        return project, plain

    @contextmanager
    def _target(self, project, key, url, in_process, now):
        if in_process:
            yield IngestExporter(project, now=now), "in process (the official encoder's protobuf, no HTTP)"
            return
        if url:
            yield http_exporter(url, key), f"over OTLP/HTTP to {url}"
            return
        from waitress.server import create_server

        from config.wsgi import application

        server = create_server(application, host="127.0.0.1", port=0, threads=4, clear_untrusted_proxy_headers=True)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        base = f"http://127.0.0.1:{server.effective_port}"
        exporter = http_exporter(base, key)
        try:
            yield exporter, f"over OTLP/HTTP to {base} (waitress, this process)"
        finally:
            exporter.shutdown()  # closes its keep-alive connection
            server.del_channel()  # the loop ends once it serves nothing; closing under it breaks select()
            # Its wake-up pipe counts as something served: close it from the loop's own thread, or
            # the loop runs on and the join waits out its whole timeout.
            try:
                server.trigger.pull_trigger(server.trigger.close)
            except OSError:  # the loop ended first and closed its pipe: nothing left to wake
                pass
            thread.join(timeout=5)
            server.close()

    def _report(self, project, traffic, start, end, n: int) -> None:
        ours_all, truth_all = {}, {}
        truth_failures = seed_failures = 0
        header = f"{'strategy':<20} {'figure':<18} {'toolwatch':>10} {'truth':>10} {'seed':>8} {'tolerance':>10}  truth  seed"
        self.stdout.write(header)
        for strategy in sb.STRATEGIES:
            service = sb.SERVICES[strategy]
            ours = _toolwatch_counts(project, start, end, service)
            truth = traffic[strategy].truth.as_dict()
            ours_all[strategy], truth_all[strategy] = ours, truth
            mismatched = [name for name in EXACT if ours[name] != truth[name]]
            if mismatched:
                truth_failures += 1
                details = ", ".join(f"{name} {ours[name]} != {truth[name]}" for name in mismatched)
                self.stdout.write(f"{sb.LABELS[strategy]}: Toolwatch differs from the ground truth: {details}")
            our_figures, true_figures = sb.figures(ours), sb.figures(truth)
            for figure in sb.FIGURES:
                value = our_figures[figure]
                exact = value == true_figures[figure] and not mismatched
                within, scaled, tol = sb.seed_check(strategy, figure, value, n)
                seed_failures += not within
                self.stdout.write(
                    f"{sb.LABELS[strategy]:<20} {figure:<18} {_fmt(value):>10} {_fmt(true_figures[figure]):>10} "
                    f"{_fmt(sb.SEED_TABLE[strategy][figure]):>8} {'±' + _fmt(tol):>10}  "
                    f"{'PASS' if exact else 'FAIL':<5}  {'PASS' if within else 'FAIL'}"
                )
        self.stdout.write(
            f"Tolerance: {sb.SIGMAS:g} standard deviations of the difference between two independent draws of the "
            f"scenario (binomial, ours at {n} operations, the seed's at {sb.SEED_OPERATIONS}); counts are compared "
            f"per {sb.SEED_OPERATIONS} operations."
        )
        result = {
            strategy: {
                "service": sb.SERVICES[strategy],
                "toolwatch": {**sb.figures(ours_all[strategy]), **ours_all[strategy]},
                "ground_truth": {**sb.figures(truth_all[strategy]), **truth_all[strategy]},
            }
            for strategy in sb.STRATEGIES
        }
        self.stdout.write(json.dumps(result, sort_keys=True))
        if truth_failures:
            raise SystemExit(1)
        if seed_failures:
            raise SystemExit(2)


def _send(exporter, spans: list) -> None:
    """Requests of about BATCH_SPANS spans; a trace may straddle two, as exporters send them."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    for index in range(0, len(spans), BATCH_SPANS):
        if exporter.export(spans[index : index + BATCH_SPANS]) != SpanExportResult.SUCCESS:
            raise SimulationError("the exporter failed to send a batch (see the server's log)")


def _toolwatch_counts(project, start, end, service: str) -> dict[str, int]:
    """Toolwatch's own counts for a service, from the rollups (the tools table), checked against the series."""
    rows = tools_table(project, start=start, end=end, service=service)
    counts = {name: sum(row[name] for row in rows) for name in EXACT}
    series = metric_series(project, start=start, end=end, step=3600, service=service)
    for name in EXACT:
        if sum(point[name] for point in series) != counts[name]:
            raise CommandError(f"rollups disagree with themselves on {name} for {service}: tools table vs series")
    return counts


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)
