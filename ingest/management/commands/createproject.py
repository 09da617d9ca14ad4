from django.core.management.base import BaseCommand, CommandError
from django.utils.text import slugify

from ingest.models import Project
from ingest.services import api_key_create


class Command(BaseCommand):
    help = "Create a project (or reuse the one with that name) and print a new API key, once, on the last line."

    def add_arguments(self, parser):
        parser.add_argument("name", help="project name, e.g. 'Support agent'")
        parser.add_argument("--key-name", default="default", help="a label for the new key")

    def handle(self, *args, name: str, key_name: str, **options):
        name = name.strip()
        slug = slugify(name)
        if not slug:
            raise CommandError(f"project name {name!r} has no letters or digits to make a slug from")
        project, created = Project.objects.get_or_create(slug=slug, defaults={"name": name})
        _, plain = api_key_create(project=project, name=key_name)
        verb = "Created" if created else "Reusing"
        self.stdout.write(f"{verb} project '{project.name}' (slug {project.slug}).")
        self.stdout.write("New API key below, shown once; Toolwatch keeps only its hash:")
        self.stdout.write(plain)
