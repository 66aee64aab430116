"""Benchmark of the certified GG accountant (``python benchmarks/accountant.py``).

First the speed targets as ratios to Opacus's PRVAccountant at β = 2 in the same run (medians of
``--runs`` cold runs, every cache cleared before each): repeated get_epsilon during training, a 20-segment
history, a cold call; and a σ solve. ``get_epsilon`` computes the proven ε only (β = 1.5, d = 10^6: the Rényi
bound over the ℓp ball); the cold full report (that ε and the equal-spread PRV ε beside it) is timed too.

Measures, on this machine: get_epsilon for 10^5 steps with d = 10^6 (β = 2 and β = 1.5), a σ solve, and
time / peak memory against Opacus's own PRV accountant at β = 2 in the same run (printed as ratios).
Memory is the peak of Python allocations (tracemalloc; numpy arrays are included), from a separate cold run:
times are taken without tracemalloc (its time is printed as "traced").
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
import warnings

from opacus.accountants import PRVAccountant

from opacus_gg.accountants import GGPRVAccountant, get_noise_multiplier
from opacus_gg.accountants import api, ball_rdp, count_query, discretization, low_orders, spreads
from opacus_gg.formatting import fmt_up


def _clear():
    """Forget every in-process cache of the accountant (recorded queries, PRV grids, spread covers, count pairs, Rényi
    moments, the orders below 2): a cold call."""
    api.clear_query_cache()
    discretization.step_dprv.cache_clear()
    discretization._step_log_mgf.cache_clear()
    spreads.spread_pairs.cache_clear()
    count_query.count_pairs.cache_clear()
    ball_rdp.clear_caches()
    low_orders.clear_cache()


def _measure(fn):
    """(result, seconds, peak MiB, seconds under tracemalloc): time and memory from two cold runs.

    tracemalloc hooks every numpy allocation and slows code with many small arrays (the shape pairs)
    by up to 2x, so the time is taken without it; the traced time is printed too (older numbers in
    docs/accounting.md before the speed-up were traced times).
    """
    _clear()
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    _clear()
    tracemalloc.start()
    t = time.perf_counter()
    fn()
    dt_traced = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, dt, peak / 2**20, dt_traced


def _median_time(fn, runs: int) -> float:
    """Median wall time of ``runs`` cold runs (caches cleared before each)."""
    times = []
    for _ in range(runs):
        _clear()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _training(make, history_of, every: int, total: int) -> None:
    """get_epsilon every ``every`` steps up to ``total`` steps, as a training script printing ε does."""
    acc = make()
    for steps in range(every, total + 1, every):
        acc.history = history_of(steps)
        acc.get_epsilon(DELTA)


def _segments(n: int, steps: int):
    """n segments of ``steps`` steps with a noise schedule σ_i = 0.8 + 0.05 i (all distinct)."""
    return [(0.8 + 0.05 * i, 0.01, steps) for i in range(n)]


DELTA = 1e-5


def targets(runs: int, dim: int) -> None:
    """The speed targets, as ratios to Opacus's PRVAccountant at β = 2 in the same run (medians)."""
    beta, q = 1.5, 0.01
    rows = []
    # 1. repeated get_epsilon during training: every 100 steps up to 10^4
    t_o = _median_time(lambda: _training(PRVAccountant, lambda T: [(1.0, q, T)], 100, 10_000), runs)
    t_g = _median_time(lambda: _training(lambda: GGPRVAccountant(beta=beta, dim=dim),
                                         lambda T: [(1.0, q, T, beta, dim, None)], 100, 10_000), runs)
    rows.append(("get_epsilon every 100 steps to 10^4", t_g, t_o, 1.5))
    # 2. a 20-segment history (noise schedule), 500 steps each
    hist = _segments(20, 500)

    def opacus_hist():
        acc = PRVAccountant()
        acc.history = list(hist)
        acc.get_epsilon(DELTA)

    def gg_hist():
        acc = GGPRVAccountant(beta=beta, dim=dim)
        acc.history = [h + (beta, dim, None) for h in hist]
        acc.get_epsilon(DELTA)

    rows.append(("20-segment history", _median_time(gg_hist, runs), _median_time(opacus_hist, runs), 2.0))
    # 3. a cold call, 10^4 steps

    def opacus_cold():
        acc = PRVAccountant()
        acc.history = [(1.0, q, 10_000)]
        acc.get_epsilon(DELTA)

    def gg_cold():
        acc = GGPRVAccountant(beta=beta, dim=dim)
        acc.history = [(1.0, q, 10_000, beta, dim, None)]
        acc.get_epsilon(DELTA)

    t_cold_o = _median_time(opacus_cold, runs)
    rows.append(("cold call, 10^4 steps", _median_time(gg_cold, runs), t_cold_o, 3.0))

    def gg_report(diagnostics: bool = False):  # the report (the get_epsilon number); with diagnostics also the
        acc = GGPRVAccountant(beta=beta, dim=dim)  # equal-spread PRV beside it (its bracket, direction, spread)
        acc.history = [(1.0, q, 10_000, beta, dim, None)]
        acc.get_epsilon_report(DELTA, diagnostics=diagnostics)

    rows.append(("cold get_epsilon_report, 10^4 steps", _median_time(gg_report, runs), t_cold_o, 3.0))
    rows.append(("cold report with diagnostics, 10^4 steps", _median_time(lambda: gg_report(True), runs), t_cold_o,
                 None))
    print(f"Targets (beta={beta}, d={dim}, q={q}, delta={DELTA}; Opacus PRVAccountant at beta=2; medians of {runs}):")
    for name, tg, to, limit in rows:
        target = f"(target <= {limit}x)" if limit else "(no target: the diagnostics, not the published ε)"
        print(f"  {name:40s} gg_prv {tg:7.2f}s  opacus {to:7.2f}s  ratio {tg / to:5.2f}x  {target}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        t_s = _median_time(lambda: get_noise_multiplier(target_epsilon=3.0, target_delta=DELTA, sample_rate=q,
                                                        steps=10_000, beta=beta, dim=dim), runs)
    print(f"  {'sigma solve (target eps 3, 10^4 steps)':40s} gg_prv {t_s:7.2f}s  (target < 30 s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=1_000_000)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--sample-rate", type=float, default=0.001)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--runs", type=int, default=3, help="runs per target (the median is printed)")
    ap.add_argument("--targets-only", action="store_true", help="only the speed targets")
    ap.add_argument("--ball-table", action="store_true",
                    help="also issue 21's ratios: the Rényi bound and the ball table against the equal-spread PRV "
                         "(benchmarks/ball_table.py at its defaults; one table per (β, p, σ), 35–95 s each at σ = 1)")
    args = ap.parse_args()
    targets(args.runs, args.dim)
    if args.ball_table:
        from ball_table import main as ball_table_main  # benchmarks/ (the script's directory) is on sys.path

        ball_table_main([])
    if args.targets_only:
        return
    T, d, s, q, delta = args.steps, args.dim, args.sigma, args.sample_rate, args.delta

    opa = PRVAccountant()
    opa.history = [(s, q, T)]
    e_opa, t_opa, m_opa, tt_opa = _measure(lambda: opa.get_epsilon(delta))
    print(f"Opacus PRV      beta=2            T={T}: eps={fmt_up(e_opa)}  time={t_opa:.2f}s  peak={m_opa:.0f} MiB"
          f"  (traced {tt_opa:.2f}s)")

    for beta in (2.0, 1.5):
        acc = GGPRVAccountant(beta=beta, dim=d)
        acc.history = [(s, q, T, beta, d, None)]
        e, t, m, tt = _measure(lambda: acc.get_epsilon(delta))
        print(f"opacus-gg gg_prv beta={beta} d={d} T={T}: eps={fmt_up(e)}  time={t:.2f}s  peak={m:.0f} MiB"
              f"  (traced {tt:.2f}s)", end="")
        if beta == 2.0:
            print(f"  | ratio to Opacus: time {t / t_opa:.2f}x, memory {m / m_opa:.2f}x, eps {e / e_opa:.6f}")
        else:
            print()
        # cached second call (same history + one step): per-segment PRVs are reused
        acc.history = [(s, q, T + 1, beta, d, None)]
        t0 = time.perf_counter()
        acc.get_epsilon(delta)
        print(f"   repeated call, T+1 steps: {time.perf_counter() - t0:.2f}s")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for beta in (2.0, 1.5):
            t0 = time.perf_counter()
            sig = get_noise_multiplier(target_epsilon=3.0, target_delta=delta, sample_rate=q, steps=T, beta=beta, dim=d)
            print(f"sigma solve beta={beta} d={d} T={T} target eps=3: sigma={sig:.4f}  time={time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
