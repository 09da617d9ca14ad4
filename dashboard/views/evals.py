"""Eval case and run pages: thin views over evals.selectors and evals.services (the API is in
dashboard/api/evals.py)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from dashboard.views.common import page_scope
from evals import expectations, exporters, selectors, services, snapshots
from evals.forms import CaseEditForm, ExpectationForm, PromoteForm, TagsForm
from evals.models import EvalCase

PAGE_SIZE = 50


@login_required
def case_list(request, project):
    scope = page_scope(request, project)
    error = ""
    try:
        filters = selectors.parse_case_filters(request.GET)
    except services.EvalError as exc:
        error = f"{exc.field}: {exc.message}; showing every active case"
        filters = selectors.CaseFilters()
    page = Paginator(selectors.case_list(scope.project, filters), PAGE_SIZE).get_page(request.GET.get("page"))
    params = filters.as_params()
    return render(
        request,
        "evals/case_list.html",
        scope.context(
            page=page,
            case_filters=filters,
            filter_error=error,
            statuses=selectors.STATUSES,
            tools=selectors.case_tools(scope.project),
            filter_query=urlencode(params),
            export_query=urlencode({k: v for k, v in params.items() if k != "status"}),
        ),
    )


@login_required
def case_export(request, project):
    """The cases page's "Download JSONL": its tool, tag and search filters; pinned, active cases only."""
    scope = page_scope(request, project)
    try:
        filters = selectors.parse_case_filters(request.GET)
    except services.EvalError as exc:
        return _bad_request(request, scope, exc)
    return jsonl_response(selectors.export_records(scope.project, filters), scope.project.slug)


def jsonl_response(records: list[dict], slug: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(exporters.jsonl_lines(records), content_type=exporters.CONTENT_TYPE)
    response["Content-Disposition"] = f'attachment; filename="{slug}-eval-cases.jsonl"'
    return response


@login_required
def promote(request, project, trace_id, span_id):
    scope = page_scope(request, project)
    existing = EvalCase.objects.filter(project=scope.project, trace_id=trace_id, span_id=span_id).first()
    if existing is not None:
        messages.info(request, f"This failure was promoted already: it is eval case #{existing.pk}.")
        return redirect("eval-case", scope.project.slug, existing.pk)
    try:
        call = services.promotable_call(project=scope.project, trace_id=trace_id, span_id=span_id)
    except services.EvalError as exc:
        return _bad_request(request, scope, exc, status=404 if exc.missing else 400)
    observed = services.observed_of(call)
    if request.method == "POST":
        form = PromoteForm(request.POST)
        if form.is_valid():
            try:
                promotion = services.case_promote(
                    project=scope.project, trace_id=trace_id, span_id=span_id, user=request.user,
                    title=form.cleaned_data["title"], tags=services.parse_tags(form.cleaned_data["tags"]),
                    expect=form.expectation(), timeout_s=form.cleaned_data["timeout_s"],
                )  # fmt: skip
            except services.EvalError as exc:
                form.add_service_error(exc)
            else:
                case = promotion.case
                if promotion.created:
                    messages.success(request, f"Promoted to eval case #{case.pk} (draft version 1).")
                else:
                    messages.info(request, f"This failure was promoted already: it is eval case #{case.pk}.")
                return redirect("eval-case", scope.project.slug, case.pk)
    else:
        form = PromoteForm(
            initial=ExpectationForm.initial_from(
                expectations.suggest(observed), title=services.default_title(call), timeout_s=services.DEFAULT_TIMEOUT_S
            )
        )
    return render(
        request,
        "evals/promote.html",
        scope.context(form=form, call=call, observed=observed, arguments_json=_pretty(call.arguments)),
    )


def _span_failed(span: dict) -> bool:
    """A span drawn red, as the trace waterfall draws it: its tool call failed (a soft failure
    too, with the span's status OK), or the span's status is ERROR."""
    call = span.get("tool_call")
    if isinstance(call, dict) and call.get("ok") is False:
        return True
    return span.get("status_code") == 2


@login_required
def case_detail(request, project, pk):
    scope = page_scope(request, project)
    case = selectors.case_get(scope.project, pk)
    versions = selectors.case_versions(case)
    for version in versions:
        version.description = _describe(version.expect)
    snapshot = [
        {
            **span,
            "attributes_json": _pretty(span["attributes"]),
            "events_json": _pretty(span["events"]),
            "tool_call_json": _pretty(span["tool_call"]),
            "failed": _span_failed(span),
        }
        for span in snapshots.waterfall(list(case.snapshot.values()))
    ]
    return render(
        request,
        "evals/case_detail.html",
        scope.context(
            case=case,
            versions=versions,
            latest=versions[0],
            expectation=_describe(versions[0].expect),
            results=selectors.case_results(case),
            snapshot=snapshot,
            recurrence=selectors.case_recurrence(case),
            tags_form=TagsForm(initial={"tags": ", ".join(tag.name for tag in case.tags.all())}),
            arguments_json=_pretty(versions[0].arguments),
        ),
    )


@login_required
def case_edit(request, project, pk):
    scope = page_scope(request, project)
    case = selectors.case_get(scope.project, pk)
    latest = case.versions.get(number=case.latest_version)
    if case.retired_at is not None:
        messages.error(request, "A retired case cannot be edited; restore it first.")
        return redirect("eval-case", scope.project.slug, case.pk)
    if request.method == "POST":
        form = CaseEditForm(request.POST)
        if form.is_valid():
            try:
                version = services.case_edit(
                    case=case, user=request.user, title=form.cleaned_data["title"], expect=form.expectation(),
                    arguments=form.cleaned_data["arguments"], timeout_s=form.cleaned_data["timeout_s"],
                )  # fmt: skip
            except services.EvalError as exc:
                form.add_service_error(exc)
            else:
                if version.number != latest.number:
                    messages.success(request, f"Version {latest.number} is pinned: saved as draft version {version.number}.")
                else:
                    messages.success(request, f"Saved draft version {version.number}.")
                return redirect("eval-case", scope.project.slug, case.pk)
    else:
        form = CaseEditForm(
            initial=ExpectationForm.initial_from(
                latest.expect, title=case.title, timeout_s=latest.timeout_s, arguments=_pretty(latest.arguments)
            )
        )
    return render(request, "evals/case_edit.html", scope.context(case=case, latest=latest, form=form))


@login_required
@require_POST
def case_pin(request, project, pk):
    scope = page_scope(request, project)
    case = selectors.case_get(scope.project, pk)
    try:
        version = services.case_pin(case=case, user=request.user)
    except services.EvalError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Pinned version {version.number} ({version.content_hash[:19]}…).")
    return redirect("eval-case", scope.project.slug, case.pk)


@login_required
@require_POST
def case_retire(request, project, pk):
    scope = page_scope(request, project)
    case = selectors.case_get(scope.project, pk)
    if request.POST.get("restore"):
        services.case_restore(case=case)
        messages.success(request, "Restored: the case is exported and run again.")
    else:
        services.case_retire(case=case)
        messages.success(request, "Retired: the case is no longer exported; its history stays.")
    return redirect("eval-case", scope.project.slug, case.pk)


@login_required
@require_POST
def case_tags(request, project, pk):
    scope = page_scope(request, project)
    case = selectors.case_get(scope.project, pk)
    form = TagsForm(request.POST)
    if form.is_valid():
        try:
            names = services.case_set_tags(case=case, tags=services.parse_tags(form.cleaned_data["tags"]))
        except services.EvalError as exc:
            messages.error(request, f"Tags not saved: {exc.message}")
        else:
            messages.success(request, f"Tags: {', '.join(names) or 'none'}.")
    else:
        messages.error(request, "Tags not saved: " + "; ".join(form.errors.get("tags", ["bad value"])))
    return redirect("eval-case", scope.project.slug, case.pk)


@login_required
def run_list(request, project):
    scope = page_scope(request, project)
    page = Paginator(selectors.run_list(scope.project), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "evals/run_list.html", scope.context(page=page))


@login_required
def run_detail(request, project, pk):
    scope = page_scope(request, project)
    run = selectors.run_get(scope.project, pk)
    return render(request, "evals/run_detail.html", scope.context(run=run, results=list(selectors.run_results(run))))


def _describe(expect: dict) -> str:
    try:
        return expectations.describe(expect)
    except expectations.ExpectationError as exc:  # stored before a rule tightened: say so, do not crash the page
        return f"Not a valid expectation ({exc})."


def _pretty(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _bad_request(request, scope, error: services.EvalError, status: int = 400):
    return render(
        request,
        "evals/refused.html",
        scope.context(error=error, back=reverse("eval-cases", args=[scope.project.slug])),
        status=status,
    )


urlpatterns = [
    path("p/<slug:project>/evals/", case_list, name="eval-cases"),
    path("p/<slug:project>/evals/export.jsonl", case_export, name="eval-export"),
    path("p/<slug:project>/evals/promote/<str:trace_id>/<str:span_id>/", promote, name="eval-promote"),
    path("p/<slug:project>/evals/cases/<int:pk>/", case_detail, name="eval-case"),
    path("p/<slug:project>/evals/cases/<int:pk>/edit/", case_edit, name="eval-case-edit"),
    path("p/<slug:project>/evals/cases/<int:pk>/pin/", case_pin, name="eval-case-pin"),
    path("p/<slug:project>/evals/cases/<int:pk>/retire/", case_retire, name="eval-case-retire"),
    path("p/<slug:project>/evals/cases/<int:pk>/tags/", case_tags, name="eval-case-tags"),
    path("p/<slug:project>/evals/runs/", run_list, name="eval-runs"),
    path("p/<slug:project>/evals/runs/<int:pk>/", run_detail, name="eval-run"),
]
