"""Safe defaults: the SECRET_KEY rule, HTTPS behind a TLS proxy, the CSP, no-store on secrets,
and `check --deploy` clean under the compose configuration (docs/deploy.md).

Settings are decided when Django starts, so what the environment turns on is seen in a fresh
`manage.py` process; what a setting does to a response is seen through the test client.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from config import security

ROOT = Path(__file__).resolve().parent.parent
A_KEY = secrets.token_urlsafe(50)


def manage(*args: str, env: dict) -> subprocess.CompletedProcess:
    """manage.py in a clean environment (no PYTEST_VERSION: production's rules), on a throwaway SQLite file."""
    base = {"PATH": "/usr/bin:/bin", "DATABASE_URL": "sqlite:////tmp/toolwatch-security-check.sqlite3",
            "TOOLWATCH_QUICKSTART_KEY_FILE": "/nonexistent/secret-key"}  # a Quickstart's key in this checkout is not read  # fmt: skip
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


SHOW = (
    "import json, django; django.setup(); from django.conf import settings as s; print(json.dumps({name: "
    "getattr(s, name, None) for name in __import__('sys').argv[1:]}, default=str))"
)


def settings_under(env: dict, *names: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", SHOW, *names], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings", "SECRET_KEY": A_KEY, **env},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


# --- SECRET_KEY ---------------------------------------------------------------------------------


def test_with_debug_off_toolwatch_refuses_to_start_without_a_secret_key():
    result = manage("check", env={})

    assert result.returncode != 0
    assert "SECRET_KEY is not set and DEBUG is off" in result.stderr
    assert "secrets.token_urlsafe(50)" in result.stderr  # says how to make one


def test_with_debug_off_toolwatch_refuses_the_built_in_key():
    result = manage("check", env={"SECRET_KEY": security.DEVELOPMENT_SECRET_KEY})

    assert result.returncode != 0
    assert "SECRET_KEY is the built-in development key and DEBUG is off" in result.stderr


def test_with_debug_on_the_built_in_key_is_used():
    assert manage("check", env={"DEBUG": "1"}).returncode == 0


def test_the_key_comes_from_secret_key_file_else_the_quickstarts_file(tmp_path):
    given, quickstart = tmp_path / "given", tmp_path / "quickstart"
    given.write_text(A_KEY + "\n")
    quickstart.write_text("q" * 50)

    assert manage("check", env={"SECRET_KEY_FILE": str(given)}).returncode == 0
    assert security.key_from_file(str(given), default=quickstart) == A_KEY
    assert security.key_from_file("", default=quickstart) == "q" * 50
    assert security.key_from_file("", default=tmp_path / "absent") == ""
    result = manage("check", env={"SECRET_KEY_FILE": str(tmp_path / "absent")})
    assert result.returncode != 0 and "SECRET_KEY_FILE=" in result.stderr and "cannot be read" in result.stderr


def test_a_key_of_its_own_is_used_as_given():
    assert security.secret_key(A_KEY, debug=False, required=False, under_test=False) == A_KEY


def test_the_rule_for_each_case():
    dev = security.DEVELOPMENT_SECRET_KEY
    assert security.secret_key("", debug=True, required=False, under_test=False) == dev
    assert security.secret_key("", debug=False, required=False, under_test=True) == dev
    with pytest.raises(ImproperlyConfigured, match="TOOLWATCH_REQUIRE_SECRET_KEY=1"):
        security.secret_key("", debug=True, required=True, under_test=False)
    with pytest.raises(ImproperlyConfigured, match="built-in development key"):
        security.secret_key(dev, debug=False, required=False, under_test=False)


# --- the environment: HTTPS behind a TLS proxy, CSRF origins, CSP, cache ---------------------------


def test_behind_a_tls_proxy_redirects_secure_cookies_and_the_proxy_header_are_on():
    seen = settings_under(
        {"TOOLWATCH_BEHIND_TLS_PROXY": "1", "SECURE_HSTS_SECONDS": "3600"},
        "SECURE_PROXY_SSL_HEADER", "SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS", "TOOLWATCH_TRUSTED_PROXIES",
    )  # fmt: skip

    assert seen == {
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "SECURE_SSL_REDIRECT": True,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 3600,
        "TOOLWATCH_TRUSTED_PROXIES": 1,
    }


def test_each_setting_can_be_set_apart_from_the_proxy_switch():
    seen = settings_under(
        {"TOOLWATCH_BEHIND_TLS_PROXY": "1", "SECURE_SSL_REDIRECT": "0", "SESSION_COOKIE_SECURE": ""},
        "SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE",
    )  # fmt: skip

    assert seen == {"SECURE_SSL_REDIRECT": False, "SESSION_COOKIE_SECURE": True}  # empty: the default


def test_by_default_the_quickstart_serves_plain_http_with_the_csp_on():
    seen = settings_under({}, "SECURE_PROXY_SSL_HEADER", "SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CACHES")

    assert seen["SECURE_PROXY_SSL_HEADER"] is None and seen["SECURE_SSL_REDIRECT"] is False
    assert seen["SESSION_COOKIE_SECURE"] is False
    assert seen["CACHES"]["default"]["BACKEND"] == "django.core.cache.backends.locmem.LocMemCache"


def test_csrf_trusted_origins_are_read_as_a_list_of_origins():
    seen = settings_under({"CSRF_TRUSTED_ORIGINS": "https://tw.example.com, https://*.example.org:8443/"}, "CSRF_TRUSTED_ORIGINS")

    assert seen == {"CSRF_TRUSTED_ORIGINS": ["https://tw.example.com", "https://*.example.org:8443"]}


@pytest.mark.parametrize(
    "env, words",
    [
        ({"CSRF_TRUSTED_ORIGINS": "tw.example.com"}, "CSRF_TRUSTED_ORIGINS: 'tw.example.com' is not an origin"),
        ({"CSRF_TRUSTED_ORIGINS": "https://tw.example.com/login/"}, "is not an origin; write scheme://host[:port]"),
        ({"TOOLWATCH_CSP": "strict"}, "TOOLWATCH_CSP='strict' is not one of enforce, report-only, off"),
        ({"TOOLWATCH_CACHE_URL": "memcached://cache:11211"}, "TOOLWATCH_CACHE_URL='memcached://cache:11211' is not a cache URL"),
        ({"TOOLWATCH_THROTTLE_ANON": "lots"}, "TOOLWATCH_THROTTLE_ANON='lots' is not a rate"),
        ({"TOOLWATCH_BEHIND_TLS_PROXY": "maybe"}, "TOOLWATCH_BEHIND_TLS_PROXY='maybe' is not a boolean"),
        ({"SECURE_HSTS_SECONDS": "-1"}, "SECURE_HSTS_SECONDS=-1 is below its minimum of 0"),
        ({"TOOLWATCH_INGEST_RATE": "fast"}, "TOOLWATCH_INGEST_RATE='fast' is not an integer"),
        ({"TOOLWATCH_LOGIN_FAILURE_LIMIT": "0"}, "TOOLWATCH_LOGIN_FAILURE_LIMIT=0 is below its minimum of 1"),
    ],
)
def test_a_bad_value_fails_loudly_naming_the_variable(env, words):
    result = manage("check", env={"SECRET_KEY": A_KEY, **env})

    assert result.returncode != 0
    assert words in result.stderr


def test_the_policy_enforces_or_only_reports():
    enforced, report_only = security.content_security_policy("enforce")
    assert report_only is None and enforced["DIRECTIVES"]["script-src"] == ["'self'"]

    enforced, report_only = security.content_security_policy("report-only", report_uri="/csp-reports/")
    assert enforced is None and report_only["DIRECTIVES"]["report-uri"] == "/csp-reports/"

    assert security.content_security_policy("off") == (None, None)


@pytest.mark.parametrize(
    "url, backend",
    [
        ("", "django.core.cache.backends.locmem.LocMemCache"),
        ("locmem://", "django.core.cache.backends.locmem.LocMemCache"),
        ("redis://redis:6379/1", "django.core.cache.backends.redis.RedisCache"),
        ("rediss://user:pw@cache.example.com:6380/0", "django.core.cache.backends.redis.RedisCache"),
    ],
)
def test_the_cache_comes_from_its_url(url, backend):
    assert security.cache_config(url)["BACKEND"] == backend


@pytest.mark.parametrize(
    "meta, proxies, address",
    [
        ({"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.5"}, 0, "10.0.0.1"),  # no proxy: never believed
        ({"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "198.51.100.1, 203.0.113.5"}, 1, "203.0.113.5"),
        ({"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.5, 10.0.0.7"}, 2, "203.0.113.5"),
        ({"REMOTE_ADDR": "10.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.5"}, 3, "203.0.113.5"),
        ({"REMOTE_ADDR": "10.0.0.1"}, 1, "10.0.0.1"),
    ],
)
def test_the_client_address_is_the_one_the_nearest_trusted_proxy_appended(meta, proxies, address):
    assert security.client_address(meta, trusted_proxies=proxies) == address


# --- what the settings do to responses ------------------------------------------------------------


def test_every_page_carries_the_content_security_policy(owner_client):
    response = owner_client.get("/p/alpha/")

    policy = response["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-eval" not in policy


def test_no_template_has_an_inline_script_or_event_handler():
    # The policy allows no inline script: anything a template would run has to be a static file.
    inline = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>|\son[a-z]+=\"", re.I)
    found = [
        str(path.relative_to(ROOT)) for path in (ROOT / "templates").rglob("*.html") if inline.search(path.read_text())
    ]
    assert found == []


@pytest.fixture
def tls_proxy(settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = settings.SECURE_HSTS_PRELOAD = True
    return settings


def test_behind_the_proxy_a_plain_http_page_is_redirected_to_https(client, db, tls_proxy):
    response = client.get("/login/")

    assert response.status_code == 301 and response["Location"] == "https://testserver/login/"


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_health_checks_and_prometheus_are_never_redirected(client, db, tls_proxy, path):
    assert client.get(path).status_code != 301


def test_otlp_exporters_on_plain_http_are_never_redirected(client, db, tls_proxy):
    response = client.generic("POST", "/v1/traces", b"", content_type="application/x-protobuf")

    assert response.status_code == 401  # judged by ingest, not sent away


def test_through_the_proxy_pages_send_hsts_and_secure_cookies(client, owner, tls_proxy):
    response = client.post(
        "/login/", {"username": "olga", "password": "pw-cast-123"}, HTTP_X_FORWARDED_PROTO="https", secure=False
    )

    assert response.status_code == 302
    assert response["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert response.cookies["sessionid"]["secure"] is True


def test_a_form_posted_through_the_proxy_passes_the_csrf_check_without_trusted_origins(owner, tls_proxy):
    from django.test import Client

    # As a proxy forwards it: the public Host, and the scheme it was reached on.
    browser = Client(enforce_csrf_checks=True, HTTP_HOST="testserver", HTTP_X_FORWARDED_PROTO="https")
    token = browser.get("/login/").cookies["csrftoken"].value

    response = browser.post(
        "/login/", {"username": "olga", "password": "pw-cast-123", "csrfmiddlewaretoken": token},
        HTTP_ORIGIN="https://testserver", HTTP_REFERER="https://testserver/login/",
    )  # fmt: skip

    assert response.status_code == 302  # Origin https://testserver is this host, seen as https


# --- no-store on every page that shows a secret ---------------------------------------------------


def test_the_page_that_shows_a_new_api_token_is_not_stored(owner_client):
    response = owner_client.post("/account/tokens/", {"name": "ci", "scopes": ["read"]}, follow=True)

    assert "twu_" in response.content.decode()
    assert "no-store" in response["Cache-Control"]


def test_the_page_that_shows_a_new_ingest_key_is_not_stored(owner_client):
    response = owner_client.post("/p/alpha/settings/keys/", {"name": "collector"})

    assert "tw_" in response.content.decode() and "no-store" in response["Cache-Control"]


# --- check --deploy under the compose configuration --------------------------------------------------


def _dotenv(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if re.match(r"^[A-Z][A-Z0-9_]*=", line))
    return {name: value for name, value in pairs}


def _interpolate(value: str, source: dict[str, str]) -> str:
    """Compose's ${NAME}, ${NAME:-default} and ${NAME:?message}, read from `source` (the shell and .env)."""

    def one(match: re.Match) -> str:
        name, op, arg = match.group(1), match.group(2) or "", match.group(3) or ""
        current = source.get(name, "")
        if op == ":?" and not current:
            raise AssertionError(f"compose would refuse to start: {name}: {arg}")
        return current if current or op != ":-" else arg

    return re.sub(r"\$\{([A-Z0-9_]+)(?:(:-|:\?)([^}]*))?\}", one, value)


def compose_environment(operator: dict[str, str]) -> dict[str, str]:
    """What the web container's environment is: .env (copied from .env.example, then edited by the
    operator), overridden by the `environment` of docker-compose.yml's x-app, interpolated."""
    dotenv = {**_dotenv(ROOT / ".env.example"), **operator}
    app = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["x-app"]["environment"]
    return {**dotenv, **{name: _interpolate(str(value), dotenv) for name, value in app.items()}}


def test_check_deploy_is_clean_under_the_compose_configuration():
    env = compose_environment({"SECRET_KEY": A_KEY, "ALLOWED_HOSTS": "toolwatch.example.com"})

    result = manage("check", "--deploy", "--fail-level", "WARNING", env={k: v for k, v in env.items() if v != ""})

    assert result.returncode == 0, result.stderr + result.stdout
    assert "System check identified no issues" in result.stdout


def test_compose_refuses_to_start_without_a_secret_key():
    with pytest.raises(AssertionError, match="SECRET_KEY: set SECRET_KEY in .env"):
        compose_environment({})
