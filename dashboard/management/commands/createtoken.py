import datetime as dt

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from dashboard import tokens
from dashboard.management.projects import user_named


class Command(BaseCommand):
    help = (
        "Create a personal API token for a user, with the scopes given, and print it once, on the last line. "
        "The eval runner needs only --scope runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", required=True, help="what will use it, e.g. 'CI eval runner'")
        parser.add_argument(
            "--scope", action="append", required=True, dest="scopes",
            help=f"one of {', '.join(tokens.SCOPES)}; repeat it (or separate by commas) for more",
        )  # fmt: skip
        parser.add_argument("--expires-in-days", type=int, help="default: never")

    def handle(self, *args, username: str, name: str, scopes: list[str], expires_in_days: int | None, **options):
        user = user_named(username)
        if expires_in_days is not None and expires_in_days < 1:
            raise CommandError("--expires-in-days must be 1 or more")
        expires_at = timezone.now() + dt.timedelta(days=expires_in_days) if expires_in_days else None
        try:
            token, plain = tokens.api_token_create(
                user=user, name=name, scopes=" ".join(scopes), expires_at=expires_at
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        expiry = f"expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else "never expires"
        self.stdout.write(
            f"Token '{token.name}' ({token.prefix}…) for {user.username}: scopes {', '.join(token.scopes)}; {expiry}."
        )
        self.stdout.write("New token below, shown once; Toolwatch keeps only its hash:")
        self.stdout.write(plain)
