"""An unknown or malformed query parameter on the API is a 400 that names it (dashboard/api/query.py)."""

import pytest
from django.http import QueryDict

from dashboard.api.query import QueryParameterError, query_parameters_check

pytestmark = pytest.mark.django_db


def error_of(query: str, allowed) -> dict:
    with pytest.raises(QueryParameterError) as caught:
        query_parameters_check(QueryDict(query), allowed)
    return caught.value.detail


def test_known_parameters_pass_and_drf_s_own_are_always_allowed():
    query_parameters_check(QueryDict("range=7d&service=a&page=2&format=json"), {"range": str, "service": str})


def test_an_unknown_parameter_is_named_with_the_allowed_ones():
    detail = error_of("range=7d&servce=a", {"range": str, "service": str})
    assert detail["parameter"] == "servce"
    assert detail["detail"] == "Unknown query parameter 'servce'; allowed: format, page, range, service"


def test_a_whole_number_parameter_must_be_one():
    detail = error_of("step=fast", {"step": int})
    assert detail["parameter"] == "step"
    assert "whole number" in detail["detail"]


def test_a_parameter_given_twice_is_refused():
    assert error_of("tool=a&tool=b", {"tool": str})["parameter"] == "tool"


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/projects/?foo=1",
        "/api/v1/projects/alpha/?foo=1",
        "/api/v1/projects/alpha/summary/?range=24h&foo=1",
        "/api/v1/projects/alpha/tools/?sort=-calls&foo=1",
        "/api/v1/projects/alpha/tools/search/series/?foo=1",
        "/api/v1/projects/alpha/tool-calls/?tool=search&foo=1",
        "/api/v1/projects/alpha/alerts/?status=open&foo=1",
        "/api/v1/projects/alpha/ingest-health/?foo=1",
        "/api/v1/projects/alpha/eval-cases/?foo=1",
        "/api/v1/projects/alpha/eval-runs/?foo=1",
        "/api/v1/projects/alpha/settings/?foo=1",
    ],
)
def test_every_api_read_answers_an_unknown_parameter_with_a_400_naming_it(member_client, project, url):
    response = member_client.get(url)
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["parameter"] == "foo"
    assert body["detail"].startswith("Unknown query parameter 'foo'; allowed: ")


def test_the_parameters_a_view_reads_are_still_accepted(member_client, project):
    for url in (
        "/api/v1/projects/alpha/tools/?range=7d&service=svc&environment=prod&agent=a&sort=-calls&page=1",
        "/api/v1/projects/alpha/tool-calls/?range=1h&tool=t&class=transient&outcome=failed&q=x&limit=5",
        "/api/v1/projects/alpha/alerts/?status=open&kind=error_rate_spike&tool=t",
        "/api/v1/projects/alpha/eval-cases/?status=pinned&tool=t&tag=x&q=y",
        "/api/v1/projects/alpha/thresholds/?tool=t",
        "/api/v1/projects/alpha/tools/t/series/?range=24h&step=3600",
    ):
        assert member_client.get(url).status_code == 200, url


def test_a_malformed_step_is_a_400_naming_it(member_client, project):
    response = member_client.get("/api/v1/projects/alpha/tools/t/series/?step=hourly")
    assert response.status_code == 400
    assert response.json()["parameter"] == "step"


def test_an_outsider_gets_404_before_any_word_about_parameters(client, project, outsider):
    client.force_login(outsider)
    assert client.get("/api/v1/projects/alpha/tools/?foo=1").status_code == 404
