"""Settings pages: project, members, API keys, alert channels, drift thresholds.

Members see a project's settings read-only (no secrets); only owners (and superusers)
change anything, and outsiders get 404. Every change is a POST (CSRF) that redirects
with a message, except the three that show a secret once: a new API key, a new webhook
channel's signing secret and a rotated one are shown on the page answering the POST,
marked not to be cached, and never again.
"""

from __future__ import annotations

import datetime as dt

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST

from dashboard import project_settings as ps
from dashboard.alerting import targets
from dashboard.alerting.delivery import channel_reenable as reenable
from dashboard.models import AlertChannel, ToolRollup
from dashboard.scoping import is_owner
from dashboard.throttles import channel_test_refusal, channel_test_wait
from dashboard.views.common import PageScope, page_scope
from ingest.models import ApiKey, Membership
from ingest.services import api_key_revoke

OWNERS_ONLY = "Only the project's owners can change its settings."
# Tools offered in the thresholds page's tool chooser: those seen lately (any name may be typed).
KNOWN_TOOLS_DAYS = 30
KNOWN_TOOLS_LIMIT = 500


# --- forms: types and labels only; the services judge the values -----------------------


class _PlainLabelsForm(forms.Form):
    """Labels without Django's trailing colon ("Name", not "Name:"), like every other form of the app."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)


class _SectionForm(_PlainLabelsForm):
    """The settings page holds several forms: each gets its own element ids, so a label's
    `for` finds its own field (two `id_name`s would send "Key name" to the project's name)."""

    id_prefix = "form"

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", f"{self.id_prefix}_%s")
        super().__init__(*args, **kwargs)


class ProjectForm(_SectionForm):
    id_prefix = "project"
    name = forms.CharField(max_length=ps.MAX_NAME)
    retention_days = forms.IntegerField(
        label="Retention (days)",
        widget=forms.NumberInput(attrs={"min": ps.RETENTION_MIN_DAYS, "max": ps.RETENTION_MAX_DAYS}),
        help_text="Raw spans and tool calls older than this are deleted by the retention job. "
        "Rollups, alerts and eval-case snapshots stay. 1 to 3650 days.",
    )
    escalation_tools = forms.CharField(
        label="Escalation tools",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Tools whose call means the agent handed over to a human, one per line. "
        "Applies to tool calls received from now on.",
    )


class ProjectCreateForm(_PlainLabelsForm):
    name = forms.CharField(max_length=ps.MAX_NAME)
    slug = forms.CharField(
        required=False, max_length=ps.MAX_SLUG,
        help_text="Used in URLs: lowercase letters, digits and hyphens. Leave blank to make one from the name.",
    )  # fmt: skip


class MemberAddForm(_SectionForm):
    id_prefix = "member"
    username = forms.CharField(max_length=150, help_text="Someone who already has a Toolwatch account.")
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)


class KeyForm(_SectionForm):
    id_prefix = "key"
    name = forms.CharField(
        label="Key name", max_length=ps.MAX_NAME, initial="default",
        help_text="A label to tell keys apart, e.g. the service or environment that uses it.",
    )  # fmt: skip


class ChannelForm(_PlainLabelsForm):
    kind = forms.ChoiceField(
        choices=AlertChannel.Kind.choices,
        help_text="Webhook: a signed JSON POST. Slack: a Slack-compatible incoming-webhook URL. Email: addresses.",
    )
    # Not required here: the service names an empty field along with every other problem.
    name = forms.CharField(max_length=ps.MAX_NAME, required=False)
    target = forms.CharField(
        label="Target", max_length=targets.MAX_URL, required=False,
        help_text="The http(s) URL for a webhook or Slack; comma-separated e-mail addresses for e-mail.",
    )  # fmt: skip

    def __init__(self, *args, channel: AlertChannel | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if channel is None:
            return
        del self.fields["kind"]  # a channel keeps its kind; make a new one to change it
        if channel.kind == AlertChannel.Kind.EMAIL:
            self.fields["target"].label = "E-mail addresses"
            self.fields["target"].help_text = "Comma-separated."
        else:
            # The stored URL is not echoed back: a Slack webhook URL is a credential.
            self.fields["target"].required = False
            self.fields["target"].label = "New URL"
            self.fields["target"].help_text = (
                f"Now {targets.target_masked(channel.kind, channel.target)} Leave blank to keep it."
            )


# --- helpers ----------------------------------------------------------------------------


def _owner_scope(request, project: str) -> PageScope:
    """The page scope of a change: 404 for outsiders (as for reads), 403 for members."""
    scope = page_scope(request, project)
    if not is_owner(request.user, scope.project):
        raise PermissionDenied(OWNERS_ONLY)
    return scope


def _back(scope: PageScope, anchor: str = ""):
    return redirect(reverse("settings", args=[scope.project.slug]) + (f"#{anchor}" if anchor else ""))


def _apply(form: forms.Form, exc: ValidationError) -> None:
    """Put a service's {field: messages} beside the form's fields (others above the form)."""
    for field, errors in exc.message_dict.items():
        form.add_error(field if field in form.fields else None, errors)


def _secret_page(request, template: str, context: dict):
    response = render(request, template, context)
    add_never_cache_headers(response)  # a secret must not be kept by the browser or a proxy
    return response


def _channel_rows(channels) -> list[dict]:
    return [
        {"channel": c, "target": targets.target_masked(c.kind, c.target), "status": ps.channel_status(c)} for c in channels
    ]


def _home_context(request, scope: PageScope, **forms_) -> dict:
    project = scope.project
    owner = is_owner(request.user, project)
    stored = project.drift_thresholds or {}
    initial = {
        "name": project.name,
        "retention_days": project.retention_days,
        "escalation_tools": "\n".join(project.escalation_tools or []),
    }
    return scope.context(
        title="Settings",
        can_change=owner,
        project_form=forms_.get("project_form") or ProjectForm(initial=initial),
        member_form=forms_.get("member_form") or MemberAddForm(),
        key_form=forms_.get("key_form") or KeyForm(),
        memberships=Membership.objects.filter(project=project).select_related("user").order_by("user__username"),
        roles=Membership.Role.choices,
        keys=list(ApiKey.objects.filter(project=project)),
        channels=_channel_rows(AlertChannel.objects.filter(project=project)),
        threshold_project_count=len(stored.get(ps.PROJECT_WIDE) or {}),
        threshold_tools=sorted(tool for tool, values in stored.items() if tool != ps.PROJECT_WIDE and values),
    )


# --- the settings page and the project section -----------------------------------------------



def _error_text(exc: ValidationError) -> str:
    """A service's ValidationError as one message line (the fields' messages, in order)."""
    return " ".join(message for messages in exc.message_dict.values() for message in messages)

@login_required
def settings(request, project):
    scope = page_scope(request, project)
    return render(request, "dashboard/settings.html", _home_context(request, scope))


@login_required
@require_POST
def project_update(request, project):
    scope = _owner_scope(request, project)
    form = ProjectForm(request.POST)
    if form.is_valid():
        try:
            ps.project_update(project=scope.project, **form.cleaned_data)
        except ValidationError as exc:
            _apply(form, exc)
        else:
            messages.success(request, "Project settings saved.")
            return _back(scope, "project")
    return render(request, "dashboard/settings.html", _home_context(request, scope, project_form=form))


@login_required
@require_http_methods(["GET", "POST"])
def project_create(request):
    form = ProjectCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            created = ps.project_create(user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            _apply(form, exc)
        else:
            messages.success(request, f"Project {created.name} created. Create an API key below to send spans.")
            return redirect(reverse("settings", args=[created.slug]) + "#keys")
    return render(request, "dashboard/settings_project_new.html", {"form": form, "title": "New project"})


# --- members ------------------------------------------------------------------------------


@login_required
@require_POST
def member_add(request, project):
    scope = _owner_scope(request, project)
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            added = ps.member_add(project=scope.project, **form.cleaned_data)
        except ValidationError as exc:
            _apply(form, exc)
        else:
            messages.success(request, f"{added.user.username} added as {added.role}.")
            return _back(scope, "members")
    return render(request, "dashboard/settings.html", _home_context(request, scope, member_form=form))


@login_required
@require_POST
def member_role(request, project, pk):
    scope = _owner_scope(request, project)
    membership = get_object_or_404(Membership.objects.select_related("user"), project=scope.project, pk=pk)
    try:
        ps.member_set_role(project=scope.project, membership=membership, role=request.POST.get("role", ""))
    except ValidationError as exc:
        messages.error(request, _error_text(exc))
    else:
        messages.success(request, f"{membership.user.username} is now {membership.role}.")
    return _back(scope, "members")


@login_required
@require_POST
def member_remove(request, project, pk):
    scope = _owner_scope(request, project)
    membership = get_object_or_404(Membership.objects.select_related("user"), project=scope.project, pk=pk)
    try:
        ps.member_remove(project=scope.project, membership=membership)
    except ValidationError as exc:
        messages.error(request, _error_text(exc))
        return _back(scope, "members")
    messages.success(request, f"{membership.user.username} removed from {scope.project.name}.")
    if membership.user_id == request.user.pk and not request.user.is_superuser:
        return redirect("home")  # left the project: its pages are 404 now
    return _back(scope, "members")


# --- API keys ----------------------------------------------------------------------------


@login_required
@require_POST
def key_create(request, project):
    scope = _owner_scope(request, project)
    form = KeyForm(request.POST)
    if form.is_valid():
        try:
            key, plain = ps.api_key_issue(project=scope.project, name=form.cleaned_data["name"])
        except ValidationError as exc:
            _apply(form, exc)
        else:
            base_url = request.build_absolute_uri("/").rstrip("/")
            return _secret_page(request, "dashboard/settings_key_created.html", scope.context(
                title="New API key", key=key, plain=plain,
                env_lines=ps.otlp_env_lines(base_url=base_url, plain_key=plain),
            ))  # fmt: skip
    return render(request, "dashboard/settings.html", _home_context(request, scope, key_form=form))


@login_required
@require_POST
def key_revoke(request, project, pk):
    scope = _owner_scope(request, project)
    key = get_object_or_404(ApiKey, project=scope.project, pk=pk)
    already = key.revoked_at is not None
    api_key_revoke(key=key)
    if already:
        messages.info(request, f"Key {key.prefix}… ({key.name}) was already revoked.")
    else:
        messages.success(request, f"Key {key.prefix}… ({key.name}) revoked: spans sent with it are refused (403).")
    return _back(scope, "keys")


# --- alert channels ------------------------------------------------------------------------


def _channel(scope: PageScope, pk: int) -> AlertChannel:
    return get_object_or_404(AlertChannel, project=scope.project, pk=pk)


@login_required
@require_http_methods(["GET", "POST"])
def channel_create(request, project):
    scope = _owner_scope(request, project)
    form = ChannelForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            channel = ps.channel_create(project=scope.project, **form.cleaned_data)
        except ValidationError as exc:
            _apply(form, exc)
        else:
            if channel.kind == AlertChannel.Kind.WEBHOOK:
                return _secret_page(request, "dashboard/settings_channel_secret.html", scope.context(
                    title="Channel created", channel=channel, secret=channel.secret, created=True,
                ))  # fmt: skip
            messages.success(request, f"Channel {channel.name} created. Send a test to check it.")
            return _back(scope, "channels")
    return render(request, "dashboard/settings_channel_form.html", scope.context(title="New alert channel", form=form))


@login_required
@require_http_methods(["GET", "POST"])
def channel_edit(request, project, pk):
    scope = _owner_scope(request, project)
    channel = _channel(scope, pk)
    initial = {"name": channel.name}
    if channel.kind == AlertChannel.Kind.EMAIL:
        initial["target"] = channel.target
    form = ChannelForm(request.POST or None, channel=channel, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            ps.channel_update(channel=channel, **form.cleaned_data)
        except ValidationError as exc:
            _apply(form, exc)
        else:
            messages.success(request, f"Channel {channel.name} saved.")
            return _back(scope, "channels")
    return render(request, "dashboard/settings_channel_form.html", scope.context(
        title=f"Edit channel {channel.name}", form=form, channel=channel,
        target=targets.target_masked(channel.kind, channel.target), status=ps.channel_status(channel),
    ))  # fmt: skip


@login_required
@require_POST
def channel_test(request, project, pk):
    scope = _owner_scope(request, project)
    channel = _channel(scope, pk)
    if (wait := channel_test_wait(request)) is not None:  # a test mails or posts to any target typed
        messages.error(request, f"{channel.name}: {channel_test_refusal(wait)}")
        return _back(scope, "channels")
    ok, message = ps.channel_test(channel=channel, now=timezone.now())
    if ok:
        messages.success(request, f"{channel.name}: {message}")
    else:
        messages.error(request, f"{channel.name}: the test failed: {message}")
    return _back(scope, "channels")


@login_required
@require_POST
def channel_reenable(request, project, pk):
    scope = _owner_scope(request, project)
    channel = _channel(scope, pk)
    reenable(channel=channel)
    messages.success(request, f"{channel.name} re-enabled: new alerts will be sent to it.")
    return _back(scope, "channels")


@login_required
@require_POST
def channel_rotate(request, project, pk):
    scope = _owner_scope(request, project)
    channel = _channel(scope, pk)
    try:
        secret = ps.channel_rotate_secret(channel=channel)
    except ValidationError as exc:
        messages.error(request, _error_text(exc))
        return _back(scope, "channels")
    return _secret_page(request, "dashboard/settings_channel_secret.html", scope.context(
        title="Signing secret rotated", channel=channel, secret=secret, created=False,
    ))  # fmt: skip


@login_required
@require_POST
def channel_delete(request, project, pk):
    scope = _owner_scope(request, project)
    channel = _channel(scope, pk)
    name = channel.name
    ps.channel_delete(channel=channel)
    messages.success(request, f"Channel {name} deleted.")
    return _back(scope, "channels")


# --- drift thresholds ------------------------------------------------------------------------


def _known_tools(scope: PageScope) -> list[str]:
    since = timezone.now() - dt.timedelta(days=KNOWN_TOOLS_DAYS)
    seen = (
        ToolRollup.objects.filter(project=scope.project, resolution=ToolRollup.Resolution.HOUR, bucket_start__gte=since)
        .values_list("tool", flat=True)
        .distinct()
        .order_by("tool")[:KNOWN_TOOLS_LIMIT]
    )
    overridden = [tool for tool in (scope.project.drift_thresholds or {}) if tool != ps.PROJECT_WIDE]
    return sorted({*seen, *overridden})


def _thresholds_page(request, scope: PageScope, tool: str, *, entered=None, errors=None, error_scope=""):
    """The thresholds table; after a refused POST, the entered text and the errors stay in the edited column."""
    entered, errors = entered or {}, errors or {}
    rows = []
    for row in ps.threshold_rows(scope.project, tool or None):
        cells = {"project": (row.project, []), "tool": (row.tool, [])}
        if error_scope in cells:
            cells[error_scope] = (entered.get(row.name, ""), errors.get(row.name, []))
        rows.append({"row": row, "project": cells["project"], "tool": cells["tool"]})
    other_errors = [f"{k}: {' '.join(v)}" if k != "thresholds" else " ".join(v)
                    for k, v in errors.items() if k not in ps.THRESHOLD_NAMES]  # fmt: skip
    return render(request, "dashboard/settings_thresholds.html", scope.context(
        title="Drift thresholds", can_change=is_owner(request.user, scope.project), rows=rows, tool=tool,
        known_tools=_known_tools(scope), error_scope=error_scope, other_errors=other_errors,
    ))  # fmt: skip


@login_required
@require_http_methods(["GET", "POST"])
def thresholds(request, project):
    if request.method == "GET":
        scope = page_scope(request, project)
        return _thresholds_page(request, scope, request.GET.get("tool", "").strip())
    scope = _owner_scope(request, project)
    scope_name = request.POST.get("scope", "project")
    tool = request.POST.get("tool", "").strip() if scope_name == "tool" else ""
    try:
        if scope_name == "tool" and not tool:
            raise ValidationError({"tool": ["Choose a tool first."]})
        overrides = ps.thresholds_parse_form(request.POST)
        ps.thresholds_set(project=scope.project, overrides=overrides, tool=tool or None)
    except ValidationError as exc:
        return _thresholds_page(
            request, scope, tool or request.POST.get("tool", "").strip(), entered=request.POST,
            errors=exc.message_dict, error_scope=scope_name,
        )  # fmt: skip
    what = f"Thresholds of {tool}" if tool else "Project thresholds"
    messages.success(request, f"{what} saved.")
    return _thresholds_redirect(scope, tool)


@login_required
@require_POST
def thresholds_reset(request, project):
    scope = _owner_scope(request, project)
    tool = request.POST.get("tool", "").strip()
    try:
        ps.thresholds_set(project=scope.project, overrides={}, tool=tool or None)
    except ValidationError as exc:
        messages.error(request, " ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items()))
    else:
        done = f"The overrides of {tool} removed." if tool else "Project thresholds reset to the defaults."
        messages.success(request, done)
    return _thresholds_redirect(scope, tool)


def _thresholds_redirect(scope: PageScope, tool: str):
    url = reverse("settings-thresholds", args=[scope.project.slug])
    if tool:
        url += "?" + urlencode({"tool": tool})
    return redirect(url)


urlpatterns = [
    path("projects/new/", project_create, name="settings-project-create"),
    path("p/<slug:project>/settings/", settings, name="settings"),
    path("p/<slug:project>/settings/project/", project_update, name="settings-project"),
    path("p/<slug:project>/settings/members/", member_add, name="settings-member-add"),
    path("p/<slug:project>/settings/members/<int:pk>/role/", member_role, name="settings-member-role"),
    path("p/<slug:project>/settings/members/<int:pk>/remove/", member_remove, name="settings-member-remove"),
    path("p/<slug:project>/settings/keys/", key_create, name="settings-key-create"),
    path("p/<slug:project>/settings/keys/<int:pk>/revoke/", key_revoke, name="settings-key-revoke"),
    path("p/<slug:project>/settings/channels/new/", channel_create, name="settings-channel-create"),
    path("p/<slug:project>/settings/channels/<int:pk>/", channel_edit, name="settings-channel-edit"),
    path("p/<slug:project>/settings/channels/<int:pk>/test/", channel_test, name="settings-channel-test"),
    path("p/<slug:project>/settings/channels/<int:pk>/reenable/", channel_reenable, name="settings-channel-reenable"),
    path("p/<slug:project>/settings/channels/<int:pk>/rotate-secret/", channel_rotate, name="settings-channel-rotate"),
    path("p/<slug:project>/settings/channels/<int:pk>/delete/", channel_delete, name="settings-channel-delete"),
    path("p/<slug:project>/settings/thresholds/", thresholds, name="settings-thresholds"),
    path("p/<slug:project>/settings/thresholds/reset/", thresholds_reset, name="settings-thresholds-reset"),
]
