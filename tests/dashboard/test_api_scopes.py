"""Token scopes on the REST API: read for GETs, runs for the runner's two requests, admin for the
other writes; a 403 naming the scope; roles still on top; sessions unaffected; the runner says so."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from dashboard import tokens
from dashboard.api.auth import HasScope, view_scopes
from evals import services
from evals.models import EvalRun
from evals.runner import loader
from evals.runner.client import Client as RunnerClient
from evals.runner.client import ClientError, run_payload
from evals.runner.execute import run_all
from evals.runner.registry import load_registry
from ingest.models import ApiKey, Project
from tests.evals.server_helpers import ingest_failure, project_key  # noqa: F401 - a fixture

API = "/api/v1/projects/alpha"


def token_for(user, *scopes: str) -> str:
    return tokens.api_token_create(user=user, name="t", scopes=scopes)[1]


def call(method: str, path: str, token: str, body: dict | None = None):
    kwargs = {"headers": {"Authorization": f"Bearer {token}"}}
    if body is not None:
        kwargs |= {"data": json.dumps(body), "content_type": "application/json"}
    return getattr(Client(), method)(path, **kwargs)


def lacks(response, scope: str) -> bool:
    return response.status_code == 403 and response.json() == {
        "detail": f"This token lacks the '{scope}' scope.",
        "required_scope": scope,
    }


# --- which scope each operation needs ------------------------------------------------------------


def _api_views(patterns=None, prefix=""):
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            yield from _api_views(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern) and (prefix + str(pattern.pattern)).startswith("api/v1/"):
            yield prefix + str(pattern.pattern), pattern.callback.cls


def test_every_api_view_checks_token_scopes():
    views = list(_api_views())

    assert len(views) > 20
    unguarded = [route for route, cls in views if HasScope not in cls.permission_classes]
    assert unguarded == []


def test_reads_need_read_writes_need_admin_and_the_runner_needs_runs():
    needed = {}
    for route, cls in _api_views():
        for method in ("get", "post", "put", "patch", "delete"):
            if hasattr(cls, method):
                needed[(route, method.upper())] = view_scopes(cls(), method)

    runner = {
        ("api/v1/projects/<slug:project>/eval-cases/export.jsonl", "GET"): ("runs", "read"),
        ("api/v1/projects/<slug:project>/eval-runs/", "POST"): ("runs",),
    }
    assert {key: needed[key] for key in runner} == runner
    others = {key: scopes for key, scopes in needed.items() if key not in runner}
    assert {scopes for (_, method), scopes in others.items() if method == "GET"} == {("read",)}
    assert {scopes for (_, method), scopes in others.items() if method != "GET"} == {("admin",)}


# --- a read token ------------------------------------------------------------------------------


def test_a_read_token_reads_but_every_write_is_a_403_naming_admin(owner, project):
    token = token_for(owner, "read")

    assert call("get", f"{API}/settings/", token).status_code == 200
    assert call("get", "/api/v1/projects/", token).status_code == 200
    assert lacks(call("post", f"{API}/api-keys/", token, {"name": "stolen"}), "admin")
    assert lacks(call("patch", f"{API}/settings/", token, {"retention_days": 1}), "admin")
    assert lacks(call("post", f"{API}/channels/", token, {"kind": "webhook", "name": "x", "target": "https://x.example"}), "admin")
    assert lacks(call("post", f"{API}/alerts/1/acknowledge/", token), "admin")
    assert not ApiKey.objects.filter(name="stolen").exists()
    assert Project.objects.get(pk=project.pk).retention_days != 1


def test_a_read_token_cannot_post_an_eval_run(member, project):
    assert lacks(call("post", f"{API}/eval-runs/", token_for(member, "read"), {}), "runs")


# --- the runner's token ----------------------------------------------------------------------------


def test_a_runs_token_reaches_the_export_and_the_run_post_and_nothing_else(member, project):
    token = token_for(member, "runs")

    export = call("get", f"{API}/eval-cases/export.jsonl", token)
    refused_run = call("post", f"{API}/eval-runs/", token, {"label": "x"})

    assert export.status_code == 200
    assert refused_run.status_code == 400  # past the scope check: the body is what is wrong
    assert lacks(call("get", "/api/v1/projects/", token), "read")
    assert lacks(call("get", f"{API}/eval-runs/", token), "read")
    assert lacks(call("get", f"{API}/settings/", token), "read")
    assert lacks(call("post", f"{API}/eval-cases/", token, {"trace_id": "0" * 32, "span_id": "0" * 16}), "admin")


def test_a_read_token_reaches_the_export_too_as_every_get(member, project):
    response = Client().get(
        f"{API}/eval-cases/export.jsonl",
        headers={"Authorization": f"Bearer {token_for(member, 'read')}", "X-Toolwatch-Runner-Contract": "1"},
    )

    assert response.status_code == 200 and response["X-Toolwatch-Runner-Contract"] == "1"


# --- roles still apply; sessions are not tokens ---------------------------------------------------


def test_an_admin_token_of_an_owner_writes_but_cannot_read(owner, project):
    token = token_for(owner, "admin")

    response = call("post", f"{API}/api-keys/", token, {"name": "from ci"})

    assert response.status_code == 201 and response.json()["key"].startswith("tw_")
    assert lacks(call("get", f"{API}/api-keys/", token), "read")


def test_a_scope_never_grants_more_than_the_role(member, project):
    response = call("patch", f"{API}/settings/", token_for(member, *tokens.SCOPES), {"retention_days": 1})

    assert response.status_code == 403
    assert response.json() == {"detail": "Only the project's owners can change its settings."}


def test_an_outsider_is_told_the_same_for_any_project_whether_or_not_it_exists(outsider, project):
    token = token_for(outsider, "read")

    existing = call("post", f"{API}/api-keys/", token, {"name": "x"})
    missing = call("post", "/api/v1/projects/no-such/api-keys/", token, {"name": "x"})

    assert lacks(existing, "admin") and existing.json() == missing.json()
    assert call("get", f"{API}/settings/", token).status_code == 404


def test_a_logged_in_session_is_not_limited_by_scopes(owner_client):
    response = owner_client.patch(f"{API}/settings/", json.dumps({"retention_days": 9}), content_type="application/json")

    assert response.status_code == 200 and response.json()["retention_days"] == 9


# --- the plain function other surfaces call ------------------------------------------------------


def test_require_scope_passes_a_token_with_the_scope_and_a_session(member, rf):
    token, _ = tokens.api_token_create(user=member, name="mcp", scopes=["read"])
    request = rf.get("/")

    request.auth = token
    tokens.require_scope(request, "read")
    with pytest.raises(tokens.ScopeDenied) as denied:
        tokens.require_scope(request, "admin")
    request.auth = None
    tokens.require_scope(request, "admin")  # a session request carries no token

    assert denied.value.body() == {"detail": "This token lacks the 'admin' scope.", "required_scope": "admin"}


def test_token_has_scope_refuses_an_unknown_scope_name(member):
    token, _ = tokens.api_token_create(user=member, name="t", scopes=["read"])

    assert tokens.token_has_scope(token, "read") and not tokens.token_has_scope(token, "runs")
    with pytest.raises(ValueError, match="unknown scope 'write'"):
        tokens.token_has_scope(token, "write")


# --- the OpenAPI schema -------------------------------------------------------------------------


def test_the_schema_names_each_operations_scope_and_its_403(db):
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)

    operations = {op["operationId"]: op for item in schema["paths"].values() for op in item.values() if isinstance(op, dict)}
    assert operations["eval_runs_create"]["x-token-scopes"] == ["runs"]
    assert operations["eval_cases_export"]["x-token-scopes"] == ["runs", "read"]
    assert operations["projects_list"]["x-token-scopes"] == ["read"]
    assert operations["alerts_acknowledge"]["x-token-scopes"] == ["admin"]
    assert "Token scope: `admin`." in operations["alerts_acknowledge"]["description"]
    assert all("403" in op["responses"] and "x-token-scopes" in op for op in operations.values())


# --- the runner against a live server --------------------------------------------------------------


def search_flights(date: str, to: str) -> dict:
    return {"error": {"type": "validation", "message": "date must be YYYY-MM-DD", "field": "date",
                      "suggestion": "write the date as YYYY-MM-DD"}}  # fmt: skip


TOOLS = {"search_flights": search_flights}


@pytest.mark.django_db(transaction=True)
def test_the_runner_runs_with_a_runs_only_token_and_names_the_scope_it_lacks(live_server, client, project, project_key, member):  # noqa: F811
    call_ = ingest_failure(client, project_key[1])
    services.case_pin(case=services.case_promote(project=project, trace_id=call_.trace_id, span_id=call_.span_id).case)
    runner = RunnerClient(live_server.url, token_for(member, "runs"))
    read_only = RunnerClient(live_server.url, token_for(member, "read"))

    cases = loader.parse_text(runner.fetch_cases(project.slug), source="export")
    now = dt.datetime.now(dt.UTC)
    payload = run_payload(run_all(cases, load_registry(f"{__name__}:TOOLS")), label="ci", git_sha=None,
                          started_at=now, finished_at=now)  # fmt: skip
    answer = runner.post_run(project.slug, payload)
    with pytest.raises(ClientError) as refused:
        read_only.post_run(project.slug, payload)

    assert answer["passed"] == 1 and EvalRun.objects.count() == 1
    assert refused.value.status == 403
    assert "the token lacks the 'runs' scope" in str(refused.value)
    assert "docs/runner.md#the-token" in str(refused.value)
