"""Cost of the proven ℓp-ball RDP bound, and ε(rdp-ball) vs ε(equal-spread PRV).

Run from the repository root: ``PYTHONPATH=$PWD python3 benchmarks/ball_rdp.py``.
"""

from __future__ import annotations

import time
import warnings

from opacus_gg.accountants import ball_rdp, compute_epsilon
from opacus_gg.accountants.ball_rdp import clear_caches
from opacus_gg.formatting import fmt_up


def cost(p: float) -> None:
    seg = (1.0, 0.001, 10**5, 1.5, 10**6, p)
    clear_caches()
    t, c = time.perf_counter(), time.process_time()
    eps, order = ball_rdp.rdp_ball_epsilon([seg], 1e-5)
    cold, cold_cpu = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    ball_rdp.rdp_ball_epsilon([seg[:2] + (seg[2] + 1,) + seg[3:]], 1e-5)
    warm = time.perf_counter() - t
    print(f"beta=1.5 p={p:g} d=1e6 sigma=1 q=0.001 T=1e5 delta=1e-5: eps={fmt_up(eps)} (order {order:g}) "
          f"cold {cold:.2f} s wall ({cold_cpu:.2f} s CPU), warm (T+1) {warm * 1e3:.1f} ms")


def table() -> None:
    print("| beta | p | d | eps rdp-ball (proven) | eps PRV equal spreads | ratio |")
    print("|---|---|---|---|---|---|")
    for beta in (1.2, 1.5, 3.0):
        for p in sorted({beta, 2.0}):
            for d in (10, 10**6):
                rdp_eps = ball_rdp.rdp_ball_epsilon([(1.0, 0.001, 10**5, beta, d, p)], 1e-5)[0]
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", UserWarning)
                        r = compute_epsilon(noise_multiplier=1.0, sample_rate=0.001, steps=10**5, delta=1e-5,
                                            beta=beta, dim=d, clip_norm_p=p)
                    if "prv_failed" in r.details:  # the PRV is out of range: the Rényi bound alone is published
                        raise ValueError(r.details["prv_failed"])
                    prv = fmt_up(r.epsilon_upper)
                    ratio = f"{rdp_eps / r.epsilon_upper:.3f}"
                except ValueError as err:  # the PRV refuses settings whose truncated mass is too large
                    prv, ratio = f"refused ({str(err)[:40]}...)", "-"
                print(f"| {beta:g} | {p:g} | {d:g} | {fmt_up(rdp_eps)} | {prv} | {ratio} |")


if __name__ == "__main__":
    cost(1.5)
    cost(2.0)
    table()
