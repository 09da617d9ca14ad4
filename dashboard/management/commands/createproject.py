from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils.text import slugify

from dashboard import project_settings as ps
from dashboard.management.projects import validation_message
from ingest.models import Membership, Project
from ingest.services import api_key_create


class Command(BaseCommand):
    help = "Create a project (or reuse the one with that name) and print a new API key, once, on the last line."

    def add_arguments(self, parser):
        parser.add_argument("name", help="project name, e.g. 'Support agent'")
        parser.add_argument("--key-name", default="default", help="a label for the new key")
        parser.add_argument("--owner", help="a username: made an owner of the project (who then sees it in the pages)")

    def handle(self, *args, name: str, key_name: str, owner: str | None, **options):
        name = name.strip()
        slug = slugify(name)
        if not slug:
            raise CommandError(f"project name {name!r} has no letters or digits to make a slug from")
        if owner and not get_user_model().objects.filter(username=owner).exists():
            raise CommandError(f"no user is called {owner!r}; create it first (manage.py adduser)")
        project, created = Project.objects.get_or_create(slug=slug, defaults={"name": name})
        if owner:
            membership = Membership.objects.filter(project=project, user__username=owner).first()
            try:
                if membership is None:
                    ps.member_add(project=project, username=owner, role=Membership.Role.OWNER)
                else:
                    ps.member_set_role(project=project, membership=membership, role=Membership.Role.OWNER)
            except ValidationError as exc:
                raise CommandError(validation_message(exc)) from None
        _, plain = api_key_create(project=project, name=key_name)
        verb = "Created" if created else "Reusing"
        self.stdout.write(f"{verb} project '{project.name}' (slug {project.slug}).")
        if owner:
            self.stdout.write(f"Owner: {owner}.")
        elif not Membership.objects.filter(project=project).exists():
            self.stderr.write("The project has no members: only superusers see it (add one with --owner or addmember).")
        self.stdout.write("New API key below, shown once; Toolwatch keeps only its hash:")
        self.stdout.write(plain)
