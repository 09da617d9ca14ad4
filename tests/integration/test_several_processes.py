"""Two web processes, two Celery workers and one beat against one PostgreSQL (issue 14 item
10) give the rollups and alerts that one process doing each job in turn gives, and deliver
each notice once.

The workload is deterministic OTLP/HTTP: a day of a tool's calls at a low error rate, then two
hours at a high one (an error_rate_spike under the project's thresholds, scaled down from the
defaults so that a few hundred calls suffice), beside a quiet tool. It is sent in many small
requests to both web processes at once, a share of them twice (an exporter's retry, to the
other process). The beat runs the production tasks on a schedule in seconds
(tests/integration/fast_beat.py): rollups every second while the spans arrive, drift
evaluations every two seconds, so the two workers run the same jobs side by side. A webhook
receiver on loopback counts what it gets. The reference is the same spans sent in process
to a second project, rolled up and evaluated once.
"""

from __future__ import annotations

import datetime as dt
import random
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from dashboard.alerting.evaluation import drift_evaluate
from dashboard.alerting.tasks import send_due_deliveries
from dashboard.models import Alert, AlertChannel, Delivery
from dashboard.rollups.refresh import rollups_refresh
from dashboard.tasks import evaluate_drift, refresh_rollups
from ingest.models import ChangedBucket, ToolCall
from ingest.services import api_key_create, spans_ingest
from tests.dashboard.rollups.test_rollups import rollup_rows
from tests.factories import make_project
from tests.integration.conftest import free_port, send, wait_for

THRESHOLDS = {"*": {
    "baseline_hours": 24, "recent_hours": [2], "silence_hours": 2, "resolve_hours": 2,
    "min_recent_calls": 30, "min_baseline_calls": 200, "min_baseline_hours": 12, "min_recent_events": 5,
}}  # fmt: skip
TRACES_PER_REQUEST = 12
WAVES = 8


def workload(now: dt.datetime) -> list[ExportTraceServiceRequest]:
    """The spans, in requests of TRACES_PER_REQUEST traces (an agent span and its tool calls)."""
    rng = random.Random(14)
    traces = []
    for hour in range(26, 0, -1):
        recent = hour <= 2
        for n in range(30 if recent else 15):
            start = now - dt.timedelta(hours=hour) + dt.timedelta(seconds=(n + rng.random()) * 3600 / (30 if recent else 15))
            if start > now - dt.timedelta(minutes=6):
                continue  # the filling bucket is left out of the windows anyway
            failed = rng.random() < (0.5 if recent else 0.03)
            traces.append((start, [("search_kb", failed), ("get_order", False)]))
    requests = []
    for first in range(0, len(traces), TRACES_PER_REQUEST):
        request = ExportTraceServiceRequest()
        spans = request.resource_spans.add()
        spans.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="support-agent")))
        scope = spans.scope_spans.add()
        for number, (start, tools) in enumerate(traces[first : first + TRACES_PER_REQUEST], start=first):
            trace_id = number.to_bytes(16, "big")
            start_ns = int(start.timestamp() * 1e9)
            agent = scope.spans.add(trace_id=trace_id, span_id=(number * 16 + 1).to_bytes(8, "big"), name="invoke_agent support",
                                    start_time_unix_nano=start_ns, end_time_unix_nano=start_ns + 3 * 10**9)  # fmt: skip
            agent.attributes.extend(_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}))
            for k, (tool, failed) in enumerate(tools):
                tool_ns = start_ns + (k + 1) * 10**8
                span = scope.spans.add(trace_id=trace_id, span_id=(number * 16 + 2 + k).to_bytes(8, "big"),
                                       parent_span_id=agent.span_id, name=f"execute_tool {tool}",
                                       start_time_unix_nano=tool_ns, end_time_unix_nano=tool_ns + 5 * 10**7)  # fmt: skip
                span.attributes.extend(_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}))
                if failed:
                    span.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message="upstream timed out"))
        requests.append(request)
    return requests


def _attributes(mapping: dict) -> list[KeyValue]:
    return [KeyValue(key=key, value=AnyValue(string_value=value)) for key, value in mapping.items()]


class Receiver(ThreadingHTTPServer):
    """A webhook receiver on loopback: every request's X-Toolwatch-Delivery and -Event."""

    daemon_threads = True

    def __init__(self):
        self.got: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}/hook"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:
            self.server.got.append((self.headers["X-Toolwatch-Delivery"], self.headers["X-Toolwatch-Event"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def post(url: str, key: str, body: bytes) -> int:
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status


def alerts_of(project) -> list[tuple]:
    return list(Alert.objects.filter(project=project).order_by("tool", "kind").values_list("tool", "kind", "status"))


def notices_of(project) -> list[tuple]:
    """(tool, kind, event) of every delivery of the project's alerts."""
    rows = Delivery.objects.filter(alert__project=project).order_by("alert__tool", "alert__kind", "event")
    return list(rows.values_list("alert__tool", "alert__kind", "event"))


def test_two_web_processes_two_workers_and_a_beat_give_one_processs_rollups_and_alerts_and_each_notice_once(
    processes, receiver
):
    started = time.monotonic()
    now = dt.datetime.now(dt.UTC)
    requests = [request.SerializeToString() for request in workload(now)]
    project = make_project(drift_thresholds=THRESHOLDS)
    _, key = api_key_create(project=project)
    AlertChannel.objects.create(project=project, kind="webhook", name="hook", target=receiver.url)
    env = {"TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS": "1", "TOOLWATCH_ROLLUP_LATE_EVERY_MINUTES": "1"}
    ports = [free_port(), free_port()]
    for n, port in enumerate(ports):
        processes.start(f"web{n}", "-m", "waitress", f"--listen=127.0.0.1:{port}", "--threads=4", "config.wsgi:application",
                        env=env)  # fmt: skip
    workers = [processes.worker(f"worker{n}", pool="prefork", concurrency=1, env=env) for n in range(2)]
    processes.start("beat", "-m", "celery", "-A", "tests.integration.fast_beat", "beat", "--loglevel=INFO",
                    "--schedule", str(processes.log_dir / "beat-schedule"), "--max-interval=1", env=env)  # fmt: skip
    processes.wait_ready(*workers)
    for port in ports:
        wait_for(lambda port=port: _answers(f"http://127.0.0.1:{port}/healthz"), timeout=30, what=f"web on {port}")

    # Every request to one process or the other, a third of them again to the other (a retry),
    # in waves a beat or so apart: the rollups run while the spans arrive.
    sends = [(ports[n % 2], body) for n, body in enumerate(requests)]
    sends += [(ports[(n + 1) % 2], body) for n, body in enumerate(requests) if n % 3 == 0]
    random.Random(10).shuffle(sends)
    answers = []
    with ThreadPoolExecutor(max_workers=8) as pool:
        for wave in range(WAVES):
            answers += pool.map(lambda item: post(f"http://127.0.0.1:{item[0]}/v1/traces", key, item[1]), sends[wave::WAVES])
            time.sleep(0.7)
    assert set(answers) == {200}
    # Beat's tasks twice at once besides (two beats by mistake, a requeued task): both workers run each.
    for task in (refresh_rollups, evaluate_drift, send_due_deliveries):
        send(task)
        send(task)

    def settled() -> bool:
        # Rolled up, evaluated, and every delivery sent.
        return (
            not ChangedBucket.objects.filter(project=project).exists()
            and Alert.objects.filter(project=project).exists()
            and not Delivery.objects.filter(alert__project=project).exclude(status=Delivery.Status.SENT).exists()
        )

    wait_for(settled, timeout=40, interval=0.2, what="rollups, alerts and deliveries")
    time.sleep(3)  # a few more beats: rollups, evaluations and sweeps, with nothing left to do
    assert settled()
    processes.stop_all()
    took = time.monotonic() - started

    # The reference: the same spans in process, each job once.
    alone = make_project(drift_thresholds=THRESHOLDS)
    AlertChannel.objects.create(project=alone, kind="webhook", name="hook", target=receiver.url)
    for body in requests:
        spans_ingest(project=alone, request=ExportTraceServiceRequest.FromString(body), limits=settings.INGEST_LIMITS)
    rollups_refresh(project_id=alone.pk, everything=True)
    drift_evaluate(project_id=alone.pk, now=dt.datetime.now(dt.UTC))

    assert ToolCall.objects.filter(project=project).count() == ToolCall.objects.filter(project=alone).count() > 0
    assert rollup_rows(project) == rollup_rows(alone)
    assert alerts_of(project) == alerts_of(alone) == [("search_kb", "error_rate_spike", "open")]
    assert notices_of(project) == notices_of(alone) == [("search_kb", "error_rate_spike", "opened")]
    # Each notice delivered once: one request per delivery, none repeated.
    sent = {str(pk): event for pk, event in Delivery.objects.filter(alert__project=project).values_list("pk", "event")}
    assert sorted(receiver.got) == sorted(sent.items())
    assert took < 60, f"the processes' part took {took:.0f} s"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False
