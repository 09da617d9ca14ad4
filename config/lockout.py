"""The page a locked-out login gets (AXES_LOCKOUT_CALLABLE): a 429 that says why and for how long."""

from __future__ import annotations

import math

from axes.helpers import get_cool_off, get_failure_limit
from django.shortcuts import render


def lockout_response(request, original_response=None, credentials=None):
    """django-axes calls this instead of its plain-text 403/429 once a username or an address has
    failed AXES_FAILURE_LIMIT times within the cool-off (docs/deploy.md#login-lockout)."""
    cool_off = get_cool_off(request)
    seconds = max(math.ceil(cool_off.total_seconds()), 1) if cool_off else None
    context = {
        "failure_limit": get_failure_limit(request, credentials),
        "minutes": math.ceil(seconds / 60) if seconds else None,
        "form_username": request.POST.get("username", "") if request.method == "POST" else "",
    }
    response = render(request, "registration/locked_out.html", context, status=429)
    if seconds:
        response["Retry-After"] = str(seconds)
    return response
