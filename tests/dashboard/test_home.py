import pytest
from django.contrib.auth import get_user_model

from ingest.models import Membership
from tests.factories import make_project
from tests.ingest.test_traces_view import JSON, post
from tests.otlp_builders import json_bytes, json_request, json_span
from ingest.services import api_key_create

HOSTILE = '<script>alert("x")</script>'


@pytest.fixture
def member(db):
    user = get_user_model().objects.create_user("alice", password="pw-alice-123")
    project = make_project("Alpha")
    Membership.objects.create(project=project, user=user)
    return user, project


def send_failure(client, project, tool: str, message: str):
    _, key = api_key_create(project=project)
    span = json_span(
        "1" * 32, "2" * 16, f"execute_tool {tool}",
        attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}, status_code=2, status_message=message,
    )  # fmt: skip
    assert post(client, json_bytes(json_request([({"service.name": "svc"}, [span])])), key, content_type=JSON).status_code == 200


def test_the_home_page_needs_a_login(client, db):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_the_home_page_lists_failed_calls_of_the_users_projects_escaped(client, member):
    user, project = member
    send_failure(client, project, HOSTILE, f"timed out {HOSTILE}")
    client.force_login(user)

    page = client.get("/").content.decode()

    assert HOSTILE not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "transient" in page


def test_a_user_does_not_see_another_projects_calls(client, member):
    user, _ = member
    send_failure(client, make_project("Beta"), "secret_tool", "timed out")
    client.force_login(user)

    page = client.get("/").content.decode()

    assert "secret_tool" not in page
    assert "Beta" not in page


def test_the_home_page_makes_a_fixed_number_of_queries(client, member, django_assert_max_num_queries):
    user, project = member
    for n in range(3):
        send_failure(client, make_project(f"P{n}"), f"tool{n}", "timed out")
    client.force_login(user)

    with django_assert_max_num_queries(6):
        assert client.get("/").status_code == 200


def test_project_totals_come_from_the_rollups(client, member):
    from dashboard.rollups import rollups_refresh

    user, project = member
    send_failure(client, project, "lookup", "timed out")
    rollups_refresh(project_id=project.pk)
    client.force_login(user)

    summary = client.get("/").context["summaries"][0]

    assert (summary["calls"], summary["failed"]) == (1, 1)
