"""The evals REST API: cases, versions, promotion, runs (the contract's POST), results, export; scoping and budgets."""

from __future__ import annotations

import json

import pytest

from dashboard.models import Alert
from evals import expectations, services
from evals.models import EvalCase, EvalRun
from ingest.models import ToolCall
from tests.evals.server_helpers import HOSTILE, ingest_failure, project_key  # noqa: F401 - project_key: a fixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def failure(client, project_key):
    return ingest_failure(client, project_key[1])


@pytest.fixture
def api(project):
    return f"/api/v1/projects/{project.slug}"


def promote(project, call, **kwargs) -> EvalCase:
    return services.case_promote(project=project, trace_id=call.trace_id, span_id=call.span_id, **kwargs).case


@pytest.fixture
def pinned_cases(client, project, project_key):
    cases = []
    for n in range(4):
        call = ingest_failure(client, project_key[1], tool=f"tool_{n}", message=f"'field{n}' must be set")
        case = promote(project, call, tags=["nightly", f"t{n}"])
        services.case_pin(case=case)
        case.refresh_from_db()
        cases.append(case)
    return cases


def result(case, status="passed", **changes) -> dict:
    version = case.versions.get(number=case.pinned_version)
    return {"case_id": case.pk, "version": version.number, "content_hash": version.content_hash, "status": status,
            "reasons": [] if status == "passed" else ["expected success, got validation"],
            "observed": {"ok": status == "passed", "error_class": None}, "duration_ms": 12, **changes}  # fmt: skip


def run_body(results, label="git:3f2c1a9", started="2025-03-01T12:00:00Z") -> dict:
    return {"label": label, "git_sha": "3f2c1a9e", "started_at": started, "finished_at": started.replace(":00Z", ":05Z"),
            "results": results}  # fmt: skip


def post(client, path, body):
    return client.post(path, json.dumps(body), content_type="application/json")


# --- cases -------------------------------------------------------------------------------


def test_listing_cases_is_paginated_filtered_and_within_budget(member_client, api, pinned_cases, failure, project, django_assert_max_num_queries):
    draft = promote(project, failure)
    with django_assert_max_num_queries(6):
        body = member_client.get(f"{api}/eval-cases/").json()

    assert body["count"] == 5 and {row["id"] for row in body["results"]} == {c.pk for c in pinned_cases} | {draft.pk}
    row = next(row for row in body["results"] if row["id"] == pinned_cases[1].pk)
    assert row["status"] == "pinned" and row["tags"] == ["nightly", "t1"] and row["last_result"] is None
    assert row["url"] == f"/p/{project.slug}/evals/cases/{pinned_cases[1].pk}/"
    assert [r["id"] for r in member_client.get(f"{api}/eval-cases/", {"status": "draft"}).json()["results"]] == [draft.pk]
    assert [r["id"] for r in member_client.get(f"{api}/eval-cases/", {"tag": "t2"}).json()["results"]] == [pinned_cases[2].pk]
    assert [r["id"] for r in member_client.get(f"{api}/eval-cases/", {"q": "field3"}).json()["results"]] == [pinned_cases[3].pk]


def test_a_bad_status_filter_is_a_400_naming_it(member_client, api):
    response = member_client.get(f"{api}/eval-cases/", {"status": "bogus"})
    assert response.status_code == 400 and "unknown status 'bogus'" in response.json()["status"][0]


def test_promoting_through_the_api_creates_then_finds_the_case(member_client, api, failure):
    body = {"trace_id": failure.trace_id, "span_id": failure.span_id, "tags": ["api"], "timeout_s": 9}
    created = post(member_client, f"{api}/eval-cases/", body)

    assert created.status_code == 201
    case = created.json()
    assert case["created"] and case["tool"] == "search_flights" and case["tags"] == ["api"]
    assert case["versions"][0]["timeout_s"] == 9 and case["versions"][0]["expect"]["error_class"] == "validation"
    assert [span["role"] for span in case["snapshot"]].count("tool") == 1
    assert case["observed"]["fingerprint"] == failure.fingerprint

    again = post(member_client, f"{api}/eval-cases/", body)
    assert again.status_code == 200 and again.json()["id"] == case["id"] and again.json()["created"] is False


def test_promoting_an_ok_call_is_a_400_and_an_unknown_span_a_404(member_client, api, failure):
    ok = ToolCall.objects.get(tool="lookup_order")
    refused = post(member_client, f"{api}/eval-cases/", {"trace_id": ok.trace_id, "span_id": ok.span_id})
    assert refused.status_code == 400 and "only failed calls" in refused.json()["span_id"][0]
    missing = post(member_client, f"{api}/eval-cases/", {"trace_id": ok.trace_id, "span_id": "00000000000000aa"})
    assert missing.status_code == 404
    bad = post(member_client, f"{api}/eval-cases/", {"trace_id": failure.trace_id, "span_id": failure.span_id,
                                                      "expect": {"outcome": "error", "next_action": "fly"}})  # fmt: skip
    assert bad.status_code == 400 and "unknown action 'fly'" in bad.json()["next_action"][0]


def test_the_case_detail_is_within_budget(member_client, api, pinned_cases, django_assert_max_num_queries):
    with django_assert_max_num_queries(9):
        body = member_client.get(f"{api}/eval-cases/{pinned_cases[0].pk}/").json()
    assert body["versions"][0]["pinned"] and len(body["snapshot"]) == 6


def test_patching_a_draft_edits_it_and_patching_a_pinned_case_makes_a_new_version(member_client, api, project, failure):
    case = promote(project, failure)
    edited = member_client.patch(f"{api}/eval-cases/{case.pk}/", {"expect": {"outcome": "success"}}, content_type="application/json")
    assert edited.status_code == 200 and len(edited.json()["versions"]) == 1
    assert edited.json()["versions"][0]["expect"]["outcome"] == "success"

    pinned = post(member_client, f"{api}/eval-cases/{case.pk}/pin/", {})
    assert pinned.status_code == 200
    version = case.versions.get(number=1)
    assert pinned.json()["content_hash"] == version.content_hash == expectations.content_hash(
        case.tool, version.arguments, version.expect, version.timeout_s
    )
    again = post(member_client, f"{api}/eval-cases/{case.pk}/pin/", {})
    assert again.status_code == 400 and "pinned already" in again.json()["version"][0]

    changed = member_client.patch(f"{api}/eval-cases/{case.pk}/", {"arguments": None, "title": "No args"}, content_type="application/json")
    versions = changed.json()["versions"]
    assert [v["version"] for v in versions] == [2, 1] and versions[0]["arguments"] is None and not versions[0]["pinned"]
    assert changed.json()["title"] == "No args" and changed.json()["pinned_version"] == 1
    listed = member_client.get(f"{api}/eval-cases/{case.pk}/versions/").json()
    assert [v["version"] for v in listed["results"]] == [2, 1]

    bad = member_client.patch(f"{api}/eval-cases/{case.pk}/", {"timeout_s": 99999}, content_type="application/json")
    assert bad.status_code == 400 and "timeout_s" in bad.json()


def test_retire_restore_and_tags(member_client, api, pinned_cases):
    case = pinned_cases[0]
    assert post(member_client, f"{api}/eval-cases/{case.pk}/retire/", {}).json()["status"] == "retired"
    assert post(member_client, f"{api}/eval-cases/{case.pk}/restore/", {}).json()["status"] == "pinned"
    tagged = member_client.put(f"{api}/eval-cases/{case.pk}/tags/", {"tags": ["A", "b"]}, content_type="application/json")
    assert tagged.json() == {"tags": ["a", "b"]}
    bad = member_client.put(f"{api}/eval-cases/{case.pk}/tags/", {"tags": [HOSTILE]}, content_type="application/json")
    assert bad.status_code == 400 and "is not a tag" in bad.json()["tags"][0]


# --- export ------------------------------------------------------------------------------


def test_the_export_answers_jsonl_whatever_the_client_accepts_and_filters_by_tag(member_client, api, pinned_cases):
    response = member_client.get(f"{api}/eval-cases/export.jsonl", {"status": "pinned", "tag": "t3"}, HTTP_ACCEPT="application/x-ndjson")
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert response.status_code == 200 and [json.loads(line)["case_id"] for line in lines] == [pinned_cases[3].pk]

    refused = member_client.get(f"{api}/eval-cases/export.jsonl", {"status": "draft"}, HTTP_ACCEPT="application/x-ndjson")
    assert refused.status_code == 400 and "only pinned versions" in refused.json()["status"][0]


# --- runs --------------------------------------------------------------------------------


def test_posting_a_run_answers_as_the_contract_says(member_client, api, project, pinned_cases):
    first = post(member_client, f"{api}/eval-runs/", run_body([result(case) for case in pinned_cases]))
    assert first.status_code == 201, first.content
    assert first.json() == {"id": first.json()["id"], "url": f"/p/{project.slug}/evals/runs/{first.json()['id']}/",
                            "passed": 4, "failed": 0, "errors": 0, "regressions": []}  # fmt: skip

    statuses = ["failed", "error", "passed", "passed"]
    second = post(member_client, f"{api}/eval-runs/", run_body(
        [result(case, status) for case, status in zip(pinned_cases, statuses, strict=True)], started="2025-03-01T13:00:00Z"
    ))  # fmt: skip
    assert second.status_code == 201
    body = second.json()
    assert (body["passed"], body["failed"], body["errors"]) == (2, 1, 1)
    assert body["regressions"] == [pinned_cases[0].pk, pinned_cases[1].pk]
    assert set(Alert.objects.filter(kind="eval_regression").values_list("tool", flat=True)) == {"tool_0", "tool_1"}
    run = EvalRun.objects.get(pk=body["id"])
    assert run.git_sha == "3f2c1a9e" and run.label == "git:3f2c1a9"


@pytest.mark.parametrize(
    "change, field",
    [
        ({"case_id": 987654}, "results[0].case_id"),
        ({"version": 2}, "results[0].version"),
        ({"content_hash": "sha256:beef"}, "results[0].content_hash"),
        ({"status": "flaky"}, "results[0].status"),
        ({"duration_ms": -1}, "results[0].duration_ms"),
        ({"observed": [1]}, "results[0].observed"),
        # Past what the columns hold: a 500 (OverflowError) on SQLite; duration_ms a DataError on PostgreSQL too.
        ({"case_id": 10**30}, "results[0].case_id"),
        ({"case_id": -(10**30)}, "results[0].case_id"),
        ({"case_id": 2**63}, "results[0].case_id"),
        ({"version": 10**30}, "results[0].version"),
        ({"duration_ms": 10**30}, "results[0].duration_ms"),
        ({"duration_ms": 2**31}, "results[0].duration_ms"),
        ({"duration_ms": 2147483647.6}, "results[0].duration_ms"),
        ({"duration_ms": 1e300}, "results[0].duration_ms"),
        # NUL, which PostgreSQL's jsonb cannot hold (SQLite kept it: a 201).
        ({"reasons": ["expected success\u0000"]}, "results[0].reasons"),
        ({"observed": {"ok": False, "message": "a\u0000b"}}, "results[0].observed"),
        ({"observed": {"ok\u0000": False}}, "results[0].observed"),
        ({"observed": {"contract": {"checks": ["\u0000"]}}}, "results[0].observed"),
    ],
)
def test_a_bad_result_field_is_a_400_naming_it(member_client, api, pinned_cases, change, field):
    response = post(member_client, f"{api}/eval-runs/", run_body([result(pinned_cases[0], **change)]))
    assert response.status_code == 400 and list(response.json()) == [field], response.json()
    assert not EvalRun.objects.exists()


@pytest.mark.parametrize(
    "change, field",
    [
        ({"label": ""}, "label"),
        ({"started_at": "yesterday"}, "started_at"),
        ({"finished_at": "2025-03-01T11:00:00Z"}, "finished_at"),
        ({"results": "all good"}, "results"),
    ],
)
def test_a_bad_run_field_is_a_400_naming_it(member_client, api, pinned_cases, change, field):
    response = post(member_client, f"{api}/eval-runs/", {**run_body([result(pinned_cases[0])]), **change})
    assert response.status_code == 400 and field in response.json(), response.json()


def test_the_largest_duration_the_column_holds_is_recorded(member_client, api, pinned_cases):
    response = post(member_client, f"{api}/eval-runs/", run_body([result(pinned_cases[0], duration_ms=2**31 - 1)]))

    assert response.status_code == 201, response.json()
    assert EvalRun.objects.get().results.get().duration_ms == 2**31 - 1


@pytest.mark.parametrize(
    "change, field",
    [({"arguments": {"query": "a\u0000"}}, "arguments"), ({"arguments": {"\u0000": 1}}, "arguments"),
     ({"arguments": [["\u0000"]]}, "arguments")],
)  # fmt: skip
def test_a_nul_in_a_case_s_arguments_is_a_400_naming_it(member_client, api, pinned_cases, change, field):
    # The arguments are stored as they come (jsonb): a 500 on PostgreSQL. The expectation is
    # rebuilt from known values (evals.expectations.validate), so a NUL never reaches its column.
    case = pinned_cases[0]
    response = member_client.patch(f"{api}/eval-cases/{case.pk}/", json.dumps(change), content_type="application/json")

    assert response.status_code == 400 and list(response.json()) == [field], response.json()
    assert case.versions.count() == 1


def test_runs_and_their_results_are_listed_within_budget(member_client, api, pinned_cases, django_assert_max_num_queries):
    for hour in ("12", "13", "14"):
        post(member_client, f"{api}/eval-runs/", run_body([result(case) for case in pinned_cases], started=f"2025-03-01T{hour}:00:00Z"))
    with django_assert_max_num_queries(5):
        runs = member_client.get(f"{api}/eval-runs/").json()
    assert runs["count"] == 3 and runs["results"][0]["started_at"].startswith("2025-03-01T14")
    run_id = runs["results"][0]["id"]
    with django_assert_max_num_queries(5):
        detail = member_client.get(f"{api}/eval-runs/{run_id}/").json()
    assert detail["regressions"] == [] and detail["passed"] == 4
    with django_assert_max_num_queries(6):
        results = member_client.get(f"{api}/eval-runs/{run_id}/results/").json()
    assert results["count"] == 4 and results["results"][0]["content_hash"].startswith("sha256:")
    with django_assert_max_num_queries(7):
        history = member_client.get(f"{api}/eval-cases/{pinned_cases[0].pk}/results/").json()
    assert history["count"] == 3


def test_a_run_can_be_posted_with_a_personal_api_token(client, member, api, pinned_cases):
    tokens = pytest.importorskip("dashboard.tokens")
    _, plain = tokens.api_token_create(user=member, name="ci")
    response = client.post(
        f"{api}/eval-runs/", json.dumps(run_body([result(pinned_cases[0])])), content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {plain}",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    assert EvalRun.objects.get().created_by == member


# --- scoping -----------------------------------------------------------------------------


def test_outsiders_get_404_on_every_evals_endpoint(client, outsider, api, pinned_cases):
    case = pinned_cases[0]
    run = services.run_record(project=case.project, label="x", started_at=case.created_at, finished_at=case.created_at,
                              results=[result(case)])  # fmt: skip
    client.force_login(outsider)
    for path in (
        "eval-cases/", f"eval-cases/{case.pk}/", f"eval-cases/{case.pk}/versions/", f"eval-cases/{case.pk}/results/",
        "eval-cases/export.jsonl", "eval-runs/", f"eval-runs/{run.pk}/", f"eval-runs/{run.pk}/results/",
    ):  # fmt: skip
        assert client.get(f"{api}/{path}").status_code == 404, path
    assert post(client, f"{api}/eval-runs/", run_body([result(case)])).status_code == 404
    assert post(client, f"{api}/eval-cases/{case.pk}/pin/", {}).status_code == 404
    assert post(client, f"{api}/eval-cases/", {"trace_id": case.trace_id, "span_id": case.span_id}).status_code == 404


def test_anonymous_callers_are_refused(client, api):
    assert client.get(f"{api}/eval-cases/").status_code in (401, 403)


# --- the runner <-> server REST contract -------------------------------------------------

CONTRACT = "X-Toolwatch-Runner-Contract"


def export_and_post(client, api, case, **headers):
    export = client.get(f"{api}/eval-cases/export.jsonl", headers=headers)
    posted = client.post(
        f"{api}/eval-runs/", json.dumps(run_body([result(case)])), content_type="application/json", headers=headers
    )
    return export, posted


@pytest.mark.parametrize("sent", [None, "1", " 1 "], ids=["no header (old runners)", "1", "1 with spaces"])
def test_the_runners_operations_speak_contract_1_and_name_the_versions_they_support(member_client, api, pinned_cases, sent):
    headers = {} if sent is None else {CONTRACT: sent}

    export, posted = export_and_post(member_client, api, pinned_cases[0], **headers)

    assert (export.status_code, posted.status_code) == (200, 201), posted.content
    assert export[CONTRACT] == posted[CONTRACT] == "1"


@pytest.mark.parametrize("sent", ["2", "0", "one", "1.0", "1,2", ""])
def test_a_contract_version_the_server_does_not_support_is_a_400_naming_the_header_and_the_supported_ones(
    member_client, api, pinned_cases, sent
):
    export, posted = export_and_post(member_client, api, pinned_cases[0], **{CONTRACT: sent})

    for response in (export, posted):
        assert response.status_code == 400
        assert response[CONTRACT] == "1"
        [message] = response.json()[CONTRACT]
        assert message.startswith(f"runner contract version {sent!r} is not supported; this server supports 1")
    assert not EvalRun.objects.exists()


def test_refusals_before_the_contract_check_name_the_supported_versions_too(client, outsider, api, pinned_cases):
    anonymous = client.get(f"{api}/eval-cases/export.jsonl", headers={CONTRACT: "1"})
    client.force_login(outsider)
    _, not_theirs = export_and_post(client, api, pinned_cases[0], **{CONTRACT: "1"})

    assert anonymous.status_code in (401, 403) and not_theirs.status_code == 404
    assert anonymous[CONTRACT] == not_theirs[CONTRACT] == "1"


def test_only_the_runners_operations_are_versioned(member_client, api, pinned_cases):
    # Listing runs shares the runs' URL but is not the runner's: a version there is ignored.
    response = member_client.get(f"{api}/eval-runs/", headers={CONTRACT: "99"})

    assert response.status_code == 200
    assert CONTRACT not in response
    assert CONTRACT not in member_client.get(f"{api}/eval-cases/")


def test_the_runner_speaks_a_contract_version_the_server_supports():
    from dashboard.api import evals as views
    from evals.runner import client

    assert client.CONTRACT_HEADER == views.RUNNER_CONTRACT_HEADER
    assert client.CONTRACT_VERSION in views.RUNNER_CONTRACTS


def test_the_schema_documents_the_contract_header_on_the_runners_operations():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    paths = schema["paths"]
    operations = {
        "eval_cases_export": paths["/api/v1/projects/{project}/eval-cases/export.jsonl"]["get"],
        "eval_runs_create": paths["/api/v1/projects/{project}/eval-runs/"]["post"],
    }
    for name, operation in operations.items():
        [parameter] = [p for p in operation["parameters"] if p["name"] == CONTRACT]
        assert (parameter["in"], parameter.get("required", False), parameter["schema"]["enum"]) == ("header", False, [1]), name
        assert all(CONTRACT in response.get("headers", {}) for response in operation["responses"].values()), name
    listing = paths["/api/v1/projects/{project}/eval-runs/"]["get"]
    assert CONTRACT not in [p["name"] for p in listing.get("parameters", [])]
