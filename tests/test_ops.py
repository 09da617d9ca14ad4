"""The operations surface: /healthz, /readyz, /metrics (config/ops.py)."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from dashboard.models import Alert, AlertChannel, Delivery
from ingest.models import ChangedBucket, IngestStat
from tests.factories import make_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    return Client(enforce_csrf_checks=True)


def test_healthz_answers_without_login(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "sessionid" not in response.cookies


def test_readyz_ok_with_database_up_and_memory_broker(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok" and body["failed"] == []
    assert body["checks"]["broker"]["transport"] == "memory"


def test_readyz_503_names_the_database_when_it_fails(client):
    with mock.patch("config.ops.connection") as conn:
        conn.vendor = "sqlite"
        conn.cursor.side_effect = RuntimeError("database is down")
        response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["failed"] == ["database"]
    assert "database is down" in body["checks"]["database"]["error"]


def test_readyz_503_names_an_unreachable_broker(client):
    from config.celery import app

    original = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    try:
        response = client.get("/readyz")
    finally:
        app.conf.broker_url = original
    assert response.status_code == 503
    assert response.json()["failed"] == ["broker"]


def _families(response) -> dict:
    return {f.name: f for f in text_string_to_metric_families(response.content.decode())}


def test_metrics_from_loopback_without_token_holds_the_fixtures(client):
    now = timezone.now()
    project = make_project(slug="ops-proj")
    hour = now.replace(minute=0, second=0, microsecond=0)
    IngestStat.objects.create(project=project, hour=hour, outcome="accepted", reason="", count=40)
    IngestStat.objects.create(project=project, hour=hour, outcome="refused", reason="bad_key", count=3)
    IngestStat.objects.create(project=project, hour=hour - timedelta(hours=5), outcome="accepted", count=999)
    ChangedBucket.objects.create(project=project, bucket_start=now - timedelta(minutes=10))
    ChangedBucket.objects.create(project=project, bucket_start=now - timedelta(minutes=5))
    channel = AlertChannel.objects.create(project=project, kind="webhook", name="hook", target="https://x.invalid/")
    alert = Alert.objects.create(project=project, tool="search", kind="error_rate", opened_at=now, last_seen_at=now)
    Delivery.objects.create(alert=alert, channel=channel, event="opened", status="failed")
    Delivery.objects.create(alert=alert, channel=channel, event="resolved", status="sent")

    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    families = _families(response)

    ingest = {
        (s.labels["outcome"], s.labels["reason"]): s.value
        for s in families["toolwatch_ingest_items_last_hour"].samples
        if s.labels["project"] == "ops-proj"
    }
    assert ingest == {("accepted", ""): 40.0, ("refused", "bad_key"): 3.0}
    assert families["toolwatch_rollup_queue_depth"].samples[0].value == 2
    assert 590 <= families["toolwatch_rollup_lag_seconds"].samples[0].value <= 700
    assert families["toolwatch_alert_deliveries_failed_last_hour"].samples[0].value == 1
    (open_sample,) = families["toolwatch_alerts_open"].samples
    assert open_sample.labels == {"project": "ops-proj", "status": "open"} and open_sample.value == 1


def test_metrics_refuses_off_host_without_token(client):
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.5").status_code == 403


@override_settings(TOOLWATCH_METRICS_TOKEN="s3cret")
def test_metrics_with_token_set(client):
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong", REMOTE_ADDR="127.0.0.1").status_code == 401
    ok = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret", REMOTE_ADDR="10.0.0.5")
    assert ok.status_code == 200
    assert "toolwatch_rollup_queue_depth" in _families(ok)
