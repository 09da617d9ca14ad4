"""Target vetting (dashboard.alerting.targets): which addresses alerts may go to, and why not.

Pure checks, no database: each special-purpose range of the IANA registries is refused,
the IPv4 inside the mapped, NAT64, 6to4 and Teredo forms of an IPv6 address is judged too,
and a name is judged by every address it resolves to, resolved once.
"""

from __future__ import annotations

import ipaddress

import pytest
from django.core.exceptions import ValidationError

from dashboard.alerting import targets
from dashboard.alerting.targets import (
    TargetError,
    TargetRefused,
    TargetUnresolved,
    clean_target_url,
    special_purpose,
    target_parse,
    target_resolve,
)

PUBLIC = "93.184.215.14"


def resolving(answers: dict[str, list[str]]):
    """A resolver that answers from a table and records what it was asked."""
    asked: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        if host not in answers:
            raise OSError(f"{host}: Name or service not known")
        return answers[host]

    resolve.asked = asked
    return resolve


def rebinding(first: list[str], then: list[str]):
    """A resolver whose first answer is `first` and every later one `then` (DNS rebinding)."""
    calls: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        return first if len(calls) == 1 else then

    resolve.calls = calls
    return resolve


# --- addresses ---------------------------------------------------------------------------

SPECIAL = [
    # IPv4 special-purpose registry, first and last addresses of each range
    ("0.0.0.0", "'this network'"),
    ("0.255.255.255", "'this network'"),
    ("10.0.0.1", "private address (10.0.0.0/8)"),
    ("10.255.255.255", "private address (10.0.0.0/8)"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.127.255.254", "carrier-grade NAT"),
    ("127.0.0.1", "a loopback address"),
    ("127.255.255.254", "a loopback address"),
    ("169.254.169.254", "link-local"),
    ("172.16.0.1", "private address (172.16.0.0/12)"),
    ("172.31.255.255", "private address (172.16.0.0/12)"),
    ("192.0.0.9", "IETF protocol"),
    ("192.0.0.170", "IETF protocol"),
    ("192.0.2.1", "documentation address (192.0.2.0/24)"),
    ("192.88.99.1", "6to4 relay anycast"),
    ("192.168.0.1", "private address (192.168.0.0/16)"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.255", "benchmarking"),
    ("198.51.100.7", "documentation address (198.51.100.0/24)"),
    ("203.0.113.9", "documentation address (203.0.113.0/24)"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.254", "reserved"),
    ("255.255.255.255", "the broadcast address"),
    # IPv6 special-purpose registry
    ("::", "the unspecified address"),
    ("::1", "a loopback address"),
    ("::7f00:1", "IPv4-compatible"),
    ("::8.8.8.8", "IPv4-compatible"),
    ("64:ff9b:1::7f00:1", "local-use NAT64"),
    ("64:ff9b:1:ffff::1", "local-use NAT64"),
    ("100::1", "discard-only"),
    ("100:0:0:1::1", "dummy-prefix"),
    ("2001:2::1", "IETF protocol address (2001::/23)"),
    ("2001:10::1", "IETF protocol address (2001::/23)"),
    ("2001:db8::1", "documentation address (2001:db8::/32)"),
    ("3fff::1", "documentation address (3fff::/20)"),
    ("5f00::1", "SRv6"),
    ("fc00::1", "unique local"),
    ("fd12:3456:789a::1", "unique local"),
    ("fe80::1", "link-local address (fe80::/10)"),
    ("fe80::1%eth0", "link-local address (fe80::/10)"),
    ("febf:ffff::1", "link-local address (fe80::/10)"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("ff0e::1", "multicast"),
    ("4000::1", "outside the global unicast range"),
    ("e000::1", "outside the global unicast range"),
    # forms that embed an IPv4 address
    ("::ffff:127.0.0.1", "the IPv4-mapped form of 127.0.0.1, a loopback address"),
    ("::ffff:169.254.169.254", "the IPv4-mapped form of 169.254.169.254, a link-local"),
    ("::ffff:10.0.0.1", "the IPv4-mapped form of 10.0.0.1, a private"),
    ("64:ff9b::7f00:1", "the NAT64 form of 127.0.0.1, a loopback address"),
    ("64:ff9b::127.0.0.1", "the NAT64 form of 127.0.0.1, a loopback address"),
    ("64:ff9b::a9fe:a9fe", "the NAT64 form of 169.254.169.254, a link-local"),
    ("64:ff9b::100.64.0.1", "the NAT64 form of 100.64.0.1, a carrier-grade NAT"),
    ("2002:7f00:1::1", "the 6to4 form of 127.0.0.1, a loopback address"),
    ("2002:a9fe:a9fe::", "the 6to4 form of 169.254.169.254, a link-local"),
    ("2002:c0a8:101::1", "the 6to4 form of 192.168.1.1, a private"),
    ("2002:808:808::1", "a 6to4 tunnel address (2002::/16) to 8.8.8.8"),
    # Teredo: the client's IPv4 is stored inverted in the last 32 bits (RFC 4380)
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "the Teredo form of 127.0.0.1, a loopback address"),
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", "a Teredo tunnel address (2001::/32) to 8.8.8.8"),
    # not an address at all
    ("localhost", "not an IP address"),
    ("", "not an IP address"),
]


@pytest.mark.parametrize(("address", "why"), SPECIAL)
def test_each_special_purpose_address_is_refused_saying_which_range(address, why):
    assert why in (special_purpose(address) or "public")


@pytest.mark.parametrize(
    "address",
    ["93.184.215.14", "8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.32.0.1", "192.0.1.255",
     "198.17.255.255", "198.20.0.0", "223.255.255.255", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e",
     "::ffff:8.8.8.8", "64:ff9b::808:808", "64:ff9b::93.184.215.14"],
)  # fmt: skip
def test_public_unicast_addresses_pass_and_so_do_their_mapped_and_nat64_forms(address):
    assert special_purpose(address) is None


@pytest.mark.parametrize(("network", "why"), targets._V4_RANGES, ids=lambda value: str(value)[:20])
def test_every_ipv4_range_is_refused_in_every_ipv6_form_that_embeds_it(network, why):
    for inner in (network[0], network[-1]):
        v4 = int(inner)
        forms = {
            "IPv4-mapped": ipaddress.IPv6Address((0xFFFF << 32) | v4),
            "NAT64": ipaddress.IPv6Address((0x0064FF9B << 96) | v4),
            "6to4": ipaddress.IPv6Address((0x2002 << 112) | (v4 << 80)),
            "Teredo": ipaddress.IPv6Address((0x20010000 << 96) | (v4 ^ 0xFFFFFFFF)),
        }
        inner_why = special_purpose(str(inner))  # 255.255.255.255 ends 240/4 but is the broadcast address
        assert inner_why == why or (inner_why, str(inner)) == ("the broadcast address", "255.255.255.255")
        for name, form in forms.items():
            assert special_purpose(str(form)) == f"the {name} form of {inner}, {inner_why}", form


def test_what_the_standard_library_calls_not_global_is_refused_too():
    samples = ["192.0.0.8", "192.0.0.171", "2001:1::3", "2001:3::1", "2001:4:112::1", "::ffff:0:0"]
    for address in samples:
        if not ipaddress.ip_address(address).is_global:
            assert special_purpose(address), address


# --- URLs --------------------------------------------------------------------------------


def test_a_parsed_url_keeps_the_name_for_the_host_header_and_quotes_the_path():
    parsed = target_parse(" https://Bücher.example/hook/ä?x=1&y=a b ".replace(" b", "%20b"))

    assert (parsed.scheme, parsed.host, parsed.port, parsed.literal) == ("https", "xn--bcher-kva.example", 443, False)
    assert parsed.path == "/hook/%C3%A4?x=1&y=a%20b"
    assert target_parse("http://[::1]:8080").host == "::1" and target_parse("http://[::1]:8080").path == "/"
    assert target_parse("http://127.0.0.1/").literal


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "Enter the URL to send alerts to."),
        ("ftp://example.com/x", "Must be an http:// or https:// URL."),
        ("http:///x", "The URL has no host."),
        ("http://h:99999/", "Not a valid URL (check the port)."),
        ("http://example.com/a b", "The URL must not contain spaces."),
        ("http://example.com/a\x00b", "The URL must not contain control characters."),
        ("http://" + "a" * 2000, "At most 2000 characters."),
    ],
)
def test_a_malformed_url_is_refused_naming_the_problem(url, message):
    with pytest.raises(TargetError) as caught:
        target_parse(url)
    assert caught.value.message == message


def test_a_name_is_resolved_once_and_refused_when_any_answer_is_special():
    resolve = resolving({"hooks.example.com": [PUBLIC, "64:ff9b::7f00:1"]})

    with pytest.raises(TargetRefused) as caught:
        target_resolve(target_parse("https://hooks.example.com/x"), resolver=resolve, allow_private=False)

    assert resolve.asked == [("hooks.example.com", 443)]
    assert caught.value.refused == [("64:ff9b::7f00:1", "the NAT64 form of 127.0.0.1, a loopback address")]
    assert caught.value.reason == (
        "hooks.example.com resolves to 64:ff9b::7f00:1, the NAT64 form of 127.0.0.1, a loopback address "
        "(alerts go to public hosts only)"
    )


def test_a_public_name_resolves_to_the_addresses_the_sender_will_connect_to():
    resolve = resolving({"hooks.example.com": [PUBLIC, "2606:4700:4700::1111"]})

    target = target_resolve(target_parse("https://hooks.example.com/x"), resolver=resolve, allow_private=False)

    assert target.addresses == (PUBLIC, "2606:4700:4700::1111")


def test_an_address_literal_is_never_resolved():
    resolve = resolving({})

    target = target_resolve(target_parse("http://[2606:4700:4700::1111]:8443/"), resolver=resolve, allow_private=False)

    assert target.addresses == ("2606:4700:4700::1111",) and resolve.asked == []


def test_with_private_targets_allowed_answers_are_kept_unvetted():
    resolve = resolving({"receiver.internal": ["10.0.0.7"]})

    target = target_resolve(target_parse("http://receiver.internal/"), resolver=resolve, allow_private=True)

    assert target.addresses == ("10.0.0.7",)


def test_a_name_that_does_not_resolve_or_resolves_to_nothing_is_unresolved():
    for resolve in (resolving({}), resolving({"empty.example": []})):
        for host in ("nowhere.example", "empty.example"):
            with pytest.raises(TargetUnresolved) as caught:
                target_resolve(target_parse(f"http://{host}/"), resolver=resolve, allow_private=False)
            assert caught.value.message == f"The host '{host}' does not resolve."


@pytest.mark.parametrize("host", ["2130706433", "0x7f.0.0.1", "127.1", "0177.0.0.1", "localhost"])
def test_other_spellings_of_loopback_are_judged_by_what_they_resolve_to(host):
    # The system resolver (numeric forms and /etc/hosts: no network) turns these into 127.0.0.1 or ::1.
    with pytest.raises(ValidationError) as caught:
        clean_target_url(f"http://{host}:8080/hook", allow_private=False)

    message = caught.value.message_dict["target"][0]
    assert f"The host '{host}' is a loopback, private or link-local address" in message
    assert "a loopback address" in message and "TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS" in message


def test_a_rebinding_name_passes_when_saved_and_is_refused_at_the_next_resolution():
    resolve = rebinding([PUBLIC], ["127.0.0.1"])

    assert clean_target_url("https://rebind.example/x", allow_private=False, resolver=resolve) == "https://rebind.example/x"
    with pytest.raises(TargetRefused) as caught:
        target_resolve(target_parse("https://rebind.example/x"), resolver=resolve, allow_private=False)

    assert caught.value.reason.startswith("rebind.example resolves to 127.0.0.1, a loopback address")


def test_the_save_time_message_names_each_refused_address():
    resolve = resolving({"mixed.example": [PUBLIC, "10.0.0.7", "fe80::1"]})

    with pytest.raises(ValidationError) as caught:
        clean_target_url("https://mixed.example/x", allow_private=False, resolver=resolve)

    assert caught.value.message_dict == {"target": [
        "The host 'mixed.example' is a loopback, private or link-local address, or another special-purpose one "
        "(10.0.0.7 is a private address (10.0.0.0/8); fe80::1 is a link-local address (fe80::/10)); alerts go to "
        "public hosts only (an administrator can allow internal receivers with TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS)."
    ]}  # fmt: skip
