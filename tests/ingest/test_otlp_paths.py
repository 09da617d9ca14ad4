"""The OTLP paths answer with and without a trailing slash (config/urls.py).

Exporters join the base endpoint and "/v1/traces" themselves, and a base that ends in "/"
gives "/v1/traces/"; Django's APPEND_SLASH would redirect a POST (and drop its body) if only
one form matched, so both forms must resolve to the view itself.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.urls import resolve, reverse

from ingest import views as ingest_views
from ingest.models import Span
from tests.factories import make_key
from tests.otlp_builders import json_bytes, json_request, json_span

PATHS = ["/v1/traces", "/v1/traces/"]


def one_span_request(trace_id: str) -> bytes:
    span = json_span(trace_id, "00f067aa0ba902b7", "checkout", attrs={"http.request.method": "POST"})
    return json_bytes(json_request([({"service.name": "shop"}, [span])]))


@pytest.mark.parametrize("path", PATHS)
def test_both_forms_resolve_to_the_traces_view(path):
    assert resolve(path).func is ingest_views.traces
    assert resolve(path).url_name == "otlp-traces"


def test_the_named_url_is_the_form_without_a_slash():
    assert reverse("otlp-traces") == "/v1/traces"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "trace_id"),
    [(PATHS[0], "4bf92f3577b34da6a3ce929d0e0e4736"), (PATHS[1], "5bf92f3577b34da6a3ce929d0e0e4737")],
)
def test_a_post_to_either_form_is_ingested_without_a_redirect(client, path, trace_id):
    assert settings.APPEND_SLASH  # Django's default: what would turn a miss into a 301
    _, key = make_key()

    response = client.generic(
        "POST", path, one_span_request(trace_id), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )

    assert response.status_code == 200
    assert Span.objects.filter(trace_id=trace_id).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("path", PATHS)
def test_the_view_answers_either_form_itself(client, path):
    unauthenticated = client.generic("POST", path, b"{}", content_type="application/json")
    wrong_method = client.get(path)

    assert unauthenticated.status_code == 401  # the view's answer, not a 404 or a 301
    assert (wrong_method.status_code, wrong_method["Allow"]) == (405, "POST")


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/v1/traces", "/v1/logs", "/v1/metrics/"])
@pytest.mark.parametrize("content_type", ["application/json", "application/x-protobuf"])
def test_a_server_that_does_not_receive_otlp_names_the_service_that_does(client, settings, path, content_type):
    """Compose's web service (TOOLWATCH_OTLP_HTTP=0): a 404 that says where spans go, nothing stored,
    before the key is even looked up."""
    from google.rpc import status_pb2

    settings.INGEST_OTLP_HTTP = False
    _, key = make_key()
    body = one_span_request("6bf92f3577b34da6a3ce929d0e0e4738")
    if content_type != "application/json":
        body = b"\x0a\x00"  # one empty ResourceSpans (the test client drops the Content-Type of an empty body)

    response = client.generic("POST", path, body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {key}")

    assert response.status_code == 404
    assert response["Content-Type"] == content_type
    if content_type == "application/json":
        message = response.json()["message"]
    else:
        message = status_pb2.Status.FromString(response.content).message
    assert "TOOLWATCH_OTLP_HTTP=0" in message and "otlp service, port 4318" in message
    assert Span.objects.count() == 0
