"""The settings API: reads for members, writes for owners, 404 for outsiders, 400 naming the field."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from dashboard.alerting import targets
from dashboard.alerting.transports import verify_signature
from dashboard.models import AlertChannel
from ingest.models import ApiKey, Project, hash_api_key
from ingest.services import api_key_create
from tests.dashboard.alerting.test_alerts import receiver  # noqa: F401 - the loopback HTTP receiver fixture
from tests.dashboard.test_settings_pages import HOSTILE, SLACK_URL, team  # noqa: F401 - fixtures

BASE = "/api/v1/projects/alpha"


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def public_dns(monkeypatch):
    monkeypatch.setattr(targets, "resolve_host", lambda host, port: ["93.184.215.14"])


def as_user(api, user) -> APIClient:
    api.force_authenticate(user)
    return api


# --- access ----------------------------------------------------------------------------------


def test_the_settings_api_needs_authentication(api, team):
    assert api.get(f"{BASE}/settings/").status_code in (401, 403)


@pytest.mark.parametrize("path", ["settings/", "api-keys/", "channels/", "thresholds/"])
def test_an_outsider_gets_404_on_every_read(api, team, path):
    assert as_user(api, team.outsider).get(f"{BASE}/{path}").status_code == 404


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("patch", "settings/", {"retention_days": 1}),
        ("post", "api-keys/", {"name": "x"}),
        ("post", "channels/", {"kind": "email", "name": "x", "target": "a@example.com"}),
        ("put", "thresholds/", {"z_wasted": 4.0}),
        ("put", "thresholds/tools/lookup/", {"z_wasted": 4.0}),
        ("delete", "thresholds/tools/lookup/", None),
    ],
)
def test_writes_are_for_owners_403_for_members_404_for_outsiders(api, team, method, path, body):
    member = getattr(as_user(api, team.member), method)(f"{BASE}/{path}", body, format="json")
    outsider = getattr(as_user(api, team.outsider), method)(f"{BASE}/{path}", body, format="json")

    assert member.status_code == 403
    assert member.json() == {"detail": "Only the project's owners can change its settings."}
    assert outsider.status_code == 404
    team.project.refresh_from_db()
    assert team.project.retention_days != 1 and team.project.drift_thresholds == {}
    assert not ApiKey.objects.exists() and not AlertChannel.objects.exists()


def test_channel_and_key_actions_are_owner_only_and_scoped(api, team):
    key, _ = api_key_create(project=team.project)
    channel = AlertChannel.objects.create(project=team.project, kind="email", name="m", target="a@example.com")
    beta = Project.objects.get(slug="beta")
    foreign = AlertChannel.objects.create(project=beta, kind="email", name="f", target="b@x.org")

    as_user(api, team.member)
    assert api.post(f"{BASE}/api-keys/{key.pk}/revoke/").status_code == 403
    assert api.post(f"{BASE}/channels/{channel.pk}/test/").status_code == 403
    assert api.delete(f"{BASE}/channels/{channel.pk}/").status_code == 403
    as_user(api, team.owner)
    assert api.get(f"{BASE}/channels/{foreign.pk}/").status_code == 404
    assert api.delete(f"{BASE}/channels/{foreign.pk}/").status_code == 404
    assert AlertChannel.objects.count() == 2


# --- project settings ---------------------------------------------------------------------


def test_a_member_reads_the_project_settings(api, team):
    Project.objects.filter(pk=team.project.pk).update(escalation_tools=["handoff"], retention_days=30)

    body = as_user(api, team.member).get(f"{BASE}/settings/").json()

    assert body == {"name": "Alpha", "slug": "alpha", "retention_days": 30, "escalation_tools": ["handoff"]}


def test_an_owner_patches_only_the_given_fields(api, team):
    response = as_user(api, team.owner).patch(
        f"{BASE}/settings/", {"retention_days": 7, "escalation_tools": [" handoff ", "handoff", "page"]}, format="json"
    )

    assert response.status_code == 200
    assert response.json() == {
        "name": "Alpha", "slug": "alpha", "retention_days": 7, "escalation_tools": ["handoff", "page"],
    }  # fmt: skip


@pytest.mark.parametrize(
    "body, field",
    [({"retention_days": 0}, "retention_days"), ({"retention_days": 4000}, "retention_days"),
     ({"retention_days": "soon"}, "retention_days"), ({"name": ""}, "name"),
     ({"escalation_tools": "x"}, "escalation_tools")],
)  # fmt: skip
def test_bad_project_settings_are_a_400_naming_the_field(api, team, body, field):
    response = as_user(api, team.owner).patch(f"{BASE}/settings/", body, format="json")

    assert response.status_code == 400
    assert list(response.json()) == [field]


# --- API keys -----------------------------------------------------------------------------


def test_a_created_key_is_in_the_answer_once_and_listed_without_it(api, team):
    as_user(api, team.owner)

    created = api.post(f"{BASE}/api-keys/", {"name": "ci"}, format="json")

    assert created.status_code == 201 and created["Cache-Control"] == "no-store"
    plain = created.json()["key"]
    assert ApiKey.objects.get().hashed_key == hash_api_key(plain)
    listed = api.get(f"{BASE}/api-keys/")
    assert plain not in listed.content.decode()
    assert [(k["name"], k["prefix"], k["is_active"]) for k in listed.json()] == [("ci", plain[:11], True)]


def test_an_owner_revokes_a_key(api, team):
    key, _ = api_key_create(project=team.project)

    body = as_user(api, team.owner).post(f"{BASE}/api-keys/{key.pk}/revoke/").json()

    assert body["is_active"] is False and body["revoked_at"]


def test_the_key_list_makes_a_fixed_number_of_queries(api, team, django_assert_max_num_queries):
    for n in range(5):
        api_key_create(project=team.project, name=f"k{n}")
    as_user(api, team.member)

    with django_assert_max_num_queries(3):
        assert len(api.get(f"{BASE}/api-keys/").json()) == 5


# --- channels -----------------------------------------------------------------------------


def test_channels_are_listed_masked_with_their_status(api, team, public_dns):
    as_user(api, team.owner)
    api.post(f"{BASE}/channels/", {"kind": "slack", "name": "Slack", "target": SLACK_URL}, format="json")
    AlertChannel.objects.create(project=team.project, kind="email", name="Mail", target="ops@example.com",
                                failing_since=team.project.created_at, last_error="550 no such user")  # fmt: skip

    response = as_user(api, team.member).get(f"{BASE}/channels/")

    assert "VerySecretToken123" not in response.content.decode() and "ops@" not in response.content.decode()
    rows = {row["name"]: row for row in response.json()}
    assert rows["Slack"]["target"] == "https://hooks.slack.com/…" and rows["Slack"]["status"] == "active"
    assert "secret" not in rows["Slack"]
    assert (rows["Mail"]["target"], rows["Mail"]["status"], rows["Mail"]["last_error"]) == (
        "1 address at example.com", "failing", "550 no such user",
    )  # fmt: skip


def test_a_created_webhook_returns_its_secret_once(api, team, public_dns):
    response = as_user(api, team.owner).post(
        f"{BASE}/channels/", {"kind": "webhook", "name": "Hook", "target": "https://hooks.example.com/x"}, format="json"
    )

    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    channel = AlertChannel.objects.get()
    assert response.json()["secret"] == channel.secret
    assert channel.secret not in api.get(f"{BASE}/channels/{channel.pk}/").content.decode()
    rotated = api.post(f"{BASE}/channels/{channel.pk}/rotate-secret/").json()["secret"]
    channel.refresh_from_db()
    assert rotated == channel.secret


@pytest.mark.parametrize(
    "body, field",
    [
        ({"kind": "pager", "name": "x", "target": "x"}, "kind"),
        ({"kind": "webhook", "name": "", "target": "https://example.com/"}, "name"),
        ({"kind": "webhook", "name": "x", "target": "http://127.0.0.1/h"}, "target"),
        ({"kind": "slack", "name": "x", "target": "http://[::1]:80/"}, "target"),
        ({"kind": "webhook", "name": "x", "target": "http://169.254.169.254/"}, "target"),
        ({"kind": "webhook", "name": "x", "target": "http://10.2.3.4/"}, "target"),
        ({"kind": "email", "name": "x", "target": "nobody"}, "target"),
    ],
)
def test_bad_channels_are_a_400_naming_the_field(api, team, body, field):
    response = as_user(api, team.owner).post(f"{BASE}/channels/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert not AlertChannel.objects.exists()


def test_an_owner_updates_and_deletes_a_channel(api, team):
    channel = AlertChannel.objects.create(project=team.project, kind="email", name="Mail", target="a@example.com")
    as_user(api, team.owner)

    patched = api.patch(f"{BASE}/channels/{channel.pk}/", {"name": "Oncall", "target": "b@example.org"}, format="json")
    bad = api.patch(f"{BASE}/channels/{channel.pk}/", {"target": "nope"}, format="json")
    deleted = api.delete(f"{BASE}/channels/{channel.pk}/")

    assert patched.json()["name"] == "Oncall" and patched.json()["target"] == "1 address at example.org"
    assert bad.status_code == 400 and list(bad.json()) == ["target"]
    assert deleted.status_code == 204 and not AlertChannel.objects.exists()


@override_settings(TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS=True)
def test_a_channel_test_reaches_a_real_receiver(api, team, receiver):  # noqa: F811
    as_user(api, team.owner)
    channel_id = api.post(f"{BASE}/channels/", {"kind": "webhook", "name": "Loop", "target": receiver.url},
                          format="json").json()["id"]  # fmt: skip

    response = api.post(f"{BASE}/channels/{channel_id}/test/")

    assert response.json() == {"ok": True, "message": "Test message sent (HTTP 200)."}
    [request] = receiver.requests
    assert verify_signature(AlertChannel.objects.get().secret, request.body, request.headers["X-Toolwatch-Signature"])
    receiver.answers = [500]
    assert api.post(f"{BASE}/channels/{channel_id}/test/").json() == {"ok": False, "message": "HTTP 500 Internal Server Error"}


def test_reenable_clears_the_failing_mark(api, team):
    channel = AlertChannel.objects.create(project=team.project, kind="email", name="Mail", target="a@example.com",
                                          failing_since=team.project.created_at, is_active=False)  # fmt: skip

    body = as_user(api, team.owner).post(f"{BASE}/channels/{channel.pk}/reenable/").json()

    assert (body["status"], body["failing_since"], body["is_active"]) == ("active", None, True)


def test_hostile_channel_names_are_data_in_json(api, team):
    AlertChannel.objects.create(project=team.project, kind="email", name=HOSTILE, target="a@example.com")

    assert as_user(api, team.member).get(f"{BASE}/channels/").json()[0]["name"] == HOSTILE


def test_the_channel_list_makes_a_fixed_number_of_queries(api, team, django_assert_max_num_queries):
    for n in range(5):
        AlertChannel.objects.create(project=team.project, kind="email", name=f"c{n}", target=f"a{n}@example.com")
    as_user(api, team.member)

    with django_assert_max_num_queries(3):
        assert len(api.get(f"{BASE}/channels/").json()) == 5


# --- thresholds ---------------------------------------------------------------------------


def test_thresholds_show_defaults_overrides_and_effective_values(api, team):
    Project.objects.filter(pk=team.project.pk).update(
        drift_thresholds={"*": {"z_wasted": 4.5}, "lookup": {"z_wasted": 6.0}}
    )

    body = as_user(api, team.member).get(f"{BASE}/thresholds/", {"tool": "lookup"}).json()

    assert body["defaults"]["z_wasted"] == 5.0 and body["project"] == {"z_wasted": 4.5}
    assert body["tools"] == {"lookup": {"z_wasted": 6.0}} and body["tool"] == "lookup"
    assert body["effective"]["z_wasted"] == 6.0 and body["effective"]["recent_hours"] == [2, 6]


def test_an_owner_puts_project_and_tool_overrides_and_deletes_a_tools(api, team):
    as_user(api, team.owner)

    project = api.put(f"{BASE}/thresholds/", {"z_retry_rise": 4.5}, format="json")
    tool = api.put(f"{BASE}/thresholds/tools/mcp/search files/", {"recent_hours": [3, 6]}, format="json")

    assert project.status_code == 200 and project.json()["project"] == {"z_retry_rise": 4.5}
    assert tool.json()["effective"]["recent_hours"] == [3, 6] and tool.json()["effective"]["z_retry_rise"] == 4.5
    team.project.refresh_from_db()
    assert team.project.drift_thresholds == {"*": {"z_retry_rise": 4.5}, "mcp/search files": {"recent_hours": [3, 6]}}
    assert api.delete(f"{BASE}/thresholds/tools/mcp/search files/").json()["tools"] == {}


@pytest.mark.parametrize(
    "body, field",
    [({"z_wasted": "5"}, "z_wasted"), ({"z_wasted": 0}, "z_wasted"), ({"min_recent_calls": 1.5}, "min_recent_calls"),
     ({"recent_hours": [6, 2]}, "recent_hours"), ({"nonsense": 1}, "nonsense"), ({"min_rise": 1.1}, "resolve_ratio"),
     ([1, 2], "thresholds")],
)  # fmt: skip
def test_bad_thresholds_are_a_400_naming_the_field(api, team, body, field):
    response = as_user(api, team.owner).put(f"{BASE}/thresholds/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    team.project.refresh_from_db()
    assert team.project.drift_thresholds == {}


@pytest.mark.parametrize("tool", ["%00", "a%00b"])
def test_a_tool_name_with_a_nul_is_a_400_naming_the_tool(api, team, tool):  # noqa: F811
    # Stored as a key of drift_thresholds (jsonb): a 500 on PostgreSQL, kept as is on SQLite.
    as_user(api, team.owner)

    put = api.put(f"{BASE}/thresholds/tools/{tool}/", {"baseline_hours": 48}, format="json")
    delete = api.delete(f"{BASE}/thresholds/tools/{tool}/")

    assert put.status_code == delete.status_code == 400
    assert put.json() == {"tool": ["must not contain a NUL character"]}
    team.project.refresh_from_db()
    assert team.project.drift_thresholds == {}


# --- the schema -----------------------------------------------------------------------------


def test_the_schema_documents_every_settings_route(api, team):
    schema = json.loads(as_user(api, team.member).get("/api/schema/", {"format": "json"}).content)

    paths = schema["paths"]
    for route in ("settings/", "api-keys/", "api-keys/{id}/revoke/", "channels/", "channels/{id}/",
                  "channels/{id}/test/", "thresholds/", "thresholds/tools/{tool}/"):  # fmt: skip
        assert f"/api/v1/projects/{{project}}/{route}" in paths
    assert "ThresholdOverrides" in schema["components"]["schemas"]
