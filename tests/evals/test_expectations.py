"""evals.expectations: validate, suggest, describe and content_hash (shared with the server)."""

from __future__ import annotations

import pytest

from evals.expectations import ExpectationError, content_hash, describe, suggest, validate
from ingest.taxonomy import CLASSES, CONTRACT_CHECKS

FULL = {"outcome": "error", "error_class": "validation", "contract_checks": ["field_named"], "next_action": "repair"}


def rejected(expect) -> ExpectationError:
    with pytest.raises(ExpectationError) as caught:
        validate(expect)
    return caught.value


# --- validate -------------------------------------------------------------------------------


def test_a_success_expectation_is_filled_out_with_empty_parts():
    assert validate({"outcome": "success"}) == {
        "outcome": "success", "error_class": None, "contract_checks": [], "next_action": None,
    }  # fmt: skip


def test_an_error_expectation_keeps_its_parts_and_orders_checks_as_the_taxonomy_does():
    normalised = validate({"outcome": "error", "contract_checks": ["no_internals", "explicit_class", "no_internals"]})
    assert normalised == {
        "outcome": "error", "error_class": None, "contract_checks": ["explicit_class", "no_internals"], "next_action": None,
    }  # fmt: skip


def test_validate_returns_a_copy_and_leaves_its_input_alone():
    expect = {"outcome": "error", "contract_checks": ["suggestion", "field_named"]}
    validate(expect)
    assert expect["contract_checks"] == ["suggestion", "field_named"]


def test_every_class_and_check_of_the_taxonomy_is_accepted():
    for error_class in CLASSES:
        assert validate({"outcome": "error", "error_class": error_class})["error_class"] == error_class
    checks = [name for name, _ in CONTRACT_CHECKS]
    assert validate({"outcome": "error", "contract_checks": checks})["contract_checks"] == checks


@pytest.mark.parametrize(
    ("expect", "field", "words"),
    [
        ("success", "expect", "must be an object, not a string"),
        ({"outcome": "maybe"}, "outcome", "'success' or 'error', not 'maybe'"),
        ({}, "outcome", "not null"),
        ({"outcome": "error", "error_class": "oops"}, "error_class", "unknown class 'oops'"),
        ({"outcome": "error", "contract_checks": "field_named"}, "contract_checks", "must be a list"),
        ({"outcome": "error", "contract_checks": ["polite"]}, "contract_checks", "unknown check 'polite'"),
        ({"outcome": "error", "next_action": "panic"}, "next_action", "unknown action 'panic'"),
        ({"outcome": "success", "error_class": "validation"}, "error_class", "only applies when the outcome is 'error'"),
        ({"outcome": "success", "contract_checks": ["field_named"]}, "contract_checks", "only applies"),
        ({"outcome": "success", "next_action": "retry"}, "next_action", "only applies"),
        ({"outcome": "error", "colour": "red"}, "colour", "unknown key"),
    ],
)
def test_a_bad_expectation_is_refused_naming_the_field_and_the_problem(expect, field, words):
    error = rejected(expect)
    assert error.field == field
    assert words in error.message


def test_a_check_that_cannot_apply_to_the_expected_class_is_refused():
    error = rejected({"outcome": "error", "error_class": "permission", "contract_checks": ["field_named"]})
    assert (error.field, error.message) == ("contract_checks", "field_named only applies to validation errors, not permission")
    assert rejected({"outcome": "error", "error_class": "validation", "contract_checks": ["retry_after"]}).field == "contract_checks"


def test_a_class_specific_check_is_fine_when_any_class_is_expected():
    assert validate({"outcome": "error", "contract_checks": ["retry_after"]})["contract_checks"] == ["retry_after"]


# --- suggest ----------------------------------------------------------------------------------


@pytest.mark.parametrize("error_class", ["transient", "unknown", "", None, "made_up"])
def test_a_transient_or_unknown_failure_should_now_succeed(error_class):
    assert suggest({"error_class": error_class, "contract": {"explicit_class": False}}) == validate({"outcome": "success"})


def test_a_validation_failure_should_name_the_field_and_suggest_the_repair():
    assert suggest({"error_class": "validation", "contract": {"field_named": True, "suggestion": False}}) == {
        "outcome": "error", "error_class": "validation", "contract_checks": ["field_named", "suggestion"],
        "next_action": "repair",
    }  # fmt: skip


def test_another_class_should_stay_that_class_and_pass_the_checks_it_failed():
    observed = {
        "error_class": "permission",
        "contract": {"explicit_class": False, "explicit_retryable": False, "specific_message": True, "retry_after": None},
    }
    assert suggest(observed) == {
        "outcome": "error", "error_class": "permission", "contract_checks": ["explicit_class", "explicit_retryable"],
        "next_action": "authorize",
    }  # fmt: skip


def test_a_suggestion_is_always_a_valid_expectation():
    for error_class in CLASSES:
        contract = {name: False for name, _ in CONTRACT_CHECKS}
        assert validate(suggest({"error_class": error_class, "contract": contract})) == suggest(
            {"error_class": error_class, "contract": contract}
        )


# --- describe ---------------------------------------------------------------------------------


def test_describe_says_each_expectation_in_one_sentence():
    assert describe({"outcome": "success"}) == "Succeeds."
    assert describe(FULL) == "Fails as validation, passing field_named, leading to repair."
    assert describe({"outcome": "error", "contract_checks": ["explicit_class", "no_internals", "specific_message"]}) == (
        "Fails (any class), passing explicit_class, specific_message and no_internals."
    )


# --- content_hash -----------------------------------------------------------------------------


def test_the_content_hash_is_sha256_of_the_canonical_json():
    import hashlib

    canonical = (
        '{"arguments":{"date":"31/01","from":"LHR"},"expect":{"contract_checks":[],"error_class":null,'
        '"next_action":null,"outcome":"success"},"timeout_s":30,"tool":"search_flights"}'
    )
    expected = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    assert content_hash("search_flights", {"from": "LHR", "date": "31/01"}, {"outcome": "success"}, 30) == expected


def test_equal_cases_hash_equal_however_they_are_written():
    one = content_hash("t", {"a": 1, "b": [1, 2]}, {"outcome": "success"}, 30)
    other = content_hash("t", {"b": [1, 2], "a": 1}, validate({"outcome": "success"}), 30.0)
    assert one == other


def test_any_change_to_the_case_changes_its_hash():
    base = content_hash("t", {"a": 1}, FULL, 30)
    assert base != content_hash("u", {"a": 1}, FULL, 30)
    assert base != content_hash("t", {"a": 2}, FULL, 30)
    assert base != content_hash("t", {"a": 1}, FULL | {"next_action": "stop"}, 30)
    assert base != content_hash("t", {"a": 1}, FULL, 31)


def test_non_ascii_arguments_hash_as_utf8():
    assert content_hash("t", {"city": "Zürich"}, {"outcome": "success"}, 5).startswith("sha256:")
    assert content_hash("t", {"city": "Zürich"}, {"outcome": "success"}, 5) != content_hash(
        "t", {"city": "Zurich"}, {"outcome": "success"}, 5
    )
