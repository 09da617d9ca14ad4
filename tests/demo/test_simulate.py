"""The demo traffic generator: deterministic, classified as intended, counted exactly, drifting on demand."""

from __future__ import annotations

import datetime as dt
import itertools
import threading

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import CommandError, call_command
from django.db import connection
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from waitress.server import create_server

from dashboard.alerting.evaluation import drift_evaluate
from dashboard.models import Alert
from dashboard.rollups.refresh import rollups_refresh
from dashboard.selectors.tools import tools_table
from demo.simulate import DriftSpec, IngestExporter, Simulator, backfill, encoded_requests, http_exporter, live
from ingest import partitions
from ingest.models import Span, ToolCall
from tests.conftest import stop_waitress
from tests.factories import make_key, make_project

NOW = dt.datetime(2026, 8, 20, 12, 30, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def request_bytes(seed: int) -> bytes:
    sim = Simulator(seed=seed, rate=600)
    spans = [span for session in sim.sessions(NOW - HOUR, NOW, until=NOW) for span in session.spans]
    return encode_spans(spans).SerializeToString()


def test_the_same_seed_gives_byte_identical_spans_ids_included():
    first, second = request_bytes(3), request_bytes(3)

    assert first == second
    assert len(first) > 10_000
    assert request_bytes(4) != first


def test_sessions_are_agent_traces_with_chat_and_tool_spans():
    request = ExportTraceServiceRequest.FromString(request_bytes(3))
    names = [span.name for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
    services = {kv.value.string_value for rs in request.resource_spans for kv in rs.resource.attributes if kv.key == "service.name"}

    assert any(name.startswith("invoke_agent ") for name in names)
    assert any(name.startswith("chat ") for name in names)
    assert any(name.startswith("execute_tool ") for name in names)
    assert {"support-agent", "checkout-agent", "research-agent", "ops-copilot"} <= services


def test_a_drift_spec_names_what_is_wrong():
    assert DriftSpec.parse("search_kb:retry_rise_flat_error:36", now=NOW).start == NOW - 36 * HOUR
    with pytest.raises(ValueError, match="unknown kind 'slow'"):
        DriftSpec.parse("search_kb:slow", now=NOW)
    with pytest.raises(ValueError, match="start_hours_ago 'soon' is not a number"):
        DriftSpec.parse("search_kb:error_rate_spike:soon", now=NOW)
    with pytest.raises(ValueError, match="unknown tool 'nope'"):
        Simulator(drifts=(DriftSpec("nope", "error_rate_spike", NOW),))


def test_benchmark_requests_hold_exactly_512_spans_and_the_calls_asked_for():
    bodies = list(encoded_requests(400, now=NOW))
    requests = [ExportTraceServiceRequest.FromString(body) for body in bodies]
    counts = [sum(len(ss.spans) for rs in r.resource_spans for ss in rs.scope_spans) for r in requests]
    tool_spans = sum(
        1 for r in requests for rs in r.resource_spans for ss in rs.scope_spans for span in ss.spans
        if span.name.startswith(("execute_tool ", "tools/call ")) or span.name.endswith(".tool")
        or any(kv.key == "openinference.span.kind" and kv.value.string_value == "TOOL" for kv in span.attributes)
    )  # fmt: skip

    assert set(counts[:-1]) == {512} and 0 < counts[-1] <= 512
    assert tool_spans >= 400


@pytest.fixture
def loaded(db):
    """Four hours of the whole fleet, ingested in process, with a ledger of every failure."""
    project = make_project(escalation_tools=["handoff_to_human"])
    sim = Simulator(seed=11, rate=900, ledger=True)
    stats = backfill(sim, IngestExporter(project, now=NOW), start=NOW - 4 * HOUR, end=NOW)
    sim.shutdown()
    return project, sim, stats


def test_every_kind_of_evidence_is_classified_as_intended_by_the_real_classifier(loaded):
    project, sim, _ = loaded
    rows = {
        (row.trace_id, row.span_id): row
        for row in ToolCall.objects.filter(project=project, ok=False).only("trace_id", "span_id", "error_class", "classified_by")
    }

    wrong = [
        (entry.tool, entry.evidence, entry.error_class, rows[(entry.trace_id, entry.span_id)].error_class,
         entry.classified_by, rows[(entry.trace_id, entry.span_id)].classified_by)
        for entry in sim.truth.ledger
        if rows[(entry.trace_id, entry.span_id)].error_class != entry.error_class
        or not rows[(entry.trace_id, entry.span_id)].classified_by.startswith(entry.classified_by)
    ]  # fmt: skip
    assert wrong == []
    assert len(rows) == len(sim.truth.ledger)
    evidence = {entry.evidence for entry in sim.truth.ledger}
    assert evidence >= {
        "http_status", "grpc_status", "jsonrpc_code", "exception", "envelope_attributes", "result_envelope",
        "mcp_is_error", "agents_sdk_status", "jsonrpc_recoverable",
    }  # fmt: skip
    classes = {entry.error_class for entry in sim.truth.ledger}
    assert classes == {"transient", "validation", "permission", "not_found", "business", "user_input", "fatal", "unknown"}
    conventions = set(ToolCall.objects.filter(project=project).values_list("convention", flat=True))
    # MCP tool spans carry gen_ai.operation.name=execute_tool too, which is read first (docs/contract/spans.md#tool-span-recognition).
    assert conventions == {"genai", "openinference", "openllmetry"}
    assert Span.objects.filter(project=project, name__startswith="tools/call ").exists()
    assert ToolCall.objects.filter(project=project, soft_failure=True).exists()


def test_the_ground_truth_equals_the_rollups_tool_by_tool(loaded):
    project, sim, stats = loaded

    rollups_refresh(project_id=project.pk, now=NOW)

    table = {row["tool"]: row for row in tools_table(project, start=NOW - 6 * HOUR, end=NOW + HOUR)}
    truth = {tool: counts.as_dict() for tool, counts in sim.truth.by("tool").items()}
    assert set(table) == set(truth) and len(truth) >= 20
    for tool, counts in truth.items():
        assert {name: table[tool][name] for name in counts} == counts, tool
    total = sim.truth.total()
    assert total.retries > 0 and total.escalations > 0 and total.errors > 0
    assert Span.objects.filter(project=project).count() == stats.spans
    assert ToolCall.objects.filter(project=project).count() == total.attempts


@pytest.mark.parametrize(
    "tool, kind, rate",
    [
        ("search_kb", "retry_rise_flat_error", 40),
        ("lookup_order", "error_rate_spike", 30),
        ("create_ticket", "wasted_retries", 45),
        ("schedule_callback", "escalation_silence", 50),
    ],
)
def test_drift_injection_raises_the_intended_alert(db, tool, kind, rate):
    # Shorter windows and volumes than the defaults keep this small; the detectors are the real ones.
    thresholds = {
        "baseline_hours": 24, "min_baseline_calls": 200, "min_baseline_hours": 12, "min_recent_calls": 40,
        "min_recent_events": 5, "silence_min_expected": 5,
    }  # fmt: skip
    project = make_project(drift_thresholds={"*": thresholds})
    # The drift fills the detectors' 6-hour window and stays out of the baseline before it.
    sim = Simulator(seed=5, rate=rate, tools=frozenset({tool}), daily_cycle=0.0, drifts=(DriftSpec(tool, kind, NOW - 7 * HOUR),))
    backfill(sim, IngestExporter(project, now=NOW), start=NOW - 36 * HOUR, end=NOW)
    sim.shutdown()

    rollups_refresh(project_id=project.pk, now=NOW)
    drift_evaluate(project_id=project.pk, now=NOW)

    kinds = set(Alert.objects.filter(project=project, tool=tool, status__in=Alert.OPEN_STATUSES).values_list("kind", flat=True))
    assert kind in kinds


@pytest.fixture
def live_url(transactional_db):
    partitions.forget_cache()
    server = create_server(WSGIHandler(), host="127.0.0.1", port=0, threads=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.effective_port}"
    stop_waitress(server, thread)
    assert not thread.is_alive()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
    partitions.forget_cache()


def test_live_mode_trickles_through_the_official_http_exporter_to_a_live_server(live_url):
    project, key = make_key()
    start = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)
    ticks = itertools.count()
    # A clock that moves five minutes a tick: two ticks send two disjoint sets of sessions.
    clock = lambda: (start + dt.timedelta(minutes=5 * (1 + next(ticks)))).timestamp()  # noqa: E731
    sim = Simulator(seed=2, rate=1200)

    exporter = http_exporter(live_url, key)
    stats = live(sim, exporter, since=start, interval=0, clock=clock, max_ticks=2)
    sim.shutdown()
    exporter.shutdown()

    assert stats.requests == 2 and stats.tool_calls > 50
    assert Span.objects.filter(project=project).count() == stats.spans
    assert ToolCall.objects.filter(project=project).count() == sim.truth.total().attempts


@pytest.mark.django_db
def test_the_simulate_command_backfills_a_project_in_process():
    project = make_project()
    out = __import__("io").StringIO()

    call_command("simulate", "--project", project.slug, "--days", "0.1", "--rate", "300", "--tools", "search_kb,read_file", stdout=out)

    assert "Sent " in out.getvalue()
    assert set(ToolCall.objects.filter(project=project).values_list("tool", flat=True)) == {"search_kb", "read_file"}


@pytest.mark.django_db
def test_the_simulate_command_names_a_bad_argument():
    project = make_project()
    with pytest.raises(CommandError, match="unknown kind"):
        call_command("simulate", "--project", project.slug, "--days", "1", "--drift", "search_kb:slow")
    with pytest.raises(CommandError, match="give a target"):
        call_command("simulate", "--days", "1")
    with pytest.raises(CommandError, match="nothing to do"):
        call_command("simulate", "--project", project.slug)
