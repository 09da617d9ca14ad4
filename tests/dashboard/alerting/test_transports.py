"""The HTTP sender (dashboard.alerting.transports.http_post) against real loopback servers.

What it proves: a send resolves the name once and connects to that vetted answer (pinned),
so a resolver that rebinds cannot steer it; no redirect is followed; a failed send reports
the status and its reason, never the receiver's body; over https the name is used for SNI
and the certificate check while the socket goes to the pinned address.
The resolver is passed in (or swapped for the whole send path: `targets.resolve_host` is
the DNS seam); servers, sockets and TLS are real.
"""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import trustme

from dashboard.alerting import targets, transports
from dashboard.alerting.delivery import channel_send_test, delivery_send
from dashboard.alerting.lifecycle import alert_apply_finding
from dashboard.alerting.transports import TransportError, http_post
from dashboard.models import AlertChannel, Delivery, DeliveryAttempt
from tests.factories import make_project

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
PUBLIC = "93.184.215.14"
SECRET_BODY = b"internal reply: db_password=hunter2"
NAME = "hooks.example.test"


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = SECRET_BODY
    reason: str | None = None


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        server = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        server.seen.append(Seen(self.path, dict(self.headers.items()), body))
        answer = server.answers.pop(0) if server.answers else Answer()
        self.send_response(answer.status, answer.reason)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)

    do_GET = do_POST

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: str = "127.0.0.1", port: int = 0, context: ssl.SSLContext | None = None):
        super().__init__((address, port), _Handler)
        self.seen: list[Seen] = []
        self.answers: list[Answer] = []
        if context is not None:
            self.socket = context.wrap_socket(self.socket, server_side=True)
        self.port = self.server_address[1]

    def handle_error(self, request, client_address):
        pass  # a refused TLS handshake is expected in some tests

    def url(self, host: str = "127.0.0.1", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}/hook"


@pytest.fixture
def serve():
    servers: list[Server] = []

    def start(*args, **kwargs) -> Server:
        server = Server(*args, **kwargs)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def _short_timeout(monkeypatch):
    monkeypatch.setattr(transports, "HTTP_TIMEOUT_SECONDS", 0.5)


@pytest.fixture
def guard_on(settings):
    settings.TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS = False


@pytest.fixture
def guard_off(settings):
    # The receivers here listen on loopback: only the escape hatch lets a send reach them.
    settings.TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS = True


def rebinding(*answers: list[str]):
    """A resolver answering `answers[0]`, then `answers[1]`, …, the last one from then on."""
    calls: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        return answers[min(len(calls), len(answers)) - 1]

    resolve.calls = calls
    return resolve


# --- pinning -----------------------------------------------------------------------------


def test_a_send_connects_to_the_one_answer_it_vetted_and_sends_the_name_as_host(serve, guard_off):
    first = serve("127.0.0.1")
    try:
        second = serve("127.0.0.2", first.port)  # the same port on another loopback address
    except OSError:
        pytest.skip("127.0.0.2 is not a loopback address here")
    resolve = rebinding(["127.0.0.1"], ["127.0.0.2"])

    assert http_post(first.url(NAME), b"{}", {"Content-Type": "application/json"}, resolver=resolve) == 200

    assert resolve.calls == [NAME]  # resolved once: nothing resolves it again behind our back
    [seen] = first.seen
    assert second.seen == []
    assert seen.path == "/hook" and seen.headers["Host"] == f"{NAME}:{first.port}" and seen.body == b"{}"
    assert seen.headers["User-Agent"] == transports.USER_AGENT

    assert http_post(first.url(NAME), b"{}", {}, resolver=resolve) == 200  # the next send asks again
    assert len(second.seen) == 1 and resolve.calls == [NAME, NAME]


def test_a_name_that_rebinds_to_loopback_after_it_was_saved_is_refused_and_never_reached(serve, guard_on, monkeypatch, db):
    server = serve()
    resolve = rebinding([PUBLIC], ["127.0.0.1"])
    monkeypatch.setattr(targets, "resolve_host", resolve)  # the DNS of the whole save-and-send path
    url = server.url(NAME)
    assert targets.clean_target_url(url) == url  # vetted when saved: public
    channel = AlertChannel.objects.create(project=make_project(), kind="webhook", name="Hook", target=url)

    ok, message = channel_send_test(channel=channel, now=NOW)

    assert not ok and server.seen == []
    assert message == f"refused: {NAME} resolves to 127.0.0.1, a loopback address (alerts go to public hosts only)"
    assert resolve.calls == [NAME, NAME]  # once at save, once for the send
    attempt = DeliveryAttempt.objects.get()
    assert (attempt.ok, attempt.error, attempt.response_code) == (False, message, None)


def test_the_connection_goes_to_the_vetted_answer_not_to_what_the_system_resolver_says(serve, guard_on):
    # The bug this closes: the name was vetted through one lookup, and the HTTP client looked
    # it up again. Here the vetting sees a public address for "localhost", which the system
    # resolver (/etc/hosts) would turn into 127.0.0.1, where a receiver listens.
    server = serve()
    resolve = rebinding([PUBLIC])

    with pytest.raises(TransportError) as caught:
        http_post(server.url("localhost"), b"{}", {}, resolver=resolve)

    assert server.seen == [] and resolve.calls == ["localhost"]
    assert not caught.value.permanent  # the public address does not answer from this machine
    assert "hunter2" not in caught.value.message


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (["64:ff9b::7f00:1"], "the NAT64 form of 127.0.0.1, a loopback address"),
        (["2002:7f00:1::1"], "the 6to4 form of 127.0.0.1, a loopback address"),
        (["::ffff:169.254.169.254"], "the IPv4-mapped form of 169.254.169.254, a link-local address"),
        ([PUBLIC, "10.0.0.7"], "a private address (10.0.0.0/8)"),
    ],
)
def test_a_send_to_a_name_with_any_special_answer_is_refused_for_good(answer, why, guard_on):
    with pytest.raises(TransportError) as caught:
        http_post(f"https://{NAME}/hook", b"{}", {}, resolver=rebinding(answer))

    assert caught.value.permanent and why in caught.value.message and caught.value.message.startswith("refused: ")


@pytest.mark.parametrize("host", ["127.0.0.1", "2130706433", "0x7f.0.0.1", "127.1", "[::ffff:127.0.0.1]"])
def test_with_the_guard_on_no_spelling_of_loopback_reaches_a_loopback_receiver(serve, guard_on, host):
    server = serve()

    with pytest.raises(TransportError) as caught:
        http_post(f"http://{host}:{server.port}/hook", b"{}", {})  # the system resolver: numeric, no network

    assert caught.value.permanent and "127.0.0.1" in caught.value.message and server.seen == []


def test_a_name_that_does_not_resolve_now_is_a_transient_error(guard_on):
    def fail(host, port):
        raise OSError("Temporary failure in name resolution")

    with pytest.raises(TransportError) as caught:
        http_post(f"https://{NAME}/hook", b"{}", {}, resolver=fail)

    assert not caught.value.permanent and caught.value.message == f"The host '{NAME}' does not resolve."


def test_the_next_vetted_address_is_tried_when_the_first_refuses_the_connection(serve, guard_off):
    server = serve()  # nothing listens on 127.0.0.3 at its port

    assert http_post(server.url(NAME), b"{}", {}, resolver=rebinding(["127.0.0.3", "127.0.0.1"])) == 200
    assert len(server.seen) == 1


# --- redirects and what a failure shows ---------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_and_fails_for_good(serve, guard_off, status):
    elsewhere = serve()
    server = serve()
    server.answers = [Answer(status, {"Location": elsewhere.url()})]

    with pytest.raises(TransportError) as caught:
        http_post(server.url(), b"{}", {})

    assert caught.value.permanent and caught.value.response_code == status
    assert caught.value.message.endswith(": redirect not followed, point the channel at the final URL")
    assert caught.value.message.startswith(f"HTTP {status} ")
    assert elsewhere.url() not in caught.value.message
    assert len(server.seen) == 1 and elsewhere.seen == []


@pytest.mark.parametrize(
    ("status", "message", "permanent"),
    [(400, "HTTP 400 Bad Request", True), (404, "HTTP 404 Not Found", True), (408, "HTTP 408 Request Timeout", False),
     (429, "HTTP 429 Too Many Requests", False), (500, "HTTP 500 Internal Server Error", False),
     (503, "HTTP 503 Service Unavailable", False)],
)  # fmt: skip
def test_a_failed_send_reports_the_status_and_its_reason_never_the_body(serve, guard_off, status, message, permanent):
    server = serve()
    server.answers = [Answer(status, reason="db_password=hunter2")]

    with pytest.raises(TransportError) as caught:
        http_post(server.url(), b"{}", {})

    assert (caught.value.message, caught.value.permanent, caught.value.response_code) == (message, permanent, status)


def test_a_nonstandard_status_keeps_a_cleaned_short_reason(serve, guard_off):
    server = serve()
    server.answers = [Answer(599, reason="Network \x7fConnect Timeout " + "x" * 100)]

    with pytest.raises(TransportError) as caught:
        http_post(server.url(), b"{}", {})

    assert caught.value.message == "HTTP 599 Network Connect Timeout " + "x" * 36


def test_an_answer_that_is_not_http_is_reported_without_its_bytes(guard_off):
    listener = socket.create_server(("127.0.0.1", 0))

    def answer():
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"SECRET-BANNER hunter2\r\n\r\n")
        conn.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        with pytest.raises(TransportError) as caught:
            http_post(f"http://127.0.0.1:{listener.getsockname()[1]}/", b"{}", {})
    finally:
        listener.close()

    assert caught.value.message == "connection failed: not an HTTP answer (BadStatusLine)"
    assert not caught.value.permanent


def test_the_delivery_log_and_the_alert_page_show_the_status_never_the_body(serve, guard_off, member_client, project):
    server = serve()
    server.answers = [Answer(500, body=SECRET_BODY), Answer(200, body=SECRET_BODY)]
    channel = AlertChannel.objects.create(project=project, kind="webhook", name="Hook", target=server.url())
    alert = alert_apply_finding(project=project, tool="lookup_order", kind="error_rate_spike", firing=True,
                                evidence={"z": 5.0}, summary="Errors up.", now=NOW)  # fmt: skip
    delivery = Delivery.objects.get(alert=alert, channel=channel)

    assert delivery_send(delivery_id=delivery.id, now=NOW) == "pending"
    page = member_client.get(f"/p/{project.slug}/alerts/{alert.id}/").content.decode()

    delivery.refresh_from_db()
    assert (delivery.last_error, delivery.response_code) == ("HTTP 500 Internal Server Error", 500)
    assert "HTTP 500 Internal Server Error" in page
    assert "hunter2" not in page
    assert not any("hunter2" in error for error in DeliveryAttempt.objects.values_list("error", flat=True))
    assert delivery_send(delivery_id=delivery.id, now=delivery.next_attempt_at) == "sent"
    assert len(server.seen) == 2


# --- https: pinned socket, the name for SNI and the certificate ----------------------------


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


def tls_server(serve, ca, name: str) -> tuple[Server, list[str | None]]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(name).configure_cert(context)
    names: list[str | None] = []
    context.sni_callback = lambda sock, server_name, ctx: names.append(server_name)
    return serve(context=context), names


def client_context(ca) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def test_https_goes_to_the_pinned_address_with_the_name_in_sni_and_the_certificate(serve, ca, guard_off):
    server, names = tls_server(serve, ca, NAME)
    resolve = rebinding(["127.0.0.1"], ["192.0.2.1"])

    code = http_post(server.url(NAME, "https"), b"{}", {}, resolver=resolve, ssl_context=client_context(ca))

    assert code == 200 and names == [NAME] and resolve.calls == [NAME]
    assert server.seen[0].headers["Host"] == f"{NAME}:{server.port}"


def test_https_refuses_a_certificate_for_another_name(serve, ca, guard_off):
    server, names = tls_server(serve, ca, "other.example.test")

    with pytest.raises(TransportError) as caught:
        http_post(server.url(NAME, "https"), b"{}", {}, resolver=rebinding(["127.0.0.1"]), ssl_context=client_context(ca))

    assert caught.value.message.startswith(f"TLS certificate of '{NAME}' not accepted: ")
    assert "mismatch" in caught.value.message.lower() and names == [NAME] and server.seen == []


def test_https_refuses_a_certificate_from_an_unknown_authority(serve, ca, guard_off):
    server, _ = tls_server(serve, ca, NAME)

    with pytest.raises(TransportError) as caught:
        http_post(server.url(NAME, "https"), b"{}", {}, resolver=rebinding(["127.0.0.1"]))  # the system's CAs

    assert caught.value.message.startswith(f"TLS certificate of '{NAME}' not accepted: ") and server.seen == []
