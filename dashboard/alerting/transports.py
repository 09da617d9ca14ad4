"""Alert transports: one class per channel kind, each sending one `Notice` once.

Contract:
- `transport_for(channel).notify(notice)` sends synchronously and returns the response
  code (HTTP status; None for email), or raises `TransportError`. Its `permanent` says
  whether trying again can help: a 4xx other than 408/429, a redirect, a bad target or a
  5xx SMTP reply is permanent; a 5xx, 408, 429, a timeout, a refused or dropped connection
  or a 4xx SMTP reply is transient. Retrying is the caller's business (dashboard.alerting.delivery).
- Every untrusted string (tool names, summaries, project names, evidence) is safe in every
  format: JSON by construction, Slack mrkdwn escaped (&, <, >) and length-capped, email
  plain text with a subject stripped of control characters.
- Webhooks are signed: `X-Toolwatch-Signature: sha256=<hex HMAC-SHA256 of the raw body,
  keyed with the channel secret>`. The timestamp is *inside* the body (`timestamp`), so the
  signature covers it; the `X-Toolwatch-Timestamp` header repeats it for a cheap early
  check and is not itself signed. `verify_signature` is what a receiver runs.
- No new HTTP dependency: `urllib.request` with a short timeout, redirects not followed
  (a redirected POST would silently become a GET), http(s) targets only (urllib would
  otherwise read `file:` URLs).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import re
import smtplib
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage, get_connection
from django.core.validators import validate_email

from dashboard.alerting.targets import clean_target_url

# Seconds to wait for a receiver (connect, then each read). Tests lower it.
HTTP_TIMEOUT_SECONDS = 5.0
# Seconds to wait for the SMTP server when settings.EMAIL_TIMEOUT is unset.
SMTP_TIMEOUT_SECONDS = 5.0
SIGNATURE_HEADER = "X-Toolwatch-Signature"
TIMESTAMP_HEADER = "X-Toolwatch-Timestamp"
EVENT_HEADER = "X-Toolwatch-Event"
DELIVERY_HEADER = "X-Toolwatch-Delivery"
USER_AGENT = "Toolwatch-Alerts/1"
# Bytes of an error answer kept in the message (Slack explains itself there: "no_service").
ERROR_BODY_BYTES = 200

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
        alert=alert_fields(delivery.alert) if delivery.alert_id else None,
    )


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


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError with the 3xx code


_opener = urllib.request.build_opener(_NoRedirects)


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read(ERROR_BODY_BYTES).decode("utf-8", "replace")
    except Exception:  # the body is a courtesy; a broken one must not mask the status
        text = ""
    finally:
        exc.close()
    text = " ".join(text.split())
    return f": {text}" if text else ""


def http_post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST and return the 2xx status, or raise TransportError (permanent or not)."""
    # Never echo the URL in an error: a Slack webhook URL is a credential.
    try:
        parts = urllib.parse.urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError on a bad port
        request = urllib.request.Request(
            url.strip(), data=body, method="POST", headers={"User-Agent": USER_AGENT, **headers}
        )
    except ValueError:
        raise TransportError("the target is not a valid URL", True) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TransportError("the target is not an http(s) URL", True)
    _refuse_private_target(url)
    timeout = HTTP_TIMEOUT_SECONDS
    try:
        with _opener.open(request, timeout=timeout) as response:
            response.read(ERROR_BODY_BYTES)  # the answer's body does not matter
            return response.status
    except urllib.error.HTTPError as exc:
        code = exc.code
        detail = _error_detail(exc)
        if 300 <= code < 400:
            message = f"HTTP {code}: redirects are not followed, use the final URL"
            raise TransportError(message, True, response_code=code) from None
        permanent = 400 <= code < 500 and code not in (408, 429)
        raise TransportError(f"HTTP {code}{detail}", permanent, response_code=code) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise TransportError(f"timed out after {timeout:g} s", False) from None
        raise TransportError(f"connection failed: {exc.reason}", False) from None
    except TimeoutError:  # raised by a read, not wrapped in URLError
        raise TransportError(f"timed out after {timeout:g} s", False) from None
    except http.client.InvalidURL:
        raise TransportError("the target is not a valid URL", True) from None
    except (http.client.HTTPException, OSError) as exc:  # dropped connection, garbled answer
        raise TransportError(f"connection failed: {exc.__class__.__name__}: {exc}", False) from None


def _refuse_private_target(url: str) -> None:
    """Check the address again at send time: a name checked when the channel was saved may
    resolve somewhere internal by now (SSRF). Off with TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS."""
    if getattr(settings, "TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS", False):
        return
    try:
        clean_target_url(url, allow_private=False)
    except ValidationError as exc:
        reason = " ".join(message for messages in exc.message_dict.values() for message in messages)
        raise TransportError(f"refused: {reason}", True) from None


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


def email_subject(notice: Notice) -> str:
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
