"""A trace's logical calls (dashboard/selectors/calls.py): attempts linked by the rollups' own
code, on the trace page and in the trace API, with the numbers the rollups count."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter, defaultdict
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.models import ToolRollup, ToolRollupTotal
from dashboard.rollups.refresh import rollups_recompute
from dashboard.selectors import calls as call_selectors
from dashboard.selectors import traces as trace_selectors
from tests.dashboard.test_traces_page import (  # noqa: F401 (fixtures)
    HOSTILE,
    HOSTILE_ESCAPED,
    send,
    signed_in,
    span_id,
    tool_span,
    trace_id,
)

TRACE = 21
TIMEOUT = {"error.type": "TimeoutError"}
FORBIDDEN = {"http.response.status_code": 403}
INVALID = {"tool.error.class": "validation", "tool.error.field": "amount"}


def args(value: dict) -> dict:
    return {"gen_ai.tool.call.arguments": json.dumps(value)}


def failed(trace: int, span: int, tool: str, at_ms: float, evidence: dict, **attrs):
    return tool_span(trace, span, tool, at_ms=at_ms, status_code=2, message=f"{tool} failed", attrs={**evidence, **attrs})


def ok(trace: int, span: int, tool: str, at_ms: float, **attrs):
    return tool_span(trace, span, tool, at_ms=at_ms, attrs=attrs)


# Span number -> (tool, ...): one trace holding every way attempts link (or do not).
SPANS = [
    # explicit markers: a marked first try, then a marked retry with other arguments
    failed(TRACE, 1, "search", 0, TIMEOUT, **{"tool.call.attempt": 1}, **args({"q": "a"})),
    ok(TRACE, 2, "search", 40, **{"tool.call.attempt": 2}, **args({"q": "b"})),
    # a shared call id: a validation failure repaired (other arguments) under the same id
    failed(TRACE, 3, "update_ticket", 100, INVALID, **{"gen_ai.tool.call.id": "c-1"}, **args({"id": "x"})),
    ok(TRACE, 4, "update_ticket", 150, **{"gen_ai.tool.call.id": "c-1"}, **args({"id": "12345678"})),
    # implicit retries: the same tool, identical arguments, right after a failure (new call ids)
    failed(TRACE, 5, "lookup_order", 200, TIMEOUT, **{"gen_ai.tool.call.id": "c-2"}, **args({"order": 7})),
    failed(TRACE, 6, "lookup_order", 260, TIMEOUT, **{"gen_ai.tool.call.id": "c-3"}, **args({"order": 7})),
    ok(TRACE, 7, "lookup_order", 330, **{"gen_ai.tool.call.id": "c-4"}, **args({"order": 7})),
    # ... and after a success the same call again is a call of its own
    ok(TRACE, 8, "lookup_order", 400, **{"gen_ai.tool.call.id": "c-5"}, **args({"order": 7})),
    # a wasted retry: a permission failure tried again
    failed(TRACE, 9, "delete_user", 450, FORBIDDEN, **args({"user": 1})),
    failed(TRACE, 10, "delete_user", 500, FORBIDDEN, **args({"user": 1})),
    # a blind retry: a validation failure retried with the arguments unchanged, then escalated
    failed(TRACE, 11, "create_refund", 550, INVALID, **args({"amount": -1})),
    failed(TRACE, 12, "create_refund", 600, INVALID, **{"tool.next_action": "ask_user"}, **args({"amount": -1})),
    # a repair with changed arguments and no marker is not a retry: two calls
    failed(TRACE, 13, "send_email", 650, INVALID, **args({"to": "x"})),
    ok(TRACE, 14, "send_email", 700, **args({"to": "a@example.com"})),
]


@pytest.fixture
def linked(client, signed_in):
    send(client, signed_in, SPANS)
    return signed_in


def trace_calls(project, trace: int = TRACE):
    return call_selectors.trace_calls(project, trace_selectors.trace_get(project, trace_id(trace)))


def spans_of(call) -> list[int]:
    return [int(attempt.span_id, 16) for attempt in call.attempts]


# --- the selector ---------------------------------------------------------------------------


def test_attempts_group_into_logical_calls_by_markers_call_ids_and_implicit_retries(linked):
    calls = trace_calls(linked)

    assert [(call.tool, spans_of(call)) for call in calls] == [
        ("search", [1, 2]),  # explicit tool.call.attempt 1 then 2
        ("update_ticket", [3, 4]),  # the shared call id
        ("lookup_order", [5, 6, 7]),  # identical arguments after failures
        ("lookup_order", [8]),  # after a success: a new call
        ("delete_user", [9, 10]),
        ("create_refund", [11, 12]),
        ("send_email", [13]),  # changed arguments, no marker: not a retry
        ("send_email", [14]),
    ]
    assert [attempt.number for attempt in calls[2].attempts] == [1, 2, 3]


def test_each_call_has_the_outcome_and_counts_of_the_contract(linked):
    by_first = {spans_of(call)[0]: call for call in trace_calls(linked)}
    figures = {
        first: (call.ok, call.error_class, call.attempt_count, call.retries, call.failed_retries, call.wasted_retries,
                call.blind_retries, call.escalated)
        for first, call in by_first.items()
    }  # fmt: skip

    assert figures == {
        1: (True, None, 2, 1, 0, 0, 0, False),
        3: (True, None, 2, 1, 0, 0, 0, False),  # a repair with changed arguments: not blind
        5: (True, None, 3, 2, 1, 0, 0, False),  # outcome: the last attempt's
        8: (True, None, 1, 0, 0, 0, 0, False),
        9: (False, "permission", 2, 1, 1, 1, 0, False),  # wasted: a permission failure retried
        11: (False, "validation", 2, 1, 1, 0, 1, True),  # blind, and escalated by its retry
        13: (False, "validation", 1, 0, 0, 0, 0, False),
        14: (True, None, 1, 0, 0, 0, 0, False),
    }
    lookup = by_first[5]
    assert lookup.latency_ms == pytest.approx(sum(attempt.latency_ms for attempt in lookup.attempts))
    assert [(a.ok, a.error_class) for a in lookup.attempts] == [(False, "transient"), (False, "transient"), (True, None)]


def test_each_retry_says_how_it_counts_and_they_add_up_to_the_calls_counts(linked):
    calls = trace_calls(linked)
    by_span = {int(attempt.span_id, 16): attempt for call in calls for attempt in call.attempts}

    assert (by_span[10].failed_retry, by_span[10].wasted_retry, by_span[10].blind_retry) == (True, True, False)
    assert (by_span[12].failed_retry, by_span[12].wasted_retry, by_span[12].blind_retry) == (True, False, True)
    assert not any((by_span[1].failed_retry, by_span[1].wasted_retry, by_span[1].blind_retry, by_span[1].retry))
    assert by_span[12].escalated and not by_span[11].escalated
    assert (by_span[1].marked_attempt, by_span[2].marked_attempt, by_span[3].call_id) == (1, 2, "c-1")
    for call in calls:
        assert sum(a.failed_retry for a in call.attempts) == call.failed_retries
        assert sum(a.wasted_retry for a in call.attempts) == call.wasted_retries
        assert sum(a.blind_retry for a in call.attempts) == call.blind_retries


def test_the_counts_equal_what_the_rollups_count_for_the_same_trace(linked):
    now = timezone.now()
    rollups_recompute(project_id=linked.pk, start=now - dt.timedelta(hours=2), end=now + dt.timedelta(hours=1))
    names = ("calls", "attempts", "retries", "failed_retries", "wasted_retries", "blind_retries", "errors", "escalations")
    rolled = defaultdict(Counter)
    for row in ToolRollupTotal.objects.filter(project=linked, resolution=ToolRollup.Resolution.HOUR).values("tool", *names):
        rolled[row["tool"]].update({name: row[name] for name in names})

    calls = trace_calls(linked)
    shown = defaultdict(Counter)
    for call in calls:
        shown[call.tool].update({
            "calls": 1, "attempts": call.attempt_count, "retries": call.retries, "failed_retries": call.failed_retries,
            "wasted_retries": call.wasted_retries, "blind_retries": call.blind_retries, "errors": int(not call.ok),
            "escalations": int(call.escalated),
        })  # fmt: skip
    as_dicts = {tool: {name: counts[name] for name in names} for tool, counts in shown.items()}

    assert as_dicts == {tool: {name: counts[name] for name in names} for tool, counts in rolled.items()}
    totals = calls.totals
    assert (totals.calls, totals.attempts, totals.retries, totals.failed_retries, totals.wasted_retries,
            totals.blind_retries, totals.errors, totals.escalations) == (8, 14, 6, 3, 1, 1, 3, 1)  # fmt: skip
    assert sum(rolled.values(), Counter())["calls"] == totals.calls


def test_it_reads_nothing_more_for_a_whole_trace(linked, django_assert_num_queries):
    trace = trace_selectors.trace_get(linked, trace_id(TRACE))

    with django_assert_num_queries(0):
        calls = call_selectors.trace_calls(linked, trace)
    assert all(attempt.on_page for call in calls for attempt in call.attempts)


def test_a_truncated_trace_still_links_all_its_tool_calls_in_one_query(linked, monkeypatch, django_assert_max_num_queries):
    monkeypatch.setattr(trace_selectors, "MAX_SPANS", 5)
    trace = trace_selectors.trace_get(linked, trace_id(TRACE))
    assert trace.truncated and len(trace.spans) == 5

    with django_assert_max_num_queries(1):
        calls = call_selectors.trace_calls(linked, trace)

    assert sum(call.attempt_count for call in calls) == len(SPANS)
    on_page = {int(a.span_id, 16): a.on_page for call in calls for a in call.attempts}
    assert on_page == {n: n <= 5 for n in range(1, len(SPANS) + 1)}


# --- the page -------------------------------------------------------------------------------


def detail(client, project, trace: int = TRACE):
    return client.get(f"/p/{project.slug}/traces/{trace_id(trace)}/")


def test_the_page_shows_one_row_per_call_above_the_tool_calls_with_links_to_each_attempt(client, linked):
    page = unescape(detail(client, linked).content.decode())

    section = page.split('<h2 id="logical-calls">')[1].split('<h2 id="tool-calls">')[0]
    assert page.index('id="logical-calls"') < page.index('id="tool-calls"') < page.index('id="spans"')
    assert section.count('<details class="card trace-logical-call') == 8
    assert "8 logical calls</strong> from 14 attempts (tool spans)" in section
    assert "6 retries (3 failed, 1 wasted, 1 blind)" in section
    lookup = section.split(f'id="logical-call-{span_id(5)}"')[1].split("</details>")[0]
    assert re.search(r"3 attempts, 2 retries\s*<span class=\"muted\">\(1 failed, <span>0 wasted</span>, <span>0 blind</span>\)", lookup)
    assert '<span class="trace-ok">ok</span>' in lookup.split("</summary>")[0]
    for n in (5, 6, 7):  # each attempt links to its tool-call card, which is on the page
        assert f'href="#call-{span_id(n)}"' in lookup
        assert f'id="call-{span_id(n)}"' in page
    wasted = section.split(f'id="logical-call-{span_id(9)}"')[1].split("</details>")[0]
    assert 'class="trace-fail">failed</span> <span class="class class-permission">permission</span>' in wasted
    assert '<strong class="trace-fail">wasted</strong>' in wasted
    refund = section.split(f'id="logical-call-{span_id(11)}"')[1].split("</details>")[0]
    assert '<span class="trace-tag escalated">escalated</span>' in refund.split("</summary>")[0]
    assert '<strong class="trace-fail">blind</strong>' in refund


def test_a_trace_without_tool_calls_says_so(client, signed_in):
    from tests.otlp_builders import json_span

    send(client, signed_in, [json_span(trace_id(30), span_id(1), "invoke_agent support")])

    assert "No tool calls in this trace, so no logical calls." in detail(client, signed_in, 30).content.decode()


def test_a_hostile_tool_name_renders_as_text(client, signed_in):
    send(client, signed_in, [
        failed(31, 1, HOSTILE, 0, TIMEOUT, **{"gen_ai.tool.call.id": HOSTILE}),
        ok(31, 2, HOSTILE, 50, **{"gen_ai.tool.call.id": HOSTILE}),
    ])  # fmt: skip

    page = detail(client, signed_in, 31).content.decode()
    section = page.split('<h2 id="logical-calls">')[1].split('<h2 id="tool-calls">')[0]

    assert HOSTILE not in page
    assert section.count(HOSTILE_ESCAPED) >= 3  # the row, the caption and the call id
    assert len(re.findall("<script", page)) == len(re.findall('<script src="/static/', page))


def test_the_section_costs_the_page_at_most_one_query(client, linked, monkeypatch, django_assert_max_num_queries):
    empty = call_selectors.TraceCalls()
    empty.totals = call_selectors.CallTotals()
    with monkeypatch.context() as patch:
        patch.setattr(call_selectors, "trace_calls", lambda project, trace: empty)
        with CaptureQueriesContext(connection) as without:
            assert detail(client, linked).status_code == 200

    with django_assert_max_num_queries(len(without.captured_queries) + 1):
        response = detail(client, linked)
    assert len(response.context["logical_calls"]) == 8


# --- the API --------------------------------------------------------------------------------


def test_the_trace_api_has_the_calls_beside_the_unchanged_tool_calls(client, linked):
    body = client.get(f"/api/v1/projects/{linked.slug}/traces/{trace_id(TRACE)}/").json()

    assert len(body["tool_calls"]) == len(SPANS) and "span_id" in body["tool_calls"][0]
    assert len(body["calls"]) == 8
    lookup = body["calls"][2]
    assert set(lookup) == {
        "tool", "service", "environment", "agent", "start_time", "ok", "error_class", "attempt_count", "retries",
        "failed_retries", "wasted_retries", "blind_retries", "escalated", "latency_ms", "attempts",
    }  # fmt: skip
    assert (lookup["tool"], lookup["ok"], lookup["error_class"], lookup["attempt_count"], lookup["retries"]) == (
        "lookup_order", True, None, 3, 2
    )
    assert (lookup["service"], lookup["environment"]) == ("support-agent", "prod")
    assert [a["span_id"] for a in lookup["attempts"]] == [span_id(5), span_id(6), span_id(7)]
    first = lookup["attempts"][0]
    assert set(first) == {
        "span_id", "number", "start_time", "offset_ms", "ok", "error_class", "latency_ms", "call_id", "marked_attempt",
        "resend_count", "escalated", "failed_retry", "wasted_retry", "blind_retry",
    }  # fmt: skip
    assert (first["number"], first["ok"], first["error_class"], first["call_id"]) == (1, False, "transient", "c-2")
    wasted = body["calls"][4]
    assert (wasted["error_class"], wasted["wasted_retries"], wasted["attempts"][1]["wasted_retry"]) == ("permission", 1, True)
