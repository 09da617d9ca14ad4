"""Safe defaults, decided from the environment by config/settings.py (docs/deploy.md has the table).

Plain functions of their inputs, so each rule is tested without starting Django: the
SECRET_KEY rule, the content security policy, the cache, and the client address that the
login lockout and the API's anonymous throttle count by.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Public (it is in this repository): good for DEBUG and the test suite only.
DEVELOPMENT_SECRET_KEY = "toolwatch-insecure-development-key"
GENERATE_KEY_HINT = "set SECRET_KEY; generate one with: python -c 'import secrets; print(secrets.token_urlsafe(50))'"


def secret_key(configured: str, *, debug: bool, required: bool, under_test: bool) -> str:
    """The SECRET_KEY to use: the configured one; the built-in development key only with DEBUG
    on (or under the test suite); otherwise ImproperlyConfigured, so production never signs
    sessions and password-reset links with a key anyone can read."""
    if configured and configured != DEVELOPMENT_SECRET_KEY:
        return configured
    what = "is the built-in development key" if configured else "is not set"
    if required:
        raise ImproperlyConfigured(f"SECRET_KEY {what} (TOOLWATCH_REQUIRE_SECRET_KEY=1); {GENERATE_KEY_HINT}")
    if not (debug or under_test):
        raise ImproperlyConfigured(
            f"SECRET_KEY {what} and DEBUG is off: Toolwatch does not sign sessions with a public key; "
            f"{GENERATE_KEY_HINT}"
        )
    return DEVELOPMENT_SECRET_KEY


def key_from_file(path: str, *, default) -> str:
    """The key in the file `path` names (ImproperlyConfigured when it cannot be read), else the
    one in `default` if that file exists, else ""."""
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"SECRET_KEY_FILE={path!r} cannot be read: {exc.strerror}") from None
    try:
        return Path(default).read_text().strip()
    except OSError:
        return ""


SELF = "'self'"

# Every page loads only our own static files: plotly.js and our scripts by URL, no inline
# script (figures travel as json_script data blocks, which are not executed), no eval.
# Styles allow 'unsafe-inline': plotly.js writes its rules into a <style> element at load, and
# the waterfall and meters size their bars with style attributes; CSS cannot run script.
CSP_DIRECTIVES = {
    "default-src": [SELF],
    "script-src": [SELF],
    "style-src": [SELF, "'unsafe-inline'"],
    "img-src": [SELF, "data:"],  # Swagger UI's icons are data: URLs
    "font-src": [SELF],
    "connect-src": [SELF],
    "worker-src": [SELF, "blob:"],  # Redoc searches in a worker it makes from a blob
    "object-src": ["'none'"],
    "base-uri": [SELF],
    "form-action": [SELF],
    "frame-ancestors": ["'none'"],
}
CSP_MODES = ("enforce", "report-only", "off")


def content_security_policy(mode: str, *, report_uri: str = "") -> tuple[dict | None, dict | None]:
    """(CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY_REPORT_ONLY) for django-csp 4."""
    if mode not in CSP_MODES:
        raise ImproperlyConfigured(f"TOOLWATCH_CSP={mode!r} is not one of {', '.join(CSP_MODES)}")
    if mode == "off":
        return None, None
    directives = {name: list(sources) for name, sources in CSP_DIRECTIVES.items()}
    if report_uri:
        directives["report-uri"] = report_uri
    policy = {"DIRECTIVES": directives}
    return (policy, None) if mode == "enforce" else (None, policy)


CACHE_SCHEMES = ("redis", "rediss", "unix", "locmem")


def cache_config(url: str) -> dict:
    """CACHES["default"] from TOOLWATCH_CACHE_URL: Redis (shared by every process: throttles
    count across gunicorn workers and gRPC worker processes), else memory of this process."""
    if not url or url.startswith("locmem://"):
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "toolwatch"}
    scheme = url.partition("://")[0]
    if "://" not in url or scheme not in CACHE_SCHEMES:
        raise ImproperlyConfigured(
            f"TOOLWATCH_CACHE_URL={url!r} is not a cache URL; use redis://host:6379/1, rediss://…, unix://… or locmem://"
        )
    return {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": url,
        # A throttle must not hang a request when Redis is slow or gone (ingest fails open).
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }


def client_address(meta: dict, *, trusted_proxies: int) -> str:
    """The client's address: REMOTE_ADDR, or behind `trusted_proxies` proxies the entry of
    X-Forwarded-For that the nearest of them appended (entries further left are whatever the
    client sent, and could be forged to dodge a lockout). As DRF's NUM_PROXIES reads it."""
    remote = meta.get("REMOTE_ADDR", "")
    forwarded = meta.get("HTTP_X_FORWARDED_FOR", "")
    if trusted_proxies <= 0 or not forwarded:
        return remote
    entries = [entry.strip() for entry in forwarded.split(",") if entry.strip()]
    if not entries:
        return remote
    return entries[-min(trusted_proxies, len(entries))]


def axes_client_ip(request) -> str:
    """AXES_CLIENT_IP_CALLABLE: the address the login lockout counts failures by."""
    return client_address(request.META, trusted_proxies=settings.TOOLWATCH_TRUSTED_PROXIES)
