"""DRF's throttles, reading REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] when they run.

DRF's own classes copy the rates once, when rest_framework.throttling is imported, so a
rate changed later (override_settings in a test) would never be seen. These read
api_settings per request, which DRF reloads whenever REST_FRAMEWORK changes. The scopes
and their TOOLWATCH_THROTTLE_<SCOPE> variables: docs/deploy.md#throttles.

A refused request is a 429 with Retry-After (DRF's exception handler). The counts live in
Django's cache (TOOLWATCH_CACHE_URL): Redis counts across processes.
"""

from __future__ import annotations

import logging
import math

from redis.exceptions import RedisError
from rest_framework import throttling
from rest_framework.settings import api_settings

logger = logging.getLogger(__name__)


class _LiveRates:
    @property
    def THROTTLE_RATES(self) -> dict:  # noqa: N802 - the name DRF's SimpleRateThrottle reads
        return api_settings.DEFAULT_THROTTLE_RATES

    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)
        except (RedisError, OSError) as exc:
            # The cache (Redis) is down: serve unthrottled rather than fail every API call.
            logger.warning("throttle %s: cache unavailable (%s); request allowed", type(self).__name__, exc)
            return True


class UserRateThrottle(_LiveRates, throttling.UserRateThrottle):
    """Scope `user`: per signed-in user (session or token)."""


class AnonRateThrottle(_LiveRates, throttling.AnonRateThrottle):
    """Scope `anon`: per client address (behind a proxy, as REST_FRAMEWORK["NUM_PROXIES"] says)."""


class ScopedRateThrottle(_LiveRates, throttling.ScopedRateThrottle):
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
