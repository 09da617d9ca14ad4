"""Toolwatch settings: one module, driven by the environment (see .env.example).

Every variable has an embedded default that runs the app on SQLite with no server
to install; production sets DATABASE_URL, SECRET_KEY, ALLOWED_HOSTS and a broker.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_list, env_str
from ingest.limits import DEFAULT_LIMITS, IngestLimits

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and env_bool("TOOLWATCH_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured("SECRET_KEY is not set")
    # Embedded default for the quickstart and tests only; production must set SECRET_KEY.
    SECRET_KEY = "toolwatch-insecure-development-key"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "ingest",
    "dashboard",
    "evals",
    "demo",  # the demo fleet, seed benchmark and scenarios: management commands only
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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
        config["OPTIONS"].setdefault("options", "-c jit=off")
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
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
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
    max_attributes_per_span=env_int(
        "TOOLWATCH_LIMIT_MAX_ATTRIBUTES_PER_SPAN", DEFAULT_LIMITS.max_attributes_per_span, minimum=1
    ),
    max_attribute_value_chars=env_int(
        "TOOLWATCH_LIMIT_MAX_ATTRIBUTE_VALUE_CHARS", DEFAULT_LIMITS.max_attribute_value_chars, minimum=64
    ),
)
# Seconds a 503 asks exporters to wait; keep it well under their 10 s export timeout.
INGEST_RETRY_AFTER_SECONDS = env_int("TOOLWATCH_INGEST_RETRY_AFTER", 2, minimum=1)
# A write that takes longer is abandoned with a 503 (exporters time out at 10 s, then resend).
INGEST_STATEMENT_TIMEOUT_MS = env_int("TOOLWATCH_INGEST_STATEMENT_TIMEOUT_MS", 8000, minimum=100)
# The OTLP/gRPC receiver (manage.py grpcserver) listens here; 4317 is the OTLP/gRPC default port.
OTLP_GRPC_PORT = env_int("TOOLWATCH_OTLP_GRPC_PORT", 4317, minimum=0)
# Days of raw spans kept for a new project (rollups, alerts and eval snapshots stay).
DEFAULT_RETENTION_DAYS = env_int("TOOLWATCH_RETENTION_DAYS", 30, minimum=1)
# Alert webhooks and Slack URLs may not point at loopback, private or link-local hosts (SSRF):
# set this only where the receiver is meant to be on the internal network.
TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS = env_bool("TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS", False)
# Bearer token of /metrics; unset = only loopback scrapes are answered (config/ops.py).
TOOLWATCH_METRICS_TOKEN = env_str("TOOLWATCH_METRICS_TOKEN", "")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Scripts and CI send "Authorization: Bearer <token>"; the pages' own fetches use the session.
        "dashboard.api.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
}
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
# every task is idempotent, so running twice is harmless.
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
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
