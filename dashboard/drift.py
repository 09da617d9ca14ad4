"""Drift detectors over per-tool rollups (docs/contract/drift-and-alerts.md). Pure: stdlib only.

Contract:
- `detect(series, now, thresholds, *, open_kinds, opened_at)` takes the hourly
  `Bucket`s of ONE tool (any order; a missing hour means zero calls) and returns one
  `Finding` per kind in `KINDS`, firing or not. Only complete hours count: the windows
  end at `now` floored to the hour. Fetch at least `thresholds.history_hours` hours
  before `now` (and, for an open alert with a known `opened_at`, back to
  `opened_at - thresholds.history_hours`).
- `detect(..., fine_series=...)` with the tool's 5-minute buckets of the last
  `guard_hours + confirm_hours` hours: the recent windows are summed from them and end
  at `now` floored to 5 minutes, so the job can run every 15 minutes and judge windows
  that end when it runs (a step mid-hour is not diluted in whole hours). Baselines stay
  hourly and end on the hour.
- A kind in `open_kinds` has an alert open. It keeps firing until it is clearly back
  (hysteresis), judged against the baseline it was opened on when `opened_at[kind]` is
  given, so a degraded level never becomes the norm while its alert is open. Without
  enough recent volume to tell, an open kind keeps firing: silence is not recovery.
- `replay(series, start, end, thresholds, *, fine_series, step, fine_from)` runs `detect` every
  `step` (an hour, or 15 minutes with `fine_series`) as the scheduled job does, carrying
  the open alerts, and returns the alert episodes.
- `Thresholds` holds every tunable with its default; `Thresholds.from_overrides(d)` and
  `.with_overrides(d)` apply a per-project / per-tool JSON dict, and any bad key or
  value raises a ValueError that names the key.

Method (docs/drift.md has the reasoning, every default and the measured figures):
- Baseline: the trailing `baseline_hours` (7 days) ending `guard_hours` (6) before the
  evaluation, so the start of a ramp does not leak into its own baseline. Per-call
  rates already remove the daily and weekly volume cycles, and 7 whole days weigh every
  hour of the day and every weekday alike. It is robust to the condition under test: its
  24 h slices whose rates lie `baseline_outlier_z` from the median slice's are left out
  (at most half of them), so a change that began inside the window is not its own norm.
- wasted_retries also has an absolute floor: `wasted_floor_count` of them in a window,
  `wasted_floor_share` of its retries, fire whatever the baseline (waste by definition).
- Recent: the last 2 and the last 6 hours before the evaluation are each compared with the baseline (a scan:
  2 h catches a step within 2 h (docs/contract/drift-and-alerts.md#drift-kinds), 6 h catches ramps and quieter
  tools). The shorter window must clear `short_window_extra_z` more.
- Test: the signed root of the likelihood-ratio statistic for two Poisson rates
  (retries per call, which can exceed one) or two binomial proportions (errors per
  call), divided by a quasi-likelihood dispersion estimated from the baseline's own
  hour-to-hour scatter: retries come in clusters (a failed retry is retried again), so
  hourly retry counts vary about twice as much as Poisson and a plain test would page
  on noise. Minimum events count effective events, count / dispersion. Escalation
  silence uses the exact conditional binomial test.
- A retry rise is tested on the rescued calls (retries that succeeded: one per call, so
  no clusters and 20-30 % more evidence than the retries carry), or on the retry
  count at a higher bar; its size (`min_rise`) is judged on retries per call.
- Opening needs z at least the kind's `z_*` (3.9 to 5: strict, for many tools times
  96 evaluations a day), a relative rise of `min_rise` (1.5x) and minimum volumes, so
  quiet tools page nobody. `retry_rise_flat_error` also needs the error rate flat;
  when errors rise too it is an `error_rate_spike`, and it does not open while one fires.
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timedelta
from itertools import accumulate
from operator import attrgetter, le
from statistics import NormalDist
from typing import Any

__all__ = [
    "KINDS",
    "Bucket",
    "Episode",
    "Finding",
    "HourlySeries",
    "Replay",
    "Thresholds",
    "binomial_dispersion",
    "binomial_rise_z",
    "detect",
    "p_to_z",
    "poisson_dispersion",
    "poisson_excess_z",
    "poisson_rise_z",
    "replay",
    "silence_p",
    "z_to_p",
]

RETRY_RISE_FLAT_ERROR = "retry_rise_flat_error"
ERROR_RATE_SPIKE = "error_rate_spike"
WASTED_RETRIES = "wasted_retries"
ESCALATION_SILENCE = "escalation_silence"
KINDS = (RETRY_RISE_FLAT_ERROR, ERROR_RATE_SPIKE, WASTED_RETRIES, ESCALATION_SILENCE)

HOUR = timedelta(hours=1)
_NORMAL = NormalDist()
# z is reported up to here; beyond it every p-value is 0.0 in a float anyway.
Z_CAP = 37.0


@dataclass(frozen=True, slots=True)
class Bucket:
    """One hour of one tool (a rollup row)."""

    start: datetime  # UTC, hour-aligned
    calls: int  # logical calls
    errors: int  # calls whose outcome failed
    retries: int  # attempts after the first
    escalations: int
    wasted_retries: int  # retries after a permanent-class failure (a subset of retries)
    # Retries that failed (a subset of retries). The others succeeded: at most one per
    # call, they count the calls a retry rescued, a count without the clusters.
    failed_retries: int = 0


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every tunable of `detect`, with its default. docs/drift.md says why each is so."""

    # Windows (hours).
    baseline_hours: int = 168  # trailing 7 days: every hour of the day and weekday alike
    recent_hours: tuple[int, ...] = (2, 6)  # scanned recent windows
    silence_hours: int = 6  # escalation_silence's recent window: escalations are rare
    resolve_hours: int = 6  # window an open alert is judged on for resolving
    confirm_hours: int = 1  # consecutive hourly evaluations that must agree to open
    # Volumes: below these a kind is not evaluated (quiet tools page nobody).
    min_recent_calls: int = 100
    min_baseline_calls: int = 1000
    min_baseline_hours: int = 72  # hours with calls in the baseline (3 days)
    min_recent_events: int = 10  # effective (count / dispersion) events in the recent window
    # Significance to open, per kind (one-sided z of the likelihood-ratio test; z 5 is
    # p = 2.9e-7 per window and evaluation), for the longest recent window. The headline
    # kind can afford less: it is tested on the rescued calls (one per call: no clusters,
    # so the test's tails are the assumed ones), and its min_rise and flat-error
    # conditions reject most noise before z does (docs/drift.md).
    z_retry_rise: float = 3.9
    # retry_rise_flat_error's second test, on the retry count itself: clustered, so it
    # needs a higher bar; it catches more retries per rescued call, which the first misses.
    z_retry_count: float = 5.0
    z_error_spike: float = 5.0
    z_wasted: float = 5.0
    z_silence: float = 5.0
    # Added to the z of every recent window shorter than the longest: short windows are
    # more numerous per month (more chances for noise) and hold fewer events (heavier
    # tails than the test assumes), so they must clear a higher bar.
    short_window_extra_z: float = 0.5
    min_rise: float = 1.5  # recent rate / baseline rate
    max_dispersion: float = 10.0  # cap on the estimated overdispersion
    # retry_rise_flat_error: the error rate counts as flat unless it is up both
    # significantly (z >= flat_error_max_z) and materially (recent / baseline >
    # flat_error_max_ratio). Requiring both keeps noise in a short window of a tool with
    # few errors from vetoing a real quiet failure; the veto is judged at every
    # evaluation the retries fire, so z 2 (2 % of noise) vetoed 3 % of real steps
    # (docs/drift.md).
    flat_error_max_ratio: float = 1.25
    flat_error_max_z: float = 3.0
    # wasted_retries: a rise over baseline must also reach this many wasted retries per
    # call to matter (each costs one call) ...
    wasted_min_rate: float = 0.01
    # ... and any rate significantly above this floor fires, rise or not (chronic waste).
    wasted_floor: float = 0.05
    # The absolute floor: retries after a permanent error are waste by definition, so at least
    # this many in a recent window, making at least this share of its retries (and at least
    # wasted_min_rate per call), fire whatever the baseline holds: a tool that has wasted
    # retries for days has a baseline that absorbs them. 0 switches the rule off.
    wasted_floor_count: int = 50
    wasted_floor_share: float = 0.3
    # A baseline robust to the condition under test: its days (24 h slices) whose rate of a
    # metric lies further than this z from the median day's are left out of it, so a change
    # that began inside the baseline window does not become its own norm. 0 switches it off
    # (every hour of the window counts, as before).
    baseline_outlier_z: float = 4.0
    # escalation_silence.
    silence_min_expected: float = 10.0  # escalations the baseline share predicts
    silence_max_fraction: float = 0.1  # "~zero": at most this share of the expected
    silence_resolve_fraction: float = 0.5  # resolved once this share is back
    # Hysteresis: an open rise alert resolves once the rate is within this of baseline.
    resolve_ratio: float = 1.2

    def __post_init__(self) -> None:
        for f in fields(self):
            _check(f.name, getattr(self, f.name))
        if self.resolve_ratio >= self.min_rise:
            raise ValueError(f"resolve_ratio: must be below min_rise ({self.min_rise}), got {self.resolve_ratio}")
        if self.silence_max_fraction >= self.silence_resolve_fraction:
            raise ValueError(
                f"silence_max_fraction: must be below silence_resolve_fraction "
                f"({self.silence_resolve_fraction}), got {self.silence_max_fraction}"
            )

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, Any] | None) -> Thresholds:
        """The defaults with `overrides` (a JSON dict of field names) applied."""
        return cls().with_overrides(overrides)

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> Thresholds:
        """A copy with `overrides` applied: layer per-project, then per-tool settings."""
        if not overrides:
            return self
        if not isinstance(overrides, Mapping):
            raise ValueError(f"thresholds: expected a JSON object, got {type(overrides).__name__}")
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for key, value in overrides.items():
            if key not in values:
                raise ValueError(f"{key}: unknown threshold (known: {', '.join(sorted(values))})")
            if key == "recent_hours" and isinstance(value, list):
                value = tuple(value)  # JSON has no tuples
            values[key] = value
        return Thresholds(**values)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["recent_hours"] = list(self.recent_hours)
        return d

    @property
    def guard_hours(self) -> int:
        """Hours between the baseline's end and the evaluation: the longest recent window."""
        return max(max(self.recent_hours), self.silence_hours, self.resolve_hours)

    @property
    def history_hours(self) -> int:
        """How many hours before `now` `detect` reads."""
        return self.baseline_hours + self.guard_hours + self.confirm_hours - 1


_INT_FIELDS = {
    "baseline_hours": (24, 24 * 90),
    "silence_hours": (1, 48),
    "resolve_hours": (1, 48),
    "confirm_hours": (1, 6),
    "min_recent_calls": (1, None),
    "min_baseline_calls": (1, None),
    "min_baseline_hours": (1, None),
    "min_recent_events": (1, None),
    "wasted_floor_count": (0, None),
}
# name -> (exclusive lower bound, inclusive upper bound or None); a lower bound in
# _INCLUSIVE_LOW is inclusive.
_INCLUSIVE_LOW = {"short_window_extra_z", "wasted_min_rate", "wasted_floor_share", "baseline_outlier_z"}
_FLOAT_FIELDS = {
    "z_retry_rise": (0.0, Z_CAP),
    "z_retry_count": (0.0, Z_CAP),
    "z_error_spike": (0.0, Z_CAP),
    "z_wasted": (0.0, Z_CAP),
    "z_silence": (0.0, Z_CAP),
    "short_window_extra_z": (0.0, 10.0),
    "min_rise": (1.0, None),
    "max_dispersion": (1.0, None),
    "flat_error_max_ratio": (1.0, None),
    "flat_error_max_z": (0.0, None),
    "wasted_min_rate": (0.0, 1000.0),
    "wasted_floor": (0.0, 1000.0),
    "wasted_floor_share": (0.0, 1.0),
    "baseline_outlier_z": (0.0, Z_CAP),
    "silence_min_expected": (0.0, None),
    "silence_max_fraction": (0.0, 1.0),
    "silence_resolve_fraction": (0.0, 1.0),
    "resolve_ratio": (1.0, None),
}


def _check(name: str, value: Any) -> None:
    if name == "recent_hours":
        if (
            not isinstance(value, tuple)
            or not value
            or not all(isinstance(h, int) and not isinstance(h, bool) and 1 <= h <= 48 for h in value)
            or list(value) != sorted(set(value))
        ):
            raise ValueError(f"recent_hours: must be a non-empty increasing list of hours in 1..48, got {value!r}")
        return
    if name in _INT_FIELDS:
        lo, hi = _INT_FIELDS[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < lo or (hi is not None and value > hi):
            bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            raise ValueError(f"{name}: must be an integer {bound}, got {value!r}")
        return
    lo, hi = _FLOAT_FIELDS[name]
    inclusive = name in _INCLUSIVE_LOW
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or (value < lo if inclusive else value <= lo)
        or (hi is not None and value > hi)
    ):
        left = "[" if inclusive else "("
        bound = f"in {left}{lo}, {hi}]" if hi is not None else f"> {lo}"
        raise ValueError(f"{name}: must be a number {bound}, got {value!r}")


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str  # one of KINDS
    firing: bool
    recent: tuple[datetime, datetime]  # [start, end) of the window the numbers are from
    baseline: tuple[datetime, datetime]
    statistics: dict = field(default_factory=dict)  # JSON-ready numbers and thresholds used
    summary: str = ""  # one human sentence


# ---------------------------------------------------------------------------------------
# Statistics helpers. Each returns a signed z: positive when the recent rate is higher.


def _xlogy(x: float, y: float) -> float:
    return x * math.log(x / y) if x > 0 else 0.0


def poisson_rise_z(k_r: float, n_r: float, k_b: float, n_b: float, dispersion: float = 1.0) -> float:
    """Signed root likelihood-ratio z for two Poisson rates k_r/n_r vs k_b/n_b.

    Exposures n are calls, so the rate is events per call and may exceed 1. Unlike the
    Wald z, the signed root stays within about 0.1 of the exact conditional test down to
    5 expected events (tests/dashboard/test_drift.py checks it). `dispersion` (>= 1) is the
    quasi-Poisson factor: the deviance is divided by it.
    """
    if n_r <= 0 or n_b <= 0:
        return 0.0
    k = k_r + k_b
    if k <= 0:
        return 0.0
    e_r = k * n_r / (n_r + n_b)
    e_b = k - e_r
    dev = 2.0 * (_xlogy(k_r, e_r) + _xlogy(k_b, e_b))
    z = math.sqrt(max(dev, 0.0) / dispersion)
    return min(z, Z_CAP) if k_r * n_b > k_b * n_r else -min(z, Z_CAP)


def poisson_excess_z(k: float, n: float, rate0: float, dispersion: float = 1.0) -> float:
    """Signed root likelihood-ratio z for a Poisson count k over exposure n against a known rate."""
    mu = n * rate0
    if n <= 0 or mu <= 0:
        return 0.0
    dev = 2.0 * (_xlogy(k, mu) - (k - mu))
    z = min(math.sqrt(max(dev, 0.0) / dispersion), Z_CAP)
    return z if k > mu else -z


def binomial_rise_z(k_r: float, n_r: float, k_b: float, n_b: float, dispersion: float = 1.0) -> float:
    """Signed root likelihood-ratio z for two proportions k_r/n_r vs k_b/n_b (quasi-binomial)."""
    if n_r <= 0 or n_b <= 0:
        return 0.0
    k = k_r + k_b
    n = n_r + n_b
    if k <= 0 or k >= n:
        return 0.0
    p = k / n
    q = 1.0 - p
    dev = 2.0 * (
        _xlogy(k_r, n_r * p) + _xlogy(n_r - k_r, n_r * q) + _xlogy(k_b, n_b * p) + _xlogy(n_b - k_b, n_b * q)
    )
    z = min(math.sqrt(max(dev, 0.0) / dispersion), Z_CAP)
    return z if k_r * n_b > k_b * n_r else -z


def poisson_dispersion(sum_k: float, sum_n: float, sum_k2_over_n: float, hours: int) -> float:
    """Pearson estimate of Var/Mean for hourly counts k_i over exposures n_i.

    From running sums, so the baseline is read once: chi2 = sum((k_i - n_i*r)^2 / (n_i*r))
    = sum(k_i^2/n_i)/r - K with r = K/N, and the estimate is chi2 / (hours - 1).
    Not floored or capped here; `detect` uses max(1, min(estimate, max_dispersion)).
    """
    if hours < 2 or sum_k <= 0 or sum_n <= 0:
        return 1.0
    rate = sum_k / sum_n
    return (sum_k2_over_n / rate - sum_k) / (hours - 1)


def binomial_dispersion(sum_k: float, sum_n: float, sum_k2_over_n: float, hours: int) -> float:
    """Pearson estimate of the extra-binomial dispersion of hourly proportions k_i/n_i."""
    if hours < 2 or sum_k <= 0 or sum_k >= sum_n:
        return 1.0
    p = sum_k / sum_n
    return (sum_k2_over_n - p * sum_k) / (p * (1.0 - p) * (hours - 1))


def silence_p(k_r: int, e_r: float, k_b: int, e_b: float) -> float:
    """Exact one-sided p that the recent escalations are as few as k_r.

    Escalations are Poisson with exposure = errors (a failed call is what gets escalated),
    so given the total k_r + k_b, k_r ~ Binomial(k_r + k_b, e_r / (e_r + e_b)) when the
    share has not changed: the conditional test for two Poisson rates. Returns
    P(X <= k_r).
    """
    total = k_r + k_b
    if total <= 0 or e_r <= 0 or e_b <= 0:
        return 1.0
    pi = e_r / (e_r + e_b)
    log_pi, log_q = math.log(pi), math.log1p(-pi)
    log_c = math.lgamma(total + 1)
    terms = [
        log_c - math.lgamma(i + 1) - math.lgamma(total - i + 1) + i * log_pi + (total - i) * log_q
        for i in range(0, min(k_r, total) + 1)
    ]
    top = max(terms)
    log_p = top + math.log(sum(math.exp(t - top) for t in terms))
    return min(1.0, math.exp(log_p)) if log_p > -700 else 0.0


def z_to_p(z: float) -> float:
    """One-sided upper-tail p-value of a standard normal z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def p_to_z(p: float) -> float:
    """The z with upper-tail probability p (capped at Z_CAP)."""
    if p >= 1.0:
        return -Z_CAP
    if p <= 1e-300:
        return Z_CAP
    return min(-_NORMAL.inv_cdf(p), Z_CAP)


# ---------------------------------------------------------------------------------------
# Aggregation.


@dataclass(frozen=True, slots=True)
class _Agg:
    calls: int = 0
    errors: int = 0
    transient: int = 0  # retries - wasted_retries: the retries that can hide a failure
    wasted: int = 0
    escalations: int = 0
    rescued: int = 0  # retries that succeeded: calls a retry rescued (at most one per call)
    hours: int = 0  # hours with calls
    # sum(k^2 / n) per metric, for the dispersion estimates
    q_errors: float = 0.0
    q_transient: float = 0.0
    q_wasted: float = 0.0
    q_rescued: float = 0.0


_start = attrgetter("start")


class HourlySeries(Sequence[Bucket]):
    """The buckets of one tool, sorted by hour, with prefix sums.

    Any window's totals then cost two bisections instead of a pass over the baseline's
    ~170 buckets. `detect` wraps a plain sequence itself; build one explicitly to
    evaluate many hours of the same series (a backfill, bench/drift_eval.py). Buckets
    after an evaluation's `now` are never read, so the whole history can be passed.
    """

    __slots__ = ("_buckets", "_starts", "_prefix")

    def __init__(self, series: Sequence[Bucket]) -> None:
        buckets = list(series)
        starts = list(map(_start, buckets))
        if not all(map(le, starts, starts[1:])):
            buckets.sort(key=_start)
            starts = list(map(_start, buckets))
        self._buckets = buckets
        self._starts = starts
        # An hour without calls says nothing about rates: it adds nothing, not even an hour.
        rows = [
            (n, b.errors, b.retries - b.wasted_retries, b.wasted_retries, b.escalations,
             min(n, max(0, b.retries - b.failed_retries)), 1)
            if (n := b.calls) > 0
            else (0, 0, 0, 0, 0, 0, 0)
            for b in buckets
        ]  # fmt: skip
        columns = list(zip(*rows)) if rows else [()] * 7
        ns = [n or 1 for n in columns[0]]
        squares = [[k * k / n for k, n in zip(col, ns)] for col in (columns[1], columns[2], columns[3], columns[5])]
        self._prefix = [list(accumulate(col, initial=0)) for col in (*columns, *squares)]

    def __len__(self) -> int:
        return len(self._buckets)

    def __getitem__(self, index):  # type: ignore[override]
        return self._buckets[index]

    def totals(self, start: datetime, end: datetime) -> _Agg:
        """Sums over the buckets in [start, end)."""
        lo = bisect_left(self._starts, start)
        hi = bisect_left(self._starts, end, lo)
        if lo == hi:
            return _EMPTY
        return _Agg(*(p[hi] - p[lo] for p in self._prefix))


_EMPTY = _Agg()


def _floor_hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


FINE_STEP = timedelta(minutes=5)  # the finest rollup: sub-hour evaluations end on its boundaries


def _floor_fine(t: datetime) -> datetime:
    return t.replace(minute=t.minute - t.minute % 5, second=0, microsecond=0)


def _ratio(r_rate: float, b_rate: float) -> float:
    if b_rate > 0:
        return r_rate / b_rate
    return math.inf if r_rate > 0 else 1.0


def _json_ratio(x: float) -> float | None:
    return None if math.isinf(x) else round(x, 4)


def _r(x: float, digits: int = 6) -> float:
    return round(x, digits)


@dataclass(frozen=True, slots=True)
class _Base:
    start: datetime
    end: datetime
    agg: _Agg
    phi_errors: float
    phi_transient: float
    phi_wasted: float
    phi_rescued: float
    reason: str  # why it is too thin to compare with, or ""
    excluded_days: int = 0  # outlying days left out of it (_robust_totals)


class _View:
    """One `detect` call's series, with its baselines cached (four kinds share one).

    Recent windows are summed from the fine (sub-hour) series when there is one, so they
    can end at any bucket boundary; baselines always come from the hourly series and end
    on an hour.
    """

    __slots__ = ("series", "fine", "th", "_bases", "_aggs")

    def __init__(self, series: HourlySeries, th: Thresholds, fine: HourlySeries | None = None) -> None:
        self.series = series
        self.fine = fine
        self.th = th
        self._bases: dict[datetime, _Base] = {}
        self._aggs: dict[tuple[datetime, int], _Agg] = {}

    def window(self, end: datetime, hours: int) -> _Agg:
        """Totals of the `hours` hours before `end`."""
        key = (end, hours)
        a = self._aggs.get(key)
        if a is None:
            a = self._aggs[key] = (self.fine or self.series).totals(end - hours * HOUR, end)
        return a

    def baseline(self, end: datetime) -> _Base:
        """The baseline ending at `end` floored to the hour (it is made of hourly buckets)."""
        end = _floor_hour(end)
        base = self._bases.get(end)
        if base is None:
            base = self._bases[end] = _baseline(self.series, end, self.th)
        return base


def _baseline(series: HourlySeries, end: datetime, th: Thresholds) -> _Base:
    start = end - th.baseline_hours * HOUR
    a = series.totals(start, end)
    excluded = 0
    if th.baseline_outlier_z > 0:
        a, excluded = _robust_totals(series, start, end, a, th)

    def cap(phi: float) -> float:
        return min(max(phi, 1.0), th.max_dispersion)

    reason = ""
    if a.calls < th.min_baseline_calls:
        reason = f"baseline has {a.calls} calls (< min_baseline_calls {th.min_baseline_calls})"
    elif a.hours < th.min_baseline_hours:
        reason = f"baseline has {a.hours} hours with calls (< min_baseline_hours {th.min_baseline_hours})"
    return _Base(
        start=start,
        end=end,
        agg=a,
        phi_errors=cap(binomial_dispersion(a.errors, a.calls, a.q_errors, a.hours)),
        phi_transient=cap(poisson_dispersion(a.transient, a.calls, a.q_transient, a.hours)),
        phi_wasted=cap(poisson_dispersion(a.wasted, a.calls, a.q_wasted, a.hours)),
        phi_rescued=cap(binomial_dispersion(a.rescued, a.calls, a.q_rescued, a.hours)),
        reason=reason,
        excluded_days=excluded,
    )


# (count field, exposure field, squares field or None) of each metric a day is judged on.
_DAY_METRICS = (
    ("errors", "calls", "q_errors"),
    ("transient", "calls", "q_transient"),
    ("wasted", "calls", "q_wasted"),
    ("rescued", "calls", "q_rescued"),
    ("escalations", "errors", None),
)


def _robust_totals(series: HourlySeries, start: datetime, end: datetime, pooled: _Agg, th: Thresholds):
    """The baseline's totals without its outlying days, and how many days were left out.

    The window is cut into 24 h slices from its end (the oldest takes the odd hours). A slice
    is an outlier when one of its rates (errors, retries, wasted retries, rescued calls per
    call; escalations per error) is further than `baseline_outlier_z` from the median slice's
    rate, by the same likelihood-ratio test, on that metric's median within-slice dispersion.
    So a condition that began a day ago is left out of its own baseline instead of raising
    both its rate and its dispersion. At most half the slices go: with more outlying than
    not, there is no norm to keep, and the whole window counts.
    """
    cuts = [end - d * 24 * HOUR for d in range(th.baseline_hours // 24 + 1)]
    cuts[-1] = start
    days = [series.totals(lo, hi) for hi, lo in zip(cuts, cuts[1:])]
    days = [day for day in days if day.calls > 0]
    if len(days) < 3:
        return pooled, 0
    out: set[int] = set()
    for count, exposure, squares in _DAY_METRICS:
        rated = [(i, getattr(d, count), getattr(d, exposure)) for i, d in enumerate(days) if getattr(d, exposure) > 0]
        if len(rated) < 3:
            continue
        median = sorted(k / n for _, k, n in rated)[len(rated) // 2]
        if median <= 0:
            continue
        if squares is None:
            phi = 1.0
        else:
            phis = sorted(
                poisson_dispersion(getattr(d, count), d.calls, getattr(d, squares), d.hours) for d in days if d.hours > 1
            )
            phi = min(max(phis[len(phis) // 2] if phis else 1.0, 1.0), th.max_dispersion)
        for i, k, n in rated:
            if abs(poisson_excess_z(k, n, median, phi)) >= th.baseline_outlier_z:
                out.add(i)
    if not out or len(out) > len(days) // 2:
        return pooled, 0
    kept = [d for i, d in enumerate(days) if i not in out]
    return _Agg(*(sum(getattr(d, f.name) for d in kept) for f in fields(_Agg))), len(out)


# ---------------------------------------------------------------------------------------
# The detectors. Each `_eval_*` judges one (recent window, baseline) pair and returns
# (opening condition holds, score, a function building its statistics): the scan only
# builds the statistics of the window it reports.
#
# Minimum events count *effective* events, count / dispersion: clustered retries carry
# less evidence than their count (ten retries of one call are one event), and the
# quasi-likelihood z is only well calibrated once there are enough independent events.

Evaluation = tuple[bool, float, Callable[[], dict]]


def _eval_retry(w: _Agg, base: _Base, th: Thresholds, extra_z: float = 0.0) -> Evaluation:
    b = base.agg
    phi_t, phi_e = base.phi_transient, base.phi_errors
    t_rate_r, t_rate_b = w.transient / w.calls, b.transient / b.calls
    t_ratio = _ratio(t_rate_r, t_rate_b)
    t_z = poisson_rise_z(w.transient, w.calls, b.transient, b.calls, phi_t)
    e_rate_r, e_rate_b = w.errors / w.calls, b.errors / b.calls
    e_ratio = _ratio(e_rate_r, e_rate_b)
    e_z = binomial_rise_z(w.errors, w.calls, b.errors, b.calls, phi_e)
    flat = e_z < th.flat_error_max_z or e_ratio <= th.flat_error_max_ratio
    # Significance from the rescued calls (binomial: one per call, so no clusters), or
    # from the retry count itself at a higher bar (a rise in retries per rescued call);
    # materiality from the retry rate, the number the page shows.
    phi_r = base.phi_rescued
    r_z = binomial_rise_z(w.rescued, w.calls, b.rescued, b.calls, phi_r)
    rescued_up = r_z >= th.z_retry_rise + extra_z and w.rescued / phi_r >= th.min_recent_events
    count_up = t_z >= th.z_retry_count + extra_z and w.transient / phi_t >= th.min_recent_events
    rising = (rescued_up or count_up) and t_ratio >= th.min_rise

    def stats() -> dict:
        return {
            "recent_calls": w.calls,
            "baseline_calls": b.calls,
            "recent_retries": w.transient + w.wasted,
            "baseline_retries": b.transient + b.wasted,
            "recent_tested_retries": w.transient,
            "baseline_tested_retries": b.transient,
            "recent_retry_rate": _r(t_rate_r),
            "baseline_retry_rate": _r(t_rate_b),
            "retry_ratio": _json_ratio(t_ratio),
            "retry_z": _r(t_z, 3),
            "retry_p": z_to_p(t_z),
            "retry_dispersion": _r(phi_t, 3),
            "recent_rescued": w.rescued,
            "baseline_rescued": b.rescued,
            "rescued_ratio": _json_ratio(_ratio(w.rescued / w.calls, b.rescued / b.calls)),
            "rescued_z": _r(r_z, 3),
            "rescued_p": z_to_p(r_z),
            "rescued_dispersion": _r(phi_r, 3),
            "recent_errors": w.errors,
            "baseline_errors": b.errors,
            "recent_error_rate": _r(e_rate_r),
            "baseline_error_rate": _r(e_rate_b),
            "error_ratio": _json_ratio(e_ratio),
            "error_z": _r(e_z, 3),
            "error_dispersion": _r(phi_e, 3),
            "z_required": _r(th.z_retry_rise + extra_z, 3),
            "z_required_count": _r(th.z_retry_count + extra_z, 3),
            "retry_rising": rising,
            "error_flat": flat,
        }

    # Windows are ranked by evidence over the bar: the count's z on the rescued calls' scale.
    return rising and flat, max(r_z, t_z - (th.z_retry_count - th.z_retry_rise)), stats


def _eval_error(w: _Agg, base: _Base, th: Thresholds, extra_z: float = 0.0) -> Evaluation:
    b = base.agg
    phi = base.phi_errors
    rate_r, rate_b = w.errors / w.calls, b.errors / b.calls
    ratio = _ratio(rate_r, rate_b)
    z = binomial_rise_z(w.errors, w.calls, b.errors, b.calls, phi)
    fires = z >= th.z_error_spike + extra_z and ratio >= th.min_rise and w.errors / phi >= th.min_recent_events

    def stats() -> dict:
        return {
            "recent_calls": w.calls,
            "baseline_calls": b.calls,
            "recent_errors": w.errors,
            "baseline_errors": b.errors,
            "recent_error_rate": _r(rate_r),
            "baseline_error_rate": _r(rate_b),
            "error_ratio": _json_ratio(ratio),
            "error_z": _r(z, 3),
            "error_p": z_to_p(z),
            "error_dispersion": _r(phi, 3),
            "z_required": _r(th.z_error_spike + extra_z, 3),
        }

    return fires, z, stats


def _eval_wasted(w: _Agg, base: _Base, th: Thresholds, extra_z: float = 0.0) -> Evaluation:
    b = base.agg
    phi = base.phi_wasted
    rate_r, rate_b = w.wasted / w.calls, b.wasted / b.calls
    ratio = _ratio(rate_r, rate_b)
    z = poisson_rise_z(w.wasted, w.calls, b.wasted, b.calls, phi)
    floor_z = poisson_excess_z(w.wasted, w.calls, th.wasted_floor, phi)
    enough = w.wasted / phi >= th.min_recent_events
    relative = enough and z >= th.z_wasted + extra_z and ratio >= th.min_rise and rate_r >= th.wasted_min_rate
    above_floor = enough and floor_z >= th.z_wasted + extra_z
    absolute = _wasted_absolute(w, th)

    def stats() -> dict:
        return {
            "recent_calls": w.calls,
            "baseline_calls": b.calls,
            "recent_wasted_retries": w.wasted,
            "baseline_wasted_retries": b.wasted,
            "recent_wasted_rate": _r(rate_r),
            "baseline_wasted_rate": _r(rate_b),
            "wasted_ratio": _json_ratio(ratio),
            "wasted_z": _r(z, 3),
            "wasted_p": z_to_p(z),
            "floor_z": _r(floor_z, 3),
            "wasted_dispersion": _r(phi, 3),
            "z_required": _r(th.z_wasted + extra_z, 3),
            "recent_retries": w.transient + w.wasted,
            "wasted_share_of_retries": _r(w.wasted / (w.transient + w.wasted)) if w.wasted else 0.0,
            "above_baseline": relative,
            "above_floor": above_floor,
            "above_absolute_floor": absolute,
        }

    return relative or above_floor or absolute, max(z, floor_z, th.z_wasted + extra_z if absolute else -Z_CAP), stats


def _wasted_absolute(w: _Agg, th: Thresholds, relax: float = 1.0) -> bool:
    """Waste by definition: at least wasted_floor_count wasted retries in the window, making at
    least wasted_floor_share of its retries and wasted_min_rate per call, whatever the baseline.
    `relax` scales the bars (an open alert holds until it is under half of them)."""
    return (
        th.wasted_floor_count > 0
        and w.wasted >= relax * th.wasted_floor_count
        and w.wasted >= relax * th.wasted_floor_share * (w.transient + w.wasted)
        and w.wasted >= relax * th.wasted_min_rate * w.calls
    )


def _eval_silence(w: _Agg, base: _Base, th: Thresholds, extra_z: float = 0.0) -> Evaluation:
    b = base.agg
    share = b.escalations / b.errors if b.errors else 0.0
    expected = w.errors * share
    candidate = (
        expected >= th.silence_min_expected
        and w.escalations <= th.silence_max_fraction * expected
        and b.escalations >= th.min_recent_events
    )
    # The exact p (a loop of lgammas) decides; otherwise the signed-root likelihood-ratio
    # z of escalations per error, falling, is shown: close to it and far cheaper.
    if candidate:
        p = silence_p(w.escalations, w.errors, b.escalations, b.errors)
        z = p_to_z(p)
        exact = True
    else:
        z = -poisson_rise_z(w.escalations, w.errors, b.escalations, b.errors)
        p = z_to_p(z)
        exact = False

    def stats() -> dict:
        return {
            "recent_calls": w.calls,
            "recent_errors": w.errors,
            "recent_escalations": w.escalations,
            "baseline_errors": b.errors,
            "baseline_escalations": b.escalations,
            "baseline_escalation_share": _r(share),
            "expected_escalations": _r(expected, 3),
            "silence_p": p,
            "silence_p_exact": exact,
            "silence_z": _r(z, 3),
            "z_required": _r(th.z_silence + extra_z, 3),
        }

    return candidate and z >= th.z_silence + extra_z, z, stats


_EVAL: dict[str, Callable[[_Agg, _Base, Thresholds], Evaluation]] = {
    RETRY_RISE_FLAT_ERROR: _eval_retry,
    ERROR_RATE_SPIKE: _eval_error,
    WASTED_RETRIES: _eval_wasted,
    ESCALATION_SILENCE: _eval_silence,
}


_Z_FIELD = {
    RETRY_RISE_FLAT_ERROR: attrgetter("z_retry_rise"),
    ERROR_RATE_SPIKE: attrgetter("z_error_spike"),
    WASTED_RETRIES: attrgetter("z_wasted"),
    ESCALATION_SILENCE: attrgetter("z_silence"),
}


@functools.lru_cache(maxsize=256)
def _thresholds_used_by_kind(th: Thresholds) -> dict[str, dict]:
    return {kind: _thresholds_used(kind, th) for kind in KINDS}


def _thresholds_used(kind: str, th: Thresholds) -> dict:
    used = {
        "z_open": _Z_FIELD[kind](th),
        "confirm_hours": th.confirm_hours,
        "min_recent_calls": th.min_recent_calls,
        "min_recent_events": th.min_recent_events,
    }
    if kind == ESCALATION_SILENCE:
        used |= {
            "silence_min_expected": th.silence_min_expected,
            "silence_max_fraction": th.silence_max_fraction,
            "silence_resolve_fraction": th.silence_resolve_fraction,
        }
    else:
        used |= {"min_rise": th.min_rise, "resolve_ratio": th.resolve_ratio}
    if kind == RETRY_RISE_FLAT_ERROR:
        used |= {
            "z_retry_count": th.z_retry_count,
            "flat_error_max_ratio": th.flat_error_max_ratio,
            "flat_error_max_z": th.flat_error_max_z,
        }
    if kind == WASTED_RETRIES:
        used |= {
            "wasted_min_rate": th.wasted_min_rate, "wasted_floor": th.wasted_floor,
            "wasted_floor_count": th.wasted_floor_count, "wasted_floor_share": th.wasted_floor_share,
        }  # fmt: skip
    return used


def _windows(kind: str, th: Thresholds) -> tuple[int, ...]:
    return (th.silence_hours,) if kind == ESCALATION_SILENCE else th.recent_hours


@dataclass(slots=True)
class _Outcome:
    firing: bool
    hours: int | None  # the window reported
    base: _Base
    stats: dict | None  # None: not evaluated
    reason: str = ""


def _rises(k_r: int, n_r: int, k_b: int, n_b: int, factor: float) -> bool:
    """k_r/n_r >= factor * k_b/n_b, without dividing (a baseline of zero events counts)."""
    return k_r > 0 and k_r * n_b >= factor * k_b * n_r


# Cheap necessary conditions, so the scan computes test statistics only where a window
# could fire (most windows of most tools are nowhere near).
_SCREEN: dict[str, Callable[[_Agg, _Agg, Thresholds], bool]] = {
    RETRY_RISE_FLAT_ERROR: lambda w, b, th: _rises(w.transient, w.calls, b.transient, b.calls, th.min_rise),
    ERROR_RATE_SPIKE: lambda w, b, th: _rises(w.errors, w.calls, b.errors, b.calls, th.min_rise),
    WASTED_RETRIES: lambda w, b, th: (
        w.wasted >= th.wasted_min_rate * w.calls and _rises(w.wasted, w.calls, b.wasted, b.calls, th.min_rise)
    )
    or w.wasted > th.wasted_floor * w.calls
    or _wasted_absolute(w, th),
    ESCALATION_SILENCE: lambda w, b, th: b.errors > 0 and w.escalations * b.errors < w.errors * b.escalations,
}


def _open_check(kind: str, view: _View, end: datetime, th: Thresholds, *, with_stats: bool = True) -> _Outcome:
    """The opening condition at one evaluation `end`, scanning the recent windows.

    Reports the firing window with the strongest evidence; when none fires, the longest
    window with enough calls.
    """
    base = view.baseline(end - th.guard_hours * HOUR)
    if base.reason:
        return _Outcome(False, None, base, None, base.reason)
    evaluate, screen = _EVAL[kind], _SCREEN[kind]
    best = None  # (score, hours, stats builder) of the strongest firing window
    longest = None
    reason = ""
    windows = _windows(kind, th)
    for hours in windows:
        w = view.window(end, hours)
        if w.calls < th.min_recent_calls:
            reason = f"last {hours} h have {w.calls} calls (< min_recent_calls {th.min_recent_calls})"
            continue
        longest = (hours, w)
        if screen(w, base.agg, th):
            fires, score, stats = evaluate(w, base, th, th.short_window_extra_z if hours < windows[-1] else 0.0)
            if fires and (best is None or score > best[0]):
                best = (score, hours, stats)
    if best is not None:
        return _Outcome(True, best[1], base, best[2]() if with_stats else {})
    if longest is None:
        return _Outcome(False, None, base, None, reason)
    hours, w = longest
    return _Outcome(False, hours, base, evaluate(w, base, th)[2]() if with_stats else {})


def _hold_check(
    kind: str, view: _View, end: datetime, base_end: datetime, opened: datetime | None, th: Thresholds
) -> _Outcome:
    """Whether an open alert still holds, i.e. is not clearly back to its baseline.

    Recovery is judged on a window of hours after the opening only: a 6 h window right
    after a step opened on a 2 h window would dilute the step and resolve it at once.
    """
    base = view.baseline(base_end)
    hours = th.silence_hours if kind == ESCALATION_SILENCE else th.resolve_hours
    if base.reason:
        return _Outcome(True, hours, base, None, f"cannot judge recovery: {base.reason}")
    if opened is not None and end - hours * HOUR < opened:
        return _Outcome(True, hours, base, None, f"open for less than {hours} h: recovery is judged on later hours")
    w = view.window(end, hours)
    if w.calls < th.min_recent_calls:
        reason = f"last {hours} h have {w.calls} calls (< min_recent_calls {th.min_recent_calls})"
        return _Outcome(True, hours, base, None, f"cannot judge recovery: {reason}")
    stats = _EVAL[kind](w, base, th)[2]()
    if kind == RETRY_RISE_FLAT_ERROR:
        ratio = stats["retry_ratio"]
        holds = ratio is None or ratio > th.resolve_ratio
    elif kind == ERROR_RATE_SPIKE:
        ratio = stats["error_ratio"]
        holds = ratio is None or ratio > th.resolve_ratio
    elif kind == WASTED_RETRIES:
        # Back below the floor too: a chronic waster opened by the floor stays open.
        ratio = stats["wasted_ratio"]
        holds = not (
            ratio is not None
            and ratio <= th.resolve_ratio
            and stats["recent_wasted_rate"] <= th.wasted_floor
            # Below half the absolute floor too, or a chronic waster would flap around it.
            and not _wasted_absolute(w, th, relax=0.5)
        )
    else:
        expected = stats["expected_escalations"]
        holds = not (expected > 0 and w.escalations >= max(1.0, th.silence_resolve_fraction * expected))
    return _Outcome(holds, hours, base, stats)


def _pct(rate: float) -> str:
    """A rate as the pages show every rate: a percentage, three significant digits."""
    return f"{rate * 100:.3g} %"


def _summary(kind: str, o: _Outcome, is_open: bool) -> str:
    s = o.stats
    if s is None:
        return f"{kind}: still open, {o.reason}" if is_open else f"{kind}: not evaluated, {o.reason}"
    if kind == RETRY_RISE_FLAT_ERROR:
        text = (
            f"retry rate {_pct(s['recent_retry_rate'])} vs baseline {_pct(s['baseline_retry_rate'])} "
            f"(z={s['rescued_z']:.1f} on rescued calls, {s['retry_z']:.1f} on retries) "
            f"while error rate {_pct(s['recent_error_rate'])} vs {_pct(s['baseline_error_rate'])}"
        )
    elif kind == ERROR_RATE_SPIKE:
        text = (
            f"error rate {_pct(s['recent_error_rate'])} vs baseline {_pct(s['baseline_error_rate'])} "
            f"(z={s['error_z']:.1f})"
        )
    elif kind == WASTED_RETRIES:
        text = (
            f"wasted retries per 100 calls {s['recent_wasted_rate'] * 100:.3g} vs baseline {s['baseline_wasted_rate'] * 100:.3g} "
            f"(z={s['wasted_z']:.1f}; vs floor {s['floor_z']:.1f})"
        )
    else:
        text = (
            f"{s['recent_escalations']} escalations where the baseline share predicts "
            f"{s['expected_escalations']:.1f} from {s['recent_errors']} errors (z={s['silence_z']:.1f})"
        )
    state = "firing" if o.firing else ("resolved" if is_open else "not firing")
    return f"{text}, last {o.hours} h ({state})"


def detect(
    series: Sequence[Bucket],
    now: datetime,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    *,
    open_kinds: frozenset[str] = frozenset(),
    opened_at: Mapping[str, datetime] | None = None,
    fine_series: Sequence[Bucket] | None = None,
) -> list[Finding]:
    """One Finding per kind in KINDS for one tool's hourly series, evaluated at `now`.

    A kind not in `open_kinds` fires when its condition holds at `now` and at the
    `confirm_hours - 1` hourly evaluations before it. A kind in `open_kinds` fires while
    it is not clearly back (see the module docstring). `statistics["evaluated"]` is False
    when the volume was too low to judge, with the reason in `statistics["reason"]`.

    Without `fine_series` the windows end at `now` floored to the hour. With it (sub-hour
    buckets, e.g. the 5-minute rollups, covering at least the last `guard_hours` +
    `confirm_hours` hours before `now` and tiling them), the recent windows end at `now`
    floored to 5 minutes and are summed from it; the baselines still come from `series`
    and end on the hour.
    """
    fine = None
    if fine_series is not None:
        fine = fine_series if isinstance(fine_series, HourlySeries) else HourlySeries(fine_series)
    view = _View(series if isinstance(series, HourlySeries) else HourlySeries(series), thresholds, fine)
    return _detect(view, now, open_kinds, opened_at)


def _detect(
    view: _View, now: datetime, open_kinds: frozenset[str], opened_at: Mapping[str, datetime] | None, full: bool = True
) -> list[Finding]:
    """`detect` on a prepared view. With `full` False (replay), a kind that does not fire
    and is not open gets no statistics beyond "evaluated" and no summary: the scan then
    skips building them, which is most of an evaluation's cost."""
    th = view.th
    floor = _floor_fine if view.fine is not None else _floor_hour
    end = floor(now)
    used = _thresholds_used_by_kind(th)
    outcomes: dict[str, _Outcome] = {}
    for kind in KINDS:
        if kind in open_kinds:
            anchor = (opened_at or {}).get(kind)
            if anchor is not None:
                anchor = floor(anchor)
            base_end = (anchor if anchor is not None else end) - th.guard_hours * HOUR
            outcome = _hold_check(kind, view, end, base_end, anchor, th)
        else:
            outcome = _open_check(kind, view, end, th, with_stats=full)
            if outcome.firing and not full:
                outcome = _open_check(kind, view, end, th)
            for back in range(1, th.confirm_hours if outcome.firing else 0):
                if not _open_check(kind, view, end - back * HOUR, th, with_stats=False).firing:
                    outcome.firing = False
                    outcome.reason = f"condition not yet met in {th.confirm_hours} consecutive hourly evaluations"
                    break
        outcomes[kind] = outcome
    retry = outcomes[RETRY_RISE_FLAT_ERROR]
    if retry.firing and RETRY_RISE_FLAT_ERROR not in open_kinds and outcomes[ERROR_RATE_SPIKE].firing:
        # Errors rising is an error_rate_spike, not a quiet failure: the kinds exclude each
        # other, also hours into a spike, once a baseline that took in its first hours no
        # longer shows the errors as significantly up.
        retry.firing = False
        retry.reason = "errors are not flat: error_rate_spike fires"
    findings = []
    for kind in KINDS:
        outcome, is_open = outcomes[kind], kind in open_kinds
        statistics: dict[str, Any] = {
            "evaluated": outcome.stats is not None,
            "mode": "hold" if is_open else "open",
            "window_hours": outcome.hours,
            "baseline_hours": th.baseline_hours,
            "baseline_excluded_days": outcome.base.excluded_days,
            **(outcome.stats or {}),
        }
        if outcome.reason:
            statistics["reason"] = outcome.reason
        statistics["thresholds"] = dict(used[kind])  # a copy: the cached one is shared
        span = outcome.hours or max(_windows(kind, th))
        findings.append(
            Finding(
                kind=kind,
                firing=outcome.firing,
                recent=(end - span * HOUR, end),
                baseline=(outcome.base.start, outcome.base.end),
                statistics=statistics,
                summary=_summary(kind, outcome, is_open) if full or outcome.firing or is_open else "",
            )
        )
    return findings


@dataclass(frozen=True, slots=True)
class Episode:
    """One alert of a replay: opened by `finding`, resolved by itself or still open (None)."""

    kind: str
    opened: datetime
    resolved: datetime | None
    finding: Finding


@dataclass(frozen=True, slots=True)
class Replay:
    episodes: list[Episode]
    evaluations: int
    evaluated_hours: int  # evaluations where at least one kind had the volume to be judged (per step)


def replay(
    series: Sequence[Bucket],
    start: datetime,
    end: datetime,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    *,
    fine_series: Sequence[Bucket] | None = None,
    step: timedelta = HOUR,
    fine_from: datetime | None = None,
) -> Replay:
    """`detect` at every `step` in (start, end], as the scheduled job runs it.

    The alerts open when a kind fires and resolve when an open kind stops firing; the
    open kinds and their opening times are carried from one evaluation to the next, so the
    hysteresis is the one production sees. For backfills, charts and the benchmark.
    A `step` shorter than an hour (it must divide the hour into whole 5-minute buckets)
    needs `fine_series`, the sub-hour buckets the recent windows are summed from. With
    `fine_from` (an hour), the evaluations before it are hourly and read no `fine_series`:
    a range reaching back past the sub-hour buckets' horizon (dashboard/alerting/evaluation.py).
    """
    if step <= timedelta(0) or HOUR % step or step % FINE_STEP:
        raise ValueError(f"step: must divide an hour into whole multiples of 5 minutes, got {step}")
    if step < HOUR and fine_series is None:
        raise ValueError("step: evaluating more often than hourly needs fine_series (sub-hour buckets)")
    view = series if isinstance(series, HourlySeries) else HourlySeries(series)
    fine = None
    if fine_series is not None:
        fine = fine_series if isinstance(fine_series, HourlySeries) else HourlySeries(fine_series)
    opened: dict[str, datetime] = {}
    current: dict[str, tuple[datetime, Finding]] = {}
    episodes: list[Episode] = []
    evaluations = evaluated = 0

    def fine_at(moment: datetime) -> HourlySeries | None:
        return fine if fine_from is None or moment >= fine_from else None

    now = _floor_hour(start)
    while now <= start:
        now += step if fine_at(now) is not None else HOUR
    prepared = None
    while now <= end:
        fine_now = fine_at(now)
        if prepared is None or prepared.fine is not fine_now or len(prepared._aggs) > 4096:
            # Shared by nearby evaluations: four quarter hours judge against one hourly baseline.
            prepared = _View(view, thresholds, fine_now)
        findings = _detect(prepared, now, frozenset(opened), opened, full=False)
        evaluations += 1
        evaluated += any(f.statistics["evaluated"] for f in findings)
        for f in findings:
            if f.firing and f.kind not in opened:
                opened[f.kind] = now
                current[f.kind] = (now, f)
            elif not f.firing and f.kind in opened:
                del opened[f.kind]
                at, first = current.pop(f.kind)
                episodes.append(Episode(f.kind, at, now, first))
        now += step if fine_now is not None else HOUR
    episodes.extend(Episode(kind, at, None, first) for kind, (at, first) in current.items())
    episodes.sort(key=lambda e: (e.opened, e.kind))
    return Replay(episodes, evaluations, evaluated)
