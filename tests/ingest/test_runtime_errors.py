"""Exception and error names of every major runtime, and their messages (ingest.taxonomy section 4 and 5).

Each case is a failing GenAI tool span whose last exception event (or `error.type`) carries
what that runtime's instrumentation writes: Node's OTel SDK writes an error's `code`
(ECONNRESET) as exception.type, Java and .NET their class names, Go the type ("%T"), and
tracing-opentelemetry only exception.message for Rust. Sources are cited in ingest/taxonomy.py.
"""

from __future__ import annotations

import pytest

from ingest import taxonomy
from ingest.normalize import normalize_tool_call
from ingest.records import SpanRecord, ToolCallRecord

ERROR = 2
T, V, P, N, F = taxonomy.TRANSIENT, taxonomy.VALIDATION, taxonomy.PERMISSION, taxonomy.NOT_FOUND, taxonomy.FATAL


def failed_call(exception_type: str = "", message: str = "", **attributes) -> ToolCallRecord:
    event_attrs = {}
    if exception_type:
        event_attrs["exception.type"] = exception_type
    if message:
        event_attrs["exception.message"] = message
    span = SpanRecord(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        parent_span_id="",
        name="execute_tool fetch_orders",
        kind=1,
        start_ns=1_700_000_000_000_000_000,
        end_ns=1_700_000_000_250_000_000,
        status_code=ERROR,
        status_message="",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch_orders", **attributes},
        events=[{"name": "exception", "time_ns": 1_700_000_000_100_000_000, "attributes": event_attrs}],
    )
    record = normalize_tool_call(span)
    assert record is not None and not record.ok
    return record


# (runtime, exception.type, class): the name alone decides, as "exception.type=<name>".
NAMES = [
    # Node.js: errno codes (nodejs.org/api/errors.html), AbortError, undici and axios codes
    ("node", "ECONNRESET", T), ("node", "ETIMEDOUT", T), ("node", "ECONNREFUSED", T),
    ("node", "ECONNABORTED", T), ("node", "EAI_AGAIN", T), ("node", "EPIPE", T),
    ("node", "EHOSTUNREACH", T), ("node", "ENOTFOUND", F), ("node", "ENOENT", N),
    ("node", "EACCES", P), ("node", "EPERM", P), ("node", "AbortError", T), ("node", "ABORT_ERR", T),
    ("node", "TimeoutError", T), ("node", "UND_ERR_CONNECT_TIMEOUT", T),
    ("node", "UND_ERR_HEADERS_TIMEOUT", T), ("node", "UND_ERR_BODY_TIMEOUT", T), ("node", "UND_ERR_SOCKET", T),
    ("node", "ERR_NETWORK", T), ("node", "ERR_CANCELED", T),
    # Java: JDK, Apache HttpClient 4 and 5, OkHttp
    ("java", "java.net.SocketTimeoutException", T), ("java", "java.net.ConnectException", T),
    ("java", "java.net.http.HttpTimeoutException", T), ("java", "java.net.http.HttpConnectTimeoutException", T),
    ("java", "java.util.concurrent.TimeoutException", T), ("java", "java.io.InterruptedIOException", T),
    ("java", "org.apache.http.conn.ConnectTimeoutException", T),
    ("java", "org.apache.hc.client5.http.ConnectTimeoutException", T),
    ("java", "org.apache.http.NoHttpResponseException", T), ("java", "okhttp3.internal.http2.StreamResetException", T),
    ("java", "java.lang.IllegalArgumentException", V), ("java", "java.lang.NumberFormatException", V),
    ("java", "java.nio.file.AccessDeniedException", P), ("java", "java.lang.SecurityException", P),
    ("java", "java.io.FileNotFoundException", N), ("java", "java.nio.file.NoSuchFileException", N),
    ("java", "java.util.NoSuchElementException", N), ("java", "java.lang.UnsupportedOperationException", F),
    # Go: "%T" of the error and the sentinels' names
    ("go", "context.deadlineExceededError", T), ("go", "context.DeadlineExceeded", T),
    ("go", "os.ErrNotExist", N), ("go", "fs.ErrNotExist", N), ("go", "os.ErrPermission", P),
    # .NET
    ("dotnet", "System.Threading.Tasks.TaskCanceledException", T), ("dotnet", "System.OperationCanceledException", T),
    ("dotnet", "System.TimeoutException", T), ("dotnet", "System.UnauthorizedAccessException", P),
    ("dotnet", "System.ArgumentException", V), ("dotnet", "System.ArgumentNullException", V),
    ("dotnet", "System.ArgumentOutOfRangeException", V), ("dotnet", "System.FormatException", V),
    ("dotnet", "System.Collections.Generic.KeyNotFoundException", N), ("dotnet", "System.IO.FileNotFoundException", N),
    ("dotnet", "System.IO.DirectoryNotFoundException", N), ("dotnet", "System.NotImplementedException", F),
    ("dotnet", "System.NotSupportedException", F),
    # Rust: std::io::ErrorKind variants, bare and by path
    ("rust", "TimedOut", T), ("rust", "ConnectionReset", T), ("rust", "ConnectionRefused", T),
    ("rust", "PermissionDenied", P), ("rust", "NotFound", N), ("rust", "InvalidInput", V),
    ("rust", "std::io::ErrorKind::TimedOut", T), ("rust", "std::io::ErrorKind::ConnectionReset", T),
    ("rust", "std::io::ErrorKind::PermissionDenied", P), ("rust", "std::io::ErrorKind::NotFound", N),
]  # fmt: skip


@pytest.mark.parametrize(("runtime", "name", "cls"), NAMES, ids=[f"{r}-{n}" for r, n, _ in NAMES])
def test_exception_type_alone_decides(runtime, name, cls):
    record = failed_call(name, "")

    assert (record.error_class, record.classified_by) == (cls, f"exception.type={name}")
    assert record.error_type == name


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("ECONNRESET", T),
        ("ENOTFOUND", F),
        ("*net.OpError", T),
        ("std::io::ErrorKind::TimedOut", T),
        ("System.ArgumentException", V),
    ],
)
def test_error_type_attribute_is_read_the_same_way(name, cls):
    record = failed_call(**{"error.type": name})

    assert (record.error_class, record.classified_by) == (cls, f"error.type={name}")


# (runtime, exception.message, class, the words that decide): no exception.type at all.
MESSAGES = [
    ("node", "socket hang up", T, "socket hang up"),
    ("node", "read ECONNRESET", T, "ECONNRESET"),
    ("node", "connect ETIMEDOUT 10.0.0.7:443", T, "ETIMEDOUT"),
    ("node", "connect ECONNREFUSED 127.0.0.1:5432", T, "ECONNREFUSED"),
    ("node", "getaddrinfo EAI_AGAIN api.example.com", T, "EAI_AGAIN"),
    ("node", "getaddrinfo ENOTFOUND api.example.invalid", F, "ENOTFOUND"),
    ("node", "write EPIPE", T, "EPIPE"),
    ("node", "fetch failed", T, "fetch failed"),
    ("node", "other side closed", T, "other side closed"),
    ("node", "timeout of 5000ms exceeded", T, "timeout"),
    ("node", "This operation was aborted", T, "operation was aborted"),
    ("node", "ENOENT: no such file or directory, open '/tmp/orders.csv'", N, "no such"),
    ("node", "EACCES: permission denied, open '/etc/app.key'", P, "permission denied"),
    ("node", "EPERM: operation not permitted, unlink '/var/run/app.pid'", P, "operation not permitted"),
    ("java", "Read timed out", T, "timed out"),
    (
        "java",
        "Connect to api.example.com:443 [api.example.com/10.0.0.7] failed: Connection refused",
        T,
        "Connection refused",
    ),
    ("java", "Connection reset", T, "Connection reset"),
    ("java", "api.example.invalid: Name or service not known", F, "Name or service not known"),
    ("java", "api.example.com: Temporary failure in name resolution", T, "Temporary failure"),
    ("go", "context deadline exceeded", T, "deadline exceeded"),
    ("go", "dial tcp 10.0.0.7:443: i/o timeout", T, "timeout"),
    ("go", 'Get "https://api.example.com/v1/orders": net/http: request canceled', T, "request canceled"),
    ("go", "context canceled", T, "context canceled"),
    ("go", "dial tcp: lookup api.example.invalid on 127.0.0.53:53: no such host", F, "no such host"),
    ("go", "open /data/orders.csv: no such file or directory", N, "no such"),
    ("go", "open /etc/shadow: permission denied", P, "permission denied"),
    ("go", "stat /data/orders.csv: file does not exist", N, "does not exist"),
    (
        "dotnet",
        "The request was canceled due to the configured HttpClient.Timeout of 100 seconds elapsing.",
        T,
        "Timeout",
    ),
    ("dotnet", "No connection could be made because the target machine actively refused it.", T, "actively refused"),
    ("dotnet", "An existing connection was forcibly closed by the remote host.", T, "forcibly closed"),
    ("dotnet", "No such host is known. (api.example.invalid:443)", F, "No such host"),
    (
        "dotnet",
        "Access to the path 'C:\\data\\orders.csv' is denied.",
        P,
        "Access to the path 'C:\\data\\orders.csv' is denied",
    ),
    ("dotnet", "Value cannot be null. (Parameter 'orderId')", V, "cannot be null"),
    ("rust", "error sending request for url (https://api.example.com/v1/orders): operation timed out", T, "timed out"),
    ("rust", "connection closed before message completed", T, "connection closed"),
    ("rust", "Connection reset by peer (os error 104)", T, "Connection reset"),
    ("rust", "Permission denied (os error 13)", P, "Permission denied"),
    ("rust", "No such file or directory (os error 2)", N, "No such"),
    ("rust", 'reqwest::Error { kind: Request, url: "https://api.example.com/", source: TimedOut }', T, "TimedOut"),
    ("rust", "hyper::Error(IncompleteMessage)", T, "IncompleteMessage"),
    ("rust", 'Custom { kind: ConnectionReset, error: "peer went away" }', T, "ConnectionReset"),
    ("rust", "entity not found", N, "not found"),
]


@pytest.mark.parametrize(
    ("runtime", "message", "cls", "words"), MESSAGES, ids=[f"{r}-{m[:40]}" for r, m, _, _ in MESSAGES]
)
def test_message_alone_decides(runtime, message, cls, words):
    record = failed_call("", message)

    assert (record.error_class, record.classified_by) == (cls, f'message:"{words}"')
    assert record.message == message


# Wrappers of every failure of a layer: the message decides first, the name only when it says nothing.
BROAD = [
    ("ERR_BAD_REQUEST", "Request failed with status code 404", N, 'message:"status code 404"'),
    ("ERR_BAD_REQUEST", "Request failed with status code 401", P, 'message:"status code 401"'),
    ("ERR_BAD_REQUEST", "Request failed", V, "exception.type=ERR_BAD_REQUEST"),
    ("ERR_BAD_RESPONSE", "Request failed with status code 503", T, 'message:"status code 503"'),
    ("ERR_BAD_RESPONSE", "Request failed", T, "exception.type=ERR_BAD_RESPONSE"),
    (
        "java.net.UnknownHostException",
        "api.example.invalid: Name or service not known",
        F,
        'message:"Name or service not known"',
    ),
    ("java.net.UnknownHostException", "api.example.com", T, "exception.type=java.net.UnknownHostException"),
    ("java.net.SocketException", "Connection reset", T, 'message:"Connection reset"'),
    ("*net.OpError", "dial tcp: lookup api.example.invalid: no such host", F, 'message:"no such host"'),
    (
        "*net.OpError",
        "read tcp 10.0.0.2:51234->10.0.0.7:443: read: connection reset by peer",
        T,
        'message:"connection reset"',
    ),
    ("*net.OpError", "write tcp: use of closed network connection", T, "exception.type=*net.OpError"),
    ("*net.DNSError", "lookup api.example.invalid: no such host", F, 'message:"no such host"'),
    (
        "System.Net.Http.HttpRequestException",
        "Response status code does not indicate success: 404 (Not Found).",
        N,
        'message:"Not Found"',
    ),
    (
        "System.Net.Http.HttpRequestException",
        "No such host is known. (api.example.invalid:443)",
        F,
        'message:"No such host"',
    ),
    (
        "System.Net.Http.HttpRequestException",
        "An error occurred while sending the request.",
        T,
        "exception.type=System.Net.Http.HttpRequestException",
    ),
    ("System.Net.Sockets.SocketException", "Connection refused", T, 'message:"Connection refused"'),
]


@pytest.mark.parametrize(("name", "message", "cls", "by"), BROAD, ids=[f"{n}-{m[:30]}" for n, m, _, _ in BROAD])
def test_broad_names_decide_only_after_the_message(name, message, cls, by):
    record = failed_call(name, message)

    assert (record.error_class, record.classified_by) == (cls, by)


@pytest.mark.parametrize(
    ("name", "message", "cls", "by"),
    [
        # Node's fetch rejects every network failure as TypeError("fetch failed").
        ("TypeError", "fetch failed", T, 'exception.type=TypeError + message:"fetch failed"'),
        ("TypeError", "Cannot read properties of undefined (reading 'fetch')", V, "exception.type=TypeError"),
        ("TypeError", "fetch failedover to the replica", V, "exception.type=TypeError"),
        (
            "java.io.FileNotFoundException",
            "/etc/app/secrets.properties (Permission denied)",
            P,
            'exception.type=java.io.FileNotFoundException + message:"(Permission denied)"',
        ),
        (
            "java.io.FileNotFoundException",
            "/etc/app/missing.properties (No such file or directory)",
            N,
            "exception.type=java.io.FileNotFoundException",
        ),
    ],
)
def test_a_message_refines_a_firm_name(name, message, cls, by):
    record = failed_call(name, message)

    assert (record.error_class, record.classified_by) == (cls, by)


def test_a_permanent_envelope_rules_out_a_transient_runtime_name():
    record = failed_call("ECONNRESET", "socket hang up", **{"tool.error.class": "permanent"})

    assert record.error_class == V  # nothing finer than "not retryable" is known
    assert record.classified_by == "envelope:tool.error.class=permanent"


# Names and messages that look like the ones above but say nothing about the kind of failure.
LOOK_ALIKES = [
    ("Error", "exit status 1"),
    ("SystemError", ""),
    ("ShellError", ""),
    ("AbortErrorHandler", ""),
    ("Error_ENOENTX", ""),
    ("ECONN", ""),
    ("E2BIG", ""),
    ("java.lang.RuntimeException", "boom"),
    ("java.lang.NullPointerException", ""),
    ("java.io.IOException", "Stream closed"),
    ("java.lang.IllegalStateException", "already started"),
    ("*errors.errorString", "exit status 2"),
    ("*url.Error", "unexpected EOF"),
    ("System.Exception", "Something failed"),
    ("System.NullReferenceException", "Object reference not set to an instance of an object."),
    ("anyhow::Error", "command failed"),
    ("reqwest::Error", "error decoding response body"),
    ("std::io::Error", "other error"),
    ("", "the fetch failedover to the replica"),
    ("", "epipeline stage 3 stopped"),
    ("", "request cancelledness"),
    ("", "sockets hung up"),
]


@pytest.mark.parametrize(("name", "message"), LOOK_ALIKES, ids=[f"{n or 'no-type'}-{m[:20]}" for n, m in LOOK_ALIKES])
def test_look_alikes_stay_unknown(name, message):
    record = failed_call(name, message)

    assert (record.error_class, record.classified_by) == (taxonomy.UNKNOWN, "none")


def test_name_parts_cover_go_pointers_rust_paths_and_categories():
    assert taxonomy.class_for_error_name("*net.OpError") is None  # broad: decides after the messages
    assert taxonomy.broad_class_for_error_name("*net.OpError") == T
    assert taxonomy.class_for_error_name("Error:ENOENT") == N
    assert taxonomy.class_for_error_name("Error_EACCES") == P
    assert taxonomy.class_for_error_name("SystemError:ECONNRESET") == T
    assert taxonomy.class_for_error_name("std::io::ErrorKind::BrokenPipe") == T
    assert taxonomy.broad_class_for_error_name("ECONNRESET") is None
