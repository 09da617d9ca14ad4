"""The ways to run the generator: backfill history, a live trickle, and load for benchmarks."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from demo.simulate.exporters import SendStats, send
from demo.simulate.generator import Session, SimulationError, Simulator, from_ns, to_ns

HOUR = dt.timedelta(hours=1)


def backfill(
    sim: Simulator, exporter, *, start: dt.datetime, end: dt.datetime, batch_spans: int = 5_000
) -> SendStats:
    """Send every session of [start, end) that has ended by `end`, with its own timestamps,
    in large requests; the ground truth counts what was sent."""
    return send(sim.sessions(start, end, until=end), exporter, batch_spans=batch_spans, on_sent=sim.record)


def live(
    sim: Simulator,
    exporter,
    *,
    since: dt.datetime | None = None,
    interval: float = 5.0,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.time,
    max_ticks: int | None = None,
    on_tick: Callable[[SendStats], None] | None = None,
    on_error: Callable[[Exception], None] | None = None,
) -> SendStats:
    """Every `interval` seconds, send the sessions that started since `since` and have just
    ended by the clock, until `stop` is set (or `max_ticks` ticks). A failed send is tried
    again, with whatever has ended meanwhile, on the next tick (resends are deduplicated)."""
    stop = stop or threading.Event()
    since_ns = to_ns(since or dt.datetime.fromtimestamp(clock(), tz=dt.UTC))
    sent_until_ns = since_ns
    cache: dict[tuple[int, dt.datetime], list[Session]] = {}
    total = SendStats()
    ticks = 0
    while not stop.is_set():
        now_ns = int(clock() * 10**9)
        hour = from_ns(now_ns).replace(minute=0, second=0, microsecond=0)
        due: list[Session] = []
        # Sessions last seconds to minutes: the last two hours hold every one that can end now.
        for slot in (hour - 2 * HOUR, hour - HOUR, hour):
            if to_ns(slot + HOUR) <= since_ns:
                continue
            for index in range(len(sim.deployments)):
                key = (index, slot)
                if key not in cache:
                    cache[key] = list(sim.hour_sessions(index, slot))
                due += [s for s in cache[key] if s.start_ns >= since_ns and sent_until_ns < s.end_ns <= now_ns]
        for key in [key for key in cache if key[1] < hour - 2 * HOUR]:
            del cache[key]
        due.sort(key=lambda s: s.end_ns)
        try:
            stats = send(due, exporter, batch_spans=10**9, on_sent=sim.record)  # one request per tick
        except (SimulationError, OSError) as exc:
            if on_error is None:
                raise
            on_error(exc)
        else:
            sent_until_ns = now_ns
            for name in ("requests", "spans", "sessions", "tool_calls"):
                setattr(total, name, getattr(total, name) + getattr(stats, name))
            if on_tick is not None:
                on_tick(stats)
        ticks += 1
        if max_ticks is not None and ticks >= max_ticks:
            break
        stop.wait(interval)
    return total


def encoded_requests(
    calls: int, *, seed: int = 7, spans_per_request: int = 512, now: dt.datetime | None = None
) -> Iterator[bytes]:
    """Serialised ExportTraceServiceRequests (protobuf, uncompressed) carrying `calls` tool
    calls of the demo fleet's traffic, within the two hours before `now`.

    Requests hold exactly `spans_per_request` spans (the last one fewer), cut in end order
    as a BatchSpanProcessor cuts them, so traces straddle requests and parents often come
    a request after their children. Deterministic for a seed and `now`. For bench/*.py.
    """
    now = now or dt.datetime.now(dt.UTC)
    sim = Simulator(seed=seed, rate=float(calls), daily_cycle=0.0)
    batch: list = []
    made = 0
    for session in sim.sessions(now - 2 * HOUR, now, until=now):
        batch.extend(session.spans)
        made += session.tool_calls
        while len(batch) >= spans_per_request:
            yield encode_spans(batch[:spans_per_request]).SerializePartialToString()
            batch = batch[spans_per_request:]
        if made >= calls:
            break
    if batch:
        yield encode_spans(batch).SerializePartialToString()
