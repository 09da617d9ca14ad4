"""The error envelope of Toolwatch's own MCP tools, and the results they answer with.

A failed tool call is a tool result with `isError: true` whose structured content is the
envelope of docs/contract/error-classes.md, spelled as Toolwatch's classifier reads it
(ingest/taxonomy.py FIELD_KEYS, SUGGESTION_KEYS, RETRY_AFTER_SECONDS_KEYS):

    {"error": {"class": "validation", "retryable": false, "field": "range",
               "suggestion": "use one of 1h, 24h, 7d, 30d, 90d", "retry_after": null,
               "message": "range='2w' is not one of 1h, 24h, 7d, 30d, 90d, custom"}}

so the calls an agent makes to Toolwatch pass Toolwatch's own contract checks
(tests/dashboard/mcp/test_contract.py scores every error through ingest/normalize.py).
The text content carries the same JSON, for clients that show the model only text.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from mcp.types import CallToolResult, TextContent

from ingest import taxonomy

# "rate_limited" is a spelling of transient (ingest/taxonomy.py); the rest are the classes themselves.
RATE_LIMITED = "rate_limited"
CLASSES = (*taxonomy.ERROR_CLASSES, RATE_LIMITED)
RETRYABLE = {RATE_LIMITED: True, taxonomy.TRANSIENT: True}  # every other class: not retryable


class ToolError(Exception):
    """A tool call that cannot be answered; becomes the envelope. `message` says what failed."""

    def __init__(
        self, error_class: str, message: str, *, field: str = "", suggestion: str = "", retry_after: int | None = None
    ) -> None:
        if error_class not in CLASSES:
            raise ValueError(f"unknown error class {error_class!r}")
        super().__init__(message)
        self.error_class = error_class
        self.message = message
        self.field = field
        self.suggestion = suggestion
        self.retry_after = retry_after

    @property
    def outcome(self) -> str:
        return self.error_class

    def envelope(self) -> dict[str, Any]:
        return {
            "error": {
                "class": self.error_class,
                "retryable": RETRYABLE.get(self.error_class, False),
                "field": self.field,
                "suggestion": self.suggestion,
                "retry_after": self.retry_after,
                "message": self.message,
            }
        }


def validation(field: str, message: str, suggestion: str) -> ToolError:
    return ToolError(taxonomy.VALIDATION, message, field=field, suggestion=suggestion)


def not_found(field: str, message: str, suggestion: str) -> ToolError:
    return ToolError(taxonomy.NOT_FOUND, message, field=field, suggestion=suggestion)


def _json(value: Any) -> str:
    # DjangoJSONEncoder: datetimes as ISO 8601, decimals and UUIDs as strings.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), cls=DjangoJSONEncoder)


def error_result(error: ToolError) -> CallToolResult:
    envelope = error.envelope()
    return CallToolResult(content=[TextContent(type="text", text=_json(envelope))], structured_content=envelope, is_error=True)


def ok_result(summary: str, data: dict[str, Any]) -> CallToolResult:
    """A summary line for the model, then the same data as the structured content, as JSON."""
    encoded = _json(data)
    text = f"{summary}\n{encoded}"
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=json.loads(encoded))
