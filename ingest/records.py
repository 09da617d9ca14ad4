"""Plain records passed between the pure ingest modules.

`otlp.py` turns a request into `ResourceRecord`s and `SpanRecord`s; `normalize.py`
turns a tool span's `SpanRecord` into a `ToolCallRecord`; `storage.py` writes them.
Nothing here imports Django, so the decoder and the classifier can be reused outside
the server (the eval runner shares the classifier), and nothing needs more than the
standard library to import: the eval runner's distribution (toolwatch-runner) ships this
module without orjson.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

try:
    # A dependency of the server, which always has it (the decoder and storage import it
    # unconditionally), so stored digests are always orjson's bytes. The eval runner
    # imports this module for its dataclasses, never computes a digest, and has no orjson.
    from orjson import OPT_SORT_KEYS as _SORT_KEYS
    from orjson import dumps as _orjson_dumps
except ImportError:
    _orjson_dumps = None


def resource_digest(attributes: dict[str, Any]) -> bytes:
    """16 bytes naming a resource's attributes within a project: blake2b of their canonical JSON
    (keys sorted at every depth), so the same attributes in any order are one stored resource."""
    canonical = None
    if _orjson_dumps is not None:
        try:
            canonical = _orjson_dumps(attributes, option=_SORT_KEYS)
        except TypeError:  # orjson refuses integers beyond 64 bits
            pass
    if canonical is None:
        canonical = json.dumps(attributes, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.blake2b(canonical, digest_size=16).digest()


@dataclass(slots=True)
class ResourceRecord:
    """One ResourceSpans' resource, flattened and redacted once for all of its spans."""

    attributes: dict[str, Any]  # shared by the SpanRecords of the resource: treat as read-only
    digest: bytes  # resource_digest(attributes)
    service: str = "unknown_service"  # service.name
    environment: str = ""  # deployment.environment.name, else deployment.environment
    service_version: str = ""


@dataclass(slots=True)
class SpanRecord:
    """One OTLP span, flattened, redacted and validated.

    Attribute values are JSON-ready: str, bool, int, float, list, dict (kvlist);
    bytes become base64 strings. Strings never contain NUL (PostgreSQL rejects it).
    """

    trace_id: str  # 32 lower-case hex characters
    span_id: str  # 16 lower-case hex characters
    parent_span_id: str  # "" for a root span
    name: str
    kind: int  # OTLP SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer
    start_ns: int  # Unix epoch nanoseconds
    end_ns: int
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)
    resource_attributes: dict[str, Any] = dataclasses.field(default_factory=dict)
    # resource_digest(resource_attributes), computed once per resource by the decoder; storage
    # stores the attributes once per project and digest (ingest.models.Resource).
    resource_digest: bytes = b""
    scope_name: str = ""
    scope_version: str = ""
    # [{"name": str, "time_ns": int, "attributes": {...}}]
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # [{"trace_id": hex, "span_id": hex, "attributes": {...}}]
    links: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    trace_state: str = ""
    flags: int = 0
    service: str = "unknown_service"  # resource service.name
    environment: str = ""  # deployment.environment.name, else deployment.environment
    service_version: str = ""


@dataclass(slots=True)
class ToolCallRecord:
    """The normalised view of one tool span (docs/contract/spans.md). Pure data."""

    tool: str
    convention: str  # which convention recognised it: genai, openinference, openllmetry, mcp, span_name
    call_id: str = ""
    tool_type: str = ""
    attempt: int | None = None  # explicit tool.call.attempt (1 = first try)
    resend_count: int | None = None  # explicit http.request.resend_count
    arguments: Any = None
    arguments_hash: str = ""  # stable hash of the canonical arguments, "" when absent
    result: Any = None
    ok: bool = True
    soft_failure: bool = False  # failed by its result envelope while span status was not ERROR
    error_class: str = ""  # one of taxonomy.CLASSES, "" when ok
    classified_by: str = ""  # why: the evidence that decided, e.g. "http.response.status_code=503"
    error_type: str = ""
    error_code: str = ""
    message: str = ""
    retryable: bool | None = None  # as stated explicitly by the tool, None when not stated
    field: str = ""
    suggestion: str = ""
    retry_after_ms: int | None = None
    escalated: bool = False
    next_action: str = ""  # tool.next_action as recorded (what the controller did)
    agent: str = ""  # the span's own gen_ai.agent.name; ancestors are resolved later
    fingerprint: str = ""  # stable id of the failure shape, "" when ok
    # contract-quality checks of a failure: name -> True / False / None (not applicable)
    contract: dict[str, bool | None] = dataclasses.field(default_factory=dict)
