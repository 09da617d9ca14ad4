from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils import timezone

from dashboard import selectors


@login_required
def home(request):
    projects = selectors.projects_for_user(request.user)
    since = timezone.now() - timedelta(hours=24)
    return render(
        request,
        "dashboard/home.html",
        {
            "summaries": selectors.project_summaries(projects, since),
            "failed_calls": selectors.recent_failed_calls(projects),
        },
    )
