"""Personal API tokens: create, revoke, list, and authenticate a REST API request.

A token is `twu_` + 256 random bits. Only its sha256 is stored (the bits make a slow
password hash pointless), and the plain token is returned once, by `api_token_create`.
Project ingest keys (`tw_…`, `ingest.ApiKey`) are a different thing: they only send spans.
"""

from __future__ import annotations

import datetime as dt
import secrets

from django.db.models import QuerySet
from django.utils import timezone

from dashboard.models import API_TOKEN_PREFIX, ApiToken
from ingest.models import API_KEY_PREFIX, hash_api_key

# The visible start kept for lists: the scheme prefix and 8 characters of the random part.
TOKEN_VISIBLE_CHARS = 8
# last_used_at is written at most this often per token: a busy script must not write on every request.
TOKEN_TOUCH_INTERVAL = dt.timedelta(seconds=60)
MAX_NAME_LENGTH = 200


class TokenError(Exception):
    """Why a presented token cannot authenticate; the message is safe to show the caller."""


def new_api_token() -> str:
    return API_TOKEN_PREFIX + secrets.token_urlsafe(32)


def api_token_create(*, user, name: str, expires_at: dt.datetime | None = None) -> tuple[ApiToken, str]:
    """Create a token for `user`; returns (token, plain). Only the hash is stored: show `plain` once."""
    name = name.strip()
    if not name:
        raise ValueError("name the token (e.g. the script or machine that will use it)")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"the name is {len(name)} characters long; at most {MAX_NAME_LENGTH}")
    if expires_at is not None and expires_at <= timezone.now():
        raise ValueError("the expiry date is in the past")
    plain = new_api_token()
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=plain[: len(API_TOKEN_PREFIX) + TOKEN_VISIBLE_CHARS],
        hashed_token=hash_api_key(plain),
        expires_at=expires_at,
    )
    return token, plain


def api_token_revoke(*, user, token_id: int) -> ApiToken:
    """Revoke one of `user`'s tokens (idempotent). Another user's token is `ApiToken.DoesNotExist`."""
    token = ApiToken.objects.get(pk=token_id, user=user)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def api_tokens_for_user(user) -> QuerySet[ApiToken]:
    """A user's tokens, newest first, revoked ones included (they show as revoked)."""
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")


def api_token_authenticate(raw: str, *, now: dt.datetime | None = None) -> ApiToken:
    """The active token whose plain value is `raw` (with its user loaded), or TokenError saying why not."""
    now = now or timezone.now()
    raw = raw.strip()
    if raw.startswith(API_KEY_PREFIX):  # never looked up among personal tokens
        raise TokenError(
            "this is a project ingest key (tw_…), which only sends spans to /v1/traces; "
            "use a personal API token (twu_…) from /account/tokens/"
        )
    token = ApiToken.objects.select_related("user").filter(hashed_token=hash_api_key(raw)).first()
    if token is None:
        raise TokenError("API token not recognised")
    if token.revoked_at is not None:
        raise TokenError(f"API token {token.prefix}… was revoked")
    if token.is_expired(now):
        raise TokenError(f"API token {token.prefix}… expired at {token.expires_at:%Y-%m-%d %H:%M} UTC")
    if not token.user.is_active:
        raise TokenError("the user of this API token is inactive")
    return token


def api_token_touch(*, token: ApiToken, now: dt.datetime) -> None:
    """Record use, at most once per TOKEN_TOUCH_INTERVAL (a conditional UPDATE, no read)."""
    if token.last_used_at is None or now - token.last_used_at >= TOKEN_TOUCH_INTERVAL:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
