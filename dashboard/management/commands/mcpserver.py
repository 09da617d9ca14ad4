"""`manage.py mcpserver`: Toolwatch's MCP server over stdio, for an IDE on the same machine (docs/mcp.md).

Who calls, in this order: `--token-file FILE` (a personal API token, the file's first line),
the TOOLWATCH_TOKEN environment variable, or `--user USERNAME` (a local user with no token:
every scope, the user's role still applies; for a developer on their own database). The
token is checked once, at start: a revoked one stops the server with a message on stderr.
stdout carries the protocol alone; everything the command says goes to stderr.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from mcp.server.stdio import stdio_server

from dashboard import tokens
from dashboard.mcp.server import CURRENT_SESSION, Session, server
from dashboard.mcp.tools import Principal

TOKEN_ENV = "TOOLWATCH_TOKEN"


class Command(BaseCommand):
    help = "Serve Toolwatch's MCP tools over stdio (for Claude Code, Cursor and other local MCP hosts)."

    def add_arguments(self, parser):
        who = parser.add_mutually_exclusive_group()
        who.add_argument("--token-file", help=f"a file holding a personal API token (twu_…); else ${TOKEN_ENV}")
        who.add_argument("--user", help="serve as this local user, without a token (every scope; the role applies)")

    def handle(self, *args, token_file: str | None, user: str | None, **options):
        principal = self._principal(token_file, user)
        sys.stderr.write(f"Toolwatch MCP server on stdio as {principal.user.get_username()}\n")
        session = Session(principal, stdio=True)

        async def serve() -> None:
            CURRENT_SESSION.set(session)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

        anyio.run(serve)

    def _principal(self, token_file: str | None, username: str | None) -> Principal:
        if username:
            found = get_user_model().objects.filter(username=username, is_active=True).first()
            if found is None:
                raise CommandError(f"no active user {username!r}")
            return Principal(user=found)
        if token_file:
            try:
                lines = Path(token_file).read_text().splitlines()
            except OSError as exc:
                raise CommandError(f"cannot read the token file: {exc}") from None
            raw = lines[0].strip() if lines else ""
        else:
            raw = os.environ.get(TOKEN_ENV, "").strip()
        if not raw:
            raise CommandError(f"give --token-file FILE, set {TOKEN_ENV}, or --user USERNAME")
        try:
            token = tokens.api_token_authenticate(raw)
        except tokens.TokenError as exc:
            raise CommandError(str(exc)) from None
        return Principal(user=token.user, token=token)
