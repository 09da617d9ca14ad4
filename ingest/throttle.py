"""The per-key ingest rate limit: a token bucket per API key, in Django's cache.

Contract (docs/deploy.md#ingest-rate-limit): each key earns INGEST_RATE tokens a second,
up to INGEST_BURST; a request costs one token per item it carries (span, log record, metric
data point). A request is admitted while the key's bucket is not empty, and then takes its
whole cost, going into debt if it must; so a request larger than the burst still passes
when the bucket is full, and the debt makes the key wait its turn. A refused request is
told how long to wait (HTTP 429 + Retry-After; gRPC RESOURCE_EXHAUSTED + RetryInfo), and
costs nothing. INGEST_RATE = 0 turns the limit off.

It runs on every request of the hot path, after the items are counted: one cache read and
one write. The read and the write are not one atomic step, so two requests of one key
judged at the same instant by two processes may both see the same tokens (one cost is then
lost): the limit errs on the side of admitting, by at most one request per process at a
time. With the default local-memory cache each process keeps its own buckets; set
TOOLWATCH_CACHE_URL to Redis so that gunicorn's and the gRPC server's workers share them.
"""

from __future__ import annotations

import logging
import math
import time

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)

KEY_PREFIX = "tw:ingest-bucket:"


def ingest_wait(*, key_id: int, cost: int, now: float | None = None) -> int:
    """0 when a request of `cost` items from key `key_id` may go on (its cost is then taken),
    else the whole seconds to wait before the bucket has a token again (at least 1)."""
    rate = settings.INGEST_RATE
    if rate <= 0:
        return 0
    burst = max(settings.INGEST_BURST, 1)
    now = time.time() if now is None else now
    name = f"{KEY_PREFIX}{key_id}"
    try:
        return _take(name, cost, rate=rate, burst=burst, now=now)
    except Exception:  # noqa: BLE001 - a broken cache must never refuse telemetry: admit, and say so
        logger.warning("ingest: rate limit skipped, the cache is unavailable", exc_info=True)
        return 0


def _take(name: str, cost: int, *, rate: float, burst: int, now: float) -> int:
    state = cache.get(name)
    tokens = float(burst)
    if state is not None:
        stored, stamp = state
        tokens = min(float(burst), stored + max(now - stamp, 0.0) * rate)
    if tokens <= 0:
        return math.floor(-tokens / rate) + 1
    tokens -= cost
    # Once refilled the entry equals a fresh bucket, so it may expire then (and an evicted
    # entry only forgives a debt).
    cache.set(name, (tokens, now), timeout=math.ceil((burst - tokens) / rate) + 1)
    return 0


def refusal_message(wait: int) -> str:
    return (
        f"this API key is over its rate limit of {settings.INGEST_RATE} items a second "
        f"(TOOLWATCH_INGEST_RATE, burst {settings.INGEST_BURST}); retry in {wait} s"
    )


def ingest_reset(*, key_id: int) -> None:
    """Forget a key's bucket (a full one next time)."""
    cache.delete(f"{KEY_PREFIX}{key_id}")
