"""The evals REST API: cases (promote, edit, pin, retire, tags), versions, runs, results, JSONL export.

Thin views: parse with the input serializers, call `evals.services` / `evals.selectors`, answer
with the output serializers. An `EvalError` from a service becomes a 400 whose body names its
field (`{"results[2].content_hash": ["…"]}`), or a 404 when the thing named does not exist.

The runner's two operations (the export, a run's POST) are versioned: the runner names the
REST contract it speaks in `X-Toolwatch-Runner-Contract` (none: 1, as runners before the
header), a version this server does not support is a 400 naming the header and the ones it
does, and every answer of those operations lists them in the same header (docs/runner.md).
They are the two a token with only the `runs` scope may call (docs/runner.md#the-token).
"""

from __future__ import annotations

from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response

from dashboard.api import eval_serializers as s
from dashboard.api.base import ProjectScopedMixin
from dashboard.api.query import CASE_QUERY
from dashboard.tokens import READ, RUNS
from dashboard.views.evals import jsonl_response  # the page's download answers the same way
from evals import exporters, selectors, services
from evals.models import EvalCase

# The runner <-> server REST contract: the versions of the export and run shapes this server speaks.
RUNNER_CONTRACT_HEADER = "X-Toolwatch-Runner-Contract"
RUNNER_CONTRACTS = (1,)
RUNNER_CONTRACT_DEFAULT = 1  # what a request without the header speaks (runners from before it)
RUNNER_CONTRACT_PARAMETER = OpenApiParameter(
    RUNNER_CONTRACT_HEADER,
    OpenApiTypes.INT,
    location=OpenApiParameter.HEADER,
    required=False,
    enum=list(RUNNER_CONTRACTS),
    description=(
        "The runner <-> server REST contract version the caller speaks (docs/runner.md). "
        f"Missing: {RUNNER_CONTRACT_DEFAULT}. A version this server does not support is a 400 naming this header; "
        "every answer lists the supported versions, comma-separated, in the same response header."
    ),
)
RUNNER_CONTRACT_RESPONSE_HEADER = OpenApiParameter(
    RUNNER_CONTRACT_HEADER,
    OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    response=True,
    description="The runner REST contract versions this server supports, comma-separated (e.g. `1`).",
)

CASE_FILTERS = [
    OpenApiParameter("status", str, enum=[*selectors.STATUSES, "all"], description="Default: draft and pinned."),
    OpenApiParameter("tool", str, description="Exact tool name."),
    OpenApiParameter("tag", str, description="Cases with this tag."),
    OpenApiParameter("q", str, description="Search title, tool, tags and the observed message."),
]


class EvalView(ProjectScopedMixin, GenericAPIView):
    def get_serializer_context(self):
        return {**super().get_serializer_context(), "project": self.project}

    def case_filters(self) -> selectors.CaseFilters:
        return _call(selectors.parse_case_filters, self.request.query_params)

    def case(self) -> EvalCase:
        return selectors.case_get(self.project, self.kwargs["pk"])

    def paginated(self, queryset, serializer_class):
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(serializer_class(page, many=True, context=self.get_serializer_context()).data)

    def detail(self, case: EvalCase, *, status_code: int = 200, **context) -> Response:
        case = selectors.case_list(self.project, selectors.CaseFilters(status="all")).prefetch_related(
            "versions", "snapshot"
        ).get(pk=case.pk)
        serializer = (s.PromotionSerializer if "created" in context else s.CaseDetailSerializer)(
            case, context={**self.get_serializer_context(), **context}
        )
        return Response(serializer.data, status=status_code)


class RunnerContractMixin:
    """The runner's operations (`runner_contract_methods`): check the caller's contract version
    after authentication, and name the supported ones on every answer, refusals included."""

    runner_contract_methods: frozenset[str] = frozenset()

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.method in self.runner_contract_methods:
            runner_contract(request)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if request.method in self.runner_contract_methods:
            response[RUNNER_CONTRACT_HEADER] = ", ".join(map(str, RUNNER_CONTRACTS))
        return response


def runner_contract(request) -> int:
    """The contract version the request speaks; a 400 naming the header if not one of RUNNER_CONTRACTS."""
    given = request.headers.get(RUNNER_CONTRACT_HEADER)
    if given is None:
        return RUNNER_CONTRACT_DEFAULT
    text = given.strip()
    if text.isascii() and text.isdigit() and int(text) in RUNNER_CONTRACTS:
        return int(text)
    supported = ", ".join(map(str, RUNNER_CONTRACTS))
    raise ValidationError(
        {
            RUNNER_CONTRACT_HEADER: [
                f"runner contract version {given[:20]!r} is not supported; this server supports {supported} "
                "(upgrade the runner or the server: docs/runner.md)"
            ]
        }
    )


def _call(function, *args, **kwargs):
    """Run a service; its EvalError becomes a 400 naming the field (404 when the thing is missing)."""
    try:
        return function(*args, **kwargs)
    except services.EvalError as exc:
        if exc.missing:
            raise NotFound(exc.message) from None
        raise ValidationError({exc.field: [exc.message]}) from None


class CaseListCreate(EvalView):
    query_parameters = CASE_QUERY

    @extend_schema(
        operation_id="eval_cases_list", parameters=CASE_FILTERS, responses=s.CaseSerializer(many=True),
        summary="Eval cases, newest first, with their last result and recurrence",
    )  # fmt: skip
    def get(self, request, project):
        return self.paginated(selectors.case_list(self.project, self.case_filters()), s.CaseSerializer)

    @extend_schema(
        operation_id="eval_cases_promote", request=s.PromoteInput,
        responses={201: s.PromotionSerializer, 200: s.PromotionSerializer, 400: OpenApiResponse(description="names the bad field"), 404: OpenApiResponse(description="no such tool call")},
        summary="Promote a failed tool call to an eval case (200 with created=false when it was promoted already)",
    )  # fmt: skip
    def post(self, request, project):
        data = _valid(s.PromoteInput, request.data)
        promotion = _call(services.case_promote, project=self.project, user=request.user, **data)
        return self.detail(
            promotion.case, created=promotion.created, status_code=201 if promotion.created else 200
        )


class CaseDetail(EvalView):
    @extend_schema(operation_id="eval_cases_retrieve", responses=s.CaseDetailSerializer, summary="One eval case")
    def get(self, request, project, pk):
        return self.detail(self.case())

    @extend_schema(
        operation_id="eval_cases_update", request=s.CaseUpdateInput, responses=s.CaseDetailSerializer,
        summary="Edit a case: a pinned latest version gets a new draft version n+1",
    )  # fmt: skip
    def patch(self, request, project, pk):
        case = self.case()
        data = _valid(s.CaseUpdateInput, request.data)
        if "arguments" not in data:
            data["arguments"] = services.UNSET
        _call(services.case_edit, case=case, user=request.user, **data)
        return self.detail(case)


class CasePin(EvalView):
    @extend_schema(
        operation_id="eval_cases_pin", request=None, responses=s.VersionSerializer,
        summary="Pin the draft version: immutable and content-hashed from now on",
    )  # fmt: skip
    def post(self, request, project, pk):
        version = _call(services.case_pin, case=self.case(), user=request.user)
        return Response(s.VersionSerializer(version).data)


class CaseRetire(EvalView):
    @extend_schema(
        operation_id="eval_cases_retire", request=None, responses=s.CaseDetailSerializer,
        summary="Retire a case: no longer exported; its history stays",
    )  # fmt: skip
    def post(self, request, project, pk):
        return self.detail(services.case_retire(case=self.case()))


class CaseRestore(EvalView):
    @extend_schema(operation_id="eval_cases_restore", request=None, responses=s.CaseDetailSerializer, summary="Undo a retirement")
    def post(self, request, project, pk):
        return self.detail(services.case_restore(case=self.case()))


class CaseTags(EvalView):
    @extend_schema(operation_id="eval_cases_tags", request=s.TagsInput, responses=s.TagsInput, summary="Replace the case's tags")
    def put(self, request, project, pk):
        data = _valid(s.TagsInput, request.data)
        return Response({"tags": _call(services.case_set_tags, case=self.case(), tags=data["tags"])})


class CaseVersions(EvalView):
    @extend_schema(operation_id="eval_cases_versions", responses=s.VersionSerializer(many=True), summary="The case's versions, newest first")
    def get(self, request, project, pk):
        return self.paginated(self.case().versions.order_by("-number"), s.VersionSerializer)


class CaseResults(EvalView):
    @extend_schema(operation_id="eval_cases_results", responses=s.ResultSerializer(many=True), summary="The case's run history, newest first")
    def get(self, request, project, pk):
        results = self.case().results.select_related("case", "version").order_by("-run__started_at", "-run_id")
        return self.paginated(results, s.ResultSerializer)


class _IgnoreAccept(BaseContentNegotiation):
    # The export answers JSONL whatever the client accepts; errors still come back as JSON.
    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class CaseExport(RunnerContractMixin, EvalView):
    content_negotiation_class = _IgnoreAccept
    runner_contract_methods = frozenset({"GET", "HEAD"})
    query_parameters = CASE_QUERY
    # The runner reads the cases with a `runs` token; as every GET, `read` opens it too (dashboard/tokens.py).
    token_scopes = {"GET": (RUNS, READ), "HEAD": (RUNS, READ)}

    @extend_schema(
        operation_id="eval_cases_export",
        parameters=[
            OpenApiParameter("status", str, enum=["pinned"], description="Only pinned versions are ever exported."),
            *CASE_FILTERS[1:],
            RUNNER_CONTRACT_PARAMETER,
            RUNNER_CONTRACT_RESPONSE_HEADER,
        ],
        responses={
            (200, exporters.CONTENT_TYPE): OpenApiResponse(
                OpenApiTypes.STR,
                description="JSONL, schema_version 1 (docs/eval-case.schema.json): the latest pinned version of each active case.",
            ),
            400: OpenApiResponse(description="names the bad parameter, or the X-Toolwatch-Runner-Contract header"),
        },
        summary="Export eval cases as JSONL for the runner",
    )
    def get(self, request, project):
        wanted = request.query_params.get("status", "pinned")
        if wanted != "pinned":
            raise ValidationError({"status": [f"only pinned versions are exported; not {wanted!r}"]})
        return jsonl_response(selectors.export_records(self.project, self.case_filters()), self.project.slug)


class RunListCreate(RunnerContractMixin, EvalView):
    runner_contract_methods = frozenset({"POST"})
    # Posting a run is the `runs` scope's own write (not `admin`): the CI runner's token needs nothing more.
    token_scopes = {"POST": (RUNS,)}

    @extend_schema(operation_id="eval_runs_list", responses=s.RunSerializer(many=True), summary="Eval runs, newest first")
    def get(self, request, project):
        return self.paginated(selectors.run_list(self.project), s.RunSerializer)

    @extend_schema(
        operation_id="eval_runs_create", request=s.RunInputDoc,
        parameters=[RUNNER_CONTRACT_PARAMETER, RUNNER_CONTRACT_RESPONSE_HEADER],
        responses={201: s.RunCreatedSerializer, 400: OpenApiResponse(description="names the bad field, e.g. results[2].content_hash, or the X-Toolwatch-Runner-Contract header")},
        summary="Post a run of the cases (the runner's --post); regressions are flagged and alerted",
    )  # fmt: skip
    def post(self, request, project):
        data = _valid(s.RunInput, request.data)
        run = _call(
            services.run_record, project=self.project, user=request.user, label=data["label"],
            git_sha=data.get("git_sha") or "", started_at=data["started_at"], finished_at=data["finished_at"],
            results=data["results"],
        )  # fmt: skip
        regressions = sorted(run.results.filter(regression=True).values_list("case_id", flat=True))
        body = {
            "id": run.id,
            "url": reverse("eval-run", args=[self.project.slug, run.id]),
            "passed": run.passed,
            "failed": run.failed,
            "errors": run.errors,
            "regressions": regressions,
        }
        return Response(s.RunCreatedSerializer(body).data, status=status.HTTP_201_CREATED)


class RunDetail(EvalView):
    @extend_schema(operation_id="eval_runs_retrieve", responses=s.RunDetailSerializer, summary="One eval run")
    def get(self, request, project, pk):
        run = selectors.run_get(self.project, pk)
        return Response(s.RunDetailSerializer(run, context=self.get_serializer_context()).data)


class RunResults(EvalView):
    @extend_schema(
        operation_id="eval_runs_results", responses=s.ResultSerializer(many=True),
        summary="The run's results: regressions first, then errors, failures, passes",
    )  # fmt: skip
    def get(self, request, project, pk):
        return self.paginated(selectors.run_results(selectors.run_get(self.project, pk)), s.ResultSerializer)


def _valid(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


P = "projects/<slug:project>"

urlpatterns = [
    path(f"{P}/eval-cases/", CaseListCreate.as_view(), name="api-eval-cases"),
    path(f"{P}/eval-cases/export.jsonl", CaseExport.as_view(), name="api-eval-export"),
    path(f"{P}/eval-cases/<int:pk>/", CaseDetail.as_view(), name="api-eval-case"),
    path(f"{P}/eval-cases/<int:pk>/pin/", CasePin.as_view(), name="api-eval-case-pin"),
    path(f"{P}/eval-cases/<int:pk>/retire/", CaseRetire.as_view(), name="api-eval-case-retire"),
    path(f"{P}/eval-cases/<int:pk>/restore/", CaseRestore.as_view(), name="api-eval-case-restore"),
    path(f"{P}/eval-cases/<int:pk>/tags/", CaseTags.as_view(), name="api-eval-case-tags"),
    path(f"{P}/eval-cases/<int:pk>/versions/", CaseVersions.as_view(), name="api-eval-case-versions"),
    path(f"{P}/eval-cases/<int:pk>/results/", CaseResults.as_view(), name="api-eval-case-results"),
    path(f"{P}/eval-runs/", RunListCreate.as_view(), name="api-eval-runs"),
    path(f"{P}/eval-runs/<int:pk>/", RunDetail.as_view(), name="api-eval-run"),
    path(f"{P}/eval-runs/<int:pk>/results/", RunResults.as_view(), name="api-eval-run-results"),
]
