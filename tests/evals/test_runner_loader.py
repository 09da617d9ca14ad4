"""evals.runner.loader: JSONL export lines become cases, or problems naming the line."""

from __future__ import annotations

import json

import pytest

from evals.runner.loader import Case, LoadProblem, load_file, parse_text
from tests.evals.sample_tools import BAD_DATE_EXPECT, case, case_line


def only(text: str):
    [item] = parse_text(text, source="cases.jsonl")
    return item


def test_a_good_line_becomes_a_case_with_its_normalised_expectation():
    loaded = only(case_line(12, "search_flights", {"date": "31/01"}, BAD_DATE_EXPECT, version=3, timeout_s=30))
    assert isinstance(loaded, Case)
    assert (loaded.case_id, loaded.version, loaded.tool, loaded.timeout_s) == (12, 3, "search_flights", 30)
    assert loaded.arguments == {"date": "31/01"}
    assert loaded.expect == BAD_DATE_EXPECT
    assert (loaded.line, loaded.label, loaded.tags, loaded.project) == (1, "case 12 v3", ["checkout"], "shop")


def test_blank_lines_are_skipped_and_line_numbers_count_them(tmp_path):
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(["", case_line(1, "a"), "   ", case_line(2, "b")]) + "\n", encoding="utf-8")
    loaded = load_file(path)
    assert [(item.case_id, item.line) for item in loaded] == [(1, 2), (2, 4)]


def test_a_malformed_line_is_a_problem_naming_its_line_and_the_others_still_load():
    loaded = parse_text("\n".join([case_line(1, "a"), '{"case_id": 2, "tool": ', case_line(3, "c")]), source="cases.jsonl")
    assert [type(item) for item in loaded] == [Case, LoadProblem, Case]
    problem = loaded[1]
    assert problem.message.startswith("cases.jsonl line 2: not valid JSON")
    assert (problem.label, problem.postable) == ("line 2", False)


def test_a_line_that_is_not_an_object_is_a_problem():
    assert only("[1, 2]").problem == "not a JSON object"


def test_a_wrong_schema_version_is_a_problem_but_the_case_is_still_recognisable():
    problem = only(json.dumps(case(7, "a", schema_version=2)))
    assert problem.problem == "schema_version 2 is not supported (this runner reads 1)"
    assert (problem.case_id, problem.version, problem.label, problem.postable) == (7, 1, "case 7 v1", True)


def test_missing_fields_are_all_named():
    line = case(7, "a")
    del line["expect"], line["timeout_s"]
    assert only(json.dumps(line)).problem == "missing fields expect, timeout_s"


def test_arguments_may_be_null_but_must_be_present():
    line = case(7, "a")
    del line["arguments"]
    assert only(json.dumps(line)).problem == "missing field arguments"
    assert isinstance(only(case_line(7, "a", None)), Case)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"case_id": "12"}, 'case_id must be a positive integer, not "12"'),
        ({"version": 0}, "version must be a positive integer, not 0"),
        ({"content_hash": "md5:abc"}, 'content_hash must be \'sha256:\' and 64 hex digits, not "md5:abc"'),
        ({"tool": ""}, 'tool must be a non-empty string, not ""'),
        ({"timeout_s": -1}, "timeout_s must be a positive number of seconds, not -1"),
        ({"timeout_s": True}, "timeout_s must be a positive number of seconds, not true"),
        ({"expect": {"outcome": "maybe"}}, "expect.outcome: must be 'success' or 'error', not 'maybe'"),
    ],
)
def test_an_ill_typed_field_is_a_problem_naming_it(change, words):
    assert only(json.dumps(case(7, "a") | change)).problem == words


def test_a_content_hash_that_does_not_match_is_a_problem_that_is_never_posted():
    line = case(7, "a", {"q": 1}) | {"arguments": {"q": 2}}  # edited after export
    problem = only(json.dumps(line))
    assert problem.problem.startswith("content_hash does not match the case's content")
    assert problem.postable is False


def test_a_hostile_tool_name_is_kept_as_data():
    hostile = "<script>alert(1)</script><b>x</b>"
    assert only(case_line(1, hostile)).tool == hostile
