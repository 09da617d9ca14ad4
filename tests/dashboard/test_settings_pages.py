"""The settings pages: who may see and change what, every action, secrets shown once, escaping, budgets."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

from dashboard import project_settings as ps
from dashboard.alerting import targets
from dashboard.alerting.transports import verify_signature
from dashboard.models import AlertChannel, Delivery
from ingest.models import ApiKey, Membership, Project, hash_api_key
from ingest.services import api_key_create
from tests.dashboard.alerting.test_alerts import receiver  # noqa: F401 - the loopback HTTP receiver fixture
from tests.factories import make_project

HOSTILE = "<script>alert(1)</script><b>x</b>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;"
SLACK_URL = "https://hooks.slack.com/services/T0001/B0001/VerySecretToken123"


class Team:
    """The cast (tests/conftest.py): the project Alpha, its owner olga and member alice, and the
    outsider mallory, who here owns another project (Beta)."""

    def __init__(self, project, owner, member, outsider):
        self.project, self.owner, self.member, self.outsider = project, owner, member, outsider
        Membership.objects.create(project=make_project("Beta", slug="beta"), user=self.outsider, role="owner")

    def url(self, name: str, *args) -> str:
        return reverse(name, args=[self.project.slug, *args])


@pytest.fixture
def team(project, owner, member, outsider):
    return Team(project, owner, member, outsider)


@pytest.fixture
def public_dns(monkeypatch):
    monkeypatch.setattr(targets, "resolve_host", lambda host, port: ["93.184.215.14"])


def as_user(client, user) -> Client:
    client.force_login(user)
    return client


def page(response) -> str:
    return response.content.decode()


def flashed(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


# --- access --------------------------------------------------------------------------------


def test_settings_need_a_login(client, team):
    response = client.get(team.url("settings"))

    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_an_owner_sees_every_section_with_its_forms(client, team):
    html = page(as_user(client, team.owner).get(team.url("settings")))

    for anchor in ("project", "members", "keys", "channels", "thresholds"):
        assert f'id="{anchor}"' in html
    assert "Save project settings" in html and "Create API key" in html and "Add member" in html


def test_settings_labels_have_no_trailing_colon_like_every_other_form(client, team):
    owner = as_user(client, team.owner)
    pages = [team.url("settings"), team.url("settings-channel-create"), reverse("settings-project-create")]
    for url in pages:
        labels = re.findall(r"<label[^>]*>([^<]*)</label>", page(owner.get(url)))
        assert labels, url
        assert not [label for label in labels if label.strip().endswith(":")], url
    assert re.search(r"<label[^>]*>Retention \(days\)</label>", page(owner.get(team.url("settings"))))


def test_a_member_sees_settings_read_only(client, team):
    html = page(as_user(client, team.member).get(team.url("settings")))

    assert "Only its owners can change them" in html
    assert "Save project settings" not in html and "Create API key" not in html and "Revoke key" not in html
    assert "olga" in html and "alice" in html


@pytest.mark.parametrize(
    "name, args",
    [
        ("settings-project", []), ("settings-member-add", []), ("settings-key-create", []),
        ("settings-channel-create", []), ("settings-thresholds", []), ("settings-thresholds-reset", []),
    ],
)  # fmt: skip
def test_a_member_may_not_change_anything(client, team, name, args):
    response = as_user(client, team.member).post(team.url(name, *args), {"name": "Hijacked", "retention_days": "1"})

    assert response.status_code == 403
    team.project.refresh_from_db()
    assert team.project.name == "Alpha" and not ApiKey.objects.exists()


@pytest.mark.parametrize("name", ["settings", "settings-thresholds", "settings-channel-create"])
def test_an_outsider_gets_404_for_every_page(client, team, name):
    assert as_user(client, team.outsider).get(team.url(name)).status_code == 404


def test_an_outsider_gets_404_for_every_change_and_changes_nothing(client, team):
    key, _ = api_key_create(project=team.project)
    channel = AlertChannel.objects.create(project=team.project, kind="email", name="m", target="a@example.com")
    as_user(client, team.outsider)

    for url in (team.url("settings-project"), team.url("settings-key-revoke", key.pk),
                team.url("settings-channel-delete", channel.pk), team.url("settings-member-add")):  # fmt: skip
        assert client.post(url, {"name": "Hijacked", "retention_days": "1", "username": "mallory"}).status_code == 404

    key.refresh_from_db()
    assert key.revoked_at is None and AlertChannel.objects.filter(pk=channel.pk).exists()
    assert not Membership.objects.filter(project=team.project, user=team.outsider).exists()


def test_ids_of_another_projects_rows_are_404_even_for_an_owner(client, team):
    other = Project.objects.get(slug="beta")
    foreign_key, _ = api_key_create(project=other)
    foreign_channel = AlertChannel.objects.create(project=other, kind="email", name="m", target="a@example.com")
    foreign_member = Membership.objects.get(project=other)
    as_user(client, team.owner)

    assert client.post(team.url("settings-key-revoke", foreign_key.pk)).status_code == 404
    assert client.post(team.url("settings-channel-delete", foreign_channel.pk)).status_code == 404
    assert client.post(team.url("settings-member-remove", foreign_member.pk)).status_code == 404
    assert client.get(team.url("settings-channel-edit", foreign_channel.pk)).status_code == 404


def test_changes_need_a_csrf_token(team):
    client = Client(enforce_csrf_checks=True)
    client.force_login(team.owner)

    response = client.post(team.url("settings-project"), {"name": "New", "retention_days": "7"})

    assert response.status_code == 403
    team.project.refresh_from_db()
    assert team.project.name == "Alpha"


def test_every_form_on_the_page_carries_a_csrf_token(client, team):
    AlertChannel.objects.create(project=team.project, kind="email", name="m", target="a@example.com")
    api_key_create(project=team.project)

    html = page(as_user(client, team.owner).get(team.url("settings")))

    forms = re.findall(r"<form[^>]*method=\"post\".*?</form>", html, re.S)
    assert len(forms) >= 8
    assert all("csrfmiddlewaretoken" in form for form in forms)


def test_changes_are_posts_only(client, team):
    assert as_user(client, team.owner).get(team.url("settings-project")).status_code == 405


# --- project ------------------------------------------------------------------------------


def test_an_owner_saves_the_project_settings(client, team):
    response = as_user(client, team.owner).post(
        team.url("settings-project"),
        {"name": "Alpha agents", "retention_days": "14", "escalation_tools": "handoff_to_human\npage_oncall\n"},
        follow=True,
    )

    assert "Project settings saved." in flashed(response)
    team.project.refresh_from_db()
    assert (team.project.name, team.project.retention_days, team.project.escalation_tools) == (
        "Alpha agents", 14, ["handoff_to_human", "page_oncall"],
    )  # fmt: skip


def test_bad_project_settings_are_shown_beside_their_field_and_not_saved(client, team):
    response = as_user(client, team.owner).post(team.url("settings-project"), {"name": "X", "retention_days": "4000"})

    assert response.status_code == 200
    assert response.context["project_form"].errors["retention_days"] == ["Must be between 1 and 3650 days, got 4000."]
    team.project.refresh_from_db()
    assert team.project.retention_days != 4000 and team.project.name == "Alpha"


def test_the_retention_field_says_what_it_means(client, team):
    html = page(as_user(client, team.owner).get(team.url("settings")))

    assert "Raw spans and tool calls older than this are deleted" in html
    assert "Rollups, alerts and eval-case snapshots stay" in html


def test_a_user_creates_a_project_and_becomes_its_owner(client, team):
    response = as_user(client, team.member).post(
        reverse("settings-project-create"), {"name": "Gamma agents", "slug": ""}
    )

    project = Project.objects.get(slug="gamma-agents")
    assert response["Location"] == reverse("settings", args=["gamma-agents"]) + "#keys"
    assert Membership.objects.get(project=project).user == team.member
    assert Membership.objects.get(project=project).role == "owner"


def test_a_taken_slug_is_refused_on_the_new_project_form(client, team):
    response = as_user(client, team.member).post(reverse("settings-project-create"), {"name": "A", "slug": "alpha"})

    assert response.context["form"].errors["slug"] == ["The slug 'alpha' is taken; choose another."]
    assert Project.objects.count() == 2


# --- members ------------------------------------------------------------------------------


def test_an_owner_adds_changes_and_removes_members(client, team):
    User.objects.create_user("nina")
    as_user(client, team.owner)

    response = client.post(team.url("settings-member-add"), {"username": "nina", "role": "member"}, follow=True)
    assert "nina added as member." in flashed(response)
    nina = Membership.objects.get(project=team.project, user__username="nina")

    response = client.post(team.url("settings-member-role", nina.pk), {"role": "owner"}, follow=True)
    assert "nina is now owner." in flashed(response)

    response = client.post(team.url("settings-member-remove", nina.pk), follow=True)
    assert "nina removed from Alpha." in flashed(response)
    assert not Membership.objects.filter(pk=nina.pk).exists()


def test_adding_an_unknown_user_or_a_member_again_is_a_clear_error(client, team):
    as_user(client, team.owner)

    unknown = client.post(team.url("settings-member-add"), {"username": "ghost", "role": "member"})
    again = client.post(team.url("settings-member-add"), {"username": "alice", "role": "member"})

    assert unknown.context["member_form"].errors["username"] == [
        "No user is called 'ghost'. They need an account first."
    ]
    assert again.context["member_form"].errors["username"] == ["'alice' is already a member of this project."]


def test_the_last_owner_cannot_be_removed_or_demoted(client, team):
    me = Membership.objects.get(project=team.project, user=team.owner)
    as_user(client, team.owner)

    removed = client.post(team.url("settings-member-remove", me.pk), follow=True)
    demoted = client.post(team.url("settings-member-role", me.pk), {"role": "member"}, follow=True)

    assert flashed(removed) == ["The last owner cannot be removed: make someone else an owner first."]
    assert flashed(demoted) == ["A project needs at least one owner: make someone else an owner first."]
    me.refresh_from_db()
    assert me.role == "owner"


# --- API keys -----------------------------------------------------------------------------


def test_a_new_key_is_shown_once_with_the_exporter_lines_and_never_again(client, team):
    as_user(client, team.owner)

    response = client.post(team.url("settings-key-create"), {"name": "ci"})

    html = page(response)
    plain = re.search(r'id="plain-key"[^>]*value="(tw_[^"]+)"', html).group(1)
    key = ApiKey.objects.get(project=team.project)
    assert key.hashed_key == hash_api_key(plain) and key.name == "ci"
    assert f'OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer {plain}"' in html.replace("&quot;", '"')
    assert "OTEL_EXPORTER_OTLP_ENDPOINT=http://testserver" in html
    assert "no-store" in response["Cache-Control"]
    later = page(client.get(team.url("settings")))
    assert plain not in later and key.prefix in later


def test_an_owner_revokes_a_key(client, team):
    key, _ = api_key_create(project=team.project, name="old")
    as_user(client, team.owner)

    html = page(client.get(team.url("settings")))
    assert f"Revoke key {key.prefix}… now" in html
    response = client.post(team.url("settings-key-revoke", key.pk), follow=True)

    key.refresh_from_db()
    assert key.revoked_at is not None
    assert flashed(response) == [f"Key {key.prefix}… (old) revoked: spans sent with it are refused (403)."]


def test_the_key_list_shows_name_prefix_created_last_used_and_revoked(client, team):
    key, _ = api_key_create(project=team.project, name="prod")
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=key.created_at)
    gone, _ = api_key_create(project=team.project, name="gone")
    ApiKey.objects.filter(pk=gone.pk).update(revoked_at=gone.created_at)

    html = page(as_user(client, team.member).get(team.url("settings")))

    assert "prod" in html and f"{key.prefix}…" in html and "revoked" in html and "never" not in html.split("gone")[0]


# --- alert channels -----------------------------------------------------------------------


def test_a_new_webhook_shows_its_signing_secret_once(client, team, public_dns):
    as_user(client, team.owner)

    response = client.post(
        team.url("settings-channel-create"),
        {"kind": "webhook", "name": "Ops hook", "target": "https://hooks.example.com/tw?token=abc"},
    )

    channel = AlertChannel.objects.get(project=team.project)
    assert channel.secret in page(response) and "no-store" in response["Cache-Control"]
    later = page(client.get(team.url("settings")))
    assert channel.secret not in later and "token=abc" not in later
    assert "https://hooks.example.com/…" in later


def test_a_slack_url_is_never_shown_in_full(client, team, public_dns):
    as_user(client, team.owner)
    response = client.post(team.url("settings-channel-create"), {"kind": "slack", "name": "Slack", "target": SLACK_URL})
    channel = AlertChannel.objects.get(project=team.project)
    assert response.status_code == 302

    for user in (team.owner, team.member):
        as_user(client, user)
        for url in (team.url("settings"), team.url("settings-channel-edit", channel.pk)):
            response = client.get(url)
            if response.status_code == 200:
                assert "VerySecretToken123" not in page(response) and channel.secret not in page(response)


def test_channel_fields_are_checked_with_a_message_per_field(client, team):
    response = as_user(client, team.owner).post(
        team.url("settings-channel-create"), {"kind": "webhook", "name": "", "target": "ftp://example.com/"}
    )

    errors = response.context["form"].errors
    assert "name" in errors and errors["target"] == ["Must be an http:// or https:// URL."]
    assert not AlertChannel.objects.exists()


@pytest.mark.parametrize("target", ["http://127.0.0.1:9000/h", "http://10.0.0.8/h", "http://169.254.169.254/",
                                    "http://[::1]/h", "http://localhost/h"])  # fmt: skip
def test_the_channel_form_refuses_internal_targets(client, team, target):
    response = as_user(client, team.owner).post(
        team.url("settings-channel-create"), {"kind": "webhook", "name": "x", "target": target}
    )

    assert "loopback, private or link-local" in response.context["form"].errors["target"][0]
    assert not AlertChannel.objects.exists()


def test_an_email_channel_is_edited_in_place(client, team):
    channel = AlertChannel.objects.create(project=team.project, kind="email", name="Mail", target="a@example.com")
    as_user(client, team.owner)

    form = client.get(team.url("settings-channel-edit", channel.pk)).context["form"]
    assert form.initial["target"] == "a@example.com"
    bad = client.post(team.url("settings-channel-edit", channel.pk), {"name": "Mail", "target": "a@example.com, nope"})
    client.post(team.url("settings-channel-edit", channel.pk), {"name": "Oncall", "target": "b@example.org"})

    assert bad.context["form"].errors["target"] == ["'nope' is not an e-mail address."]
    channel.refresh_from_db()
    assert (channel.name, channel.target) == ("Oncall", "b@example.org")


def test_rotating_a_webhook_secret_shows_the_new_one_once(client, team):
    channel = AlertChannel.objects.create(project=team.project, kind="webhook", name="h", target="https://e.example/")
    old = channel.secret
    as_user(client, team.owner)

    response = client.post(team.url("settings-channel-rotate", channel.pk))

    channel.refresh_from_db()
    assert channel.secret != old and channel.secret in page(response)
    assert channel.secret not in page(client.get(team.url("settings-channel-edit", channel.pk)))


@override_settings(TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS=True)
def test_send_test_reaches_a_real_receiver_and_reports_ok(client, team, receiver):  # noqa: F811
    as_user(client, team.owner)
    client.post(team.url("settings-channel-create"), {"kind": "webhook", "name": "Loop", "target": receiver.url})
    channel = AlertChannel.objects.get(project=team.project)

    response = client.post(team.url("settings-channel-test", channel.pk), follow=True)

    assert flashed(response) == ["Loop: Test message sent (HTTP 200)."]
    [request] = receiver.requests
    assert json.loads(request.body)["event"] == "test"
    assert verify_signature(channel.secret, request.body, request.headers["X-Toolwatch-Signature"])


@override_settings(TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS=True)
def test_a_failing_send_test_reports_the_error_and_re_enable_clears_the_mark(client, team, receiver):  # noqa: F811
    receiver.answers = [404]
    channel = AlertChannel.objects.create(project=team.project, kind="webhook", name="Loop", target=receiver.url)
    as_user(client, team.owner)

    response = client.post(team.url("settings-channel-test", channel.pk), follow=True)
    assert flashed(response)[0].startswith("Loop: the test failed: HTTP 404")
    channel.refresh_from_db()
    channel.failing_since = channel.failing_since or Delivery.objects.get().created_at
    channel.last_error = "HTTP 404"
    channel.save()

    html = page(client.get(team.url("settings")))
    assert "failing since" in html and "HTTP 404" in html
    client.post(team.url("settings-channel-reenable", channel.pk))
    channel.refresh_from_db()
    assert channel.failing_since is None and channel.is_active


def test_send_test_without_the_setting_refuses_a_loopback_target_unsent(client, team, receiver):  # noqa: F811
    channel = AlertChannel.objects.create(project=team.project, kind="webhook", name="Loop", target=receiver.url)

    response = as_user(client, team.owner).post(team.url("settings-channel-test", channel.pk), follow=True)

    assert "loopback, private or link-local" in flashed(response)[0]
    assert receiver.requests == []


def test_an_owner_deletes_a_channel(client, team):
    channel = AlertChannel.objects.create(project=team.project, kind="email", name="Mail", target="a@example.com")

    response = as_user(client, team.owner).post(team.url("settings-channel-delete", channel.pk), follow=True)

    assert flashed(response) == ["Channel Mail deleted."]
    assert not AlertChannel.objects.exists()


# --- drift thresholds ---------------------------------------------------------------------


def test_the_thresholds_page_lists_every_threshold_with_its_default(client, team):
    html = page(as_user(client, team.member).get(team.url("settings-thresholds")))

    for name in ps.THRESHOLD_NAMES:
        assert f"<code>{name}</code>" in html
    assert "Save project thresholds" not in html


def test_an_owner_saves_project_and_tool_thresholds(client, team):
    as_user(client, team.owner)

    client.post(team.url("settings-thresholds"), {"scope": "project", "z_retry_rise": "4.5", "min_rise": ""})
    response = client.post(team.url("settings-thresholds"),
                           {"scope": "tool", "tool": "lookup/v2", "recent_hours": "3, 6"}, follow=True)  # fmt: skip

    assert flashed(response)[-1] == "Thresholds of lookup/v2 saved."
    assert response.redirect_chain[-1][0].endswith("?tool=lookup%2Fv2")
    team.project.refresh_from_db()
    assert team.project.drift_thresholds == {"*": {"z_retry_rise": 4.5}, "lookup/v2": {"recent_hours": [3, 6]}}
    rows = {item["row"].name: item["row"] for item in response.context["rows"]}
    assert (rows["recent_hours"].tool, rows["z_retry_rise"].effective) == ("3, 6", "4.5")


def test_bad_thresholds_are_named_beside_their_field_and_nothing_is_saved(client, team):
    response = as_user(client, team.owner).post(
        team.url("settings-thresholds"), {"scope": "project", "z_wasted": "99", "min_recent_calls": "many"}
    )

    html = page(response)
    assert 'id="p-z_wasted-err"' in html and "must be a number in (0.0, 37.0], got 99.0" in html
    assert 'id="p-min_recent_calls-err"' in html and "Must be a whole number, got &#x27;many&#x27;." in html
    assert 'value="many"' in html  # what was typed stays
    team.project.refresh_from_db()
    assert team.project.drift_thresholds == {}


def test_reset_to_default_removes_the_overrides(client, team):
    Project.objects.filter(pk=team.project.pk).update(drift_thresholds={"*": {"z_wasted": 4.0}, "t": {"z_wasted": 6.0}})
    as_user(client, team.owner)

    client.post(team.url("settings-thresholds-reset"), {"tool": "t"})
    team.project.refresh_from_db()
    assert team.project.drift_thresholds == {"*": {"z_wasted": 4.0}}
    client.post(team.url("settings-thresholds-reset"))
    team.project.refresh_from_db()
    assert team.project.drift_thresholds == {}


# --- escaping -----------------------------------------------------------------------------


def test_hostile_names_render_as_text_everywhere(client, team, monkeypatch):
    Project.objects.filter(pk=team.project.pk).update(name=HOSTILE, escalation_tools=[HOSTILE],
                                                       drift_thresholds={HOSTILE: {"z_wasted": 6.0}})  # fmt: skip
    api_key_create(project=team.project, name=HOSTILE)
    channel = AlertChannel.objects.create(
        project=team.project, kind="webhook", name=HOSTILE, target="https://e.example/",
        last_error=HOSTILE, failing_since=team.project.created_at,
    )  # fmt: skip
    as_user(client, team.owner)

    pages = [
        client.get(team.url("settings")),
        client.get(team.url("settings-thresholds"), {"tool": HOSTILE}),
        client.get(team.url("settings-channel-edit", channel.pk)),
        client.post(team.url("settings-key-create"), {"name": HOSTILE}),
        client.post(team.url("settings-channel-rotate", channel.pk)),
    ]
    as_user(client, team.member)
    pages.append(client.get(team.url("settings")))

    for response in pages:
        html = page(response)
        assert response.status_code == 200
        assert HOSTILE not in html
        assert ESCAPED in html


# --- query budgets ------------------------------------------------------------------------


def test_the_settings_page_makes_a_fixed_number_of_queries(client, team, django_assert_max_num_queries):
    for n in range(4):
        Membership.objects.create(project=team.project, user=User.objects.create_user(f"user{n}"))
        api_key_create(project=team.project, name=f"key{n}")
        AlertChannel.objects.create(project=team.project, kind="email", name=f"c{n}", target=f"a{n}@example.com")
    as_user(client, team.owner)

    with django_assert_max_num_queries(10):
        assert client.get(team.url("settings")).status_code == 200


def test_the_thresholds_page_makes_a_fixed_number_of_queries(client, team, django_assert_max_num_queries):
    Project.objects.filter(pk=team.project.pk).update(drift_thresholds={f"t{n}": {"z_wasted": 6.0} for n in range(5)})
    as_user(client, team.owner)

    with django_assert_max_num_queries(8):
        assert client.get(team.url("settings-thresholds"), {"tool": "t1"}).status_code == 200


def test_a_tool_override_is_judged_over_the_projects_own_thresholds(client, team):
    # min_rise 1.1 alone breaks the default resolve_ratio (1.2), but not this project's 1.05.
    Project.objects.filter(pk=team.project.pk).update(drift_thresholds={"*": {"min_rise": 1.3, "resolve_ratio": 1.05}})

    as_user(client, team.owner).post(team.url("settings-thresholds"), {"scope": "tool", "tool": "t", "min_rise": "1.1"})

    team.project.refresh_from_db()
    assert team.project.drift_thresholds["t"] == {"min_rise": 1.1}
