"""The traces API: tool calls (filters and keyset pages, as in the explorer), one trace, one tool call."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from tests.dashboard.test_traces_page import (  # noqa: F401 (fixtures)
    BASE_NS,
    HOSTILE,
    MS,
    many,
    mixed,
    send,
    signed_in,
    span_id,
    tool_span,
    trace_id,
)
from tests.factories import make_project
from tests.otlp_builders import json_span


def calls(client, project, **params):
    return client.get(f"/api/v1/projects/{project.slug}/tool-calls/", params)


def span_ids(response) -> list[str]:
    return [row["span_id"] for row in response.json()["results"]]


def test_the_api_needs_authentication(client, mixed):
    client.logout()

    assert calls(client, mixed).status_code in (401, 403)


def test_an_outsider_gets_404_even_with_bad_parameters(client, mixed, outsider):
    client.force_login(outsider)

    assert calls(client, mixed).status_code == 404
    assert calls(client, mixed, **{"class": "nope"}).status_code == 404
    assert client.get(f"/api/v1/projects/{mixed.slug}/traces/{trace_id(1)}/").status_code == 404
    assert client.get(f"/api/v1/projects/{mixed.slug}/tool-calls/{trace_id(1)}/{span_id(1)}/").status_code == 404


def test_tool_calls_are_listed_newest_first(client, mixed):
    response = calls(client, mixed)

    assert response.status_code == 200
    assert span_ids(response) == [span_id(n) for n in (6, 5, 4, 3, 2, 1)]
    first = response.json()["results"][0]
    assert first["tool"] == "lookup_order" and first["error_class"] == "permission" and first["classified_by"]
    assert response.json()["next"] is None and response.json()["previous"] is None


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"tool": "charge_card"}, [4, 2]),
        ({"class": "transient"}, [2]),
        ({"outcome": "soft_failure"}, [3]),
        ({"outcome": "retried"}, [4]),
        ({"outcome": "escalated"}, [5]),
        ({"service": "billing-agent", "outcome": "failed"}, [6]),
        ({"environment": "prod", "agent": "support"}, [2, 1]),
        ({"q": "TIMED out"}, [2]),
    ],
)
def test_the_explorers_filters_apply(client, mixed, params, expected):
    assert span_ids(calls(client, mixed, **params)) == [span_id(n) for n in expected]


def test_bad_filters_are_a_400_naming_each_one(client, mixed):
    response = calls(client, mixed, **{"class": "explody", "outcome": "x", "range": "forever", "before": "zzz", "limit": "0"})

    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"class", "outcome", "range", "before", "limit"}
    assert "class='explody' is not an error class" in body["class"][0]
    assert "range='forever' is not one of" in body["range"][0]


# '²' passed str.isdigit() and int() raised (a 500); '١٢' and '５' were read as 12 and 5.
@pytest.mark.parametrize("limit", ["\u00b2", "\u0661\u0662", "\uff15", "-1", "201", "9" * 40])
def test_a_limit_that_is_not_ascii_digits_in_range_is_a_400_naming_it(client, mixed, limit):  # noqa: F811
    response = calls(client, mixed, limit=limit)

    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body.get("parameter") == "limit" or list(body) == ["limit"]


def test_next_cursors_page_through_every_call_once(client, many):
    seen, params = [], {"limit": "4"}
    for _ in range(10):
        body = calls(client, many, **params).json()
        seen.append([row["span_id"] for row in body["results"]])
        if body["next"] is None:
            break
        assert parse_qs(urlparse(body["next"]).query)["before"] == [body["next_cursor"]]
        params = {"limit": "4", "before": body["next_cursor"]}

    flat = [span for page in seen for span in page]
    assert [len(page) for page in seen] == [4, 4, 3]
    assert sorted(flat) == sorted(span_id(200 + n) for n in range(11)) and len(set(flat)) == 11
    previous = calls(client, many, limit="4", after=body["previous_cursor"]).json()
    assert [row["span_id"] for row in previous["results"]] == seen[1]


def test_next_links_keep_the_filters(client, many):
    body = calls(client, many, limit="2", service="support-agent", range="7d").json()

    query = parse_qs(urlparse(body["next"]).query)
    assert query["service"] == ["support-agent"] and query["range"] == ["7d"] and query["limit"] == ["2"]


def test_a_trace_has_its_spans_in_waterfall_order_with_attributes_events_and_tool_calls(client, signed_in):
    send(client, signed_in, [
        json_span(trace_id(1), span_id(1), "invoke_agent support",
                  attrs={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
                  start_ns=BASE_NS - MS, duration_ns=100 * MS),
        tool_span(1, 2, "lookup", parent=1, status_code=2, message="boom",
                  events=[{"timeUnixNano": "0", "name": "exception", "attributes": []}]),
        tool_span(1, 3, "orphaned", parent=77),
    ])  # fmt: skip

    response = client.get(f"/api/v1/projects/{signed_in.slug}/traces/{trace_id(1).upper()}/")

    assert response.status_code == 200
    body = response.json()
    assert body["trace_id"] == trace_id(1)
    assert [(s["span"]["span_id"], s["depth"], s["orphan"]) for s in body["spans"]] == [
        (span_id(1), 0, False), (span_id(2), 1, False), (span_id(3), 0, True),
    ]  # fmt: skip
    tool = body["spans"][1]["span"]
    assert tool["attributes"]["gen_ai.tool.name"] == "lookup"
    assert tool["events"][0]["name"] == "exception"
    assert [call["span_id"] for call in body["tool_calls"]] == [span_id(2), span_id(3)]
    assert body["tool_calls"][0]["error_class"] and "contract" in body["tool_calls"][0]


def test_one_tool_call_has_every_field(client, mixed):
    response = client.get(f"/api/v1/projects/{mixed.slug}/tool-calls/{trace_id(3)}/{span_id(3)}/")

    assert response.status_code == 200
    body = response.json()
    assert body["soft_failure"] is True and body["error_class"] == "not_found"
    assert body["result"] == {"error": {"code": "not_found", "message": "no invoice 42"}}
    assert "project" not in body and "id" not in body


def test_unknown_or_malformed_ids_are_404(client, mixed):
    base = f"/api/v1/projects/{mixed.slug}"
    other = make_project("Beta")
    send(client, other, [tool_span(70, 70, "secret")])

    assert client.get(f"{base}/traces/{'f' * 32}/").status_code == 404
    assert client.get(f"{base}/traces/nope/").status_code == 404
    assert client.get(f"{base}/traces/{trace_id(70)}/").status_code == 404
    assert client.get(f"{base}/tool-calls/{trace_id(70)}/{span_id(70)}/").status_code == 404
    assert client.get(f"{base}/tool-calls/{trace_id(1)}/zz/").status_code == 404


def test_hostile_strings_come_back_as_data(client, signed_in):
    send(client, signed_in, [tool_span(5, 5, HOSTILE, status_code=2, message=HOSTILE)])

    body = calls(client, signed_in).json()

    assert body["results"][0]["tool"] == HOSTILE and body["results"][0]["message"] == HOSTILE


def test_the_list_and_trace_endpoints_make_a_fixed_number_of_queries(client, signed_in, django_assert_max_num_queries):
    send(client, signed_in, [tool_span(1, 10 + n, f"tool{n}", at_ms=n, status_code=2 if n % 2 else 0, message="x")
                             for n in range(12)])  # fmt: skip

    with django_assert_max_num_queries(4):
        assert len(calls(client, signed_in).json()["results"]) == 12
    with django_assert_max_num_queries(5):
        assert len(client.get(f"/api/v1/projects/{signed_in.slug}/traces/{trace_id(1)}/").json()["tool_calls"]) == 12


def test_the_schema_documents_the_endpoints_and_their_filters(client, signed_in):
    paths = client.get("/api/schema/", {"format": "json"}).json()["paths"]

    listing = paths["/api/v1/projects/{project}/tool-calls/"]["get"]
    assert {"tool", "class", "outcome", "q", "before", "after", "limit"} <= {p["name"] for p in listing["parameters"]}
    assert "/api/v1/projects/{project}/traces/{trace_id}/" in paths
    assert "/api/v1/projects/{project}/tool-calls/{trace_id}/{span_id}/" in paths
