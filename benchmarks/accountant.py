"""Benchmark of the certified GG accountant (``python benchmarks/accountant.py``).

Measures, on this machine: get_epsilon for 10^5 steps with d = 10^6 (β = 2 and β = 1.5), a σ solve, and
time / peak memory against Opacus's own PRV accountant at β = 2 in the same run (printed as ratios).
Memory is the peak of Python allocations (tracemalloc; numpy arrays are included), from a separate cold run:
times are taken without tracemalloc (its time is printed as "traced").
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings

from opacus.accountants import PRVAccountant

from opacus_gg.accountants import GGPRVAccountant, get_noise_multiplier
from opacus_gg.accountants import discretization, spreads


def _clear():
    discretization.step_dprv.cache_clear()
    spreads.spread_pairs.cache_clear()


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=1_000_000)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--sample-rate", type=float, default=0.001)
    ap.add_argument("--delta", type=float, default=1e-5)
    args = ap.parse_args()
    T, d, s, q, delta = args.steps, args.dim, args.sigma, args.sample_rate, args.delta

    opa = PRVAccountant()
    opa.history = [(s, q, T)]
    e_opa, t_opa, m_opa, tt_opa = _measure(lambda: opa.get_epsilon(delta))
    print(f"Opacus PRV      beta=2            T={T}: eps={e_opa:.4f}  time={t_opa:.2f}s  peak={m_opa:.0f} MiB"
          f"  (traced {tt_opa:.2f}s)")

    for beta in (2.0, 1.5):
        acc = GGPRVAccountant(beta=beta, dim=d)
        acc.history = [(s, q, T, beta, d, None)]
        e, t, m, tt = _measure(lambda: acc.get_epsilon(delta))
        print(f"opacus-gg gg_prv beta={beta} d={d} T={T}: eps={e:.4f}  time={t:.2f}s  peak={m:.0f} MiB"
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
