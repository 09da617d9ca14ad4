"""dashboard/feed/fast.py: the feed's polls answered before Django's stack give the DRF views' answers
(status, headers in order, body) for 200, 304, 401, 403, 404 and 429; everything else reaches Django
untouched; a poll answered from memory makes no query; revocation, membership and new snapshots
take effect within their TTLs; the access log keeps one row a minute for both paths together.
The throttle's answers are compared with the counts in memory and in Redis, and with Redis gone."""

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from config import security, wsgi
from dashboard import tokens
from dashboard.api import tool_health
from dashboard.feed import fast
from dashboard.feed import snapshot as feed
from dashboard.models import AgentAccess
from ingest.models import API_KEY_PREFIX, Membership
from tests.dashboard.feed.test_api import busy  # noqa: F401
from tests.dashboard.selectors.test_selectors import NOW, frozen  # noqa: F401
from tests.test_throttles import outage, redis_cache  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("busy")]
URL = "/api/v1/projects/alpha/tool-health/"
DJANGO = ("599 Django", [], b"passed to Django")


@pytest.fixture(autouse=True)
def _test_database_stays_open(monkeypatch):
    # The fast path closes broken or aged connections around its database work, as Django's
    # request signals do; Django's test client disconnects those for the test's transaction.
    monkeypatch.setattr(fast, "close_old_connections", lambda: None)
    tool_health._logged.clear()  # ids repeat across tests, and the clock is frozen


@pytest.fixture
def clock(monkeypatch):
    """The fast path's monotonic clock, moved by hand."""
    now = [1000.0]
    monkeypatch.setattr(fast, "monotonic", lambda: now[0])
    return now


@pytest.fixture
def app():
    def django(environ, start_response):
        start_response(DJANGO[0], DJANGO[1])
        return [DJANGO[2]]

    return fast.FeedFastPath(django)


@pytest.fixture
def plain(member):
    return tokens.api_token_create(user=member, name="agent", scopes=["read"])[1]


def fast_get(app, path, headers=None, method="GET", **extra):
    environ = RequestFactory().generic(method, path, headers=headers or {}, **extra).environ
    answer = {}

    def start_response(status, headers):
        answer["status"], answer["headers"] = status, headers

    body = b"".join(app(environ, start_response))
    return answer["status"], answer["headers"], body


def drf_get(client, path, headers=None, method="GET"):
    response = client.generic(method, path, headers=headers or {})
    return f"{response.status_code} {response.reason_phrase}", list(response.headers.items()), response.content


def both(app, client, path, headers, method="GET"):
    return fast_get(app, path, headers, method), drf_get(client, path, headers, method)


def test_the_fast_path_answers_the_views_200_and_304_byte_for_byte(app, client, plain):
    bearer = {"Authorization": f"Bearer {plain}", "Accept": "application/json"}
    drf = drf_get(client, URL, bearer)
    etag = dict(drf[1])["ETag"]

    for path in (URL, URL + "search/", URL + "no/such/tool/"):
        for headers in (bearer, {"Authorization": f"Token {plain}"}):
            fast_answer, drf_answer = both(app, client, path, headers)
            assert fast_answer == drf_answer and fast_answer[0] == "200 OK", path
            tag = dict(fast_answer[1])["ETag"]
            for sent in (tag, f"W/{tag}", f'"other", {tag}', "*"):
                fast_answer, drf_answer = both(app, client, path, headers | {"If-None-Match": sent})
                assert fast_answer == drf_answer and fast_answer[0] == "304 Not Modified", (path, sent)
    fast_answer, drf_answer = both(app, client, URL, bearer | {"If-None-Match": etag}, method="HEAD")
    assert fast_answer == drf_answer and fast_answer[0] == "304 Not Modified"
    fast_answer, drf_answer = both(app, client, URL, bearer, method="HEAD")
    assert fast_answer[:2] == drf_answer[:2] and fast_answer[2] == drf_answer[2] == b""  # the test client drops it too


def test_the_fast_path_answers_the_views_401_403_and_404(app, client, member, outsider):
    revoked_token, revoked = tokens.api_token_create(user=member, name="old")
    tokens.api_token_revoke(user=member, token_id=revoked_token.pk)
    expired_token, expired = tokens.api_token_create(user=member, name="soon", expires_at=NOW + dt.timedelta(days=1))
    expired_token.expires_at = NOW - dt.timedelta(days=1)
    expired_token.save()
    runs = tokens.api_token_create(user=member, name="runner", scopes=["runs"])[1]
    theirs = tokens.api_token_create(user=outsider, name="agent")[1]
    cases = [
        (URL, "twu_unknown", "401 Unauthorized"),
        (URL, revoked, "401 Unauthorized"),
        (URL, expired, "401 Unauthorized"),
        (URL, API_KEY_PREFIX + "an_ingest_key", "401 Unauthorized"),
        (URL, runs, "403 Forbidden"),
        (URL + "search/", runs, "403 Forbidden"),
        (URL, theirs, "404 Not Found"),
        (URL + "search/", theirs, "404 Not Found"),
        ("/api/v1/projects/no-such/tool-health/", theirs, "404 Not Found"),
    ]  # fmt: skip
    for path, token, status in cases:
        fast_answer, drf_answer = both(app, client, path, {"Authorization": f"Bearer {token}"})
        assert fast_answer == drf_answer and fast_answer[0] == status, (path, token, drf_answer)


@pytest.fixture(params=["locmem", "redis"])
def counts(request, settings):
    """Where the throttle counts: this process's memory (the Quickstart's default), or Redis (compose's)."""
    if request.param == "redis":
        settings.CACHES = {"default": request.getfixturevalue("redis_cache")}
    return request.param


def test_the_fast_path_answers_the_views_429_and_shares_their_budget(app, client, plain, settings, counts):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "agent": "3/min"}}  # fmt: skip
    bearer = {"Authorization": f"Bearer {plain}"}

    drf_codes = [drf_get(client, URL, bearer)[0] for _ in range(4)]
    drf_refused = drf_get(client, URL, bearer)
    cache.clear()
    fast_codes = [fast_get(app, URL, bearer)[0] for _ in range(4)]
    fast_refused = fast_get(app, URL, bearer)
    cache.clear()
    mixed = [fast_get(app, URL, bearer)[0], drf_get(client, URL, bearer)[0], fast_get(app, URL, bearer)[0],
             drf_get(client, URL, bearer)[0]]  # fmt: skip

    assert drf_codes == fast_codes == ["200 OK"] * 3 + ["429 Too Many Requests"]
    assert fast_refused == drf_refused and dict(fast_refused[1])["Retry-After"] in ("59", "60")
    assert mixed == ["200 OK"] * 3 + ["429 Too Many Requests"]  # one budget for both paths


@pytest.mark.usefixtures("outage")
def test_with_redis_unreachable_both_paths_answer_and_count_in_the_process(app, client, plain, settings, caplog):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "agent": "3/min"}}  # fmt: skip
    settings.CACHES = {"default": security.cache_config("redis://127.0.0.1:1/0")}  # nothing listens on port 1
    bearer = {"Authorization": f"Bearer {plain}"}

    codes = [fast_get(app, URL, bearer)[0], drf_get(client, URL, bearer)[0], fast_get(app, URL, bearer)[0],
             drf_get(client, URL, bearer)[0]]  # fmt: skip

    assert codes == ["200 OK"] * 3 + ["429 Too Many Requests"]  # never a 500, and still bounded
    assert "cache unavailable" in caplog.text and "passed to Django" not in caplog.text


def test_everything_else_reaches_django_untouched(app, client, plain, settings):
    bearer = {"Authorization": f"Bearer {plain}"}
    assert fast_get(app, URL, bearer)[0] == "200 OK"

    assert fast_get(app, URL, bearer, method="POST") == DJANGO
    assert fast_get(app, URL, bearer, method="OPTIONS") == DJANGO
    assert fast_get(app, URL + "?x=1", bearer) == DJANGO  # the views answer a 400 naming it
    assert fast_get(app, URL) == DJANGO  # a session, or nothing: DRF's 401 says which
    for authorization in ("Basic YWxpY2U6cHc=", f"Bearer {plain} extra", "Bearer", f"Bearer {plain}\u00e9"):
        assert fast_get(app, URL, {"Authorization": authorization}) == DJANGO, authorization
    for accept in ("text/html", "text/html, */*", "application/json; indent=4", "application/xml"):
        assert fast_get(app, URL, bearer | {"Accept": accept}) == DJANGO, accept
    assert fast_get(app, URL, bearer | {"Accept": "application/json;q=0.9, */*;q=0.1"})[0] == "200 OK"
    assert fast_get(app, "/api/v1/projects/alpha/tool-health", bearer) == DJANGO  # APPEND_SLASH's redirect
    assert fast_get(app, "/api/v1/projects/alpha/tool-health//", bearer) == DJANGO  # no such route
    assert fast_get(app, "/static/tool-health/x.js", bearer) == DJANGO
    assert fast_get(app, URL, bearer, HTTP_HOST="evil.example") == DJANGO  # ALLOWED_HOSTS: Django's 400
    settings.SECURE_SSL_REDIRECT = True
    assert fast_get(app, URL, bearer) == DJANGO  # SecurityMiddleware's redirect
    assert fast_get(app, URL, bearer, secure=True)[0] == "200 OK"


def test_on_https_the_answers_carry_hsts_as_the_views_do(app, client, plain, settings):
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    headers = {"Authorization": f"Bearer {plain}", "X-Forwarded-Proto": "https"}

    fast_answer, drf_answer = both(app, client, URL, headers)

    assert fast_answer == drf_answer and ("Strict-Transport-Security", "max-age=3600") in fast_answer[1]


def test_a_poll_answered_from_memory_makes_no_query(app, plain, clock):
    bearer = {"Authorization": f"Bearer {plain}"}
    etag = dict(fast_get(app, URL, bearer)[1])["ETag"]  # the token, its projects, the snapshot, the log row
    fast_get(app, URL + "search/", bearer)

    with CaptureQueriesContext(connection) as queries:
        answers = [fast_get(app, URL, bearer | {"If-None-Match": etag})[0] for _ in range(20)]
        answers += [fast_get(app, URL, bearer)[0], fast_get(app, URL + "search/", bearer)[0]]

    assert answers == ["304 Not Modified"] * 20 + ["200 OK"] * 2
    assert queries.captured_queries == []
    clock[0] += fast.SNAPSHOT_CHECK_S
    with CaptureQueriesContext(connection) as queries:
        fast_get(app, URL, bearer | {"If-None-Match": etag})
    assert len(queries) == 1, [q["sql"] for q in queries.captured_queries]  # the snapshot's ETag, once a second


def test_a_new_snapshot_is_served_within_a_second(app, plain, busy, clock):  # noqa: F811
    bearer = {"Authorization": f"Bearer {plain}"}
    etag = dict(fast_get(app, URL, bearer)[1])["ETag"]
    feed.tool_health_refresh(project_id=busy.pk, now=NOW + dt.timedelta(seconds=1))

    assert fast_get(app, URL, bearer | {"If-None-Match": etag})[0] == "304 Not Modified"  # within the second
    clock[0] += fast.SNAPSHOT_CHECK_S
    status, headers, body = fast_get(app, URL, bearer | {"If-None-Match": etag})
    assert status == "200 OK" and dict(headers)["ETag"] != etag and b'"as_of":"2026-11-20T12:30:01Z"' in body


def test_revocation_and_membership_changes_take_effect_within_the_token_ttl(app, member, project, plain, clock):
    bearer = {"Authorization": f"Bearer {plain}"}
    token = tokens.api_token_authenticate(plain)
    assert fast_get(app, URL, bearer)[0] == "200 OK"

    Membership.objects.filter(project=project, user=member).delete()
    assert fast_get(app, URL, bearer)[0] == "200 OK"  # within TOKEN_TTL_S
    clock[0] += fast.TOKEN_TTL_S
    assert fast_get(app, URL, bearer)[0] == "404 Not Found"

    tokens.api_token_revoke(user=member, token_id=token.pk)
    clock[0] += fast.TOKEN_TTL_S
    status, _, body = fast_get(app, URL, bearer)
    assert status == "401 Unauthorized" and b"was revoked" in body


def test_every_kept_token_is_read_again_every_ttl_in_a_few_queries_however_many(app, project, clock):
    users = [get_user_model().objects.create_user(f"agent{n}") for n in range(6)]
    Membership.objects.bulk_create([Membership(project=project, user=user) for user in users])
    plain = [tokens.api_token_create(user=user, name="agent")[1] for user in users]
    for token in plain:
        assert fast_get(app, URL, {"Authorization": f"Bearer {token}"})[0] == "200 OK"
    clock[0] += fast.TOKEN_TTL_S

    with CaptureQueriesContext(connection) as queries:
        answers = [fast_get(app, URL, {"Authorization": f"Bearer {token}"})[0] for token in plain]

    assert answers == ["200 OK"] * 6
    assert len(queries) == 3, [q["sql"] for q in queries.captured_queries]  # the tokens, their projects, the snapshot


def test_an_expiry_is_checked_on_every_poll(app, member, monkeypatch):
    token, plain = tokens.api_token_create(user=member, name="soon", expires_at=NOW + dt.timedelta(minutes=1))
    bearer = {"Authorization": f"Bearer {plain}"}
    assert fast_get(app, URL, bearer)[0] == "200 OK"

    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW + dt.timedelta(minutes=1))
    status, _, body = fast_get(app, URL, bearer)

    assert status == "401 Unauthorized" and b"expired at" in body


def test_the_access_log_keeps_one_row_a_minute_for_both_paths(app, client, plain, monkeypatch):
    bearer = {"Authorization": f"Bearer {plain}"}
    for _ in range(3):
        fast_get(app, URL, bearer)
        drf_get(client, URL, bearer)
    fast_get(app, URL + "search/", bearer)
    drf_get(client, URL + "search/", bearer)
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW.replace(minute=31))
    drf_get(client, URL, bearer)
    fast_get(app, URL, bearer)

    rows = list(AgentAccess.objects.order_by("id").values_list("surface", "name", "arguments", "user__username",
                                                               "token__name", "project__slug"))  # fmt: skip
    assert rows == [("feed", "tool-health", {}, "alice", "agent", "alpha"),
                    ("feed", "tool-health/<tool>", {"tool": "search"}, "alice", "agent", "alpha"),
                    ("feed", "tool-health", {}, "alice", "agent", "alpha")]  # fmt: skip


def test_the_server_serves_the_fast_path_in_front_of_django():
    assert isinstance(wsgi.application, fast.FeedFastPath)
    assert wsgi.application.application is wsgi.django_application
