"""DRF's throttles, reading REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] when they run.

DRF's own classes copy the rates once, when rest_framework.throttling is imported, so a
rate changed later (override_settings in a test) would never be seen. These read
api_settings per request, which DRF reloads whenever REST_FRAMEWORK changes. The scopes
and their TOOLWATCH_THROTTLE_<SCOPE> variables: docs/deploy.md#throttles.

A refused request is a 429 with Retry-After (DRF's exception handler). The counts live in
Django's cache (TOOLWATCH_CACHE_URL). In process memory (locmem, the Quickstart's default)
they are DRF's own: a list of request times per user and scope. With Redis, every process
shares them, kept as DRF's algorithm in one atomic script (`_HIT`): one round trip a request
where DRF's get and set cost two, plus a Redis client built for each and a pickle of up to
`num_requests` times each way (docs/benchmarks.md#tool-health-feed).

Redis unreachable: fail open to this process's memory (`_outage`). A throttle guards against
runaway callers, not for correctness, and the tool-health feed is what agents' circuit breakers
read: refusing every call because the cache is down would turn a Redis outage into an outage
of the API. Counting in memory instead keeps a bound (the rate per process rather than per
deployment), and the next try of Redis is OUTAGE_RETRY_S later, so a dead or hung Redis costs
one connect or timeout (1 s, config/security.py) per process, not one per request.
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import threading
from time import monotonic

from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import NoScriptError, RedisError
from rest_framework import throttling
from rest_framework.settings import api_settings

logger = logging.getLogger(__name__)

OUTAGE_RETRY_S = 5.0  # after a Redis error, counts stay in this process's memory this long
LOG_SUFFIX = ":log"  # the sorted set's key beside DRF's: never a pickled list left by an older release

# DRF's SimpleRateThrottle.allow_request on a sorted set of request times (score = the time, member
# unique), atomic: drop the times at or before the cutoff (now - duration, computed as DRF does),
# refuse when `limit` remain, else add now and keep the set `duration` seconds past its newest
# entry (DRF's cache.set timeout). Returns {admitted 0/1, times in the window, the oldest time}:
# what DRF's wait() reads. ARGV: now, cutoff, limit, member, duration.
_HIT = b"""
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
local count = redis.call('ZCARD', KEYS[1])
local admitted = 0
if count < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
  redis.call('EXPIRE', KEYS[1], ARGV[5])
  count, admitted = count + 1, 1
end
return {admitted, count, redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]}
"""
_HIT_SHA = hashlib.sha1(_HIT).hexdigest()

_local = LocMemCache("toolwatch-throttle-outage", {})
_outage_lock = threading.Lock()
_outage_until = 0.0  # monotonic() until which counts stay in _local


def _hit(backend: RedisCache, name: str, arguments: list) -> list:
    """_HIT's answer, on a connection of the pool Django's cache writes with. Not through a
    redis.Redis: Django's RedisCacheClient builds one for every get and set, and its command path
    (retries, instrumentation) costs more CPU here than the round trip; a connection refused or
    timed out is not retried but counted in this process for a while (_outage)."""
    pool = backend._cache._get_connection_pool(True)
    connection = pool.get_connection()
    try:
        try:
            connection.send_command("EVALSHA", _HIT_SHA, 1, name, *arguments)
            return connection.read_response()
        except NoScriptError:  # Redis restarted or its script cache was flushed
            connection.send_command("EVAL", _HIT, 1, name, *arguments)
            return connection.read_response()
    except (RedisError, OSError):
        connection.disconnect()  # its state is unknown: a reply may still be on its way
        raise
    finally:
        pool.release(connection)


def _outage(throttle, exc: Exception) -> None:
    global _outage_until
    with _outage_lock:
        if monotonic() < _outage_until:
            return
        _outage_until = monotonic() + OUTAGE_RETRY_S
    logger.warning("throttle %s: cache unavailable (%s); counting in this process for %.0f s",
                   type(throttle).__name__, exc, OUTAGE_RETRY_S)  # fmt: skip


class SharedLog(throttling.SimpleRateThrottle):
    """SimpleRateThrottle's sliding log (admitted while fewer than `num_requests` of the user's
    admitted requests fall within `duration`), in one Redis round trip when the cache is Redis,
    as DRF keeps it otherwise; its wait() is DRF's, from the same figures. Last in the bases of
    DRF's subclasses, so that their allow_request (ScopedRateThrottle's reads the view's scope)
    runs first. The MCP's throttle, which counts under the feed's key, is one too."""

    _window: tuple[int, float] | None = None  # (times in the window, the oldest) from Redis

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        backend = caches["default"]
        if not isinstance(backend, RedisCache):
            return super().allow_request(request, view)
        if monotonic() < _outage_until:
            self.cache = _local
            return super().allow_request(request, view)
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        name = backend.make_key(self.key + LOG_SUFFIX)
        arguments = [repr(self.now), repr(self.now - self.duration), self.num_requests, secrets.token_hex(8), self.duration]
        try:
            admitted, count, oldest = _hit(backend, name, arguments)
        except (RedisError, OSError) as exc:
            _outage(self, exc)
            self.cache = _local
            return super().allow_request(request, view)
        self._window = (count, float(oldest))
        return bool(admitted)

    def wait(self) -> float | None:
        if self._window is None:
            return super().wait()
        count, oldest = self._window  # DRF's: len(history) and history[-1]
        available = self.num_requests - count + 1
        return None if available <= 0 else (self.duration - (self.now - oldest)) / available


class _LiveRates:
    @property
    def THROTTLE_RATES(self) -> dict:  # noqa: N802 - the name DRF's SimpleRateThrottle reads
        return api_settings.DEFAULT_THROTTLE_RATES


class UserRateThrottle(_LiveRates, throttling.UserRateThrottle, SharedLog):
    """Scope `user`: per signed-in user (session or token)."""


class AnonRateThrottle(_LiveRates, throttling.AnonRateThrottle, SharedLog):
    """Scope `anon`: per client address (behind a proxy, as REST_FRAMEWORK["NUM_PROXIES"] says)."""


class ScopedRateThrottle(_LiveRates, throttling.ScopedRateThrottle, SharedLog):
    """The view's `throttle_scope` (e.g. `agent`), per user or address."""


class ChannelTestThrottle(UserRateThrottle):
    """Scope `test_send`: channel test sends per user, shared by the settings page and the API
    (a test send mails or posts to any target its owner typed)."""

    scope = "test_send"


def channel_test_wait(request) -> int | None:
    """None when this user may send a channel test now (the send is counted), else the whole
    seconds until they may. For the settings page and the API alike (one budget per user)."""
    throttle = ChannelTestThrottle()
    if throttle.allow_request(request, None):
        return None
    return max(math.ceil(throttle.wait() or 1), 1)


def channel_test_refusal(wait: int) -> str:
    """What a refused test send says: the limit and when to try again."""
    rate = api_settings.DEFAULT_THROTTLE_RATES.get(ChannelTestThrottle.scope)
    when = f"{wait} s" if wait < 120 else f"{math.ceil(wait / 60)} min"
    return f"not sent: test sends are limited to {rate} per user (TOOLWATCH_THROTTLE_TEST_SEND); try again in {when}"
