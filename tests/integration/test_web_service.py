"""Compose's `web` service as it runs (docker-compose.yml): granian's WSGI server in front of the
whole app, DEBUG off, hashed static files, TOOLWATCH_OTLP_HTTP=0. Real processes on the test
database: pages, static files, the tool-health feed's fast path (200, then 304 on its ETag),
the MCP server through the SDK's own client, and OTLP/HTTP refused with the service to use.

PostgreSQL only: the server is a subprocess and must share the test database.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from django.db import connection

from dashboard.feed import snapshot as feed
from tests.dashboard.mcp.conftest import call_tool, token_for
from tests.integration.conftest import ROOT, free_port


@pytest.fixture(scope="module")
def static_root(tmp_path_factory):
    """A real collectstatic (hashed, compressed names), once for the module."""
    root = tmp_path_factory.mktemp("static")
    env = {**os.environ, "STATIC_ROOT": str(root), "SECRET_KEY": secrets.token_urlsafe(50), "DEBUG": "0"}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--no-input", "-v", "0"], cwd=ROOT, env=env, check=True)
    return root


@pytest.fixture
def web_url(transactional_db, static_root, tmp_path):
    """granian as compose's web service starts it, on a free loopback port."""
    database = connection.settings_dict
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "DATABASE_CONN_MAX_AGE": "0",
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "STATIC_ROOT": str(static_root),
        "TOOLWATCH_OTLP_HTTP": "0",
    }
    log = (tmp_path / "granian.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "granian", *web_server_arguments(), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if urllib.request.urlopen(f"{url}/healthz", timeout=2).status == 200:
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "granian.log").read_text()[-3000:]) from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=15)
        log.close()


def web_server_arguments() -> list[str]:
    """The arguments compose's web service gives granian, read from docker-compose.yml, so this
    test runs what compose runs (host, port and worker count aside); tests/test_compose.py checks
the rest of the file."""
    import shlex

    import yaml

    command = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]["command"]
    words = shlex.split(command.split("exec granian", 1)[1].strip().removesuffix('"'))
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in ("--host", "--port", "--workers"):
            skip = True
        else:
            kept.append(word)
    return kept


def get(url: str, headers: dict | None = None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


@pytest.mark.postgres
def test_pages_and_hashed_static_files_are_served(web_url):
    status, headers, body = get(f"{web_url}/login/")

    assert status == 200 and "Content-Security-Policy" in headers
    script = next(part for part in body.decode().split('"') if part.startswith("/static/js/") and part.endswith(".js"))
    assert script.count(".") >= 2  # a hashed name: charts.<hash>.js
    status, headers, _ = get(f"{web_url}{script}", {"Accept-Encoding": "gzip"})
    assert status == 200 and "immutable" in headers["Cache-Control"] and headers.get("Content-Encoding") == "gzip"
    assert get(f"{web_url}/no/such/page/")[0] == 404


@pytest.mark.postgres
def test_the_feed_is_answered_by_its_fast_path_with_etags(web_url, project, member):
    feed.tool_health_refresh(project_id=project.pk)
    token = token_for(member, "read")
    path = f"{web_url}/api/v1/projects/alpha/tool-health/"

    status, headers, body = get(path, {"Authorization": f"Bearer {token}"})
    assert status == 200, body
    assert json.loads(body)["project"] == "alpha"
    status, _, body = get(path, {"Authorization": f"Bearer {token}", "If-None-Match": headers["ETag"]})
    assert (status, body) == (304, b"")
    assert get(path)[0] == 401


@pytest.mark.postgres
def test_the_mcp_server_answers_the_sdks_client(web_url, member, project):
    result = call_tool(web_url, token_for(member, "read"), "tool_health_overview", {"project": "alpha", "range": "24h"})

    assert not result.is_error
    assert result.structured_content["totals"]["calls"] == 0


@pytest.mark.postgres
def test_otlp_http_is_refused_naming_the_otlp_service(web_url):
    request = urllib.request.Request(f"{web_url}/v1/traces", data=b"{}", headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=10)
        raise AssertionError("accepted")
    except urllib.error.HTTPError as error:
        assert error.code == 404
        assert "otlp service, port 4318" in json.loads(error.read())["message"]
