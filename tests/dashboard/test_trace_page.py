"""One trace: the span waterfall, every span's attributes and events, each tool call's class and why, promote."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

from tests.dashboard.test_traces_page import (  # noqa: F401 (fixtures)
    BASE_NS,
    HOSTILE,
    HOSTILE_ESCAPED,
    MS,
    send,
    signed_in,
    span_id,
    tool_span,
    trace_id,
)
from tests.factories import make_project
from tests.otlp_builders import json_span

TRACE = 1


def agent_span(span: int, *, parent: int = 0, name: str = "invoke_agent support", at_ms=0, duration_ms=1000, attrs=None):
    return json_span(
        trace_id(TRACE), span_id(span), name, parent=span_id(parent) if parent else "",
        attrs={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", **(attrs or {})},
        start_ns=BASE_NS + int(at_ms * MS), duration_ns=int(duration_ms * MS),
    )  # fmt: skip


def llm_span(span: int, parent: int, at_ms=0, duration_ms=100):
    return json_span(
        trace_id(TRACE), span_id(span), "chat gpt-4o", parent=span_id(parent), attrs={"gen_ai.operation.name": "chat"},
        start_ns=BASE_NS + int(at_ms * MS), duration_ns=int(duration_ms * MS),
    )  # fmt: skip


ENVELOPE = {
    "tool.error.class": "validation", "tool.error.code": "invalid_arguments", "tool.error.retryable": False,
    "tool.error.field": "order_id", "tool.error.suggestion": "pass the 8-digit order id",
}  # fmt: skip


@pytest.fixture
def trace(client, signed_in):
    """agent → chat, two tools (one failed with a full envelope, one ok); an orphan tool whose parent is missing."""
    send(client, signed_in, [
        agent_span(1),
        llm_span(2, 1, at_ms=0, duration_ms=200),
        tool_span(TRACE, 3, "lookup_order", parent=1, at_ms=250, duration_ms=250, status_code=2,
                  message="order id is not valid", attrs={**ENVELOPE, "gen_ai.tool.call.arguments": '{"order_id": "x"}'},
                  events=[{"timeUnixNano": "0", "name": "exception", "attributes": []}]),
        tool_span(TRACE, 4, "lookup_order", parent=1, at_ms=500, duration_ms=250,
                  attrs={"tool.call.attempt": 2, "gen_ai.tool.call.arguments": '{"order_id": "12345678"}'}),
        tool_span(TRACE, 5, "late_tool", parent=99, at_ms=800, duration_ms=100),
    ])  # fmt: skip
    return signed_in


def detail(client, project, trace: str | None = None):
    return client.get(f"/p/{project.slug}/traces/{trace or trace_id(TRACE)}/")


def test_an_outsider_and_a_stranger_get_404(client, trace, outsider):
    stranger = make_project("Beta")
    send(client, stranger, [tool_span(2, 2, "other_tool")])

    assert detail(client, trace, trace_id(2)).status_code == 404  # another project's trace
    assert detail(client, trace, "f" * 32).status_code == 404  # no such trace
    assert detail(client, trace, "not-a-trace-id").status_code == 404
    client.force_login(outsider)
    assert detail(client, trace).status_code == 404


def test_the_waterfall_is_the_span_tree_with_bars_to_scale(client, trace):
    response = detail(client, trace)
    rows = [(view.row.span.span_id, view.row.depth) for view in response.context["spans"]]

    assert response.status_code == 200
    assert rows == [(span_id(1), 0), (span_id(2), 1), (span_id(3), 1), (span_id(4), 1), (span_id(5), 0)]
    page = response.content.decode()
    # lookup_order (the failed one) starts 250 ms into a 1000 ms trace and lasts 250 ms.
    assert "margin-left: 25.000%; width: 25.000%" in page
    assert "margin-left: 0.000%; width: 100.000%" in page


def test_a_span_whose_parent_is_missing_still_shows_as_a_marked_root(client, trace):
    response = detail(client, trace)
    page = response.content.decode()

    late = response.context["spans"][-1].row
    assert late.orphan and late.depth == 0
    assert "parent missing" in page
    assert "1 span names a parent that has not arrived" in page


def test_each_tool_call_shows_its_class_why_message_envelope_and_contract_checks(client, trace):
    page = unescape(detail(client, trace).content.decode())
    failed = page.split(f'id="call-{span_id(3)}"')[1].split("</section>")[0]

    assert 'class="class class-validation"' in failed
    assert "envelope:tool.error.class=validation" in failed
    assert "order id is not valid" in failed
    assert "invalid_arguments" in failed
    assert "order_id" in failed and "pass the 8-digit order id" in failed
    assert "<dt>Retryable</dt><dd>no</dd>" in failed
    assert "a validation error names the field to repair" in failed
    assert "✓ pass" in failed
    assert '"order_id": "x"' in failed


def test_a_retry_attempt_says_so(client, trace):
    page = detail(client, trace).content.decode()
    retry = page.split(f'id="call-{span_id(4)}"')[1].split("</section>")[0]

    assert "2 (a retry)" in retry
    assert "attempt 2" in retry


def test_every_failed_call_and_only_those_offer_promote_to_eval_case(client, trace):
    page = detail(client, trace).content.decode()

    assert page.count("Promote to eval case") == 1
    assert f'href="/p/alpha/evals/promote/{trace_id(TRACE)}/{span_id(3)}/"' in page


def test_an_escalated_call_says_it_was_handed_to_a_human(client, signed_in):
    send(client, signed_in, [tool_span(7, 7, "handoff_to_human", attrs={"tool.escalated": True, "tool.next_action": "escalate"})])

    page = detail(client, signed_in, trace_id(7)).content.decode()

    assert "handed to a human" in page
    assert "<dd class=\"trace-wrap\">escalate</dd>" in page


def test_every_spans_attributes_and_events_are_listed(client, trace):
    page = unescape(detail(client, trace).content.decode())

    assert page.count('<details class="trace-span card"') == 5
    assert "gen_ai.agent.name" in page and "gen_ai.operation.name" in page
    assert "<strong class=\"trace-wrap\">exception</strong>" in page
    assert "Resource attributes" in page and "service.name" in page


def test_long_and_structured_values_wrap_in_blocks(client, signed_in):
    send(client, signed_in, [tool_span(8, 8, "big", attrs={"big.value": "word " * 100, "nested": {"a": [1, 2]}})])

    page = detail(client, signed_in, trace_id(8)).content.decode()

    assert '<pre class="trace-wrap">word word' in page
    assert '<pre class="trace-wrap">{\n  &quot;a&quot;: [' in page


def test_hostile_span_names_tool_names_messages_and_attribute_keys_and_values_render_as_text(client, signed_in):
    hostile_spans = [
        json_span(trace_id(9), span_id(1), HOSTILE, attrs={HOSTILE: HOSTILE, "gen_ai.agent.name": HOSTILE},
                  events=[{"timeUnixNano": "0", "name": HOSTILE,
                           "attributes": [{"key": HOSTILE, "value": {"stringValue": HOSTILE}}]}]),
        tool_span(9, 2, HOSTILE, parent=1, status_code=2, message=HOSTILE,
                  attrs={"tool.error.suggestion": HOSTILE, "tool.error.field": HOSTILE,
                         "gen_ai.tool.call.arguments": json.dumps({HOSTILE: HOSTILE})}),
    ]  # fmt: skip
    send(client, signed_in, hostile_spans, service=HOSTILE, environment=HOSTILE)

    response = detail(client, signed_in, trace_id(9))
    page = response.content.decode()

    assert response.status_code == 200
    assert HOSTILE not in page
    assert "<b>x</b>" not in page
    assert page.count(HOSTILE_ESCAPED) >= 10
    assert len(re.findall("<script", page)) == len(re.findall('<script src="/static/', page))
    assert "javascript:" not in page


def test_the_trace_page_makes_a_fixed_number_of_queries(client, signed_in, django_assert_max_num_queries):
    spans = [agent_span(1)] + [
        tool_span(TRACE, 10 + n, f"tool{n}", parent=1, at_ms=n * 10, status_code=2 if n % 2 else 0, message="boom")
        for n in range(12)
    ]  # fmt: skip
    send(client, signed_in, spans)

    with django_assert_max_num_queries(6):
        response = detail(client, signed_in)
    assert len(response.context["calls"]) == 12
