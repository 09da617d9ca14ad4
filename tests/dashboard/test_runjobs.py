import pytest
from django.core.management import CommandError, call_command

from dashboard.models import ToolRollup
from ingest.services import api_key_create
from tests.factories import make_project
from tests.ingest.test_traces_view import JSON, post
from tests.otlp_builders import json_bytes, json_request, json_span


def send_failure(client, project, tool: str, message: str) -> None:
    _, key = api_key_create(project=project)
    span = json_span(
        "1" * 32, "2" * 16, f"execute_tool {tool}",
        attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}, status_code=2, status_message=message,
    )  # fmt: skip
    body = json_bytes(json_request([({"service.name": "svc"}, [span])]))
    assert post(client, body, key, content_type=JSON).status_code == 200


def test_runjobs_recomputes_the_rollups_of_new_tool_calls_without_a_worker(client, db, capsys):
    project = make_project("Alpha")
    send_failure(client, project, "search", "upstream timed out")

    call_command("runjobs", "--project", project.slug)

    assert ToolRollup.objects.filter(project=project, tool="search").exists()
    out = capsys.readouterr().out
    assert f"rollups: project {project.pk}:" in out
    assert "drift:" in out and "deliveries: 0 due" in out


def test_runjobs_names_an_unknown_job_and_an_unknown_project(db):
    with pytest.raises(CommandError, match="unknown job.*bogus.*choose from rollups"):
        call_command("runjobs", "bogus")
    with pytest.raises(CommandError, match="no project with slug 'nope'"):
        call_command("runjobs", "--project", "nope")


def test_rebuild_rollups_recomputes_stored_calls_that_were_never_queued(client, db, capsys):
    from ingest.models import ChangedBucket

    project = make_project("Gamma")
    send_failure(client, project, "lookup", "no such order")
    ChangedBucket.objects.all().delete()  # as after an import that bypassed the queue

    call_command("rebuild_rollups", "--project", project.slug, "--days", "2", "--workers", "1")

    assert ToolRollup.objects.filter(project=project, tool="lookup", errors=1).exists()
    assert f"rollups rebuilt: project {project.slug}:" in capsys.readouterr().out
    with pytest.raises(CommandError, match="at least 1"):
        call_command("rebuild_rollups", "--workers", "0")
