import getpass
import os
import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from dashboard.management.projects import validation_message

# Read when neither --password-file nor --no-password is given; never take a password as an argument
# (it would stay in the shell's history and in `ps` for every user of the machine to read).
PASSWORD_ENV = "TOOLWATCH_PASSWORD"


class Command(BaseCommand):
    help = (
        f"Create a user. The password comes from --password-file, else ${PASSWORD_ENV}, else a prompt; "
        "--no-password makes a user that cannot log in to the pages (e.g. for a CI token)."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # No abbreviations: `--password secret` must be refused, not read as `--password-file secret`.
        return super().create_parser(prog_name, subcommand, allow_abbrev=False, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--email", default="", help="the user's e-mail address")
        parser.add_argument("--superuser", action="store_true", help="sees and may change every project")
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--password-file", help="read the password from the first line of this file ('-': stdin)")
        source.add_argument("--no-password", action="store_true", help="no password: the user cannot log in")

    def handle(self, *args, username: str, email: str, superuser: bool, password_file: str | None,
               no_password: bool, **options):  # fmt: skip
        user = get_user_model()(
            username=username.strip(), email=email.strip(), is_staff=superuser, is_superuser=superuser
        )
        try:
            user.full_clean(exclude=["password"])
        except ValidationError as exc:
            raise CommandError(validation_message(exc)) from None
        if no_password:
            user.set_unusable_password()
            how = "no password (it cannot log in to the pages; give it a token with manage.py createtoken)"
        else:
            password, how = self.password(password_file)
            try:
                validate_password(password, user)
            except ValidationError as exc:
                raise CommandError("password: " + validation_message(exc)) from None
            user.set_password(password)
        user.save()
        kind = "superuser" if superuser else "user"
        self.stdout.write(f"Created {kind} {user.username}, with {how}.")

    def password(self, password_file: str | None) -> tuple[str, str]:
        if password_file:
            try:
                text = sys.stdin.read() if password_file == "-" else Path(password_file).read_text()
            except OSError as exc:
                raise CommandError(f"cannot read the password file: {exc}") from None
            lines = text.splitlines()
            if not lines or not lines[0]:
                raise CommandError(f"the password file {password_file!r} is empty: the password is its first line")
            return lines[0], "the password from the file"
        if os.environ.get(PASSWORD_ENV):
            return os.environ[PASSWORD_ENV], f"the password from ${PASSWORD_ENV}"
        if not sys.stdin.isatty():
            raise CommandError(
                f"no password: give --password-file FILE, set ${PASSWORD_ENV}, run it in a terminal to be asked, "
                "or give --no-password"
            )
        password = getpass.getpass("Password: ")
        if password != getpass.getpass("Password (again): "):
            raise CommandError("the two passwords differ; nothing was created")
        return password, "the password typed"
