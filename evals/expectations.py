"""What an eval case expects of its tool call, shared by the server and the runner (docs/contract/eval-cases.md#expectation).

Pure, stdlib plus `ingest.taxonomy`: the standalone runner ships this module, and the
server imports it to validate an expectation, suggest one at promotion, describe it on
pages and hash a pinned version. One implementation, so both sides always agree.

An expectation (docs/contract/eval-cases.md#expectation):
    {"outcome": "success" | "error",
     "error_class": "<class>" | None,   # only with outcome "error"; None = any class
     "contract_checks": ["field_named", ...],   # only with outcome "error"
     "next_action": "<action>" | None}  # only with outcome "error"
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ingest.taxonomy import (
    CLASSES,
    CONTRACT_CHECKS,
    NEXT_ACTIONS,
    TRANSIENT,
    UNKNOWN,
    VALIDATION,
    recommended_action,
)

__all__ = ["ExpectationError", "OUTCOMES", "content_hash", "describe", "suggest", "validate"]

OUTCOMES = ("success", "error")
FIELDS = ("outcome", "error_class", "contract_checks", "next_action")
CHECK_NAMES = tuple(name for name, _ in CONTRACT_CHECKS)

# Checks the classifier only applies to one class (None, "not applicable", for the others):
# expecting them of another class could never pass.
CHECK_ONLY_FOR_CLASS = {"retry_after": TRANSIENT, "field_named": VALIDATION, "suggestion": VALIDATION}


class ExpectationError(ValueError):
    """An expectation that cannot be judged; `field` names the part at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def validate(expect: Any) -> dict[str, Any]:
    """A normalised copy of `expect`: all four keys present, checks deduplicated in
    `CONTRACT_CHECKS` order. Raises `ExpectationError(field, message)` on anything else."""
    if not isinstance(expect, dict):
        raise ExpectationError("expect", f"must be an object, not {_json_type(expect)}")
    unknown = sorted(set(expect) - set(FIELDS))
    if unknown:
        raise ExpectationError(unknown[0], f"unknown key; an expectation has {', '.join(FIELDS)}")

    outcome = expect.get("outcome")
    if outcome not in OUTCOMES:
        raise ExpectationError("outcome", f"must be 'success' or 'error', not {_show(outcome)}")

    error_class = expect.get("error_class")
    checks = expect.get("contract_checks")
    checks = [] if checks is None else checks
    next_action = expect.get("next_action")

    if outcome == "success":
        for field, value in (("error_class", error_class), ("contract_checks", checks), ("next_action", next_action)):
            if value not in (None, []):
                raise ExpectationError(field, "only applies when the outcome is 'error'")
        return {"outcome": "success", "error_class": None, "contract_checks": [], "next_action": None}

    if error_class is not None and error_class not in CLASSES:
        raise ExpectationError("error_class", f"unknown class {_show(error_class)}; one of {', '.join(CLASSES)}")
    if not isinstance(checks, list):
        raise ExpectationError("contract_checks", f"must be a list of check names, not {_json_type(checks)}")
    for name in checks:
        if name not in CHECK_NAMES:
            raise ExpectationError("contract_checks", f"unknown check {_show(name)}; one of {', '.join(CHECK_NAMES)}")
        only_for = CHECK_ONLY_FOR_CLASS.get(name)
        if only_for and error_class not in (None, only_for):
            raise ExpectationError(
                "contract_checks", f"{name} only applies to {only_for} errors, not {error_class}"
            )
    if next_action is not None and next_action not in NEXT_ACTIONS:
        raise ExpectationError("next_action", f"unknown action {_show(next_action)}; one of {', '.join(NEXT_ACTIONS)}")
    return {
        "outcome": "error",
        "error_class": error_class,
        "contract_checks": [name for name in CHECK_NAMES if name in checks],
        "next_action": next_action,
    }


def suggest(observed: dict[str, Any]) -> dict[str, Any]:
    """The default expectation for a promoted failure, from its observed record.

    A transient or unknown failure (or none at all) should now succeed; a validation error
    should stay one but name the field and suggest the repair; any other class should stay
    that class and pass the contract checks it failed ("make the error actionable").
    Error outcomes also expect the class's recommended next action.
    """
    error_class = (observed or {}).get("error_class") or UNKNOWN
    if error_class in (TRANSIENT, UNKNOWN) or error_class not in CLASSES:
        return validate({"outcome": "success"})
    if error_class == VALIDATION:
        checks = ["field_named", "suggestion"]
    else:
        contract = observed.get("contract") or {}
        checks = [
            name
            for name in CHECK_NAMES
            if contract.get(name) is False and CHECK_ONLY_FOR_CLASS.get(name, error_class) == error_class
        ]
    return validate(
        {
            "outcome": "error",
            "error_class": error_class,
            "contract_checks": checks,
            "next_action": recommended_action(error_class),
        }
    )


def describe(expect: dict[str, Any]) -> str:
    """One sentence for pages, e.g. "Fails as validation, passing field_named and suggestion, leading to repair."
    """
    expect = validate(expect)
    if expect["outcome"] == "success":
        return "Succeeds."
    parts = [f"Fails as {expect['error_class']}" if expect["error_class"] else "Fails (any class)"]
    if expect["contract_checks"]:
        parts.append(f"passing {_and(expect['contract_checks'])}")
    if expect["next_action"]:
        parts.append(f"leading to {expect['next_action']}")
    return ", ".join(parts) + "."


def content_hash(tool: str, arguments: Any, expect: dict[str, Any], timeout_s: float) -> str:
    """"sha256:<hex>" of the canonical JSON (sorted keys, no spaces, UTF-8) of a case version's
    {"tool", "arguments", "expect", "timeout_s"}. The expectation is normalised first and a
    whole-number timeout counts as an int, so equal cases hash equal however they were written."""
    if isinstance(timeout_s, float) and timeout_s.is_integer():
        timeout_s = int(timeout_s)
    body = {"tool": tool, "arguments": arguments, "expect": validate(expect), "timeout_s": timeout_s}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else json.dumps(value, default=str)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")
