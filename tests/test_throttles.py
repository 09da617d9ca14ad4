"""Throttles: the login lockout, the API's rates, channel test sends and the per-key ingest limit.

Rates are set tiny per test (pytest-django's `settings`); the cache they count in is emptied
before each test (tests/conftest.py). Everything runs through the real views, the real cache
and the real gRPC handler.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from google.rpc import code_pb2, error_details_pb2
from grpc_status import rpc_status
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from config import security
from config.env import env_rate
from dashboard import throttles
from dashboard.api.tool_health import AgentThrottle
from dashboard.mcp import server as mcp_server
from dashboard.mcp.errors import ToolError
from dashboard.models import AlertChannel, Delivery
from ingest import grpc_edge, throttle
from ingest.models import IngestStat, Span
from tests.conftest import PASSWORD, require_service
from tests.factories import make_key
from tests.otlp_builders import agent_with_tools, json_bytes, json_request, json_span, protobuf_request, sdk_spans

PB = "application/x-protobuf"
TRACE = "5b8efff798038103d269b633813fc60c"
REDIS_URL = "redis://127.0.0.1:6379/14"  # the tests' database (the benches use 13)
ROOT = Path(__file__).resolve().parent.parent


def rates(settings, **scopes: str | None) -> None:
    """Set throttle rates for this test (DRF reloads its settings when REST_FRAMEWORK changes)."""
    current = settings.REST_FRAMEWORK
    settings.REST_FRAMEWORK = {**current, "DEFAULT_THROTTLE_RATES": {**current["DEFAULT_THROTTLE_RATES"], **scopes}}


def log_in(client, username: str, password: str, address: str = "127.0.0.1", **headers):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address, **headers)


def logged_in(client) -> bool:
    return "_auth_user_id" in client.session


# --- login lockout (django-axes) -----------------------------------------------------------------


@pytest.fixture
def lockout(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = dt.timedelta(minutes=15)
    return settings


def test_three_wrong_passwords_lock_the_account_and_the_right_one_is_then_refused(client, owner, lockout):
    assert log_in(client, "olga", "wrong-1").status_code == 200  # the form again, with its error
    assert log_in(client, "olga", "wrong-2").status_code == 200

    third = log_in(client, "olga", "wrong-3")
    right = log_in(client, "olga", PASSWORD)

    assert third.status_code == 429
    assert right.status_code == 429 and not logged_in(client)
    page = right.content.decode()
    assert "Too many failed logins" in page and "After 3 wrong passwords" in page and "for 15 minutes" in page
    assert right["Retry-After"] == "900"


def test_the_lockout_is_per_account_whatever_the_address(client, owner, lockout):
    for n, address in enumerate(("10.0.0.1", "10.0.0.2", "10.0.0.3")):
        log_in(client, "olga", f"wrong-{n}", address)

    assert log_in(client, "olga", PASSWORD, "10.0.0.9").status_code == 429
    assert not logged_in(client)


def test_the_lockout_is_per_address_whatever_the_account(client, owner, member, lockout):
    for name in ("root", "admin", "test"):
        log_in(client, name, "guess", "10.0.0.1")

    assert log_in(client, "alice", PASSWORD, "10.0.0.1").status_code == 429
    assert log_in(client, "alice", PASSWORD, "10.0.0.2").status_code == 302 and logged_in(client)


def test_behind_a_proxy_the_address_is_the_one_the_proxy_appended(client, member, lockout):
    lockout.TOOLWATCH_TRUSTED_PROXIES = 1
    for name in ("root", "admin", "test"):
        # The client forges a left-hand entry; the proxy (10.0.0.1) appends the real address.
        log_in(client, name, "guess", "10.0.0.1", HTTP_X_FORWARDED_FOR=f"198.51.100.{len(name)}, 203.0.113.5")

    assert log_in(client, "alice", PASSWORD, "10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.5").status_code == 429
    assert log_in(client, "alice", PASSWORD, "10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.6").status_code == 302


def test_the_lock_ends_after_the_cool_off(client, owner, lockout):
    lockout.AXES_COOLOFF_TIME = dt.timedelta(seconds=1)
    for n in range(3):
        log_in(client, "olga", f"wrong-{n}")
    assert log_in(client, "olga", PASSWORD).status_code == 429

    time.sleep(1.2)  # past the cool-off

    assert log_in(client, "olga", PASSWORD).status_code == 302 and logged_in(client)


def test_attempts_during_the_lock_do_not_extend_it(client, owner, lockout):
    lockout.AXES_COOLOFF_TIME = dt.timedelta(seconds=2)
    for n in range(3):
        log_in(client, "olga", f"wrong-{n}")
    time.sleep(1.0)
    assert log_in(client, "olga", "still-guessing").status_code == 429  # refused, and the lock keeps its end

    time.sleep(1.3)  # 2.3 s after the lock began, 1.3 s after the last attempt

    assert log_in(client, "olga", PASSWORD).status_code == 302 and logged_in(client)


def test_a_right_password_before_the_limit_clears_the_failures(client, owner, lockout):
    log_in(client, "olga", "wrong-1")
    log_in(client, "olga", "wrong-2")
    assert log_in(client, "olga", PASSWORD).status_code == 302
    client.post("/logout/")

    log_in(client, "olga", "wrong-3")
    log_in(client, "olga", "wrong-4")

    assert log_in(client, "olga", PASSWORD).status_code == 302


# --- API throttles (DRF) -----------------------------------------------------------------------


def test_a_user_past_the_user_rate_gets_429_with_retry_after(owner_client, settings):
    rates(settings, user="2/min")

    answers = [owner_client.get("/api/v1/projects/") for _ in range(3)]

    assert [answer.status_code for answer in answers] == [200, 200, 429]
    assert 1 <= int(answers[2]["Retry-After"]) <= 60
    assert "Request was throttled" in answers[2].json()["detail"]


def test_each_user_has_a_rate_of_their_own(client, project, owner, member, settings):
    rates(settings, user="1/min")
    client.force_login(owner)
    assert client.get("/api/v1/projects/").status_code == 200
    assert client.get("/api/v1/projects/").status_code == 429

    client.force_login(member)

    assert client.get("/api/v1/projects/").status_code == 200


def test_anonymous_calls_have_the_anon_rate(client, settings):
    rates(settings, anon="1/min")

    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/schema/").status_code == 429


def test_a_rate_set_to_off_does_not_throttle(owner_client, settings):
    rates(settings, user=None)

    assert {owner_client.get("/api/v1/projects/").status_code for _ in range(5)} == {200}


@pytest.fixture
def outage():
    """No Redis outage carried over from another test (dashboard/throttles.py keeps one per process)."""
    throttles._outage_until = 0.0
    throttles._local.clear()
    yield
    throttles._outage_until = 0.0
    throttles._local.clear()


def test_with_the_cache_unreachable_the_api_counts_in_the_process_and_says_so_once(owner_client, settings, caplog,
                                                                                    outage):
    rates(settings, user="2/min")
    settings.CACHES = {"default": security.cache_config("redis://127.0.0.1:1/0")}  # nothing listens on port 1

    codes = [owner_client.get("/api/v1/projects/").status_code for _ in range(3)]

    assert codes == [200, 200, 429]  # never a 500; bounded by the rate in this process
    assert caplog.text.count("cache unavailable") == 1


def test_with_the_cache_unreachable_the_mcp_counts_in_the_process_too(settings, caplog, outage):
    rates(settings, agent="2/min")
    settings.CACHES = {"default": security.cache_config("redis://127.0.0.1:1/0")}
    principal = SimpleNamespace(user=SimpleNamespace(pk=7))

    mcp_server.throttle_check(principal)
    mcp_server.throttle_check(principal)  # admitted, never an exception
    with pytest.raises(ToolError) as refused:
        mcp_server.throttle_check(principal)

    assert refused.value.retry_after > 0  # bounded by the rate in this process, with its wait
    assert caplog.text.count("cache unavailable") == 1


def test_after_an_outage_the_counts_are_in_redis_again(owner_client, settings, outage, redis_cache, monkeypatch):
    rates(settings, user="1/min")
    settings.CACHES = {"default": security.cache_config("redis://127.0.0.1:1/0")}
    assert owner_client.get("/api/v1/projects/").status_code == 200
    settings.CACHES = {"default": redis_cache}
    assert owner_client.get("/api/v1/projects/").status_code == 429  # still this process's count

    monkeypatch.setattr(throttles, "monotonic", lambda: time.monotonic() + throttles.OUTAGE_RETRY_S)

    assert owner_client.get("/api/v1/projects/").status_code == 200  # Redis's, where nothing is counted yet
    assert owner_client.get("/api/v1/projects/").status_code == 429


# --- API throttles with Redis: one round trip, DRF's answers, one budget for every process ----------


@pytest.fixture
def redis_cache(outage):
    """A Redis cache of the tests' database under a prefix of this test's, emptied afterwards."""
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        require_service(False, "needs Redis on 127.0.0.1:6379 (redis-server)")
    prefix = f"toolwatch-test-{uuid.uuid4().hex}"
    yield {**security.cache_config(REDIS_URL), "KEY_PREFIX": prefix}
    for name in client.scan_iter(f"{prefix}:*"):
        client.delete(name)
    client.close()


def agent_answers(throttle_class, times: list[float], user_pk: int = 7) -> list:
    """(admitted, wait) of the `agent` throttle (3 a minute) for one user at each of these times."""
    answers = []
    for now in times:
        throttle = throttle_class()
        throttle.timer = lambda now=now: now
        admitted = throttle.allow_request(SimpleNamespace(user=SimpleNamespace(pk=user_pk, is_authenticated=True)),
                                          SimpleNamespace(throttle_scope="agent"))  # fmt: skip
        answers.append((admitted, None if admitted else round(throttle.wait(), 6)))
    return answers


TIMES = [100.0, 100.0, 130.0, 131.0, 159.5, 160.0, 161.0, 189.9, 190.0, 250.0, 250.0, 250.0, 250.0]


def test_with_redis_the_throttle_admits_and_refuses_as_drf_does_in_memory(settings, redis_cache):
    rates(settings, agent="3/min")
    in_memory = agent_answers(AgentThrottle, TIMES)  # DRF's own algorithm on the locmem cache
    settings.CACHES = {"default": redis_cache}

    in_redis = agent_answers(AgentThrottle, TIMES)

    assert in_redis == in_memory
    assert [admitted for admitted, _ in in_redis] == [True, True, True, False, False, True, True, False, True,
                                                      True, True, True, False]  # fmt: skip
    assert in_redis[3] == (False, 29.0)  # the oldest of the three (100.0) leaves the window at 160.0


def test_with_redis_a_poll_is_one_round_trip_and_nothing_is_pickled(settings, redis_cache, monkeypatch):
    rates(settings, agent="3/min")
    settings.CACHES = {"default": redis_cache}
    agent_answers(AgentThrottle, [100.0])  # the connection is made and the script loaded
    sent, send = [], redis.connection.AbstractConnection.send_command

    def record(self, *args, **options):
        sent.append(args[0])
        return send(self, *args, **options)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_command", record)

    agent_answers(AgentThrottle, [101.0, 102.0, 103.0])

    assert sent == ["EVALSHA"] * 3


def test_with_redis_the_feed_and_the_mcp_share_one_budget(settings, redis_cache):
    rates(settings, agent="3/min")
    settings.CACHES = {"default": redis_cache}

    assert agent_answers(AgentThrottle, [100.0, 101.0])[1][0] is True
    mcp = mcp_server.AgentThrottle()
    mcp.timer = lambda: 102.0
    assert mcp.allow_request(SimpleNamespace(user=SimpleNamespace(pk=7)), None) is True

    assert agent_answers(AgentThrottle, [103.0]) == [(False, 57.0)]


# Run in two processes at once: counts the `agent` throttle's admissions of one user in a tight loop.
TWO_PROCESSES = """
import os, sys, time
import django
django.setup()
from types import SimpleNamespace
from django.conf import settings
from dashboard.api.tool_health import AgentThrottle
from dashboard.mcp.server import AgentThrottle as McpThrottle
settings.CACHES["default"]["KEY_PREFIX"] = sys.argv[1]
user, feed = SimpleNamespace(pk=int(sys.argv[2]), is_authenticated=True), sys.argv[3] == "feed"
while time.time() < float(sys.argv[4]):
    pass
admitted = 0
for _ in range(int(sys.argv[5])):
    if feed:
        admitted += AgentThrottle().allow_request(SimpleNamespace(user=user), SimpleNamespace(throttle_scope="agent"))
    else:
        admitted += McpThrottle().allow_request(SimpleNamespace(user=user), None)
print(admitted)
"""


def test_with_redis_processes_share_one_budget_and_never_admit_past_it(redis_cache):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1", "TOOLWATCH_CACHE_URL": REDIS_URL,
           "TOOLWATCH_THROTTLE_AGENT": "50/min"}  # fmt: skip

    def polls(surface: str, tries: int, start: float = 0.0) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", TWO_PROCESSES, redis_cache["KEY_PREFIX"], "4242", surface,
                                 str(start), str(tries)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)  # fmt: skip

    first = int(polls("feed", 30).communicate(timeout=60)[0])
    start = time.time() + 3  # both processes set up by then, and then they race
    racing = [polls(surface, 200, start) for surface in ("feed", "mcp")]
    raced = [int(run.communicate(timeout=60)[0]) for run in racing]

    assert first == 30
    assert sum(raced) == 20  # what the first process left: one budget, counted atomically, none past it


@pytest.mark.parametrize("raw, rate", [("600/min", "600/min"), (" 10/Hour ", "10/hour"), ("5/s", "5/s"), ("off", None)])
def test_throttle_rates_from_the_environment(monkeypatch, raw, rate):
    monkeypatch.setenv("TOOLWATCH_THROTTLE_USER", raw)

    assert env_rate("TOOLWATCH_THROTTLE_USER", "1/min") == rate


@pytest.mark.parametrize("raw", ["lots", "600", "600/fortnight", "0/min", "-1/min"])
def test_a_bad_throttle_rate_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv("TOOLWATCH_THROTTLE_USER", raw)

    with pytest.raises(ImproperlyConfigured, match=r"TOOLWATCH_THROTTLE_USER=.* is not a rate"):
        env_rate("TOOLWATCH_THROTTLE_USER", "1/min")


# --- channel test sends ------------------------------------------------------------------------


@pytest.fixture
def channel(project):
    # E-mail, to any address the owner typed: what the limit is for. pytest-django's outbox catches it.
    return AlertChannel.objects.create(project=project, kind="email", name="Ops hook", target="anyone@example.com")


def sent_count(channel) -> int:
    return Delivery.objects.filter(channel=channel, event=Delivery.Event.TEST).count()


def test_test_sends_past_the_limit_are_refused_on_the_settings_page(owner_client, channel, settings, mailoutbox):
    rates(settings, test_send="2/hour")
    url = f"/p/alpha/settings/channels/{channel.pk}/test/"
    owner_client.post(url)
    owner_client.post(url)

    response = owner_client.post(url, follow=True)

    assert sent_count(channel) == 2 and len(mailoutbox) == 2
    text = response.content.decode()
    assert "Ops hook: not sent: test sends are limited to 2/hour per user" in text and "try again in" in text


def test_test_sends_past_the_limit_are_a_429_in_the_api(owner_client, channel, settings):
    rates(settings, test_send="1/hour")
    url = f"/api/v1/projects/alpha/channels/{channel.pk}/test/"
    assert owner_client.post(url).status_code == 200

    refused = owner_client.post(url)

    assert refused.status_code == 429 and sent_count(channel) == 1
    assert 1 <= int(refused["Retry-After"]) <= 3600
    assert "test sends are limited to 1/hour per user" in refused.json()["detail"]


def test_the_page_and_the_api_share_one_budget_per_user(owner_client, channel, settings):
    rates(settings, test_send="1/hour")
    owner_client.post(f"/p/alpha/settings/channels/{channel.pk}/test/")

    assert owner_client.post(f"/api/v1/projects/alpha/channels/{channel.pk}/test/").status_code == 429
    assert sent_count(channel) == 1


def test_the_subject_of_a_test_mail_is_ours_not_a_name_the_sender_chose(owner_client, channel, mailoutbox):
    channel.name = "You won a prize! Call +1 555 0100"
    channel.save()

    owner_client.post(f"/api/v1/projects/alpha/channels/{channel.pk}/test/")

    assert [message.subject for message in mailoutbox] == ["[Toolwatch] Test message"]


def test_a_member_who_may_not_send_a_test_spends_no_budget(client, project, owner, member, channel, settings):
    rates(settings, test_send="1/hour")
    client.force_login(member)
    assert client.post(f"/api/v1/projects/alpha/channels/{channel.pk}/test/").status_code == 403

    client.force_login(owner)

    assert client.post(f"/api/v1/projects/alpha/channels/{channel.pk}/test/").status_code == 200


# --- the per-key ingest rate limit: the bucket -------------------------------------------------


@pytest.fixture
def bucket(settings):
    settings.INGEST_RATE = 10
    settings.INGEST_BURST = 20
    return settings


def test_a_full_bucket_admits_until_it_is_empty_then_says_how_long_to_wait(bucket):
    assert throttle.ingest_wait(key_id=1, cost=15, now=100.0) == 0
    assert throttle.ingest_wait(key_id=1, cost=5, now=100.0) == 0

    assert throttle.ingest_wait(key_id=1, cost=1, now=100.0) == 1  # 0 tokens: one more at 100.1 s
    assert throttle.ingest_wait(key_id=1, cost=1, now=100.2) == 0


def test_a_request_larger_than_the_burst_passes_once_and_its_debt_is_waited_out(bucket):
    assert throttle.ingest_wait(key_id=1, cost=100, now=100.0) == 0  # 20 - 100 = -80 tokens

    assert throttle.ingest_wait(key_id=1, cost=1, now=100.0) == 9  # 80 tokens at 10/s: 8 s, and then one
    assert throttle.ingest_wait(key_id=1, cost=1, now=107.5) == 1
    assert throttle.ingest_wait(key_id=1, cost=1, now=108.1) == 0


def test_a_refused_request_costs_nothing_and_an_idle_key_refills_only_to_the_burst(bucket):
    throttle.ingest_wait(key_id=1, cost=20, now=100.0)
    for _ in range(5):
        assert throttle.ingest_wait(key_id=1, cost=50, now=100.0) == 1

    assert throttle.ingest_wait(key_id=1, cost=25, now=1000.0) == 0  # refilled to 20, not 9,000
    assert throttle.ingest_wait(key_id=1, cost=1, now=1000.0) == 1


def test_keys_have_buckets_of_their_own(bucket):
    throttle.ingest_wait(key_id=1, cost=20, now=100.0)

    assert throttle.ingest_wait(key_id=1, cost=1, now=100.0) == 1
    assert throttle.ingest_wait(key_id=2, cost=1, now=100.0) == 0


def test_a_rate_of_zero_is_no_limit(settings):
    settings.INGEST_RATE = 0

    assert {throttle.ingest_wait(key_id=1, cost=10**9, now=100.0) for _ in range(3)} == {0}


def test_an_unreachable_cache_admits_and_says_so(bucket, caplog):
    bucket.CACHES = {"default": security.cache_config("redis://127.0.0.1:1/0")}  # nothing listens on port 1

    assert throttle.ingest_wait(key_id=1, cost=10**6, now=100.0) == 0
    assert throttle.ingest_wait(key_id=1, cost=10**6, now=100.0) == 0
    assert "rate limit skipped, the cache is unavailable" in caplog.text


def test_with_redis_the_bucket_is_shared_by_every_process(bucket):
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        require_service(False, "needs Redis on 127.0.0.1:6379 (redis-server)")
    prefix = f"toolwatch-test-{uuid.uuid4().hex}"
    cache = {**security.cache_config(REDIS_URL), "KEY_PREFIX": prefix}
    bucket.CACHES = {"default": cache}
    try:
        assert throttle.ingest_wait(key_id=7, cost=20, now=100.0) == 0
        # What another process sees: the state is in Redis, not in this process.
        assert client.keys(f"{prefix}:*{throttle.KEY_PREFIX}7")
        bucket.CACHES = {"default": {**cache}}  # a fresh connection, as another process has

        assert throttle.ingest_wait(key_id=7, cost=1, now=100.0) == 1
    finally:
        for name in client.keys(f"{prefix}:*"):
            client.delete(name)
        client.close()


# --- the per-key ingest rate limit: OTLP/HTTP and gRPC -----------------------------------------


def five_spans() -> bytes:
    spans = sdk_spans(lambda tracer: agent_with_tools(tracer, tools=[{"name": "lookup_order"}, {"name": "search_kb"}]))
    return protobuf_request(spans)


def otlp_post(client, body: bytes, key: str, content_type: str = PB):
    return client.generic("POST", "/v1/traces", body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {key}")


def test_over_its_rate_a_key_gets_429_with_retry_after_in_its_own_encoding(client, db, settings):
    settings.INGEST_RATE, settings.INGEST_BURST = 1, 1
    project, key = make_key()
    assert otlp_post(client, five_spans(), key).status_code == 200  # admitted into debt

    refused = otlp_post(client, five_spans(), key)

    assert refused.status_code == 429 and refused["Content-Type"] == PB
    assert 1 <= int(refused["Retry-After"]) <= 5
    status = rpc_status.status_pb2.Status.FromString(refused.content)
    assert "over its rate limit of 1 items a second (TOOLWATCH_INGEST_RATE" in status.message
    refusal = IngestStat.objects.get(project=project, outcome="refused")
    assert (refusal.reason, refusal.count) == ("429 Too Many Requests", 1)


def test_a_json_request_over_the_rate_is_answered_in_json(client, db, settings):
    settings.INGEST_RATE, settings.INGEST_BURST = 1, 1
    _, key = make_key()
    body = json_bytes(json_request([({"service.name": "agent"}, [json_span(TRACE, "00f067aa0ba902b7", "lookup_order"), json_span(TRACE, "00f067aa0ba902b8", "search_kb")])]))
    otlp_post(client, body, key, "application/json")

    refused = otlp_post(client, body, key, "application/json")

    assert refused.status_code == 429 and refused["Content-Type"] == "application/json"
    assert "over its rate limit" in json.loads(refused.content)["message"]


def test_a_refused_request_stores_nothing_and_another_key_is_not_held_up(client, db, settings):
    settings.INGEST_RATE, settings.INGEST_BURST = 1, 1
    _, key = make_key()
    _, other = make_key()
    otlp_post(client, five_spans(), key)
    stored = Span.objects.count()

    assert otlp_post(client, five_spans(), key).status_code == 429
    assert Span.objects.count() == stored
    assert otlp_post(client, five_spans(), other).status_code == 200


def test_over_its_rate_a_grpc_sender_gets_resource_exhausted_with_retry_info(db, settings):
    settings.INGEST_RATE, settings.INGEST_BURST = 1, 1
    project, key = make_key()
    spans = sdk_spans(lambda tracer: agent_with_tools(tracer, tools=[{"name": "lookup_order"}]))
    body = encode_spans(spans).SerializeToString()
    metadata = {"authorization": f"Bearer {key}"}
    assert isinstance(grpc_edge.handle(grpc_edge.TRACES, grpc_edge.Message(body), metadata), bytes)

    answer = grpc_edge.handle(grpc_edge.TRACES, grpc_edge.Message(body), metadata)

    assert answer.code.name == "RESOURCE_EXHAUSTED" and "over its rate limit" in answer.details
    trailers = dict(answer.trailing_metadata)
    retry_info = error_details_pb2.RetryInfo.FromString(trailers[grpc_edge.RETRY_INFO_TRAILER])
    assert 1 <= retry_info.retry_delay.seconds <= 5
    status = rpc_status.status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    assert status.code == code_pb2.RESOURCE_EXHAUSTED
    refusal = IngestStat.objects.get(project=project, outcome="refused")
    assert (refusal.reason, refusal.count) == ("gRPC RESOURCE_EXHAUSTED", 1)
