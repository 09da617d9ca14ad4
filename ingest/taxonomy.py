"""The tool-error taxonomy: every table that says what kind of failure a tool call had.

This is the one place to extend per project. `normalize.py` reads these tables in the
docs/contract/error-classes.md#evidence-order and holds no spellings of its own, so teaching Toolwatch a
project's vocabulary means adding a row here (an envelope spelling to `SYNONYMS`, an
exception class to `EXCEPTION_CLASSES`, a phrase to `MESSAGE_PATTERNS`) and a test in
`tests/ingest/test_normalize.py`.

Sections, in the order the classifier consults them:
1. the canonical `CLASSES` and their next actions;
2. envelope keys (`CLASS_KEYS`, `RETRYABLE_KEYS`, ...) and the `SYNONYMS` of class names;
3. status codes: `HTTP_STATUS_CLASSES`, `GRPC_CODES`, `JSONRPC_CODES`;
4. exception and `error.type` names: `EXCEPTION_CLASSES`, `NAME_MESSAGE_REFINEMENTS`,
   `EXCEPTION_NAME_PATTERNS`, and last (after the messages) `BROAD_EXCEPTION_CLASSES`;
5. message phrases, weak evidence (only broad names come later): `MESSAGE_PATTERNS`;
6. contract quality: `GENERIC_MESSAGES`, `INTERNALS`, `CONTRACT_CHECKS`;
7. senders whose tool spans have a shape of their own (Claude Code): `NATIVE_TOOL_SPANS`.

Pure data and tiny helpers, stdlib only: the standalone eval runner ships this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from http import HTTPStatus

# --- 1. Classes and next actions (docs/contract/error-classes.md) --------------------------------------------

TRANSIENT = "transient"
VALIDATION = "validation"
PERMISSION = "permission"
NOT_FOUND = "not_found"
BUSINESS = "business"
USER_INPUT = "user_input"
FATAL = "fatal"
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ErrorClass:
    name: str
    retryable: bool | None  # None: nothing says (unknown)
    next_action: str  # a key of NEXT_ACTIONS
    meaning: str


CLASSES: dict[str, ErrorClass] = {
    c.name: c
    for c in (
        ErrorClass(TRANSIENT, True, "retry", "timeout, rate limit, 5xx, connection reset"),
        ErrorClass(VALIDATION, False, "repair", "bad or missing argument"),
        ErrorClass(PERMISSION, False, "authorize", "missing or expired credential or scope"),
        ErrorClass(NOT_FOUND, False, "replace", "the record or resource does not exist"),
        ErrorClass(BUSINESS, False, "escalate", "a rule or policy refuses it"),
        ErrorClass(USER_INPUT, False, "ask_user", "ambiguous: a human must choose"),
        ErrorClass(FATAL, False, "stop", "tool gone, schema mismatch, unrecoverable"),
        ErrorClass(UNKNOWN, None, "none", "nothing says which: a contract defect"),
    )
}

# The class names in display order: the one list (rollup columns, charts, filters use it).
ERROR_CLASSES: tuple[str, ...] = tuple(CLASSES)

NEXT_ACTIONS: dict[str, str] = {
    "retry": "retry with backoff, honour retry-after",
    "repair": "repair the named field and call again",
    "authorize": "re-authorize, or hand to a human for approval",
    "replace": "use another id or tool, or stop",
    "escalate": "escalate to a human and explain the rule",
    "ask_user": "ask the user to choose, with options",
    "stop": "stop: another attempt cannot succeed",
    "none": "nothing to derive: the error contract is defective",
}

# `tool.next_action` values that mean a human was pulled in (docs/contract/attempts.md).
ESCALATION_ACTIONS = frozenset({"authorize", "ask_user", "escalate"})


def recommended_action(error_class: str) -> str:
    """The next action a controller should take for a class; "none" for unknown or ""."""
    cls = CLASSES.get(error_class)
    return cls.next_action if cls else "none"


# --- 2. Envelopes: where a tool states its error, and its spellings ---------------------
# Keys are looked up in this order inside each dict of an envelope. Span attributes
# (`tool.error.*`) and result keys share the tuples: a dict never holds both kinds.

# Keys that only ever name an error class: a recognised value there makes a result an error.
STATED_CLASS_KEYS = (
    "tool.error.class", "errorClass", "error_class", "errorCategory", "error_category",
    "error_type", "errorType",
)  # fmt: skip
# Keys that also appear in successful payloads ({"class": "business"} can be a seat):
# they make a result an error only next to a message or retryable key.
AMBIGUOUS_CLASS_KEYS = ("class", "category")
CODE_KEYS = ("tool.error.code", "code", "errorCode", "error_code")
# Read for classification once a result is known to be an error, never to decide that it is.
LOOSE_CLASS_KEYS = ("type", "status")
# Keys whose one-word value is a code and whose prose is a message (OAuth's
# {"error": "invalid_grant"} against seed 2's {"error": "User not found"}).
WORD_CODE_KEYS = ("error",)
CLASS_KEYS = STATED_CLASS_KEYS + AMBIGUOUS_CLASS_KEYS + CODE_KEYS + LOOSE_CLASS_KEYS + WORD_CODE_KEYS

RETRYABLE_KEYS = (
    "tool.error.retryable", "retryable", "isRetryable", "is_retryable", "retriable",
    "recoverable", "isRecoverable", "is_recoverable",
)  # fmt: skip
# gh-aw MCP Scripts: `data.recoverable` is authoritative; true means transient.
RECOVERABLE_KEYS = ("recoverable", "isRecoverable", "is_recoverable")
FIELD_KEYS = ("tool.error.field", "field", "fieldName", "field_name", "param", "parameter", "argument")
SUGGESTION_KEYS = (
    "tool.error.suggestion", "suggestion", "recoverySteps", "recovery_steps", "hint",
    "instruction", "instructions", "retryHint", "retry_hint", "remediation", "fix", "suggestions",
)  # fmt: skip
RETRY_AFTER_MS_KEYS = ("tool.error.retry_after_ms", "retryAfterMs", "retry_after_ms")
# `retryAfter` without a unit is read as seconds, like the HTTP Retry-After header.
RETRY_AFTER_SECONDS_KEYS = ("retryAfterSeconds", "retry_after_seconds", "retryAfter", "retry_after")
MESSAGE_KEYS = (
    "tool.error.message", "message", "description", "error", "reason", "detail",
    "error_description", "errorMessage", "error_message", "title", "text", "result",
)  # fmt: skip
# An HTTP status stated inside an envelope (Google API errors, RFC 9457 problem details).
STATUS_KEYS = ("status", "statusCode", "status_code", "httpStatus", "http_status")
SUCCESS_FLAG_KEYS = ("success", "ok")  # false means failed
# true means failed: MCP's CallToolResult, and Traceloop's MCP output {"result": …, "is_error": true}
ERROR_FLAG_KEYS = ("isError", "is_error")

# Spellings of each class, as tools write them. Matching ignores case, "_", "-", "." and
# spaces, and retries without an "Error"/"Exception" suffix: "RATE_LIMITED", "rate-limited"
# and "RateLimitError" are one row.
SYNONYMS: dict[str, tuple[str, ...]] = {
    TRANSIENT: (
        "transient", "retryable", "retriable", "retry", "try_again", "temporary",
        "temporary_failure", "temporarily_unavailable", "rate_limited", "rate_limit",
        "rate_limit_exceeded", "throttled", "throttling", "too_many_requests", "timeout",
        "timed_out", "deadline_exceeded", "unavailable", "service_unavailable",
        "upstream_unavailable", "upstream_error", "upstream", "bad_gateway", "gateway_timeout",
        "network", "network_error", "connection", "connection_error", "connection_reset",
        "connection_refused", "unreachable", "server_error", "overloaded",
        "busy", "resource_exhausted", "infrastructure", "infra", "recoverable",
    ),
    VALIDATION: (
        "validation", "invalid", "invalid_argument", "invalid_arguments", "invalid_params",
        "invalid_parameter", "invalid_parameters", "invalid_input", "invalid_request",
        "bad_request", "bad_input", "bad_argument", "bad_arguments", "malformed",
        "malformed_input", "malformed_request", "parse", "parse_error", "missing_argument",
        "missing_parameter", "missing_field", "missing_required_field", "required_field",
        "out_of_range", "unprocessable", "unprocessable_entity", "schema_validation",
        "input_validation", "failed_precondition", "type_error", "value_error",
        "argument_error", "invalid_format", "bad_format",
    ),
    PERMISSION: (
        "permission", "permissions", "permission_denied", "unauthorized", "unauthorised",
        "unauthenticated", "forbidden", "auth", "auth_error", "auth_required", "authRequired",
        "authentication", "authentication_required", "authorization", "authorization_required",
        "access_denied", "not_authorized", "not_permitted", "missing_scope", "insufficient_scope",
        "insufficient_permissions", "token_expired", "expired_token", "invalid_token",
        "missing_token", "invalid_api_key", "invalid_credentials", "missing_credentials",
        "invalid_grant", "invalid_client", "invalid_scope", "unauthorized_client",
        "credentials_expired", "reauth_required", "login_required", "approval_required",
    ),
    NOT_FOUND: (
        "not_found", "no_such", "no_such_resource", "does_not_exist", "resource_not_found",
        "record_not_found", "method_not_found", "tool_not_found", "unknown_tool", "gone",
    ),
    BUSINESS: (
        "business", "business_logic", "business_rule", "policy", "policy_violation",
        "policy_violated", "rule", "rule_violation", "not_allowed", "limit_exceeded",
        "insufficient_funds", "insufficient_balance", "conflict", "already_exists",
        "duplicate", "declined", "rejected", "refused", "precondition_failed", "ineligible",
    ),
    USER_INPUT: (
        "user_input", "userInput", "user_input_required", "needs_input", "needs_user_input",
        "ambiguous", "ambiguous_match", "ambiguous_input", "multiple_matches",
        "confirmation_required", "needs_confirmation", "clarification_required",
        "clarification_needed", "ask_user", "disambiguation", "human_input_required",
    ),
    FATAL: (
        "fatal", "non_recoverable", "nonrecoverable", "unrecoverable", "not_recoverable",
        "irrecoverable", "not_implemented", "unimplemented", "schema_mismatch", "tool_gone",
        "tool_removed", "tool_disabled", "tool_deprecated",
    ),
}

# Seed 2's coarse class: "will not succeed without a changed call". It says only "not
# retryable"; the finer class comes from later evidence, validation when none is finer.
PERMANENT_SPELLINGS = ("permanent", "non_retryable", "not_retryable", "no_retry")

# Spellings that say a failure happened, not which kind (MCP `error.type = tool_error`,
# semconv `_OTHER`, JSON-RPC's internal error): classification moves on to other evidence.
NON_DECIDING_SPELLINGS = (
    "tool_error", "MCPToolError", "_OTHER", "other", "error", "errors", "unknown", "unknown_error", "internal",
    "internal_error", "unspecified", "generic", "failure", "failed", "exception",
)  # fmt: skip

# A project's own codes usually name the class at one end: USER_NOT_FOUND, INVALID_DATE.
SPELLING_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("notfound", NOT_FOUND), ("doesnotexist", NOT_FOUND), ("timeout", TRANSIENT),
    ("timedout", TRANSIENT), ("ratelimited", TRANSIENT), ("ratelimit", TRANSIENT),
    ("throttled", TRANSIENT), ("unavailable", TRANSIENT), ("forbidden", PERMISSION),
    ("unauthorized", PERMISSION), ("denied", PERMISSION), ("invalid", VALIDATION),
)  # fmt: skip
SPELLING_PREFIXES: tuple[tuple[str, str], ...] = (
    ("invalid", VALIDATION), ("missing", VALIDATION), ("malformed", VALIDATION), ("nosuch", NOT_FOUND),
)  # fmt: skip
_STRIPPED_SUFFIXES = ("exception", "errors", "error", "failure")


_NOT_ALNUM = re.compile(r"[^a-z0-9]")


def squash(spelling: str) -> str:
    """The comparable form of a spelling: lower case, letters and digits only."""
    return _NOT_ALNUM.sub("", spelling.lower())


_SPELLING_CLASS = {squash(s): cls for cls, spellings in SYNONYMS.items() for s in spellings}
_PERMANENT = frozenset(squash(s) for s in PERMANENT_SPELLINGS)
_NON_DECIDING = frozenset(squash(s) for s in NON_DECIDING_SPELLINGS)


def class_for_spelling(spelling: str) -> str | None:
    """The class a tool's own class or code spelling names, or None when it names none."""
    return _class_for_squashed(squash(spelling))


def is_permanent_spelling(spelling: str) -> bool:
    return squash(spelling) in _PERMANENT


def read_spelling(spelling: str) -> tuple[str | None, bool]:
    """(class_for_spelling, is_permanent_spelling) of one spelling, squashed once."""
    key = squash(spelling)
    return _class_for_squashed(key), key in _PERMANENT


def _class_for_squashed(key: str) -> str | None:
    if not key or key in _PERMANENT or key in _NON_DECIDING:
        return None
    if key in _SPELLING_CLASS:
        return _SPELLING_CLASS[key]
    for suffix in _STRIPPED_SUFFIXES:
        if key.endswith(suffix) and key[: -len(suffix)] in _SPELLING_CLASS:
            return _SPELLING_CLASS[key[: -len(suffix)]]
    for suffix, cls in SPELLING_SUFFIXES:
        if key.endswith(suffix):
            return cls
    for prefix, cls in SPELLING_PREFIXES:
        if key.startswith(prefix):
            return cls
    return None


# --- 3. Status codes ------------------------------------------------------------------

# HTTP: anything 5xx not listed is transient (docs/contract/error-classes.md); other 4xx decide nothing.
HTTP_STATUS_CLASSES: dict[int, str] = {
    400: VALIDATION, 413: VALIDATION, 414: VALIDATION, 415: VALIDATION, 422: VALIDATION,
    401: PERMISSION, 403: PERMISSION, 407: PERMISSION,
    404: NOT_FOUND, 410: NOT_FOUND,
    409: BUSINESS, 412: BUSINESS, 451: BUSINESS,
    408: TRANSIENT, 423: TRANSIENT, 425: TRANSIENT, 429: TRANSIENT,
    # The server does not implement the operation: no retry can succeed.
    501: FATAL,
}  # fmt: skip


def class_for_http_status(code: int) -> str | None:
    if code in HTTP_STATUS_CLASSES:
        return HTTP_STATUS_CLASSES[code]
    if 500 <= code <= 599:
        return TRANSIENT
    return None


# gRPC status codes (number, name, class). OTLP's retry table is for telemetry export;
# for tool calls OUT_OF_RANGE is a bad argument, INTERNAL mirrors HTTP 500 and DATA_LOSS
# ("unrecoverable data loss or corruption") cannot be retried away.
GRPC_CODES: tuple[tuple[int, str, str | None], ...] = (
    (0, "OK", None), (1, "CANCELLED", TRANSIENT), (2, "UNKNOWN", None),
    (3, "INVALID_ARGUMENT", VALIDATION), (4, "DEADLINE_EXCEEDED", TRANSIENT),
    (5, "NOT_FOUND", NOT_FOUND), (6, "ALREADY_EXISTS", BUSINESS),
    (7, "PERMISSION_DENIED", PERMISSION), (8, "RESOURCE_EXHAUSTED", TRANSIENT),
    (9, "FAILED_PRECONDITION", VALIDATION), (10, "ABORTED", TRANSIENT),
    (11, "OUT_OF_RANGE", VALIDATION), (12, "UNIMPLEMENTED", FATAL), (13, "INTERNAL", TRANSIENT),
    (14, "UNAVAILABLE", TRANSIENT), (15, "DATA_LOSS", FATAL), (16, "UNAUTHENTICATED", PERMISSION),
)  # fmt: skip
_GRPC_BY_NUMBER = {number: cls for number, _, cls in GRPC_CODES}
_GRPC_BY_NAME = {name: cls for _, name, cls in GRPC_CODES}
_HTTP_STATUS_BY_NAME = {status.name: status.value for status in HTTPStatus}


def class_for_grpc(code: int | str) -> str | None:
    """A gRPC code as a number, "14", "UNAVAILABLE", "StatusCode.UNAVAILABLE" or connect's "unavailable"."""
    if isinstance(code, int):
        return _GRPC_BY_NUMBER.get(code)
    text = code.strip()
    if text.isdigit():
        return _GRPC_BY_NUMBER.get(int(text))
    return _GRPC_BY_NAME.get(text.rsplit(".", 1)[-1].upper())


# JSON-RPC 2.0 and MCP error codes. -32603 (internal) is what gh-aw uses for every
# execution error, so it decides nothing: `data.recoverable` or other evidence must.
JSONRPC_CODES: dict[int, str | None] = {
    -32700: VALIDATION,  # parse error
    -32600: VALIDATION,  # invalid request
    -32601: NOT_FOUND,  # method not found
    -32602: VALIDATION,  # invalid params
    -32603: None,  # internal error
    -32002: NOT_FOUND,  # MCP: resource not found
    -32020: FATAL,  # MCP: header mismatch
    -32021: FATAL,  # MCP: missing required client capability
    -32022: FATAL,  # MCP: unsupported protocol version
}
# MCP's own example sends an unknown tool as -32602: the message tells it apart.
UNKNOWN_TOOL_MESSAGE = re.compile(r"unknown tool|tool not found|no such tool", re.IGNORECASE)


def class_for_jsonrpc(code: int) -> str | None:
    return JSONRPC_CODES.get(code)


# --- 4. Exception and error.type names ---------------------------------------------------
# Looked up by the full name (a Go pointer's "*" dropped), then by its last component after
# "." or "::" (so anthropic.NotFoundError finds NotFoundError, std::io::ErrorKind::TimedOut
# finds TimedOut), then by the code of an "Error:CODE" / "Error_CODE" category (Claude Code's
# "Error:ENOENT"); then through SYNONYMS, as an HTTP status name (Traceloop's MCP
# instrumentation sets error.type "SERVICE_UNAVAILABLE"), then through EXCEPTION_NAME_PATTERNS.
# Keys are exact (case-sensitive): a runtime's own spelling, full name or last component.
# A name of BROAD_EXCEPTION_CLASSES decides nothing here: it decides only after the messages.

EXCEPTION_CLASSES: dict[str, str] = {
    # --- Python (stdlib, httpx, requests, openai, aiohttp, pydantic, stripe, Django)
    # transient
    "TimeoutError": TRANSIENT, "asyncio.TimeoutError": TRANSIENT, "socket.timeout": TRANSIENT,
    "concurrent.futures.TimeoutError": TRANSIENT, "httpx.ReadTimeout": TRANSIENT,
    "requests.exceptions.ReadTimeout": TRANSIENT, "requests.exceptions.Timeout": TRANSIENT,
    "openai.APITimeoutError": TRANSIENT, "openai.RateLimitError": TRANSIENT,
    "ConnectionError": TRANSIENT, "ConnectionResetError": TRANSIENT,
    "ConnectionRefusedError": TRANSIENT, "ConnectionAbortedError": TRANSIENT,
    "BrokenPipeError": TRANSIENT, "httpx.ConnectError": TRANSIENT,
    "httpx.RemoteProtocolError": TRANSIENT, "openai.APIConnectionError": TRANSIENT,
    "openai.InternalServerError": TRANSIENT, "aiohttp.ServerDisconnectedError": TRANSIENT,
    "OperationalError": TRANSIENT,
    # permission
    "PermissionError": PERMISSION, "openai.AuthenticationError": PERMISSION,
    "openai.PermissionDeniedError": PERMISSION, "PermissionDenied": PERMISSION,
    "NoCredentialsError": PERMISSION, "RefreshError": PERMISSION,
    # validation (KeyError: inside a tool it is nearly always a missing key of the
    # arguments dict, i.e. a missing argument, not a missing record)
    "ValueError": VALIDATION, "TypeError": VALIDATION, "KeyError": VALIDATION,
    "IndexError": VALIDATION, "UnicodeError": VALIDATION, "json.JSONDecodeError": VALIDATION,
    "json.decoder.JSONDecodeError": VALIDATION, "pydantic.ValidationError": VALIDATION,
    "pydantic_core._pydantic_core.ValidationError": VALIDATION, "ValidationError": VALIDATION,
    "openai.BadRequestError": VALIDATION, "openai.UnprocessableEntityError": VALIDATION,
    "SyntaxError": VALIDATION, "RangeError": VALIDATION,
    # not_found
    "FileNotFoundError": NOT_FOUND, "LookupError": NOT_FOUND, "openai.NotFoundError": NOT_FOUND,
    "ObjectDoesNotExist": NOT_FOUND, "DoesNotExist": NOT_FOUND,
    # business
    "openai.ConflictError": BUSINESS, "stripe.error.CardError": BUSINESS, "CardError": BUSINESS,
    # fatal
    "NotImplementedError": FATAL, "ImportError": FATAL, "ModuleNotFoundError": FATAL,
    #
    # --- Node.js. The OTel JS SDK's Span.recordException writes an error's `code` as
    # exception.type when it has one, else its `name` (opentelemetry-js sdk-trace-base Span.ts),
    # so Node failures arrive as errno-style codes. Codes: nodejs.org/api/errors.html "Common
    # system errors" and libuv's uv-errno map (EAI_AGAIN "temporary failure"). ENOTFOUND is
    # "DNS lookup failed" (EAI_NODATA / EAI_NONAME): the host name does not resolve, so no retry
    # can succeed (fatal), while EAI_AGAIN is the resolver's temporary failure (transient).
    "ECONNRESET": TRANSIENT, "ETIMEDOUT": TRANSIENT, "ECONNREFUSED": TRANSIENT,
    "ECONNABORTED": TRANSIENT, "EPIPE": TRANSIENT, "EAI_AGAIN": TRANSIENT,
    "EHOSTUNREACH": TRANSIENT, "ENETUNREACH": TRANSIENT, "ENOTFOUND": FATAL,
    "ENOENT": NOT_FOUND, "EACCES": PERMISSION, "EPERM": PERMISSION,
    # AbortError (code ABORT_ERR): the caller aborted, as a timeout's AbortSignal does; like
    # gRPC CANCELLED, transient. (A DOMException AbortError / TimeoutError has the numeric
    # code 20 / 23, which is read as a number and decides nothing: its message decides.)
    "AbortError": TRANSIENT, "ABORT_ERR": TRANSIENT,
    # undici, Node's fetch (undici: github.com/nodejs/undici/blob/main/docs/api/Errors.md, lib/core/errors.js)
    "UND_ERR_CONNECT_TIMEOUT": TRANSIENT, "UND_ERR_HEADERS_TIMEOUT": TRANSIENT,
    "UND_ERR_BODY_TIMEOUT": TRANSIENT, "UND_ERR_SOCKET": TRANSIENT, "UND_ERR_ABORTED": TRANSIENT,
    "ConnectTimeoutError": TRANSIENT, "HeadersTimeoutError": TRANSIENT, "BodyTimeoutError": TRANSIENT,
    "SocketError": TRANSIENT,
    # axios AxiosError codes (axios lib/core/AxiosError.js; ECONNABORTED above is its timeout
    # or abort). ERR_BAD_REQUEST / ERR_BAD_RESPONSE are any 4xx / 5xx: BROAD_EXCEPTION_CLASSES.
    "ERR_NETWORK": TRANSIENT, "ERR_CANCELED": TRANSIENT,
    #
    # --- Java (JDK javadoc: java.net, java.net.http, java.util.concurrent, java.io, java.nio.file;
    # Apache HttpClient 4/5 and OkHttp, whose call timeout is InterruptedIOException("timeout"))
    "java.net.SocketTimeoutException": TRANSIENT, "java.net.ConnectException": TRANSIENT,
    "java.net.http.HttpTimeoutException": TRANSIENT, "java.net.http.HttpConnectTimeoutException": TRANSIENT,
    "java.util.concurrent.TimeoutException": TRANSIENT, "java.io.InterruptedIOException": TRANSIENT,
    "org.apache.http.conn.ConnectTimeoutException": TRANSIENT,
    "org.apache.hc.client5.http.ConnectTimeoutException": TRANSIENT,
    "org.apache.http.conn.HttpHostConnectException": TRANSIENT,
    "org.apache.hc.client5.http.HttpHostConnectException": TRANSIENT,
    "org.apache.http.NoHttpResponseException": TRANSIENT, "org.apache.hc.core5.http.NoHttpResponseException": TRANSIENT,
    "okhttp3.internal.http2.StreamResetException": TRANSIENT,
    "IllegalArgumentException": VALIDATION, "java.lang.NumberFormatException": VALIDATION,
    "java.nio.file.AccessDeniedException": PERMISSION, "java.lang.SecurityException": PERMISSION,
    # FileNotFoundException also reports "(Permission denied)": NAME_MESSAGE_REFINEMENTS.
    "java.io.FileNotFoundException": NOT_FOUND, "java.nio.file.NoSuchFileException": NOT_FOUND,
    "java.util.NoSuchElementException": NOT_FOUND,
    "UnsupportedOperationException": FATAL,
    #
    # --- Go (error.type is the error's type, fmt "%T", per the semconv error.type note; the
    # sentinels of pkg.go.dev/context, /os and /io/fs as users name them)
    "context.deadlineExceededError": TRANSIENT, "context.DeadlineExceeded": TRANSIENT,
    "context.Canceled": TRANSIENT, "os.ErrDeadlineExceeded": TRANSIENT,
    "os.ErrNotExist": NOT_FOUND, "fs.ErrNotExist": NOT_FOUND,
    "os.ErrPermission": PERMISSION, "fs.ErrPermission": PERMISSION,
    #
    # --- .NET (learn.microsoft.com API reference; HttpClient's timeout is a
    # TaskCanceledException, an OperationCanceledException, whose inner one is a TimeoutException)
    "System.Threading.Tasks.TaskCanceledException": TRANSIENT, "System.OperationCanceledException": TRANSIENT,
    "System.TimeoutException": TRANSIENT, "System.UnauthorizedAccessException": PERMISSION,
    "System.ArgumentException": VALIDATION, "System.ArgumentNullException": VALIDATION,
    "System.ArgumentOutOfRangeException": VALIDATION, "System.FormatException": VALIDATION,
    # Unlike Python's KeyError on the arguments dict, a .NET tool binds its arguments to
    # typed parameters: a dictionary miss is a lookup of a record that does not exist.
    "System.Collections.Generic.KeyNotFoundException": NOT_FOUND,
    "System.IO.FileNotFoundException": NOT_FOUND, "System.IO.DirectoryNotFoundException": NOT_FOUND,
    "System.NotImplementedException": FATAL, "System.NotSupportedException": FATAL,
    #
    # --- Rust: std::io::ErrorKind variants as error.type values ("{:?}" of the kind); most
    # already spell a class (TimedOut, NotFound, PermissionDenied). tracing-opentelemetry writes
    # only exception.message (and the source chain as exception.stacktrace), never
    # exception.type: reqwest and hyper failures are read by MESSAGE_PATTERNS.
    "ConnectionReset": TRANSIENT, "ConnectionAborted": TRANSIENT, "ConnectionRefused": TRANSIENT,
    "BrokenPipe": TRANSIENT, "InvalidInput": VALIDATION, "InvalidData": VALIDATION,
}  # fmt: skip

# Wrappers that carry every kind of failure of a layer (a socket, an HTTP client): their
# message usually says which kind, so they decide only after MESSAGE_PATTERNS found nothing.
BROAD_EXCEPTION_CLASSES: dict[str, str] = {
    # axios: ERR_BAD_REQUEST is any 4xx ("Request failed with status code 404"), ERR_BAD_RESPONSE any 5xx.
    "ERR_BAD_REQUEST": VALIDATION, "ERR_BAD_RESPONSE": TRANSIENT,
    # Java: UnknownHostException is both the resolver's temporary failure and a name that does
    # not exist ("Name or service not known": MESSAGE_PATTERNS' DNS row); SocketException is
    # "Connection reset", "Broken pipe", ...
    "java.net.UnknownHostException": TRANSIENT, "UnknownHostException": TRANSIENT,
    "java.net.SocketException": TRANSIENT,
    # Go: *net.OpError wraps every dial/read/write failure, *net.DNSError every lookup ("no such host").
    "net.OpError": TRANSIENT, "net.DNSError": TRANSIENT,
    # .NET: HttpRequestException is a refused connection, an unknown host, a TLS failure and
    # EnsureSuccessStatusCode's "Response status code does not indicate success: 404 (Not Found)".
    "System.Net.Http.HttpRequestException": TRANSIENT, "System.Net.Sockets.SocketException": TRANSIENT,
}  # fmt: skip

# A firm name whose message says it is another kind: (last name component, message, class).
NAME_MESSAGE_REFINEMENTS: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE), cls)
    for name, pattern, cls in (
        # Node's fetch (undici) rejects every network failure as TypeError("fetch failed"),
        # the cause (UND_ERR_CONNECT_TIMEOUT, ECONNRESET, ...) not in exception.type.
        ("TypeError", r"\bfetch failed\b", TRANSIENT),
        # java.io.FileNotFoundException: "/etc/app.conf (Permission denied)" (FileInputStream javadoc).
        ("FileNotFoundException", r"\(permission denied\)|\(access is denied\)", PERMISSION),
    )
)

# On the last name component, case-insensitive, first match wins.
EXCEPTION_NAME_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (cls, re.compile(pattern, re.IGNORECASE))
    for cls, pattern in (
        (TRANSIENT, r"time_?out|timed_?out|deadline|rate_?limit|throttl|too_?many_?requests"),
        (TRANSIENT, r"connect|unavailable|network|socket"),
        (PERMISSION, r"permission|unauthori[sz]|forbidden|authenticat|access_?denied|credential"),
        (NOT_FOUND, r"not_?found|does_?not_?exist|no_?such"),
        (FATAL, r"not_?implemented|unimplemented|unsupported_?operation"),
        (VALIDATION, r"validat|invalid|malformed|bad_?request|parse|decode|unprocessable|illegal_?argument"),
    )
)

_NAME_SEPARATORS = re.compile(r"::|\.")
# Claude Code's error categories: "Error:ENOENT", and as an identifier "Error_ENOENT".
_CATEGORY_CODE = re.compile(r"^\w*Error[:_](?P<code>[A-Z][A-Z0-9_]*)$")


def _name_parts(name: str) -> tuple[str, str, str]:
    """(full name, last component, category code or "") of an exception or error.type name."""
    full = name.strip().lstrip("*&")
    last = _NAME_SEPARATORS.split(full)[-1] if ("." in full or "::" in full) else full
    match = _CATEGORY_CODE.match(last) if ":" in last or "_" in last else None
    return full, last, match.group("code") if match else ""


def class_for_error_name(name: str) -> str | None:
    """The class of an exception type or `error.type` value ("httpx.ReadTimeout", "timeout")."""
    full, last, code = _name_parts(name)
    for candidate in (full, last, code):
        if candidate in EXCEPTION_CLASSES:
            return EXCEPTION_CLASSES[candidate]
        if candidate in BROAD_EXCEPTION_CLASSES:
            return None  # decides only after the messages (broad_class_for_error_name)
    key = squash(last)
    if key in _NON_DECIDING:
        return None
    if cls := _class_for_squashed(key):
        return cls
    if last.upper() in _HTTP_STATUS_BY_NAME:
        return class_for_http_status(_HTTP_STATUS_BY_NAME[last.upper()])
    for cls, pattern in EXCEPTION_NAME_PATTERNS:
        if pattern.search(last):
            return cls
    return None


def broad_class_for_error_name(name: str) -> str | None:
    """The class of a BROAD_EXCEPTION_CLASSES name ("java.net.UnknownHostException"), else None."""
    full, last, _ = _name_parts(name)
    return BROAD_EXCEPTION_CLASSES.get(full) or BROAD_EXCEPTION_CLASSES.get(last)


def refines_error_name(name: str) -> bool:
    """Whether a message may refine the class of this name (NAME_MESSAGE_REFINEMENTS)."""
    return _name_parts(name)[1] in _REFINED_NAMES


def refined_class_for_error_name(name: str, text: str) -> tuple[str, str] | None:
    """(class, the words that decided) when a message refines the class of this name, else None."""
    last = _name_parts(name)[1]
    for refined, pattern, cls in NAME_MESSAGE_REFINEMENTS:
        if refined == last and (match := pattern.search(text)):
            return cls, match.group(0)
    return None


_REFINED_NAMES = frozenset(name for name, _, _ in NAME_MESSAGE_REFINEMENTS)


# --- 5. Message phrases: weak evidence, consulted after the names (but for broad ones) ---
# First match wins, so the order matters: "invalid token" is a permission error before it
# is a validation error, "rate limit exceeded" transient before "limit exceeded" business.

MESSAGE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (cls, re.compile(pattern, re.IGNORECASE))
    for cls, pattern in (
        (TRANSIENT, r"\btimed?[ -]?outs?\b|deadline exceeded"),
        (TRANSIENT, r"rate[ _-]?limit|too many requests|throttl|slow down"),
        (
            TRANSIENT,
            r"temporar(?:il)?y (?:unavailable|down|failure|error)|service unavailable|bad gateway"
            r"|gateway time-?out|overloaded|try again later|retry later|upstream (?:error|unavailable)",
        ),
        (
            TRANSIENT,
            r"connection (?:reset|refused|aborted|closed|error)|econnreset|econnrefused|broken pipe"
            r"|network (?:error|unreachable)|(?:could not|failed to|unable to) connect",
        ),
        # Node errno codes in messages ("connect ETIMEDOUT 10.0.0.1:443", "getaddrinfo EAI_AGAIN"),
        # Node's "socket hang up" (ECONNRESET), undici's "fetch failed" / "other side closed",
        # Rust io::ErrorKind Debug spellings and hyper's IncompleteMessage, Go's "request
        # canceled" / "context canceled", an aborted operation (AbortError, like CANCELLED) and
        # Windows' WSAECONNREFUSED / WSAECONNRESET texts (.NET SocketException).
        (
            TRANSIENT,
            r"\b(?:etimedout|econnaborted|epipe|eai_again|ehostunreach|enetunreach)\b|socket hang up"
            r"|actively refused|forcibly closed"
            r"|\bfetch failed\b|other side closed|connection(?:reset|refused|aborted)|incomplete ?message"
            r"|\b(?:request|context) canceled\b|operation was aborted",
        ),
        # A host name that does not resolve: Node's ENOTFOUND, Go's and .NET's "no such host",
        # glibc's / macOS's EAI_NONAME text. No retry can succeed (before not_found's "no such").
        (FATAL, r"\benotfound\b|no such host\b|name or service not known|nodename nor servname"),
        (
            PERMISSION,
            r"permission denied|access denied|not authori[sz]ed|unauthori[sz]ed|forbidden"
            r"|(?:expired|invalid|revoked) (?:access |auth |api |bearer |oauth )?(?:token|credentials?|api key)"
            r"|(?:token|credentials?|session) (?:has |have )?(?:expired|been revoked)"
            r"|missing (?:the |required )?(?:scopes?|token|credentials?|api key)"
            r"|insufficient (?:scopes?|permissions?|privileges?)"
            r"|authenticat(?:ion|e) (?:failed|required)|login required|approval (?:is )?required"
            r"|operation not permitted|access to the path .{1,260}? is denied",
        ),
        (NOT_FOUND, r"not found|no such|does(?: not|n't) exist|unknown tool"),
        (
            USER_INPUT,
            r"ambiguous|multiple (?:matches|results|records|candidates)|more than one (?:match|result|record)"
            r"|\b\d+ \w+ match(?:es)?\b|which one|did you mean|please (?:choose|select|pick|confirm|clarify)",
        ),
        (
            BUSINESS,
            r"polic(?:y|ies)|\blimit (?:exceeded|reached)"
            r"|exceeds? (?:the |your )?(?:\w+ ){0,2}(?:limit|threshold|maximum)|not (?:allowed|permitted) by"
            r"|insufficient (?:funds|balance|credit)|violat|business rule|not eligible"
            r"|\bdeclined\b|out of stock|sold out",
        ),
        (
            FATAL,
            r"not implemented|no longer (?:exists|available|supported)|schema mismatch|unrecoverable|non-?recoverable",
        ),
        (
            VALIDATION,
            r"invalid|missing required|missing (?:key|argument|parameter|field|value)s?\b"
            r"|\b(?:is|are) required|required (?:field|parameter|argument|property)"
            r"|must (?:be|have|contain|match|not)|expected .{0,60}?(?:format|type|string|integer|number|date|one of)"
            r"|malformed|bad request|(?:could not|failed to|unable to) parse|parse error"
            r"|unexpected (?:type|value|token|argument|keyword)|out of range|not a valid|wrong type|unprocessable"
            r"|cannot be (?:null|empty)",
        ),
    )
)

# "upstream returned status 503": an HTTP status named in the prose, read through HTTP_STATUS_CLASSES.
STATUS_CODE_IN_MESSAGE = re.compile(
    r"\b(?:http|status(?: code)?|error|code|returned|responded with)[ :=]*([1-5]\d\d)\b", re.IGNORECASE
)


# A pattern without IGNORECASE, for ASCII text lowered once: the regex engine can then skip
# ahead to the pattern's first letters, several times faster. On ASCII text this matches
# exactly what IGNORECASE does, for an ASCII pattern that writes every letter in lower case,
# escapes only classes (\b \d \s \w and their negations) and punctuation, and sets no
# inline flag such as "(?-i:"; any other pattern keeps its flag.
_LOWER_CASE_ONLY = re.compile(r"(?:[^A-Z\\(]|\((?!\?[-aiLmsux])|\\[bBdDsSwW]|\\[^0-9A-Za-z])*")


def _for_lowered_text(pattern: re.Pattern[str]) -> re.Pattern[str]:
    if pattern.pattern.isascii() and _LOWER_CASE_ONLY.fullmatch(pattern.pattern):
        return re.compile(pattern.pattern, pattern.flags & ~re.IGNORECASE)
    return pattern


_LOWERED_MESSAGE_PATTERNS = tuple((cls, _for_lowered_text(pattern)) for cls, pattern in MESSAGE_PATTERNS)
_LOWERED_STATUS_CODE_IN_MESSAGE = _for_lowered_text(STATUS_CODE_IN_MESSAGE)


def class_for_message(text: str) -> tuple[str, str] | None:
    """(class, the words that decided) for a message, or None."""
    if text.isascii():  # fast path: nearly every message, lowered once for all patterns
        patterns, status_code = _LOWERED_MESSAGE_PATTERNS, _LOWERED_STATUS_CODE_IN_MESSAGE
        searched = text.lower()
    else:
        patterns, status_code = MESSAGE_PATTERNS, STATUS_CODE_IN_MESSAGE
        searched = text
    # The words are cut from `text` itself: lowering ASCII keeps every position.
    for cls, pattern in patterns:
        if match := pattern.search(searched):
            return cls, text[match.start() : match.end()]
    if (match := status_code.search(searched)) and (cls := class_for_http_status(int(match.group(1)))):
        return cls, text[match.start() : match.end()]
    return None


# --- 6. Contract quality (docs/contract/metrics.md) --------------------------------------------------------

# Messages that tell neither the model nor the operator anything, compared after
# lower-casing, dropping an "Error:" prefix, surrounding quotes and final punctuation.
GENERIC_MESSAGES = frozenset(
    {
        "", "error", "errors", "an error occurred", "an error has occurred", "error occurred",
        "an unexpected error occurred", "an unknown error occurred", "unexpected error",
        "unknown error", "something went wrong", "something went wrong, please try again",
        "something went wrong. please try again", "oops", "oops, something went wrong",
        "operation failed", "request failed", "the operation failed", "action failed",
        "failed", "failure", "fail", "invalid input", "invalid request", "invalid arguments",
        "invalid parameters", "bad request", "internal error", "internal server error",
        "server error", "tool error", "tool_error", "tool failed", "tool call failed",
        "error running tool", "error running tool (non-fatal)", "please try again",
        "try again", "try again later", "not ok", "exception", "none", "null", "undefined",
        "an error occurred while running the tool. please try again",
        "mcp tool call returned iserror=true", "mcp response returned iserror=true",
    }
)
_ERROR_PREFIX = re.compile(r"^(?:error|exception)\s*:\s*")
# A bare HTTP status line ("503", "404 Not Found"): the upstream error passed through.
_BARE_STATUS_LINE = re.compile(r"^(?:http )?[1-5]\d\d(?: [a-z' -]+)?$")


def is_generic_message(message: str) -> bool:
    text = " ".join(message.split()).lower()
    text = _ERROR_PREFIX.sub("", text)
    text = text.strip(" \"'`").rstrip(".!")
    return text in GENERIC_MESSAGES or bool(_BARE_STATUS_LINE.match(text))


# Internals that must not reach a model-visible message: (what it is, how it looks, a cue).
# The cue is a short pattern of plain text that every match contains, for find_internals to
# take a quick first look, or "" where the pattern itself starts with plain text. Keep each
# cue implied by its pattern, and the patterns free of capturing groups (they are joined).
_INTERNALS_ROWS = (
    ("python traceback", r"Traceback \(most recent call last\)", ""),
    ("python stack frame", r'^\s*File "[^"\n]+", line \d+', 'File "'),
    (
        "java stack frame",
        r"^\s*at [\w$.<>]+\((?:[\w$]+\.(?:java|kt|scala):\d+|Native Method|Unknown Source)\)",
        "at ",
    ),
    (
        "javascript stack frame",
        r"^\s*at (?:\S+ ){0,2}\(?(?:file://)?[^\s()]+\.(?:js|mjs|cjs|ts):\d+:\d+\)?\s*$",
        "at ",
    ),
    ("node internals", r"\(?node:internal/", "node:internal/"),
    ("go panic", r"goroutine \d+ \[running\]", ""),
    ("raw exception repr", r"\b[A-Z]\w*(?:Error|Exception|Warning)\((?:'|\"|\))", r"Error\(|Exception\(|Warning\("),
    ("raw class repr", r"<class '[\w.]+'>", ""),
    ("raw object repr", r"<[\w.]+ object at 0x[0-9a-fA-F]+>", ""),
    ("installed package path", r"site-packages/|node_modules/", ""),
    (
        "sql",
        r"\bSELECT\b[\s\S]{1,300}?\bFROM\b|\bINSERT INTO\b|\bUPDATE \w+ SET\b|\bDELETE FROM\b",
        "SELECT|INSERT INTO|UPDATE |DELETE FROM",
    ),
    ("database error", r"psycopg2?\.errors|sqlalchemy\.exc|sqlite3\.|SQLSTATE|ORA-\d{5}", ""),
    ("database error", r"violates (?:unique|foreign key|check|not-null) constraint", ""),
    ("bearer token", r"\bBearer\s+[A-Za-z0-9._~+/-]{8,}=*", "Bearer"),
    ("api key", r"\bsk-[A-Za-z0-9_-]{16,}", "sk-"),
    ("aws access key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", "AKIA|ASIA"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+", "eyJ"),
    ("private key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----", ""),
)  # fmt: skip
INTERNALS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.MULTILINE)) for kind, pattern, _ in _INTERNALS_ROWS
)
# Any cue at all, in one scan.
_INTERNALS_CUE = re.compile("|".join(cue or pattern for _, pattern, cue in _INTERNALS_ROWS), re.MULTILINE)


def find_internals(text: str) -> str:
    """What kind of internals a message leaks ("python traceback", "sql", ...), or ""."""
    if not _INTERNALS_CUE.search(text):
        return ""  # fast path: a text without any cue matches no pattern
    for kind, pattern in INTERNALS:
        if pattern.search(text):
            return kind
    return ""


# The checks of a failure's error contract, in display order (docs/contract/metrics.md#contract-quality).
CONTRACT_CHECKS: tuple[tuple[str, str], ...] = (
    ("explicit_class", "states an error class or code Toolwatch recognises"),
    ("explicit_retryable", "states whether retrying can succeed"),
    ("retry_after", "a transient error says how long to wait"),
    ("field_named", "a validation error names the field to repair"),
    ("suggestion", "a validation error suggests the repair"),
    ("specific_message", "the message says what failed (not 'Something went wrong')"),
    ("no_internals", "no stack trace, raw exception, SQL or credential in the message"),
    ("retryable_consistent", "the stated retryable flag agrees with the class"),
)


# --- 7. Senders with tool spans of their own shape ---------------------------------------------------------
# A sender that marks a tool call by a fixed span name instead of a convention attribute, keeps
# its fields in keys of its own, and states the outcome on a child span (docs/contract/spans.md#claude-code).


@dataclass(frozen=True, slots=True)
class NativeToolSpans:
    convention: str  # the ToolCallRecord.convention of its tool calls
    tool_span: str  # the name of a tool-call span
    # (attribute, value) every tool-call span carries; a span of that name with neither it
    # nor a tool-name or call-id key is left to the generic span-name rule.
    marker: tuple[str, str]
    tool_name_keys: tuple[str, ...]
    call_id_keys: tuple[str, ...]
    argument_keys: tuple[str, ...]
    outcome_span: str  # the child span that states how the call ended
    success_keys: tuple[str, ...]  # false means the call failed
    # A category as a name (read by class_for_error_name), in order; a value with spaces is a message.
    error_name_keys: tuple[str, ...]
    # A category, or the whole message when the sender is told to log it.
    error_keys: tuple[str, ...]


NATIVE_TOOL_SPANS: tuple[NativeToolSpans, ...] = (
    # Claude Code's beta traces (CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1), code.claude.com/docs/en/
    # monitoring-usage "Traces (beta)": claude_code.interaction > claude_code.tool >
    # claude_code.tool.blocked_on_user / claude_code.tool.execution. Every span carries
    # span.type; the tool span ends with status UNSET, and only claude_code.tool.execution
    # records the failure: status ERROR, success=false, error "Error:ENOENT" or "ShellError"
    # (the full message with OTEL_LOG_TOOL_DETAILS=1), error_class "Error_ENOENT" (v2.1.268+).
    # tool_input exists only under detailed beta tracing (not part of the stable schema).
    NativeToolSpans(
        convention="claude_code",
        tool_span="claude_code.tool",
        marker=("span.type", "tool"),
        tool_name_keys=("tool_name",),
        call_id_keys=("tool_use_id", "gen_ai.tool.call.id"),
        argument_keys=("tool_input",),
        outcome_span="claude_code.tool.execution",
        success_keys=("success",),
        error_name_keys=("error_class",),
        error_keys=("error",),
    ),
)
