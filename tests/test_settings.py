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
