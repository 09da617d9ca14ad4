"""The traces explorer: tool calls filtered from the URL, newest first, keyset pages, a trace-id jump.

Traces go in through the real OTLP endpoint; the helpers here are shared by the trace
page and API tests.
"""

from __future__ import annotations

import json
import re
import time
from html import unescape
from urllib.parse import parse_qs, urlparse

import pytest

from ingest.models import ToolCall
from ingest.services import api_key_create
from tests.factories import make_project
from tests.ingest.test_traces_view import JSON, post
from tests.otlp_builders import json_bytes, json_request, json_span

HOSTILE = "<script>alert(1)</script><b>x</b>"
HOSTILE_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;"
# A whole microsecond, ten minutes ago: stored start times keep microseconds, so ties stay ties.
BASE_NS = (time.time_ns() - 600 * 10**9) // 1000 * 1000
MS = 1_000_000


def trace_id(n: int) -> str:
    return f"{n:032x}"


def span_id(n: int) -> str:
    return f"{n:016x}"


def tool_span(trace: int, span: int, tool: str, *, at_ms: float = 0, parent: int = 0, status_code: int = 0,
              message: str = "", attrs: dict | None = None, duration_ms: float = 20, events=None) -> dict:  # fmt: skip
    return json_span(
        trace_id(trace), span_id(span), f"execute_tool {tool}",
        parent=span_id(parent) if parent else "",
        attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, **(attrs or {})},
        status_code=status_code, status_message=message,
        start_ns=BASE_NS + int(at_ms * MS), duration_ns=int(duration_ms * MS), events=events,
    )  # fmt: skip


def send(client, project, spans: list[dict], *, service: str = "support-agent", environment: str = "prod") -> None:
    _, key = api_key_create(project=project)
    resource = {"service.name": service, "deployment.environment.name": environment}
    response = post(client, json_bytes(json_request([(resource, spans)])), key, content_type=JSON)
    assert response.status_code == 200, response.content


@pytest.fixture
def signed_in(member_client, project):
    """The cast's project, with `client` logged in as its member."""
    return project


def explorer(client, project, **params):
    return client.get(f"/p/{project.slug}/traces/", params)


def listed(response) -> list[str]:
    """The span ids of the listed calls, in order."""
    return [call.span_id for call in response.context["calls"]]


def tools_listed(response) -> list[str]:
    return [call.tool for call in response.context["calls"]]


@pytest.fixture
def mixed(client, signed_in):
    """Six calls, one of each outcome, across two services, environments and agents."""
    project = signed_in
    send(client, project, [
        tool_span(1, 1, "lookup_order", at_ms=0, attrs={"gen_ai.agent.name": "support"}),
        tool_span(2, 2, "charge_card", at_ms=10, status_code=2, message="Upstream TIMED OUT after 30s",
                  attrs={"error.type": "TimeoutError", "gen_ai.agent.name": "support"}),
        tool_span(3, 3, "fetch_invoice", at_ms=20, attrs={
            "gen_ai.tool.call.result": json.dumps({"error": {"code": "not_found", "message": "no invoice 42"}})}),
    ], service="support-agent", environment="prod")  # fmt: skip
    send(client, project, [
        tool_span(4, 4, "charge_card", at_ms=30, attrs={"tool.call.attempt": 2, "gen_ai.agent.name": "billing"}),
        tool_span(5, 5, "handoff", at_ms=40, attrs={"tool.escalated": True, "gen_ai.agent.name": "billing"}),
        tool_span(6, 6, "lookup_order", at_ms=50, status_code=2, message="HTTP 403 forbidden",
                  attrs={"http.response.status_code": 403, "gen_ai.agent.name": "billing"}),
    ], service="billing-agent", environment="staging")  # fmt: skip
    return project


def test_the_explorer_needs_a_login(client, db):
    project = make_project()

    response = explorer(client, project)

    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_an_outsider_gets_404_the_same_as_a_missing_project(client, mixed, outsider):
    client.force_login(outsider)

    assert explorer(client, mixed).status_code == 404
    assert client.get("/p/no-such-project/traces/").status_code == 404


def test_it_lists_one_row_per_tool_call_newest_first_with_its_details(client, mixed):
    response = explorer(client, mixed)
    page = response.content.decode()

    assert response.status_code == 200
    assert listed(response) == [span_id(n) for n in (6, 5, 4, 3, 2, 1)]
    assert 'class="class class-permission"' in page
    assert 'class="class class-transient"' in page
    assert "Upstream TIMED OUT after 30s" in page
    assert ToolCall.objects.get(span_id=span_id(2)).classified_by in unescape(page)
    assert "billing-agent / billing" in page
    assert f'href="/p/alpha/traces/{trace_id(6)}/?range=24h#call-{span_id(6)}"' in page


def test_the_why_column_is_cut_short_with_its_full_text_in_a_title(client, mixed):
    page = explorer(client, mixed).content.decode()
    why = ToolCall.objects.get(span_id=span_id(2)).classified_by

    cells = re.findall(r'<td class="muted why"><span class="clip" title="([^"]*)">', page)
    assert len(cells) == 6
    assert why in [unescape(title) for title in cells]
    assert '<div class="tablewrap">' in page  # a wide table scrolls inside itself, never the page


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"tool": "charge_card"}, [4, 2]),
        ({"class": "permission"}, [6]),
        ({"class": "not_found"}, [3]),
        ({"outcome": "failed"}, [6, 3, 2]),
        ({"outcome": "ok"}, [5, 4, 1]),
        ({"outcome": "soft_failure"}, [3]),
        ({"outcome": "retried"}, [4]),
        ({"outcome": "escalated"}, [5]),
        ({"service": "billing-agent"}, [6, 5, 4]),
        ({"environment": "prod"}, [3, 2, 1]),
        ({"agent": "support"}, [2, 1]),
        ({"q": "timed out"}, [2]),
        ({"q": "FORBIDDEN"}, [6]),
        ({"tool": "lookup_order", "outcome": "failed", "service": "billing-agent"}, [6]),
        ({"tool": "no_such_tool"}, []),
    ],
)
def test_each_filter_narrows_the_calls(client, mixed, params, expected):
    response = explorer(client, mixed, **params)

    assert response.status_code == 200
    assert listed(response) == [span_id(n) for n in expected]
    assert response.context["filter_errors"] == []


def test_the_time_range_filters_the_calls(client, mixed):
    assert listed(explorer(client, mixed, range="1h")) != []
    assert listed(explorer(client, mixed, range="custom", start="2020-01-01T00:00", end="2020-01-02T00:00")) == []


def test_an_unknown_class_is_named_in_a_clear_message_and_the_filter_is_dropped(client, mixed):
    response = explorer(client, mixed, **{"class": "explody", "outcome": "sideways"})
    page = unescape(response.content.decode())

    assert response.status_code == 200
    assert "class='explody' is not an error class; use one of transient, validation" in page
    assert "outcome='sideways' is not one of failed, ok, soft_failure, retried, escalated" in page
    assert len(listed(response)) == 6


def test_bad_input_never_fails_the_page(client, mixed):
    for params in (
        {"before": "not-a-cursor"}, {"after": "9" * 19 + "_" + "0" * 16 + "_" + "0" * 32}, {"range": "forever"},
        {"q": "x" * 500}, {"tool": "t" * 1000}, {"trace": "%00\x01"}, {"q": "%_\\'\""},
    ):  # fmt: skip
        response = explorer(client, mixed, **params)
        assert response.status_code == 200, params
    assert "is not a page cursor" in unescape(explorer(client, mixed, before="nope").content.decode())


def test_filter_values_survive_a_reload_in_the_forms_and_the_page_links(client, mixed, monkeypatch):
    monkeypatch.setattr("dashboard.selectors.traces.PAGE_SIZE", 1)
    response = explorer(client, mixed, tool="charge_card", outcome="ok", q="", service="billing-agent", range="7d")
    page = response.content.decode()

    assert '<option value="charge_card" selected>' in page
    assert '<option value="ok" selected>' in page
    assert '<option value="billing-agent" selected>' in page
    assert '<option value="7d" selected>' in page
    assert listed(response) == [span_id(4)]


def test_a_filter_value_not_yet_in_the_rollups_stays_selected(client, mixed):
    page = explorer(client, mixed, tool="brand_new_tool").content.decode()

    assert '<option value="brand_new_tool" selected>' in page


# --- keyset pagination ----------------------------------------------------------------------


@pytest.fixture
def many(client, signed_in):
    """Eleven calls in three traces; groups of them start at the very same microsecond."""
    project = signed_in
    at = [0, 0, 0, 5, 5, 9, 9, 9, 9, 12, 20]
    send(client, project, [tool_span(100 + n % 3, 200 + n, f"tool{n}", at_ms=ms) for n, ms in enumerate(at)])
    return project


def walk(client, project, direction: str, start_params: dict) -> list[list[str]]:
    pages, params = [], dict(start_params)
    for _ in range(20):
        response = explorer(client, project, **params)
        pages.append(listed(response))
        url = response.context[f"{direction}_url"]
        if not url:
            return pages
        params = {key: values[0] for key, values in parse_qs(urlparse(url).query).items()}
    raise AssertionError("pagination did not end")


def test_older_pages_walk_every_call_once_even_through_ties_on_start_time(client, many, monkeypatch):
    monkeypatch.setattr("dashboard.selectors.traces.PAGE_SIZE", 3)

    pages = walk(client, many, "older", {})

    flat = [span for page in pages for span in page]
    assert [len(page) for page in pages] == [3, 3, 3, 2]
    assert sorted(flat) == sorted(span_id(200 + n) for n in range(11))
    assert len(set(flat)) == 11
    newest_first = sorted(ToolCall.objects.all(), key=lambda c: (c.start_time, c.span_id, c.trace_id), reverse=True)
    assert flat == [call.span_id for call in newest_first]


def test_newer_links_walk_back_to_the_same_pages(client, many, monkeypatch):
    monkeypatch.setattr("dashboard.selectors.traces.PAGE_SIZE", 3)
    forward = walk(client, many, "older", {})
    last = explorer(client, many)
    for _ in range(len(forward) - 1):
        url = last.context["older_url"]
        last = explorer(client, many, **{k: v[0] for k, v in parse_qs(urlparse(url).query).items()})

    backward = walk(client, many, "newer", {k: v[0] for k, v in parse_qs(urlparse(url).query).items()})

    assert backward == forward[::-1]


def test_the_first_page_has_no_newer_link_and_the_last_no_older_link(client, many, monkeypatch):
    monkeypatch.setattr("dashboard.selectors.traces.PAGE_SIZE", 20)

    response = explorer(client, many)

    assert response.context["older_url"] == "" and response.context["newer_url"] == ""
    assert "Older →" not in response.content.decode()


def test_the_end_of_the_pages_is_plainly_disabled_not_a_link(client, many, monkeypatch):
    monkeypatch.setattr("dashboard.selectors.traces.PAGE_SIZE", 5)

    page = explorer(client, many).content.decode()

    assert '<span class="pager-off" aria-disabled="true" title="This is the newest page">← Newer</span>' in page
    assert "<a role=\"link\" aria-disabled" not in page
    assert 'rel="next">Older →</a>' in page


def test_page_links_keep_every_filter(client, many, monkeypatch):
    monkeypatch.setattr("dashboard.selectors.traces.PAGE_SIZE", 2)

    response = explorer(client, many, range="7d", service="support-agent", outcome="ok", q="", environment="prod")
    query = parse_qs(urlparse(unescape(response.context["older_url"])).query)

    assert {k: v[0] for k, v in query.items() if k != "before"} == {
        "range": "7d", "service": "support-agent", "outcome": "ok", "environment": "prod",
    }  # fmt: skip
    assert 'rel="next"' in response.content.decode()


# --- the trace-id jump ----------------------------------------------------------------------


def test_jumping_to_a_known_trace_id_opens_it(client, mixed):
    response = explorer(client, mixed, trace=f"  {trace_id(2).upper()} ")

    assert response.status_code == 302
    assert response["Location"] == f"/p/alpha/traces/{trace_id(2)}/?range=24h"


def test_jumping_to_a_malformed_trace_id_says_what_a_trace_id_is(client, mixed):
    page = unescape(explorer(client, mixed, trace="abc123").content.decode())

    assert "'abc123' is not a trace id: a trace id is 32 hexadecimal characters" in page


def test_jumping_to_an_unknown_trace_id_says_there_is_none(client, mixed):
    page = explorer(client, mixed, trace="f" * 32).content.decode()

    assert f"There is no trace {'f' * 32} in Alpha" in page


def test_jumping_to_another_projects_trace_finds_nothing(client, mixed):
    other = make_project("Beta")
    send(client, other, [tool_span(77, 77, "secret_tool")])

    response = explorer(client, mixed, trace=trace_id(77))

    assert response.status_code == 200
    assert f"There is no trace {trace_id(77)}" in response.content.decode()


# --- safety and cost ------------------------------------------------------------------------


def test_hostile_tool_names_messages_services_and_agents_render_as_text(client, signed_in):
    send(client, signed_in, [
        tool_span(9, 9, HOSTILE, status_code=2, message=f"failed: {HOSTILE}", attrs={"gen_ai.agent.name": HOSTILE}),
    ], service=HOSTILE, environment=HOSTILE)  # fmt: skip

    page = explorer(client, signed_in, q=HOSTILE[:20], tool=HOSTILE).content.decode()

    assert HOSTILE not in page
    assert "<b>x</b>" not in page
    assert HOSTILE_ESCAPED in page
    # Scripts come from our static files; the only others are json_script data blocks (not executed).
    assert len(re.findall("<script", page)) == len(re.findall('<script src="/static/', page)) + len(
        re.findall('<script id="[a-z-]+" type="application/json">', page)
    )


def test_another_projects_calls_never_show(client, signed_in):
    send(client, make_project("Beta"), [tool_span(50, 50, "secret_tool")])

    response = explorer(client, signed_in)

    assert listed(response) == []
    assert "secret_tool" not in response.content.decode()


def test_the_explorer_makes_a_fixed_number_of_queries(client, signed_in, django_assert_max_num_queries):
    from dashboard.rollups.refresh import rollups_refresh

    send(client, signed_in, [tool_span(300 + n, 300 + n, f"tool{n % 4}", at_ms=n, status_code=2 if n % 2 else 0,
                                       message="boom") for n in range(30)])  # fmt: skip
    rollups_refresh(project_id=signed_in.pk)

    with django_assert_max_num_queries(7):
        response = explorer(client, signed_in, outcome="failed")
    assert len(listed(response)) == 15
    assert set(response.context["tools"]) == {"tool0", "tool1", "tool2", "tool3"}


@pytest.mark.postgres
def test_a_message_search_that_runs_too_long_gives_advice_instead_of_hanging(client, mixed, monkeypatch):
    from django.db import connection

    def slow_page(*args):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(1)")

    monkeypatch.setattr("dashboard.selectors.traces.SEARCH_TIMEOUT_MS", 20)
    monkeypatch.setattr("dashboard.selectors.traces._page", slow_page)

    response = explorer(client, mixed, q="timed out")
    api = client.get(f"/api/v1/projects/{mixed.slug}/tool-calls/", {"q": "timed out"})

    assert response.status_code == 200
    assert "narrow the time range, or pick a tool or an error class" in response.content.decode()
    assert listed(response) == []
    assert api.status_code == 400 and "took longer than 0.02 s" in api.json()["q"][0]
    monkeypatch.undo()
    assert listed(explorer(client, mixed, q="timed out")) == [span_id(2)]  # the connection is still usable


def test_a_trace_from_two_resources_in_one_request_shows_each_spans_own_resource(client, signed_in):
    _, key = api_key_create(project=signed_in)
    alpha = {"service.name": "alpha", "host.name": "<b>host-a</b>"}
    beta = {"service.name": "beta", "deployment.environment.name": "staging"}
    request = json_request([(alpha, [tool_span(60, 1, "a")]), (beta, [tool_span(60, 2, "b", at_ms=5)]), (alpha, [tool_span(60, 3, "c", at_ms=9)])])
    assert post(client, json_bytes(request), key, content_type=JSON).status_code == 200

    page = client.get(f"/p/{signed_in.slug}/traces/{trace_id(60)}/").content.decode()
    api = client.get(f"/api/v1/projects/{signed_in.slug}/traces/{trace_id(60)}/").json()

    sections = {sid: page.split(f'id="span-{sid}"', 1)[1].split('<details class="trace-span card"', 1)[0] for sid in (span_id(1), span_id(2), span_id(3))}
    for sid, resource in ((span_id(1), alpha), (span_id(2), beta), (span_id(3), alpha)):
        assert f"Resource attributes ({len(resource)})" in sections[sid]
    assert "&lt;b&gt;host-a&lt;/b&gt;" in sections[span_id(1)] and "<b>host-a" not in page
    assert "staging" in sections[span_id(2)] and "host-a" not in sections[span_id(2)]
    resources = {row["span"]["span_id"]: row["span"]["resource_attributes"] for row in api["spans"]}
    assert resources == {span_id(1): alpha, span_id(2): beta, span_id(3): alpha}


def test_the_explorer_is_one_form_with_linked_rows_and_tools_and_a_volume_histogram(client, signed_in):
    send(client, signed_in, [tool_span(1, 1, "search"), tool_span(2, 2, "search", status_code=2, message="boom")])

    response = explorer(client, signed_in, outcome="failed")
    page = response.content.decode()

    assert page.count('<form method="get" class="rangebar') == 1  # range, dimensions and call filters together
    assert page.count(">Apply</button>") == 1 and ">Filter</button>" not in page
    assert 'name="outcome" class="wide"' in page and 'name="range" data-custom-toggle' in page
    (call,) = response.context["calls"]
    assert f'<tr class="rowlink" data-href="{call.trace_url}">' in page and "#call-" in call.trace_url
    assert f'<a href="/p/{signed_in.slug}/tools/search/' in page
    histogram = response.context["histogram"]
    assert histogram.source == "calls" and sum(histogram.counts) == 1  # the outcome filter counts too
    assert '<script id="fig-calls" type="application/json">' in page
    assert sum(explorer(client, signed_in).context["histogram"].counts) >= 0  # unfiltered: from the rollups


def test_a_nul_in_the_tool_or_search_filter_is_a_page_not_a_500(client, signed_in):
    for params in ({"tool": "sea\x00rch"}, {"q": "timed\x00out"}):
        assert explorer(client, signed_in, **params).status_code == 200
