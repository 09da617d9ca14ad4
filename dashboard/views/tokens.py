"""`account/tokens/`: your personal API tokens for the REST API: list (with scopes), create with the
scopes you pick (shown once), revoke."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import path
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from dashboard import tokens
from dashboard.models import ApiToken

# The plain token lives in the session between the POST and the page that shows it, then is dropped:
# a reload shows it no more, and the browser never re-posts the form.
NEW_TOKEN_SESSION_KEY = "toolwatch_new_api_token"
EXPIRY_CHOICES = [("", "Never"), ("30", "In 30 days"), ("90", "In 90 days"), ("365", "In a year")]


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=tokens.MAX_NAME_LENGTH,
        help_text="What will use it, e.g. “CI eval runner”.",
        error_messages={"required": "Name the token (e.g. the script or machine that will use it)."},
    )
    expires_in_days = forms.ChoiceField(choices=EXPIRY_CHOICES, required=False, label="Expires")
    # Only `read` ticked at first: a token gets more only when someone asks for it.
    scopes = forms.MultipleChoiceField(
        choices=[(scope, tokens.SCOPE_HELP[scope]) for scope in tokens.SCOPES],
        widget=forms.CheckboxSelectMultiple,
        initial=[tokens.READ],
        error_messages={"required": "Pick at least one scope (the eval runner needs only “runs”)."},
    )

    def expires_at(self, now: dt.datetime) -> dt.datetime | None:
        days = self.cleaned_data["expires_in_days"]
        return now + dt.timedelta(days=int(days)) if days else None


@login_required
@never_cache  # the page that shows a new token once: no browser or proxy may keep it
def account_tokens(request):
    form = TokenForm()
    if request.method == "POST":
        form = TokenForm(request.POST)
        if form.is_valid():
            token, plain = tokens.api_token_create(
                user=request.user, name=form.cleaned_data["name"], scopes=form.cleaned_data["scopes"],
                expires_at=form.expires_at(timezone.now()),
            )  # fmt: skip
            request.session[NEW_TOKEN_SESSION_KEY] = {"id": token.pk, "plain": plain}
            return redirect("account-tokens")
    new_token = request.session.pop(NEW_TOKEN_SESSION_KEY, None)
    return render(
        request,
        "dashboard/tokens.html",
        {
            "form": form,
            "tokens": tokens.api_tokens_for_user(request.user),
            "new_token": new_token,
            "now": timezone.now(),
        },
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def account_token_revoke(request, pk: int):
    try:
        token = tokens.api_token_revoke(user=request.user, token_id=pk)
    except ApiToken.DoesNotExist:
        raise Http404("no such token") from None
    messages.success(request, f"Token “{token.name}” ({token.prefix}…) revoked; requests with it now get a 401.")
    return redirect("account-tokens")


urlpatterns = [
    path("account/tokens/", account_tokens, name="account-tokens"),
    path("account/tokens/<int:pk>/revoke/", account_token_revoke, name="account-token-revoke"),
]
