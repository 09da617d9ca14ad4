"""Where an alert may be sent: webhook URLs and e-mail addresses, vetted.

Used twice: when a channel is saved (dashboard/project_settings.py, whose callers show the
message beside the field) and by the sender at each send (dashboard/alerting/transports.py).
The sender resolves the host once, vets every address and then connects to a vetted address
itself: a name vetted once and resolved again by the HTTP client could answer with an
internal address the second time (DNS rebinding, SSRF). See docs/alerts.md#allowed-targets.

- `special_purpose(address)` says why an address is not a public unicast one (IANA's IPv4
  and IPv6 special-purpose registries, with the IPv4 inside the mapped, NAT64, 6to4 and
  Teredo forms judged too), or None.
- `target_parse(url)` checks the form; `target_resolve(parsed)` resolves once and vets,
  returning the addresses to connect to. Both raise `TargetError` naming the problem.
- `clean_target_url` / `clean_emails` / `clean_target` are the save-time checks; their
  errors are `ValidationError({"target": [message]})`.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from dashboard.models import AlertChannel

MAX_URL = 2000
MAX_EMAILS = 20

Resolver = Callable[[str, int], list[str]]

_ALLOW_HINT = (
    "alerts go to public hosts only (an administrator can allow internal receivers with "
    "TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS)"
)


# --- addresses ---------------------------------------------------------------------------

# IANA IPv4 Special-Purpose Address Registry, plus multicast and broadcast. First match wins.
_V4_RANGES = [
    (ipaddress.IPv4Network(net), why)
    for net, why in [
        ("0.0.0.0/8", "a 'this network' address (0.0.0.0/8)"),
        ("10.0.0.0/8", "a private address (10.0.0.0/8)"),
        ("100.64.0.0/10", "a carrier-grade NAT address (100.64.0.0/10)"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.0.0/16", "a link-local address (169.254.0.0/16, where cloud metadata answers)"),
        ("172.16.0.0/12", "a private address (172.16.0.0/12)"),
        ("192.0.0.0/24", "an IETF protocol address (192.0.0.0/24)"),
        ("192.0.2.0/24", "a documentation address (192.0.2.0/24)"),
        ("192.88.99.0/24", "a 6to4 relay anycast address (192.88.99.0/24)"),
        ("192.168.0.0/16", "a private address (192.168.0.0/16)"),
        ("198.18.0.0/15", "a benchmarking address (198.18.0.0/15)"),
        ("198.51.100.0/24", "a documentation address (198.51.100.0/24)"),
        ("203.0.113.0/24", "a documentation address (203.0.113.0/24)"),
        ("224.0.0.0/4", "a multicast address"),
        ("255.255.255.255/32", "the broadcast address"),
        ("240.0.0.0/4", "a reserved address (240.0.0.0/4)"),
    ]
]

_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_TEREDO = ipaddress.IPv6Network("2001::/32")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")

# IANA IPv6 Special-Purpose Address Registry (the forms that embed an IPv4 are judged in
# `_v6_reason`). First match wins: ::/128 and ::1 before ::/96, Teredo before 2001::/23.
_V6_RANGES = [
    (ipaddress.IPv6Network(net), why)
    for net, why in [
        ("::/128", "the unspecified address"),
        ("::1/128", "a loopback address"),
        ("::/96", "an IPv4-compatible address (::/96, deprecated)"),
        ("64:ff9b:1::/48", "a local-use NAT64 address (64:ff9b:1::/48)"),
        ("100::/64", "a discard-only address (100::/64)"),
        ("100:0:0:1::/64", "a dummy-prefix address (100:0:0:1::/64)"),
        ("2001:db8::/32", "a documentation address (2001:db8::/32)"),
        ("2001::/23", "an IETF protocol address (2001::/23)"),
        ("3fff::/20", "a documentation address (3fff::/20)"),
        ("5f00::/16", "an SRv6 segment identifier (5f00::/16)"),
        ("fc00::/7", "a unique local (private) address (fc00::/7)"),
        ("fe80::/10", "a link-local address (fe80::/10)"),
        ("fec0::/10", "a site-local address (fec0::/10, deprecated)"),
        ("ff00::/8", "a multicast address"),
    ]
]


def _v4_reason(ip: ipaddress.IPv4Address) -> str | None:
    for network, why in _V4_RANGES:
        if ip in network:
            return why
    if not ip.is_global:  # whatever the standard library learns after this table was written
        return "not a globally reachable address"
    return None


def _v6_reason(ip: ipaddress.IPv6Address) -> str | None:
    if ip in _MAPPED:  # the kernel connects to ::ffff:a.b.c.d over IPv4: it is a.b.c.d
        inner = ip.ipv4_mapped
        why = _v4_reason(inner)
        return f"the IPv4-mapped form of {inner}, {why}" if why else None
    if ip in _NAT64:  # a DNS64 answer for an IPv4-only host: judged as that IPv4 (RFC 6052)
        inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        why = _v4_reason(inner)
        return f"the NAT64 form of {inner}, {why}" if why else None
    # 6to4 and Teredo are tunnels to an IPv4 address through relays (6to4 relays are
    # deprecated, RFC 7526): no webhook needs them, so they are refused whatever they embed.
    if ip in _SIX_TO_FOUR:
        inner = ip.sixtofour
        why = _v4_reason(inner)
        return f"the 6to4 form of {inner}, {why}" if why else f"a 6to4 tunnel address (2002::/16) to {inner}"
    if ip in _TEREDO:
        _server, client = ip.teredo
        why = _v4_reason(client)
        return f"the Teredo form of {client}, {why}" if why else f"a Teredo tunnel address (2001::/32) to {client}"
    for network, why in _V6_RANGES:
        if ip in network:
            return why
    if ip not in _GLOBAL_UNICAST:  # everything else outside 2000::/3 is unassigned or reserved
        return "outside the global unicast range (2000::/3)"
    if not ip.is_global:
        return "not a globally reachable address"
    return None


def special_purpose(address: str) -> str | None:
    """Why `address` may not receive alerts ("a loopback address", "the NAT64 form of
    127.0.0.1, a loopback address", …), or None when it is a public unicast address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return "not an IP address"  # nothing we can judge: refuse rather than guess
    return _v4_reason(ip) if isinstance(ip, ipaddress.IPv4Address) else _v6_reason(ip)


def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, in the resolver's order of preference.

    The default resolver; tests pass their own (or replace this one) to point names anywhere.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


# --- URLs --------------------------------------------------------------------------------


class TargetError(Exception):
    """A URL no alert goes to; `message` names the problem (it never repeats the URL, which
    may hold a token: a Slack webhook URL is a credential)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class TargetUnresolved(TargetError):
    """The host does not resolve (now: DNS may answer later)."""


class TargetRefused(TargetError):
    """The host resolves to addresses alerts may not go to: `refused` is (address, why) pairs."""

    def __init__(self, host: str, refused: list[tuple[str, str]]):
        self.host = host
        self.refused = refused
        details = "; ".join(f"{address} is {why}" for address, why in refused)
        super().__init__(
            f"The host '{host}' is a loopback, private or link-local address, or another "
            f"special-purpose one ({details}); {_ALLOW_HINT}."
        )

    @property
    def reason(self) -> str:
        """The short form the delivery log shows: "resolves to 127.0.0.1, a loopback address"."""
        shown = "; ".join(
            f"{address} is {why}" if address == self.host else f"{self.host} resolves to {address}, {why}"
            for address, why in self.refused
        )
        return f"{shown} (alerts go to public hosts only)"


@dataclass(frozen=True, slots=True)
class ParsedURL:
    url: str  # stripped
    scheme: str  # http | https
    host: str  # ASCII (IDNA), no brackets around an IPv6 literal
    port: int
    path: str  # what goes on the request line: path and query, never empty
    literal: bool  # the host is an IP address (nothing to resolve)


@dataclass(frozen=True, slots=True)
class ResolvedTarget:
    """A URL and the addresses it resolved to once, each vetted unless private targets are
    allowed: the sender connects to these, never to a fresh answer for the name."""

    url: ParsedURL
    addresses: tuple[str, ...]


# Characters left as they are on the request line: RFC 3986 reserved and unreserved, and %.
_URL_SAFE = "/?#[]@!$&'()*+,;=-._~%:"


def target_parse(value: Any) -> ParsedURL:
    """The form of a target URL: http(s), a host, a valid port, no spaces or control characters."""
    if not isinstance(value, str) or not value.strip():
        raise TargetError("Enter the URL to send alerts to.")
    url = value.strip()
    if len(url) > MAX_URL:
        raise TargetError(f"At most {MAX_URL} characters.")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise TargetError("Not a valid URL (check the port).") from None
    if parts.scheme not in ("http", "https"):
        raise TargetError("Must be an http:// or https:// URL.")
    host = parts.hostname
    if not host:
        raise TargetError("The URL has no host.")
    if any(ch.isspace() for ch in url):
        raise TargetError("The URL must not contain spaces.")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise TargetError("The URL must not contain control characters.")
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        literal = True
    except ValueError:
        literal = False
        try:
            host = host.encode("idna").decode("ascii")  # the Host header and SNI are ASCII
        except UnicodeError:
            raise TargetError(f"The host '{host[:100]}' is not a valid host name.") from None
    path = urllib.parse.quote(parts.path or "/", safe=_URL_SAFE)
    if parts.query:
        path += "?" + urllib.parse.quote(parts.query, safe=_URL_SAFE)
    return ParsedURL(url=url, scheme=parts.scheme, host=host, port=port, path=path, literal=literal)


def target_resolve(parsed: ParsedURL, *, resolver: Resolver | None = None,
                   allow_private: bool | None = None) -> ResolvedTarget:  # fmt: skip
    """Resolve once and vet every answer. Refused when any answer is special-purpose (an
    attacker's DNS can mix a public answer with an internal one), unless the
    TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS setting (or `allow_private`) allows them."""
    if allow_private is None:
        allow_private = getattr(settings, "TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS", False)
    if parsed.literal:
        addresses = [parsed.host]
    else:
        try:
            addresses = list((resolver or resolve_host)(parsed.host, parsed.port))
        except (OSError, UnicodeError):
            raise TargetUnresolved(f"The host '{parsed.host}' does not resolve.") from None
        if not addresses:
            raise TargetUnresolved(f"The host '{parsed.host}' does not resolve.")
    if not allow_private:
        refused = [(address, why) for address in addresses if (why := special_purpose(address))]
        if refused:
            raise TargetRefused(parsed.host, refused)
    return ResolvedTarget(url=parsed, addresses=tuple(addresses))


def clean_target_url(value: Any, *, allow_private: bool | None = None, resolver: Resolver | None = None) -> str:
    """An http(s) URL whose host resolves only to public addresses (unless private targets are allowed)."""
    if allow_private is None:
        allow_private = getattr(settings, "TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS", False)
    try:
        parsed = target_parse(value)
        if not allow_private:
            target_resolve(parsed, resolver=resolver, allow_private=False)
    except TargetError as exc:
        raise _invalid(exc.message) from None
    return parsed.url


# --- e-mail ------------------------------------------------------------------------------


def _invalid(message: str) -> ValidationError:
    return ValidationError({"target": [message]})


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
