"""A custom range outside what the bucket arithmetic can compute (dashboard/timerange.py EARLIEST..LATEST)
is refused where it is parsed, naming start or end, the same way on every surface: the REST API (400),
the pages (the range's banner over the default range), the MCP tools (a validation error) and replay."""

from __future__ import annotations

import datetime as dt

import pytest

from dashboard import timerange
from dashboard.mcp.server import Session, run_tool
from dashboard.mcp.tools import Principal
from dashboard.models import ReplayResult

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)
SPAN = "1970-01-01 to 9000-01-01 (UTC)"

# (start, end, the parameter at fault): year 1 and 9999, plain and with an offset that leaves datetime's years.
OUT_OF_SPAN = [
    ("0001-01-01", "0001-01-02", "start"),
    ("0001-01-01T00:00:00+01:00", "0001-01-02", "start"),
    ("9999-12-31T23:00:00-05:00", "9999-12-31T23:59:00-05:00", "start"),
    ("9999-12-30", "9999-12-31", "start"),
    ("1969-12-31T23:59", "1970-01-02", "start"),
    ("2026-11-01", "9999-12-31T23:59:00-05:00", "end"),
    ("8999-12-31", "9000-01-01T00:00:01", "end"),
]
IDS = [f"{start}..{end}" for start, end, _ in OUT_OF_SPAN]


@pytest.mark.parametrize(("start", "end", "parameter"), OUT_OF_SPAN, ids=IDS)
def test_a_moment_outside_the_supported_span_is_a_range_error_naming_it(start, end, parameter):
    with pytest.raises(timerange.RangeError) as caught:
        timerange.parse_range({"range": "custom", "start": start, "end": end}, NOW)

    assert caught.value.parameter == parameter
    assert str(caught.value).startswith(f"{parameter}=") and SPAN in str(caught.value)


@pytest.mark.parametrize(
    ("start", "end"),
    [("1970-01-01", "1970-01-02"), ("1970-01-01T01:00:00+01:00", "1970-01-01T00:05"), ("8999-12-01", "9000-01-01")],
)
def test_the_span_s_own_edges_are_ranges(start, end):
    time_range = timerange.parse_range({"range": "custom", "start": start, "end": end}, NOW)

    assert timerange.EARLIEST <= time_range.start < time_range.end <= timerange.LATEST


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"range": "2w"}, "range"),
        ({"range": "custom", "end": "2026-11-20"}, "start"),
        ({"range": "custom", "start": "2026-11-20"}, "end"),
        ({"range": "custom", "start": "soon", "end": "2026-11-20"}, "start"),
        ({"range": "custom", "start": "2026-11-20", "end": "later"}, "end"),
        ({"range": "custom", "start": "2026-11-20", "end": "2026-11-19"}, "end"),
        ({"range": "custom", "start": "2024-01-01", "end": "2026-01-01"}, "range"),
    ],
)
def test_every_range_error_names_the_parameter_at_fault(params, parameter):
    with pytest.raises(timerange.RangeError) as caught:
        timerange.parse_range(params, NOW)

    assert caught.value.parameter == parameter


def test_a_nul_in_a_filter_becomes_what_ingest_stores_for_it():
    assert timerange.parse_filters({"service": "svc\x00a"}).service == "svc\ufffda"


# --- every surface ------------------------------------------------------------------------------

RANGED_API = [
    "/api/v1/projects/alpha/summary/",
    "/api/v1/projects/alpha/tools/",
    "/api/v1/projects/alpha/tools/search/series/",
    "/api/v1/projects/alpha/tool-calls/",
    "/api/v1/projects/alpha/ingest-health/",
    "/api/v1/projects/alpha/replay/",
]


@pytest.mark.django_db
@pytest.mark.parametrize("url", RANGED_API)
@pytest.mark.parametrize(("start", "end", "parameter"), OUT_OF_SPAN, ids=IDS)
def test_the_api_answers_a_range_outside_the_span_with_a_400_naming_it(member_client, url, start, end, parameter):
    response = member_client.get(url, {"range": "custom", "start": start, "end": end})

    assert response.status_code == 400, response.content[:300]
    assert list(response.json()) == [parameter] and SPAN in response.json()[parameter][0]
    assert not ReplayResult.objects.exists()  # no replay job made of it, to fail later


PAGES = ["/p/alpha/", "/p/alpha/tools/search/", "/p/alpha/traces/", "/p/alpha/alerts/", "/p/alpha/health/",
         "/p/alpha/replay/", "/p/alpha/replay/tools/search/", "/p/alpha/evals/runs/"]  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize("url", PAGES)
@pytest.mark.parametrize(("start", "end", "parameter"), OUT_OF_SPAN[:3], ids=IDS[:3])
def test_a_page_shows_the_range_error_and_the_default_range(member_client, url, start, end, parameter):
    response = member_client.get(url, {"range": "custom", "start": start, "end": end})

    assert response.status_code == 200
    html = response.content.decode()
    assert "is outside the supported span" in html and SPAN in html
    assert "showing the last 24 hours instead" in html


@pytest.mark.django_db
@pytest.mark.parametrize("tool", ["tool_health_overview", "tool_report", "search_failed_calls"])
@pytest.mark.parametrize(("start", "end", "parameter"), OUT_OF_SPAN, ids=IDS)
def test_the_mcp_tools_answer_a_validation_error_naming_it(member, project, tool, start, end, parameter):
    arguments = {"project": "alpha", "range": "custom", "start": start, "end": end}
    if tool == "tool_report":
        arguments["tool"] = "search"

    result = run_tool(Session(Principal(user=member)), tool, arguments)

    assert result.is_error
    error = result.structured_content["error"]
    assert (error["class"], error["field"]) == ("validation", parameter) and SPAN in error["message"]
