"""The runner against a real Toolwatch (pytest-django's live server): a failure ingested over
OTLP, promoted and pinned on the server, fetched by the runner, run against the user's
tools, posted back; the bug coming back is a regression."""

from __future__ import annotations

import datetime as dt

import pytest

from dashboard.tokens import api_token_create
from evals import services
from evals.models import EvalRun
from evals.runner import loader
from evals.runner.client import Client, run_payload
from evals.runner.execute import run_all
from evals.runner.registry import load_registry
from tests.evals.server_helpers import ingest_failure, member, project, project_key  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)


def search_flights_fixed(date: str, to: str) -> dict:
    if date == "tomorrow":
        return {"error": {"type": "validation", "message": "date must be YYYY-MM-DD", "field": "date",
                          "suggestion": "write the date as YYYY-MM-DD"}}  # fmt: skip
    return {"flights": [{"to": to}]}


def search_flights_broken(date: str, to: str) -> dict:
    return {"ok": False, "error": "Something went wrong"}


FIXED_TOOLS = {"search_flights": search_flights_fixed}
BROKEN_TOOLS = {"search_flights": search_flights_broken}


def run_and_post(client: Client, slug: str, tools: str, label: str) -> dict:
    loaded = loader.parse_text(client.fetch_cases(slug), source="export")
    assert all(isinstance(item, loader.Case) for item in loaded), loaded
    started = dt.datetime.now(dt.UTC)
    results = run_all(loaded, load_registry(tools))
    payload = run_payload(results, label=label, git_sha=None, started_at=started, finished_at=dt.datetime.now(dt.UTC))
    return client.post_run(slug, payload)


def test_a_promoted_case_runs_in_ci_and_its_regression_is_reported(live_server, client, project, project_key, member):  # noqa: F811
    call = ingest_failure(client, project_key[1])
    case = services.case_promote(project=project, trace_id=call.trace_id, span_id=call.span_id).case
    services.case_pin(case=case)
    _, token = api_token_create(user=member, name="ci")
    api = Client(live_server.url, token)

    first = run_and_post(api, project.slug, f"{__name__}:FIXED_TOOLS", "git:fixed01")
    assert (first["passed"], first["failed"], first["errors"], first["regressions"]) == (1, 0, 0, [])
    second = run_and_post(api, project.slug, f"{__name__}:BROKEN_TOOLS", "git:broken2")
    assert (second["passed"], second["failed"], second["regressions"]) == (0, 1, [case.id])

    run = EvalRun.objects.get(pk=second["id"])
    [result] = run.results.all()
    assert result.status == "failed"
    assert result.reasons[0] == "expected class validation, got unknown: Something went wrong"
    assert result.observed["error_class"] == "unknown"
