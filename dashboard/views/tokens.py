from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import path


@login_required
def account_tokens(request):
    return render(request, "dashboard/stub.html", {"title": "API tokens"})


urlpatterns = [
    path("account/tokens/", account_tokens, name="account-tokens"),
]
