"""The operations surface: /healthz, /readyz and /metrics (see docs/operations.md).

They belong to no app: no login, no session, no CSRF. /metrics is computed at scrape
time from the database (a few aggregate queries), not from in-process counters: gunicorn
runs several worker processes, and each would only see its own share of the traffic.
"""

from __future__ import annotations

import hmac
import ipaddress
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Min, Q, Sum
from django.http import HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from config.celery import app as celery_app
from dashboard.models import Alert, Delivery
from ingest.models import ChangedBucket, IngestStat

CHECK_TIMEOUT_SECONDS = 2
LOCAL_BROKERS = ("memory", "filesystem")


@csrf_exempt
@never_cache
@require_GET
def healthz(request):
    """The process answers; touches nothing else."""
    return JsonResponse({"status": "ok"})


def check_database() -> dict:
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SET LOCAL statement_timeout = %s", [CHECK_TIMEOUT_SECONDS * 1000])
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready"
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ok": True}


def check_broker() -> dict:
    url = str(celery_app.conf.broker_url or "")
    scheme = url.split("://", 1)[0]
    if scheme in LOCAL_BROKERS:
        # In-process / on-disk transports of the Quickstart and tests: nothing to reach.
        return {"ok": True, "transport": scheme, "note": "local broker, no server to check"}
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=0, timeout=CHECK_TIMEOUT_SECONDS)
    except Exception as exc:  # noqa: BLE001 - kombu raises many kinds; any means "not ready"
        return {"ok": False, "transport": scheme, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ok": True, "transport": scheme}


@csrf_exempt
@never_cache
@require_GET
def readyz(request):
    checks = {"database": check_database(), "broker": check_broker()}
    failed = [name for name, result in checks.items() if not result["ok"]]
    body = {"status": "ok" if not failed else "unavailable", "failed": failed, "checks": checks}
    return JsonResponse(body, status=200 if not failed else 503)


# --- /metrics -------------------------------------------------------------------------------


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _metrics_access(request) -> HttpResponse | None:
    """None when the scrape may proceed, else the refusal."""
    token = getattr(settings, "TOOLWATCH_METRICS_TOKEN", "")
    if not token:
        if _is_loopback(request.META.get("REMOTE_ADDR", "")):
            return None
        return HttpResponse("metrics: set TOOLWATCH_METRICS_TOKEN to scrape from off-host\n", status=403)
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return None
    response = HttpResponse("metrics: bearer token required\n", status=401)
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


class DatabaseCollector:
    """Gauges computed from the database at each scrape."""

    def collect(self):
        now = timezone.now()
        since = now - timedelta(hours=1)
        # The hour buckets overlapping the last 60 minutes: the current and the previous one.
        first_hour = since.replace(minute=0, second=0, microsecond=0)

        ingest = GaugeMetricFamily(
            "toolwatch_ingest_items_last_hour",
            "Spans/log records accepted, duplicate or rejected, and requests refused, "
            "in the current and previous hour buckets (ingest.IngestStat)",
            labels=["project", "outcome", "reason"],
        )
        rows = (
            IngestStat.objects.filter(hour__gte=first_hour)
            .exclude(outcome=IngestStat.Outcome.CUT)  # values cut inside stored spans are not arrivals
            .values("project__slug", "outcome", "reason")
            .annotate(total=Sum("count"))
            .order_by()
        )
        for row in rows:
            ingest.add_metric([row["project__slug"], row["outcome"], row["reason"]], float(row["total"] or 0))
        yield ingest

        queue = ChangedBucket.objects.aggregate(depth=Count("id"), oldest=Min("bucket_start"))
        yield GaugeMetricFamily(
            "toolwatch_rollup_queue_depth", "Changed 5-minute buckets waiting for the rollup job", value=queue["depth"]
        )
        lag = (now - queue["oldest"]).total_seconds() if queue["oldest"] else 0.0
        yield GaugeMetricFamily(
            "toolwatch_rollup_lag_seconds",
            "Age of the oldest queued changed bucket (now - bucket_start; 0 when the queue is empty)",
            value=max(lag, 0.0),
        )

        failed = (
            Delivery.objects.filter(status=Delivery.Status.FAILED)
            .filter(Q(created_at__gte=since) | Q(attempt_log__at__gte=since))
            .values("id")
            .distinct()
            .count()
        )
        yield GaugeMetricFamily(
            "toolwatch_alert_deliveries_failed_last_hour",
            "Alert deliveries in status failed, created or attempted in the last hour",
            value=failed,
        )

        alerts = GaugeMetricFamily(
            "toolwatch_alerts_open", "Alerts open or acknowledged", labels=["project", "status"]
        )
        for row in (
            Alert.objects.filter(status__in=Alert.OPEN_STATUSES)
            .values("project__slug", "status")
            .annotate(n=Count("id"))
            .order_by()
        ):
            alerts.add_metric([row["project__slug"], row["status"]], row["n"])
        yield alerts


@csrf_exempt
@never_cache
@require_GET
def metrics(request):
    refusal = _metrics_access(request)
    if refusal is not None:
        return refusal
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
