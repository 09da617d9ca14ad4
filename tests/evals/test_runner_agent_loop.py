"""docs/agents.md end to end: a plain agent loop calls a flaky stub tool and a broken one, both
wrapped by `@tool_call`, and exports its spans with the real OpenTelemetry SDK and OTLP/HTTP
exporter to a real Toolwatch on loopback. Every stored failure passes every contract check
that applies (a contract score of 100 %), and the breaker reading the real feed opens for the
failing tool, lets the recovering one through, and fails open once Toolwatch is down or hangs."""

from __future__ import annotations

import datetime as dt
import socket
import time

import pytest
from django.utils import timezone
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from dashboard import tokens
from dashboard.rollups.refresh import rollups_refresh
from dashboard.selectors.tools import tools_overview
from evals.runner.breaker import CircuitBreaker
from evals.runner.instrument import ToolError, envelope, tool_call
from ingest.models import Membership, ToolCall
from tests.conftest import served_app
from tests.factories import make_key

TASKS = 12


@pytest.fixture
def toolwatch(transactional_db):
    """Toolwatch served by waitress on a free loopback port, with the server object, so a test can stop it."""
    with served_app() as served:
        yield served


class FlakyFlights:
    """A stub flights API: per task, two 503s (retry after 1 s), then a validation error until the
    date is ISO, then the flights."""

    def __init__(self):
        self.calls: dict[str, int] = {}

    def search(self, task: str, date: str):
        self.calls[task] = self.calls.get(task, 0) + 1
        if self.calls[task] <= 2:
            raise ToolError("flights API answered 503 Service Unavailable", error_class="transient", retry_after=1)
        if len(date) != 10 or date[4] != "-":
            return envelope("validation", f"date {date!r} is not a calendar date", field="date",
                            suggestion="send the date as YYYY-MM-DD, e.g. 2026-11-20")  # fmt: skip
        return {"flights": [{"id": f"{task}-1", "date": date}]}


def agent_loop(provider, flights):
    """A controller that routes on the envelope: retry transient (after retry_after, shortened
    here), repair the named field, stop on anything else."""
    tracer = provider.get_tracer("support-agent")
    search = tool_call(name="search_flights", tracer_provider=provider)(flights.search)

    @tool_call(name="book_seat", tracer_provider=provider)
    def book_seat(flight_id: str):
        raise ToolError("the seat map service is retired: book through book_seat_v2", error_class="fatal")

    outcomes = []
    for n in range(TASKS):
        task = f"task-{n}"
        with tracer.start_as_current_span("invoke_agent support", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
        }):  # fmt: skip
            arguments, answer = {"task": task, "date": "next friday"}, None
            for _ in range(5):
                try:
                    answer = search(**arguments)
                except ToolError as exc:
                    error = exc.envelope["error"]
                    if error["class"] != "transient":
                        break
                    time.sleep(min(error["retryAfterMs"] / 1000, 0.01))
                    continue
                if answer.get("isError"):
                    error = answer["error"]
                    if error["class"] == "validation" and error["field"] == "date":
                        arguments = {**arguments, "date": "2026-11-20"}  # the repair the suggestion asks for
                        continue
                    break
                break
            try:
                book_seat(answer["flights"][0]["id"])
                outcomes.append("booked")
            except ToolError:
                outcomes.append("stopped")  # fatal: another attempt cannot succeed
    return outcomes


@pytest.fixture
def traffic(toolwatch):
    url, _ = toolwatch
    project, key = make_key()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(
        OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {key}"}, timeout=10)))  # fmt: skip
    flights = FlakyFlights()

    outcomes = agent_loop(provider, flights)
    provider.shutdown()
    rollups_refresh(project_id=project.pk, everything=True)  # the job, which refreshes the feed too
    return project, outcomes, flights


def test_the_agent_loop_recovers_and_stops_as_the_envelopes_say(traffic):
    _, outcomes, flights = traffic

    assert outcomes == ["stopped"] * TASKS
    assert set(flights.calls.values()) == {4}  # 503, 503, the bad date, the repaired call


def test_every_stored_failure_of_the_wrapped_tools_passes_every_contract_check(traffic):
    project, _, _ = traffic
    failed = list(ToolCall.objects.filter(project=project, ok=False).values("tool", "error_class", "contract"))

    assert len(failed) == TASKS * 4  # 2 transient + 1 validation per search, 1 fatal booking
    assert {(row["tool"], row["error_class"]) for row in failed} == {
        ("search_flights", "transient"), ("search_flights", "validation"), ("book_seat", "fatal")}
    checks = [value for row in failed for value in row["contract"].values() if value is not None]
    assert len(checks) >= TASKS * 4 * 5 and all(checks)  # per attempt: 100 %
    now = timezone.now()
    table = tools_overview(project, start=now - dt.timedelta(hours=1), end=now + dt.timedelta(minutes=5))["rows"]
    # The tools table scores the calls that failed in the end: every booking; no search (each recovered).
    assert {row["tool"]: row["contract_score"] for row in table} == {"book_seat": 1.0, "search_flights": None}
    retried = {row["tool"]: (row["calls"], row["retries"], row["errors"]) for row in table}
    assert retried == {"search_flights": (TASKS, 3 * TASKS, 0), "book_seat": (TASKS, 0, TASKS)}  # linked by tool.call.attempt


def test_the_breaker_reads_the_real_feed_then_fails_open_when_toolwatch_is_down(traffic, toolwatch, member):
    url, server = toolwatch
    project, _, _ = traffic
    Membership.objects.create(project=project, user=member, role=Membership.Role.MEMBER)
    _, token = tokens.api_token_create(user=member, name="agent", scopes=["read"])
    clock = [1000.0]
    breaker = CircuitBreaker.from_feed(url, project.slug, token=token, background=False, timeout_s=1, poll_s=5,
                                       stale_after_s=60, probe_s=30, clock=lambda: clock[0])  # fmt: skip

    assert breaker.allow("book_seat") is False
    assert breaker.advice("book_seat").action == "stop"
    assert breaker.allow("search_flights") is True
    flights = breaker.advice("search_flights")
    assert (flights.state, flights.action, flights.retry_after_s) == ("ok", "retry", 1)
    etag = breaker.health.etag
    clock[0] += 10
    assert breaker.health.refresh() and breaker.health.etag == etag  # a 304: the same document kept
    clock[0] += 25
    assert breaker.allow("book_seat") is True  # half-open: one probe after probe_s
    assert breaker.allow("book_seat") is False

    server.stop()
    clock[0] += 10
    began = time.monotonic()
    assert breaker.health.refresh() is False  # refused: at once
    assert time.monotonic() - began < 1.5
    assert breaker.allow("book_seat") is False  # the last good answer, until it is stale
    clock[0] += 61
    assert breaker.allow("book_seat") is True
    advice = breaker.advice("book_seat")
    assert advice.state == "unknown" and "unavailable" in advice.reason


def test_a_hanging_toolwatch_never_holds_up_the_agent():
    with socket.socket() as listener:  # accepts connections (the backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        waiting = CircuitBreaker.from_feed(url, "alpha", token="twu_x", timeout_s=0.3, background=False)
        polling = CircuitBreaker.from_feed(url, "alpha", token="twu_x", timeout_s=5)

        began = time.monotonic()
        assert waiting.allow("book_seat") is True  # inline poll: bounded by timeout_s
        inline = time.monotonic() - began
        began = time.monotonic()
        assert polling.allow("book_seat") is True  # background poll: not waited for at all
        background = time.monotonic() - began

    assert inline < 1.0 and background < 0.1
    assert "timed out" in waiting.health.last_error
