import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def check(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
        # A Quickstart's own key in this checkout (var/secret-key) is not read: the rules are judged alone.
        env={"PATH": "/usr/bin:/bin", "TOOLWATCH_QUICKSTART_KEY_FILE": "/nonexistent/secret-key", **env},
    )


@pytest.mark.parametrize(
    "env, words",
    [
        ({"DATABASE_URL": "mysql://db/x"}, "sqlite:/// and postgres://"),
        ({"DATABASE_URL": "nonsense"}, "not a usable database URL"),
        ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
        ({"TOOLWATCH_LIMIT_MAX_BODY_BYTES": "lots"}, "is not an integer"),
        ({"TOOLWATCH_REQUIRE_SECRET_KEY": "1"}, "SECRET_KEY is not set"),
    ],
)
def test_bad_settings_fail_loudly_with_the_variable_named(env, words):
    result = check(env)

    assert result.returncode != 0
    assert words in result.stderr


def test_the_embedded_defaults_pass_the_system_checks(tmp_path):
    # Every default but SECRET_KEY, which DEBUG off requires (tests/test_security.py).
    result = check({"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "SECRET_KEY": "s3cret-" * 8})

    assert result.returncode == 0, result.stderr


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_statement_timeout_from_the_environment_cancels_a_longer_query_and_ingest_keeps_its_own():
    from django.conf import settings

    url = settings.DATABASES["default"]
    env = {
        "DATABASE_URL": f"postgres://{url['USER']}:{url['PASSWORD'] or ''}@{url['HOST']}:{url['PORT']}/{url['NAME']}",
        "DATABASE_STATEMENT_TIMEOUT_MS": "300",
        "SECRET_KEY": "s3cret-" * 8,
    }
    code = (
        "from django.db import connection, transaction\n"
        "from ingest.services import _bound_statement_time\n"
        "with connection.cursor() as c:\n"
        "    c.execute('SHOW statement_timeout'); print(c.fetchone()[0])\n"
        "    with transaction.atomic():\n"  # ingest's own bound, for its transaction only
        "        _bound_statement_time(); c.execute('SHOW statement_timeout'); print(c.fetchone()[0])\n"
        "    c.execute('SELECT pg_sleep(2)')\n"
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code], cwd=ROOT, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "TOOLWATCH_QUICKSTART_KEY_FILE": "/nonexistent/secret-key", **env}, timeout=60,
    )  # fmt: skip

    assert result.stdout.split() == ["300ms", "8s"]
    assert result.returncode != 0
    assert "canceling statement due to statement timeout" in result.stderr
