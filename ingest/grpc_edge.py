"""The OTLP/gRPC edge on :4317: authenticate, decode, hand to the write service, answer per the OTLP spec.

The gRPC twin of ingest/views.py, and as thin: the same keys, limits, decoders, write
services, refusal counting and key touch; only the transport's answers differ
(docs/contract/ingest-grpc.md has the table):

    OK, empty Export*ServiceResponse             everything stored (committed) or already stored
    OK, partial_success                          some items refused (rejected_*, error_message)
    INVALID_ARGUMENT                             undecodable or invalid data (otlp.OtlpError 400)
    RESOURCE_EXHAUSTED, no RetryInfo             over a size limit: the message on the wire or
                                                 decompressed (gRPC core, or here), items per request
    UNAUTHENTICATED / PERMISSION_DENIED          services.AuthError 401 / 403
    RESOURCE_EXHAUSTED + RetryInfo               the key is over its rate limit (ingest/throttle.py)
    UNAVAILABLE + RetryInfo                      the database cannot take the write (retryable)

Services: TraceService (services.spans_ingest), LogsService (services.logs_ingest) and
MetricsService (answered and counted as dropped, as POST /v1/metrics), one `Signal` row
each in SIGNALS; the servicer classes are the official generated ones (opentelemetry-proto's
*_pb2_grpc), registered with our own handlers.

The request arrives as bytes (the registered "deserializer" only holds them) and goes through the HTTP
path's decoder (otlp.decode_request, …), so both transports judge the same bytes alike and
bad protobuf is an INVALID_ARGUMENT naming the problem rather than gRPC's generic
deserialization error. The answer leaves as bytes built by otlp's own response functions.
gRPC decompresses (gzip, deflate) in its core, bounded by `grpc.max_receive_message_length`
(see `server_options`), before the handler runs.

Django connections: every RPC runs on a thread of the server's pool, which keeps its
own connection; close_old_connections runs around each call, as Django's request
signals do around a request.
"""

from __future__ import annotations

import collections
import ctypes
import logging
import multiprocessing
import signal as os_signal
import threading
import time
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import django
import grpc
from django.conf import settings
from django.db import Error as DatabaseError
from django.db import close_old_connections
from django.utils import timezone
from google.protobuf import duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from ingest import otlp, services, throttle, wire
from ingest.limits import MIB, IngestLimits

logger = logging.getLogger(__name__)

# OTLP: responses stay under 4 MiB; ours are a few bytes, or a partial success of at most 64 KiB.
MAX_RESPONSE_BYTES = 4 * MIB
# Status messages travel in trailers (grpc-message, and again inside grpc-status-details-bin);
# clients refuse trailers over 8 KiB by default, so a message is cut well below that.
MAX_STATUS_MESSAGE_BYTES = 1024
# The trailer the Python exporter reads RetryInfo from (the Google convention: the detail's
# full name + "-bin"); the Go and .NET exporters and the Collector read grpc-status-details-bin.
RETRY_INFO_TRAILER = "google.rpc.retryinfo-bin"
DEFAULT_THREADS = 8
# gRPC core decompresses a message into many small buffers on its own threads and frees them
# once Python has its copy; glibc keeps such freed memory in those threads' arenas. Before
# decoding a message this large, it is handed back (malloc_trim), or the peak RSS of a 64 MiB
# request would carry the message one more time.
TRIM_AFTER_BYTES = 8 * MIB


@dataclass(frozen=True)
class Signal:
    """One OTLP export service: how its request is decoded, bounded, stored and answered."""

    service: str  # full gRPC service name, from the generated descriptor
    noun: str  # what the request carries, in messages ("spans", "log records")
    decode: Callable[[bytes], object]  # raises otlp.OtlpError
    count: Callable[[object], int]
    max_count: Callable[[IngestLimits], int] | None  # items allowed per request (None: no limit of its own)
    # (project, request, count, limits, now) -> a result with rejected_count and rejection_message();
    # raises django.db.Error when the database cannot take it (and may raise otlp.OtlpError).
    write: Callable[..., object]
    partial_success: Callable[[int, str], bytes]


# The services are looked up per call (not bound here), so a test patching services.spans_ingest is seen.
TRACES = Signal(
    service=trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name,
    noun="spans",
    # Large messages are checked and flattened in pieces (ingest/wire.py), as on the HTTP edge.
    decode=lambda body: wire.decode_traces(body, otlp.PROTOBUF, settings.INGEST_LIMITS),
    count=wire.count_spans,
    max_count=lambda limits: limits.max_spans_per_request,
    write=lambda project, request, count, limits, now: services.spans_ingest(project=project, request=request, limits=limits, now=now),
    partial_success=lambda rejected, message: otlp.partial_success_body(otlp.PROTOBUF, rejected, message),
)
# Logs: stored, agents' tool events made tool calls (docs/contract/logs.md), as POST /v1/logs.
LOGS = Signal(
    service=logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name,
    noun="log records",
    decode=lambda body: wire.decode_logs(body, otlp.PROTOBUF, settings.INGEST_LIMITS),
    count=wire.count_log_records,
    max_count=lambda limits: limits.max_log_records_per_request,
    write=lambda project, request, count, limits, now: services.logs_ingest(project=project, request=request, limits=limits, now=now),
    partial_success=lambda rejected, message: otlp.logs_partial_success_body(otlp.PROTOBUF, rejected, message),
)


@dataclass(frozen=True)
class _MetricsDropped:
    rejected_count: int

    def rejection_message(self) -> str:
        return f"Toolwatch stores traces and logs; {self.rejected_count} metric data points dropped"


def _drop_metrics(project, request, count, limits, now) -> _MetricsDropped:
    services.metrics_dropped(project=project, data_points=count, now=now)
    return _MetricsDropped(count)


# Metrics: answered (a partial success rejecting every point, which OTLP clients do not retry)
# and counted as dropped, not stored, as POST /v1/metrics; so an exporter sending all three
# signals (Claude Code's monitoring setup does) stays quiet.
METRICS = Signal(
    service=metrics_service_pb2.DESCRIPTOR.services_by_name["MetricsService"].full_name,
    noun="metric data points",
    decode=lambda body: wire.decode_metrics(body, otlp.PROTOBUF, settings.INGEST_LIMITS),
    count=wire.count_data_points,
    max_count=None,
    write=_drop_metrics,
    partial_success=lambda rejected, message: otlp.metrics_partial_success_body(otlp.PROTOBUF, rejected, message),
)


class Message:
    """A request's bytes, handed to the handler once (the "deserializer" registered for every method).

    gRPC keeps the deserialized request referenced from its own frames until the RPC ends; a
    holder lets the handler take the bytes out and drop them once decoded, so a 64 MiB
    message is not held while it is written (as the HTTP edge drops its body).
    """

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def take(self) -> bytes:
        data, self.data = self.data, b""
        return data


class _Status(collections.namedtuple("_Status", ("code", "details", "trailing_metadata")), grpc.Status):
    """A grpc.Status to abort with: code, message (details) and the trailers carrying google.rpc.Status."""


def _cut(message: str) -> str:
    encoded = message.encode("utf-8", "replace")
    if len(encoded) <= MAX_STATUS_MESSAGE_BYTES:
        return message
    return encoded[: MAX_STATUS_MESSAGE_BYTES - 16].decode("utf-8", "ignore") + " … (shortened)"


def status_for(http_status: int, message: str, *, field: str = "", retry_after_seconds: int | None = None) -> _Status:
    """The gRPC answer for a refusal the HTTP edge answers with `http_status`.

    The google.rpc.Status is otlp.status_body's (code from otlp.RPC_CODES, a BadRequest
    detail when a field is named), so both transports name a problem the same way.
    """
    status = status_pb2.Status.FromString(otlp.status_body(otlp.PROTOBUF, http_status, _cut(message), field=field))
    extra: tuple = ()
    if retry_after_seconds is not None:
        retry_info = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=retry_after_seconds))
        status.details.add().Pack(retry_info)
        extra = ((RETRY_INFO_TRAILER, retry_info.SerializeToString()),)
    converted = rpc_status.to_status(status)  # grpc-status-details-bin carries the whole Status
    return _Status(converted.code, converted.details, tuple(converted.trailing_metadata) + extra)


def _unavailable() -> _Status:
    return status_for(
        503,
        "the database cannot take the write right now; retry shortly",
        retry_after_seconds=settings.INGEST_RETRY_AFTER_SECONDS,
    )


def export(signal: Signal, request: Message | bytes, context: grpc.ServicerContext, dispatch=None) -> bytes:
    """One Export RPC: the serialized response, or an abort with the status chosen.

    Answered here (`respond`), or by a worker process when the server has a WorkerPool (`dispatch`).
    """
    message = request if isinstance(request, Message) else Message(request)
    del request
    metadata = _metadata(context)
    answer = dispatch(signal, message, metadata) if dispatch is not None else respond(signal, message, metadata)
    if isinstance(answer, _Status):
        context.abort_with_status(answer)
    return answer


def respond(signal: Signal, message: Message, metadata: dict[str, str]) -> bytes | _Status:
    """`handle` with the database connection looked after, and never an exception."""
    close_old_connections()
    try:
        try:
            return handle(signal, message, metadata)
        except Exception:  # noqa: BLE001 - answered INTERNAL (like an HTTP 500), never a traceback to the sender
            logger.exception("ingest (gRPC): %s Export failed unexpectedly", signal.service)
            return status_for(500, "internal error; the request was not stored")
    finally:
        close_old_connections()


def handle(signal: Signal, message: Message, metadata: dict[str, str]) -> bytes | _Status:
    """What to answer to one request: response bytes, or the status to abort with."""
    try:
        key = services.api_key_authenticate(
            metadata.get("authorization", ""), project_slug=metadata.get("x-toolwatch-project", "")
        )
    except services.AuthError as exc:
        return status_for(exc.http_status, _auth_message(exc.message))
    except DatabaseError:
        logger.warning("ingest (gRPC): database unavailable while checking a key; answering UNAVAILABLE", exc_info=True)
        return _unavailable()
    project = key.project
    limits = settings.INGEST_LIMITS

    body = message.take()
    if len(body) >= TRIM_AFTER_BYTES:
        _release_freed_memory()
    try:
        # gRPC core already refused anything over grpc.max_receive_message_length, on the
        # wire and decompressed; this is the decompressed limit when it is the lower one.
        if len(body) > limits.max_decompressed_bytes:
            raise otlp.OtlpError(413, f"message of {len(body)} bytes exceeds the limit of {limits.max_decompressed_bytes} bytes")
        request = signal.decode(body)
        del body  # the decoded message holds what is needed; free the bytes before the heavy part
        count = signal.count(request)
        max_count = signal.max_count(limits) if signal.max_count is not None else None
        if max_count is not None and count > max_count:
            raise otlp.OtlpError(413, f"{count} {signal.noun} in one request exceeds the limit of {max_count}")
    except otlp.OtlpError as exc:
        return _refuse(project, exc)
    if wait := throttle.ingest_wait(key_id=key.pk, cost=count):
        # Recoverable once the key's bucket refills: RESOURCE_EXHAUSTED with RetryInfo (OTLP).
        _count_refusal(project, 429)
        return status_for(429, throttle.refusal_message(wait), retry_after_seconds=wait)

    # Received: the handler runs once the whole message is in (services.MAX_WRITE counts from here).
    now = timezone.now()
    try:
        result = signal.write(project, request, count, limits, now)
        services.api_key_touch(key=key, now=now)
    except otlp.OtlpError as exc:  # a limit the write service applies itself
        return _refuse(project, exc)
    except DatabaseError:
        logger.exception("ingest (gRPC): database refused the write; answering UNAVAILABLE")
        return _unavailable()

    if result.rejected_count:
        return signal.partial_success(result.rejected_count, result.rejection_message())
    return otlp.success_body(otlp.PROTOBUF)  # an empty Export*ServiceResponse: 0 bytes


def _refuse(project, exc: otlp.OtlpError) -> _Status:
    logger.info("ingest (gRPC): refused a request of project %s: %s %s", project.slug, exc.http_status, exc.message)
    _count_refusal(project, exc.http_status)
    return status_for(exc.http_status, exc.message, field=exc.field)


def _release_freed_memory() -> None:
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):  # not glibc: nothing to hand back this way
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


def _metadata(context: grpc.ServicerContext) -> dict[str, str]:
    """Text metadata by (lower-case) key; the first value of a repeated key wins."""
    out: dict[str, str] = {}
    for item in context.invocation_metadata() or ():
        key, value = item.key, item.value
        if isinstance(value, str):
            out.setdefault(key, value)
    return out


def _auth_message(message: str) -> str:
    # AuthError speaks of HTTP headers; over gRPC the same key travels as metadata.
    return message.replace("Authorization header", "authorization metadata").replace(
        "'Authorization: Bearer", "'authorization: Bearer"
    )


def _count_refusal(project, http_status: int) -> None:
    # The gRPC code the sender saw, so the health page tells the two transports apart.
    reason = f"gRPC {code_pb2.Code.Name(otlp.rpc_code(http_status))}"
    try:
        services.request_refused(project=project, reason=reason)
    except DatabaseError:
        logger.warning("ingest (gRPC): could not count a refused request", exc_info=True)


# ---------------------------------------------------------------------------
# Servicers and the server
# ---------------------------------------------------------------------------


class _Servicer:
    signal: Signal

    def __init__(self, dispatch=None):
        self.dispatch = dispatch

    def Export(self, request: Message, context: grpc.ServicerContext) -> bytes:  # noqa: N802 - the generated name
        return export(self.signal, request, context, self.dispatch)


class TraceService(_Servicer, trace_service_pb2_grpc.TraceServiceServicer):
    """opentelemetry.proto.collector.trace.v1.TraceService."""

    signal = TRACES


class LogsService(_Servicer, logs_service_pb2_grpc.LogsServiceServicer):
    """opentelemetry.proto.collector.logs.v1.LogsService."""

    signal = LOGS


class MetricsService(_Servicer, metrics_service_pb2_grpc.MetricsServiceServicer):
    """opentelemetry.proto.collector.metrics.v1.MetricsService: answered and counted, not stored."""

    signal = METRICS


SIGNALS: tuple[tuple[Signal, type], ...] = ((TRACES, TraceService), (LOGS, LogsService), (METRICS, MetricsService))


_SIGNALS_BY_SERVICE = {signal_.service: signal_ for signal_, _ in SIGNALS}


def respond_in_worker(service: str, body: bytes, metadata: dict[str, str]) -> bytes | _Status:
    """A WorkerPool task, run in a worker process: what `respond` answers."""
    if threading.current_thread() is threading.main_thread() and os_signal.getsignal(os_signal.SIGINT) is not os_signal.SIG_IGN:
        # Ctrl-C reaches the whole process group; the server stops its workers itself, after
        # the requests in flight (a worker that has not run a task yet is simply replaced).
        os_signal.signal(os_signal.SIGINT, os_signal.SIG_IGN)
    return respond(_SIGNALS_BY_SERVICE[service], Message(body), metadata)


class WorkerPool:
    """Each request handled by one of `processes` worker processes, so that requests, not
    connections, are spread over the cores (as gunicorn's workers take requests).

    A gRPC server is one Python process: its RPCs share one interpreter lock, and each exporter
    keeps one connection, so sharing a port between processes (SO_REUSEPORT) spreads
    connections, unevenly with a few senders and not at all behind one Collector. Here the
    server's threads only receive and answer; the bytes go to a worker (a spawned interpreter
    with Django set up and its own database connection) that authenticates, decodes and
    writes, and sends back the answer. A worker that dies is replaced; the requests it held
    are answered UNAVAILABLE with RetryInfo, so exporters resend them.
    """

    def __init__(self, processes: int):
        self.processes = processes
        self._lock = threading.Lock()
        self._executor = self._new_executor()

    def _new_executor(self) -> ProcessPoolExecutor:
        # spawn, not fork: the parent runs gRPC's threads, which a fork must not copy.
        return ProcessPoolExecutor(
            max_workers=self.processes, mp_context=multiprocessing.get_context("spawn"), initializer=django.setup
        )

    def start(self, timeout: float = 120) -> None:
        """Start every worker and wait until each has Django set up."""
        pending = [self._executor.submit(time.sleep, 0.2) for _ in range(self.processes)]
        for future in pending:
            future.result(timeout=timeout)

    def __call__(self, signal_: Signal, message: Message, metadata: dict[str, str]) -> bytes | _Status:
        executor = self._executor
        body = message.take()
        try:
            future = executor.submit(respond_in_worker, signal_.service, body, metadata)
            large = len(body) >= TRIM_AFTER_BYTES
            del body
            if large:
                _release_freed_memory()  # this process's copy of gRPC's buffers, as `handle` does in a worker
            return future.result()
        except BrokenProcessPool:
            logger.error("ingest (gRPC): a worker process ended while handling requests; starting new workers")
            self._replace(executor)
            return status_for(
                503,
                "the server lost the worker handling this request; retry shortly",
                retry_after_seconds=settings.INGEST_RETRY_AFTER_SECONDS,
            )

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._executor is broken:
                self._executor = self._new_executor()
        broken.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)


def rpc_handlers(dispatch: WorkerPool | None = None) -> list[grpc.GenericRpcHandler]:
    """One generic handler per signal: bytes in (held by a Message), bytes out; decoding is otlp's, not gRPC's."""
    handlers = []
    for signal_, servicer_class in SIGNALS:
        servicer = servicer_class(dispatch)
        method = grpc.unary_unary_rpc_method_handler(servicer.Export, request_deserializer=Message, response_serializer=None)
        handlers.append(grpc.method_handlers_generic_handler(signal_.service, {"Export": method}))
    return handlers


def server_options(limits: IngestLimits) -> list[tuple[str, int]]:
    """gRPC core applies max_receive_message_length to the message on the wire and again after
    decompression (answering RESOURCE_EXHAUSTED, as OTLP requires), so one option bounds both;
    `handle` applies the decompressed limit itself when it is the lower of the two."""
    return [
        ("grpc.max_receive_message_length", max(limits.max_body_bytes, limits.max_decompressed_bytes)),
        ("grpc.max_send_message_length", MAX_RESPONSE_BYTES),
        # A second server started by mistake on a busy port must fail to bind, not silently
        # take half the connections (gRPC sets SO_REUSEPORT by default on Linux).
        ("grpc.so_reuseport", 0),
    ]


def create_server(
    *, threads: int = DEFAULT_THREADS, limits: IngestLimits | None = None, workers: WorkerPool | None = None
) -> grpc.Server:
    """A gRPC server with every OTLP service of SIGNALS, answering on its threads, or through
    `workers` (started first); bind it with `bind`, then start() it."""
    limits = limits or settings.INGEST_LIMITS
    pool = futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="otlp-grpc")
    handlers = [Admission(rpc_handlers(workers), pool, settings.INGEST_MAX_QUEUE)]
    return grpc.server(pool, handlers=handlers, options=server_options(limits))


class Admission(grpc.GenericRpcHandler):
    """Admission control: beyond `max_queue` RPCs waiting for a thread, UNAVAILABLE + RetryInfo at once.

    An RPC waits in the thread pool's queue, unbounded, until a thread is free: at twice the
    sustainable rate (bench/overload.py) that wait passed the exporters' 10 s deadline within
    seconds, and the threads went on writing requests whose senders had given up. gRPC asks the
    handlers for an RPC's method as it arrives, on its polling thread, before the RPC queues: here
    the queue is looked at, and an RPC over the bound gets a handler that only refuses, a task
    that costs no write (ingest/admission.py is the HTTP edge's twin). max_queue 0: no bound.
    """

    def __init__(self, handlers: list[grpc.GenericRpcHandler], pool: futures.ThreadPoolExecutor, max_queue: int):
        self.handlers = handlers
        self.pool = pool
        self.max_queue = max_queue
        self.refuse = grpc.unary_unary_rpc_method_handler(self._refuse, request_deserializer=Message, response_serializer=None)

    def service(self, handler_call_details):
        handler = next(filter(None, (h.service(handler_call_details) for h in self.handlers)), None)
        # _work_queue: the executor's queue of tasks no thread has taken yet (CPython's ThreadPoolExecutor).
        if handler is not None and 0 < self.max_queue < self.pool._work_queue.qsize():
            return self.refuse
        return handler

    def _refuse(self, request: Message, context: grpc.ServicerContext) -> bytes:
        status = status_for(
            503,
            f"the server is over capacity (more than {self.max_queue} requests waiting, TOOLWATCH_INGEST_MAX_QUEUE); retry shortly",
            retry_after_seconds=settings.INGEST_RETRY_AFTER_SECONDS,
        )
        context.abort_with_status(status)


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def bind(server: grpc.Server, host: str, port: int) -> int:
    """Listen (plaintext) on host:port; the port bound (useful with port 0). RuntimeError when taken."""
    return server.add_insecure_port(address(host, port))
