"""Tool calls and traces: the explorer's list (keyset pages), one trace, one tool call."""

from __future__ import annotations

from django.http import Http404
from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard import waterfall
from dashboard.api.base import ProjectScopedMixin
from dashboard.api.query import RANGED, whole_number
from dashboard.selectors import calls as call_selectors
from dashboard.selectors import logs as log_selectors
from dashboard.selectors import traces as trace_selectors
from ingest.models import LogRecord, Span, ToolCall
from ingest.taxonomy import ERROR_CLASSES

# --- serializers ------------------------------------------------------------------------------


class ToolCallSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = ToolCall
        fields = trace_selectors.LIST_FIELDS


class ToolCallSerializer(serializers.ModelSerializer):
    class Meta:
        model = ToolCall
        exclude = ("id", "project")


class ToolCallPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True, help_text="The next (older) page, or null on the last page.")
    next_cursor = serializers.CharField(allow_null=True, help_text="Pass as ?before= for the next (older) page.")
    previous = serializers.URLField(allow_null=True, help_text="The previous (newer) page, or null on the first.")
    previous_cursor = serializers.CharField(allow_null=True, help_text="Pass as ?after= for the previous (newer) page.")
    results = ToolCallSummarySerializer(many=True)


class SpanSerializer(serializers.ModelSerializer):
    # Stored once per resource; trace_selectors.trace_get reads them with the spans.
    resource_attributes = serializers.JSONField(
        read_only=True, allow_null=True, help_text="The attributes of the resource (service) that sent the span."
    )

    class Meta:
        model = Span
        exclude = ("id", "project", "resource")


class WaterfallSpanSerializer(serializers.Serializer):
    depth = serializers.IntegerField(help_text="0 for a root; a child is one deeper than its parent.")
    orphan = serializers.BooleanField(help_text="Names a parent span that is not in the trace (late or dropped).")
    offset_ms = serializers.FloatField(help_text="Start, in ms after the trace's first span started.")
    duration_ms = serializers.FloatField()
    span = SpanSerializer()


class CallAttemptSerializer(serializers.Serializer):
    span_id = serializers.CharField(help_text="The attempt's tool span (one of tool_calls).")
    number = serializers.IntegerField(help_text="Its position in the call: 1 for the first attempt, 2 for the first retry, ...")
    start_time = serializers.DateTimeField(source="start")
    offset_ms = serializers.FloatField(help_text="Start, in ms after the trace's first span started.")
    ok = serializers.BooleanField()
    error_class = serializers.CharField(allow_null=True, help_text="Null when it succeeded; `unknown` for a failure with no class.")
    latency_ms = serializers.FloatField()
    call_id = serializers.CharField(allow_blank=True)
    marked_attempt = serializers.IntegerField(allow_null=True, help_text="`tool.call.attempt` as sent (null: not sent).")
    resend_count = serializers.IntegerField(allow_null=True, help_text="`http.request.resend_count` as sent (null: not sent).")
    escalated = serializers.BooleanField()
    failed_retry = serializers.BooleanField(help_text="A retry that failed (false for a first attempt).")
    wasted_retry = serializers.BooleanField(help_text="A retry after an attempt that failed with a permanent class.")
    blind_retry = serializers.BooleanField(help_text="A retry of a validation failure with the arguments unchanged.")


class LogicalCallSerializer(serializers.Serializer):
    """One logical call: attempts linked as the rollups link them (docs/contract/attempts.md)."""

    tool = serializers.CharField()
    service = serializers.CharField(help_text="The first attempt's, as the rollups count the call; so are environment and agent.")
    environment = serializers.CharField(allow_blank=True)
    agent = serializers.CharField(allow_blank=True)
    start_time = serializers.DateTimeField(source="start", help_text="The first attempt's start.")
    ok = serializers.BooleanField(help_text="The outcome: the last attempt's.")
    error_class = serializers.CharField(allow_null=True, help_text="Null when ok; else the last attempt's class (`unknown` when it has none).")
    attempt_count = serializers.IntegerField()
    retries = serializers.IntegerField(help_text="attempt_count - 1.")
    failed_retries = serializers.IntegerField()
    wasted_retries = serializers.IntegerField()
    blind_retries = serializers.IntegerField()
    escalated = serializers.BooleanField(help_text="Any attempt was escalated (handed to a human).")
    latency_ms = serializers.FloatField(help_text="The sum of the attempts' latencies.")
    attempts = CallAttemptSerializer(many=True, help_text="In linking order.")


class LogRecordSerializer(serializers.ModelSerializer):
    """One log record of the trace (POST /v1/logs), redacted and truncated as stored."""

    severity = serializers.SerializerMethodField(help_text="severity_text, else the short name of severity_number.")

    class Meta:
        model = LogRecord
        fields = (
            "time", "observed_time", "trace_id", "span_id", "severity_number", "severity_text", "severity",
            "event_name", "body", "attributes", "call_id", "scope_name", "scope_version",
        )  # fmt: skip

    def get_severity(self, record: LogRecord) -> str:
        return log_selectors.severity_name(record.severity_number, record.severity_text)


class TraceSerializer(serializers.Serializer):
    trace_id = serializers.CharField()
    start_time = serializers.DateTimeField()
    end_time = serializers.DateTimeField()
    duration_ms = serializers.FloatField()
    truncated = serializers.BooleanField(help_text=f"More than {trace_selectors.MAX_SPANS} spans: only the first are here.")
    spans = WaterfallSpanSerializer(many=True, help_text="In waterfall order: depth first, siblings by start time.")
    tool_calls = ToolCallSerializer(many=True)
    logs = LogRecordSerializer(
        many=True, help_text=f"The trace's log records, oldest first (at most {log_selectors.MAX_LOG_RECORDS})."
    )
    calls = LogicalCallSerializer(
        many=True, help_text="The trace's logical calls (its tool calls as attempts, linked as the rollups link them), "
        "by first attempt; a truncated trace's cover all its tool calls.",
    )


# --- views ------------------------------------------------------------------------------------

FILTER_PARAMETERS = [
    OpenApiParameter("range", OpenApiTypes.STR, description="1h, 24h (default), 7d, 30d, 90d or custom (with start and end)"),
    OpenApiParameter("start", OpenApiTypes.DATETIME, description="Start of a custom range (UTC)"),
    OpenApiParameter("end", OpenApiTypes.DATETIME, description="End of a custom range (UTC)"),
    OpenApiParameter("tool", OpenApiTypes.STR, description="Exact tool name"),
    OpenApiParameter("class", OpenApiTypes.STR, enum=list(ERROR_CLASSES), description="Error class"),
    OpenApiParameter("outcome", OpenApiTypes.STR, enum=list(trace_selectors.OUTCOMES),
                     description="; ".join(f"{key}: {label}" for key, label in trace_selectors.OUTCOME_LABELS.items())),
    OpenApiParameter("q", OpenApiTypes.STR, description="Text the message contains (case-insensitive)"),
    OpenApiParameter("service", OpenApiTypes.STR), OpenApiParameter("environment", OpenApiTypes.STR),
    OpenApiParameter("agent", OpenApiTypes.STR),
    OpenApiParameter("before", OpenApiTypes.STR, description="A cursor (next_cursor): the page of older calls"),
    OpenApiParameter("after", OpenApiTypes.STR, description="A cursor (previous_cursor): the page of newer calls"),
    OpenApiParameter("limit", OpenApiTypes.INT, description=f"Calls a page, 1..{trace_selectors.MAX_PAGE_SIZE} (default {trace_selectors.PAGE_SIZE})"),
]  # fmt: skip


class ToolCallListView(ProjectScopedMixin, APIView):
    query_parameters = {
        **RANGED, **{name: str for name in trace_selectors.FILTER_PARAMS.values()}, "before": str, "after": str,
        "limit": int,
    }  # fmt: skip

    @extend_schema(
        operation_id="tool_calls_list",
        summary="Tool calls, newest first, filtered; keyset pages",
        parameters=FILTER_PARAMETERS,
        responses={
            200: ToolCallPageSerializer,
            400: OpenApiResponse(OpenApiTypes.OBJECT, description="Bad parameters, each named: {parameter: [message]}"),
        },
    )
    def get(self, request, project):
        project = self.project  # an outsider gets 404 before any 400 says a word about parameters
        params = request.query_params
        filters, errors = trace_selectors.parse_call_filters(params)
        messages = {name: [message] for name, message in errors.items()}
        before = after = None
        for name in ("before", "after"):
            if params.get(name):
                try:
                    cursor = trace_selectors.Cursor.decode(params[name])
                except trace_selectors.CursorError as exc:
                    messages[name] = [f"{exc}; use next_cursor or previous_cursor"]
                    continue
                before, after = (cursor, None) if name == "before" else (before, cursor)
        if before is not None and after is not None:
            messages["after"] = ["give before or after, not both"]
        limit = self._limit(params, messages)
        time_range = None
        try:
            time_range = self.time_range()
        except ValidationError as exc:
            messages.update(exc.detail)
        if messages:
            raise ValidationError(messages)
        try:
            page = trace_selectors.tool_calls_page(
                project, start=time_range.start, end=time_range.end, filters=filters, before=before, after=after, limit=limit
            )
        except trace_selectors.SearchTooSlow as exc:
            raise ValidationError({"q": [str(exc)]}) from None
        return Response({
            "next": self._url(request, "before", page.older),
            "next_cursor": page.older,
            "previous": self._url(request, "after", page.newer),
            "previous_cursor": page.newer,
            "results": ToolCallSummarySerializer(page.calls, many=True).data,
        })  # fmt: skip

    @staticmethod
    def _limit(params, messages) -> int:
        text = params.get("limit")
        if not text:
            return trace_selectors.PAGE_SIZE
        limit = whole_number(text, low=1, high=trace_selectors.MAX_PAGE_SIZE)
        if limit is None:
            messages["limit"] = [f"limit={text!r} is not a whole number from 1 to {trace_selectors.MAX_PAGE_SIZE}"]
            return trace_selectors.PAGE_SIZE
        return limit

    @staticmethod
    def _url(request, name: str, cursor: str | None) -> str | None:
        if cursor is None:
            return None
        params = request.query_params.copy()
        params.pop("before", None)
        params.pop("after", None)
        params[name] = cursor
        return request.build_absolute_uri(request.path) + "?" + params.urlencode()


class TraceView(ProjectScopedMixin, APIView):
    @extend_schema(
        operation_id="trace_retrieve",
        summary="One trace: its spans (with attributes and events) in waterfall order, and its tool calls",
        responses={200: TraceSerializer},
    )
    def get(self, request, project, trace_id):
        trace = trace_selectors.trace_get(self.project, trace_id)
        if trace is None:
            raise Http404("no such trace in this project")
        layout = waterfall.build(trace.spans)
        calls = sorted(trace.calls.values(), key=lambda call: (call.start_time, call.span_id))
        logs = log_selectors.trace_logs(self.project, trace.trace_id)[: log_selectors.MAX_LOG_RECORDS]
        start, end = layout.start, layout.end
        if start is None:  # a trace of log records alone: its bounds are its calls' and records'
            moments = [call.start_time for call in calls] + [record.time for record in logs]
            start, end = min(moments), max([call.end_time for call in calls] + [record.time for record in logs])
        data = {
            "trace_id": trace.trace_id,
            "start_time": start,
            "end_time": end,
            "duration_ms": layout.duration_ms if layout.start is not None else (end - start).total_seconds() * 1000,
            "truncated": trace.truncated,
            "spans": [
                {"depth": row.depth, "orphan": row.orphan, "offset_ms": row.offset_ms, "duration_ms": row.duration_ms, "span": row.span}
                for row in layout.rows
            ],
            "tool_calls": calls,
            "logs": logs,
            "calls": call_selectors.trace_calls(self.project, trace),
        }
        return Response(TraceSerializer(data).data)


class ToolCallView(ProjectScopedMixin, APIView):
    @extend_schema(operation_id="tool_call_retrieve", summary="One tool call, every field", responses={200: ToolCallSerializer})
    def get(self, request, project, trace_id, span_id):
        call = trace_selectors.tool_call_get(self.project, trace_id, span_id)
        if call is None:
            raise Http404("no such tool call in this project")
        return Response(ToolCallSerializer(call).data)


urlpatterns = [
    path("projects/<slug:project>/tool-calls/", ToolCallListView.as_view(), name="api-tool-calls"),
    path("projects/<slug:project>/tool-calls/<str:trace_id>/<str:span_id>/", ToolCallView.as_view(), name="api-tool-call"),
    path("projects/<slug:project>/traces/<str:trace_id>/", TraceView.as_view(), name="api-trace"),
]
