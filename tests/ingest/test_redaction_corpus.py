"""Redaction against a corpus: real-shaped credentials (all fake, generated here) must go, look-alikes must stay.

Each credential sits in the kind of text it turns up in inside attribute values (a log
line, serialised tool arguments, a connection string, a traceback); the test checks that
the credential's body is gone from the stored value. The look-alikes are what tool spans
carry all day (ids, hashes, paths, prose) and must be stored exactly as sent.
"""

from __future__ import annotations

import base64
import random
import string

import pytest

from ingest.limits import DEFAULT_LIMITS
from ingest.redact import REDACTED, is_secret_key, redact_attributes, redact_string, scrub_text

_random = random.Random(20260714)
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
UPPER32 = string.ascii_uppercase + "234567"


def rand(alphabet: str, n: int) -> str:
    return "".join(_random.choice(alphabet) for _ in range(n))


def b64url(n: int) -> str:
    return rand(ALNUM + "-_", n)


JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkZha2UifQ." + b64url(43)
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA" + rand(ALNUM + "+/", 64) + "\n-----END RSA PRIVATE KEY-----"
OPENSSH = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA" + rand(ALNUM + "+/", 64) + "\n-----END OPENSSH PRIVATE KEY-----"

# (name, text holding the secret, the secret's body that must not survive)
SECRETS = [
    ("aws access key id", "aws_access_key_id = {}", "AKIA" + rand(UPPER32, 16)),
    ("aws temporary key id", "using credentials {} from the instance role", "ASIA" + rand(UPPER32, 16)),
    ("aws secret in env dump", "AWS_SECRET_ACCESS_KEY={}", rand(ALNUM + "/+", 40)),
    ("github classic pat", "git clone https://x:{}@github.com/acme/repo", "ghp_" + rand(ALNUM, 36)),
    ("github oauth", '{{"headers": {{"X-GitHub-Token": "{}"}}}}', "gho_" + rand(ALNUM, 36)),
    ("github app token", "installation token {} expires in 1h", "ghs_" + rand(ALNUM, 36)),
    ("github fine-grained pat", "export GH_PAT={}", "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59)),
    ("gitlab pat", "curl --header PRIVATE-TOKEN:{} https://gitlab.example.com/api", "glpat-" + b64url(20)),
    ("gitlab deploy token", "deploy with {}", "gldt-" + b64url(20)),
    ("gitlab runner token", "runner registered: {}", "glrt-" + b64url(20)),
    ("slack bot token", "slack client init {}", "xoxb-" + rand("0123456789", 12) + "-" + rand("0123456789", 12) + "-" + rand(ALNUM, 24)),
    ("slack user token", "token={}", "xoxp-" + rand("0123456789", 12) + "-" + rand("0123456789", 12) + "-" + rand("0123456789", 12) + "-" + rand(HEX, 32)),
    ("slack webhook", "POST https://{} failed", "hooks.slack.com/services/T" + rand(UPPER32, 8) + "/B" + rand(UPPER32, 8) + "/" + rand(ALNUM, 24)),
    ("stripe live secret", "stripe.api_key = '{}'", "sk_live_" + rand(ALNUM, 24)),
    ("stripe restricted", "charge failed for key {}", "rk_live_" + rand(ALNUM, 24)),
    ("stripe test secret", "Stripe error (key {}): card declined", "sk_test_" + rand(ALNUM, 24)),
    ("google api key", "https://maps.googleapis.com/maps/api/geocode/json?address=x&key={}", "AIza" + b64url(35)),
    ("openai legacy key", "openai.AuthenticationError: Incorrect API key provided: {}", "sk-" + rand(ALNUM, 20) + "T3BlbkFJ" + rand(ALNUM, 20)),
    ("openai project key", "client = OpenAI(api_key=\"{}\")", "sk-proj-" + b64url(74) + "T3BlbkFJ" + b64url(74)),
    ("anthropic key", "x-api-key header was {}", "sk-ant-api03-" + b64url(93) + "AA"),
    ("hugging face token", "huggingface-cli login --token {}", "hf_" + rand(string.ascii_letters, 34)),
    ("hugging face token in prose", "the model download used {} and failed", "hf_" + rand(string.ascii_letters, 34)),
    ("jwt in a log line", "verifying session {} for user 42", JWT),
    ("rsa private key", "config loaded: {}", PEM),
    ("openssh private key", '{{"ssh_key_material": "{}"}}', OPENSSH.replace("\n", "\\n")),
    ("azure storage account key", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={};EndpointSuffix=core.windows.net", rand(ALNUM + "+/", 86) + "=="),
    ("azure service bus key", "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={}", rand(ALNUM + "+/", 43) + "="),
    ("azure sas signature", "https://acme.blob.core.windows.net/c/b.txt?sv=2022-11-02&se=2026-01-01&sp=r&sig={}", rand(ALNUM, 40) + "%3D"),
    ("basic credentials in free text", "retrying with Basic {} after 401", base64.b64encode(b"svc-agent:" + rand(ALNUM, 16).encode()).decode()),
    ("bearer in free text", "GET /v1/orders sent with bearer {}", rand(ALNUM, 32)),
    ("url with user:password", "could not connect to postgres://app:{}@db.internal:5432/orders", rand(ALNUM, 18)),
    ("redis url password", "redis://default:{}@cache:6379/0 unreachable", rand(ALNUM, 24)),
    ("npm token", "//registry.npmjs.org/:_authToken={}", "npm_" + rand(ALNUM, 36)),
    ("pypi token", "twine upload -p {}", "pypi-AgEIcHlwaS5vcmc" + b64url(60)),
    ("sendgrid key", "mail send failed with key {}", "SG." + b64url(22) + "." + b64url(43)),
    ("discord bot token", "DISCORD_TOKEN={}", rand(ALNUM, 24) + "." + b64url(6) + "." + b64url(27)),
    ("datadog api key", "DD_API_KEY={}", rand(HEX, 32)),
    ("twilio auth token", "TWILIO_AUTH_TOKEN: {}", rand(HEX, 32)),
    ("db password key=value", "connecting with db_pass={} to orders", rand(ALNUM, 14)),
    ("auth field in json", '{{"user": "svc", "auth": "{}"}}', rand(ALNUM, 20)),
    ("password in json", '{{"username": "svc", "password": "{}"}}', "Tr0ub4dor&" + rand(ALNUM, 6)),
    ("digitalocean pat", "doctl auth init -t {}", "dop_v1_" + rand(HEX, 64)),
    ("linear key", "LINEAR={}", "lin_api_" + rand(ALNUM, 40)),
    ("shopify token", "X-Shopify-Access-Token {}", "shpat_" + rand(HEX, 32)),
    ("grafana service account", "grafana call with {}", "glsa_" + rand(ALNUM, 32) + "_" + rand(HEX, 8)),
    ("databricks token", "databricks configure --token {}", "dapi" + rand(HEX, 32)),
    ("age secret key", "sops key {}", "AGE-SECRET-KEY-1" + rand("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
    ("perplexity key", "pplx client {}", "pplx-" + rand(ALNUM, 48)),
    ("vault token", "VAULT_TOKEN={}", "hvs." + b64url(95)),
]

# Text that must be stored exactly as sent.
LOOKALIKES = [
    "550e8400-e29b-41d4-a716-446655440000",
    "request 7c9e6679-7425-40de-944b-e07fc1f90ae7 failed",
    "commit 4eeb1e6a1f0c2d9b8e7a6c5d4b3a29180f7e6d5c",
    "4eeb1e6",
    "trace 0af7651916cd43dd8448eb211c80319c span b7ad6b7169203331",
    base64.b64encode(b"The quick brown fox jumps over the lazy dog").decode(),
    base64.b64encode(b"hello world, this is plain text").decode(),
    "Ask the user to re-run the task-runner: sk-learn is not a package, scikit-learn is",
    "the desk-top app and the risk-model disagree",
    "sk-means clustering is a typo for k-means",
    "cache key=user:42:profile",
    "primary key=id, sort key=created_at",
    "key=value pairs are separated by ampersands",
    "max_tokens=4096 and prompt_tokens=1200",
    "token_count=512",
    "/home/agent/.config/tool/settings.json",
    "C:\\Users\\agent\\AppData\\Local\\Temp\\out.txt",
    "src/auth/middleware.py:42 in check_scope",
    "the author=Jane Doe; publisher=ACME",
    "bypass=true was ignored",
    "design=compact layout=grid",
    "Basic research shows basic auth is discouraged",
    "use bearer tokens, not basic auth",
    "https://example.com/docs/api/keys#rotation",
    "https://api.example.com/v1/users/123?page=2&limit=50",
    "postgres://db.internal:5432/orders",
    "mailto:support@example.com",
    "user@example.com sent 3 messages",
    "ghost_protocol_enabled",
    "glpat- tokens start with glpat- followed by 20 characters",
    "hf_hub_download(repo_id='gpt2')",
    "AKIA is the prefix of AWS access key ids",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "ETag: \"33a64df551425fcc55e4d42a148795d9f25f89d4\"",
    "order #A-1029 shipped to 221B Baker Street",
    "lookup_order raised TimeoutError after 30.0s",
    "HTTP 503 Service Unavailable (Retry-After: 2)",
    "SELECT id, name FROM users WHERE id = 42",
    "pass@k = 0.73 on the eval set",
    "The test suite passed: 125 passed in 2.9s",
    "xoxo, the support team",
    "eyes on the prize: eyJ is just three letters",
    "npm_config_cache=/tmp/npm",
    "session.id=7f3a2c",
    "SKU-1234-BLUE-XL",
    "version v1.0-rc2-20260101",
]

KEYS_SECRET = [
    "db_pass", "dbPass", "auth", "x-auth", "http.request.header.x-auth", "api_key", "apiKey", "secret",
    "client_secret", "password", "PGPASSWORD", "passwd", "token", "access_token", "license_key",
    "account_key", "app_key", "private_key", "creds", "http.request.header.authorization",
]  # fmt: skip
KEYS_KEPT = [
    "tool.name", "gen_ai.tool.name", "http.request.method", "error.type", "key", "cache_key", "s3.key",
    "gen_ai.usage.input_tokens", "gen_ai.request.max_tokens", "auth.type", "auth_method", "pass_rate",
    "session.id", "pwd", "author", "passes", "keyboard.layout", "primary_key_column",
]  # fmt: skip


def test_the_corpus_is_big_enough():
    assert len(SECRETS) >= 40 and len(LOOKALIKES) >= 40


@pytest.mark.parametrize(("name", "template", "secret"), SECRETS, ids=[name for name, _, _ in SECRETS])
def test_a_real_shaped_credential_is_redacted_wherever_it_appears(name, template, secret):
    text = template.format(secret)

    stored = redact_string(text, DEFAULT_LIMITS.max_attribute_value_chars)

    assert REDACTED in stored
    # Nothing recognisable of the secret is left: not the whole, not a long piece of it.
    assert secret not in stored
    assert secret[-12:] not in stored


@pytest.mark.parametrize("text", LOOKALIKES)
def test_a_look_alike_survives_unchanged(text):
    assert scrub_text(text) == text
    assert redact_attributes({"message": text}, DEFAULT_LIMITS) == {"message": text}


@pytest.mark.parametrize("key", KEYS_SECRET)
def test_a_credential_key_has_its_value_redacted(key):
    assert is_secret_key(key)
    assert redact_attributes({key: "hunter2-but-longer"}, DEFAULT_LIMITS) == {key: REDACTED}


@pytest.mark.parametrize("key", KEYS_KEPT)
def test_a_useful_key_keeps_its_value(key):
    assert not is_secret_key(key)
    assert redact_attributes({key: "lookup_order"}, DEFAULT_LIMITS) == {key: "lookup_order"}


def test_a_credential_inside_serialised_tool_arguments_is_redacted_and_the_rest_kept():
    token = "ghp_" + rand(ALNUM, 36)
    arguments = '{"repo": "acme/api", "key": "readme.md", "github_token": "%s"}' % token

    stored = redact_attributes({"gen_ai.tool.call.arguments": arguments}, DEFAULT_LIMITS)["gen_ai.tool.call.arguments"]

    assert token not in stored
    assert '"repo": "acme/api"' in stored and '"key": "readme.md"' in stored
