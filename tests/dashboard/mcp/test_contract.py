"""Toolwatch's own MCP tools pass Toolwatch's own contract checks: every error result is run
through the classifier and contract checks of live traffic (evals/judge.py observe, which
builds the span an instrumentation records and normalises it with ingest/normalize.py)."""

from __future__ import annotations

import pytest

from dashboard.mcp import errors
from dashboard.mcp.server import Session, run_tool
from dashboard.mcp.tools import Principal
from evals.judge import observe
from ingest import taxonomy

CLASS_OF = {errors.RATE_LIMITED: taxonomy.TRANSIENT}


def assert_passes_contract(tool: str, arguments: dict, result) -> dict:
    observed = observe(tool, arguments, result=result.model_dump(by_alias=True, mode="json", exclude_none=True))
    stated = result.structured_content["error"]["class"]
    assert observed["ok"] is False and observed["error_class"] == CLASS_OF.get(stated, stated)
    failed = [name for name, passed in observed["contract"].items() if passed is False]
    assert failed == [], (tool, observed)
    return observed


@pytest.mark.parametrize(
    "error",
    [
        errors.validation("range", "range='2w' is not one of 1h, 24h, 7d, 30d, 90d, custom", "use one of 1h, 24h, 7d"),
        errors.not_found("project", "no project 'beta' among yours", "call list_projects for the slugs you can use"),
        errors.ToolError(taxonomy.PERMISSION, "this token lacks the 'admin' scope", suggestion="create a token with it"),
        errors.ToolError(errors.RATE_LIMITED, "too many calls: 600/min", suggestion="wait 3 s", retry_after=3),
        errors.ToolError(taxonomy.TRANSIENT, "Toolwatch's database could not answer in time", retry_after=2),
        errors.ToolError(taxonomy.FATAL, "Toolwatch could not answer get_trace with these arguments"),
    ],
    ids=lambda error: error.error_class,
)
def test_every_error_class_the_tools_answer_passes_the_contract_checks(error):
    observed = assert_passes_contract("toolwatch_tool", {}, errors.error_result(error))

    if error.retry_after is not None:
        assert observed["retry_after_ms"] == error.retry_after * 1000
    if error.field:
        assert observed["field"] == error.field


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("tool_health_overview", {"project": "alpha", "range": "2w"}),
        ("tool_health_overview", {"project": "beta"}),
        ("search_failed_calls", {"project": "alpha", "error_class": "explody"}),
        ("get_trace", {"project": "alpha", "trace_id": "nope"}),
        ("list_alerts", {"project": "alpha", "status": "sleeping"}),
        ("acknowledge_alert", {"project": "alpha", "alert_id": 999}),
        ("promote_failed_call", {"project": "alpha", "trace_id": "0" * 32, "span_id": "0" * 16}),
        ("list_eval_cases", {"project": "alpha", "status": "gone"}),
        ("no_such_tool", {}),
    ],
)
def test_the_real_tools_errors_pass_the_contract_checks(db, member, project, name, arguments):
    result = run_tool(Session(Principal(user=member)), name, arguments)

    assert result.is_error
    assert_passes_contract(name, arguments, result)
