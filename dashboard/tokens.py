"""Personal API tokens: create, revoke, list, and authenticate a REST API request.

A token is `twu_` + 256 random bits. Only its sha256 is stored (the bits make a slow
password hash pointless), and the plain token is returned once, by `api_token_create`.
Project ingest keys (`tw_…`, `ingest.ApiKey`) are a different thing: they only send spans.

Scopes. A token carries some of three scopes, and a call needs one of them:

- `read`: every GET of the REST API;
- `runs`: what the eval runner calls (evals/runner/client.py), and nothing else: the JSONL
  export of a project's cases and posting an eval run (docs/runner.md#the-token);
- `admin`: every other write: ingest keys, channels, settings, thresholds, alert actions,
  promoting and editing cases.

A scope never grants more than the token's user may do: the role checks still apply on top
(an owner-only change is a 403 for a plain member whatever the token's scopes). Scopes limit
tokens only; a logged-in browser session is not a token and is not limited by them.
The REST API checks them in `dashboard.api.auth.HasScope`; other surfaces call
`token_has_scope` or `require_scope`.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterable

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.utils import timezone

from dashboard.models import API_TOKEN_PREFIX, API_TOKEN_SCOPES, ApiToken
from ingest.models import API_KEY_PREFIX, hash_api_key

# The visible start kept for lists: the scheme prefix and 8 characters of the random part.
TOKEN_VISIBLE_CHARS = 8
# last_used_at is written at most this often per token: a busy script must not write on every request.
TOKEN_TOUCH_INTERVAL = dt.timedelta(seconds=60)
MAX_NAME_LENGTH = 200

READ, RUNS, ADMIN = API_TOKEN_SCOPES
SCOPES = API_TOKEN_SCOPES
SCOPE_HELP = {
    READ: "read everything you can see: every GET of the API",
    RUNS: "the eval runner: fetch the cases export and post eval runs (nothing else)",
    ADMIN: "every other change your role allows: keys, channels, settings, alerts, cases",
}


class TokenError(Exception):
    """Why a presented token cannot authenticate; the message is safe to show the caller."""


class ScopeDenied(PermissionDenied):
    """The token lacks `scope`. A 403 for any surface; `body()` is the answer the REST API gives."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        super().__init__(f"This token lacks the '{scope}' scope.")

    def body(self) -> dict[str, str]:
        return {"detail": str(self), "required_scope": self.scope}


def clean_scopes(scopes: Iterable[str]) -> list[str]:
    """The scopes, each once, in SCOPES order; ValueError naming an unknown one, or none given."""
    if isinstance(scopes, str):
        scopes = scopes.replace(",", " ").split()
    given = [str(scope).strip().lower() for scope in scopes]
    unknown = [scope for scope in given if scope not in SCOPES]
    if unknown:
        raise ValueError(f"unknown scope {unknown[0]!r}; the scopes are {', '.join(SCOPES)}")
    if not given:
        raise ValueError(f"give the token at least one scope: {', '.join(SCOPES)}")
    return [scope for scope in SCOPES if scope in given]


def token_has_scope(token: ApiToken, scope: str) -> bool:
    """Whether `token` carries `scope`. An unknown scope name is a ValueError (a typo must not fail open or shut)."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; the scopes are {', '.join(SCOPES)}")
    return scope in (token.scopes or [])


def require_scope(request, scope: str) -> None:
    """Raise ScopeDenied unless the request's token carries `scope`.

    The token is `request.auth` (DRF sets it; a non-DRF surface that authenticates with
    `api_token_authenticate` sets it the same way). A request without a token (a browser
    session) passes: scopes limit tokens, roles limit users. A DRF view declares `token_scopes`
    instead (dashboard/api/auth.py): DRF would answer this exception with a generic 403.
    """
    token = getattr(request, "auth", None)
    if isinstance(token, ApiToken) and not token_has_scope(token, scope):
        raise ScopeDenied(scope)


def new_api_token() -> str:
    return API_TOKEN_PREFIX + secrets.token_urlsafe(32)


def api_token_create(
    *, user, name: str, scopes: Iterable[str] = SCOPES, expires_at: dt.datetime | None = None
) -> tuple[ApiToken, str]:
    """Create a token for `user` with `scopes` (default: all, what a token could do before scopes); returns
    (token, plain).

    Only the hash is stored: show `plain` once. A bad name, scope or expiry is a ValueError saying which.
    """
    name = name.strip()
    if not name:
        raise ValueError("name the token (e.g. the script or machine that will use it)")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"the name is {len(name)} characters long; at most {MAX_NAME_LENGTH}")
    scopes = clean_scopes(scopes)
    if expires_at is not None and expires_at <= timezone.now():
        raise ValueError("the expiry date is in the past")
    plain = new_api_token()
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=plain[: len(API_TOKEN_PREFIX) + TOKEN_VISIBLE_CHARS],
        hashed_token=hash_api_key(plain),
        expires_at=expires_at,
        scopes=scopes,
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
    return _active(token, now)


def api_token_recheck(token: ApiToken, *, now: dt.datetime | None = None) -> ApiToken:
    """The token read again, for a long-lived session (stdio MCP) that authenticated once: still
    active, or TokenError saying why not (revoked, expired, its user deactivated since)."""
    fresh = ApiToken.objects.select_related("user").filter(pk=token.pk).first()
    if fresh is None:
        raise TokenError("API token not recognised")
    return _active(fresh, now or timezone.now())


def _active(token: ApiToken, now: dt.datetime) -> ApiToken:
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
