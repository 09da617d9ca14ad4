from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from dashboard import project_settings as ps
from dashboard.management.projects import membership_named, projects_named, validation_message


class Command(BaseCommand):
    help = "Remove a member from a project (never its last owner); the user and their tokens stay."

    def add_arguments(self, parser):
        parser.add_argument("slug", help="the project's slug")
        parser.add_argument("username")

    def handle(self, *args, slug: str, username: str, **options):
        project = projects_named(slug).get()
        membership = membership_named(project, username)
        try:
            ps.member_remove(project=project, membership=membership)
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from None
        self.stdout.write(
            f"Removed {membership.user.username} from {project.slug}: "
            "neither they nor their tokens reach it any more."
        )
