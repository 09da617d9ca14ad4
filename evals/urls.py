from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import path

from dashboard.views.common import page_scope


@login_required
def case_list(request, project):
    return render(request, "dashboard/stub.html", page_scope(request, project).context(title="Eval cases"))


@login_required
def promote(request, project, trace_id, span_id):
    return render(request, "dashboard/stub.html", page_scope(request, project).context(title="Promote"))


urlpatterns = [
    path("p/<slug:project>/evals/promote/<str:trace_id>/<str:span_id>/", promote, name="eval-promote"),
    path("p/<slug:project>/evals/", case_list, name="eval-cases"),
]
