"""An upper bound on any detector's recall within 2 h for S5 (`s5_retry_step`), at the false-alert budget.

    .venv/bin/python bench/drift_bound.py [--runs 300] [--seed 101] [--jobs 2] [--null-seeds 10]

About 10 seconds on 2 cores with the defaults. A benchmark that prints figures, not a test. Pure: stdlib only.

For every run of S5 (the bench's own traffic: `demo.scenarios.s5_retry_step(seed, fine=True)`, the
same draws `bench/drift_eval.py` judges) it computes the evidence an *ideal* test of the step
would have, and the share of runs in which that evidence clears the bar the false-alert budget
allows. No detector that sees the same data can do better, under these generous assumptions:

- it knows the tool's true baseline rate (an infinitely long, clean baseline) and the minute
  of the step: it tests the one window that starts at the step's 15-minute bucket (or the
  next one) and ends at the last quarter hour before the deadline (step + 2 h - the job's
  3 minute lag), or any quarter hour before it ("best of"), with no penalty for the choice;
- the test is the signed root likelihood-ratio z of a binomial count (calls are the
  exposure) against that known rate, on the **rescued calls** (`retries - failed_retries`,
  in the rollups; one per call, no clusters) or, beyond the rollups, on the **retried calls**
  (calls with at least one retry: the sufficient statistic of the scenario's retry model,
  whose cluster sizes do not change with the step; recorded from the generator's draws);
- the whole false-alert budget, 1 per 100 tool-months, goes to this one kind and this one
  window length, and it is counted in *openings* (up-crossings of the bar by the trailing
  2 h statistic evaluated every 15 minutes, whose consecutive values are correlated 7/8),
  not in evaluations. The bar z* solves 288,000 x P(Z_prev < z*, Z >= z*) = 1 for a
  standard bivariate normal pair with correlation 7/8 (100 tool-months x 720 h x 4
  evaluations an hour). The naive bar, every evaluation an independent test
  (alpha = 1/288,000), is printed too; the model is checked against a null simulation on
  S1's traffic at lower bars, where up-crossings are frequent enough to count.

It also prints the expected power of the same oracle test for the exact window
[step, step + 1 h 57] (the expected calls of the daily cycle, Poisson counts), averaged over
the runs: the recall an ideal test would have on average over traffic draws, not on these.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from demo import scenarios as demo  # noqa: E402

EVALS_PER_100_TOOL_MONTHS = 100 * 720 * 4  # one evaluation every 15 minutes
QUARTERS = demo.FINE_PER_HOUR  # fine buckets per hour (15 minutes)
WINDOW_QUARTERS = 2 * QUARTERS  # the 2 h window
LAG_H = demo.EVALUATION_LAG.total_seconds() / 3600.0
STRATA = ((0.0, 25.0), (25.0, 50.0), (50.0, math.inf))


# --- statistics ---------------------------------------------------------------------------------


def phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def sf(x: float) -> float:
    return 0.5 * math.erfc(x / math.sqrt(2.0))


def both_above(z: float, rho: float, steps: int = 4000) -> float:
    """P(X1 >= z, X2 >= z) for a standard bivariate normal with correlation rho (Simpson's rule)."""
    s = math.sqrt(1.0 - rho * rho)
    hi = z + 12.0
    h = (hi - z) / steps
    total = 0.0
    for i in range(steps + 1):
        x = z + i * h
        w = 1 if i in (0, steps) else (4 if i % 2 else 2)
        total += w * phi(x) * sf((z - rho * x) / s)
    return total * h / 3.0


def upcrossings_per_eval(z: float, rho: float) -> float:
    """P(previous evaluation below z, this one at or above): openings per evaluation."""
    return sf(z) - both_above(z, rho)


def solve(f, target: float, lo: float = 2.0, hi: float = 7.0) -> float:
    """z with f(z) = target, f decreasing."""
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def p_to_z(p: float) -> float:
    return solve(sf, p, -10.0, 40.0)


def binomial_z(k: float, n: float, p0: float) -> float:
    """Signed root likelihood-ratio z of k successes in n trials against a known p0."""
    if n <= 0 or p0 <= 0:
        return 0.0
    mu = n * p0
    dev = 2.0 * ((k * math.log(k / mu) if k > 0 else 0.0) + ((n - k) * math.log((n - k) / (n - mu)) if n > k else 0.0))
    z = math.sqrt(max(dev, 0.0))
    return z if k > mu else -z


def poisson_sf(c: int, lam: float) -> float:
    """P(Poisson(lam) >= c)."""
    if c <= 0:
        return 1.0
    term = math.exp(-lam)
    cdf = term
    for k in range(1, c):
        term *= lam / k
        cdf += term
    return max(0.0, 1.0 - cdf)


def poisson_critical(lam0: float, alpha: float) -> int:
    """The least c with P(Poisson(lam0) >= c) <= alpha (tail summed from above for accuracy)."""
    c = int(lam0)
    while True:
        # P(X >= c) from the upper terms, stable in the far tail.
        term = math.exp(-lam0 + c * math.log(lam0) - math.lgamma(c + 1)) if lam0 > 0 else 0.0
        tail, k, t = 0.0, c, term
        while t > 1e-18 * max(tail, 1e-300) and k < c + 2000:
            tail += t
            k += 1
            t *= lam0 / k
        if tail <= alpha:
            return c
        c += 1


def poisson_roc(lam0: float, lam1: float) -> list[tuple[float, float]]:
    """(alpha, power) of the count test 'X >= c' for Poisson(lam0) against Poisson(lam1), c = 0, 1, ...

    Down to alpha 1e-9: the Neyman-Pearson tests of the two rates, one per critical count."""
    top = int(lam1 + 12.0 * math.sqrt(lam1) + 30)
    p0 = [math.exp(-lam0 + c * math.log(lam0) - math.lgamma(c + 1)) for c in range(top + 1)]
    p1 = [math.exp(-lam1 + c * math.log(lam1) - math.lgamma(c + 1)) for c in range(top + 1)]
    out, a, b = [], 0.0, 0.0
    for c in range(top, -1, -1):
        a += p0[c]
        b += p1[c]
        out.append((a, b))
    out.reverse()
    return [(a, b) for a, b in out if a >= 1e-9 and b > 1e-6]


def allocated_power(rocs: list[list[tuple[float, float]]], alpha: float) -> tuple[float, float, list[float]]:
    """Mean power when each run gets its own alpha_i (a bar by tool and hour), mean alpha_i <= alpha.

    Lagrange: each run takes the ROC point maximising power - mu alpha; mu by bisection.
    Returns (mean power, mean alpha, each run's alpha)."""

    def pick(mu: float) -> tuple[float, float, list[float]]:
        pw = al = 0.0
        alphas = []
        for roc in rocs:
            a, b = max(roc, key=lambda ab: ab[1] - mu * ab[0])
            pw += b
            al += a
            alphas.append(a)
        return pw / len(rocs), al / len(rocs), alphas

    lo, hi = 0.0, 1e12
    for _ in range(200):
        mid = math.sqrt(lo * hi) if lo > 0 else hi / 1e6
        if pick(mid)[1] > alpha:
            lo = mid
        else:
            hi = mid
        if hi / max(lo, 1e-300) < 1.0001:
            break
    return pick(hi)


# --- the model's known rates --------------------------------------------------------------------


def known_rates(model: demo.ToolModel) -> tuple[float, float]:
    """(P(a call is retried), P(a call is rescued by a retry)) at the tool's baseline retry rate."""
    sizes = demo.cluster_sizes(model.retry_again)
    mean = sum(s * p for s, p in enumerate(sizes, start=1))
    retried = model.retry_rate / mean
    return retried, retried * (1.0 - sizes[-1] * model.retry_again)


# --- one S5 run ---------------------------------------------------------------------------------


def _record_retried(build):
    """Run `build()` with demo.clusters wrapped, returning (scenario, the retried-call counts of each call).

    `_series` draws, per bucket and tool, the wasted clusters (via `clustered`) then the
    transient ones, so every second record is a bucket's retried calls. The draws are the
    same: the wrapper only records them.
    """
    records: list[int] = []
    original = demo.clusters

    def recording(*args, **kwargs):
        out = original(*args, **kwargs)
        records.append(out[1])
        return out

    demo.clusters = recording
    try:
        sc = build()
    finally:
        demo.clusters = original
    return sc, records


def s5_evidence(seed: int, z_bars: tuple[float, ...]) -> dict:
    sc, records = _record_retried(lambda: demo.s5_retry_step(seed, fine=True))
    tools = list(sc.series)
    per_tool = sc.hours * QUARTERS
    assert len(records) == 2 * per_tool * len(tools), (len(records), per_tool)
    exp = sc.expected[0]
    tool = exp.tool
    t_index = tools.index(tool)
    retried = records[2 * per_tool * t_index + 1 : 2 * per_tool * (t_index + 1) : 2]
    fine = sc.fine_series[tool]
    model = sc.models[tool]
    p_retried, p_rescued = known_rates(model)
    step_h = (exp.onset - sc.start).total_seconds() / 3600.0
    deadline_h = step_h + 2.0 - LAG_H
    first_q = math.floor(step_h * QUARTERS)  # the bucket holding the step
    last_end = math.floor(deadline_h * QUARTERS + 1e-9)  # the last quarter hour before the deadline

    def window(start: int, end: int) -> tuple[int, int, int]:
        bs = fine[start:end]
        calls = sum(b.calls for b in bs)
        rescued = sum(b.retries - b.failed_retries for b in bs)
        return calls, rescued, sum(retried[start:end])

    fixed = {}
    best = {"rescued": -math.inf, "retried": -math.inf}
    for start in (first_q, first_q + 1):
        for end in range(start + 1, last_end + 1):
            calls, rescued, ret = window(start, end)
            zr, zc = binomial_z(rescued, calls, p_rescued), binomial_z(ret, calls, p_retried)
            best["rescued"] = max(best["rescued"], zr)
            best["retried"] = max(best["retried"], zc)
            if start == first_q and end == last_end:
                fixed = {"rescued": zr, "retried": zc, "calls": calls}
    # Expected power of the oracle test on the exact window [step, deadline): Poisson counts
    # (thinned Poisson calls) with the daily cycle's expected calls.
    expected_calls = 0.0
    t = step_h
    while t < deadline_h - 1e-12:
        nxt = min(math.floor(t) + 1.0, deadline_h)
        expected_calls += demo.expected_calls(model, (sc.start.hour + math.floor(t)) % 24) * (nxt - t)
        t = nxt
    power = {}
    roc = {}
    for name, p0 in (("rescued", p_rescued), ("retried", p_retried)):
        lam0 = expected_calls * p0
        power[name] = {bar: poisson_sf(poisson_critical(lam0, sf(bar)), 2.0 * lam0) for bar in z_bars}
        roc[name] = poisson_roc(lam0, 2.0 * lam0)
    return {
        "seed": seed,
        "events_per_hour": exp.events_per_hour,
        "fixed": fixed,
        "best": best,
        "power": power,
        "roc": roc,
        "rescued_per_2h_baseline": expected_calls * p_rescued,
    }


# --- the null check: the oracle statistic on S1's quiet traffic -----------------------------------


def null_upcrossings(seed: int, levels: tuple[float, ...]) -> tuple[int, list[int]]:
    """(evaluations, up-crossings of each level) of the trailing 2 h oracle z on S1's rescued calls."""
    sc = demo.s1_steady(seed, fine=True)
    evaluations, ups = 0, [0] * len(levels)
    for tool, fine in sc.fine_series.items():
        _, p0 = known_rates(sc.models[tool])
        prev = None
        calls = rescued = 0
        for i, b in enumerate(fine):
            calls += b.calls
            rescued += b.retries - b.failed_retries
            if i >= WINDOW_QUARTERS:
                old = fine[i - WINDOW_QUARTERS]
                calls -= old.calls
                rescued -= old.retries - old.failed_retries
            if i < WINDOW_QUARTERS - 1:
                continue
            z = binomial_z(rescued, calls, p0)
            evaluations += 1
            if prev is not None:
                for j, level in enumerate(levels):
                    if prev < level <= z:
                        ups[j] += 1
            prev = z
    return evaluations, ups


def _s5_task(args):
    return s5_evidence(*args)


def _null_task(args):
    return null_upcrossings(*args)


def _share(rows, pick, bar) -> float:
    return sum(1 for r in rows if pick(r) >= bar) / len(rows) if rows else float("nan")


def _strata(rows, pick, bar) -> str:
    parts = []
    for lo, hi in STRATA:
        inside = [r for r in rows if lo <= r["events_per_hour"] < hi]
        label = f"<{hi:.0f}" if lo == 0 else (f">={lo:.0f}" if math.isinf(hi) else f"{lo:.0f}-{hi:.0f}")
        parts.append(f"{label} {_share(inside, pick, bar):.2f} (n={len(inside)})")
    return ", ".join(parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=101)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--null-seeds", type=int, default=10, help="S1 seeds for the null check (20 tool-months each)")
    parser.add_argument("--budget", type=float, default=1.0, help="false alerts per 100 tool-months")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    rho = 1.0 - 1.0 / WINDOW_QUARTERS  # consecutive 2 h windows share 7/8
    target = args.budget / EVALS_PER_100_TOOL_MONTHS  # openings per evaluation
    z_naive = solve(sf, target)
    z_up = solve(lambda z: upcrossings_per_eval(z, rho), target)
    # Any detector: its expected openings in the 8 evaluations of a deadline's 2 h on quiet
    # traffic are 8 x target, so P(it opens there | no change) <= that: the level of the
    # Neyman-Pearson test of the step, which no detector beats on the same data.
    alpha_np = WINDOW_QUARTERS * target
    z_np = solve(sf, alpha_np)
    bars = (z_up, z_np)
    levels = (2.5, 3.0, 3.5)
    null_seeds = [1 + s for s in range(args.null_seeds)]  # S1's quiet traffic; any seeds do for a null
    s5_args = [(args.seed + r, bars) for r in range(args.runs)]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            nulls = list(pool.map(_null_task, [(s, levels) for s in null_seeds]))
            rows = list(pool.map(_s5_task, s5_args, chunksize=4))
    else:
        nulls = [_null_task((s, levels)) for s in null_seeds]
        rows = [_s5_task(a) for a in s5_args]
    elapsed = time.perf_counter() - started

    out = print
    seeds = f"S5 seeds {args.seed}-{args.seed + args.runs - 1}"
    out(f"drift_bound: {seeds}, budget {args.budget:g} false alert per 100 tool-months at 1 evaluation / 15 min "
        f"({EVALS_PER_100_TOOL_MONTHS} evaluations), {elapsed:.0f} s")  # fmt: skip
    out("")
    out("The bars (one-sided z; the whole budget to this kind):")
    out(f"  naive, every evaluation an independent test: alpha = {target:.2e}, z* = {z_naive:.2f}")
    out(f"  a trailing 2 h window's openings (up-crossings, consecutive windows correlated {rho:.3f}): "
        f"z* = {z_up:.2f} (per-evaluation tail {sf(z_up):.2e})")  # fmt: skip
    out(f"  any detector, Neyman-Pearson: P(an opening in the deadline's {WINDOW_QUARTERS} evaluations | no change) "
        f"<= {alpha_np:.2e}, z* = {z_np:.2f}")  # fmt: skip
    evals = sum(e for e, _ in nulls)
    out(f"  null check of the up-crossing model: oracle z of the trailing 2 h on S1's rescued calls, seeds "
        f"{null_seeds[0]}-{null_seeds[-1]} ({evals / (720 * 4):.0f} tool-months), up-crossings per 100 tool-months:")  # fmt: skip
    for j, level in enumerate(levels):
        seen = sum(u[j] for _, u in nulls)
        model = upcrossings_per_eval(level, rho) * EVALS_PER_100_TOOL_MONTHS
        out(f"    z {level:.1f}: simulated {seen / evals * EVALS_PER_100_TOOL_MONTHS:7.1f}, model {model:7.1f} "
            f"({seen} seen)")  # fmt: skip
    out("")
    out(f"Upper bounds on recall within 2 h, {seeds} (n={len(rows)}), oracle baseline and step:")
    for name, label in (("rescued", "rescued calls (in the rollups)"), ("retried", "retried calls (all the data)")):
        out(f"  {label}:")
        for bar_label, bar in (("trailing-window bar", z_up), ("Neyman-Pearson bar", z_np)):
            fixed = _share(rows, lambda r, n=name: r["fixed"][n], bar)
            best = _share(rows, lambda r, n=name: r["best"][n], bar)
            power = sum(r["power"][name][bar] for r in rows) / len(rows)
            # The Neyman-Pearson bar is one test's: only the one window may use it.
            also = f", best of the deadline's evaluations {best:.3f}" if bar == z_up else ""
            out(f"    {bar_label} z {bar:.2f}: these draws, window step..last quarter {fixed:.3f}{also}; "
                f"expected power on [step, step + 1 h 57] {power:.3f}")  # fmt: skip
            out("      by baseline retries/h at the step (these draws, window step..last quarter): "
                + _strata(rows, lambda r, n=name: r["fixed"][n], bar))  # fmt: skip
        pw, al, alphas = allocated_power([r["roc"][name] for r in rows], alpha_np)
        out(
            f"    alpha allotted by tool and hour (a bar per tool volume, mean alpha {al:.2e}): expected power {pw:.3f}"
        )
        bars_by = []
        for lo, hi in STRATA:
            zs = sorted(p_to_z(a) for r, a in zip(rows, alphas) if lo <= r["events_per_hour"] < hi)
            if zs:
                label = f"<{hi:.0f}" if lo == 0 else (f">={lo:.0f}" if math.isinf(hi) else f"{lo:.0f}-{hi:.0f}")
                bars_by.append(f"{label} z {zs[len(zs) // 2]:.2f}")
        out("      its median bar by baseline retries/h: " + ", ".join(bars_by))
    zs = sorted(r["fixed"]["rescued"] for r in rows)
    out(f"  rescued-call oracle z, window step..last quarter: 5th / 10th / 50th percentile {zs[len(zs) // 20]:.2f} / "
        f"{zs[len(zs) // 10]:.2f} / {zs[len(zs) // 2]:.2f}")  # fmt: skip
    low = sorted(r["rescued_per_2h_baseline"] for r in rows if r["events_per_hour"] < 25)
    if low:
        out(f"  tools under 25 retries/h at the step: {low[0]:.0f}-{low[-1]:.0f} rescued calls expected in "
            f"[step, step + 1 h 57] at the baseline rate (x2 after the step)")  # fmt: skip
    out("")
    out("Assumptions, all in the detector's favour: the true baseline rates (an infinite clean baseline); the")
    out("step's minute known (one window, no scan penalty); the whole budget on this kind; the scenario's model")
    out("is the truth (Poisson calls, binomial retried calls, cluster sizes unchanged by the step); the")
    out("Neyman-Pearson bar grants the deadline's 8 evaluations the whole 8 x 1/288,000 at once.")
    bound = sum(r["power"]["retried"][z_np] for r in rows) / len(rows)
    out(f"bound_np_expected={bound:.3f} bound_np_draws={_share(rows, lambda r: r['fixed']['retried'], z_np):.3f} "
        f"bound_window_draws={_share(rows, lambda r: r['best']['rescued'], z_up):.3f} z_np={z_np:.2f} "
        f"z_window={z_up:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
