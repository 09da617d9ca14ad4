"""The Celery app. Production brokers on Redis; the Quickstart uses the filesystem broker (no server)."""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("toolwatch")
app.config_from_object("django.conf:settings", namespace="CELERY")

if str(app.conf.broker_url).startswith("filesystem://"):
    # The filesystem transport needs its folders; both sides of the queue share them.
    folder = Path(__file__).resolve().parent.parent / "var" / "broker"
    for sub in ("queue", "processed"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    app.conf.broker_transport_options = {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        "store_processed": False,
    }

app.autodiscover_tasks()
