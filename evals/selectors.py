"""Reads of the evals app: case lists and filters, recurrence, export records, runs.

Every read takes the project (already scoped to the user by the caller) and filters by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Exists, F, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import Http404

from evals import exporters
from evals.models import EvalCase, EvalCaseTag, EvalCaseVersion, EvalResult, EvalRun
from evals.services import EvalError
from ingest.models import Project, ToolCall

STATUSES = tuple(EvalCase.Status.values)


@dataclass(frozen=True)
class CaseFilters:
    status: str = ""  # "" = every status but retired
    tool: str = ""
    tag: str = ""
    q: str = ""

    def as_params(self) -> dict[str, str]:
        return {name: value for name, value in vars(self).items() if value}


def parse_case_filters(params) -> CaseFilters:
    """?status=draft|pinned|retired|all&tool=&tag=&q= from a page or API query; EvalError naming a bad one."""
    status = (params.get("status") or "").strip()
    if status and status not in (*STATUSES, "all"):
        raise EvalError("status", f"unknown status {status!r}; one of {', '.join(STATUSES)}, all")
    return CaseFilters(
        status=status,
        tool=(params.get("tool") or "").strip(),
        tag=(params.get("tag") or "").strip().lower(),
        q=(params.get("q") or "").strip(),
    )


def _filtered(project: Project, filters: CaseFilters) -> QuerySet[EvalCase]:
    cases = EvalCase.objects.filter(project=project)
    if filters.status == EvalCase.Status.RETIRED:
        cases = cases.filter(retired_at__isnull=False)
    elif filters.status != "all":
        cases = cases.filter(retired_at__isnull=True)
        if filters.status == EvalCase.Status.PINNED:
            cases = cases.filter(pinned_version__isnull=False)
        elif filters.status == EvalCase.Status.DRAFT:
            cases = cases.filter(pinned_version__isnull=True)
    if filters.tool:
        cases = cases.filter(tool=filters.tool)
    if filters.tag:
        cases = cases.filter(Exists(EvalCaseTag.objects.filter(case=OuterRef("pk"), name=filters.tag)))
    if filters.q:
        q = filters.q
        tagged = Exists(EvalCaseTag.objects.filter(case=OuterRef("pk"), name__icontains=q))
        cases = cases.filter(Q(title__icontains=q) | Q(tool__icontains=q) | Q(message__icontains=q) | tagged)
    return cases


def _recurrence_calls(since_field: str = "pinned_at"):
    """Live failed calls with the case's fingerprint since it was pinned (a subquery on EvalCase)."""
    return ToolCall.objects.filter(
        project_id=OuterRef("project_id"),
        tool=OuterRef("tool"),
        fingerprint=OuterRef("fingerprint"),
        ok=False,
        start_time__gt=OuterRef(since_field),
    ).exclude(trace_id=OuterRef("trace_id"), span_id=OuterRef("span_id"))  # not the promoted call itself


def case_list(project: Project, filters: CaseFilters) -> QuerySet[EvalCase]:
    """Cases for the list page and API, newest first, each with its last result and recurrence count."""
    last = EvalResult.objects.filter(case=OuterRef("pk")).order_by("-run__started_at", "-run_id")
    recurring = (
        _recurrence_calls()
        .exclude(fingerprint="")
        .order_by()
        .values("project_id")
        .annotate(n=Count("*"))
        .values("n")
    )
    return (
        _filtered(project, filters)
        .annotate(
            last_status=Subquery(last.values("status")[:1]),
            last_regression=Subquery(last.values("regression")[:1]),
            last_run_id=Subquery(last.values("run_id")[:1]),
            recurring_calls=Coalesce(Subquery(recurring, output_field=IntegerField()), Value(0)),
        )
        .prefetch_related(Prefetch("tags", queryset=EvalCaseTag.objects.order_by("name")))
        .order_by("-created_at", "-id")
    )


def case_tools(project: Project) -> list[str]:
    return list(EvalCase.objects.filter(project=project).order_by("tool").values_list("tool", flat=True).distinct())


def case_get(project: Project, pk: int) -> EvalCase:
    """The project's case, or 404 (another project's case is as missing as no case)."""
    case = (
        EvalCase.objects.filter(project=project, pk=pk)
        .prefetch_related(Prefetch("tags", queryset=EvalCaseTag.objects.order_by("name")))
        .first()
    )
    if case is None:
        raise Http404("no such eval case")
    return case


def case_versions(case: EvalCase) -> list[EvalCaseVersion]:
    return list(case.versions.select_related("created_by", "pinned_by").order_by("-number"))


def case_results(case: EvalCase, limit: int = 50) -> list[EvalResult]:
    return list(
        case.results.select_related("run", "version").order_by("-run__started_at", "-run_id")[:limit]
    )


@dataclass(frozen=True)
class Recurrence:
    case: EvalCase
    calls: int
    since: datetime
    last_at: datetime
    last_trace_id: str
    last_span_id: str


def recurring_cases(project: Project, tool: str | None = None, since: datetime | None = None) -> list[Recurrence]:
    """Pinned, active cases whose observed fingerprint came back in live tool calls after they were pinned.

    `since` narrows the window further (e.g. the tool page's range). Most recent first.
    One query, whatever the number of cases.
    """
    cases = EvalCase.objects.filter(project=project)
    if tool is not None:
        cases = cases.filter(tool=tool)
    return _recurrences(cases, since)


def case_recurrence(case: EvalCase) -> Recurrence | None:
    """The case's recurrence since it was pinned, or None."""
    found = _recurrences(EvalCase.objects.filter(pk=case.pk), None)
    return found[0] if found else None


def _recurrences(cases: QuerySet[EvalCase], since: datetime | None) -> list[Recurrence]:
    cases = cases.filter(pinned_at__isnull=False, retired_at__isnull=True).exclude(fingerprint="")
    if not cases.exists():
        return []  # the per-case subqueries plan over every day partition: ~20 ms even with no case
    calls = _recurrence_calls()
    if since is not None:
        calls = calls.filter(start_time__gte=since)
    latest = calls.order_by("-start_time", "-span_id")
    counted = calls.order_by().values("project_id").annotate(n=Count("*")).values("n")
    cases = cases.annotate(
        recurring_calls=Subquery(counted, output_field=IntegerField()),
        last_at=Subquery(latest.values("start_time")[:1]),
        last_trace_id=Subquery(latest.values("trace_id")[:1]),
        last_span_id=Subquery(latest.values("span_id")[:1]),
    ).filter(recurring_calls__gt=0)
    found = [
        Recurrence(
            case=case,
            calls=case.recurring_calls,
            since=max(case.pinned_at, since) if since else case.pinned_at,
            last_at=case.last_at,
            last_trace_id=case.last_trace_id,
            last_span_id=case.last_span_id,
        )
        for case in cases
    ]
    return sorted(found, key=lambda found: found.last_at, reverse=True)


# --- export ------------------------------------------------------------------------------


def export_records(project: Project, filters: CaseFilters) -> list[dict]:
    """The latest pinned version of each active case matching the filters, as JSONL records.

    Drafts are never exported (they have no hash yet) and retired cases never run.
    """
    filters = CaseFilters(status=EvalCase.Status.PINNED, tool=filters.tool, tag=filters.tag, q=filters.q)
    versions = (
        EvalCaseVersion.objects.filter(case__in=_filtered(project, filters), number=F("case__pinned_version"))
        .select_related("case")
        .prefetch_related(Prefetch("case__tags", queryset=EvalCaseTag.objects.order_by("name")))
        .order_by("case_id")
    )
    return [
        exporters.case_record(
            project=project.slug,
            case_id=version.case_id,
            version=version.number,
            content_hash=version.content_hash,
            title=version.case.title,
            tool=version.case.tool,
            tags=[tag.name for tag in version.case.tags.all()],
            arguments=version.arguments,
            expect=version.expect,
            timeout_s=version.timeout_s,
            observed=version.case.observed,
        )
        for version in versions
    ]


# --- runs --------------------------------------------------------------------------------


def run_list(project: Project) -> QuerySet[EvalRun]:
    return EvalRun.objects.filter(project=project).order_by("-started_at", "-id")


def run_get(project: Project, pk: int) -> EvalRun:
    run = EvalRun.objects.filter(project=project, pk=pk).first()
    if run is None:
        raise Http404("no such eval run")
    return run


def run_results(run: EvalRun) -> QuerySet[EvalResult]:
    """Regressions first, then failures and errors, then passes; by case within each."""
    return (
        run.results.select_related("case", "version").order_by("-regression", "status", "case_id")
    )
