"""Where an alert may be sent: webhook URLs and e-mail addresses, vetted.

Used twice: when a channel is saved (dashboard/project_settings.py, whose callers show the
message beside the field) and again by the sender before each send
(dashboard/alerting/transports.py), since a name vetted when saved may resolve somewhere
internal by now (SSRF). Errors are `ValidationError({"target": [message]})`.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from dashboard.models import AlertChannel

MAX_URL = 2000
MAX_EMAILS = 20


def _invalid(message: str) -> ValidationError:
    return ValidationError({"target": [message]})


def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (tests replace this to point names anywhere)."""
    return sorted({info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)})


def _is_public(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return False  # not an address we can judge: refuse rather than guess
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is loopback too
    # is_global is False for loopback, private, link-local (cloud metadata at 169.254.169.254),
    # shared (100.64/10), reserved and unspecified addresses alike.
    return ip.is_global and not ip.is_multicast


def clean_target_url(value: Any, *, allow_private: bool | None = None) -> str:
    """An http(s) URL whose host resolves only to public addresses (unless private targets are allowed)."""
    if allow_private is None:
        allow_private = getattr(settings, "TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS", False)
    if not isinstance(value, str) or not value.strip():
        raise _invalid("Enter the URL to send alerts to.")
    url = value.strip()
    if len(url) > MAX_URL:
        raise _invalid(f"At most {MAX_URL} characters.")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise _invalid("Not a valid URL (check the port).") from None
    if parts.scheme not in ("http", "https"):
        raise _invalid("Must be an http:// or https:// URL.")
    host = parts.hostname
    if not host:
        raise _invalid("The URL has no host.")
    if any(ch.isspace() for ch in url):
        raise _invalid("The URL must not contain spaces.")
    if allow_private:
        return url
    try:
        addresses = resolve_host(host, port)
    except (OSError, UnicodeError):
        raise _invalid(f"The host '{host}' does not resolve.") from None
    private = [address for address in addresses if not _is_public(address)]
    if private or not addresses:
        resolved = "" if private == [host] else f" ({', '.join(private) or 'no address'})"
        raise _invalid(
            f"The host '{host}' is a loopback, private or link-local address{resolved}; "
            "alerts go to public hosts only (an administrator can allow internal receivers with "
            "TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS).",
        )
    return url


def clean_emails(value: Any) -> str:
    """Comma-separated e-mail addresses, normalised to 'a@x.org, b@y.org'."""
    if not isinstance(value, str):
        raise _invalid("Enter e-mail addresses separated by commas.")
    addresses = [part.strip() for part in value.split(",") if part.strip()]
    if not addresses:
        raise _invalid("Enter at least one e-mail address.")
    if len(addresses) > MAX_EMAILS:
        raise _invalid(f"At most {MAX_EMAILS} addresses (got {len(addresses)}).")
    for address in addresses:
        try:
            validate_email(address)
        except ValidationError:
            raise _invalid(f"'{address[:100]}' is not an e-mail address.") from None
    return ", ".join(dict.fromkeys(addresses))


def clean_target(kind: str, value: Any) -> str:
    if kind == AlertChannel.Kind.EMAIL:
        return clean_emails(value)
    return clean_target_url(value)


def target_masked(kind: str, target: str) -> str:
    """What may be shown of a target: the scheme and host of a URL, the domains of e-mails.

    A Slack incoming-webhook URL is a credential, and webhook paths often carry tokens.
    """
    if kind == AlertChannel.Kind.EMAIL:
        domains = [address.rpartition("@")[2] for address in target.split(",") if "@" in address]
        count = len(domains)
        return f"{count} address{'es' if count != 1 else ''} at {', '.join(dict.fromkeys(domains))}"
    try:
        parts = urllib.parse.urlsplit(target.strip())
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(not a valid URL)"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}/…"
