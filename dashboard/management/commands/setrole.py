from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from dashboard import project_settings as ps
from dashboard.management.projects import membership_named, projects_named, validation_message
from ingest.models import Membership


class Command(BaseCommand):
    help = "Change a project member's role (member or owner); the last owner stays an owner."

    def add_arguments(self, parser):
        parser.add_argument("slug", help="the project's slug")
        parser.add_argument("username")
        parser.add_argument("role", choices=Membership.Role.values, help="member or owner")

    def handle(self, *args, slug: str, username: str, role: str, **options):
        project = projects_named(slug).get()
        membership = membership_named(project, username)
        try:
            ps.member_set_role(project=project, membership=membership, role=role)
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from None
        self.stdout.write(f"{membership.user.username}'s role in {project.slug} is now {membership.role}.")
