"""The OTLP/HTTP edge: authenticate, read, decode, hand to `services.spans_ingest`, answer per the OTLP spec."""

from __future__ import annotations

import http
import logging

from django.conf import settings
from django.db import Error as DatabaseError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from ingest import otlp, services

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


@csrf_exempt
def traces(request: HttpRequest) -> HttpResponse:
    # Errors are answered in the request's own encoding; JSON when that is unknown.
    media, media_error = "json", None
    try:
        media = otlp.media_type(request.META.get("CONTENT_TYPE", ""))
    except otlp.OtlpError as exc:
        media_error = exc
    if request.method != "POST":
        return _error(media, 405, f"method {request.method} not allowed; POST OTLP/HTTP traces here", Allow="POST")

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
        export_request = otlp.decode_request(body, media)
        del body  # the decoded message holds what is needed; free the bytes before the heavy part
        spans = otlp.count_spans(export_request)
        if spans > limits.max_spans_per_request:
            raise otlp.OtlpError(413, f"{spans} spans in one request exceeds the limit of {limits.max_spans_per_request}")
    except (BodyError, otlp.OtlpError) as exc:
        logger.info("ingest: refused a request of project %s: %s %s", project.slug, exc.http_status, exc.message)
        _count_refusal(project, exc.http_status)
        if isinstance(exc, otlp.OtlpError):
            return _answer(media, exc.http_status, otlp.error_body(media, exc))  # names the JSON field too
        return _error(media, exc.http_status, exc.message)

    # Received once read in full: a slow upload does not age the spans (services.MAX_WRITE).
    now = timezone.now()
    try:
        result = services.spans_ingest(project=project, request=export_request, limits=limits, now=now)
        services.api_key_touch(key=key, now=now)
    except DatabaseError:
        logger.exception("ingest: database refused the write; answering 503")
        return _unavailable(media)

    if result.rejected_count:
        return _answer(media, 200, otlp.partial_success_body(media, result.rejected_count, result.rejection_message()))
    return _answer(media, 200, otlp.success_body(media))


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

