import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from ingest.demo import demo_request
from ingest.models import Membership, Project, Span
from ingest.services import api_key_create, spans_ingest

DEMO_USER = "demo"
DEMO_PROJECT = "Demo agents"


class Command(BaseCommand):
    help = "First-run setup: a demo login and a demo project with an API key, printed once."

    @transaction.atomic
    def handle(self, *args, **options):
        User = get_user_model()
        project, project_created = Project.objects.get_or_create(slug="demo-agents", defaults={"name": DEMO_PROJECT})
        user = User.objects.filter(username=DEMO_USER).first()
        password = None
        if user is None:
            password = secrets.token_urlsafe(12)
            user = User.objects.create_superuser(DEMO_USER, email="", password=password)
        Membership.objects.get_or_create(project=project, user=user, defaults={"role": Membership.Role.OWNER})

        if not (project_created or password):
            self.stdout.write(
                f"Demo project '{project.name}' and login '{DEMO_USER}' exist (their secrets were printed on the "
                "first run). New key: python manage.py createproject 'Demo agents'; new password: "
                f"python manage.py changepassword {DEMO_USER}"
            )
            return
        _, key = api_key_create(project=project, name="quickstart")
        if not Span.objects.filter(project=project).exists():
            result = spans_ingest(project=project, request=demo_request(), limits=settings.INGEST_LIMITS)
            self.stdout.write(f"Loaded a demo history: {result.accepted} spans, {result.tool_calls} tool calls.")
        lines = [
            "Toolwatch is set up. These secrets are shown once:",
            f"  login     {DEMO_USER} / {password}" if password else f"  login     {DEMO_USER} (unchanged)",
            f"  project   {project.name} (slug {project.slug})",
            f"  API key   {key}",
            "  send spans: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:8000 "
            f"OTEL_EXPORTER_OTLP_HEADERS='Authorization=Bearer {key}'",
        ]
        self.stdout.write("\n".join(lines))
