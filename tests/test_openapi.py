"""The OpenAPI schema generates cleanly and documents token auth; the docs pages use only our own files."""

import io
import re

import pytest
import yaml
from django.core.management import CommandError, call_command
from drf_spectacular.drainage import GENERATOR_STATS

from dashboard import tokens

# Any absolute URL in a src/href/spec-url attribute or a CSS url(): the docs must load nothing from elsewhere.
EXTERNAL = re.compile(r"""(?:src|href|spec-url)\s*=\s*["']\s*((?:https?:)?//[^"']*)|url\(\s*["']?((?:https?:)?//[^)"']*)""", re.I)


def generate_schema(tmp_path) -> dict:
    """`manage.py spectacular --validate --fail-on-warn`, failing with drf-spectacular's own messages."""
    GENERATOR_STATS.reset()  # its caches outlive a call; start from nothing so only this run counts
    out = tmp_path / "schema.yaml"
    try:
        call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out), stderr=io.StringIO())
    except CommandError as exc:
        problems = [*GENERATOR_STATS._warn_cache, *GENERATOR_STATS._error_cache]
        pytest.fail(f"schema generation failed ({exc}):\n" + "\n".join(problems))
    return yaml.safe_load(out.read_text())


def test_the_schema_generates_and_validates_with_no_warnings_or_errors(tmp_path, db):
    schema = generate_schema(tmp_path)

    assert schema["openapi"].startswith("3.")
    assert "/api/v1/projects/" in schema["paths"]


def test_the_schema_declares_the_bearer_token_scheme_on_every_operation(db):
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)

    bearer = schema["components"]["securitySchemes"]["bearerAuth"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    operations = [op for item in schema["paths"].values() for op in item.values() if isinstance(op, dict)]
    assert operations
    unguarded = [op["operationId"] for op in operations if {"bearerAuth": []} not in op.get("security", [])]
    assert unguarded == []


def test_the_schema_is_served_to_a_token_holder(client, member):
    _, plain = tokens.api_token_create(user=member, name="ci")

    response = client.get("/api/schema/", headers={"Authorization": f"Bearer {plain}"})

    assert response.status_code == 200
    assert "bearerAuth" in response.content.decode()


@pytest.mark.parametrize("url, asset", [
    ("/api/docs/", "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"),
    ("/api/redoc/", "/static/drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"),
])  # fmt: skip
def test_the_docs_pages_render_from_our_own_static_files(client, member, url, asset):
    client.force_login(member)

    response = client.get(url)

    html = response.content.decode()
    assert response.status_code == 200
    assert asset in html
    assert [a or b for a, b in EXTERNAL.findall(html)] == []


def test_the_api_link_in_the_header_leads_to_the_docs(client, member):
    client.force_login(member)

    assert 'href="/api/docs/"' in client.get("/account/tokens/").content.decode()
