from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import path

from dashboard.views.common import page_scope


@login_required
def settings(request, project):
    return render(request, "dashboard/stub.html", page_scope(request, project).context(title="settings"))


urlpatterns = [
    path("p/<slug:project>/settings/", settings, name="settings"),
]
