"""The OTLP/HTTP edge: authenticate, read, decode, hand to the write service, answer per the OTLP spec.

POST /v1/traces (`services.spans_ingest`), /v1/logs (`services.logs_ingest`) and /v1/metrics
(answered, counted as dropped) share every step but the write: `_receive` then `_store`.
"""

from __future__ import annotations

import datetime as dt
import http
import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import Error as DatabaseError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from ingest import admission, otlp, services, throttle, wire
from ingest.limits import IngestLimits

logger = logging.getLogger(__name__)


class BodyError(Exception):
    def __init__(self, http_status: int, message: str):
        super().__init__(message)
        self.http_status = http_status
        self.message = message


def read_body(request: HttpRequest, limit: int) -> bytes:
    """The whole request body, at most `limit` bytes, whether sent with a Content-Length or chunked.

    Django's request.body is empty for a chunked body (no Content-Length): answering
    200 to that would lose spans silently. Servers that de-chunk (waitress sets
    CONTENT_LENGTH; gunicorn marks wsgi.input_terminated) are read to the end; a
    server that cannot (Django's runserver) gets a 411 that says so.
    """
    meta = request.META
    length = meta.get("CONTENT_LENGTH") or ""
    if length.strip():
        try:
            size = int(length)
        except ValueError:
            raise BodyError(400, f"invalid Content-Length {length!r}") from None
        if size > limit:
            raise BodyError(413, f"body of {size} bytes exceeds the limit of {limit} bytes")
        return request.read(size)
    if "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower():
        if not meta.get("wsgi.input_terminated"):
            raise BodyError(411, "chunked request bodies are not readable under this server; send a Content-Length")
        body = meta["wsgi.input"].read(limit + 1)
        if len(body) > limit:
            raise BodyError(413, f"body exceeds the limit of {limit} bytes")
        return body
    return b""


def _answer(media: str, status: int, body: bytes, **headers) -> HttpResponse:
    response = HttpResponse(body, status=status, content_type=otlp.content_type_for(media))
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _error(media: str, status: int, message: str, **headers) -> HttpResponse:
    return _answer(media, status, otlp.status_body(media, status, message), **headers)


@dataclass(frozen=True)
class Signal:
    """What differs between the OTLP/HTTP endpoints; every other step is shared (`_receive`)."""

    noun: str  # in the 405 message: "POST OTLP/HTTP <noun> here"
    items: str  # what a request carries, in the 413 message
    decode: Callable[[bytes, str, IngestLimits], object]  # (body, media, limits) -> export request; raises otlp.OtlpError
    count: Callable[[object], int]
    limit: Callable[[IngestLimits], int] | None  # items allowed per request (None: no limit of its own)


# Large protobuf bodies are checked and flattened (metrics: counted) in pieces (ingest/wire.py), in bounded memory.
TRACES = Signal("traces", "spans", wire.decode_traces, wire.count_spans, lambda limits: limits.max_spans_per_request)
LOGS = Signal(
    "logs", "log records", wire.decode_logs, wire.count_log_records,
    lambda limits: limits.max_log_records_per_request,
)  # fmt: skip
# Metrics are answered (and counted as dropped) but not stored: no per-request count limit
# beyond the body limits, since nothing per point is kept.
METRICS = Signal("metrics", "metric data points", wire.decode_metrics, wire.count_data_points, None)


# The answer of a server that does not receive OTLP/HTTP (TOOLWATCH_OTLP_HTTP=0: compose's web service).
OTLP_ELSEWHERE = (
    "OTLP/HTTP is not received on this server (TOOLWATCH_OTLP_HTTP=0); send it to Toolwatch's otlp service, "
    "port 4318 in docker-compose.yml (docs/operations.md#docker-compose-services)"
)


@dataclass(frozen=True)
class Received:
    """A request that passed every shared step: authenticated, read, decompressed, decoded, counted."""

    media: str
    key: object  # ingest.models.ApiKey
    export_request: object
    count: int
    limits: IngestLimits


def _receive(request: HttpRequest, signal: Signal) -> Received | HttpResponse:
    """The steps every OTLP/HTTP endpoint shares, in order: media type, method, key, body
    (read, decompress, decode, count against the limit). A refusal is the response to send,
    counted in ingest health once the key is known."""
    # Errors are answered in the request's own encoding; JSON when that is unknown.
    media, media_error = "json", None
    try:
        media = otlp.media_type(request.META.get("CONTENT_TYPE", ""))
    except otlp.OtlpError as exc:
        media_error = exc
    if not settings.INGEST_OTLP_HTTP:
        return _error(media, 404, OTLP_ELSEWHERE)
    if request.method != "POST":
        return _error(media, 405, f"method {request.method} not allowed; POST OTLP/HTTP {signal.noun} here", Allow="POST")

    if wait := admission.refusal_wait(request.META):  # too many connections waiting: shed before any work
        _drain(request)
        return _error(media, 503, admission.refusal_message(), Retry_After=str(wait))
    try:
        key = services.api_key_authenticate(
            request.META.get("HTTP_AUTHORIZATION", ""), project_slug=request.META.get("HTTP_X_TOOLWATCH_PROJECT", "")
        )
    except services.AuthError as exc:
        return _error(media, exc.http_status, exc.message)
    except DatabaseError:
        return _unavailable(media)
    if media_error is not None:
        _count_refusal(key.project, media_error.http_status)
        return _answer(media, media_error.http_status, otlp.error_body(media, media_error))
    project = key.project
    limits = settings.INGEST_LIMITS

    try:
        body = read_body(request, limits.max_body_bytes)
        body = otlp.decompress(body, request.META.get("HTTP_CONTENT_ENCODING", ""), limits.max_decompressed_bytes)
        export_request = signal.decode(body, media, limits)  # limits.max_json_values: refused before parsing
        del body  # the decoded message holds what is needed; free the bytes before the heavy part
        count = signal.count(export_request)
        if signal.limit is not None and count > signal.limit(limits):
            raise otlp.OtlpError(413, f"{count} {signal.items} in one request exceeds the limit of {signal.limit(limits)}")
    except (BodyError, otlp.OtlpError) as exc:
        logger.info("ingest: refused a request of project %s: %s %s", project.slug, exc.http_status, exc.message)
        _count_refusal(project, exc.http_status)
        if isinstance(exc, otlp.OtlpError):
            return _answer(media, exc.http_status, otlp.error_body(media, exc))  # names the JSON field too
        return _error(media, exc.http_status, exc.message)
    if wait := throttle.ingest_wait(key_id=key.pk, cost=count):  # OTLP throttling: 429 + Retry-After
        _count_refusal(project, 429)
        return _error(media, 429, throttle.refusal_message(wait), Retry_After=str(wait))
    return Received(media, key, export_request, count, limits)


def _store(received: Received, write: Callable[[dt.datetime], object], partial_success_body) -> HttpResponse:
    """Run the signal's one write, touch the key, answer: success, partial success, or 503."""
    media = received.media
    # Received once read in full: a slow upload does not age the data (services.MAX_WRITE).
    now = timezone.now()
    try:
        result = write(now)
        services.api_key_touch(key=received.key, now=now)
    except otlp.OtlpError as exc:  # a limit the write applies itself (its transaction rolled back): as gRPC's edge
        project = received.key.project
        logger.info("ingest: refused a request of project %s: %s %s", project.slug, exc.http_status, exc.message)
        _count_refusal(project, exc.http_status)
        return _answer(media, exc.http_status, otlp.error_body(media, exc))
    except DatabaseError:
        logger.exception("ingest: database refused the write; answering 503")
        return _unavailable(media)
    if result.rejected_count:
        return _answer(media, 200, partial_success_body(media, result.rejected_count, result.rejection_message()))
    return _answer(media, 200, otlp.success_body(media))


@csrf_exempt
def traces(request: HttpRequest) -> HttpResponse:
    received = _receive(request, TRACES)
    if isinstance(received, HttpResponse):
        return received
    project = received.key.project
    return _store(
        received,
        lambda now: services.spans_ingest(project=project, request=received.export_request, limits=received.limits, now=now),
        otlp.partial_success_body,
    )


@csrf_exempt
def logs(request: HttpRequest) -> HttpResponse:
    """POST /v1/logs: log records stored, agents' tool events made tool calls (docs/contract/logs.md)."""
    received = _receive(request, LOGS)
    if isinstance(received, HttpResponse):
        return received
    project = received.key.project
    return _store(
        received,
        lambda now: services.logs_ingest(project=project, request=received.export_request, limits=received.limits, now=now),
        otlp.logs_partial_success_body,
    )


@dataclass(frozen=True)
class _Dropped:
    """The outcome of a metrics request: every data point accepted and dropped."""

    rejected_count: int

    def rejection_message(self) -> str:
        return f"Toolwatch stores traces and logs; {self.rejected_count} metric data points dropped"


@csrf_exempt
def metrics(request: HttpRequest) -> HttpResponse:
    """POST /v1/metrics: answered per OTLP so exporters stay quiet, not stored.

    A partial success with rejected_data_points = every point and a message saying why: OTLP
    clients do not retry a partial success, and the drop is counted in ingest health."""
    received = _receive(request, METRICS)
    if isinstance(received, HttpResponse):
        return received
    project = received.key.project

    def write(now: dt.datetime) -> _Dropped:
        services.metrics_dropped(project=project, data_points=received.count, now=now)
        return _Dropped(received.count)

    return _store(received, write, otlp.metrics_partial_success_body)


def _drain(request: HttpRequest) -> None:
    """Read the body of a request refused before its body: a worker that closes the connection
    with unread bytes makes the kernel reset it, and the sender sees a reset, not the answer."""
    try:
        read_body(request, settings.INGEST_LIMITS.max_body_bytes)
    except (BodyError, OSError):
        pass


def _unavailable(media: str) -> HttpResponse:
    retry_after = str(settings.INGEST_RETRY_AFTER_SECONDS)
    return _error(media, 503, "the database cannot take the write right now; retry shortly", Retry_After=retry_after)


def _count_refusal(project, http_status: int) -> None:
    # A stable reason keeps the health counters few; the sender got the detailed message.
    reason = f"{http_status} {http.HTTPStatus(http_status).phrase}"
    try:
        services.request_refused(project=project, reason=reason)
    except DatabaseError:
        logger.warning("ingest: could not count a refused request", exc_info=True)

