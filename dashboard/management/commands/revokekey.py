from django.core.management.base import BaseCommand, CommandError

from dashboard.management.projects import projects_named
from ingest.models import ApiKey
from ingest.services import api_key_revoke


class Command(BaseCommand):
    help = "Revoke a project's ingest key by its visible prefix (tw_ and the next 8 characters)."

    def add_arguments(self, parser):
        parser.add_argument("slug", help="the project's slug")
        parser.add_argument("prefix", help="the key's visible prefix, e.g. tw_AbCdEfGh (ingest health lists them)")

    def handle(self, *args, slug: str, prefix: str, **options):
        project = projects_named(slug).get()
        keys = list(ApiKey.objects.filter(project=project, prefix=prefix.strip().rstrip("…")))
        if not keys:
            raise CommandError(f"project {project.slug} has no key with the prefix {prefix!r}")
        if len(keys) > 1:
            raise CommandError(f"{len(keys)} keys of {project.slug} share the prefix {prefix!r}; revoke them in the settings page")
        api_key_revoke(key=keys[0])
        self.stdout.write(f"Revoked key {keys[0].prefix}… ({keys[0].name}) of {project.slug}: it is refused from now on.")
