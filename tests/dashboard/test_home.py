"""The home page: the user's projects with their last 24 hours, straight to the overview when
there is only one, and how to make one when there is none."""

from dashboard.rollups.refresh import rollups_refresh
from ingest.models import Membership
from ingest.services import api_key_create
from tests.factories import make_project
from tests.ingest.test_traces_view import JSON, post
from tests.otlp_builders import json_bytes, json_request, json_span

HOSTILE = '<script>alert("x")</script>'


def join(user, *names):
    projects = [make_project(name) for name in names]
    for project in projects:
        Membership.objects.create(project=project, user=user)
    return projects


def send_failure(client, project, tool: str, message: str):
    _, key = api_key_create(project=project)
    span = json_span(
        "1" * 32, "2" * 16, f"execute_tool {tool}",
        attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}, status_code=2, status_message=message,
    )  # fmt: skip
    assert post(client, json_bytes(json_request([({"service.name": "svc"}, [span])])), key, content_type=JSON).status_code == 200
    rollups_refresh(project_id=project.pk)


def test_the_home_page_needs_a_login(client, db):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_a_user_with_one_project_goes_straight_to_its_overview(client, member):
    [project] = join(member, "Alpha")
    client.force_login(member)

    response = client.get("/")

    assert response.status_code == 302 and response["Location"] == f"/p/{project.slug}/"


def test_a_user_with_no_project_is_told_how_to_create_one(client, member):
    make_project("Someone else's")
    client.force_login(member)

    page = client.get("/").content.decode()

    assert "No project yet" in page
    assert 'python manage.py createproject "My agents"' in page
    assert "Someone else" not in page


def test_projects_are_listed_with_their_last_24_hours_from_the_rollups(client, member):
    alpha, beta = join(member, "Alpha", "Beta")
    send_failure(client, alpha, "lookup", "timed out")
    client.force_login(member)

    response = client.get("/")
    page = response.content.decode()

    summaries = {row["project"].name: row for row in response.context["summaries"]}
    assert (summaries["Alpha"]["calls"], summaries["Alpha"]["failed"]) == (1, 1)
    assert (summaries["Beta"]["calls"], summaries["Beta"]["failed"]) == (0, 0)
    assert f'href="/p/{alpha.slug}/"' in page and f'href="/p/{beta.slug}/"' in page
    assert "100.0 %" in page


def test_a_user_does_not_see_another_users_projects(client, member):
    join(member, "Alpha", "Beta")
    send_failure(client, make_project("Gamma"), "secret_tool", "timed out")
    client.force_login(member)

    page = client.get("/").content.decode()

    assert "Gamma" not in page and "secret_tool" not in page


def test_project_names_render_as_text(client, member):
    join(member, HOSTILE, "Beta")
    client.force_login(member)

    page = client.get("/").content.decode()

    assert HOSTILE not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page


def test_the_home_page_makes_a_fixed_number_of_queries(client, member, django_assert_max_num_queries):
    for project in join(member, *(f"P{n}" for n in range(6))):
        send_failure(client, project, "lookup", "timed out")
    client.force_login(member)

    with django_assert_max_num_queries(4):  # session, user, projects, one grouped rollup query
        assert client.get("/").status_code == 200
