from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import path

from dashboard.views.common import page_scope


@login_required
def health(request, project):
    return render(request, "dashboard/stub.html", page_scope(request, project).context(title="health"))


urlpatterns = [
    path("p/<slug:project>/health/", health, name="health"),
]
