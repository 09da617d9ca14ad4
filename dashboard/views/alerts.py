from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import path

from dashboard.views.common import page_scope


@login_required
def alerts_list(request, project):
    return render(request, "dashboard/stub.html", page_scope(request, project).context(title="alerts"))


@login_required
def alert_detail(request, project, pk):
    return render(request, "dashboard/stub.html", page_scope(request, project).context(title="alert"))


urlpatterns = [
    path("p/<slug:project>/alerts/", alerts_list, name="alerts"),
    path("p/<slug:project>/alerts/<int:pk>/", alert_detail, name="alert"),
]
