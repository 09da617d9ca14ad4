from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from ingest.models import ApiKey, Project, hash_api_key


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_createproject_prints_a_new_key_alone_on_the_last_line():
    output = run("createproject", "Support agents")

    key = output.strip().splitlines()[-1]
    assert key.startswith("tw_") and " " not in key
    project = Project.objects.get(slug="support-agents")
    stored = ApiKey.objects.get(project=project)
    assert stored.hashed_key == hash_api_key(key)
    assert key not in {stored.prefix, stored.hashed_key}
    assert key.startswith(stored.prefix)


@pytest.mark.django_db
def test_createproject_reuses_an_existing_project_with_a_fresh_key():
    first = run("createproject", "Support agents").strip().splitlines()[-1]
    output = run("createproject", "Support agents")

    assert "Reusing" in output
    assert Project.objects.count() == 1
    assert ApiKey.objects.count() == 2
    assert output.strip().splitlines()[-1] != first


@pytest.mark.django_db
def test_createproject_refuses_a_name_without_letters():
    with pytest.raises(CommandError, match="slug"):
        run("createproject", "!!!")


@pytest.mark.django_db
def test_quickstart_prints_the_secrets_once():
    first = run("quickstart")
    second = run("quickstart")

    assert "API key   tw_" in first and "login     demo / " in first
    assert "tw_" not in second and "printed on the first run" in second


@pytest.mark.django_db
def test_quickstart_loads_a_demo_history_with_every_kind_of_failure():
    from ingest.models import ToolCall

    run("quickstart")

    classes = set(ToolCall.objects.exclude(ok=True).values_list("error_class", flat=True))
    assert {"transient", "not_found", "permission", "validation", "business", "unknown"} <= classes
    assert ToolCall.objects.filter(soft_failure=True).exists()
    assert ToolCall.objects.filter(attempt=2).exists()
    assert not ToolCall.objects.filter(agent="").exists()
