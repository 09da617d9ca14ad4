"""Personal token scopes (issue 14 item 8): ApiToken.scopes, and every existing token gets all three.

Existing tokens get read, runs and admin: before scopes a token could do everything its user's
role allows, and scripts and CI jobs using one must keep working after the upgrade. Each user sees
their tokens' scopes on /account/tokens/ and can replace a broad one with a narrower one there.
"""

from django.db import migrations, models

import dashboard.models

# Written out rather than imported: a migration keeps the meaning it had when it was written.
ALL_SCOPES = ["read", "runs", "admin"]


def grant_all_scopes(apps, schema_editor):
    apps.get_model("dashboard", "ApiToken").objects.update(scopes=ALL_SCOPES)


class Migration(migrations.Migration):
    dependencies = [('dashboard', '0007_rolled_up_buckets')]

    operations = [
        migrations.AddField(
            model_name='apitoken',
            name='scopes',
            field=models.JSONField(default=list, help_text="What the token may do: some of read, runs, admin. The user's role still applies on top.", validators=[dashboard.models.validate_api_token_scopes]),
        ),
        # Backwards: the column is dropped by the AddField's reverse; nothing to undo here.
        migrations.RunPython(grant_all_scopes, migrations.RunPython.noop),
    ]
