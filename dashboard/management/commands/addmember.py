from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from dashboard import project_settings as ps
from dashboard.management.projects import projects_named, validation_message
from ingest.models import Membership


class Command(BaseCommand):
    help = "Add an existing user to a project as a member or an owner."

    def add_arguments(self, parser):
        parser.add_argument("slug", help="the project's slug")
        parser.add_argument("username")
        parser.add_argument("--role", default=Membership.Role.MEMBER, help="member (default) or owner")

    def handle(self, *args, slug: str, username: str, role: str, **options):
        project = projects_named(slug).get()
        try:
            membership = ps.member_add(project=project, username=username, role=role)
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from None
        self.stdout.write(f"{membership.user.username} is now a {membership.role} of {project.slug}.")
