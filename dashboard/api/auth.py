"""REST API authentication by personal API token: `Authorization: Bearer twu_…` (or `Token twu_…`),
and the token's scopes (dashboard/tokens.py says what each one opens).

Every API view is guarded by `HasScope` (REST_FRAMEWORK's default permissions): a GET, HEAD or
OPTIONS needs the token's `read` scope, any other method `admin`, unless the view declares
otherwise in `token_scopes` (the runner's two operations, in dashboard/api/evals.py).
"""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission

from dashboard import tokens
from dashboard.models import ApiToken

SCHEMES = (b"bearer", b"token")
REALM = "Toolwatch API"


class TokenAuthentication(BaseAuthentication):
    """A personal API token in the Authorization header.

    No header, or another scheme: None, so session auth (the pages' own fetches) can
    answer. A token that is malformed, unknown, revoked or expired, or a project ingest
    key: 401 with a `detail` saying which, and `WWW-Authenticate: Bearer`.
    """

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in SCHEMES:
            return None
        if len(parts) != 2:
            raise AuthenticationFailed("Authorization header must be 'Bearer <token>', with one token and no spaces")
        try:
            raw = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed("the API token contains non-ASCII characters") from None
        now = timezone.now()
        try:
            token = tokens.api_token_authenticate(raw, now=now)
        except tokens.TokenError as exc:
            raise AuthenticationFailed(str(exc)) from None
        tokens.api_token_touch(token=token, now=now)
        return token.user, token

    def authenticate_header(self, request) -> str:
        # Also makes DRF answer 401 (not 403) to a request with no credentials at all.
        return f'Bearer realm="{REALM}"'


def view_scopes(view, method: str) -> tuple[str, ...]:
    """The scopes, any one of which lets a token call `method` on `view`; a refusal names the first.

    A view declares exceptions as `token_scopes = {"POST": (RUNS,)}`; otherwise reads need
    `read` and writes `admin`.
    """
    method = method.upper()
    declared = getattr(view, "token_scopes", {}).get(method)
    if declared:
        return tuple(declared)
    return (tokens.READ,) if method in SAFE_METHODS else (tokens.ADMIN,)


class MissingScope(PermissionDenied):
    """403 `{"detail": "This token lacks the 'admin' scope.", "required_scope": "admin"}`."""

    def __init__(self, scope: str) -> None:
        super().__init__(tokens.ScopeDenied(scope).body())


class HasScope(BasePermission):
    """A token call needs one of `view_scopes(view, method)`; a session (no token) is not limited.

    Checked before the view runs, so the answer is the same for a project the user cannot see
    and one that does not exist; the role checks inside the views still apply on top.
    """

    def has_permission(self, request, view) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken):
            return True
        accepted = view_scopes(view, request.method)
        if any(tokens.token_has_scope(token, scope) for scope in accepted):
            return True
        raise MissingScope(accepted[0])


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """Declares the bearer scheme in the OpenAPI schema (drf-spectacular finds it by import)."""

    target_class = "dashboard.api.auth.TokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token (twu_…) from /account/tokens/. "
            "Project ingest keys (tw_…) are for /v1/traces only. A token carries scopes: `read` "
            "(every GET), `runs` (the eval runner: the cases export and posting a run), `admin` "
            "(every other change); each operation's `x-token-scopes` lists the ones it accepts, "
            "and a token with none of them gets a 403 naming the scope in `required_scope`. "
            "The user's role still applies on top.",
        }
