import random

from dashboard.rollups.histograms import histogram, merge, quantile


def test_quantiles_are_exact_to_the_bin_width():
    rng = random.Random(3)
    latencies = [rng.lognormvariate(4, 1) for _ in range(20_000)]
    hist = histogram(latencies)
    ordered = sorted(latencies)

    for q in (0.5, 0.95, 0.99):
        true = ordered[int(q * len(ordered)) - 1]
        assert true <= quantile(hist, q) <= true * 1.1 * 1.001


def test_merging_histograms_equals_the_histogram_of_all_values():
    a, b = [1.0, 2.5, 30.0], [2.4, 900.0]

    assert merge([histogram(a), histogram(b)]) == histogram(a + b)


def test_an_empty_histogram_has_no_quantile():
    assert quantile({}, 0.5) is None
    assert histogram([0.0]) == {"0": 1}
