"""The Celery app with a beat schedule in seconds instead of minutes, for tests/integration:
`celery -A tests.integration.fast_beat beat`. The tasks are the production ones, by name."""

from config.celery import app

app.conf.beat_schedule = {
    "refresh-rollups": {"task": "dashboard.tasks.refresh_rollups", "schedule": 1.0, "options": {"expires": 5}},
    "send-due-deliveries": {
        "task": "dashboard.alerting.tasks.send_due_deliveries", "schedule": 1.0, "options": {"expires": 5},
    },
    "evaluate-drift": {"task": "dashboard.tasks.evaluate_drift", "schedule": 2.0, "options": {"expires": 10}},
}
