"""Headless administration: users, projects, members, keys and tokens from management commands."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from dashboard import tokens
from dashboard.models import ApiToken
from ingest.models import ApiKey, Membership, Project, hash_api_key
from tests.factories import make_key

pytestmark = pytest.mark.django_db


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_createproject_with_an_owner_makes_a_project_its_owner_sees(client, owner):
    out, err = run("createproject", "Support agents", "--owner", owner.username)

    project = Project.objects.get(slug="support-agents")
    assert Membership.objects.get(project=project, user=owner).role == Membership.Role.OWNER
    assert out.strip().splitlines()[-1].startswith("tw_") and err == ""
    client.force_login(owner)
    assert client.get("/p/support-agents/").status_code == 200


def test_createproject_without_an_owner_warns_that_only_superusers_see_it():
    _, err = run("createproject", "Lonely")

    assert "only superusers" in err


def test_createproject_refuses_an_unknown_owner_and_creates_nothing():
    with pytest.raises(CommandError, match="no user is called 'nobody'"):
        run("createproject", "Nobody's", "--owner", "nobody")
    assert not Project.objects.exists()


def test_addmember_adds_a_member_with_a_role(project, outsider):
    out, _ = run("addmember", project.slug, outsider.username, "--role", "owner")

    assert Membership.objects.get(project=project, user=outsider).role == Membership.Role.OWNER
    assert "owner of alpha" in out


@pytest.mark.parametrize(("username", "role", "words"), [
    ("nobody", "member", "No user is called 'nobody'"),
    ("alice", "member", "already a member"),
    ("mallory", "admin", "role"),
])  # fmt: skip
def test_addmember_names_what_is_wrong(project, outsider, username, role, words):
    with pytest.raises(CommandError, match=words):
        run("addmember", project.slug, username, "--role", role)


def test_addmember_names_an_unknown_project():
    with pytest.raises(CommandError, match="no project with slug 'nope'"):
        run("addmember", "nope", "alice")


def test_revokekey_revokes_the_key_with_that_prefix_and_only_it():
    project, plain = make_key()
    _, other = make_key(project)
    key = ApiKey.objects.get(project=project, prefix=plain[:11])

    out, _ = run("revokekey", project.slug, key.prefix)

    key.refresh_from_db()
    assert key.revoked_at is not None and "Revoked" in out
    assert ApiKey.objects.get(project=project, prefix=other[:11]).revoked_at is None
    with pytest.raises(CommandError, match="no key with the prefix"):
        run("revokekey", project.slug, "tw_00000000")


# --- users -------------------------------------------------------------------------------------


def test_adduser_reads_the_password_from_a_file_and_never_prints_it(tmp_path):
    secret = tmp_path / "password"
    secret.write_text("correct horse battery\n")

    out, _ = run("adduser", "olga", "--email", "olga@example.com", "--superuser", "--password-file", str(secret))

    user = get_user_model().objects.get(username="olga")
    assert user.is_superuser and user.email == "olga@example.com"
    assert user.check_password("correct horse battery")
    assert "correct horse" not in out and "Created superuser olga" in out


def test_adduser_reads_the_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("TOOLWATCH_PASSWORD", "from-the-env-123")

    out, _ = run("adduser", "alice")

    user = get_user_model().objects.get(username="alice")
    assert not user.is_superuser and user.check_password("from-the-env-123")
    assert "$TOOLWATCH_PASSWORD" in out


def test_adduser_asks_twice_at_a_terminal(monkeypatch):
    monkeypatch.delenv("TOOLWATCH_PASSWORD", raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    answers = iter(["typed-secret-1", "typed-secret-2"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(answers))

    with pytest.raises(CommandError, match="the two passwords differ"):
        run("adduser", "alice")
    assert not get_user_model().objects.filter(username="alice").exists()


def test_adduser_without_a_password_source_says_where_to_put_one(monkeypatch):
    monkeypatch.delenv("TOOLWATCH_PASSWORD", raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)

    with pytest.raises(CommandError, match="--password-file FILE, set \\$TOOLWATCH_PASSWORD"):
        run("adduser", "alice")


def test_adduser_refuses_a_password_on_the_command_line():
    with pytest.raises(CommandError, match="unrecognized arguments: --password"):
        run("adduser", "alice", "--password", "on-the-command-line")


def test_adduser_with_no_password_makes_a_user_who_cannot_log_in():
    out, _ = run("adduser", "ci-runner", "--no-password")

    assert not get_user_model().objects.get(username="ci-runner").has_usable_password()
    assert "cannot log in" in out


@pytest.mark.parametrize(("args", "words"), [
    (["olga", "--no-password"], "already exists"),
    (["bad name!", "--no-password"], "username"),
    (["eve", "--email", "not-an-address", "--no-password"], "email"),
])  # fmt: skip
def test_adduser_names_what_is_wrong(owner, args, words):
    with pytest.raises(CommandError, match=words):
        run("adduser", *args)


def test_adduser_applies_the_password_validators(tmp_path):
    secret = tmp_path / "password"
    secret.write_text("short")

    with pytest.raises(CommandError, match="password: .*too short"):
        run("adduser", "alice", "--password-file", str(secret))
    assert not get_user_model().objects.filter(username="alice").exists()


# --- roles and members -------------------------------------------------------------------------


def test_setrole_changes_a_members_role(project, member):
    out, _ = run("setrole", project.slug, member.username, "owner")

    assert Membership.objects.get(project=project, user=member).role == Membership.Role.OWNER
    assert "alice's role in alpha is now owner" in out


@pytest.mark.parametrize(("username", "role", "words"), [
    ("olga", "member", "at least one owner"),
    ("mallory", "owner", "'mallory' is not a member of alpha"),
    ("nobody", "owner", "no user is called 'nobody'"),
])  # fmt: skip
def test_setrole_names_what_is_wrong(project, outsider, username, role, words):
    with pytest.raises(CommandError, match=words):
        run("setrole", project.slug, username, role)


def test_removemember_removes_a_member_but_never_the_last_owner(project, owner, member):
    out, _ = run("removemember", project.slug, member.username)

    assert not Membership.objects.filter(project=project, user=member).exists()
    assert "Removed alice from alpha" in out
    with pytest.raises(CommandError, match="last owner"):
        run("removemember", project.slug, owner.username)


# --- personal tokens -----------------------------------------------------------------------------


def test_createtoken_prints_a_runs_token_once_on_the_last_line(project, member):
    out, _ = run("createtoken", member.username, "--name", "CI eval runner", "--scope", "runs", "--expires-in-days", "30")

    plain = out.strip().splitlines()[-1]
    token = ApiToken.objects.get(user=member)
    assert token.hashed_token == hash_api_key(plain) and token.scopes == ["runs"]
    assert "scopes runs; expires" in out
    response = Client().post("/api/v1/projects/alpha/api-keys/", headers={"Authorization": f"Bearer {plain}"})
    assert response.status_code == 403 and response.json()["required_scope"] == "admin"


def test_createtoken_takes_several_scopes(member):
    run("createtoken", member.username, "--name", "ops", "--scope", "read,admin", "--scope", "runs")

    assert ApiToken.objects.get(user=member).scopes == ["read", "runs", "admin"]


@pytest.mark.parametrize(("args", "words"), [
    (["alice", "--name", "x", "--scope", "sudo"], "unknown scope 'sudo'"),
    (["alice", "--name", "x"], "--scope"),
    (["nobody", "--name", "x", "--scope", "read"], "no user is called 'nobody'"),
    (["alice", "--name", " ", "--scope", "read"], "name the token"),
])  # fmt: skip
def test_createtoken_names_what_is_wrong(member, args, words):
    with pytest.raises(CommandError, match=words):
        run("createtoken", *args)
    assert not ApiToken.objects.exists()


def test_revoketoken_revokes_the_users_token_with_that_prefix(member, outsider):
    token, plain = tokens.api_token_create(user=member, name="ci")
    other, _ = tokens.api_token_create(user=outsider, name="theirs")

    out, _ = run("revoketoken", member.username, token.prefix + "…")

    token.refresh_from_db()
    assert token.revoked_at is not None and "Revoked token" in out
    assert Client().get("/api/v1/projects/", headers={"Authorization": f"Bearer {plain}"}).status_code == 401
    with pytest.raises(CommandError, match="has no token with the prefix"):
        run("revoketoken", member.username, other.prefix)
