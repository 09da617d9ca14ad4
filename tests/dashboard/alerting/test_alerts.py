"""Alerts: the lifecycle, and delivery to real loopback receivers (HTTP and SMTP).

Receivers are real servers on 127.0.0.1 (an http.server in a thread, aiosmtpd), so the
bytes on the wire, the signature and the error classes are the real ones. Time is passed
in as `now` and advanced by hand; timeouts are shortened to keep the file fast.
"""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import json
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from config.celery import app as celery_app
from dashboard.alerting import transports
from dashboard.alerting.delivery import (
    CLAIM_LEASE,
    MAX_ATTEMPTS,
    RETRY_DELAYS,
    channel_reenable,
    channel_send_test,
    deliveries_due,
    delivery_send,
)
from dashboard.alerting.lifecycle import alert_acknowledge, alert_apply_finding, alert_mute, alert_resolve
from dashboard.alerting.transports import TransportError, http_post, slack_escape, verify_signature
from dashboard.models import Alert, AlertChannel, Delivery, DeliveryAttempt
from tests.factories import make_project


@pytest.fixture(autouse=True)
def _receivers_on_loopback(settings):
    # These tests' receivers listen on 127.0.0.1, which the SSRF guard refuses by default.
    settings.TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS = True

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
KIND = "retry_rise_flat_error"
EVIDENCE = {
    "recent": {"start": "2026-11-29T11:00:00+00:00", "end": "2026-11-29T12:00:00+00:00", "calls": 840, "retries": 352},
    "baseline": {"start": "2026-11-22T09:00:00+00:00", "end": "2026-11-29T09:00:00+00:00", "calls": 120480, "retries": 9638},
    "statistics": {"z": 9.7, "z_open": 4.5, "retry_rate": [0.419, 0.080], "error_rate": [0.031, 0.029]},
    "sample_trace_ids": ["4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"],
}


# --- loopback receivers ----------------------------------------------------------------


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


class Receiver:
    """What the HTTP receiver got, and how it answers: `answers` are used one per request
    (a status, or "hang" to answer after the client gave up); then 200."""

    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}/hook"
        self.requests: list[Received] = []
        self.answers: list[int | str] = []
        self.secret: str | None = None  # when set, unsigned or badly signed bodies get a 401
        self.released = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        receiver: Receiver = self.server.receiver
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        receiver.requests.append(Received(self.path, dict(self.headers.items()), body))
        answer = receiver.answers.pop(0) if receiver.answers else 200
        if answer == "hang":
            receiver.released.wait(5)  # far past the client's timeout; released at teardown
            answer = 200
        signature = self.headers.get("X-Toolwatch-Signature")
        if receiver.secret is not None and not verify_signature(receiver.secret, body, signature):
            answer = 401
        try:
            self.send_response(answer)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        except OSError:
            pass  # the client gave up (the "hang" case)

    def log_message(self, *args):
        pass


class _Server(ThreadingHTTPServer):
    block_on_close = False  # do not wait for a hanging handler at shutdown
    daemon_threads = True


@pytest.fixture
def receiver(monkeypatch):
    monkeypatch.setattr(transports, "HTTP_TIMEOUT_SECONDS", 0.3)
    server = _Server(("127.0.0.1", 0), _Handler)
    server.receiver = Receiver(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server.receiver
    server.receiver.released.set()
    server.shutdown()
    server.server_close()


class Inbox:
    """An aiosmtpd handler that keeps every message; addresses in `refuse` get a 550."""

    def __init__(self):
        self.messages: list[email.message.EmailMessage] = []
        self.envelopes = []
        self.refuse: set[str] = set()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refuse:
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.envelopes.append(envelope)
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 Message accepted for delivery"


class _LoopbackController(Controller):
    def _trigger_server(self):
        # Bound to port 0: learn the real port before the controller connects to itself.
        self.port = self.server.sockets[0].getsockname()[1]
        super()._trigger_server()


@pytest.fixture
def smtp(settings):
    inbox = Inbox()
    controller = _LoopbackController(inbox, hostname="127.0.0.1", port=0)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = controller.port
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_TIMEOUT = 2
    settings.DEFAULT_FROM_EMAIL = "alerts@toolwatch.test"
    yield inbox
    controller.stop()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- helpers ---------------------------------------------------------------------------


def make_channel(project, kind="webhook", target="http://127.0.0.1:9/unused", **fields) -> AlertChannel:
    name = fields.pop("name", f"{kind} channel")
    return AlertChannel.objects.create(project=project, kind=kind, name=name, target=target, **fields)


def fire(project, *, firing=True, tool="lookup_order", kind=KIND, now=NOW, evidence=EVIDENCE,
         summary="Retries per call rose from 0.08 to 0.42; errors flat."):  # fmt: skip
    return alert_apply_finding(
        project=project, tool=tool, kind=kind, firing=firing, evidence=evidence, summary=summary, now=now
    )


def deliveries(alert=None, **filters) -> list[Delivery]:
    rows = Delivery.objects.filter(**filters)
    if alert is not None:
        rows = rows.filter(alert=alert)
    return list(rows.order_by("id"))


def send(delivery: Delivery, now=NOW) -> str | None:
    return delivery_send(delivery_id=delivery.id, now=now)


# --- lifecycle -------------------------------------------------------------------------


def test_a_firing_finding_opens_an_alert_and_queues_one_delivery_per_active_channel(django_capture_on_commit_callbacks):
    project = make_project()
    hook, slack = make_channel(project), make_channel(project, "slack")
    make_channel(project, "email", "ops@example.com", is_active=False)
    make_channel(make_project(), "webhook")  # another project's

    with django_capture_on_commit_callbacks() as callbacks:
        alert = fire(project)

    assert (alert.status, alert.tool, alert.kind, alert.opened_at, alert.last_seen_at) == ("open", "lookup_order", KIND, NOW, NOW)
    assert Alert.objects.get(id=alert.id).evidence == EVIDENCE
    assert [(d.channel_id, d.event, d.status, d.next_attempt_at) for d in deliveries(alert)] == [
        (hook.id, "opened", "pending", NOW),
        (slack.id, "opened", "pending", NOW),
    ]
    assert len(callbacks) == 2  # one send task per delivery, queued after commit


def test_a_finding_that_keeps_firing_refreshes_the_open_alert_and_sends_nothing_new(django_capture_on_commit_callbacks):
    project = make_project()
    make_channel(project)
    first = fire(project)
    later = NOW + dt.timedelta(hours=1)

    with django_capture_on_commit_callbacks() as callbacks:
        again = fire(project, now=later, evidence={**EVIDENCE, "statistics": {"z": 11.2}}, summary="Still rising.")

    assert again.id == first.id
    stored = Alert.objects.get(id=first.id)
    assert (stored.opened_at, stored.last_seen_at, stored.summary, stored.evidence["statistics"]) == (NOW, later, "Still rising.", {"z": 11.2})
    assert len(deliveries(first)) == 1 and callbacks == []
    assert Alert.objects.count() == 1


def test_a_finding_that_stops_firing_resolves_the_alert_automatically_and_announces_it():
    project = make_project()
    make_channel(project)
    alert = fire(project)
    later = NOW + dt.timedelta(hours=3)

    resolved = fire(project, firing=False, now=later, evidence={"statistics": {"z": 0.4}}, summary="Back to normal.")

    assert resolved.id == alert.id
    assert (resolved.status, resolved.resolved_at, resolved.resolved_by) == ("resolved", later, "auto")
    assert resolved.evidence == EVIDENCE  # the evidence stays that of the firing finding
    assert [(d.event, d.status) for d in deliveries(alert)] == [("opened", "pending"), ("resolved", "pending")]


def test_a_quiet_finding_with_nothing_open_does_nothing():
    project = make_project()
    make_channel(project)

    assert fire(project, firing=False) is None
    assert not Alert.objects.exists() and not Delivery.objects.exists()


def test_an_acknowledged_alert_still_dedupes_and_still_resolves_automatically(member):
    project = make_project()
    make_channel(project)
    alert = fire(project)

    alert_acknowledge(alert=alert, user=member, now=NOW + dt.timedelta(minutes=5))
    again = fire(project, now=NOW + dt.timedelta(hours=1))

    assert again.id == alert.id
    assert (again.status, again.acknowledged_by, again.acknowledged_at) == ("acknowledged", "alice", NOW + dt.timedelta(minutes=5))
    assert len(deliveries(alert)) == 1
    assert fire(project, firing=False, now=NOW + dt.timedelta(hours=2)).status == "resolved"


def test_acknowledging_twice_or_after_the_resolve_changes_nothing(member, owner):
    project = make_project()
    alert = fire(project)
    alert_acknowledge(alert=alert, user=member, now=NOW)
    other = owner  # someone else

    alert_acknowledge(alert=alert, user=other, now=NOW + dt.timedelta(minutes=1))
    assert (alert.acknowledged_by, alert.acknowledged_at) == ("alice", NOW)

    fire(project, firing=False, now=NOW + dt.timedelta(hours=1))
    alert_acknowledge(alert=alert, user=other, now=NOW + dt.timedelta(hours=2))
    assert (alert.status, alert.acknowledged_by) == ("resolved", "alice")


def test_resolving_by_hand_records_who_and_announces_it_once(member):
    project = make_project()
    make_channel(project)
    alert = fire(project)

    alert_resolve(alert=alert, user=member, now=NOW + dt.timedelta(minutes=30))
    alert_resolve(alert=alert, user=member, now=NOW + dt.timedelta(minutes=31))
    assert fire(project, firing=False, now=NOW + dt.timedelta(hours=1)) is None  # nothing open to resolve

    assert (alert.status, alert.resolved_by, alert.resolved_at) == ("resolved", "alice", NOW + dt.timedelta(minutes=30))
    assert [d.event for d in deliveries(alert)] == ["opened", "resolved"]


def test_the_condition_returning_after_a_resolve_opens_a_new_alert():
    project = make_project()
    make_channel(project)
    first = fire(project)
    fire(project, firing=False, now=NOW + dt.timedelta(hours=1))

    second = fire(project, now=NOW + dt.timedelta(hours=5))

    assert second.id != first.id and second.status == "open" and second.opened_at == NOW + dt.timedelta(hours=5)
    assert [d.event for d in deliveries(second)] == ["opened"]
    # Other tools and kinds are other conditions: each has its own alert.
    assert fire(project, tool="refund").id != second.id
    assert fire(project, kind="error_rate_spike").id != second.id
    assert Alert.objects.filter(status="open").count() == 3


def test_only_one_alert_per_project_tool_and_kind_can_be_open():
    project = make_project()
    fire(project)

    with pytest.raises(IntegrityError), transaction.atomic():
        Alert.objects.create(project=project, tool="lookup_order", kind=KIND, status="acknowledged", opened_at=NOW, last_seen_at=NOW)
    # Resolved ones are history, as many as needed.
    for _ in range(2):
        Alert.objects.create(project=project, tool="lookup_order", kind=KIND, status="resolved", opened_at=NOW, last_seen_at=NOW)


def test_evidence_must_be_a_json_object():
    project = make_project()

    alert = fire(project, evidence={"window": (NOW, NOW + dt.timedelta(hours=1)), "z": 5})
    assert Alert.objects.get(id=alert.id).evidence == alert.evidence == {
        "window": ["2026-11-29T12:00:00Z", "2026-11-29T13:00:00Z"], "z": 5,
    }
    for bad in ({"z": float("nan")}, {"z": float("inf")}, {"x": object()}, ["not", "a", "dict"]):
        with pytest.raises(ValueError):
            fire(project, tool="other", evidence=bad)
    assert not Alert.objects.filter(tool="other").exists()


def test_a_muted_alert_is_kept_but_its_deliveries_are_skipped(receiver):
    project = make_project()
    channel = make_channel(project, target=receiver.url)
    alert = fire(project)
    opened = deliveries(alert)[0]

    alert_mute(alert=alert, until=NOW + dt.timedelta(hours=6))
    assert send(opened) == "skipped"  # queued before the mute, sent after: skipped
    assert fire(project, now=NOW + dt.timedelta(hours=1)).id == alert.id  # the lifecycle goes on
    resolved = fire(project, firing=False, now=NOW + dt.timedelta(hours=2))

    assert resolved.status == "resolved"
    assert [(d.event, d.status) for d in deliveries(alert)] == [("opened", "skipped"), ("resolved", "skipped")]
    assert all("muted until" in d.last_error for d in deliveries(alert))
    assert receiver.requests == [] and channel.deliveries.filter(status="pending").count() == 0


def test_a_condition_reopening_within_its_mute_stays_muted_and_unmuting_delivers_again():
    project = make_project()
    make_channel(project)
    first = fire(project)
    alert_mute(alert=first, until=NOW + dt.timedelta(hours=6))
    fire(project, firing=False, now=NOW + dt.timedelta(hours=1))

    flapped = fire(project, now=NOW + dt.timedelta(hours=2))
    assert flapped.muted_until == NOW + dt.timedelta(hours=6)
    assert [d.status for d in deliveries(flapped)] == ["skipped"]

    fire(project, firing=False, now=NOW + dt.timedelta(hours=3))
    after = fire(project, now=NOW + dt.timedelta(hours=7))  # the mute is over
    assert after.muted_until is None and [d.status for d in deliveries(after)] == ["pending"]


def test_a_new_alert_is_sent_after_commit_by_the_celery_task(receiver, django_capture_on_commit_callbacks):
    project = make_project()
    make_channel(project, target=receiver.url)
    previous = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            alert = fire(project, now=timezone.now())
    finally:
        celery_app.conf.update(task_always_eager=previous[0], task_eager_propagates=previous[1])

    assert [d.status for d in deliveries(alert)] == ["sent"]
    assert receiver.requests[0].json()["alert"]["id"] == alert.id


# --- webhook ---------------------------------------------------------------------------


def test_a_webhook_gets_the_alert_as_json_signed_with_the_channel_secret(receiver):
    project = make_project("Shop")
    channel = make_channel(project, target=receiver.url)
    receiver.secret = channel.secret  # the receiver answers 401 to a bad signature
    alert = fire(project)

    assert send(deliveries(alert)[0]) == "sent"

    (request,) = receiver.requests
    body = request.json()
    assert verify_signature(channel.secret, request.body, request.headers["X-Toolwatch-Signature"])
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["X-Toolwatch-Event"] == "opened"
    assert request.headers["X-Toolwatch-Timestamp"] == str(body["timestamp"]) == str(int(NOW.timestamp()))
    assert request.headers["X-Toolwatch-Delivery"] == str(body["delivery_id"]) == str(deliveries(alert)[0].id)
    assert body["event"] == "opened"
    assert body["project"] == {"id": project.id, "slug": project.slug, "name": "Shop"}
    assert {k: body["alert"][k] for k in ("id", "tool", "kind", "status", "evidence")} == {
        "id": alert.id, "tool": "lookup_order", "kind": KIND, "status": "open", "evidence": EVIDENCE,
    }
    assert body["alert"]["opened_at"] == NOW.isoformat()
    attempt = DeliveryAttempt.objects.get()
    assert (attempt.ok, attempt.response_code, attempt.at) == (True, 200, NOW)
    assert Delivery.objects.get(id=deliveries(alert)[0].id).sent_at == NOW


def test_verify_signature_accepts_only_the_exact_body_under_the_right_secret():
    body = b'{"event":"opened"}'
    header = transports.sign("s3cret", body)

    assert header.startswith("sha256=") and len(header) == 7 + 64
    assert verify_signature("s3cret", body, header)
    assert verify_signature("s3cret", body, header + "\r\n")  # header whitespace is not part of it
    assert not verify_signature("other", body, header)
    assert not verify_signature("s3cret", body + b" ", header)
    assert not verify_signature("s3cret", body, header.removeprefix("sha256="))
    assert not verify_signature("s3cret", body, header.upper())
    for junk in (None, "", "sha256=", "sha256=zz", "sha256=é" + header[8:]):
        assert not verify_signature("s3cret", body, junk)
    assert not verify_signature("", body, transports.sign("", body))


# --- slack -----------------------------------------------------------------------------

HOSTILE = "<script>alert(1)</script> & <!channel> <@U024BE7LH> <https://evil.example|click>"


def all_strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from all_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from all_strings(item)


def test_slack_gets_text_and_blocks_with_hostile_names_escaped(receiver):
    project = make_project(HOSTILE)
    make_channel(project, "slack", receiver.url)
    alert = fire(project, tool=HOSTILE, summary=f"summary {HOSTILE}")

    assert send(deliveries(alert)[0]) == "sent"

    payload = receiver.requests[0].json()
    assert set(payload) == {"text", "blocks"}
    assert [block["type"] for block in payload["blocks"]] == ["section", "section", "context"]
    assert all(field["type"] == "mrkdwn" for field in payload["blocks"][1]["fields"])
    assert not [s for s in all_strings(payload) if "<" in s or ">" in s]
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;!channel&gt;" in payload["text"]
    assert "*Tool*\n&lt;script&gt;" in payload["blocks"][1]["fields"][0]["text"]


def test_slack_text_stays_within_slacks_limits_whatever_the_names():
    project = make_project("<" * 200)
    channel = make_channel(project, "slack")
    alert = fire(project, tool="&" * 256, summary="<>" * 5000)
    notice = transports.notice_build(delivery=Delivery(id=1, alert=alert, channel=channel, event="opened"), now=NOW)

    payload = transports.slack_payload(notice)

    assert len(payload["blocks"][0]["text"]["text"]) <= 3000
    assert all(len(field["text"]) <= 2000 for field in payload["blocks"][1]["fields"])
    assert slack_escape("a<b", 4) == "a…"  # never half an entity
    assert slack_escape("x" * 10, 5) == "xxxx…"


# --- email -----------------------------------------------------------------------------


def test_an_email_reaches_the_smtp_server_naming_tool_and_kind(smtp):
    project = make_project("Shop")
    make_channel(project, "email", "ops@example.com, oncall@example.com")
    alert = fire(project)

    assert send(deliveries(alert)[0]) == "sent"

    (message,) = smtp.messages
    assert message["Subject"] == "[Toolwatch] Retry rate up, error rate flat on lookup_order in Shop"
    assert message["From"] == "alerts@toolwatch.test" and message["Auto-Submitted"] == "auto-generated"
    assert sorted(smtp.envelopes[0].rcpt_tos) == ["oncall@example.com", "ops@example.com"]
    assert message.get_content_type() == "text/plain"
    body = message.get_content()
    assert "Tool:      lookup_order" in body and f"({KIND})" in body
    assert "Retries per call rose from 0.08 to 0.42" in body and "4bf92f3577b34da6a3ce929d0e0e4736" in body


def test_a_hostile_tool_name_cannot_add_email_headers(smtp):
    project = make_project()
    make_channel(project, "email", "ops@example.com")
    alert = fire(project, tool="lookup_order\r\nBcc: victim@example.com\n<b>x</b>")

    assert send(deliveries(alert)[0]) == "sent"

    (message,) = smtp.messages
    assert "\n" not in message["Subject"] and "Bcc: victim@example.com" in message["Subject"]
    assert message["Bcc"] is None and smtp.envelopes[0].rcpt_tos == ["ops@example.com"]
    assert "<b>x</b>" in message.get_content()  # plain text: shown, never rendered


def test_a_recipient_refused_by_the_smtp_server_fails_the_channel_for_good(smtp):
    smtp.refuse.add("gone@example.com")
    project = make_project()
    channel = make_channel(project, "email", "gone@example.com")
    alert = fire(project)

    assert send(deliveries(alert)[0]) == "failed"

    channel.refresh_from_db()
    assert channel.failing_since == NOW and "550" in channel.last_error
    assert Delivery.objects.get(alert=alert).response_code == 550


def test_an_unreachable_smtp_server_is_retried(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", closed_port(), 1
    project = make_project()
    channel = make_channel(project, "email", "ops@example.com")
    alert = fire(project)

    assert send(deliveries(alert)[0]) == "pending"

    channel.refresh_from_db()
    assert channel.failing_since is None and "SMTP connection failed" in Delivery.objects.get(alert=alert).last_error


def test_a_bad_email_address_is_a_permanent_error():
    with pytest.raises(TransportError) as error:
        transports.email_recipients("ops@example.com, not an address\nBcc: x@y")
    assert error.value.permanent
    assert transports.email_recipients(" a@example.com ,b@example.com,") == ["a@example.com", "b@example.com"]


# --- retries and failing channels ------------------------------------------------------


def test_a_receiver_answering_500_is_retried_with_backoff_until_it_succeeds(receiver):
    receiver.answers = [500, 500]
    project = make_project()
    channel = make_channel(project, target=receiver.url)
    delivery = deliveries(fire(project))[0]

    assert send(delivery, NOW) == "pending"
    retry_at = NOW + RETRY_DELAYS[0]
    assert Delivery.objects.get(id=delivery.id).next_attempt_at == retry_at == NOW + dt.timedelta(seconds=30)
    assert send(delivery, retry_at - dt.timedelta(seconds=1)) is None  # not due yet: nothing sent
    assert deliveries_due(now=retry_at - dt.timedelta(seconds=1)) == []
    assert deliveries_due(now=retry_at) == [delivery.id]
    assert send(delivery, retry_at) == "pending"
    second_retry_at = retry_at + RETRY_DELAYS[1]
    assert send(delivery, second_retry_at) == "sent"

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code, delivery.last_error) == ("sent", 3, 200, "")
    assert delivery.sent_at == second_retry_at
    log = list(delivery.attempt_log.values_list("at", "ok", "response_code"))
    assert log == [(NOW, False, 500), (retry_at, False, 500), (second_retry_at, True, 200)]
    assert "HTTP 500" in delivery.attempt_log.first().error
    assert len(receiver.requests) == 3
    channel.refresh_from_db()
    assert channel.failing_since is None


def test_a_404_marks_the_channel_failing_and_its_next_deliveries_are_skipped(receiver):
    receiver.answers = [404]
    project = make_project()
    channel = make_channel(project, "slack", receiver.url)
    delivery = deliveries(fire(project))[0]

    assert send(delivery) == "failed"
    assert send(delivery, NOW + dt.timedelta(days=1)) is None  # failed is final

    channel.refresh_from_db()
    assert channel.failing_since == NOW and channel.last_error.startswith("HTTP 404")
    later = fire(project, tool="refund", now=NOW + dt.timedelta(hours=1))
    (skipped,) = deliveries(later)
    assert skipped.status == "skipped" and skipped.last_error.startswith(f"channel failing since {NOW.isoformat()}: HTTP 404")
    assert len(receiver.requests) == 1


def test_deliveries_already_queued_to_a_channel_that_starts_failing_are_skipped(receiver):
    receiver.answers = [410]
    project = make_project()
    make_channel(project, target=receiver.url)
    first, second = deliveries(fire(project))[0], deliveries(fire(project, tool="refund"))[0]

    assert send(first) == "failed"
    assert send(second) == "skipped"
    assert len(receiver.requests) == 1


def test_exhausted_retries_mark_the_channel_failing(receiver):
    receiver.answers = [503] * MAX_ATTEMPTS
    project = make_project()
    channel = make_channel(project, target=receiver.url)
    delivery = deliveries(fire(project))[0]

    now = NOW
    statuses = []
    for _ in range(MAX_ATTEMPTS):
        statuses.append(send(delivery, now))
        delivery.refresh_from_db()
        now = delivery.next_attempt_at or now

    assert statuses == ["pending"] * (MAX_ATTEMPTS - 1) + ["failed"]
    assert delivery.attempts == MAX_ATTEMPTS == delivery.attempt_log.count() == len(receiver.requests)
    tries = list(delivery.attempt_log.values_list("at", flat=True))
    waits = [later - earlier for earlier, later in zip(tries, tries[1:])]
    assert waits == list(RETRY_DELAYS)
    channel.refresh_from_db()
    assert channel.failing_since == now and channel.last_error.startswith(f"{MAX_ATTEMPTS} tries failed, the last: HTTP 503")
    assert deliveries_due(now=now + dt.timedelta(days=1)) == []


def test_a_receiver_that_hangs_times_out_and_is_retried(receiver):
    receiver.answers = ["hang"]
    project = make_project()
    make_channel(project, target=receiver.url)
    delivery = deliveries(fire(project))[0]

    assert send(delivery) == "pending"

    delivery.refresh_from_db()
    assert delivery.last_error == "timed out after 0.3 s" and delivery.response_code is None
    assert delivery.attempt_log.get().duration_ms >= 250


@pytest.mark.parametrize(
    ("status", "permanent"),
    [(400, True), (401, True), (403, True), (404, True), (410, True), (301, True),
     (408, False), (429, False), (500, False), (502, False), (503, False)],
)  # fmt: skip
def test_http_answers_are_permanent_or_transient_errors(receiver, status, permanent):
    receiver.answers = [status]

    with pytest.raises(TransportError) as error:
        http_post(receiver.url, b"{}", {})

    assert (error.value.permanent, error.value.response_code) == (permanent, status)


def test_a_refused_connection_is_transient_and_a_non_http_target_is_permanent():
    with pytest.raises(TransportError) as refused:
        http_post(f"http://127.0.0.1:{closed_port()}/", b"{}", {})
    assert not refused.value.permanent and refused.value.message.startswith("connection failed")

    for target in ("file:///etc/passwd", "ftp://example.com/x", "not a url", "http://127.0.0.1:99999/", "http:///x"):
        with pytest.raises(TransportError) as bad:
            http_post(target, b"{}", {})
        assert bad.value.permanent and target not in bad.value.message


# --- claiming --------------------------------------------------------------------------


def test_a_delivery_is_sent_once_even_when_asked_again_while_in_flight(receiver, monkeypatch):
    project = make_project()
    make_channel(project, target=receiver.url)
    delivery = deliveries(fire(project))[0]
    nested = []
    notify = transports.Webhook.notify

    def notify_and_send_again(self, notice):
        nested.append(send(delivery))  # a second worker given the same id mid-send
        return notify(self, notice)

    monkeypatch.setattr(transports.Webhook, "notify", notify_and_send_again)

    assert send(delivery) == "sent"
    assert send(delivery) is None  # and once sent, never again
    assert nested == [None] and len(receiver.requests) == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_sends_of_the_same_delivery_send_it_once(receiver):
    project = make_project()
    make_channel(project, target=receiver.url)
    delivery = deliveries(fire(project))[0]
    start = threading.Barrier(2)
    results = []

    def worker():
        try:
            start.wait()
            results.append(send(delivery))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results, key=str) == [None, "sent"]
    assert len(receiver.requests) == 1 and DeliveryAttempt.objects.count() == 1


def test_a_claim_abandoned_by_a_dead_worker_is_due_again_after_its_lease(receiver):
    project = make_project()
    make_channel(project, target=receiver.url)
    delivery = deliveries(fire(project))[0]
    Delivery.objects.filter(id=delivery.id).update(status="sending", next_attempt_at=NOW + CLAIM_LEASE)

    assert deliveries_due(now=NOW + CLAIM_LEASE - dt.timedelta(seconds=1)) == []
    assert send(delivery, NOW + dt.timedelta(minutes=1)) is None
    assert deliveries_due(now=NOW + CLAIM_LEASE) == [delivery.id]
    assert send(delivery, NOW + CLAIM_LEASE) == "sent"


def test_an_opened_notice_still_queued_when_its_alert_resolves_is_skipped(receiver):
    receiver.answers = [500]
    project = make_project()
    make_channel(project, target=receiver.url)
    alert = fire(project)
    opened = deliveries(alert)[0]
    assert send(opened) == "pending"

    fire(project, firing=False, now=NOW + dt.timedelta(seconds=10))
    _, resolved = deliveries(alert)

    assert send(resolved, NOW + dt.timedelta(seconds=10)) == "sent"
    assert send(opened, NOW + dt.timedelta(minutes=1)) == "skipped"
    assert [r.json()["event"] for r in receiver.requests] == ["opened", "resolved"]
    body = receiver.requests[1].json()
    assert body["text"].startswith("Resolved: ") and body["alert"]["resolved_by"] == "auto"


# --- channel tests and re-enabling -----------------------------------------------------


def test_a_successful_test_send_clears_the_failing_mark(receiver):
    project = make_project()
    channel = make_channel(project, target=receiver.url, failing_since=NOW - dt.timedelta(days=1), last_error="HTTP 404")
    receiver.secret = channel.secret

    ok, message = channel_send_test(channel=channel, now=NOW)

    assert (ok, message) == (True, "Test message sent (HTTP 200).")
    channel.refresh_from_db()
    assert channel.failing_since is None
    body = receiver.requests[0].json()
    assert (body["event"], body["alert"]) == ("test", None)
    test = Delivery.objects.get(channel=channel)
    assert (test.event, test.status, test.attempts, test.alert) == ("test", "sent", 1, None)
    # New alerts reach the channel again.
    alert = fire(project)
    assert send(deliveries(alert)[0]) == "sent"


def test_a_failed_test_send_says_why_and_is_not_retried(receiver):
    receiver.answers = [500]
    project = make_project()
    channel = make_channel(project, "slack", receiver.url)

    ok, message = channel_send_test(channel=channel, now=NOW)

    assert not ok and message.startswith("HTTP 500")
    test = Delivery.objects.get(channel=channel)
    assert (test.status, test.next_attempt_at, test.response_code) == ("failed", None, 500)
    assert deliveries_due(now=NOW + dt.timedelta(days=1)) == []


def test_a_test_email_reaches_the_smtp_server(smtp):
    channel = make_channel(make_project("Shop"), "email", "ops@example.com", name="Ops mail")

    assert channel_send_test(channel=channel, now=NOW) == (True, "Test message sent.")
    assert smtp.messages[0]["Subject"] == "[Toolwatch] Test message"  # ours, never a name the sender chose


def test_reenabling_a_failing_channel_lets_new_deliveries_through(receiver):
    project = make_project()
    channel = make_channel(project, target=receiver.url, failing_since=NOW, last_error="HTTP 404", is_active=False)

    channel_reenable(channel=channel)

    channel.refresh_from_db()
    assert channel.is_active and channel.failing_since is None
    assert send(deliveries(fire(project))[0]) == "sent"


def test_a_new_channel_gets_a_random_secret():
    project = make_project()
    first, second = make_channel(project), make_channel(project)
    assert len(first.secret) >= 40 and first.secret != second.secret


def test_the_retry_schedule_allows_six_tries():
    assert MAX_ATTEMPTS == len(RETRY_DELAYS) + 1 == 6


def test_with_the_ssrf_guard_on_a_send_to_a_loopback_address_is_refused_for_good(settings):
    settings.TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS = False

    with pytest.raises(TransportError) as caught:
        http_post("http://127.0.0.1:9/hook", b"{}", {"Content-Type": "application/json"})

    assert caught.value.permanent
    assert "refused" in str(caught.value) and "127.0.0.1" in str(caught.value)
