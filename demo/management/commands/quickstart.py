import os
import secrets
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from demo import quickstart as demo
from ingest.models import ApiKey, Membership, Project, hash_api_key
from ingest.services import api_key_create, api_key_touch

DEMO_USER = "demo"
LIVE_KEY_NAME = "live demo traffic"


class Command(BaseCommand):
    help = (
        "First-run setup: a demo login and a demo project with an API key (printed once), and about "
        "30 days of demo traffic with an open drift alert. Re-running adds nothing twice."
    )

    def add_arguments(self, parser):
        parser.add_argument("--days", type=float, default=demo.DEMO_DAYS, help=f"days of history (default {demo.DEMO_DAYS})")
        parser.add_argument("--rate", type=float, default=demo.DEMO_RATE, help=f"tool calls per hour (default {demo.DEMO_RATE:g})")
        parser.add_argument("--no-history", action="store_true", help="set up the login and project only")
        parser.add_argument(
            "--live-key-file",
            help="write an API key for `simulate --live` here (mode 600), or keep the one already there if it is valid",
        )

    def handle(self, *args, days: float, rate: float, no_history: bool, live_key_file: str | None, **options):
        if days <= 0 or rate <= 0:
            raise CommandError("--days and --rate must be positive")
        project, password, key = self._setup()
        if not no_history:
            started = time.monotonic()
            load = demo.demo_history_load(project=project, now=timezone.now(), days=days, rate=rate)
            if load.stats.spans:
                # The history goes in in process, not over OTLP: it counts as the Quickstart key's use,
                # so ingest health does not call that key "never used" beside thousands of its spans.
                for quickstart_key in ApiKey.objects.filter(project=project, name="quickstart", revoked_at__isnull=True):
                    api_key_touch(key=quickstart_key, now=timezone.now())
                self.stdout.write(
                    f"Loaded demo history from {load.start:%Y-%m-%d %H:%M} UTC: {load.stats.spans} spans, "
                    f"{load.stats.tool_calls} tool calls in {time.monotonic() - started:.0f} s."
                )
            else:
                self.stdout.write("Demo history is up to date.")
            for alert in load.open_alerts:
                self.stdout.write(f"Open alert: {alert.kind} on {alert.tool}")
        if live_key_file:
            self._live_key(project, Path(live_key_file))
        if key is None:
            self.stdout.write(
                f"Demo project '{project.name}' and login '{DEMO_USER}' exist (their secrets were printed on the "
                "first run). New key: python manage.py createproject 'Demo agents'; new password: "
                f".venv/bin/python manage.py changepassword {DEMO_USER}"
            )
            return
        lines = [
            "Toolwatch is set up. These secrets are shown once:",
            f"  login     {DEMO_USER} / {password}" if password else f"  login     {DEMO_USER} (unchanged)",
            f"  project   {project.name} (slug {project.slug})",
            f"  API key   {key}",
            # HOST and PORT are the Quickstart's (scripts/dev.py serves on them).
            f"  send spans: OTEL_EXPORTER_OTLP_ENDPOINT=http://{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')} "
            f"OTEL_EXPORTER_OTLP_HEADERS='Authorization=Bearer {key}'",
        ]
        self.stdout.write("\n".join(lines))

    @transaction.atomic
    def _setup(self) -> tuple[Project, str | None, str | None]:
        """The demo project and login; (project, new password or None, new key or None)."""
        User = get_user_model()
        project, project_created = Project.objects.get_or_create(
            slug=demo.DEMO_SLUG, defaults={"name": demo.DEMO_NAME, "escalation_tools": demo.ESCALATION_TOOLS}
        )
        user = User.objects.filter(username=DEMO_USER).first()
        password = None
        if user is None:
            password = secrets.token_urlsafe(12)
            user = User.objects.create_superuser(DEMO_USER, email="", password=password)
        Membership.objects.get_or_create(project=project, user=user, defaults={"role": Membership.Role.OWNER})
        if not (project_created or password):
            return project, None, None
        _, key = api_key_create(project=project, name="quickstart")
        return project, password, key

    def _live_key(self, project: Project, path: Path) -> None:
        """A key for the local live sender, kept in a file only its owner can read."""
        if path.is_file():
            plain = path.read_text().strip()
            if ApiKey.objects.filter(project=project, hashed_key=hash_api_key(plain), revoked_at__isnull=True).exists():
                return
        _, plain = api_key_create(project=project, name=LIVE_KEY_NAME)
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(plain + "\n")
        os.chmod(path, 0o600)
        self.stdout.write(f"Wrote an API key for the live demo sender to {path}.")
