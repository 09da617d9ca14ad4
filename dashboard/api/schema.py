"""The OpenAPI schema class (REST_FRAMEWORK's DEFAULT_SCHEMA_CLASS): drf-spectacular's, plus token scopes.

Apart from dashboard/api/auth.py because DRF imports that module while `rest_framework.views`
is still loading (the default authentication classes), and drf-spectacular's AutoSchema needs
`rest_framework.generics`, which needs those views.
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema

from dashboard.api.auth import HasScope, view_scopes


class ScopedAutoSchema(AutoSchema):
    """drf-spectacular's schema, plus each operation's token scopes: `x-token-scopes`, a line of
    its description, and the 403 a token without them gets. (OpenAPI 3.0 allows scopes in a
    security requirement only for OAuth2 and OpenID Connect, not for a bearer scheme.)"""

    def get_operation(self, *args, **kwargs):
        operation = super().get_operation(*args, **kwargs)
        if operation is None or not any(isinstance(p, HasScope) for p in self.view.get_permissions()):
            return operation
        scopes = view_scopes(self.view, self.method)
        operation["x-token-scopes"] = list(scopes)
        note = "Token scope: " + " or ".join(f"`{scope}`" for scope in scopes) + "."
        operation["description"] = f"{operation['description']}\n\n{note}" if operation.get("description") else note
        refusal = f"The token lacks the `{scopes[0]}` scope: `required_scope` names it."
        responses = operation.setdefault("responses", {})
        if "403" in responses:
            responses["403"] = {**responses["403"], "description": f"{responses['403']['description']} Or: {refusal}"}
        else:
            # Response headers (the runner contract's) are on every answer, this one too.
            headers = next((r["headers"] for r in responses.values() if isinstance(r, dict) and "headers" in r), None)
            responses["403"] = {"description": refusal, **({"headers": headers} if headers else {})}
        return operation
