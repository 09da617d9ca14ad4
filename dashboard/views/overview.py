from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import path

from dashboard.views.common import page_scope


@login_required
def home(request):
    return render(request, "dashboard/stub.html", {"title": "Projects"})


@login_required
def overview(request, project):
    return render(request, "dashboard/stub.html", page_scope(request, project).context(title="Overview"))


@login_required
def tool(request, project, tool):
    return render(request, "dashboard/stub.html", page_scope(request, project).context(title=tool))


urlpatterns = [
    path("p/<slug:project>/", overview, name="overview"),
    path("p/<slug:project>/tools/<path:tool>/", tool, name="tool"),
]
