"""Alert.opening_evidence (issue 15): the evidence of the evaluation that opened an alert, kept as it was."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [('dashboard', '0011_policy_replay')]

    operations = [
        migrations.AddField(
            model_name='alert',
            name='opening_evidence',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
