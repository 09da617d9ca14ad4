"""Overload and outage answers of both edges (bench/overload.py measures them end to end).

Admission control (ingest/admission.py, grpc_edge.Admission): beyond INGEST_MAX_QUEUE requests
waiting, a quick 503 / UNAVAILABLE with Retry-After / RetryInfo that costs no database work.
A database that cannot be reached is a 503 with Retry-After, never a 500.
"""

from __future__ import annotations

import socket
import time
from concurrent import futures

import grpc
import pytest
from django.db import connection
from google.rpc import error_details_pb2

from ingest import admission, grpc_edge, views
from ingest.models import Span
from tests.factories import make_key
from tests.otlp_builders import agent_with_tools, protobuf_request, sdk_spans

PB = "application/x-protobuf"


@pytest.fixture
def crowded():
    """A listening socket with three connections waiting, and one accepted from it (the request's)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    clients = [socket.create_connection(listener.getsockname()) for _ in range(4)]
    accepted, _ = listener.accept()
    deadline = time.monotonic() + 2
    while admission.queue_length(accepted) != 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    yield accepted
    for sock in [accepted, listener, *clients]:
        sock.close()
    admission._listeners.clear()


def body() -> bytes:
    return protobuf_request(sdk_spans(lambda tracer: agent_with_tools(tracer, tools=[{"name": "lookup_order"}])))


def test_the_accept_queue_of_the_requests_listening_socket_is_read(crowded):
    assert admission.queue_length(crowded) == 3


def test_a_socket_without_a_listener_in_this_process_tells_nothing():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname())
    try:
        # The client end's local address belongs to no listening socket.
        assert admission.queue_length(client) is None
    finally:
        client.close()
        server.close()
        admission._listeners.clear()


def test_requests_over_the_queue_bound_are_refused_with_retry_after(crowded, settings):
    settings.INGEST_MAX_QUEUE = 2
    settings.INGEST_RETRY_AFTER_SECONDS = 3
    assert admission.refusal_wait({"gunicorn.socket": crowded}) == 3
    settings.INGEST_MAX_QUEUE = 3
    assert admission.refusal_wait({"gunicorn.socket": crowded}) == 0
    settings.INGEST_MAX_QUEUE = 0  # no bound
    assert admission.refusal_wait({"gunicorn.socket": crowded}) == 0
    assert admission.refusal_wait({}) == 0  # a server that does not hand over its socket


@pytest.mark.django_db
def test_a_shed_request_is_a_503_with_retry_after_its_body_read_and_no_query(client, crowded, settings, django_assert_num_queries):
    settings.INGEST_MAX_QUEUE = 1
    _, key = make_key()
    with django_assert_num_queries(0):
        response = client.generic(
            "POST", "/v1/traces", body(), content_type=PB, HTTP_AUTHORIZATION=f"Bearer {key}", **{"gunicorn.socket": crowded}
        )
    assert response.status_code == 503
    assert response["Retry-After"] == str(settings.INGEST_RETRY_AFTER_SECONDS)
    assert response["Content-Type"] == PB
    assert Span.objects.count() == 0


def test_the_shed_path_reads_the_whole_body(crowded, settings, rf):
    settings.INGEST_MAX_QUEUE = 1
    data = body()
    request = rf.generic("POST", "/v1/traces", data, content_type=PB, **{"gunicorn.socket": crowded})
    response = views.traces(request)
    assert response.status_code == 503
    assert request.read() == b""  # nothing left for the kernel to reset the connection over


@pytest.mark.django_db
def test_requests_under_the_bound_are_stored(client, crowded, settings):
    settings.INGEST_MAX_QUEUE = 16
    _, key = make_key()
    response = client.generic(
        "POST", "/v1/traces", body(), content_type=PB, HTTP_AUTHORIZATION=f"Bearer {key}", **{"gunicorn.socket": crowded}
    )
    assert response.status_code == 200
    assert Span.objects.count() > 0


@pytest.fixture
def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.django_db(transaction=True)
def test_a_database_that_cannot_be_reached_is_a_503_with_retry_after_not_a_500(client, closed_port, settings):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL=postgres://…): the connection is pointed at a closed port")
    _, key = make_key()
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(closed_port))
    try:
        response = client.generic("POST", "/v1/traces", body(), content_type=PB, HTTP_AUTHORIZATION=f"Bearer {key}")
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    assert response.status_code == 503
    assert response["Retry-After"] == str(settings.INGEST_RETRY_AFTER_SECONDS)
    assert Span.objects.count() == 0


# --- gRPC -------------------------------------------------------------------------------------


class _Details(grpc.HandlerCallDetails):
    def __init__(self, method: str):
        self.method = method
        self.invocation_metadata = ()


class _Aborted(Exception):
    pass


class _Context:
    def abort_with_status(self, status):
        self.status = status
        raise _Aborted


TRACE_EXPORT = f"/{grpc_edge.TRACES.service}/Export"


def test_grpc_rpcs_over_the_queue_bound_get_a_handler_that_only_refuses(settings):
    pool = futures.ThreadPoolExecutor(max_workers=1)
    gate = futures.Future()
    admitting = grpc_edge.Admission(grpc_edge.rpc_handlers(), pool, max_queue=2)
    try:
        pool.submit(gate.result)  # the only thread is busy
        assert admitting.service(_Details(TRACE_EXPORT)) is not admitting.refuse
        queued = [pool.submit(lambda: None) for _ in range(3)]
        assert admitting.service(_Details(TRACE_EXPORT)) is admitting.refuse
        assert admitting.service(_Details("/no.such.Service/Export")) is None  # still UNIMPLEMENTED
        admitting.max_queue = 0  # no bound
        assert admitting.service(_Details(TRACE_EXPORT)) is not admitting.refuse
    finally:
        gate.set_result(None)
        pool.shutdown(wait=True)
    assert all(future.done() for future in queued)


def test_a_refused_grpc_rpc_is_unavailable_with_retry_info(settings):
    settings.INGEST_RETRY_AFTER_SECONDS = 2
    admitting = grpc_edge.Admission(grpc_edge.rpc_handlers(), futures.ThreadPoolExecutor(max_workers=1), max_queue=1)
    context = _Context()
    with pytest.raises(_Aborted):
        admitting.refuse.unary_unary(grpc_edge.Message(body()), context)
    assert context.status.code == grpc.StatusCode.UNAVAILABLE
    trailers = dict(context.status.trailing_metadata)
    retry = error_details_pb2.RetryInfo.FromString(trailers[grpc_edge.RETRY_INFO_TRAILER])
    assert retry.retry_delay.seconds == 2
