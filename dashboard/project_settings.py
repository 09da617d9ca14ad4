"""Project settings: the services behind the settings pages and the settings API.

Contract:
- Every writer is `<entity>_<action>(*, …)` with keyword-only arguments. It validates,
  writes, and raises `django.core.exceptions.ValidationError` with a dict of
  {field: [message]} when the input is wrong, so a page puts each message beside its
  field and the API answers 400 naming the field. Field names are the form fields'.
- The `clean_*` helpers are pure; where an alert may be sent (URLs, e-mail addresses) is
  vetted by dashboard/alerting/targets.py, which the sender uses again at each send.
- Permissions are the caller's business (`dashboard.scoping.is_owner`): these functions
  trust that the caller may change the project.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from dashboard import drift
from dashboard.alerting.delivery import channel_send_test
from dashboard.alerting.targets import clean_target, clean_target_url
from dashboard.models import AlertChannel, new_channel_secret
from ingest.models import ApiKey, Membership, Project
from ingest.services import api_key_create

RETENTION_MIN_DAYS = 1
RETENTION_MAX_DAYS = 3650
MAX_ESCALATION_TOOLS = 100
MAX_TOOL_NAME = 256  # ToolCall.tool
MAX_NAME = 200  # Project.name, ApiKey.name, AlertChannel.name
MAX_SLUG = 100
# The key of the project-wide overrides in Project.drift_thresholds (dashboard.alerting.evaluation.thresholds_for).
PROJECT_WIDE = "*"


def _invalid(field: str, message: str) -> ValidationError:
    return ValidationError({field: [message]})


def _name(value: Any, field: str = "name") -> str:
    if not isinstance(value, str):
        raise _invalid(field, "Must be text.")
    name = value.strip()
    if not name:
        raise _invalid(field, "Must not be empty.")
    if len(name) > MAX_NAME:
        raise _invalid(field, f"At most {MAX_NAME} characters (got {len(name)}).")
    return name


def _clean_all(checks: dict[str, Any]) -> dict[str, Any]:
    """Run every (field: thunk) check; all their errors together, so every bad field is named at once."""
    values, errors = {}, {}
    for field, check in checks.items():
        try:
            values[field] = check()
        except ValidationError as exc:
            errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    return values


# --- project ---------------------------------------------------------------------------


def clean_retention_days(value: Any) -> int:
    """Whole days in 1..3650; text of digits is accepted (forms), booleans and fractions are not."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool):
        raise _invalid("retention_days", f"Must be a whole number of days, got {value!r}.")
    if not RETENTION_MIN_DAYS <= value <= RETENTION_MAX_DAYS:
        raise _invalid(
            "retention_days", f"Must be between {RETENTION_MIN_DAYS} and {RETENTION_MAX_DAYS} days, got {value}."
        )
    return value


def clean_escalation_tools(value: str | Iterable[str]) -> list[str]:
    """Tool names, one per line (text) or a list: trimmed, blanks dropped, duplicates once, in order."""
    if isinstance(value, str):
        value = value.splitlines()
    names: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise _invalid("escalation_tools", f"Each tool name must be text, got {item!r}.")
        name = item.strip()
        if not name or name in names:
            continue
        if len(name) > MAX_TOOL_NAME:
            raise _invalid("escalation_tools", f"A tool name is at most {MAX_TOOL_NAME} characters: {name[:40]!r}….")
        names.append(name)
    if len(names) > MAX_ESCALATION_TOOLS:
        raise _invalid("escalation_tools", f"At most {MAX_ESCALATION_TOOLS} tools (got {len(names)}).")
    return names


def clean_slug(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _invalid("slug", "Must not be empty.")
    slug = value.strip()
    if len(slug) > MAX_SLUG:
        raise _invalid("slug", f"At most {MAX_SLUG} characters (got {len(slug)}).")
    if not re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", slug):
        raise _invalid("slug", "Use lowercase letters, digits and single hyphens, e.g. 'support-agents'.")
    return slug


@transaction.atomic
def project_create(*, name: str, user, slug: str = "") -> Project:
    """A new project with `user` as its owner. A blank slug is made from the name; a taken one is refused."""
    name = _name(name)
    if not (slug or "").strip():
        slug = slugify(name)[:MAX_SLUG].strip("-")
        if not slug:
            raise _invalid("slug", "The name has no letters or digits to make a slug from; enter one.")
    slug = clean_slug(slug)
    taken = _invalid("slug", f"The slug '{slug}' is taken; choose another.")
    if Project.objects.filter(slug=slug).exists():
        raise taken
    try:
        with transaction.atomic():  # a savepoint: the same slug created meanwhile is a clear error, not a 500
            project = Project.objects.create(name=name, slug=slug)
    except IntegrityError:
        raise taken from None
    Membership.objects.create(project=project, user=user, role=Membership.Role.OWNER)
    return project


def project_update(
    *, project: Project, name: str | None = None, retention_days: Any = None, escalation_tools: Any = None
) -> Project:
    """Change the given fields (None leaves a field as it is). Escalation tools apply to calls received from then on."""
    checks = {}
    if name is not None:
        checks["name"] = lambda: _name(name)
    if retention_days is not None:
        checks["retention_days"] = lambda: clean_retention_days(retention_days)
    if escalation_tools is not None:
        checks["escalation_tools"] = lambda: clean_escalation_tools(escalation_tools)
    values = _clean_all(checks)
    for field, value in values.items():
        setattr(project, field, value)
    if values:
        project.save(update_fields=list(values))
    return project


# --- members ---------------------------------------------------------------------------


def _role(value: Any) -> str:
    if value not in Membership.Role.values:
        raise _invalid("role", f"Must be one of {', '.join(Membership.Role.values)}, got {value!r}.")
    return value


@transaction.atomic
def member_add(*, project: Project, username: str, role: str = Membership.Role.MEMBER) -> Membership:
    """Add an existing user by username; an unknown user or an existing member is refused."""
    role = _role(role)
    username = (username or "").strip()
    if not username:
        raise _invalid("username", "Must not be empty.")
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise _invalid("username", f"No user is called '{username}'. They need an account first.")
    if Membership.objects.filter(project=project, user=user).exists():
        raise _invalid("username", f"'{username}' is already a member of this project.")
    return Membership.objects.create(project=project, user=user, role=role)


def _other_owners(project: Project, membership: Membership) -> int:
    # Locked so that two owners demoting each other at once cannot leave the project
    # ownerless (on SQLite the IMMEDIATE transaction mode serialises writers anyway).
    owners = Membership.objects.select_for_update().filter(project=project, role=Membership.Role.OWNER)
    return sum(1 for row in owners if row.pk != membership.pk)


@transaction.atomic
def member_set_role(*, project: Project, membership: Membership, role: str) -> Membership:
    """Change a member's role; the last owner cannot become a plain member."""
    role = _role(role)
    if membership.role == Membership.Role.OWNER and role != Membership.Role.OWNER:
        if not _other_owners(project, membership):
            raise _invalid("role", "A project needs at least one owner: make someone else an owner first.")
    membership.role = role
    membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def member_remove(*, project: Project, membership: Membership) -> None:
    """Remove a member; never the last owner."""
    if membership.role == Membership.Role.OWNER and not _other_owners(project, membership):
        raise _invalid("member", "The last owner cannot be removed: make someone else an owner first.")
    membership.delete()


# --- API keys --------------------------------------------------------------------------


def api_key_issue(*, project: Project, name: str) -> tuple[ApiKey, str]:
    """A new ingest key named `name`; returns (key, plain). Show the plain key once: only its hash is kept."""
    return api_key_create(project=project, name=_name(name or "default"))


def otlp_env_lines(*, base_url: str, plain_key: str) -> str:
    """The environment lines an OpenTelemetry exporter needs to send to this project."""
    return (
        f"OTEL_EXPORTER_OTLP_ENDPOINT={base_url}\n"
        f'OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer {plain_key}"'
    )


# --- alert channels --------------------------------------------------------------------


def channel_status(channel: AlertChannel) -> str:
    if not channel.is_active:
        return "disabled"
    return "failing" if channel.failing_since else "active"


def _kind(value: Any) -> str:
    if value not in AlertChannel.Kind.values:
        raise _invalid("kind", f"Must be one of {', '.join(AlertChannel.Kind.values)}, got {value!r}.")
    return value


def channel_create(*, project: Project, kind: str, name: str, target: str) -> AlertChannel:
    """A new alert channel; a webhook's signing secret is on `channel.secret` (show it once)."""
    kind = _kind(kind)
    values = _clean_all({"name": lambda: _name(name), "target": lambda: clean_target(kind, target)})
    return AlertChannel.objects.create(project=project, kind=kind, **values)


def channel_update(*, channel: AlertChannel, name: str | None = None, target: str | None = None) -> AlertChannel:
    """Rename and/or re-point a channel (its kind stays). None, or a blank target, leaves a field as it is."""
    checks = {}
    if name is not None:
        checks["name"] = lambda: _name(name)
    if target is not None and not (isinstance(target, str) and not target.strip()):
        checks["target"] = lambda: clean_target(channel.kind, target)
    values = _clean_all(checks)
    for field, value in values.items():
        setattr(channel, field, value)
    if values:
        channel.save(update_fields=list(values))
    return channel


def channel_rotate_secret(*, channel: AlertChannel) -> str:
    """A new signing secret for a webhook channel, returned once; the old one stops verifying at once."""
    if channel.kind != AlertChannel.Kind.WEBHOOK:
        raise _invalid("kind", "Only webhook channels sign their messages.")
    channel.secret = new_channel_secret()
    channel.save(update_fields=["secret"])
    return channel.secret


def channel_delete(*, channel: AlertChannel) -> None:
    """Delete a channel and its delivery log."""
    channel.delete()


def channel_test(*, channel: AlertChannel, now: datetime) -> tuple[bool, str]:
    """Send a test message now and say how it went (see `channel_send_test`).

    The target is checked again first: a host that resolved to a public address when the
    channel was saved may resolve to an internal one now.
    """
    if channel.kind != AlertChannel.Kind.EMAIL:
        try:
            clean_target_url(channel.target)
        except ValidationError as exc:
            return False, exc.message_dict["target"][0]
    return channel_send_test(channel=channel, now=now)


# --- drift thresholds ------------------------------------------------------------------

THRESHOLD_HELP = {
    "baseline_hours": "Hours of history the recent rates are compared with.",
    "recent_hours": "Recent windows scanned, in hours, comma-separated and increasing.",
    "silence_hours": "Recent window of escalation silence, in hours.",
    "resolve_hours": "Window an open alert is judged on for resolving, in hours.",
    "confirm_hours": "Consecutive hourly evaluations that must agree to open an alert.",
    "min_recent_calls": "Calls a recent window needs before anything is judged.",
    "min_baseline_calls": "Calls the baseline needs before anything is judged.",
    "min_baseline_hours": "Hours with calls the baseline needs.",
    "min_recent_events": "Effective events (retries, errors) a recent window needs.",
    "z_retry_rise": "Significance (z) to open 'retry rate up, error rate flat', tested on the calls a retry rescued.",
    "z_retry_count": "Significance (z) of the retry count itself, the second test of 'retry rate up, error rate flat' (longer retry chains).",
    "z_error_spike": "Significance (z) to open 'error rate spike'.",
    "z_wasted": "Significance (z) to open 'wasted retries'.",
    "z_silence": "Significance (z) to open 'escalation silence'.",
    "short_window_extra_z": "Extra z a shorter recent window must clear.",
    "min_rise": "Minimum recent / baseline rate to open a rise alert.",
    "max_dispersion": "Cap on the estimated overdispersion.",
    "flat_error_max_ratio": "Error rate counts as flat below this recent / baseline ratio…",
    "flat_error_max_z": "…or below this significance.",
    "wasted_min_rate": "Wasted retries per call a rise must reach to matter.",
    "wasted_floor": "Wasted retries per call significantly above this always fire.",
    "silence_min_expected": "Escalations the baseline must predict before silence is judged.",
    "silence_max_fraction": "Share of expected escalations that counts as silence.",
    "silence_resolve_fraction": "Share of expected escalations back that resolves silence.",
    "resolve_ratio": "An open rise alert resolves once the rate is within this ratio of baseline.",
}
THRESHOLD_NAMES = tuple(f.name for f in fields(drift.Thresholds))


def threshold_kind(name: str) -> str:
    """'int', 'float' or 'hours' (a list of whole hours), from the default's type."""
    default = getattr(drift.DEFAULT_THRESHOLDS, name)
    if isinstance(default, tuple):
        return "hours"
    return "int" if isinstance(default, int) else "float"


def _format(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _message(exc: ValueError, name: str) -> str:
    # drift's messages start with the key ("z_wasted: must be …"); the form shows it beside the field.
    text = str(exc)
    prefix = f"{name}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def _error_field(exc: ValueError) -> str:
    head = str(exc).split(":", 1)[0]
    return head if head in THRESHOLD_NAMES else "thresholds"


def thresholds_parse_form(data: Mapping[str, str]) -> dict[str, Any]:
    """Typed, checked overrides from form text: a blank field is no override. Pure.

    Raises ValidationError naming every field that is not a number of the right kind or
    out of its range.
    """
    overrides: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for name in THRESHOLD_NAMES:
        text = (data.get(name) or "").strip()
        if not text:
            continue
        kind = threshold_kind(name)
        try:
            if kind == "hours":
                overrides[name] = [int(part) for part in text.split(",") if part.strip()]
            elif kind == "int":
                overrides[name] = int(text)
            else:
                overrides[name] = float(text)
        except ValueError:
            expected = {"hours": "whole hours separated by commas", "int": "a whole number", "float": "a number"}[kind]
            errors[name] = [f"Must be {expected}, got {text[:40]!r}."]
    # The ones that parsed may still be out of range: name those too, all at once. Pairs
    # that must agree are judged by thresholds_set, over the project's own overrides.
    errors.update(_field_errors(overrides))
    if errors:
        raise ValidationError(errors)
    return overrides


def _field_errors(overrides: Mapping[str, Any]) -> dict[str, list[str]]:
    """Type and range of each field on its own, so that every bad field is named at once.

    The pairs that must agree (resolve_ratio < min_rise, …) are judged together, after.
    """
    errors: dict[str, list[str]] = {}
    for key, value in overrides.items():
        try:
            # drift keeps the per-field rules in its (private) _check; reuse them rather than copy them.
            drift._check(key, tuple(value) if isinstance(value, list) else value)
        except ValueError as exc:
            errors[key] = [_message(exc, key)]
    return errors


def thresholds_check(overrides: Any, *, base: drift.Thresholds = drift.DEFAULT_THRESHOLDS) -> drift.Thresholds:
    """`base` with `overrides` applied, or ValidationError naming the field (type, range, consistency)."""
    if not isinstance(overrides, Mapping):
        raise _invalid("thresholds", f"Expected an object of threshold names, got {type(overrides).__name__}.")
    unknown = [key for key in overrides if key not in THRESHOLD_NAMES]
    if unknown:
        raise ValidationError({key: [f"Unknown threshold (known: {', '.join(THRESHOLD_NAMES)})."] for key in unknown})
    errors = _field_errors(overrides)
    if errors:
        raise ValidationError(errors)
    try:
        return base.with_overrides(dict(overrides))
    except ValueError as exc:  # a consistent pair broken only together (e.g. resolve_ratio >= min_rise)
        field = _error_field(exc)
        raise _invalid(field, _message(exc, field)) from None


def _tool_name(tool: Any) -> str:
    if not isinstance(tool, str) or not tool.strip():
        raise _invalid("tool", "Name the tool.")
    tool = tool.strip()
    if tool == PROJECT_WIDE:
        raise _invalid("tool", f"'{PROJECT_WIDE}' stands for every tool; use the project thresholds.")
    if len(tool) > MAX_TOOL_NAME:
        raise _invalid("tool", f"At most {MAX_TOOL_NAME} characters.")
    return tool


def _json_ready(overrides: Mapping[str, Any]) -> dict[str, Any]:
    return {key: list(value) if isinstance(value, tuple) else value for key, value in overrides.items()}


@transaction.atomic
def thresholds_set(*, project: Project, overrides: Mapping[str, Any], tool: str | None = None) -> dict[str, Any]:
    """Replace the project-wide (tool None) or one tool's overrides; `{}` resets them to the defaults.

    The result must stay valid for every tool with overrides, since they layer over the
    project's (`dashboard.alerting.evaluation.thresholds_for`). Returns the stored overrides.
    """
    key = PROJECT_WIDE if tool is None else _tool_name(tool)
    # Locked read-modify-write: two owners saving different tools must not lose one of them.
    locked = Project.objects.select_for_update().get(pk=project.pk)
    stored = dict(locked.drift_thresholds or {})
    project_base = thresholds_check(stored.get(PROJECT_WIDE) or {}) if key != PROJECT_WIDE else None
    checked = thresholds_check(overrides, base=project_base or drift.DEFAULT_THRESHOLDS)
    if key == PROJECT_WIDE:
        for other, other_overrides in stored.items():
            if other == PROJECT_WIDE or not other_overrides:
                continue
            try:
                checked.with_overrides(other_overrides)
            except ValueError as exc:
                field = _error_field(exc)
                raise _invalid(field, f"{_message(exc, field)} (with the overrides of tool '{other}').") from None
    clean = _json_ready({name: getattr(checked, name) for name in overrides})
    if clean:
        stored[key] = clean
    else:
        stored.pop(key, None)
    locked.drift_thresholds = stored
    locked.save(update_fields=["drift_thresholds"])
    project.drift_thresholds = stored
    return clean


@dataclass(frozen=True)
class ThresholdRow:
    name: str
    kind: str
    help: str
    default: str
    project: str  # the project-wide override, "" when none
    tool: str  # the chosen tool's override, "" when none
    effective: str


def threshold_rows(project: Project, tool: str | None = None) -> list[ThresholdRow]:
    """Every threshold: default, project override, the tool's override and the effective value. No queries."""
    stored = project.drift_thresholds or {}
    project_overrides = stored.get(PROJECT_WIDE) or {}
    tool_overrides = (stored.get(tool) or {}) if tool else {}
    try:
        effective = drift.Thresholds.from_overrides(project_overrides).with_overrides(tool_overrides)
    except ValueError:  # stored by hand and broken: show the defaults as effective rather than fail the page
        effective = drift.DEFAULT_THRESHOLDS
    return [
        ThresholdRow(
            name=name,
            kind=threshold_kind(name),
            help=THRESHOLD_HELP.get(name, ""),
            default=_format(getattr(drift.DEFAULT_THRESHOLDS, name)),
            project=_format(project_overrides.get(name)),
            tool=_format(tool_overrides.get(name)),
            effective=_format(getattr(effective, name)),
        )
        for name in THRESHOLD_NAMES
    ]


def thresholds_summary(project: Project, tool: str | None = None) -> dict[str, Any]:
    """Defaults, the project's overrides, every tool's overrides and the effective values (for `tool` if given)."""
    stored = project.drift_thresholds or {}
    try:
        effective = drift.Thresholds.from_overrides(stored.get(PROJECT_WIDE)).with_overrides(
            stored.get(tool) if tool else None
        )
        effective_dict = effective.to_dict()
    except ValueError:
        effective_dict = drift.DEFAULT_THRESHOLDS.to_dict()
    return {
        "defaults": drift.DEFAULT_THRESHOLDS.to_dict(),
        "project": stored.get(PROJECT_WIDE) or {},
        "tools": {name: overrides for name, overrides in sorted(stored.items()) if name != PROJECT_WIDE},
        "tool": tool,
        "effective": effective_dict,
    }
