"""Settings API: project settings, ingest API keys, alert channels, drift thresholds.

Every route is under /api/v1/projects/<slug>/ and scoped like the pages: an outsider
gets 404, a member may read (channel targets masked, no secrets), only owners (and
superusers) change anything (403 otherwise), and a token changes anything only with its
`admin` scope (dashboard/api/auth.py, HasScope). Bad input is a 400 naming the field. A new
key's plain value and a webhook's signing secret are in the answer that made them, once.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from django.urls import path
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied, Throttled, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard import project_settings as ps
from dashboard.alerting import targets
from dashboard.alerting.delivery import channel_reenable
from dashboard.api.base import ProjectScopedMixin
from dashboard.models import AlertChannel
from dashboard.scoping import is_owner
from dashboard.throttles import channel_test_refusal, channel_test_wait
from ingest.models import ApiKey
from ingest.services import api_key_revoke

OWNERS_ONLY = "Only the project's owners can change its settings."
TAGS = ["settings"]


def _call(service, **kwargs):
    """Run a service; its {field: messages} become a 400 naming each field."""
    try:
        return service(**kwargs)
    except DjangoValidationError as exc:
        raise ValidationError(exc.message_dict) from None


class _SettingsView(ProjectScopedMixin, APIView):
    def require_owner(self) -> None:
        if not is_owner(self.request.user, self.project):  # self.project 404s outsiders first
            raise PermissionDenied(OWNERS_ONLY)

    def channel(self, pk: int) -> AlertChannel:
        return get_object_or_404(AlertChannel, project=self.project, pk=pk)


_ERRORS = {
    400: OpenApiResponse(description="Bad input: `{field: [message]}`."),
    403: OpenApiResponse(description="Not an owner of the project."),
    404: OpenApiResponse(description="No such project (or not one of yours)."),
    429: OpenApiResponse(description="Too many test sends: `detail` says the limit; Retry-After, the seconds to wait."),
}


def _responses(ok: dict, *codes: int) -> dict:
    return {**ok, **{code: _ERRORS[code] for code in codes}}


# --- project settings ------------------------------------------------------------------------


class ProjectSettingsOut(serializers.Serializer):
    name = serializers.CharField()
    slug = serializers.SlugField()
    retention_days = serializers.IntegerField(
        help_text="Days of raw spans kept; rollups, alerts and eval snapshots stay."
    )
    escalation_tools = serializers.ListField(
        child=serializers.CharField(), help_text="Tools whose call is a hand-off to a human."
    )


class ProjectSettingsIn(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    retention_days = serializers.IntegerField(required=False, help_text="1 to 3650.")
    escalation_tools = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)


def _project_out(project) -> dict:
    return ProjectSettingsOut(
        {"name": project.name, "slug": project.slug, "retention_days": project.retention_days,
         "escalation_tools": project.escalation_tools or []}  # fmt: skip
    ).data


class ProjectSettingsView(_SettingsView):
    @extend_schema(tags=TAGS, summary="Project settings", responses=_responses({200: ProjectSettingsOut}, 404))
    def get(self, request, project):
        return Response(_project_out(self.project))

    @extend_schema(
        tags=TAGS, summary="Change project settings (owners)", request=ProjectSettingsIn,
        responses=_responses({200: ProjectSettingsOut}, 400, 403, 404),
    )  # fmt: skip
    def patch(self, request, project):
        self.require_owner()
        data = ProjectSettingsIn(data=request.data)
        data.is_valid(raise_exception=True)
        _call(ps.project_update, project=self.project, **data.validated_data)
        return Response(_project_out(self.project))


# --- API keys ------------------------------------------------------------------------------


class ApiKeyOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The visible start of the key.")
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    is_active = serializers.BooleanField()


class ApiKeyCreatedOut(ApiKeyOut):
    key = serializers.CharField(help_text="The plain key: shown in this answer only, never again.")


class ApiKeyIn(serializers.Serializer):
    name = serializers.CharField(required=False, default="default", allow_blank=True)


class ApiKeysView(_SettingsView):
    @extend_schema(tags=TAGS, summary="Ingest API keys", responses=_responses({200: ApiKeyOut(many=True)}, 404))
    def get(self, request, project):
        return Response(ApiKeyOut(ApiKey.objects.filter(project=self.project), many=True).data)

    @extend_schema(
        tags=TAGS, summary="Create an ingest API key (owners); the plain key is in this answer only",
        request=ApiKeyIn, responses=_responses({201: ApiKeyCreatedOut}, 400, 403, 404),
    )  # fmt: skip
    def post(self, request, project):
        self.require_owner()
        data = ApiKeyIn(data=request.data)
        data.is_valid(raise_exception=True)
        key, plain = _call(ps.api_key_issue, project=self.project, name=data.validated_data["name"])
        body = dict(ApiKeyOut(key).data, key=plain)
        response = Response(body, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response


class ApiKeyRevokeView(_SettingsView):
    @extend_schema(
        tags=TAGS, summary="Revoke an ingest API key (owners); spans sent with it are refused from now on",
        request=None, responses=_responses({200: ApiKeyOut}, 403, 404),
    )  # fmt: skip
    def post(self, request, project, pk):
        self.require_owner()
        key = get_object_or_404(ApiKey, project=self.project, pk=pk)
        api_key_revoke(key=key)
        return Response(ApiKeyOut(key).data)


# --- alert channels ------------------------------------------------------------------------


class ChannelOut(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=AlertChannel.Kind.choices)
    name = serializers.CharField()
    target = serializers.SerializerMethodField(
        help_text="Masked: the scheme and host of a URL, the domains of e-mails."
    )
    status = serializers.SerializerMethodField(help_text="active, failing (see failing_since, last_error) or disabled.")
    is_active = serializers.BooleanField()
    failing_since = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField()
    created_at = serializers.DateTimeField()

    def get_target(self, channel) -> str:
        return targets.target_masked(channel.kind, channel.target)

    def get_status(self, channel) -> str:
        return ps.channel_status(channel)


class ChannelCreatedOut(ChannelOut):
    secret = serializers.CharField(
        allow_null=True, help_text="A webhook's signing secret, in this answer only; null for other kinds."
    )


class ChannelIn(serializers.Serializer):
    kind = serializers.ChoiceField(choices=AlertChannel.Kind.choices)
    name = serializers.CharField(allow_blank=True)
    target = serializers.CharField(
        allow_blank=True, help_text="An http(s) URL (webhook, slack) or comma-separated e-mail addresses."
    )


class ChannelPatchIn(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True)
    target = serializers.CharField(required=False, allow_blank=True, help_text="Blank or absent: unchanged.")


class ChannelTestOut(serializers.Serializer):
    ok = serializers.BooleanField()
    message = serializers.CharField()


class SecretOut(serializers.Serializer):
    secret = serializers.CharField(help_text="The new signing secret, in this answer only.")


def _no_store(response: Response) -> Response:
    response["Cache-Control"] = "no-store"
    return response


class ChannelsView(_SettingsView):
    @extend_schema(
        tags=TAGS, summary="Alert channels (targets masked)", responses=_responses({200: ChannelOut(many=True)}, 404)
    )
    def get(self, request, project):
        return Response(ChannelOut(AlertChannel.objects.filter(project=self.project), many=True).data)

    @extend_schema(
        tags=TAGS, summary="Create an alert channel (owners)", request=ChannelIn,
        responses=_responses({201: ChannelCreatedOut}, 400, 403, 404),
    )  # fmt: skip
    def post(self, request, project):
        self.require_owner()
        data = ChannelIn(data=request.data)
        data.is_valid(raise_exception=True)
        channel = _call(ps.channel_create, project=self.project, **data.validated_data)
        secret = channel.secret if channel.kind == AlertChannel.Kind.WEBHOOK else None
        return _no_store(Response(dict(ChannelOut(channel).data, secret=secret), status=status.HTTP_201_CREATED))


class ChannelView(_SettingsView):
    @extend_schema(tags=TAGS, summary="One alert channel (target masked)", responses=_responses({200: ChannelOut}, 404))
    def get(self, request, project, pk):
        return Response(ChannelOut(self.channel(pk)).data)

    @extend_schema(
        tags=TAGS, summary="Rename or re-point an alert channel (owners)", request=ChannelPatchIn,
        responses=_responses({200: ChannelOut}, 400, 403, 404),
    )  # fmt: skip
    def patch(self, request, project, pk):
        self.require_owner()
        channel = self.channel(pk)
        data = ChannelPatchIn(data=request.data)
        data.is_valid(raise_exception=True)
        _call(ps.channel_update, channel=channel, **data.validated_data)
        return Response(ChannelOut(channel).data)

    @extend_schema(
        tags=TAGS, summary="Delete an alert channel (owners)",
        responses=_responses({204: OpenApiResponse(description="Deleted.")}, 403, 404),
    )  # fmt: skip
    def delete(self, request, project, pk):
        self.require_owner()
        ps.channel_delete(channel=self.channel(pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ChannelTestView(_SettingsView):
    @extend_schema(
        tags=TAGS, summary="Send a test message now (owners) and say how it went", request=None,
        responses=_responses({200: ChannelTestOut}, 403, 404, 429),
    )  # fmt: skip
    def post(self, request, project, pk):
        self.require_owner()
        channel = self.channel(pk)
        if (wait := channel_test_wait(request)) is not None:  # one budget per user with the settings page
            raise Throttled(wait=wait, detail=channel_test_refusal(wait))
        ok, message = ps.channel_test(channel=channel, now=timezone.now())
        return Response({"ok": ok, "message": message})


class ChannelReenableView(_SettingsView):
    @extend_schema(
        tags=TAGS, summary="Re-enable a failing or disabled channel (owners)", request=None,
        responses=_responses({200: ChannelOut}, 403, 404),
    )  # fmt: skip
    def post(self, request, project, pk):
        self.require_owner()
        channel = self.channel(pk)
        channel_reenable(channel=channel)
        return Response(ChannelOut(channel).data)


class ChannelRotateView(_SettingsView):
    @extend_schema(
        tags=TAGS, summary="Rotate a webhook's signing secret (owners); the new one is in this answer only",
        request=None, responses=_responses({200: SecretOut}, 400, 403, 404),
    )  # fmt: skip
    def post(self, request, project, pk):
        self.require_owner()
        secret = _call(ps.channel_rotate_secret, channel=self.channel(pk))
        return _no_store(Response({"secret": secret}))


# --- drift thresholds ---------------------------------------------------------------------


def _threshold_field(name: str) -> serializers.Field:
    kind = ps.threshold_kind(name)
    help_text = ps.THRESHOLD_HELP.get(name, "")
    if kind == "hours":
        return serializers.ListField(child=serializers.IntegerField(), required=False, help_text=help_text)
    if kind == "int":
        return serializers.IntegerField(required=False, help_text=help_text)
    return serializers.FloatField(required=False, help_text=help_text)


# For the schema only: the body is judged by ps.thresholds_check, strictly (no "5" for 5).
ThresholdOverrides = inline_serializer(
    "ThresholdOverrides", fields={name: _threshold_field(name) for name in ps.THRESHOLD_NAMES}
)


class ThresholdsOut(serializers.Serializer):
    defaults = serializers.DictField(help_text="Every threshold's default.")
    project = serializers.DictField(help_text="The project-wide overrides.")
    tools = serializers.DictField(child=serializers.DictField(), help_text="Each tool's own overrides.")
    tool = serializers.CharField(allow_null=True, help_text="The tool `effective` is for (?tool=), or null.")
    effective = serializers.DictField(help_text="Defaults, then project, then the tool's overrides.")


TOOL_QUERY = OpenApiParameter(
    "tool", OpenApiTypes.STR, OpenApiParameter.QUERY, required=False,
    description="Show the effective thresholds of this tool.",
)  # fmt: skip


class ThresholdsView(_SettingsView):
    query_parameters = {"tool": str}

    @extend_schema(
        tags=TAGS, summary="Drift thresholds: defaults, overrides and effective values",
        parameters=[TOOL_QUERY], responses=_responses({200: ThresholdsOut}, 404),
    )  # fmt: skip
    def get(self, request, project):
        tool = request.query_params.get("tool", "").strip() or None
        return Response(ps.thresholds_summary(self.project, tool))

    @extend_schema(
        tags=TAGS, summary="Replace the project-wide overrides (owners); {} resets to the defaults",
        request=ThresholdOverrides, responses=_responses({200: ThresholdsOut}, 400, 403, 404),
    )  # fmt: skip
    def put(self, request, project):
        self.require_owner()
        _call(ps.thresholds_set, project=self.project, overrides=request.data)
        return Response(ps.thresholds_summary(self.project))


class ToolThresholdsView(_SettingsView):
    @extend_schema(
        tags=TAGS, summary="Replace one tool's overrides (owners)", request=ThresholdOverrides,
        responses=_responses({200: ThresholdsOut}, 400, 403, 404),
    )  # fmt: skip
    def put(self, request, project, tool):
        self.require_owner()
        _call(ps.thresholds_set, project=self.project, overrides=request.data, tool=tool)
        return Response(ps.thresholds_summary(self.project, tool))

    @extend_schema(
        tags=TAGS, summary="Remove one tool's overrides (owners): it follows the project's again",
        responses=_responses({200: ThresholdsOut}, 400, 403, 404),
    )  # fmt: skip
    def delete(self, request, project, tool):
        self.require_owner()
        _call(ps.thresholds_set, project=self.project, overrides={}, tool=tool)
        return Response(ps.thresholds_summary(self.project))


_P = "projects/<slug:project>/"
urlpatterns = [
    path(_P + "settings/", ProjectSettingsView.as_view(), name="api-settings"),
    path(_P + "api-keys/", ApiKeysView.as_view(), name="api-settings-keys"),
    path(_P + "api-keys/<int:pk>/revoke/", ApiKeyRevokeView.as_view(), name="api-settings-key-revoke"),
    path(_P + "channels/", ChannelsView.as_view(), name="api-settings-channels"),
    path(_P + "channels/<int:pk>/", ChannelView.as_view(), name="api-settings-channel"),
    path(_P + "channels/<int:pk>/test/", ChannelTestView.as_view(), name="api-settings-channel-test"),
    path(_P + "channels/<int:pk>/reenable/", ChannelReenableView.as_view(), name="api-settings-channel-reenable"),
    path(_P + "channels/<int:pk>/rotate-secret/", ChannelRotateView.as_view(), name="api-settings-channel-rotate"),
    path(_P + "thresholds/", ThresholdsView.as_view(), name="api-settings-thresholds"),
    path(_P + "thresholds/tools/<path:tool>/", ToolThresholdsView.as_view(), name="api-settings-tool-thresholds"),
]
