"""The Celery app. Production brokers on Redis; the Quickstart uses the filesystem broker (no server)."""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("toolwatch")
app.config_from_object("django.conf:settings", namespace="CELERY")

if str(app.conf.broker_url).startswith("filesystem://"):
    # The filesystem transport needs its folders; both sides of the queue share them.
    folder = Path(__file__).resolve().parent.parent / "var" / "broker"
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    app.conf.broker_transport_options = {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        "control_folder": str(folder / "control"),
        "store_processed": False,
    }

app.autodiscover_tasks()

# The whole schedule, in one place. `expires` drops a run that waited too long in the
# queue: the next one does the same work on fresher data.
app.conf.beat_schedule = {
    # Rollups trail ingest by about a minute; each run recomputes the hours that changed.
    "refresh-rollups": {
        "task": "dashboard.tasks.refresh_rollups",
        "schedule": crontab(),
        "options": {"expires": 50},
    },
    # Drift detectors judge the quarter hour that just closed, once its rollups have settled
    # (off the hour the recent windows come from the 5-minute rollups; docs/drift.md).
    "evaluate-drift": {
        "task": "dashboard.tasks.evaluate_drift",
        "schedule": crontab(minute="3,18,33,48"),
        "options": {"expires": 840},
    },
    # Alert deliveries whose task was lost, or whose retry (backoff) is due.
    "send-due-deliveries": {
        "task": "dashboard.alerting.tasks.send_due_deliveries",
        "schedule": crontab(),
        "options": {"expires": 50},
    },
    # Day partitions exist a week before any span needs them (ingest also makes them on demand).
    "create-partitions-ahead": {
        "task": "ingest.tasks.create_partitions_ahead",
        "schedule": crontab(minute=7),
        "options": {"expires": 3000},
    },
    # Raw spans past each project's retention go (old partitions dropped whole); rollups stay.
    "apply-retention": {
        "task": "ingest.tasks.apply_retention",
        "schedule": crontab(minute=23, hour=3),
        "options": {"expires": 6 * 3600},
    },
    # 5-minute rollups serve only the last few days; older ones go (hourly and daily rows stay).
    "prune-fine-rollups": {
        "task": "dashboard.tasks.prune_fine_rollups",
        "schedule": crontab(minute=41, hour=3),
        "options": {"expires": 6 * 3600},
    },
}
