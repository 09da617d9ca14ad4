"""Mergeable latency histograms: log-spaced bins, so any range's percentiles come from
summing counts, exact to the bin width (10 %), without reading raw spans. Pure."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

GROWTH = 1.1  # each bin's upper bound is 10 % above the previous one
SMALLEST_MS = 0.01  # bin 0 holds everything up to 10 µs


def bin_of(latency_ms: float) -> int:
    if latency_ms <= SMALLEST_MS:
        return 0
    return math.ceil(math.log(latency_ms / SMALLEST_MS, GROWTH))


def upper_bound_ms(bin_index: int) -> float:
    return SMALLEST_MS * GROWTH**bin_index


def histogram(latencies_ms: Iterable[float]) -> dict[str, int]:
    """Sparse {bin: count}, with string keys as JSON stores them."""
    counts = Counter(bin_of(latency) for latency in latencies_ms)
    return {str(index): count for index, count in sorted(counts.items())}


def merge(histograms: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: Counter = Counter()
    for hist in histograms:
        for index, count in hist.items():
            total[int(index)] += count
    return {str(index): count for index, count in sorted(total.items())}


def quantile(hist: Mapping[str, int], q: float) -> float | None:
    """The q-quantile (0 < q <= 1) in ms: the upper bound of the bin holding it; None when empty."""
    bins = sorted((int(index), count) for index, count in hist.items() if count)
    total = sum(count for _, count in bins)
    if not total:
        return None
    rank = q * total
    seen = 0
    for index, count in bins:
        seen += count
        if seen >= rank:
            return upper_bound_ms(index)
    return upper_bound_ms(bins[-1][0])
