"""One delivery per (alert, channel, event), held by the database (docs/operations.md#crash-safety)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("dashboard", "0012_alert_opening_evidence")]

    operations = [
        migrations.AddConstraint(
            model_name="delivery",
            constraint=models.UniqueConstraint(
                condition=models.Q(("alert__isnull", False)),
                fields=("alert", "channel", "event"),
                name="delivery_once_per_event",
            ),
        ),
    ]
