"""Tool modules the runner tests call, as a user's `--tools module:TOOLS` would be.

`flights_fixed` is a tool whose bugs are fixed (its cases pass), `flights_broken` the same
tool with the bugs back (its cases fail); `misc` holds tools that hang, raise, run async or
take their arguments in every shape. `case_line()` writes a JSONL export line for them.
"""

from __future__ import annotations

import json
from typing import Any

from evals.expectations import content_hash

# The two cases the flights modules are judged against.
BAD_DATE_ARGS = {"origin": "LHR", "destination": "JFK", "date": "31/01/2026"}
GOOD_DATE_ARGS = {"origin": "LHR", "destination": "JFK", "date": "2026-01-31"}
BAD_DATE_EXPECT = {
    "outcome": "error",
    "error_class": "validation",
    "contract_checks": ["field_named", "suggestion"],
    "next_action": "repair",
}
SUCCESS = {"outcome": "success"}


def case(
    case_id: int,
    tool: str,
    arguments: Any = None,
    expect: dict | None = None,
    *,
    version: int = 1,
    timeout_s: float = 5,
    **extra: Any,
) -> dict[str, Any]:
    """One exported case version (schema_version 1), its content hash computed."""
    expect = expect or SUCCESS
    return {
        "schema_version": 1,
        "project": "shop",
        "case_id": case_id,
        "version": version,
        "content_hash": content_hash(tool, arguments, expect, timeout_s),
        "title": f"{tool} case {case_id}",
        "tool": tool,
        "tags": ["checkout"],
        "arguments": arguments,
        "expect": expect,
        "timeout_s": timeout_s,
        "observed": None,
    } | extra


def case_line(*args: Any, **kwargs: Any) -> str:
    return json.dumps(case(*args, **kwargs))


def flights_cases() -> list[dict[str, Any]]:
    """Case 1: a bad date must be a validation error naming the field and its repair.
    Case 2: the search that used to time out upstream must now succeed."""
    return [case(1, "search_flights", BAD_DATE_ARGS, BAD_DATE_EXPECT, version=2), case(2, "search_flights", GOOD_DATE_ARGS)]
