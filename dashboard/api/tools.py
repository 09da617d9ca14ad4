"""`/api/v1/projects/<slug>/tools/…` and `/summary/`: the overview's tools table, a tool's series,
the project's totals. The same range and filters as the pages; a bad parameter is a 400 naming it."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard.api.base import ProjectScopedMixin
from dashboard.api.query import RANGED, whole_number
from dashboard.selectors.tools import (
    DEFAULT_SORT,
    MAX_SERIES_POINTS,
    SORT_COLUMNS,
    SortError,
    open_alerts,
    parse_sort,
    parse_step,
    project_totals,
    sort_rows,
    tool_detail,
    tools_overview,
)
from dashboard.timerange import FILTER_NAMES, MAX_CUSTOM_SPAN, PRESETS, SUPPORTED_SPAN
from ingest.taxonomy import ERROR_CLASSES

# The longest step a series takes: the longest range, one point (a longer one only overflows the bucket arithmetic).
MAX_STEP = int(MAX_CUSTOM_SPAN.total_seconds())

# --- output shapes (documentation for the schema; the views build plain dicts) -----------------


class CountsSerializer(serializers.Serializer):
    calls = serializers.IntegerField(help_text="Logical calls (a call and its retries count once).")
    attempts = serializers.IntegerField()
    retries = serializers.IntegerField()
    failed_retries = serializers.IntegerField()
    wasted_retries = serializers.IntegerField(help_text="Retries after a permanent-class failure.")
    blind_retries = serializers.IntegerField(help_text="Validation retries with unchanged arguments.")
    errors = serializers.IntegerField(help_text="Calls whose outcome (last attempt) failed.")
    resolved = serializers.IntegerField()
    escalations = serializers.IntegerField()
    errors_by_class = serializers.DictField(child=serializers.IntegerField(), help_text="Failed calls per error class.")
    error_rate = serializers.FloatField(allow_null=True, help_text="errors / calls; null without calls.")
    retry_rate = serializers.FloatField(allow_null=True)
    escalation_rate = serializers.FloatField(allow_null=True)
    resolution_rate = serializers.FloatField(allow_null=True)
    attempts_per_call = serializers.FloatField(allow_null=True)


class LatencySerializer(serializers.Serializer):
    p50_ms = serializers.FloatField(allow_null=True)
    p95_ms = serializers.FloatField(allow_null=True)
    p99_ms = serializers.FloatField(allow_null=True)


class ToolRowSerializer(CountsSerializer, LatencySerializer):
    tool = serializers.CharField()
    contract_score = serializers.FloatField(allow_null=True, help_text="Share of contract checks failed calls pass.")
    contract_checks = serializers.DictField(child=serializers.FloatField(), help_text="Per check: share passed.")
    open_alert_kinds = serializers.ListField(child=serializers.CharField(), help_text="Kinds of the tool's open alerts.")
    sparkline = serializers.ListField(
        child=serializers.FloatField(allow_null=True), help_text="Error rate per sparkline step (null where quiet)."
    )


class RangeSerializer(serializers.Serializer):
    key = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()


class SummarySerializer(CountsSerializer):
    range = RangeSerializer()
    filters = serializers.DictField(child=serializers.CharField())


class PointSerializer(CountsSerializer, LatencySerializer):
    start = serializers.DateTimeField(help_text="The bucket's start; a bucket is `step` seconds long.")


class SeriesSerializer(serializers.Serializer):
    tool = serializers.CharField()
    step = serializers.IntegerField(help_text="Seconds per point.")
    range = RangeSerializer()
    filters = serializers.DictField(child=serializers.CharField())
    points = PointSerializer(many=True)


BAD_REQUEST = OpenApiResponse(
    inline_serializer("ToolsBadRequest", {"<parameter>": serializers.ListField(child=serializers.CharField())}),
    description="A parameter that cannot be used, keyed by its name (`range`, `start`, `end`, `sort`, `step`).",
)
NOT_FOUND = OpenApiResponse(
    inline_serializer("ToolsNotFound", {"detail": serializers.CharField()}),
    description="No such project among yours (the same answer whether or not it exists).",
)
PROJECT = OpenApiParameter("project", OpenApiTypes.STR, OpenApiParameter.PATH, description="The project's slug.")
RANGE_PARAMETERS = [
    OpenApiParameter("range", OpenApiTypes.STR, enum=[*PRESETS, "custom"], description="Time range; default 24h."),
    OpenApiParameter("start", OpenApiTypes.DATETIME, description=f"Start of a custom range (UTC unless offset), "
                     f"within {SUPPORTED_SPAN}."),
    OpenApiParameter("end", OpenApiTypes.DATETIME, description=f"End of a custom range, within {SUPPORTED_SPAN}."),
    *(OpenApiParameter(name, OpenApiTypes.STR, description=f"Only calls of this {name}.") for name in FILTER_NAMES),
]


def _counts(row: dict) -> dict:
    out = {name: row[name] for name in CountsSerializer().fields if name in row}
    out["errors_by_class"] = {name: row[f"err_{name}"] for name in ERROR_CLASSES}
    return out


def _range(time_range) -> dict:
    return {"key": time_range.key, "start": time_range.start, "end": time_range.end}


class ToolsPagination(PageNumberPagination):
    page_size = 50


class ToolList(ProjectScopedMixin, APIView):
    query_parameters = {**RANGED, "sort": str}

    @extend_schema(
        operation_id="tools_list",
        summary="The tools table",
        description="Per tool over the range: counts, rates, latency percentiles, contract score, open alert kinds "
        "and an error-rate sparkline, sorted by `sort` and paginated (`?page=`).",
        tags=["tools"],
        parameters=[
            PROJECT, *RANGE_PARAMETERS,
            OpenApiParameter("sort", OpenApiTypes.STR, description=f"One of {', '.join(SORT_COLUMNS)}; "
                             f"prefix - for descending. Default {DEFAULT_SORT}."),
        ],  # fmt: skip
        responses={200: ToolRowSerializer(many=True), 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def get(self, request, project):
        time_range, filters = self.time_range(), self.filters()
        try:
            sort = parse_sort(request.query_params.get("sort"))
        except SortError as exc:
            raise ValidationError({"sort": [str(exc)]}) from None
        table = tools_overview(self.project, start=time_range.start, end=time_range.end, **filters.as_kwargs())
        kinds: dict[str, list[str]] = {}
        for alert in open_alerts(self.project):
            kinds.setdefault(alert.tool, []).append(alert.kind)
        rows = [
            {
                **_counts(row), "tool": row["tool"], "p50_ms": row["p50_ms"], "p95_ms": row["p95_ms"],
                "p99_ms": row["p99_ms"], "contract_score": row["contract_score"],
                "contract_checks": row["contract_checks"], "open_alert_kinds": sorted(set(kinds.get(row["tool"], ()))),
                "sparkline": row["sparkline"],
            }
            for row in sort_rows(table["rows"], sort)
        ]  # fmt: skip
        paginator = ToolsPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(page)


class ToolSeries(ProjectScopedMixin, APIView):
    query_parameters = {**RANGED, "step": int}

    @extend_schema(
        operation_id="tools_series",
        summary="One tool's series",
        description="Counts, rates and p50/p95/p99 latency of one tool per bucket over the range, every bucket present "
        "(zeros where quiet). `step` defaults to about 120 points over the range.",
        tags=["tools"],
        parameters=[
            PROJECT,
            OpenApiParameter("tool", OpenApiTypes.STR, OpenApiParameter.PATH, description="The tool's name."),
            *RANGE_PARAMETERS,
            OpenApiParameter("step", OpenApiTypes.INT, description="Seconds per point: 300, 600, 900, 1200, 1800 "
                             f"or a multiple of 3600 up to {MAX_STEP}; at most {MAX_SERIES_POINTS} points."),
        ],  # fmt: skip
        responses={200: SeriesSerializer, 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def get(self, request, project, tool):
        time_range, filters = self.time_range(), self.filters()
        text = request.query_params.get("step")
        if text and (whole_number(text) or 0) > MAX_STEP:  # malformed ones are query_parameters_check's 400
            raise ValidationError({"step": [f"step={text[:40]} is longer than the longest range; at most {MAX_STEP}"]})
        try:
            step = parse_step(text, time_range.start, time_range.end)
        except ValueError as exc:
            raise ValidationError({"step": [str(exc)]}) from None
        detail = tool_detail(
            self.project, tool, start=time_range.start, end=time_range.end, step=step, **filters.as_kwargs()
        )
        points = detail["points"]
        return Response({
            "tool": tool, "step": detail["step"], "range": _range(time_range), "filters": filters.as_kwargs(),
            "points": [
                {"start": point["start"], **_counts(point),
                 **{key: point.get(key) for key in ("p50_ms", "p95_ms", "p99_ms")}}
                for point in points
            ],
        })  # fmt: skip


class ProjectSummary(ProjectScopedMixin, APIView):
    query_parameters = RANGED

    @extend_schema(
        operation_id="projects_summary",
        summary="The project's totals",
        description="Counts and rates of all the project's tool calls over the range (the overview's totals).",
        tags=["tools"],
        parameters=[PROJECT, *RANGE_PARAMETERS],
        responses={200: SummarySerializer, 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def get(self, request, project):
        time_range, filters = self.time_range(), self.filters()
        totals = project_totals(self.project, start=time_range.start, end=time_range.end, **filters.as_kwargs())
        return Response({"range": _range(time_range), "filters": filters.as_kwargs(), **_counts(totals)})


urlpatterns = [
    path("projects/<slug:project>/tools/", ToolList.as_view(), name="api-tools"),
    path("projects/<slug:project>/tools/<path:tool>/series/", ToolSeries.as_view(), name="api-tool-series"),
    path("projects/<slug:project>/summary/", ProjectSummary.as_view(), name="api-summary"),
]
