"""JSONL export, schema_version 1: the pure line builder, and exported lines against docs/eval-case.schema.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals import exporters, services
from tests.evals import schema_subset
from tests.evals.server_helpers import ingest_failure, project_key  # noqa: F401 - project_key: a fixture

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "eval-case.schema.json").read_text())
OBSERVED = {
    "error_class": "validation", "message": "'date' must be YYYY-MM-DD — é", "error_type": "", "error_code": "invalid_argument",
    "retryable": None, "field": "date", "suggestion": "", "retry_after_ms": None, "next_action": "repair",
    "contract": {"field_named": True, "suggestion": False}, "fingerprint": "0123456789abcdef", "classified_by": "result:code=x",
    "trace_id": "ab" * 16, "span_id": "cd" * 8, "observed_at": "2025-03-01T12:00:00Z",
}  # fmt: skip


def record(**changes) -> dict:
    fields = dict(
        project="shop", case_id=12, version=3, content_hash="sha256:" + "0" * 64, title="t", tool="search_flights",
        tags=["p1", "checkout"], arguments={"date": "tomorrow"}, timeout_s=30, observed=OBSERVED,
        expect={"outcome": "error", "error_class": "validation", "contract_checks": ["field_named"], "next_action": "repair"},
    )  # fmt: skip
    return exporters.case_record(**{**fields, **changes})


def test_a_record_has_the_contracts_keys_in_order_and_only_the_contracts_observed_fields():
    line = record()
    assert list(line) == [
        "schema_version", "project", "case_id", "version", "content_hash", "title", "tool", "tags", "arguments",
        "expect", "timeout_s", "observed",
    ]  # fmt: skip
    assert line["schema_version"] == 1 and line["tags"] == ["checkout", "p1"]
    assert "classified_by" not in line["observed"] and list(line["observed"]) == list(exporters.OBSERVED_FIELDS)


def test_lines_are_utf8_json_one_per_line():
    text = "".join(exporters.jsonl_lines([record(), record(case_id=13)]))
    lines = text.splitlines()
    assert len(lines) == 2 and text.endswith("\n")
    assert "é" in lines[0] and json.loads(lines[1])["case_id"] == 13


def test_a_record_is_valid_against_the_json_schema():
    assert schema_subset.errors(record(), SCHEMA) == []


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"schema_version": 2}, "is not 1"),
        ({"content_hash": "md5:00"}, "does not match"),
        ({"expect": {"outcome": "maybe", "error_class": None, "contract_checks": [], "next_action": None}}, "is not one of"),
        ({"observed": {**OBSERVED, "error_class": "oops"}}, "is not one of"),
        ({"surprise": 1}, "unexpected key 'surprise'"),
    ],
)
def test_the_schema_refuses_what_the_contract_does_not_allow(change, problem):
    line = {**record(), **change}
    assert any(problem in error for error in schema_subset.errors(line, SCHEMA))


@pytest.mark.django_db
def test_exported_lines_from_promoted_and_pinned_cases_are_valid_against_the_schema(client, member_client, project, project_key):
    for message in ("'date' must be YYYY-MM-DD", "<script>alert(1)</script> é"):
        call = ingest_failure(client, project_key[1], message=message)
        case = services.case_promote(project=project, trace_id=call.trace_id, span_id=call.span_id, tags=["p1"]).case
        services.case_pin(case=case)

    response = member_client.get(f"/api/v1/projects/{project.slug}/eval-cases/export.jsonl")

    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert len(lines) == 2
    for line in lines:
        assert schema_subset.errors(line, SCHEMA) == []
        assert line["project"] == project.slug and line["tags"] == ["p1"]


@pytest.mark.django_db
def test_the_export_command_writes_the_same_lines_to_a_file(client, project, project_key, tmp_path):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    call = ingest_failure(client, project_key[1])
    case = services.case_promote(project=project, trace_id=call.trace_id, span_id=call.span_id).case
    services.case_pin(case=case)
    target = tmp_path / "cases.jsonl"

    call_command("export_evalcases", project.slug, "-o", str(target))

    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [line["case_id"] for line in lines] == [case.pk] and schema_subset.errors(lines[0], SCHEMA) == []
    with pytest.raises(CommandError, match="no project with the slug 'nope'"):
        call_command("export_evalcases", "nope")
