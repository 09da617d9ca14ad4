"""Headless administration: projects, members and keys from management commands."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from ingest.models import ApiKey, Membership, Project
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
