from django.core.management.base import BaseCommand, CommandError

from dashboard import tokens
from dashboard.management.projects import user_named
from dashboard.models import ApiToken


class Command(BaseCommand):
    help = "Revoke a user's personal API token by its visible prefix (twu_ and the next 8 characters)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("prefix", help="the token's visible prefix, e.g. twu_AbCdEfGh (/account/tokens/ lists them)")

    def handle(self, *args, username: str, prefix: str, **options):
        user = user_named(username)
        found = list(ApiToken.objects.filter(user=user, prefix=prefix.strip().rstrip("…")))
        if not found:
            raise CommandError(f"{user.username} has no token with the prefix {prefix!r}")
        if len(found) > 1:
            raise CommandError(f"{len(found)} tokens of {user.username} share the prefix {prefix!r}; revoke them on /account/tokens/")
        token = tokens.api_token_revoke(user=user, token_id=found[0].pk)
        self.stdout.write(f"Revoked token {token.prefix}… ({token.name}) of {user.username}: requests with it now get a 401.")
