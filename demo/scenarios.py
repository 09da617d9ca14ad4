"""Seeded synthetic rollups with known drift, to measure the detectors. Pure: stdlib only.

Contract: `generate(name, seed)` returns a `Scenario`: hourly `Bucket` series per tool and
the ground truth (`Expectation`s: which tool and kind should fire, from when, by when,
and when it should have resolved). Every tool/kind not in the truth should stay silent.
The same (name, seed) always gives the same numbers (`random.Random`, string-seeded).

The traffic model, per tool and hour:
- calls ~ Poisson(volume), volume = base x (1 + 0.5 cos(2 pi (hour - peak) / 24)) x weekly
  x bursts (the +-50 % daily cycle);
- errors ~ Binomial(calls, error_rate); escalations ~ Binomial(errors, escalation_share);
- retries come in clusters, as they do: retried calls ~ Binomial(calls, rate / m) and each
  makes 1-4 retries (a retry fails again with probability 0.2-0.6; the policy stops after
  5 attempts), so hourly retry counts are over-dispersed (Var/Mean about 1.4-2.3);
- wasted retries (retries after a permanent failure) are generated the same way and
  added to the retries: they are a subset of them, as in the rollups;
- failed retries: all of a cluster's retries but its last, which fails too (the call
  gives up) with probability `retry_again` when the cluster reached the cap, and every
  wasted retry; so retries - failed retries count the calls a retry rescued.
Scenarios can be drawn in 15-minute buckets (`generate(..., fine=True)`), whose sums are
the hours, for evaluating every quarter hour; a change's rate is averaged over a bucket,
which is exact for its counts. S5's step comes at a random minute.
Sampling is exact: BTRS for the binomial and PTRS for the Poisson (transformed rejection,
W. Hörmann 1993; inversion-type methods for small means), so the tails the false-alarm rate depends on are the true ones,
not a normal approximation's.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from dashboard.drift import (
    ERROR_RATE_SPIKE,
    ESCALATION_SILENCE,
    RETRY_RISE_FLAT_ERROR,
    WASTED_RETRIES,
    Bucket,
)

__all__ = [
    "CHANGE_SCENARIOS",
    "EVALUATION_LAG",
    "FINE",
    "QUIET_SCENARIOS",
    "SCENARIOS",
    "Expectation",
    "Scenario",
    "ToolModel",
    "binomial",
    "clustered",
    "clusters",
    "expected_calls",
    "generate",
    "poisson",
]

HOUR = timedelta(hours=1)
# A Monday, so weekday arithmetic in the weekly scenario is plain.
EPOCH = datetime(2025, 1, 6, tzinfo=UTC)

# ---------------------------------------------------------------------------------------
# Sampling.


def binomial(rng: random.Random, n: int, p: float) -> int:
    """Exact Binomial(n, p) draw in O(1) expected time for large n p.

    A port of CPython 3.12's `random.binomialvariate` (this project runs on 3.11):
    Devroye's geometric method for n p < 10, BTRS (Hörmann 1993) above.
    """
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial(rng, n, 1.0 - p)
    rand = rng.random
    if n * p < 10.0:
        x = y = 0
        c = math.log1p(-p)
        while True:
            y += math.floor(math.log(1.0 - rand()) / c) + 1
            if y > n:
                return x
            x += 1
    spq = math.sqrt(n * p * (1.0 - p))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    setup = False
    alpha = lpq = m = h = 0.0
    while True:
        u = rand() - 0.5
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        v = rand()
        if us >= 0.07 and v <= vr:
            return k
        if not setup:
            alpha = (2.83 + 5.1 / b) * spq
            lpq = math.log(p / (1.0 - p))
            m = math.floor((n + 1) * p)
            h = math.lgamma(m + 1) + math.lgamma(n - m + 1)
            setup = True
        v *= alpha / (a / (us * us) + b)
        if math.log(v) <= h - math.lgamma(k + 1) - math.lgamma(n - k + 1) + (k - m) * lpq:
            return k


def poisson(rng: random.Random, lam: float) -> int:
    """Exact Poisson(lam) draw: inversion below 10, PTRS (Hörmann 1993) above."""
    if lam <= 0.0:
        return 0
    rand = rng.random
    if lam < 10.0:
        # Inversion by sequential search: about lam + 1 steps.
        u = rand()
        k = 0
        pk = math.exp(-lam)
        cdf = pk
        while u > cdf:
            k += 1
            pk *= lam / k
            cdf += pk
            if pk < 1e-300 and k > lam:  # float round-off in the far tail
                break
        return k
    slam = math.sqrt(lam)
    loglam = math.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_invalpha = math.log(1.1239 + 1.1328 / (b - 3.4))
    vr = 0.9277 - 3.6224 / (b - 2.0)
    while True:
        u = rand() - 0.5
        v = rand()
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + lam + 0.43)
        if us >= 0.07 and v <= vr:
            return k
        if k < 0 or (us < 0.013 and v > us):
            continue
        accept = -lam + k * loglam - math.lgamma(k + 1)
        if v > 0.0 and math.log(v) + log_invalpha - math.log(a / (us * us) + b) <= accept:
            return k


MAX_RETRIES = 4  # retries per call: the retry policy stops after 5 attempts


@functools.lru_cache(maxsize=4096)
def cluster_sizes(again: float, cap: int = MAX_RETRIES) -> tuple[float, ...]:
    """P(a retried call makes s retries), s = 1..cap: each retry fails again with `again`."""
    weights = [again ** (s - 1) for s in range(1, cap + 1)]
    total = sum(weights)
    return tuple(w / total for w in weights)


def clustered(rng: random.Random, n: int, rate: float, again: float, cap: int = MAX_RETRIES) -> int:
    """Retries in one hour of n calls: `rate` per call on average, in clusters.

    Calls that retry ~ Binomial(n, rate / m); each makes s = 1..cap retries, where a retry
    fails again with probability `again` (a truncated geometric, mean m). The sizes are a
    multinomial draw, taken as sequential binomials, so an hour costs O(cap) draws.
    Var/Mean = E[s^2]/E[s], about 1.4-2.3 for the tools here.
    """
    return clusters(rng, n, rate, again, cap)[0]


def clusters(rng: random.Random, n: int, rate: float, again: float, cap: int = MAX_RETRIES) -> tuple[int, int, int]:
    """(retries, calls that retried, calls that reached the cap) of `clustered`, from the same draws."""
    if n <= 0 or rate <= 0.0:
        return 0, 0, 0
    sizes = cluster_sizes(again, cap)
    m = sum(s * p for s, p in enumerate(sizes, start=1))
    k = retried = binomial(rng, n, min(1.0, rate / m))
    total = 0
    left_p = 1.0
    for s, p in enumerate(sizes[:-1], start=1):
        if k <= 0:
            break
        c = binomial(rng, k, min(1.0, p / left_p))
        total += s * c
        k -= c
        left_p -= p
    k = max(k, 0)
    return total + cap * k, retried, k


# ---------------------------------------------------------------------------------------
# Scenario model.


@dataclass(frozen=True, slots=True)
class ToolModel:
    """The steady behaviour of one tool."""

    name: str
    calls_per_hour: float  # mean over the day
    error_rate: float
    retry_rate: float  # retries per call, not counting wasted ones
    escalation_share: float  # escalations per failed call
    wasted_rate: float  # wasted retries per call
    retry_again: float = 0.35  # a retry fails again (and is retried) with this probability
    wasted_again: float = 0.5
    daily_amplitude: float = 0.5  # the +-50 % daily cycle
    peak_hour: float = 15.0  # UTC hour of the daily peak


# A change: (t0, t1) in hours from the start -> the mean multiplier (or value) of one
# parameter over [t0, t1); None means "as steady". Averaging over a bucket is exact for
# the counts: calls are spread uniformly in a bucket, each retries (errs, ...) on its own
# with the rate of its moment, so the bucket's count is the same draw at the mean rate.
Profile = Callable[[float, float], float]


def _per_hour(g: Callable[[int], float]) -> Profile:
    """A profile constant within each hour: g(hour offset). Buckets never cross an hour."""
    return lambda t0, t1: g(int(t0))


@dataclass(frozen=True, slots=True)
class Expectation:
    """What should fire: `kind` on `tool`, an opening in [onset, deadline] is on time.

    `reference` is when the time to detect is counted from (e.g. the hour the retry rate
    passes 1.5x baseline); `recovered` is when the change ends (None: it persists), and
    the alert should then resolve by `resolve_deadline`.
    """

    tool: str
    kind: str
    onset: datetime
    reference: datetime
    deadline: datetime
    recovered: datetime | None = None
    resolve_deadline: datetime | None = None
    # Baseline events per hour of the changed metric at onset (expected calls x rate):
    # how much evidence an hour carries, what detectability depends on.
    events_per_hour: float = 0.0


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    seed: int
    description: str
    start: datetime
    hours: int
    series: dict[str, list[Bucket]]
    expected: tuple[Expectation, ...] = ()
    # Quiet scenarios count towards false alerts per tool-month; in others, alerts that
    # match no expectation are false too, but the scenario may be about something else.
    quiet: bool = False
    models: dict[str, ToolModel] = field(default_factory=dict)
    # With generate(..., fine=True): the same traffic in FINE (15-minute) buckets, whose
    # hourly sums are `series`, for evaluating more often than hourly.
    fine_series: dict[str, list[Bucket]] = field(default_factory=dict)


@dataclass(slots=True)
class _Change:
    """Multipliers by hour offset for one tool; each defaults to 1."""

    volume: Profile | None = None
    error: Profile | None = None
    retry: Profile | None = None
    escalation: Profile | None = None
    wasted: Profile | None = None  # an absolute wasted rate, not a multiplier


# Sub-hour buckets of a fine series, as the 5-minute rollups the job would read, coarsened
# to 15 minutes (the evaluation step) to keep the bench's cost down.
FINE = timedelta(minutes=15)
FINE_PER_HOUR = 4


def expected_calls(model: ToolModel, hour_of_day: int) -> float:
    """Mean calls in an hour of the day: the +-50 % daily cycle around calls_per_hour."""
    return model.calls_per_hour * (
        1.0 + model.daily_amplitude * math.cos(2.0 * math.pi * (hour_of_day - model.peak_hour) / 24.0)
    )


def _series(
    rng: random.Random,
    model: ToolModel,
    start: datetime,
    hours: int,
    change: _Change,
    fine: bool = False,
    outcomes: random.Random | None = None,
) -> tuple[list[Bucket], list[Bucket]]:
    """(hourly buckets, FINE buckets or []) of one tool.

    With `fine`, every hour is drawn as FINE_PER_HOUR sub-buckets and the hour is their
    sum (the same distribution as one hourly draw, and exactly what the rollups hold: an
    hour is the sum of its 5-minute buckets).

    Failed retries: every retry of a cluster fails but its last, which fails too (the
    call gives up) with probability `retry_again` when the cluster reached the policy's
    cap; wasted retries all fail. Those last outcomes are drawn from `outcomes`, a stream
    of their own, so the traffic is the same draw as without them.
    """
    outcomes = outcomes or random.Random(f"{model.name}:outcomes")
    hourly, sub = [], []
    first_hour = start.hour
    parts = FINE_PER_HOUR if fine else 1
    width = 1.0 / parts
    for i in range(hours):
        base_volume = expected_calls(model, (first_hour + i) % 24) / parts
        parts_of_hour = []
        for j in range(parts):
            t0 = i + j * width
            t1 = t0 + width
            volume = base_volume * (change.volume(t0, t1) if change.volume else 1.0)
            calls = poisson(rng, volume)
            err = model.error_rate * (change.error(t0, t1) if change.error else 1.0)
            retry = model.retry_rate * (change.retry(t0, t1) if change.retry else 1.0)
            share = model.escalation_share * (change.escalation(t0, t1) if change.escalation else 1.0)
            wasted_rate = change.wasted(t0, t1) if change.wasted else model.wasted_rate
            errors = binomial(rng, calls, min(err, 1.0))
            wasted = clustered(rng, calls, wasted_rate, model.wasted_again)
            transient, retried, capped = clusters(rng, calls, retry, model.retry_again)
            retries = transient + wasted
            escalations = binomial(rng, errors, min(share, 1.0))
            failed = transient - retried + binomial(outcomes, capped, model.retry_again) + wasted
            parts_of_hour.append(
                Bucket(start + i * HOUR + j * FINE, calls, errors, retries, escalations, wasted, failed)
            )
        if fine:
            sub.extend(parts_of_hour)
            hourly.append(
                Bucket(
                    start + i * HOUR, sum(b.calls for b in parts_of_hour), sum(b.errors for b in parts_of_hour),
                    sum(b.retries for b in parts_of_hour), sum(b.escalations for b in parts_of_hour),
                    sum(b.wasted_retries for b in parts_of_hour), sum(b.failed_retries for b in parts_of_hour),
                )  # fmt: skip
            )
        else:
            hourly.append(parts_of_hour[0])
    return hourly, sub


def _tool(rng: random.Random, name: str, **fixed: float) -> ToolModel:
    """A tool drawn from the S1 population, with `fixed` fields overriding the draw."""
    values = {
        "calls_per_hour": rng.uniform(400.0, 600.0),
        "error_rate": rng.uniform(0.01, 0.08),
        "retry_rate": rng.uniform(0.05, 0.20),
        "escalation_share": rng.uniform(0.1, 0.3),
        "wasted_rate": rng.uniform(0.0, 0.01),
        "retry_again": rng.uniform(0.2, 0.45),
        "wasted_again": rng.uniform(0.3, 0.6),
        "peak_hour": 15.0 + rng.uniform(-2.0, 2.0),
    }
    values.update(fixed)
    return ToolModel(name=name, **values)


def _ramp(onset: int, hours: int, factor: float, until: int | None = None) -> Profile:
    """1 before onset, rising linearly to `factor` over `hours` (hour by hour), held; back to 1 at `until`."""

    def f(i: int) -> float:
        if i < onset or (until is not None and i >= until):
            return 1.0
        return 1.0 + (factor - 1.0) * min(1.0, (i - onset + 1) / hours)

    return _per_hour(f)


def _step(onset: float, factor: float, until: float | None = None) -> Profile:
    """`factor` from `onset` (hours, possibly mid-hour) until `until`, else 1; averaged over a bucket."""
    end = math.inf if until is None else until

    def f(t0: float, t1: float) -> float:
        inside = max(0.0, min(t1, end) - max(t0, onset)) / (t1 - t0)
        return 1.0 + (factor - 1.0) * inside

    return f


def _build(
    name: str,
    seed: int,
    description: str,
    days: int,
    models: list[ToolModel],
    changes: dict[str, _Change] | None = None,
    expected: tuple[Expectation, ...] = (),
    quiet: bool = False,
    rng: random.Random | None = None,
    fine: bool = False,
) -> Scenario:
    rng = rng or random.Random(f"{name}:{seed}:traffic")
    hours = days * 24
    changes = changes or {}
    drawn = {
        m.name: _series(
            rng, m, EPOCH, hours, changes.get(m.name, _Change()), fine, random.Random(f"{name}:{seed}:{m.name}:outcomes")
        )
        for m in models
    }
    return Scenario(
        name=name,
        seed=seed,
        description=description,
        start=EPOCH,
        hours=hours,
        series={tool: hourly for tool, (hourly, _) in drawn.items()},
        expected=expected,
        quiet=quiet,
        models={m.name: m for m in models},
        fine_series={tool: sub for tool, (_, sub) in drawn.items()} if fine else {},
    )


def _at(i: int) -> datetime:
    return EPOCH + i * HOUR


def _events(model: ToolModel, i: int, rate: float) -> float:
    return round(expected_calls(model, (EPOCH.hour + i) % 24) * rate, 2)


# ---------------------------------------------------------------------------------------
# The scenarios. Change scenarios: 10-11 days, the change on day 8 at a random hour (the
# baseline is full by then), one changed tool and one steady control tool.

CHANGE_DAYS = 10
# The scheduled job judges the data up to the end of a bucket a few minutes after it
# closed (evaluate-drift runs at :03, :18, :33, :48): an alert raised on data up to t
# reaches people at t + EVALUATION_LAG.
EVALUATION_LAG = timedelta(minutes=3)


def _onset(rng: random.Random) -> int:
    return 7 * 24 + rng.randrange(24)


def s1_steady(seed: int, fine: bool = False) -> Scenario:
    rng = random.Random(f"s1:{seed}")
    models = [_tool(rng, f"tool_{i:02d}") for i in range(20)]
    return _build("s1_steady", seed, "20 tools, 30 days, ~500 calls/h, +-50 % daily cycle, no change",
                  30, models, quiet=True, rng=rng, fine=fine)  # fmt: skip


def _ramp_numbers(onset: int) -> tuple[int, int]:
    # The ramp's multiplier in hour offset onset + j is 1 + 1.5 (j + 1) / 12:
    # it first reaches 1.5x in j = 3.
    cross = onset + 3
    return cross, cross + 6


def s2_retry_ramp(seed: int, fine: bool = False) -> Scenario:
    rng = random.Random(f"s2:{seed}")
    onset = _onset(rng)
    cross, deadline = _ramp_numbers(onset)
    models = [_tool(rng, "degrading"), _tool(rng, "control")]
    truth = Expectation("degrading", RETRY_RISE_FLAT_ERROR, _at(onset), _at(cross), _at(deadline),
                        events_per_hour=_events(models[0], cross, models[0].retry_rate))  # fmt: skip
    return _build("s2_retry_ramp", seed, "retry rate ramps x2.5 over 12 h, error rate flat", CHANGE_DAYS, models,
                  {"degrading": _Change(retry=_ramp(onset, 12, 2.5))}, (truth,), rng=rng, fine=fine)  # fmt: skip


def s3_error_spike(seed: int, fine: bool = False) -> Scenario:
    rng = random.Random(f"s3:{seed}")
    onset = _onset(rng)
    models = [_tool(rng, "failing", error_rate=0.03), _tool(rng, "control")]
    truth = Expectation("failing", ERROR_RATE_SPIKE, _at(onset), _at(onset), _at(onset + 2),
                        events_per_hour=_events(models[0], onset, models[0].error_rate))  # fmt: skip
    change = _Change(error=_step(onset, 5.0), retry=_step(onset, 2.0))
    return _build("s3_error_spike", seed, "error rate 3 % -> 15 %, retries x2 with it", CHANGE_DAYS, models,
                  {"failing": change}, (truth,), rng=rng, fine=fine)  # fmt: skip


def s4_quiet_tool(seed: int, fine: bool = False) -> Scenario:
    rng = random.Random(f"s4:{seed}")
    onset = _onset(rng)
    models = [_tool(rng, f"quiet_{i}", calls_per_hour=5.0) for i in range(5)]
    changes = {m.name: _Change(retry=_ramp(onset, 12, 2.5)) for m in models}
    return _build("s4_quiet_tool", seed, "5 tools at 5 calls/h with the S2 ramp: too quiet to page",
                  CHANGE_DAYS, models, changes, rng=rng, fine=fine)  # fmt: skip


def s5_retry_step(seed: int, fine: bool = False) -> Scenario:
    # The step comes at a random moment, not on the hour, and "within 2 h" is counted
    # from it to the moment the job that fires runs: EVALUATION_LAG after the end of the
    # data it judges (rollups settle first). So the deadline, in data time, is 2 h minus
    # that lag after the step.
    rng = random.Random(f"s5:{seed}")
    onset = _onset(rng)
    models = [_tool(rng, "degrading"), _tool(rng, "control")]
    # Its own stream, so the traffic is the one an on-the-hour step would have.
    step = onset + random.Random(f"s5:{seed}:minute").uniform(0.0, 1.0)
    at = EPOCH + timedelta(hours=step)
    truth = Expectation("degrading", RETRY_RISE_FLAT_ERROR, at, at, at + 2 * HOUR - EVALUATION_LAG,
                        events_per_hour=_events(models[0], onset, models[0].retry_rate))  # fmt: skip
    return _build("s5_retry_step", seed, "sudden x2 retry step at a random minute, error rate flat", CHANGE_DAYS,
                  models, {"degrading": _Change(retry=_step(step, 2.0))}, (truth,), rng=rng, fine=fine)  # fmt: skip


def s6_recovery(seed: int, fine: bool = False) -> Scenario:
    rng = random.Random(f"s6:{seed}")
    onset = _onset(rng)
    cross, deadline = _ramp_numbers(onset)
    recovered = onset + 24  # 12 h ramp, 12 h held at x2.5, then back
    models = [_tool(rng, "degrading"), _tool(rng, "control")]
    truth = Expectation("degrading", RETRY_RISE_FLAT_ERROR, _at(onset), _at(cross), _at(deadline),
                        recovered=_at(recovered), resolve_deadline=_at(recovered + 24),
                        events_per_hour=_events(models[0], cross, models[0].retry_rate))  # fmt: skip
    return _build("s6_recovery", seed, "the S2 ramp, held 12 h, then recovery: resolves by itself",
                  CHANGE_DAYS + 1, models, {"degrading": _Change(retry=_ramp(onset, 12, 2.5, until=recovered))},
                  (truth,), rng=rng, fine=fine)  # fmt: skip


def s7_wasted_retries(seed: int, fine: bool = False) -> Scenario:
    rng = random.Random(f"s7:{seed}")
    onset = _onset(rng)
    base = rng.uniform(0.001, 0.005)
    after = rng.uniform(0.03, 0.06)
    models = [_tool(rng, "wasteful", wasted_rate=base), _tool(rng, "control")]
    truth = Expectation("wasteful", WASTED_RETRIES, _at(onset), _at(onset), _at(onset + 3),
                        events_per_hour=_events(models[0], onset, base))  # fmt: skip
    change = _Change(wasted=_per_hour(lambda i: after if i >= onset else base))
    return _build("s7_wasted_retries", seed,
                  "a client starts retrying permanent failures: wasted/call 0.1-0.5 % -> 3-6 %", CHANGE_DAYS, models,
                  {"wasteful": change}, (truth,), rng=rng, fine=fine)  # fmt: skip


def s8_escalation_silence(seed: int, fine: bool = False) -> Scenario:
    rng = random.Random(f"s8:{seed}")
    onset = _onset(rng)
    models = [
        _tool(rng, "absorbing", error_rate=rng.uniform(0.03, 0.08), escalation_share=rng.uniform(0.2, 0.3)),
        _tool(rng, "control"),
    ]
    m = models[0]
    truth = Expectation("absorbing", ESCALATION_SILENCE, _at(onset), _at(onset), _at(onset + 8),
                        events_per_hour=_events(m, onset, m.error_rate * m.escalation_share))  # fmt: skip
    return _build("s8_escalation_silence", seed, "the handoff breaks: escalations stop while errors go on",
                  CHANGE_DAYS, models, {"absorbing": _Change(escalation=_step(onset, 0.0))}, (truth,),
                  rng=rng, fine=fine)  # fmt: skip


def q_weekly_cycle(seed: int, fine: bool = False) -> Scenario:
    rng = random.Random(f"weekly:{seed}")
    models = [_tool(rng, f"tool_{i}") for i in range(4)]
    weekend = lambda i: 0.3 if ((i // 24) % 7) >= 5 else 1.0  # noqa: E731
    changes = {m.name: _Change(volume=_per_hour(weekend)) for m in models}
    return _build("q_weekly_cycle", seed, "weekend volume -70 %, rates unchanged", 35, models, changes,
                  quiet=True, rng=rng, fine=fine)  # fmt: skip


def q_bursts(seed: int, fine: bool = False) -> Scenario:
    rng = random.Random(f"bursts:{seed}")
    models = [_tool(rng, f"tool_{i}") for i in range(4)]
    changes = {}
    hours = 30 * 24
    for m in models:
        starts = sorted(rng.sample(range(hours - 2), 12))  # about 3 bursts a week

        def volume(i: int, starts=tuple(starts)) -> float:
            return 5.0 if any(s <= i < s + 2 for s in starts) else 1.0

        changes[m.name] = _Change(volume=_per_hour(volume))
    return _build("q_bursts", seed, "bursts of x5 volume for 2 h, rates unchanged", 30, models, changes,
                  quiet=True, rng=rng, fine=fine)  # fmt: skip


def q_rate_cycle(seed: int, fine: bool = False) -> Scenario:
    rng = random.Random(f"ratecycle:{seed}")
    models = [_tool(rng, f"tool_{i}") for i in range(4)]
    changes = {}
    for m in models:

        def load(i: int, peak=m.peak_hour) -> float:
            return 1.0 + 0.2 * math.cos(2.0 * math.pi * ((EPOCH.hour + i) % 24 - peak) / 24.0)

        changes[m.name] = _Change(retry=_per_hour(load), error=_per_hour(load))
    return _build("q_rate_cycle", seed, "retry and error rates +-20 % with the daily load", 30, models, changes,
                  quiet=True, rng=rng, fine=fine)  # fmt: skip


SCENARIOS: dict[str, Callable[..., Scenario]] = {
    "s1_steady": s1_steady,
    "s2_retry_ramp": s2_retry_ramp,
    "s3_error_spike": s3_error_spike,
    "s4_quiet_tool": s4_quiet_tool,
    "s5_retry_step": s5_retry_step,
    "s6_recovery": s6_recovery,
    "s7_wasted_retries": s7_wasted_retries,
    "s8_escalation_silence": s8_escalation_silence,
    "q_weekly_cycle": q_weekly_cycle,
    "q_bursts": q_bursts,
    "q_rate_cycle": q_rate_cycle,
}
QUIET_SCENARIOS = tuple(name for name in SCENARIOS if name == "s1_steady" or name.startswith("q_"))
CHANGE_SCENARIOS = tuple(name for name in SCENARIOS if name not in QUIET_SCENARIOS and name != "s4_quiet_tool")


def generate(name: str, seed: int, *, fine: bool = False) -> Scenario:
    """The scenario `name` (a key of SCENARIOS) for `seed`; with `fine`, also its 15-minute buckets.

    The hourly series of a fine scenario is drawn from sub-buckets, so it differs from the
    plain one of the same seed (same distribution, other numbers)."""
    try:
        factory = SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})") from None
    return factory(seed, fine)
