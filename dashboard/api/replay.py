"""`/api/v1/projects/<slug>/replay/`: the policy replay of a range (docs/replay.md), and its job's status.

Small ranges are answered inline (200 with the result); a range of more than
`service.INLINE_MAX_CALLS` logical calls runs as a Celery job: 202 with the job's status URL,
which answers 200 with its progress, then the result.
"""

from __future__ import annotations

from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard.api.base import ProjectScopedMixin
from dashboard.api.query import RANGED
from dashboard.api.tools import NOT_FOUND, PROJECT, RANGE_PARAMETERS
from dashboard.models import ReplayResult
from dashboard.replay.fixes import FIXES
from dashboard.replay.policies import POLICIES
from dashboard.replay.service import ReplayError, run_replay

# --- output shapes (documentation for the schema; the views build plain dicts) -----------------


class FigureSerializer(serializers.Serializer):
    value = serializers.FloatField()
    low = serializers.FloatField(help_text="95 % interval: low end.")
    high = serializers.FloatField(help_text="95 % interval: high end.")
    source = serializers.ChoiceField(
        ["observed", "data", "assumed", "mixed"],
        help_text="observed: counted; data: every probability from the project's evidence; assumed: from the seed "
        "benchmark's assumptions; mixed: some of each (`from_data` is the share of replayed moves on evidence).",
    )
    from_data = serializers.FloatField(allow_null=True)
    delta = serializers.FloatField(help_text="The change against the observed figure.")
    delta_low = serializers.FloatField()
    delta_high = serializers.FloatField()


class PolicyFiguresSerializer(serializers.Serializer):
    calls = serializers.IntegerField()
    resolution_rate = FigureSerializer()
    attempts_per_call = FigureSerializer()
    failed_retries = FigureSerializer(help_text="A count over the range.")
    wasted_retries = FigureSerializer(help_text="Retries after a permanent-class failure, a count over the range.")
    resolved = serializers.FloatField()
    attempts = serializers.FloatField()


class FixSerializer(serializers.Serializer):
    tool = serializers.CharField()
    fix = serializers.ChoiceField(list(FIXES))
    label = serializers.CharField()
    affected_failures = serializers.IntegerField(help_text="First failures where the contract check failed.")
    resolved = serializers.FloatField(help_text="Calls resolved gained over the range.")
    resolved_half_width = serializers.FloatField()
    resolution_rate = serializers.FloatField()
    resolution_rate_half_width = serializers.FloatField()
    failed_retries = serializers.FloatField(help_text="Change in failed retries over the range (negative: avoided).")
    failed_retries_half_width = serializers.FloatField()
    retries = serializers.FloatField()
    wasted_retries = serializers.FloatField()
    per_week = serializers.DictField(child=serializers.FloatField(), help_text="The same changes per week.")
    score = serializers.ListField(child=serializers.FloatField(), help_text="The rank: calls resolved a week, retries avoided.")


class EstimateSerializer(serializers.Serializer):
    tool = serializers.CharField(required=False)
    error_class = serializers.CharField()
    move = serializers.ChoiceField(["retry", "repair"])
    hinted = serializers.BooleanField(allow_null=True, help_text="retry: told retry_after; repair: field and suggestion.")
    p = serializers.FloatField(allow_null=True)
    low = serializers.FloatField()
    high = serializers.FloatField()
    successes = serializers.IntegerField()
    trials = serializers.IntegerField()
    source = serializers.CharField(required=False, help_text="tool, project or assumed.")
    assumed = serializers.FloatField(required=False, help_text="The seed's assumption for it.")


class ToolReplaySerializer(serializers.Serializer):
    tool = serializers.CharField()
    calls = serializers.IntegerField()
    policies = serializers.DictField(child=PolicyFiguresSerializer())


class ReplayReportSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    tool = serializers.CharField()
    calls = serializers.IntegerField()
    failed_first = serializers.IntegerField(help_text="Calls whose first attempt failed.")
    policies = serializers.DictField(child=PolicyFiguresSerializer(), help_text="Per policy key.")
    labels = serializers.DictField(child=serializers.CharField())
    fixes = FixSerializer(many=True)
    estimates = EstimateSerializer(many=True)
    evidence = EstimateSerializer(many=True)
    range_seconds = serializers.FloatField()
    tools = ToolReplaySerializer(many=True, required=False, help_text="Per tool (the project's replay only).")


class ReplayJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(ReplayResult.Status.values)
    progress = serializers.IntegerField(help_text="0-100.")
    status_url = serializers.CharField()
    tool = serializers.CharField()
    policy = serializers.CharField(help_text='"" for all four.')
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    computed_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField()
    result = ReplayReportSerializer(allow_null=True)


def job_payload(request, row: ReplayResult, slug: str) -> dict:
    url = reverse("api-replay-job", kwargs={"project": slug, "job": row.pk})
    return {
        "id": row.pk, "status": row.status, "progress": row.progress, "status_url": request.build_absolute_uri(url),
        "tool": row.tool, "policy": row.policy, "start": row.start, "end": row.end, "computed_at": row.computed_at,
        "error": row.error, "result": row.result if row.status == ReplayResult.Status.DONE else None,
    }  # fmt: skip


BAD_REQUEST = OpenApiResponse(
    inline_serializer("ReplayBadRequest", {"<parameter>": serializers.ListField(child=serializers.CharField())}),
    description="A parameter that cannot be used, keyed by its name (`range`, `start`, `end`, `policy`).",
)


class Replay(ProjectScopedMixin, APIView):
    query_parameters = {**RANGED, "tool": str, "policy": str}

    @extend_schema(
        operation_id="replay_get",
        summary="Replay the range's failures under other recovery policies",
        description="The observed failures of the range replayed under the seed benchmark's policies (retry every "
        "failure once; route by class; route by class with field and suggestion) and the observed behaviour: "
        "resolution, attempts per call, failed and wasted retries, each with a 95 % interval, its source and its "
        "change against the observed; the contract fixes ranked by effect; the recovery estimates used. Small ranges "
        "answer 200 inline; a large range runs as a job: 202 with its `status_url`. Results are cached per range, "
        "filters, tool and policy until the range's rollups change. See docs/replay.md.",
        tags=["replay"],
        parameters=[
            PROJECT, *RANGE_PARAMETERS,
            OpenApiParameter("tool", OpenApiTypes.STR, description="One tool's replay; default the whole project."),
            OpenApiParameter("policy", OpenApiTypes.STR, enum=list(POLICIES), description="One policy (and the "
                             "observed); default all four."),
        ],  # fmt: skip
        responses={200: ReplayJobSerializer, 202: ReplayJobSerializer, 400: BAD_REQUEST, 404: NOT_FOUND},
    )
    def get(self, request, project):
        time_range, filters = self.time_range(), self.filters()
        try:
            row = run_replay(
                self.project, time_range.start, time_range.end, request.query_params.get("policy", ""),
                tool=request.query_params.get("tool", ""), filters=filters,
            )  # fmt: skip
        except ReplayError as exc:
            raise ValidationError({"policy": [str(exc)]}) from None
        status = 200 if row.status in (ReplayResult.Status.DONE, ReplayResult.Status.FAILED) else 202
        return Response(job_payload(request, row, self.project.slug), status=status)


class ReplayJob(ProjectScopedMixin, APIView):
    @extend_schema(
        operation_id="replay_job",
        summary="A replay job's status",
        description="Its status (queued, running, done, failed), its progress (0-100), and when done its result.",
        tags=["replay"],
        parameters=[PROJECT, OpenApiParameter("job", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses={200: ReplayJobSerializer, 404: NOT_FOUND},
    )
    def get(self, request, project, job):
        row = ReplayResult.objects.filter(project=self.project, pk=job).first()
        if row is None:
            raise NotFound("No such replay job in this project.")
        return Response(job_payload(request, row, self.project.slug))


urlpatterns = [
    path("projects/<slug:project>/replay/", Replay.as_view(), name="api-replay"),
    path("projects/<slug:project>/replay/jobs/<int:job>/", ReplayJob.as_view(), name="api-replay-job"),
]
