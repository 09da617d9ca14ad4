"""Pure: eval case versions as JSONL, schema_version 1 (docs/contract/eval-cases.md#runner--server-rest-contract, docs/eval-case.schema.json).

One JSON object per line, keys in the documented order, UTF-8 (no \\u escapes for
non-ASCII), each line ending in "\\n". The runner reads these lines back; the server never
parses them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

SCHEMA_VERSION = 1
CONTENT_TYPE = "application/x-ndjson"

# The observed failure, as exported: exactly these keys, in this order.
OBSERVED_FIELDS = (
    "error_class", "message", "error_type", "error_code", "retryable", "field", "suggestion",
    "retry_after_ms", "next_action", "contract", "fingerprint", "trace_id", "span_id", "observed_at",
)  # fmt: skip


def case_record(
    *,
    project: str,
    case_id: int,
    version: int,
    content_hash: str,
    title: str,
    tool: str,
    tags: list[str],
    arguments: Any,
    expect: dict,
    timeout_s: int,
    observed: dict,
) -> dict[str, Any]:
    """One exported line as a dict, in the contract's key order."""
    return {
        "schema_version": SCHEMA_VERSION,
        "project": project,
        "case_id": case_id,
        "version": version,
        "content_hash": content_hash,
        "title": title,
        "tool": tool,
        "tags": sorted(tags),
        "arguments": arguments,
        "expect": expect,
        "timeout_s": timeout_s,
        "observed": {name: observed.get(name, _EMPTY.get(name, "")) for name in OBSERVED_FIELDS},
    }


_EMPTY: dict[str, Any] = {"retryable": None, "retry_after_ms": None, "contract": {}}


def jsonl_line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def jsonl_lines(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    for record in records:
        yield jsonl_line(record)
