"""The MCP server over stdio: the SDK's client spawns the real `manage.py mcpserver` process."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from django.db import connection
from mcp import Client, StdioServerParameters

from dashboard import tokens
from dashboard.models import AgentAccess
from tests.dashboard.mcp.conftest import FAILED_SPAN, run_async, token_for

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def database_url(tmp_path):
    """A URL of the test database for another process: PostgreSQL's own, or a copy of SQLite's
    in-memory one (the sqlite3 backup API) that the test reads back."""
    settings = connection.settings_dict
    if connection.vendor == "postgresql":
        return f"postgres://{settings['USER']}@{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}/{settings['NAME']}"
    connection.ensure_connection()
    path = tmp_path / "db.sqlite3"
    copy = sqlite3.connect(path)
    connection.connection.backup(copy)
    copy.close()
    return f"sqlite:///{path}"


def logged(database_url: str) -> list[tuple[str, str]]:
    if database_url.startswith("sqlite:///"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as db:
            return db.execute("SELECT name, outcome FROM dashboard_agentaccess ORDER BY id").fetchall()
    return list(AgentAccess.objects.order_by("id").values_list("name", "outcome"))


def over_stdio(database_url: str, args: list[str], work, *, env: dict | None = None):
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcpserver", *args], cwd=str(ROOT),
        env={"DATABASE_URL": database_url, "SECRET_KEY": "mcp-stdio-test-" + "x" * 40, "DATABASE_CONN_MAX_AGE": "0",
             **(env or {})},
    )  # fmt: skip

    async def run():
        async with Client(params) as client:
            return await work(client)

    return run_async(run)


def test_a_token_file_authenticates_and_calls_are_logged(transactional_db, member, traffic, tmp_path, request):
    token_file = tmp_path / "token"
    token_file.write_text(token_for(member, "read") + "\n")
    url = request.getfixturevalue("database_url")

    async def work(client):
        tools = await client.list_tools()
        found = await client.call_tool("search_failed_calls", {"project": "alpha"})
        refused = await client.call_tool("acknowledge_alert", {"project": "alpha", "alert_id": traffic["alert"].pk})
        return tools, found, refused

    tools, found, refused = over_stdio(url, ["--token-file", str(token_file)], work)

    assert "tool_health_overview" in [tool.name for tool in tools.tools]
    assert [row["span_id"] for row in found.structured_content["calls"]] == [FAILED_SPAN]
    assert refused.is_error and refused.structured_content["error"]["class"] == "permission"
    assert logged(url) == [("search_failed_calls", "ok"), ("acknowledge_alert", "permission")]


def test_the_token_may_come_from_the_environment(transactional_db, member, traffic, request):
    plain = token_for(member, "read")
    url = request.getfixturevalue("database_url")  # a copy on SQLite: made once the token exists

    async def work(client):
        return await client.call_tool("list_projects", {})

    by_env = over_stdio(url, [], work, env={"TOOLWATCH_TOKEN": plain})
    assert by_env.structured_content == {"projects": [{"slug": "alpha", "name": "Alpha"}]}


def test_a_local_user_has_every_scope_within_their_role(transactional_db, member, traffic, request):
    url = request.getfixturevalue("database_url")

    async def work(client):
        return await client.call_tool("acknowledge_alert", {"project": "alpha", "alert_id": traffic["alert"].pk})

    acked = over_stdio(url, ["--user", "alice"], work)

    assert acked.structured_content["changed"] is True


def test_a_revoked_token_stops_the_command_before_it_serves(transactional_db, member, project, request):
    plain = token_for(member, "read")
    token = tokens.api_token_authenticate(plain)
    tokens.api_token_revoke(user=member, token_id=token.pk)
    url = request.getfixturevalue("database_url")
    result = subprocess.run(
        [sys.executable, "manage.py", "mcpserver"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "DATABASE_URL": url, "SECRET_KEY": "mcp-stdio-test-" + "x" * 40, "TOOLWATCH_TOKEN": plain},
    )  # fmt: skip

    assert result.returncode != 0 and "was revoked" in result.stderr and result.stdout == ""


def test_a_token_revoked_while_the_server_runs_stops_at_the_next_call(transactional_db, member, traffic, tmp_path, request):
    plain = token_for(member, "read")
    url = request.getfixturevalue("database_url")
    token_id = tokens.api_token_authenticate(plain).pk

    def revoke() -> None:
        if url.startswith("sqlite:///"):  # the server's copy of the database
            with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
                db.execute("UPDATE dashboard_apitoken SET revoked_at = CURRENT_TIMESTAMP WHERE id = ?", [token_id])
        else:
            tokens.api_token_revoke(user=member, token_id=token_id)

    async def work(client):
        before = await client.call_tool("list_projects", {})
        await anyio.to_thread.run_sync(revoke)
        after = await client.call_tool("list_projects", {})
        return before, after

    before, after = over_stdio(url, [], work, env={"TOOLWATCH_TOKEN": plain})

    assert not before.is_error
    assert after.is_error and after.structured_content["error"]["class"] == "permission"
    assert "was revoked" in after.structured_content["error"]["message"]
