"""REST API authentication by personal API token: `Authorization: Bearer twu_…` (or `Token twu_…`)."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from dashboard import tokens

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


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """Declares the bearer scheme in the OpenAPI schema (drf-spectacular finds it by import)."""

    target_class = "dashboard.api.auth.TokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token (twu_…) from /account/tokens/. "
            "Project ingest keys (tw_…) are for /v1/traces only.",
        }
