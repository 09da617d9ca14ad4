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


# A few hours of the demo fleet keep these quick; the full month is timed by hand (docs/demo-traffic.md).
SMALL = ("--days", "0.25", "--rate", "300")


@pytest.mark.django_db
def test_quickstart_prints_the_secrets_once():
    first = run("quickstart", *SMALL)
    second = run("quickstart", *SMALL)

    assert "API key   tw_" in first and "login     demo / " in first
    assert "tw_" not in second and "printed on the first run" in second


@pytest.mark.django_db
def test_quickstart_loads_the_demo_history_once_and_a_rerun_adds_nothing():
    from dashboard.models import ToolRollup
    from ingest.models import Span, ToolCall

    first = run("quickstart", *SMALL)
    spans, calls, rollups = Span.objects.count(), ToolCall.objects.count(), ToolRollup.objects.count()
    second = run("quickstart", *SMALL)

    assert "Loaded demo history" in first and spans > 1000 and rollups > 0
    assert "Demo history is up to date" in second
    assert (Span.objects.count(), ToolCall.objects.count(), ToolRollup.objects.count()) == (spans, calls, rollups)


@pytest.mark.django_db
def test_quickstart_history_has_every_kind_of_failure_and_failed_traces_to_promote():
    from ingest.models import Project, ToolCall

    run("quickstart", *SMALL)

    project = Project.objects.get(slug="demo-agents")
    assert project.escalation_tools == ["handoff_to_human"]
    classes = set(ToolCall.objects.exclude(ok=True).values_list("error_class", flat=True))
    assert {"transient", "not_found", "permission", "validation", "business", "unknown"} <= classes
    assert ToolCall.objects.filter(soft_failure=True).exists()
    assert ToolCall.objects.filter(attempt=2).exists() and ToolCall.objects.filter(resend_count=1).exists()
    assert ToolCall.objects.filter(escalated=True).exists()
    assert not ToolCall.objects.filter(agent="").exists()
    assert {"support", "refunds", "checkout", "researcher", "ops"} <= set(ToolCall.objects.values_list("agent", flat=True))


@pytest.mark.django_db
def test_quickstart_writes_a_live_key_only_its_owner_can_read_and_keeps_it(tmp_path):
    key_file = tmp_path / "var" / "demo-live.key"

    run("quickstart", "--no-history", "--live-key-file", str(key_file))
    key = key_file.read_text().strip()
    run("quickstart", "--no-history", "--live-key-file", str(key_file))

    assert ApiKey.objects.filter(hashed_key=hash_api_key(key), project__slug="demo-agents").exists()
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert key_file.read_text().strip() == key
    assert ApiKey.objects.filter(name="live demo traffic").count() == 1
