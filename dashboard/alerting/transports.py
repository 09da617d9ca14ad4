"""Alert transports: one class per channel kind, each sending one `Notice` once.

Contract:
- `transport_for(channel).notify(notice)` sends synchronously and returns the response
  code (HTTP status; None for email), or raises `TransportError`. Its `permanent` says
  whether trying again can help: a 4xx other than 408/429, a redirect, a bad or refused
  target or a 5xx SMTP reply is permanent; a 5xx, 408, 429, a timeout, a refused or dropped
  connection, a name that does not resolve or a 4xx SMTP reply is transient. Retrying is the caller's business (dashboard.alerting.delivery).
- Every untrusted string (tool names, summaries, project names, evidence) is safe in every
  format: JSON by construction, Slack mrkdwn escaped (&, <, >) and length-capped, email
  plain text with a subject stripped of control characters.
- Webhooks are signed: `X-Toolwatch-Signature: sha256=<hex HMAC-SHA256 of the raw body,
  keyed with the channel secret>`. The timestamp is *inside* the body (`timestamp`), so the
  signature covers it; the `X-Toolwatch-Timestamp` header repeats it for a cheap early
  check and is not itself signed. `verify_signature` is what a receiver runs.
- No new HTTP dependency: `http.client`, with a short timeout, to http(s) targets only.
  The host is resolved once and every address vetted (dashboard/alerting/targets.py); the
  connection goes to a vetted address, with the name in the Host header and, for https,
  in SNI and the certificate check (docs/alerts.md#allowed-targets). No redirect is
  followed: a 3xx is a permanent error (a redirected POST would silently become a GET, and
  the new location would escape the vetting).
- What a failed send reports is ours: the status code and its standard reason phrase, or
  our own words. A receiver's body is never read into a message, so an internal reply can
  never reach the delivery log.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import http
import http.client
import json
import re
import smtplib
import socket
import ssl
import sys
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage, get_connection
from django.core.validators import validate_email
from django.urls import reverse

from dashboard.alerting.targets import (
    ResolvedTarget,
    Resolver,
    TargetError,
    TargetRefused,
    TargetUnresolved,
    target_parse,
    target_resolve,
)

# Seconds to wait for a receiver (connect, then each read). Tests lower it.
HTTP_TIMEOUT_SECONDS = 5.0
# Seconds to wait for the SMTP server when settings.EMAIL_TIMEOUT is unset.
SMTP_TIMEOUT_SECONDS = 5.0
SIGNATURE_HEADER = "X-Toolwatch-Signature"
TIMESTAMP_HEADER = "X-Toolwatch-Timestamp"
EVENT_HEADER = "X-Toolwatch-Event"
DELIVERY_HEADER = "X-Toolwatch-Delivery"
USER_AGENT = "Toolwatch-Alerts/1"
# Addresses of one name tried in turn when connecting fails: each may cost a timeout, and
# the whole send must stay well inside the delivery's 5-minute claim lease.
MAX_CONNECT_ADDRESSES = 3

KIND_LABELS = {
    "retry_rise_flat_error": "Retry rate up, error rate flat",
    "error_rate_spike": "Error rate spike",
    "wasted_retries": "Wasted retries",
    "escalation_silence": "Escalation silence",
    "eval_regression": "Eval regression",
}


class TransportError(Exception):
    """A failed send. `permanent`: the same send will fail again, do not retry."""

    def __init__(self, message: str, permanent: bool = False, *, response_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.response_code = response_code


@dataclass(frozen=True, slots=True)
class Notice:
    """What one delivery tells, as plain values: formatting never touches the database."""

    event: str  # opened | resolved | test
    delivery_id: int
    timestamp: datetime  # when this notice is sent
    project_id: int
    project_slug: str
    project_name: str
    channel_name: str
    alert: dict | None  # alert_fields(); None for a test


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def alert_fields(alert) -> dict:
    """The alert as JSON-ready values (the `alert` object of the webhook payload)."""
    return {
        "id": alert.id,
        "tool": alert.tool,
        "kind": alert.kind,
        "kind_label": KIND_LABELS.get(alert.kind, alert.kind),
        "status": alert.status,
        "summary": alert.summary,
        "opened_at": _iso(alert.opened_at),
        "last_seen_at": _iso(alert.last_seen_at),
        "acknowledged_at": _iso(alert.acknowledged_at),
        "acknowledged_by": alert.acknowledged_by or None,
        "resolved_at": _iso(alert.resolved_at),
        "resolved_by": alert.resolved_by or None,
        "muted_until": _iso(alert.muted_until),
        "evidence": alert.evidence,
    }


def notice_build(*, delivery, now: datetime) -> Notice:
    """The notice of one Delivery (its alert, channel and project loaded)."""
    project = delivery.channel.project
    return Notice(
        event=delivery.event,
        delivery_id=delivery.id,
        timestamp=now,
        project_id=project.id,
        project_slug=project.slug,
        project_name=project.name,
        channel_name=delivery.channel.name,
        alert={**alert_fields(delivery.alert), "url": alert_url(project.slug, delivery.alert_id)}
        if delivery.alert_id
        else None,
    )


def alert_url(project_slug: str, alert_id: int) -> str:
    """The alert page's absolute URL under settings.TOOLWATCH_BASE_URL (its path alone when that is unset)."""
    path = reverse("alert", args=[project_slug, alert_id])
    return f"{settings.TOOLWATCH_BASE_URL}{path}" if getattr(settings, "TOOLWATCH_BASE_URL", "") else path


def headline(notice: Notice) -> str:
    if notice.alert is None:
        return f"Test message from Toolwatch to channel \"{notice.channel_name}\" ({notice.project_name})"
    a = notice.alert
    what = f"{a['kind_label']} on {a['tool']} in {notice.project_name}"
    return f"Resolved: {what}" if notice.event == "resolved" else what


def resolution(notice: Notice) -> str:
    a = notice.alert or {}
    if notice.event != "resolved":
        return ""
    if a.get("resolved_by") == "auto":
        return "Resolved automatically: the condition cleared."
    return f"Resolved by {a.get('resolved_by') or 'someone'}."


# --- webhook ---------------------------------------------------------------------------


def webhook_payload(notice: Notice) -> dict:
    return {
        "event": notice.event,
        "delivery_id": notice.delivery_id,
        # Signed with the body: receivers reject old timestamps to stop replays.
        "timestamp": int(notice.timestamp.timestamp()),
        "text": headline(notice),
        "project": {"id": notice.project_id, "slug": notice.project_slug, "name": notice.project_name},
        "alert": notice.alert,
    }


def sign(secret: str, body: bytes) -> str:
    """The signature header value: "sha256=" + hex HMAC-SHA256 of the raw body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_signature(secret: str, body: bytes, header: str | None) -> bool:
    """True when `header` is the signature of exactly these body bytes under `secret`."""
    if not header or not secret:
        return False
    expected = sign(secret, body).encode()
    # compare_digest takes time independent of where the strings differ.
    return hmac.compare_digest(expected, header.strip().encode("utf-8", "replace"))


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    return ssl.create_default_context()  # the system's CAs, hostname checked


def _connect_pinned(addresses: tuple[str, ...], port: int, timeout: float) -> socket.socket:
    """A TCP connection to the first of `addresses` that answers: IP addresses only, no DNS."""
    last: OSError | None = None
    for address in addresses[:MAX_CONNECT_ADDRESSES]:
        # AI_NUMERICHOST: a literal is parsed (an IPv6 zone id too), never looked up.
        family, kind, proto, _, sockaddr = socket.getaddrinfo(
            address, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    raise last or OSError("no address to connect to")


class PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to addresses vetted beforehand. `host` stays the name (it is the
    Host header); `connect` never resolves it again."""

    def __init__(self, target: ResolvedTarget, *, timeout: float):
        super().__init__(target.url.host, target.url.port, timeout=timeout)
        self.addresses = target.addresses

    def connect(self):
        sys.audit("http.client.connect", self, self.host, self.port)
        self.sock = _connect_pinned(self.addresses, self.port, self.timeout)


class PinnedHTTPSConnection(PinnedHTTPConnection):
    """The same over TLS: SNI and the certificate check use the name, not the address."""

    default_port = http.client.HTTPS_PORT

    def __init__(self, target: ResolvedTarget, *, timeout: float, context: ssl.SSLContext):
        super().__init__(target, timeout=timeout)
        self.context = context

    def connect(self):
        super().connect()
        self.sock = self.context.wrap_socket(self.sock, server_hostname=self.host)


def status_text(code: int, reason: str = "") -> str:
    """ "HTTP 404 Not Found": the standard phrase of the code; a nonstandard code keeps the
    receiver's phrase, cut to 60 printable ASCII characters (it is all we show of the answer)."""
    try:
        phrase = http.HTTPStatus(code).phrase
    except ValueError:
        phrase = "".join(ch for ch in reason if " " <= ch <= "~")[:60].strip()
    return f"HTTP {code} {phrase}".rstrip()


def http_post(url: str, body: bytes, headers: dict[str, str], *, resolver: Resolver | None = None,
              ssl_context: ssl.SSLContext | None = None) -> int:  # fmt: skip
    """POST to the vetted address of `url` and return the 2xx status, or raise TransportError.

    `resolver` (host, port) -> addresses replaces DNS (dashboard.alerting.targets.resolve_host);
    `ssl_context` replaces the system trust store. Both exist for tests.
    """
    # Never echo the URL in an error: a Slack webhook URL is a credential.
    try:
        target = target_resolve(target_parse(url), resolver=resolver)
    except TargetRefused as exc:
        raise TransportError(f"refused: {exc.reason}", True) from None
    except TargetUnresolved as exc:  # DNS may answer on the next try
        raise TransportError(exc.message, False) from None
    except TargetError as exc:
        raise TransportError(f"not a usable target: {exc.message}", True) from None
    timeout = HTTP_TIMEOUT_SECONDS
    if target.url.scheme == "https":
        connection = PinnedHTTPSConnection(target, timeout=timeout, context=ssl_context or _default_ssl_context())
    else:
        connection = PinnedHTTPConnection(target, timeout=timeout)
    try:
        connection.request("POST", target.url.path, body=body, headers={"User-Agent": USER_AGENT, **headers})
        response = connection.getresponse()
        code, reason = response.status, response.reason  # the body is never read
    except TimeoutError:
        raise TransportError(f"timed out after {timeout:g} s", False) from None
    except ssl.SSLCertVerificationError as exc:
        why = exc.verify_message or exc.reason or "certificate verify failed"
        raise TransportError(f"TLS certificate of '{target.url.host}' not accepted: {why}", False) from None
    except ssl.SSLError as exc:
        raise TransportError(f"TLS failed: {exc.reason or exc.__class__.__name__}", False) from None
    except http.client.InvalidURL:
        raise TransportError("not a usable target: not a valid URL", True) from None
    except http.client.HTTPException as exc:
        # The class only: BadStatusLine and LineTooLong carry the receiver's bytes.
        raise TransportError(f"connection failed: not an HTTP answer ({exc.__class__.__name__})", False) from None
    except OSError as exc:  # refused, reset, unreachable: the errno text is ours
        raise TransportError(f"connection failed: {exc.__class__.__name__}: {exc}", False) from None
    finally:
        connection.close()
    if 200 <= code < 300:
        return code
    if 300 <= code < 400:
        message = f"{status_text(code, reason)}: redirect not followed, point the channel at the final URL"
        raise TransportError(message, True, response_code=code)
    permanent = 400 <= code < 500 and code not in (408, 429)
    raise TransportError(status_text(code, reason), permanent, response_code=code)


# --- slack -----------------------------------------------------------------------------

_SLACK_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def slack_escape(text: str, limit: int | None = None) -> str:
    """Escape for Slack mrkdwn, so `<!channel>` or `<http://x|y>` stay literal text.

    `limit` caps the escaped length (Slack refuses blocks over their limits, and a tool
    name is untrusted: it must not be able to break the channel).
    """
    out: list[str] = []
    size = 0
    for char in str(text):
        piece = _SLACK_ESCAPES.get(char, char)
        if limit is not None and size + len(piece) > limit - 1:
            out.append("…")
            break
        out.append(piece)
        size += len(piece)
    return "".join(out)


def slack_payload(notice: Notice) -> dict:
    """An incoming-webhook message: `text` (the notification) and `blocks` (the message)."""
    title = slack_escape(headline(notice), 600)
    if notice.alert is None:
        return {
            "text": title,
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": f"*{title}*\nAlerts of this project will arrive here."}}
            ],
        }
    a = notice.alert
    lines = [f"*{title}*", slack_escape(a["summary"], 1800), slack_escape(resolution(notice), 300)]
    if a.get("url", "").startswith(("https://", "http://")):
        lines.append(f"<{slack_escape(a['url'], 900)}|Open alert #{a['id']}>")
    fields = [
        ("Tool", a["tool"]),
        ("Kind", a["kind_label"]),
        ("Project", notice.project_name),
        ("Status", a["status"]),
    ]
    return {
        "text": title,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(line for line in lines if line)}},
            {
                "type": "section",
                "fields": [
                    {"type": "mrkdwn", "text": f"*{name}*\n{slack_escape(value, 1000)}"} for name, value in fields
                ],
            },
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"Toolwatch alert #{a['id']} · opened {a['opened_at']}"}],
            },
        ],
    }


# --- email -----------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]+")


# A test send goes to any address an owner types: its subject is ours alone, never a name
# they chose (channel or project), so a test cannot carry a message of theirs in the subject.
TEST_EMAIL_SUBJECT = "[Toolwatch] Test message"


def email_subject(notice: Notice) -> str:
    if notice.alert is None:
        return TEST_EMAIL_SUBJECT
    # A newline in a header is an injection (and Django refuses it): flatten to spaces.
    return _CONTROL.sub(" ", f"[Toolwatch] {headline(notice)}")[:200]


def email_body(notice: Notice) -> str:
    if notice.alert is None:
        return f"{headline(notice)}\n\nAlerts of this project will arrive at this address.\n"
    a = notice.alert
    lines = [headline(notice), ""]
    if a["summary"]:
        lines += [a["summary"], ""]
    if notice.event == "resolved":
        lines += [resolution(notice), ""]
    if a.get("url"):
        lines += [f"Alert page: {a['url']}", ""]
    lines += [
        f"Project:   {notice.project_name} ({notice.project_slug})",
        f"Tool:      {a['tool']}",
        f"Kind:      {a['kind_label']} ({a['kind']})",
        f"Status:    {a['status']}",
        f"Opened:    {a['opened_at']}",
        f"Last seen: {a['last_seen_at']}",
    ]
    if a["resolved_at"]:
        lines.append(f"Resolved:  {a['resolved_at']} by {a['resolved_by']}")
    lines += ["", "Evidence:", json.dumps(a["evidence"], indent=2, sort_keys=True, ensure_ascii=False), ""]
    lines.append(f"Toolwatch alert #{a['id']}, delivery #{notice.delivery_id}.")
    return "\n".join(lines) + "\n"


def email_recipients(target: str) -> list[str]:
    addresses = [part.strip() for part in target.split(",") if part.strip()]
    if not addresses:
        raise TransportError("no email address to send to", True)
    for address in addresses:
        try:
            validate_email(address)
        except ValidationError:
            raise TransportError(f"not an email address: {address[:100]!r}", True) from None
    return addresses


# --- the transports --------------------------------------------------------------------


class Transport:
    """Sends one notice to one channel. Subclasses implement `notify`."""

    def __init__(self, channel):
        self.channel = channel

    def notify(self, notice: Notice) -> int | None:
        raise NotImplementedError


class Webhook(Transport):
    def notify(self, notice: Notice) -> int:
        body = json.dumps(webhook_payload(notice), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            EVENT_HEADER: notice.event,
            DELIVERY_HEADER: str(notice.delivery_id),
            TIMESTAMP_HEADER: str(int(notice.timestamp.timestamp())),
            SIGNATURE_HEADER: sign(self.channel.secret, body),
        }
        return http_post(self.channel.target, body, headers)


class Slack(Transport):
    def notify(self, notice: Notice) -> int:
        body = json.dumps(slack_payload(notice), ensure_ascii=False, allow_nan=False).encode()
        return http_post(self.channel.target, body, {"Content-Type": "application/json"})


class Email(Transport):
    """Through Django's configured email backend (EMAIL_HOST, EMAIL_PORT, … from settings)."""

    def notify(self, notice: Notice) -> None:
        recipients = email_recipients(self.channel.target)
        timeout = getattr(settings, "EMAIL_TIMEOUT", None) or SMTP_TIMEOUT_SECONDS
        message = EmailMessage(
            subject=email_subject(notice),
            body=email_body(notice),
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=recipients,
            # RFC 3834: keeps vacation responders from answering alerts.
            headers={"Auto-Submitted": "auto-generated", EVENT_HEADER: notice.event},
            connection=get_connection(fail_silently=False, timeout=timeout),
        )
        try:
            message.send()
        except smtplib.SMTPRecipientsRefused as exc:  # every recipient refused
            codes = [code for code, _ in exc.recipients.values()]
            permanent = bool(codes) and all(code >= 500 for code in codes)
            message = f"recipients refused: {_smtp_replies(exc.recipients)}"
            raise TransportError(message, permanent, response_code=max(codes, default=None)) from None
        except smtplib.SMTPResponseException as exc:  # 4xx: try later; 5xx: will not work
            reply = _text(exc.smtp_error)
            raise TransportError(f"SMTP {exc.smtp_code}: {reply}", exc.smtp_code >= 500, response_code=exc.smtp_code) from None
        except smtplib.SMTPNotSupportedError as exc:  # e.g. STARTTLS configured, not offered
            raise TransportError(f"SMTP: {exc}", True) from None
        except TimeoutError:
            raise TransportError(f"SMTP timed out after {timeout:g} s", False) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise TransportError(f"SMTP connection failed: {exc.__class__.__name__}: {exc}", False) from None
        return None


def _text(reply: bytes | str) -> str:
    return reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)


def _smtp_replies(recipients: dict) -> str:
    return "; ".join(f"{address} {code} {_text(reply)}" for address, (code, reply) in recipients.items())


TRANSPORTS: dict[str, type[Transport]] = {"webhook": Webhook, "slack": Slack, "email": Email}


def transport_for(channel) -> Transport:
    try:
        return TRANSPORTS[channel.kind](channel)
    except KeyError:
        raise TransportError(f"unknown channel kind {channel.kind!r}", True) from None
