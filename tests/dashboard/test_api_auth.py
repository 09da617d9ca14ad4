"""REST API token authentication, and the projects API it guards."""

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from dashboard import tokens
from dashboard.models import ApiToken
from ingest.models import Membership
from tests.factories import make_key, make_project

PROJECTS = "/api/v1/projects/"
HOSTILE = "<script>alert(1)</script><b>x</b>"


@pytest.fixture
def alice(member, project):
    """The cast's member alice: in its project Alpha, and in Beta too."""
    Membership.objects.create(project=make_project("Beta", slug="beta"), user=member)
    return member


@pytest.fixture
def alice_token(alice):
    return tokens.api_token_create(user=alice, name="ci")[1]


def get(path: str, authorization: str | None = None, client: Client | None = None):
    headers = {"Authorization": authorization} if authorization is not None else {}
    return (client or Client()).get(path, headers=headers)


# --- authentication -----------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["Bearer", "Token", "bearer"])
def test_a_personal_token_authenticates_with_bearer_or_token(alice_token, scheme):
    response = get(PROJECTS, f"{scheme} {alice_token}")

    assert response.status_code == 200
    assert [p["slug"] for p in response.json()["results"]] == ["alpha", "beta"]


def test_no_credentials_is_a_401_with_a_bearer_challenge(db):
    response = get(PROJECTS)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="Toolwatch API"'


@pytest.mark.parametrize(
    "make_header, detail",
    [
        (lambda t: "Bearer twu_nonsense", "API token not recognised"),
        (lambda t: "Bearer", "must be 'Bearer <token>'"),
        (lambda t: f"Bearer {t} extra", "must be 'Bearer <token>'"),
    ],
)
def test_a_bad_token_is_a_401_that_says_why(alice_token, make_header, detail):
    response = get(PROJECTS, make_header(alice_token))

    assert response.status_code == 401
    assert detail in response.json()["detail"]
    assert response["WWW-Authenticate"].startswith("Bearer ")


def test_a_revoked_token_is_a_401(alice, alice_token):
    token = ApiToken.objects.get(user=alice)
    tokens.api_token_revoke(user=alice, token_id=token.pk)

    response = get(PROJECTS, f"Bearer {alice_token}")

    assert response.status_code == 401
    assert response.json()["detail"] == f"API token {token.prefix}… was revoked"


def test_an_expired_token_is_a_401(alice, alice_token):
    ApiToken.objects.filter(user=alice).update(expires_at=timezone.now() - dt.timedelta(seconds=1))

    response = get(PROJECTS, f"Bearer {alice_token}")

    assert response.status_code == 401
    assert "expired at" in response.json()["detail"]


def test_a_project_ingest_key_is_told_to_use_a_personal_token(alice):
    _, project_key = make_key(make_project("Gamma"))

    response = get(PROJECTS, f"Bearer {project_key}")

    assert response.status_code == 401
    detail = response.json()["detail"]
    assert "this is a project ingest key" in detail
    assert "use a personal API token" in detail


def test_a_session_login_still_works_without_a_token(client, alice):
    client.force_login(alice)

    assert client.get(PROJECTS).status_code == 200


def test_a_token_request_needs_no_csrf_token(alice_token):
    # Token clients are scripts: CSRF protects cookies, and a bearer header is not one.
    client = Client(enforce_csrf_checks=True)

    assert get(PROJECTS, f"Bearer {alice_token}", client).status_code == 200


def test_a_token_request_records_last_use_once_a_minute(alice, alice_token):
    get(PROJECTS, f"Bearer {alice_token}")
    first = ApiToken.objects.get(user=alice).last_used_at

    get(PROJECTS, f"Bearer {alice_token}")

    assert first is not None
    assert ApiToken.objects.get(user=alice).last_used_at == first


# --- the projects API ---------------------------------------------------------------


def test_the_list_holds_only_the_callers_projects(alice_token):
    make_project("Secret", slug="secret")

    body = get(PROJECTS, f"Bearer {alice_token}").json()

    assert body["count"] == 2
    assert {p["slug"] for p in body["results"]} == {"alpha", "beta"}
    assert set(body["results"][0]) == {"slug", "name", "created_at", "retention_days", "escalation_tools"}


def test_the_list_is_paginated(alice, alice_token):
    for n in range(55):
        Membership.objects.create(project=make_project(f"P{n:02}", slug=f"p{n:02}"), user=alice)

    first = get(PROJECTS, f"Bearer {alice_token}").json()
    second = get(first["next"], f"Bearer {alice_token}").json()

    assert first["count"] == 57
    assert len(first["results"]) == 50
    assert len(second["results"]) == 7
    assert second["next"] is None


def test_the_list_makes_a_fixed_number_of_queries(alice, alice_token, django_assert_max_num_queries):
    for n in range(10):
        Membership.objects.create(project=make_project(f"Q{n}", slug=f"q{n}"), user=alice)

    with django_assert_max_num_queries(4):  # token + user, last-used touch, count, page
        assert get(PROJECTS, f"Bearer {alice_token}").status_code == 200


def test_one_project_by_slug(alice_token):
    response = get(f"{PROJECTS}alpha/", f"Bearer {alice_token}")

    assert response.status_code == 200
    assert response.json()["name"] == "Alpha"


def test_an_outsider_gets_a_404_the_same_as_for_a_missing_project(alice_token):
    make_project("Secret", slug="secret")

    outsider = get(f"{PROJECTS}secret/", f"Bearer {alice_token}")
    missing = get(f"{PROJECTS}no-such-project/", f"Bearer {alice_token}")

    assert outsider.status_code == missing.status_code == 404
    assert outsider.json() == missing.json()


def test_project_names_come_back_as_json_strings(alice, alice_token):
    Membership.objects.create(project=make_project(HOSTILE, slug="hostile"), user=alice)

    response = get(f"{PROJECTS}hostile/", f"Bearer {alice_token}")

    assert response["Content-Type"] == "application/json"
    assert response.json()["name"] == HOSTILE


def test_a_superuser_sees_every_project(alice):
    root = get_user_model().objects.create_superuser("root", password="pw-root-123")
    make_project("Secret", slug="secret")
    _, plain = tokens.api_token_create(user=root, name="admin")

    assert get(PROJECTS, f"Bearer {plain}").json()["count"] == 3
