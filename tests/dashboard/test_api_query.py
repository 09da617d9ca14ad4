"""An unknown or malformed query parameter on the API is a 400 that names it (dashboard/api/query.py)."""

import pytest
from django.http import QueryDict

from dashboard.api.query import MAX_WHOLE_NUMBER, QueryParameterError, query_parameters_check, whole_number

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


@pytest.mark.parametrize("text", ["12", " 12 ", "0", str(MAX_WHOLE_NUMBER)])
def test_a_whole_number_is_ascii_digits(text):
    assert whole_number(text) == int(text)


# '²' passes str.isdigit() and int() refuses it; '١٢' (Arabic-Indic) and '５' (full-width) int() reads as 12 and 5.
@pytest.mark.parametrize("text", ["\u00b2", "\u0661\u0662", "\uff15", "-1", "--5", "+1", "1.0", "1e3", "", " ", "0x10",
                                  str(MAX_WHOLE_NUMBER + 1), "9" * 5000])  # fmt: skip
def test_anything_else_is_not_a_whole_number(text):
    assert whole_number(text) is None


def test_a_whole_number_keeps_to_its_bounds():
    assert whole_number("0", low=1) is None and whole_number("51", high=50) is None
    assert whole_number("50", high=50) == 50


@pytest.mark.parametrize("value", ["\u00b2", "\u0661\u0662", "\uff15", "-1", "9" * 40])
def test_an_int_parameter_takes_ascii_digits_only(value):
    detail = error_of(f"step={value}", {"step": int})

    assert detail["parameter"] == "step" and "whole number" in detail["detail"]


def test_a_nul_in_any_value_is_refused_naming_it():
    assert error_of("tool=a%00b", {"tool": str})["parameter"] == "tool"


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


PAGINATED = ["/api/v1/projects/alpha/alerts/", "/api/v1/projects/alpha/tools/", "/api/v1/projects/alpha/eval-cases/",
             "/api/v1/projects/alpha/eval-runs/", "/api/v1/projects/alpha/agent-access/"]  # fmt: skip


@pytest.mark.parametrize("url", PAGINATED)
@pytest.mark.parametrize("page", ["-1", "0", "--5", "\u00b2", "\u0661", "\uff15", "+1", "1.5", "9" * 40])
def test_a_malformed_page_is_a_400_naming_it(owner_client, url, page):
    response = owner_client.get(url, {"page": page})

    assert response.status_code == 400, response.content[:300]
    assert response.json()["parameter"] == "page" and "whole number from 1" in response.json()["detail"]


@pytest.mark.parametrize("url", PAGINATED)
def test_a_page_past_the_last_stays_drf_s_404(owner_client, url):
    # A well-formed page number of a page that does not exist: PageNumberPagination's NotFound.
    response = owner_client.get(url, {"page": "999999999"})

    assert response.status_code == 404 and response.json() == {"detail": "Invalid page."}
    assert owner_client.get(url, {"page": "1"}).status_code == 200


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/projects/alpha/tools/?service=a%00",
        "/api/v1/projects/alpha/summary/?agent=%00",
        "/api/v1/projects/alpha/tool-calls/?tool=%00",
        "/api/v1/projects/alpha/tool-calls/?q=a%00b",
        "/api/v1/projects/alpha/alerts/?tool=%00",
        "/api/v1/projects/alpha/eval-cases/?tag=%00",
        "/api/v1/projects/alpha/replay/?tool=%00",
    ],
)
def test_a_nul_in_a_query_parameter_is_a_400_naming_it(member_client, project, url):
    # PostgreSQL text cannot hold a NUL: on PostgreSQL each of these was a 500 (DataError).
    response = member_client.get(url)

    assert response.status_code == 400, response.content[:300]
    assert response.json()["parameter"] == url.rpartition("?")[2].partition("=")[0]


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("/api/v1/projects/alpha/tools/%00/series/", "tool"),
        ("/api/v1/projects/alpha/tool-health/a%00/", "tool"),
        ("/api/v1/projects/alpha/traces/%00/", "trace_id"),
    ],
)
def test_a_nul_in_the_path_is_a_400_naming_it(member_client, project, url, name):
    response = member_client.get(url)

    assert response.status_code == 400 and response.json() == {name: ["must not contain a NUL character"]}


def test_an_outsider_gets_404_for_a_nul_in_the_path_too(client, project, outsider):
    client.force_login(outsider)
    assert client.get("/api/v1/projects/alpha/tools/%00/series/").status_code == 404
