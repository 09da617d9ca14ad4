"""ingest.redact: secrets never reach storage, and every stored string is safe to store. Pure."""

from __future__ import annotations

import json
import time

import pytest

from ingest import redact
from ingest.limits import DEFAULT_LIMITS, IngestLimits
from ingest.redact import (
    DEPTH_MARKER,
    REDACTED,
    TRUNCATION_MARKER,
    clean_string,
    is_secret_key,
    redact_attributes,
    redact_item,
    redact_string,
    scrub_text,
)

SECRET_KEYS = [
    "authorization",
    "http.request.header.authorization",
    "Proxy-Authorization",
    "api_key",
    "apikey",
    "api-key",
    "apiKey",
    "APIKey",
    "x-api-key",
    "http.request.header.x-api-key",
    "token",
    "access_token",
    "refresh_token",
    "oauth.accessToken",
    "id_token",
    "password",
    "db.password",
    "passwd",
    "secret",
    "client_secret",
    "aws.secret_access_key",
    "cookie",
    "set-cookie",
    "http.response.header.set-cookie",
    "private_key",
    "privateKey",
    "credential",
    "credentials",
]

NOT_SECRET_KEYS = [
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.request.max_tokens",
    "llm.token_count.prompt",
    "llm.token_count.completion",
    "llm.usage.total_tokens",
    "gen_ai.token.type",
    "tokenizer",
    "session.id",  # groups a conversation's traces; authenticates nothing
    "pwd",  # the working directory, far more often than a password
    "gen_ai.tool.name",
    "cache.key",
    "http.response.status_code",
]

CREDENTIAL_VALUES = [
    pytest.param("Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9", id="bearer"),
    pytest.param("key sk-abcdefghijklmnopqrstuvwxyz012345 used", "sk-abcdefghijklmnopqrstuvwxyz012345", id="openai"),
    pytest.param("key sk-proj-Abc123_def456-ghi789JKL012mno used", "Abc123_def456-ghi789JKL012mno", id="openai-project"),
    pytest.param("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz", id="anthropic"),
    pytest.param("aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE", id="aws-access-key"),
    pytest.param(
        "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        id="jwt",
    ),
    pytest.param("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghij", id="github-classic"),
    pytest.param("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_11ABCDEFG", id="github-fine-grained"),
    pytest.param("slack xoxb-123456789012-abcdefghijkl", "xoxb-123456789012", id="slack-bot"),
    pytest.param("slack xoxp-123456789012-abcdefghijkl", "xoxp-123456789012", id="slack-user"),
    pytest.param("AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", "AIzaSyA-abcdefghij", id="google"),
    pytest.param("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA", id="pem"),
    pytest.param("postgres://app:s3cr3t-pw@db.internal:5432/main", "s3cr3t-pw", id="url-password"),
    pytest.param("curl -H 'Authorization: Bearer abc123def456' https://api", "abc123def456", id="header-in-text"),
    pytest.param("GET /callback?access_token=qwerty123456&state=x", "qwerty123456", id="query-string"),
    pytest.param("login failed: password=hunter2!", "hunter2", id="password-in-text"),
]

ORDINARY_TEXT = [
    "task-abcdefghijklmnopqrstuvwxyz0123 finished",  # "sk-" inside a word
    "the bearer of bad news",
    "timezone Asia/Tokyo",
    "used 1200 tokens of 4096 max_tokens",
    "all tests passed",
    "mail ops@example.com about https://status.example.com",
    '{"max_tokens": 256, "temperature": 0.2}',
    "max_token=100",  # a count in key=value form
    "Traceback (most recent call last):\n  File \"tool.py\", line 3, in run\nValueError: bad city",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_values_under_credential_keys_are_redacted(key):
    assert is_secret_key(key)
    assert redact_attributes({key: "hunter2"}, DEFAULT_LIMITS) == {key: REDACTED}


@pytest.mark.parametrize("key", NOT_SECRET_KEYS)
def test_token_counts_and_other_lookalike_keys_are_kept(key):
    assert not is_secret_key(key)
    assert redact_attributes({key: 1234}, DEFAULT_LIMITS) == {key: 1234}


def test_a_credential_key_redacts_numbers_lists_and_objects_too():
    attrs = {"password": 1234, "credentials": {"user": "bob", "pass": "x"}, "cookie": ["a=1", "b=2"]}

    assert redact_attributes(attrs, DEFAULT_LIMITS) == {"password": REDACTED, "credentials": REDACTED, "cookie": REDACTED}


def test_none_booleans_and_empty_strings_under_credential_keys_are_kept():
    # They cannot carry a secret, and "the header was empty" helps debug auth failures.
    attrs = {"authorization": "", "api_key": None, "token.present": True}

    assert redact_attributes(attrs, DEFAULT_LIMITS) == attrs


@pytest.mark.parametrize("text, secret", CREDENTIAL_VALUES)
def test_credential_shaped_values_are_redacted_anywhere_in_a_string(text, secret):
    redacted = scrub_text(text)

    assert secret not in redacted
    assert REDACTED in redacted
    assert redact_attributes({"message": text}, DEFAULT_LIMITS)["message"] == redacted


@pytest.mark.parametrize("text", ORDINARY_TEXT)
def test_ordinary_text_is_left_alone(text):
    assert scrub_text(text) == text


def test_redaction_keeps_what_tells_a_reader_what_was_there():
    assert scrub_text("Bearer abc123def456") == f"Bearer {REDACTED}"
    assert scrub_text("postgres://app:pw123@db/main") == f"postgres://app:{REDACTED}@db/main"
    assert scrub_text("api_key=abc123def") == f"api_key={REDACTED}"


def test_secrets_inside_a_json_argument_string_are_redacted_and_the_json_stays_valid():
    arguments = json.dumps({"to": "a@example.com", "password": "hu\"nt er2", "apiKey": "k-123", "max_tokens": 50})

    redacted = redact_attributes({"gen_ai.tool.call.arguments": arguments}, DEFAULT_LIMITS)["gen_ai.tool.call.arguments"]

    assert json.loads(redacted) == {"to": "a@example.com", "password": REDACTED, "apiKey": REDACTED, "max_tokens": 50}


def test_secrets_inside_json_escaped_twice_are_redacted():
    inner = json.dumps({"token": "abc123secret"})
    outer = json.dumps({"payload": inner})

    redacted = scrub_text(outer)

    assert "abc123secret" not in redacted
    assert json.loads(json.loads(redacted)["payload"]) == {"token": REDACTED}


def test_nested_maps_and_lists_are_redacted_by_key_and_by_value():
    attrs = {
        "request": {"headers": {"X-Api-Key": "k1", "Accept": "application/json"}, "body": ["ok", "sk-" + "a" * 30]},
        "gen_ai.usage.input_tokens": 42,
    }

    assert redact_attributes(attrs, DEFAULT_LIMITS) == {
        "request": {"headers": {"X-Api-Key": REDACTED, "Accept": "application/json"}, "body": ["ok", REDACTED]},
        "gen_ai.usage.input_tokens": 42,
    }


def test_redact_attributes_returns_a_new_map_and_leaves_its_input_alone():
    attrs = {"password": "x", "nested": {"token": "y"}}

    redact_attributes(attrs, DEFAULT_LIMITS)

    assert attrs == {"password": "x", "nested": {"token": "y"}}


def test_a_long_string_is_cut_to_the_limit_and_ends_with_the_truncation_marker():
    cut = clean_string("a" * 20_000, 1000)

    assert len(cut) == 1000
    assert cut.startswith("a" * 900)
    assert cut.endswith(f"{TRUNCATION_MARKER}{20_000 - cut.index(TRUNCATION_MARKER)} chars]")


def test_a_string_at_the_limit_is_not_cut():
    assert clean_string("a" * 1000, 1000) == "a" * 1000


def test_a_limit_too_small_for_the_marker_cuts_plainly():
    assert clean_string("abcdefghijklmnopqrstuvwxyz", 5) == "abcde"


def test_long_attribute_values_and_keys_are_cut_at_their_limits():
    limits = IngestLimits(max_attribute_value_chars=100, max_attribute_key_chars=40)

    out = redact_attributes({"k" * 300: "v" * 5000, "list": ["w" * 5000]}, limits)

    (long_key,) = [key for key in out if key != "list"]
    assert len(long_key) == 40
    assert len(out[long_key]) == 100 and TRUNCATION_MARKER in out[long_key]
    assert len(out["list"][0]) == 100


def test_redaction_runs_before_truncation_so_a_cut_secret_leaves_no_head():
    text = "x" * 60 + " sk-" + "A1b2C3d4E5" * 4

    cut = redact_string(text, 80)

    assert "sk-A1b2" not in cut
    assert REDACTED[:5] in cut


def test_the_marker_counts_every_character_cut_from_a_huge_value():
    out = redact_attributes({"k": "a" * 100_000}, IngestLimits(max_attribute_value_chars=1000))["k"]

    kept = out.index(TRUNCATION_MARKER)
    assert len(out) == 1000
    assert out.endswith(f"{TRUNCATION_MARKER}{100_000 - kept} chars]")


def test_a_huge_value_full_of_secrets_is_redacted_quickly_where_it_is_kept():
    text = "password=abc123 " * 4_000_000  # 64 MB

    started = time.perf_counter()
    out = redact_attributes({"log": text}, DEFAULT_LIMITS)["log"]

    assert time.perf_counter() - started < 2
    assert len(out) == DEFAULT_LIMITS.max_attribute_value_chars
    assert "abc123" not in out


def test_a_quoted_secret_cut_short_by_the_sender_is_still_redacted():
    # OpenLLMetry cuts long JSON attribute values mid-string.
    assert scrub_text('{"query": "x", "password": "hunter2-and-mo') == f'{{"query": "x", "password": "{REDACTED}"'


def test_nul_characters_and_lone_surrogates_become_replacement_characters():
    assert clean_string("a\x00b", 100) == "a\ufffdb"
    assert clean_string("half an emoji \ud83d", 100) == "half an emoji \ufffd"
    assert clean_string("whole emoji \U0001f600", 100) == "whole emoji \U0001f600"
    assert redact_attributes({"k\x00ey": ["v\x00", {"n": "\udc00"}]}, DEFAULT_LIMITS) == {"k\ufffdey": ["v\ufffd", {"n": "\ufffd"}]}


def test_values_nested_deeper_than_the_limit_become_a_marker():
    limits = IngestLimits(max_value_depth=2)
    # "a" holds a map at depth 1, "b" one at depth 2, "c" one at depth 3
    attrs = {"a": {"b": {"c": {"d": 1}}, "list": [[1]]}, "flat": [1, 2]}

    assert redact_attributes(attrs, limits) == {"a": {"b": {"c": DEPTH_MARKER}, "list": [DEPTH_MARKER]}, "flat": [1, 2]}


def test_redact_string_scrubs_and_cleans_names_and_messages():
    assert redact_string("auth failed for sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX\x00", 1024) == f"auth failed for {REDACTED}\ufffd"


# The MATCH_STARTS shortcut must find exactly what a full VALUE_RE scan finds. A pattern
# added to VALUE_PATTERNS without its start in MATCH_STARTS fails here.
_PIECES = (
    "Bearer abcdefghij0123456789", "sk-proj-ABCDEFGHIJKLMNOPQRSTUV", "sk_live_ABCDEFGHIJKLMNOPQR",
    "AKIAABCDEFGHIJKLMNOP", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", "ghp_" + "A" * 36,
    "github_pat_" + "B" * 30, "xoxb-1234567890-abcdef", "AIza" + "C" * 35,
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "postgres://bob:hunter2@db:5432/x",
    'password="s3cr3t"', "api_key=ABC123", "Authorization: Basic dXNlcjpwYXNz", "\\\"token\\\": \\\"xyz\\\"",
    "access-token: q", "id_token=zzz", "session_token='abc'", "COOKIE=1", "credentials: x", "private_key=y",
)
_CONTEXT = ("", "x", "_", "A1", " ", '"', "\n", "task-", "key ", "bearer ", "PASS")


@pytest.mark.parametrize("piece", _PIECES)
def test_searching_only_where_a_secret_can_start_finds_what_a_full_scan_finds(piece):
    for before in _CONTEXT:
        for after in _CONTEXT:
            for variant in (piece, piece.upper(), piece.lower(), piece.swapcase()):
                text = f"{before}{variant}{after} and {variant}"
                assert redact._sub_secrets(text) == redact.VALUE_RE.sub(redact._replace, text), text


_ONE_ATTRIBUTE_CASES = [
    ("password", "hunter2"),
    ("api_key", 1234),
    ("authorization", ""),
    ("token", None),
    ("gen_ai.usage.input_tokens", 42),
    ("message", "call failed: Authorization: Bearer abcdefghij0123456789"),
    ("url", "postgres://bob:hunter2@db:5432/x"),
    ("email", "mail bob@example.com at https://example.com"),
    ("short", "@://"),
    ("args", '{"to": "a@example.com", "password": "hunter2"}'),
    ("nul", "a\x00b"),
    ("surrogate", "a\ud800b"),
    ("long", "x" * 20_000),
    ("long secret", "sk-proj-" + "A" * 20_000),
    ("k" * 300, "value"),
    ("nested", {"headers": {"X-Api-Key": "abc"}, "list": ["token=abcdef123", [[[[[[[[1]]]]]]]]]}),
    ("list", ["ok", "Bearer abcdefghij0123456789"]),
    ("float", 1.5),
    ("bool", True),
]


_ITEM_LIMITS = (
    DEFAULT_LIMITS.max_attribute_key_chars, DEFAULT_LIMITS.max_attribute_value_chars, DEFAULT_LIMITS.max_value_depth
)


@pytest.mark.parametrize(("key", "value"), _ONE_ATTRIBUTE_CASES)
def test_redact_item_stores_one_attribute_as_redact_attributes_does(key, value):
    assert dict([redact_item(key, value, _ITEM_LIMITS)]) == redact_attributes({key: value}, DEFAULT_LIMITS)


def test_redact_item_judges_a_value_alone_whatever_else_its_map_holds():
    # In a map, the gate runs over all its strings at once; alone, over the value itself.
    attrs = {"url": "see https://example.com", "mail": "bob@example.com wrote", "note": "password=s3cr3t"}

    stored = dict(redact_item(key, value, _ITEM_LIMITS) for key, value in attrs.items())

    assert stored == redact_attributes(attrs, DEFAULT_LIMITS)
