"""`/api/v1/projects/<slug>/tools/`, `…/tools/<tool>/series/` and `…/summary/`: the pages' numbers
as JSON, same range and filters, 400 naming a bad parameter, 404 for outsiders, flat query counts."""

import pytest

from tests.dashboard.selectors.test_selectors import (  # noqa: F401
    HOSTILE,
    HOUR,
    NOW,
    add_rollup,
    budget,
    frozen,
    ingest_demo,
    open_alert,
    without_totals,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_tools(frozen, member_client, project):  # noqa: F811
    """Three tools' rollups over the last hours in the cast's project, one with an open alert; `client` logged in as its member."""
    for n, tool in enumerate(("search", "refund", "lookup")):
        for hour in range(1, 4):
            add_rollup(project, tool, NOW - hour * HOUR, service=f"svc-{n % 2}", calls=10 * (n + 1), errors=n,
                       classes={"transient": n}, retries=n, latencies=[10.0 * (n + 1)])  # fmt: skip
    open_alert(project, "refund")
    return project


def get(client, url, status=200):
    response = client.get(url)
    assert response.status_code == status, response.content[:500]
    return response.json()


def test_the_tools_list_is_the_overview_table_sorted_and_paginated(client, three_tools):
    body = get(client, "/api/v1/projects/alpha/tools/?range=24h&sort=-error_rate")

    assert body["count"] == 3 and body["next"] is None
    rows = body["results"]
    assert [row["tool"] for row in rows] == ["lookup", "refund", "search"]
    lookup = rows[0]
    assert (lookup["calls"], lookup["errors"], lookup["errors_by_class"]["transient"]) == (90, 6, 6)
    assert lookup["error_rate"] == pytest.approx(6 / 90) and lookup["p50_ms"] == pytest.approx(30, rel=0.1)
    assert rows[1]["open_alert_kinds"] == ["retry_rise_flat_error"] and lookup["open_alert_kinds"] == []
    assert len(lookup["sparkline"]) == 25


def test_the_tools_list_takes_the_pages_filters(client, three_tools):
    body = get(client, "/api/v1/projects/alpha/tools/?service=svc-1")

    assert [row["tool"] for row in body["results"]] == ["refund"]


def test_bad_parameters_are_400s_naming_them(client, three_tools):
    assert "is not a column" in get(client, "/api/v1/projects/alpha/tools/?sort=colour", 400)["sort"][0]
    assert "is not one of" in get(client, "/api/v1/projects/alpha/tools/?range=2y", 400)["range"][0]
    assert "start" in get(client, "/api/v1/projects/alpha/summary/?range=custom&start=soon&end=2026-11-20", 400)["start"][0]
    assert "hourly rollups" in get(client, "/api/v1/projects/alpha/tools/search/series/?step=5400", 400)["step"][0]


@pytest.mark.parametrize("step", ["34563600", "360000000000000000", "9223372036854775807"])
def test_a_step_longer_than_the_longest_range_is_a_400_naming_it(client, three_tools, step):
    # 360000000000000000 tiles the hourly rollups; a timedelta of that many seconds overflowed (a 500).
    body = get(client, f"/api/v1/projects/alpha/tools/search/series/?range=90d&step={step}", 400)

    assert list(body) == ["step"] and "longer than the longest range" in body["step"][0]


def test_a_tools_series_gives_counts_rates_and_latency_per_step(client, three_tools):
    body = get(client, "/api/v1/projects/alpha/tools/refund/series/?range=24h&step=3600")

    assert body["tool"] == "refund" and body["step"] == 3600 and body["range"]["key"] == "24h"
    assert len(body["points"]) == 25
    busy = [point for point in body["points"] if point["calls"]]
    assert [point["calls"] for point in busy] == [20, 20, 20]
    assert busy[0]["retry_rate"] == pytest.approx(0.05) and busy[0]["p95_ms"] == pytest.approx(20, rel=0.1)
    quiet = body["points"][0]
    assert quiet["calls"] == 0 and quiet["error_rate"] is None and quiet["p50_ms"] is None


def test_a_tool_without_calls_still_has_every_step(client, three_tools):
    body = get(client, "/api/v1/projects/alpha/tools/nothing/series/?range=1h")

    assert body["step"] == 300 and len(body["points"]) == 12 and all(point["calls"] == 0 for point in body["points"])


def test_tool_names_with_slashes_and_markup_round_trip(client, three_tools):
    project = three_tools
    add_rollup(project, f"mcp/{HOSTILE}", NOW - HOUR, calls=2)

    body = get(client, f"/api/v1/projects/alpha/tools/mcp/{HOSTILE}/series/?step=3600")

    assert body["tool"] == f"mcp/{HOSTILE}" and sum(point["calls"] for point in body["points"]) == 2


def test_the_summary_is_the_projects_totals(client, three_tools):
    body = get(client, "/api/v1/projects/alpha/summary/?range=24h")

    assert (body["calls"], body["errors"], body["retries"]) == (180, 9, 9)
    assert body["error_rate"] == pytest.approx(9 / 180) and body["filters"] == {}
    assert get(client, "/api/v1/projects/alpha/summary/?service=svc-1")["calls"] == 60


def test_outsiders_get_404_and_strangers_no_data(client, three_tools, outsider):
    client.force_login(outsider)
    for url in ("/api/v1/projects/alpha/tools/", "/api/v1/projects/alpha/tools/search/series/", "/api/v1/projects/alpha/summary/"):
        assert client.get(url).status_code == 404
    client.logout()
    assert client.get("/api/v1/projects/alpha/tools/").status_code in (401, 403)


def test_each_endpoint_makes_a_fixed_number_of_queries(client, three_tools, django_assert_max_num_queries):
    project = three_tools
    for n in range(15):
        add_rollup(project, f"extra_{n}", NOW - HOUR, calls=2, errors=1, latencies=[1.0], contract={"explicit_class": (1, 1)})
        open_alert(project, f"extra_{n}")

    with django_assert_max_num_queries(budget(6)):  # session, user, project, tools (2), alerts
        assert len(get(client, "/api/v1/projects/alpha/tools/?range=7d")["results"]) == 18
    with django_assert_max_num_queries(budget(5)):  # session, user, project, series, latency
        get(client, "/api/v1/projects/alpha/tools/search/series/?range=7d")
    with django_assert_max_num_queries(4):
        get(client, "/api/v1/projects/alpha/summary/?range=7d")


def test_the_schema_documents_the_endpoints(client, three_tools):
    schema = client.get("/api/schema/?format=json").json()

    tools = schema["paths"]["/api/v1/projects/{project}/tools/"]["get"]
    assert {p["name"] for p in tools["parameters"]} >= {"project", "range", "start", "end", "service", "sort"}
    assert "400" in tools["responses"] and "404" in tools["responses"]
    assert "/api/v1/projects/{project}/tools/{tool}/series/" in schema["paths"]
    assert "/api/v1/projects/{project}/summary/" in schema["paths"]


def test_the_endpoints_give_the_same_numbers_with_and_without_the_per_tool_totals(client, three_tools, monkeypatch):
    project = three_tools
    ingest_demo(project)
    urls = [
        "/api/v1/projects/alpha/tools/?range=24h", "/api/v1/projects/alpha/tools/?range=30d&sort=-p95_ms",
        "/api/v1/projects/alpha/summary/?range=7d", "/api/v1/projects/alpha/tools/search/series/?range=24h",
    ]  # fmt: skip
    with_totals = [get(client, url) for url in urls]

    without_totals(monkeypatch)

    assert with_totals[0]["count"] > 3 and [get(client, url) for url in urls] == with_totals
