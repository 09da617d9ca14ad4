from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import path

from dashboard.views.common import page_scope


@login_required
def traces_list(request, project):
    return render(request, "dashboard/stub.html", page_scope(request, project).context(title="traces"))


@login_required
def trace_detail(request, project, trace_id):
    return render(request, "dashboard/stub.html", page_scope(request, project).context(title="trace"))


urlpatterns = [
    path("p/<slug:project>/traces/", traces_list, name="traces"),
    path("p/<slug:project>/traces/<str:trace_id>/", trace_detail, name="trace"),
]
