"""Alerts and ingest health over the REST API: what the alerts and ingest health pages show and do.

Actions answer 200 whether or not they applied: `changed` says which, `detail` says why
(resolving a resolved alert is a no-op, not an error, as on the pages).
"""

from __future__ import annotations

import datetime as dt

from django.urls import path
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard.alerting.lifecycle import MAX_MUTE, alert_user_acknowledge, alert_user_mute, alert_user_resolve
from dashboard.api.base import ProjectScopedMixin
from dashboard.api.query import RANGE
from dashboard.models import Alert
from dashboard.selectors.alerts import (
    ALERT_KINDS,
    STATUSES,
    AlertFilterError,
    alert_deliveries,
    alert_for_project,
    alerts_for_project,
    kind_explanation,
    kind_label,
    parse_alert_filters,
)
from dashboard.selectors.health import OUTCOMES, ingest_health
from dashboard.timerange import PRESETS

# --- serializers ---------------------------------------------------------------------------


class AlertSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    tool = serializers.CharField()
    kind = serializers.ChoiceField(choices=ALERT_KINDS)
    kind_label = serializers.CharField()
    status = serializers.ChoiceField(choices=STATUSES)
    summary = serializers.CharField()
    opened_at = serializers.DateTimeField()
    last_seen_at = serializers.DateTimeField()
    acknowledged_at = serializers.DateTimeField(allow_null=True)
    acknowledged_by = serializers.CharField(help_text="Username; empty until acknowledged.")
    resolved_at = serializers.DateTimeField(allow_null=True)
    resolved_by = serializers.CharField(
        help_text='"auto" when the condition cleared, else the username; empty while open.'
    )
    muted_until = serializers.DateTimeField(allow_null=True, help_text="Messages are skipped until then.")


class AlertDeliverySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    channel = serializers.CharField(source="channel.name", help_text="The channel's name (never its target or secret).")
    channel_kind = serializers.CharField(source="channel.kind")
    event = serializers.CharField()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    response_code = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField()
    created_at = serializers.DateTimeField()
    sent_at = serializers.DateTimeField(allow_null=True)


class AlertDetailSerializer(AlertSerializer):
    kind_explanation = serializers.CharField()
    evidence = serializers.JSONField(
        help_text="The numbers, windows (recent, baseline), statistics (with thresholds), hourly rates and "
        "sample trace ids of the latest firing finding."
    )
    opening_evidence = serializers.JSONField(
        help_text="The same, of the evaluation that opened the alert: written once, never changed "
        "({} for alerts opened before Toolwatch kept it)."
    )
    deliveries = AlertDeliverySerializer(many=True, source="delivery_log", help_text="Oldest first.")


class AlertPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = AlertSerializer(many=True)


class AlertActionResultSerializer(serializers.Serializer):
    changed = serializers.BooleanField(help_text="False when the action did not apply (e.g. already resolved).")
    detail = serializers.CharField(help_text="What happened, or why nothing did.")
    alert = AlertSerializer()


class AlertMuteInputSerializer(serializers.Serializer):
    minutes = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=int(MAX_MUTE.total_seconds() // 60),
        help_text="Mute for this many minutes from now; 0 or null unmutes.",
    )  # fmt: skip
    until = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Mute until this time (ISO 8601, UTC if no offset); null unmutes."
    )

    def validate(self, data):
        if "minutes" in data and "until" in data:
            raise ValidationError({"until": ["give either minutes or until, not both"]})
        if "minutes" not in data and "until" not in data:
            raise ValidationError({"minutes": ["give minutes (0 unmutes) or until (null unmutes)"]})
        return data


class IngestHealthHourSerializer(serializers.Serializer):
    hour = serializers.DateTimeField()
    accepted = serializers.IntegerField(help_text="Spans stored.")
    duplicate = serializers.IntegerField(help_text="Spans already stored (resends).")
    rejected = serializers.IntegerField(help_text="Spans dropped from accepted requests (partial success).")
    refused = serializers.IntegerField(help_text="Whole requests refused with a 4xx (a count of requests).")


class IngestReasonSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=["rejected", "refused"])
    reason = serializers.CharField()
    count = serializers.IntegerField()


class IngestRangeSerializer(serializers.Serializer):
    key = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class IngestTotalsSerializer(serializers.Serializer):
    accepted = serializers.IntegerField()
    duplicate = serializers.IntegerField()
    rejected = serializers.IntegerField()
    refused = serializers.IntegerField()


class IngestHealthSerializer(serializers.Serializer):
    range = IngestRangeSerializer()
    totals = IngestTotalsSerializer(help_text="Over the whole range.")
    series = IngestHealthHourSerializer(many=True, help_text="Every hour of the range, oldest first, zero-filled.")
    reasons = IngestReasonSerializer(many=True, help_text="Rejections and refusals by reason, most frequent first.")


# --- views ---------------------------------------------------------------------------------

ALERT_ID = OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The alert's id.")
PROJECT = OpenApiParameter("project", OpenApiTypes.STR, OpenApiParameter.PATH, description="The project's slug.")


def _labelled(alert: Alert) -> Alert:
    alert.kind_label = kind_label(alert.kind)
    return alert


class AlertListApi(ProjectScopedMixin, APIView):
    query_parameters = {"status": str, "kind": str, "tool": str}
    """Filters: status, kind, tool (exact). A bad filter value is a 400 naming it."""

    @extend_schema(
        operation_id="alerts_list",
        summary="The project's alerts: open and acknowledged first, then resolved; newest first",
        parameters=[
            PROJECT,
            OpenApiParameter("status", OpenApiTypes.STR, enum=list(STATUSES), description="Only alerts in this state."),
            OpenApiParameter("kind", OpenApiTypes.STR, enum=list(ALERT_KINDS), description="Only alerts of this kind."),
            OpenApiParameter("tool", OpenApiTypes.STR, description="Only alerts of this tool (exact name)."),
            OpenApiParameter("page", OpenApiTypes.INT, description="Page number (50 alerts a page)."),
        ],
        responses={200: AlertPageSerializer},
    )
    def get(self, request, project):
        try:
            filters = parse_alert_filters(request.query_params)
        except AlertFilterError as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(alerts_for_project(self.project, filters), request, view=self)
        return paginator.get_paginated_response(AlertSerializer([_labelled(a) for a in page], many=True).data)


class AlertDetailApi(ProjectScopedMixin, APIView):
    """The evidence is the alert's JSON as stored; deliveries name the channel, never its target or secret."""

    @extend_schema(
        operation_id="alerts_retrieve",
        summary="One alert with its evidence and delivery log",
        parameters=[PROJECT, ALERT_ID],
        responses={200: AlertDetailSerializer},
    )
    def get(self, request, project, pk):
        alert = _labelled(alert_for_project(self.project, pk))
        alert.kind_explanation = kind_explanation(alert.kind)
        alert.delivery_log = alert_deliveries(alert)
        return Response(AlertDetailSerializer(alert).data)


class _AlertActionApi(ProjectScopedMixin, APIView):
    """Actions answer 200 with `changed` false and a `detail` saying why when they do not apply."""

    def respond(self, result) -> Response:
        alert = AlertSerializer(_labelled(result.alert)).data
        return Response({"changed": result.changed, "detail": result.message, "alert": alert})


class AlertAcknowledgeApi(_AlertActionApi):
    """Only an open alert can be acknowledged; `changed` is false otherwise, with the reason in `detail`."""

    @extend_schema(
        operation_id="alerts_acknowledge",
        summary="Acknowledge an open alert (records your username)",
        parameters=[PROJECT, ALERT_ID],
        request=None,
        responses={200: AlertActionResultSerializer},
    )
    def post(self, request, project, pk):
        alert = alert_for_project(self.project, pk)
        return self.respond(alert_user_acknowledge(alert=alert, user=request.user, now=timezone.now()))


class AlertResolveApi(_AlertActionApi):
    """Announced to the channels. If the condition still holds, the next evaluation opens a new alert:
    mute instead to silence it. A resolved alert stays as it is (`changed` false)."""

    @extend_schema(
        operation_id="alerts_resolve",
        summary="Resolve an open or acknowledged alert by hand (records your username)",
        parameters=[PROJECT, ALERT_ID],
        request=None,
        responses={200: AlertActionResultSerializer},
    )
    def post(self, request, project, pk):
        alert = alert_for_project(self.project, pk)
        return self.respond(alert_user_resolve(alert=alert, user=request.user, now=timezone.now()))


class AlertMuteApi(_AlertActionApi):
    @extend_schema(
        operation_id="alerts_mute",
        summary="Mute an alert's messages for a while, or unmute it",
        description='Body `{"minutes": N}` or `{"until": "2026-12-01T09:00:00Z"}`; `0` or `null` unmutes. '
        f"At most {MAX_MUTE.days} days ahead.",
        parameters=[PROJECT, ALERT_ID],
        request=AlertMuteInputSerializer,
        responses={200: AlertActionResultSerializer},
    )
    def post(self, request, project, pk):
        alert = alert_for_project(self.project, pk)
        body = AlertMuteInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        now = timezone.now()
        if "minutes" in body.validated_data:
            minutes = body.validated_data["minutes"]
            until = now + dt.timedelta(minutes=minutes) if minutes else None
            field = "minutes"
        else:
            until, field = body.validated_data["until"], "until"
        try:
            result = alert_user_mute(alert=alert, user=request.user, until=until, now=now)
        except ValueError as exc:
            raise ValidationError({field: [str(exc)]}) from None
        return self.respond(result)


class IngestHealthApi(ProjectScopedMixin, APIView):
    """Counts come from hourly counters: the range is widened to whole hours. A bad range is a 400 naming it."""

    query_parameters = RANGE

    @extend_schema(
        operation_id="ingest_health",
        summary="Spans accepted, duplicate and rejected, and requests refused, per hour and by reason",
        parameters=[
            PROJECT,
            OpenApiParameter("range", OpenApiTypes.STR, enum=[*PRESETS, "custom"], description="Default 24h."),
            OpenApiParameter("start", OpenApiTypes.DATETIME, description="With range=custom (UTC if no offset)."),
            OpenApiParameter("end", OpenApiTypes.DATETIME, description="With range=custom (UTC if no offset)."),
        ],
        responses={200: IngestHealthSerializer},
    )
    def get(self, request, project):
        time_range = self.time_range()
        report = ingest_health(self.project, time_range.start, time_range.end)
        series = [
            {"hour": hour, **{outcome: report.series[outcome][i] for outcome in OUTCOMES}}
            for i, hour in enumerate(report.hours)
        ]
        data = {
            "range": {"key": time_range.key, "start": time_range.start, "end": time_range.end},
            "totals": report.totals,
            "series": series,
            "reasons": [vars(row) for row in report.reasons],
        }
        return Response(IngestHealthSerializer(data).data)


ALERT = "projects/<slug:project>/alerts/<int:pk>/"
urlpatterns = [
    path("projects/<slug:project>/alerts/", AlertListApi.as_view(), name="api-alerts"),
    path(ALERT, AlertDetailApi.as_view(), name="api-alert"),
    path(f"{ALERT}acknowledge/", AlertAcknowledgeApi.as_view(), name="api-alert-acknowledge"),
    path(f"{ALERT}resolve/", AlertResolveApi.as_view(), name="api-alert-resolve"),
    path(f"{ALERT}mute/", AlertMuteApi.as_view(), name="api-alert-mute"),
    path("projects/<slug:project>/ingest-health/", IngestHealthApi.as_view(), name="api-ingest-health"),
]
