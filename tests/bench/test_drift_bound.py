"""bench/drift_bound.py: the statistics its bound rests on, checked against closed forms."""

import math

import pytest

from bench import drift_bound as bound


def test_upcrossings_of_independent_evaluations_are_a_tail_times_its_complement():
    # rho = 0: P(previous below, this one above) = (1 - p) p.
    for z in (2.0, 3.0, 4.0):
        p = bound.sf(z)
        assert bound.upcrossings_per_eval(z, 0.0) == pytest.approx((1 - p) * p, rel=1e-6)


def test_correlated_evaluations_open_less_often_than_they_exceed():
    z = 4.0
    assert bound.upcrossings_per_eval(z, 0.875) < bound.sf(z) * (1 - bound.sf(z))
    assert bound.upcrossings_per_eval(z, 0.99) < bound.upcrossings_per_eval(z, 0.875)


def test_solve_inverts_the_normal_tail():
    assert bound.solve(bound.sf, bound.sf(5.0)) == pytest.approx(5.0, abs=1e-6)
    assert bound.p_to_z(0.025) == pytest.approx(1.95996, abs=1e-4)


def test_binomial_z_is_signed_and_zero_at_the_expectation():
    assert bound.binomial_z(10, 100, 0.1) == pytest.approx(0.0, abs=1e-12)
    assert bound.binomial_z(20, 100, 0.1) > 0 > bound.binomial_z(5, 100, 0.1)
    # Large n: the likelihood-ratio z approaches the Wald z.
    n, p0, k = 1_000_000, 0.1, 100_300
    wald = (k - n * p0) / math.sqrt(n * p0 * (1 - p0))
    assert bound.binomial_z(k, n, p0) == pytest.approx(wald, rel=0.01)


def test_poisson_critical_count_is_the_least_with_a_tail_under_alpha():
    lam, alpha = 20.0, 1e-4
    c = bound.poisson_critical(lam, alpha)
    assert bound.poisson_sf(c, lam) <= alpha < bound.poisson_sf(c - 1, lam)


def test_allocated_power_keeps_the_mean_level_and_beats_one_bar():
    rocs = [bound.poisson_roc(lam, 2 * lam) for lam in (15.0, 40.0, 200.0)]
    alpha = 3e-5
    power, mean_alpha, _ = bound.allocated_power(rocs, alpha)
    assert mean_alpha <= alpha * 1.0001
    one_bar = sum(max((b for a, b in roc if a <= alpha), default=0.0) for roc in rocs) / len(rocs)
    assert power >= one_bar
