"""The settings services (dashboard.project_settings): each validation, then each write."""

from __future__ import annotations

import dataclasses

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import override_settings

from dashboard import drift
from dashboard import project_settings as ps
from dashboard.alerting import targets
from dashboard.alerting.evaluation import thresholds_for
from dashboard.models import AlertChannel
from ingest.models import ApiKey, Membership, Project, hash_api_key
from tests.factories import make_project

PUBLIC = "93.184.215.14"


def errors_of(call, *args, **kwargs) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        call(*args, **kwargs)
    return caught.value.message_dict


@pytest.fixture
def public_dns(monkeypatch):
    """Every name resolves to one public address, except the names mapped here."""
    names: dict[str, list[str]] = {}

    def resolve(host, port):
        if host in names:
            return names[host]
        return [host] if host[0].isdigit() or ":" in host else [PUBLIC]

    monkeypatch.setattr(targets, "resolve_host", resolve)
    return names


# --- pure validation --------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [(1, 1), (3650, 3650), ("30", 30), (" 90 ", 90)])
def test_retention_takes_whole_days_from_1_to_3650(value, expected):
    assert ps.clean_retention_days(value) == expected


@pytest.mark.parametrize("value", [0, 3651, -5, "abc", "", 30.5, True, None])
def test_retention_outside_1_to_3650_or_not_whole_is_refused_naming_the_field(value):
    errors = errors_of(ps.clean_retention_days, value)

    assert list(errors) == ["retention_days"]


def test_escalation_tools_are_one_per_line_trimmed_and_deduplicated():
    assert ps.clean_escalation_tools("handoff_to_human\n\n  page_oncall \r\nhandoff_to_human\n") == [
        "handoff_to_human", "page_oncall",
    ]  # fmt: skip
    assert ps.clean_escalation_tools(["a", " b ", ""]) == ["a", "b"]


def test_escalation_tools_refuse_overlong_names_and_non_text():
    assert "escalation_tools" in errors_of(ps.clean_escalation_tools, ["x" * 257])
    assert "escalation_tools" in errors_of(ps.clean_escalation_tools, [3])


@pytest.mark.parametrize("slug", ["Has Caps", "under_score", "-leading", "double--hyphen", "x" * 101, "émoji"])
def test_bad_slugs_are_refused_with_an_example(slug):
    assert "slug" in errors_of(ps.clean_slug, slug)


@pytest.mark.parametrize(
    "target",
    ["ftp://example.com/x", "javascript:alert(1)", "file:///etc/passwd", "example.com/hook", "http://",
     "http://h:99999/"],  # fmt: skip
)
def test_a_channel_url_must_be_http_or_https_with_a_host(target, public_dns):
    assert "target" in errors_of(targets.clean_target_url, target)


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:8080/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://172.16.5.5/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[fe80::1]/hook",
        "http://0.0.0.0/hook",
        "http://100.64.0.1/hook",
    ],
)
def test_the_ssrf_guard_refuses_loopback_private_and_link_local_addresses(target, public_dns):
    errors = errors_of(targets.clean_target_url, target)

    assert "loopback, private or link-local" in errors["target"][0]
    assert "TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS" in errors["target"][0]


def test_the_ssrf_guard_refuses_a_hostname_that_resolves_to_loopback():
    # "localhost" really resolves (through /etc/hosts) to 127.0.0.1 and/or ::1.
    errors = errors_of(targets.clean_target_url, "http://localhost:8000/hook")

    assert "'localhost' is a loopback, private or link-local address" in errors["target"][0]


def test_the_ssrf_guard_refuses_a_name_with_any_private_address(public_dns):
    public_dns["hooks.example.com"] = [PUBLIC, "10.0.0.7"]

    errors = errors_of(targets.clean_target_url, "https://hooks.example.com/x")

    assert "10.0.0.7" in errors["target"][0]


def test_a_name_that_does_not_resolve_is_refused(monkeypatch):
    def fail(host, port):
        raise OSError("Name or service not known")

    monkeypatch.setattr(targets, "resolve_host", fail)

    assert errors_of(targets.clean_target_url, "https://nowhere.invalid/x")["target"] == [
        "The host 'nowhere.invalid' does not resolve."
    ]


def test_a_public_https_url_passes_the_guard(public_dns):
    assert targets.clean_target_url(" https://hooks.slack.com/services/T0/B0/secret ") == (
        "https://hooks.slack.com/services/T0/B0/secret"
    )


@override_settings(TOOLWATCH_ALLOW_PRIVATE_ALERT_TARGETS=True)
def test_private_targets_pass_when_the_setting_allows_them():
    assert targets.clean_target_url("http://127.0.0.1:9/hook") == "http://127.0.0.1:9/hook"
    assert "target" in errors_of(targets.clean_target_url, "ftp://127.0.0.1/")  # still http(s) only


def test_emails_are_comma_separated_and_each_is_checked():
    assert targets.clean_emails(" a@example.com,b@example.org , a@example.com") == "a@example.com, b@example.org"
    errors = errors_of(targets.clean_emails, "a@example.com, not-an-address")
    assert errors["target"] == ["'not-an-address' is not an e-mail address."]
    assert "target" in errors_of(targets.clean_emails, " , ")


def test_masking_shows_the_host_of_a_url_and_the_domains_of_emails():
    slack = "https://hooks.slack.com/services/T000/B000/XXXXSECRET"
    assert targets.target_masked("slack", slack) == "https://hooks.slack.com/…"
    assert targets.target_masked("webhook", "http://user:pw@[::1]:8080/h?token=1") == "http://[::1]:8080/…"
    assert targets.target_masked("email", "ops@example.com, cto@corp.example") == "2 addresses at example.com, corp.example"
    assert targets.target_masked("email", "ops@example.com") == "1 address at example.com"


def test_threshold_form_text_becomes_typed_overrides_and_blank_means_inherit():
    overrides = ps.thresholds_parse_form({"z_wasted": " 4.5 ", "min_recent_calls": "300", "recent_hours": "3, 6",
                                          "min_rise": ""})  # fmt: skip

    assert overrides == {"z_wasted": 4.5, "min_recent_calls": 300, "recent_hours": [3, 6]}


def test_threshold_form_text_of_the_wrong_kind_names_each_field():
    errors = errors_of(ps.thresholds_parse_form, {"z_wasted": "high", "min_recent_calls": "1.5", "recent_hours": "2;6"})

    assert set(errors) == {"z_wasted", "min_recent_calls", "recent_hours"}
    assert errors["min_recent_calls"] == ["Must be a whole number, got '1.5'."]


def test_threshold_checks_name_every_field_out_of_range_or_of_the_wrong_type():
    errors = errors_of(ps.thresholds_check, {"z_wasted": "5", "min_recent_calls": 0, "silence_max_fraction": 2.0,
                                             "recent_hours": [6, 2]})  # fmt: skip

    assert set(errors) == {"z_wasted", "min_recent_calls", "silence_max_fraction", "recent_hours"}
    assert errors["z_wasted"] == ["must be a number in (0.0, 37.0], got '5'"]


def test_threshold_checks_refuse_unknown_names_and_inconsistent_pairs():
    assert "z_everything" in errors_of(ps.thresholds_check, {"z_everything": 3})
    assert "resolve_ratio" in errors_of(ps.thresholds_check, {"min_rise": 1.1})  # default resolve_ratio is 1.2
    assert ps.thresholds_check({"min_rise": 1.1, "resolve_ratio": 1.05}).min_rise == 1.1


def test_threshold_rows_list_every_threshold_with_its_default_and_overrides():
    project = Project(drift_thresholds={"*": {"z_wasted": 4.5}, "lookup": {"z_wasted": 6.0, "recent_hours": [3, 6]}})

    rows = {row.name: row for row in ps.threshold_rows(project, "lookup")}

    assert set(rows) == {f.name for f in dataclasses.fields(drift.Thresholds)}
    assert (rows["z_wasted"].default, rows["z_wasted"].project, rows["z_wasted"].tool, rows["z_wasted"].effective) == (
        "5.0", "4.5", "6.0", "6.0",
    )  # fmt: skip
    assert rows["recent_hours"].effective == "3, 6"
    assert rows["min_rise"].project == "" and rows["min_rise"].effective == "1.5"


# --- writes -------------------------------------------------------------------------------


def test_creating_a_project_makes_the_creator_its_owner(owner):
    project = ps.project_create(name="Support agents", user=owner)

    assert project.slug == "support-agents"
    assert Membership.objects.get(project=project, user=owner).role == "owner"


def test_a_taken_or_unmakeable_slug_is_a_clear_error(owner):
    make_project("Taken", slug="taken")

    assert errors_of(ps.project_create, name="Other", slug="taken", user=owner)["slug"] == [
        "The slug 'taken' is taken; choose another."
    ]
    assert "slug" in errors_of(ps.project_create, name="???", user=owner)
    assert "name" in errors_of(ps.project_create, name="  ", slug="ok", user=owner)


def test_updating_a_project_changes_only_the_given_fields(db):
    project = make_project("Alpha", retention_days=30, escalation_tools=["old"])

    ps.project_update(project=project, retention_days="7", escalation_tools="handoff\npage")

    project.refresh_from_db()
    assert (project.name, project.retention_days, project.escalation_tools) == ("Alpha", 7, ["handoff", "page"])


def test_updating_a_project_with_bad_values_names_each_and_changes_nothing(db):
    project = make_project("Alpha", retention_days=30)

    errors = errors_of(ps.project_update, project=project, name="", retention_days=0)

    assert set(errors) == {"name", "retention_days"}
    project.refresh_from_db()
    assert (project.name, project.retention_days) == ("Alpha", 30)


def test_members_are_added_by_username_once(owner):
    project = make_project()
    User.objects.create_user("bob")

    membership = ps.member_add(project=project, username=" bob ", role="member")

    assert membership.user.username == "bob"
    assert errors_of(ps.member_add, project=project, username="bob")["username"] == [
        "'bob' is already a member of this project."
    ]
    assert errors_of(ps.member_add, project=project, username="nobody")["username"] == [
        "No user is called 'nobody'. They need an account first."
    ]
    assert "role" in errors_of(ps.member_add, project=project, username="olga", role="admin")


def test_the_last_owner_can_be_neither_demoted_nor_removed(owner):
    project = ps.project_create(name="Solo", user=owner)
    only = Membership.objects.get(project=project)

    assert "role" in errors_of(ps.member_set_role, project=project, membership=only, role="member")
    assert "member" in errors_of(ps.member_remove, project=project, membership=only)

    second = ps.member_add(project=project, username=User.objects.create_user("bob").username, role="owner")
    ps.member_set_role(project=project, membership=only, role="member")
    assert errors_of(ps.member_remove, project=project, membership=second)
    ps.member_remove(project=project, membership=only)
    assert list(Membership.objects.filter(project=project).values_list("user__username", "role")) == [("bob", "owner")]


def test_an_issued_api_key_is_stored_as_a_hash_only(db):
    project = make_project()

    key, plain = ps.api_key_issue(project=project, name="  ci  ")

    assert key.name == "ci" and plain.startswith(key.prefix)
    assert ApiKey.objects.get(pk=key.pk).hashed_key == hash_api_key(plain)
    assert plain not in str(ApiKey.objects.filter(pk=key.pk).values().get())
    assert "Authorization=Bearer " + plain in ps.otlp_env_lines(base_url="http://tw", plain_key=plain)


def test_channels_are_created_with_validated_fields(db, public_dns):
    project = make_project()

    channel = ps.channel_create(project=project, kind="webhook", name="Ops", target="https://hooks.example.com/tw")

    assert (channel.kind, channel.target) == ("webhook", "https://hooks.example.com/tw")
    assert len(channel.secret) >= 32
    errors = errors_of(ps.channel_create, project=project, kind="slack", name="", target="http://10.0.0.1/")
    assert set(errors) == {"name", "target"}
    assert "kind" in errors_of(ps.channel_create, project=project, kind="pager", name="x", target="x")


def test_a_channel_update_keeps_a_blank_target_and_checks_a_new_one(db, public_dns):
    project = make_project()
    channel = ps.channel_create(project=project, kind="slack", name="Ops", target="https://hooks.slack.com/s/1")

    ps.channel_update(channel=channel, name="Ops 2", target="")
    assert "target" in errors_of(ps.channel_update, channel=channel, target="http://127.0.0.1/")

    channel.refresh_from_db()
    assert (channel.name, channel.target) == ("Ops 2", "https://hooks.slack.com/s/1")


def test_rotating_a_secret_replaces_it_and_only_webhooks_have_one(db, public_dns):
    project = make_project()
    hook = ps.channel_create(project=project, kind="webhook", name="h", target="https://example.com/h")
    old = hook.secret

    new = ps.channel_rotate_secret(channel=hook)

    assert new != old and AlertChannel.objects.get(pk=hook.pk).secret == new
    mail = ps.channel_create(project=project, kind="email", name="m", target="a@example.com")
    assert "kind" in errors_of(ps.channel_rotate_secret, channel=mail)


def test_a_test_send_to_a_target_that_now_resolves_privately_is_refused_unsent(db, public_dns):
    project = make_project()
    channel = ps.channel_create(project=project, kind="webhook", name="h", target="https://rebind.example.com/h")
    public_dns["rebind.example.com"] = ["127.0.0.1"]

    ok, message = ps.channel_test(channel=channel, now=project.created_at)

    assert not ok and "loopback, private or link-local" in message
    assert not channel.deliveries.exists()


def test_project_and_tool_thresholds_are_stored_in_the_shape_thresholds_for_reads(db):
    project = make_project()

    ps.thresholds_set(project=project, overrides={"z_retry_rise": 4.5, "min_recent_calls": 300})
    ps.thresholds_set(project=project, overrides={"recent_hours": [3, 6], "z_retry_rise": 5}, tool="lookup")

    project.refresh_from_db()
    assert project.drift_thresholds == {
        "*": {"z_retry_rise": 4.5, "min_recent_calls": 300},
        "lookup": {"recent_hours": [3, 6], "z_retry_rise": 5},
    }
    assert thresholds_for(project, "lookup").min_recent_calls == 300
    assert thresholds_for(project, "lookup").recent_hours == (3, 6)
    assert thresholds_for(project, "other").z_retry_rise == 4.5


def test_resetting_thresholds_removes_the_overrides(db):
    project = make_project(drift_thresholds={"*": {"z_wasted": 4.0}, "lookup": {"z_wasted": 6.0}})

    ps.thresholds_set(project=project, overrides={}, tool="lookup")
    assert project.drift_thresholds == {"*": {"z_wasted": 4.0}}
    ps.thresholds_set(project=project, overrides={})
    project.refresh_from_db()
    assert project.drift_thresholds == {}


def test_project_thresholds_that_break_a_tools_overrides_are_refused(db):
    project = make_project(drift_thresholds={"lookup": {"resolve_ratio": 1.4}})

    errors = errors_of(ps.thresholds_set, project=project, overrides={"min_rise": 1.3})

    assert "tool 'lookup'" in errors["resolve_ratio"][0]
    project.refresh_from_db()
    assert project.drift_thresholds == {"lookup": {"resolve_ratio": 1.4}}


def test_a_tool_override_is_judged_over_the_projects_and_the_star_is_reserved(db):
    project = make_project(drift_thresholds={"*": {"min_rise": 1.3, "resolve_ratio": 1.1}})

    assert "resolve_ratio" in errors_of(ps.thresholds_set, project=project, overrides={"resolve_ratio": 1.35},
                                        tool="lookup")  # fmt: skip
    assert "tool" in errors_of(ps.thresholds_set, project=project, overrides={"z_wasted": 4.0}, tool="*")
    assert "tool" in errors_of(ps.thresholds_set, project=project, overrides={"z_wasted": 4.0}, tool=" ")
