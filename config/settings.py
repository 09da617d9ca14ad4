"""Toolwatch settings: one module, driven by the environment (see .env.example).

Every variable has an embedded default that runs the app on SQLite with no server
to install; production sets DATABASE_URL, SECRET_KEY, ALLOWED_HOSTS and a broker.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config import security
from config.env import env_bool, env_choice, env_int, env_list, env_origins, env_rate, env_str
from ingest.limits import DEFAULT_LIMITS, IngestLimits

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
# SECRET_KEY: decided at the end of this module, once every other variable has been judged.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
# Origins (scheme://host[:port]) allowed to POST forms besides this host itself: needed behind
# a proxy that changes the host or port (docs/deploy.md#behind-a-tls-proxy).
CSRF_TRUSTED_ORIGINS = env_origins("CSRF_TRUSTED_ORIGINS")

# --- HTTPS behind a TLS proxy (docs/deploy.md#behind-a-tls-proxy) ------------------------------
# TOOLWATCH_BEHIND_TLS_PROXY=1: a proxy terminates TLS, sets X-Forwarded-Proto and appends the
# client to X-Forwarded-For; it turns on the redirect to https and secure cookies (each may be
# set apart) and makes the proxy's header trusted. Off by default: the Quickstart serves plain http.
BEHIND_TLS_PROXY = env_bool("TOOLWATCH_BEHIND_TLS_PROXY", False)
if BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Proxies whose X-Forwarded-For entries are believed (login lockout and the API's anonymous throttle).
TOOLWATCH_TRUSTED_PROXIES = env_int("TOOLWATCH_TRUSTED_PROXIES", 1 if BEHIND_TLS_PROXY else 0, minimum=0)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", BEHIND_TLS_PROXY)
# Exporters, health checks and Prometheus speak plain http inside the network: a redirect
# would turn their POSTs into failures, so OTLP and the ops endpoints are never redirected.
SECURE_REDIRECT_EXEMPT = [r"^v1/", r"^healthz$", r"^readyz$", r"^metrics$"]
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", BEHIND_TLS_PROXY)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", BEHIND_TLS_PROXY)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "axes",  # login lockout (docs/deploy.md#login-lockout)
    "csp",  # Content-Security-Policy header (docs/deploy.md#content-security-policy)
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "ingest",
    "dashboard",
    "evals",
    "demo",  # the demo fleet, seed benchmark and scenarios: management commands only
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database(url: str) -> dict:
    try:
        config = dj_database_url.parse(url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0))
    except Exception as exc:  # dj-database-url raises ValueError/KeyError on unknown schemes
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} is not a usable database URL: {exc}") from None
    engine = config.get("ENGINE", "")
    if engine not in ("django.db.backends.sqlite3", "django.db.backends.postgresql"):
        raise ImproperlyConfigured(
            f"DATABASE_URL={url!r} names engine {engine!r}; Toolwatch supports sqlite:/// and postgres:// only"
        )
    if engine == "django.db.backends.sqlite3":
        config["CONN_MAX_AGE"] = 0
        # WAL lets the pages read while ingest writes; busy_timeout rides out short write locks.
        config["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000;",
            "transaction_mode": "IMMEDIATE",
        }
    else:
        config.setdefault("OPTIONS", {})
        # Fail over to a 503 quickly instead of hanging past the exporters' 10 s timeout.
        config["OPTIONS"].setdefault("connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT", 3, minimum=1))
        # JIT compiled the dashboard's rollup reads for ~300 ms, longer than they run (20-80 ms);
        # nothing here is an analytic query long enough to repay it.
        options = "-c jit=off"
        # A server with no per-request kill (granian, docker-compose.yml's web service) gives up on a
        # query that runs this long instead of holding one of its few threads; 0: no bound (the
        # Celery worker's rollups may run long). Ingest sets its own, shorter, in each write
        # transaction (INGEST_STATEMENT_TIMEOUT_MS), which wins there.
        statement_ms = env_int("DATABASE_STATEMENT_TIMEOUT_MS", 0, minimum=0)
        if statement_ms:
            options += f" -c statement_timeout={statement_ms}"
        config["OPTIONS"].setdefault("options", options)
        config["CONN_HEALTH_CHECKS"] = True
    return config


DATABASE_URL = env_str("DATABASE_URL", "")
if not DATABASE_URL:
    (BASE_DIR / "var").mkdir(exist_ok=True)
    DATABASE_URL = f"sqlite:///{BASE_DIR / 'var' / 'toolwatch.sqlite3'}"
DATABASES = {"default": _database(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "var" / "staticfiles")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every start without it
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "config.static_finders.PlotlyFinder",  # plotly.js from the plotly package itself
]
# Hashed names (whitenoise then sends them with a year's max-age and immutable) and
# gzip/brotli copies made by collectstatic: a chart page's 4.6 MB of plotly.js is fetched
# compressed once and then read from the browser's cache (docs/operations.md#static-files).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

LOGIN_URL = "/login/"

# The OTLP view reads the body itself, with its own limits (ingest.limits); Django's
# 2.5 MiB default would answer a 400 before the view runs.
DATA_UPLOAD_MAX_MEMORY_SIZE = None

INGEST_LIMITS = IngestLimits(
    max_body_bytes=env_int("TOOLWATCH_LIMIT_MAX_BODY_BYTES", DEFAULT_LIMITS.max_body_bytes, minimum=1024),
    max_decompressed_bytes=env_int(
        "TOOLWATCH_LIMIT_MAX_DECOMPRESSED_BYTES", DEFAULT_LIMITS.max_decompressed_bytes, minimum=1024
    ),
    max_spans_per_request=env_int(
        "TOOLWATCH_LIMIT_MAX_SPANS_PER_REQUEST", DEFAULT_LIMITS.max_spans_per_request, minimum=1
    ),
    max_log_records_per_request=env_int(
        "TOOLWATCH_LIMIT_MAX_LOG_RECORDS_PER_REQUEST", DEFAULT_LIMITS.max_log_records_per_request, minimum=1
    ),
    max_resources_per_request=env_int(
        "TOOLWATCH_LIMIT_MAX_RESOURCES_PER_REQUEST", DEFAULT_LIMITS.max_resources_per_request, minimum=1
    ),
    max_scopes_per_request=env_int("TOOLWATCH_LIMIT_MAX_SCOPES_PER_REQUEST", DEFAULT_LIMITS.max_scopes_per_request, minimum=1),
    max_metrics_per_request=env_int(
        "TOOLWATCH_LIMIT_MAX_METRICS_PER_REQUEST", DEFAULT_LIMITS.max_metrics_per_request, minimum=1
    ),
    max_attributes_per_span=env_int(
        "TOOLWATCH_LIMIT_MAX_ATTRIBUTES_PER_SPAN", DEFAULT_LIMITS.max_attributes_per_span, minimum=1
    ),
    max_attribute_value_chars=env_int(
        "TOOLWATCH_LIMIT_MAX_ATTRIBUTE_VALUE_CHARS", DEFAULT_LIMITS.max_attribute_value_chars, minimum=64
    ),
    max_attribute_bytes_per_span=env_int(
        "TOOLWATCH_LIMIT_MAX_ATTRIBUTE_BYTES_PER_SPAN", DEFAULT_LIMITS.max_attribute_bytes_per_span, minimum=1024
    ),
    max_attribute_bytes_per_request=env_int(
        "TOOLWATCH_LIMIT_MAX_ATTRIBUTE_BYTES_PER_REQUEST", DEFAULT_LIMITS.max_attribute_bytes_per_request, minimum=1024
    ),
    max_json_values=env_int("TOOLWATCH_LIMIT_MAX_JSON_VALUES", DEFAULT_LIMITS.max_json_values, minimum=1000),
)
# Seconds a 503 asks exporters to wait; keep it well under their 10 s export timeout.
INGEST_RETRY_AFTER_SECONDS = env_int("TOOLWATCH_INGEST_RETRY_AFTER", 2, minimum=1)
# Connections waiting for a gunicorn worker beyond which OTLP/HTTP answers 503 at once
# (ingest/admission.py); 0 = no bound.
INGEST_MAX_QUEUE = env_int("TOOLWATCH_INGEST_MAX_QUEUE", 16, minimum=0)
# Whether this server receives OTLP/HTTP. Compose's `web` service (granian: pages, API, feed, MCP)
# turns it off, so that spans go to the `otlp` service (gunicorn sync workers: one request a
# process, which the memory bound and the admission control above rely on); off, /v1/* is a 404
# naming that service (docs/operations.md#docker-compose-services).
INGEST_OTLP_HTTP = env_bool("TOOLWATCH_OTLP_HTTP", True)
# Per-key rate limit (ingest/throttle.py, docs/deploy.md#ingest-rate-limit): items (spans, log
# records, metric points) a second per API key, and the bucket's size; 0 = no limit.
INGEST_RATE = env_int("TOOLWATCH_INGEST_RATE", 0, minimum=0)
INGEST_BURST = env_int("TOOLWATCH_INGEST_BURST", max(INGEST_RATE * 10, 1), minimum=1)
# A write that takes longer is abandoned with a 503 (exporters time out at 10 s, then resend).
INGEST_STATEMENT_TIMEOUT_MS = env_int("TOOLWATCH_INGEST_STATEMENT_TIMEOUT_MS", 8000, minimum=100)
# Seconds the MCP server has to answer one request (dashboard/mcp/http.py), then a 503: under
# gunicorn's --timeout 30, so a caller is answered rather than its worker killed.
TOOLWATCH_MCP_REQUEST_TIMEOUT = env_int("TOOLWATCH_MCP_REQUEST_TIMEOUT", 25, minimum=1)
# The OTLP/gRPC receiver (manage.py grpcserver) listens here; 4317 is the OTLP/gRPC default port.
OTLP_GRPC_PORT = env_int("TOOLWATCH_OTLP_GRPC_PORT", 4317, minimum=0)
# Days of raw spans kept for a new project (rollups, alerts and eval snapshots stay).
DEFAULT_RETENTION_DAYS = env_int("TOOLWATCH_RETENTION_DAYS", 30, minimum=1)
# Alert webhooks and Slack URLs may not point at loopback, private or link-local hosts (SSRF):
# set this only where the receiver is meant to be on the internal network.
TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS = env_bool("TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS", False)
# Where people reach this app (e.g. https://toolwatch.example.com): alert notices link to the
# alert's page under it. Unset, they carry the page's path alone (dashboard/alerting/transports.py).
TOOLWATCH_BASE_URL = env_str("TOOLWATCH_BASE_URL", "").strip().rstrip("/")
# Bearer token of /metrics; unset = only loopback scrapes are answered (config/ops.py).
TOOLWATCH_METRICS_TOKEN = env_str("TOOLWATCH_METRICS_TOKEN", "")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Scripts and CI send "Authorization: Bearer <token>"; the pages' own fetches use the session.
        "dashboard.api.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # A token call also needs the token's scope for the operation (dashboard/api/auth.py, HasScope).
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated", "dashboard.api.auth.HasScope"],
    # drf-spectacular's AutoSchema, plus each operation's token scopes (dashboard/api/schema.py).
    "DEFAULT_SCHEMA_CLASS": "dashboard.api.schema.ScopedAutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
}
# --- API throttles (dashboard/throttles.py, docs/deploy.md#throttles) -------------------------
# 429 + Retry-After past a scope's rate, counted in the cache (TOOLWATCH_CACHE_URL). `agent` is
# for the agent-facing endpoints (MCP, tool-health feed) through ScopedRateThrottle.
REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] = ["dashboard.throttles.UserRateThrottle", "dashboard.throttles.AnonRateThrottle"]
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {
    "user": env_rate("TOOLWATCH_THROTTLE_USER", "600/min"),
    "anon": env_rate("TOOLWATCH_THROTTLE_ANON", "60/min"),
    "agent": env_rate("TOOLWATCH_THROTTLE_AGENT", "600/min"),
    "test_send": env_rate("TOOLWATCH_THROTTLE_TEST_SEND", "10/hour"),
}
# The anonymous throttle counts by address: behind proxies, the entry the nearest one appended.
REST_FRAMEWORK["NUM_PROXIES"] = TOOLWATCH_TRUSTED_PROXIES

SPECTACULAR_SETTINGS = {
    "TITLE": "Toolwatch API",
    "DESCRIPTION": "Tool-error observability and eval capture for AI agents.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Group operations by what follows /api/v1/projects/{project}/ (tools, alerts, eval-cases…), not "v1".
    "SCHEMA_PATH_PREFIX": r"/api/v1(/projects/\{project\})?",
    # Swagger UI and Redoc come from our own static files (the sidecar), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Alert kinds and channel kinds are both "kind": name the channel enum apart.
    "ENUM_NAME_OVERRIDES": {
        "AlertChannelKindEnum": "dashboard.models.AlertChannel.Kind",
        "AlertKindEnum": "dashboard.selectors.alerts.ALERT_KINDS",
        "AlertStatusEnum": "dashboard.selectors.alerts.STATUSES",
        "EvalCaseStatusEnum": "evals.models.EvalCase.Status",
        "EvalResultStatusEnum": "evals.models.EvalResult.Status",
    },
}

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_IGNORE_RESULT = CELERY_RESULT_BACKEND is None
# A task is acknowledged after it ran, so a worker killed mid-task leaves it for another;
# every task is idempotent, so running twice is harmless. A pool process killed under a
# task (the OOM killer, SIGKILL) has it requeued, not acknowledged; the fan-outs give each
# task an expiry, so a task that kills its process every time is not retried forever. The
# work itself is never only in the broker: the rollup queue, the alerts and the deliveries
# are rows that the periodic tasks pick up again (docs/operations.md#crash-safety).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # a worker holds no task it is not running
# Task modules beside their service, outside an app's tasks.py (autodiscovery reads only those).
CELERY_IMPORTS = ("dashboard.replay.tasks",)  # policy replay jobs (issue 17)
# Time limits (prefork pool; the solo pool cannot enforce them): past the soft one a task
# gets SoftTimeLimitExceeded and gives its work back; past the hard one its process is
# killed and replaced. Delivery tasks have their own, shorter (dashboard/alerting/tasks.py).
CELERY_TASK_SOFT_TIME_LIMIT = env_int("TOOLWATCH_TASK_SOFT_TIME_LIMIT", 900, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("TOOLWATCH_TASK_TIME_LIMIT", 1200, minimum=2)
if CELERY_TASK_SOFT_TIME_LIMIT >= CELERY_TASK_TIME_LIMIT:
    raise ImproperlyConfigured("TOOLWATCH_TASK_SOFT_TIME_LIMIT must be below TOOLWATCH_TASK_TIME_LIMIT")
# A rollup claim older than this is taken over on SQLite (on PostgreSQL at once: the
# project's advisory lock dies with its run). Longer than the hard limit, so a live run's
# claim is never taken.
ROLLUP_CLAIM_LEASE_SECONDS = env_int("TOOLWATCH_ROLLUP_LEASE_SECONDS", 1500, minimum=1)
if ROLLUP_CLAIM_LEASE_SECONDS <= CELERY_TASK_TIME_LIMIT:
    raise ImproperlyConfigured("TOOLWATCH_ROLLUP_LEASE_SECONDS must exceed TOOLWATCH_TASK_TIME_LIMIT")
# Redis redelivers a task not acknowledged within this: longer than any task may run.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": max(3600, 2 * CELERY_TASK_TIME_LIMIT)}
# Buckets changed more than 2 h after they ended are rolled up together every this many minutes.
ROLLUP_LATE_EVERY_MINUTES = env_int("TOOLWATCH_ROLLUP_LATE_EVERY_MINUTES", 10, minimum=1)
CELERY_BEAT_SCHEDULE_FILENAME = str(BASE_DIR / "var" / "celerybeat-schedule")

# Alert e-mail (SMTP); the defaults send nowhere useful, so set these to use e-mail channels.
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "toolwatch@localhost")
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL are exclusive; set one")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

# --- safe defaults: cache, login lockout, CSP (config/security.py, docs/deploy.md) -------------
# Throttle counts and ingest buckets live here: Redis shares them between processes.
CACHES = {"default": security.cache_config(env_str("TOOLWATCH_CACHE_URL", "").strip())}

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # refuses a locked-out login before the password is checked
    "django.contrib.auth.backends.ModelBackend",
]
# TOOLWATCH_LOGIN_FAILURE_LIMIT wrong passwords for one username, or from one address, lock
# further logins of it out for TOOLWATCH_LOGIN_LOCKOUT_MINUTES (docs/deploy.md#login-lockout).
AXES_FAILURE_LIMIT = env_int("TOOLWATCH_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = dt.timedelta(minutes=env_int("TOOLWATCH_LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
# An attempt during a lockout does not restart it: whoever fails on purpose must fail the whole
# limit again after each cool-off, and the account's owner gets back in when it ends (docs/deploy.md).
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "config.lockout.lockout_response"  # a page that says for how long, with Retry-After
AXES_CLIENT_IP_CALLABLE = "config.security.axes_client_ip"
AXES_DISABLE_ACCESS_LOG = True  # failures are what the lockout needs; successes are not kept
AXES_VERBOSE = False  # no banner on every manage.py command; lockouts are still logged

CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY_REPORT_ONLY = security.content_security_policy(
    env_choice("TOOLWATCH_CSP", "enforce", security.CSP_MODES), report_uri=env_str("TOOLWATCH_CSP_REPORT_URI", "").strip()
)

# With DEBUG off a real key is required (config/security.py); judged last, so that a bad value
# of another variable is reported first. The test suite runs on the production defaults with the
# built-in key: pytest (8.2+) sets PYTEST_VERSION for its run.
# SECRET_KEY_FILE names a file holding the key (a container secret); without either, the
# checkout's own key that the Quickstart made in var/secret-key, so `manage.py …` run by hand
# in a Quickstart checkout signs with the same key as its server.
SECRET_KEY = security.secret_key(
    env_str("SECRET_KEY", "").strip()
    or security.key_from_file(
        env_str("SECRET_KEY_FILE", "").strip(),
        default=env_str("TOOLWATCH_QUICKSTART_KEY_FILE", str(BASE_DIR / "var" / "secret-key")),
    ),
    debug=DEBUG,
    required=env_bool("TOOLWATCH_REQUIRE_SECRET_KEY", False),
    under_test="PYTEST_VERSION" in os.environ,
)
