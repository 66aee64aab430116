"""The proven ε at p = β > 2 with the Rényi orders below 2 (docs/accounting.md, "Orders below 2"), against explicit shapes.

``PYTHONPATH=$PWD OMP_NUM_THREADS=1 python3 benchmarks/low_orders.py [--reference]``

Rows: β = p ∈ {2.5, 3}, d ∈ {10, 100, 2410}, σ = 1, q = 0.01, T = 1000, δ = 1e-5. Columns: the proven ε published
(``compute_epsilon``), the integer orders' Rényi bound (the published ε before), the best order, the cold time of the
query (every cache cleared). ``--reference``: also the PRV ε of explicit shapes of the ball (each an upper bound
on that shape's ε, within its discretization, and a lower bound on the worst shape's up to that): every equal
spread k of a set reaching 1 … 10 and d, and one coordinate c ∈ {0.3, …, 0.9} plus the rest of the p-mass spread
equally over d − 1 coordinates; the largest, and the published ε's ratio to it (minutes per row at d = 2410).
"""

from __future__ import annotations

import argparse
import time

from opacus_gg.accountants import ball_rdp, low_orders
from opacus_gg.accountants.api import _compose_tight, clear_query_cache, compute_epsilon
from opacus_gg.accountants.discrete import PowerChain, compose_aligned, split_to_grid
from opacus_gg.accountants.gg_pair import GGPair
from opacus_gg.accountants.history import PairSegment
from opacus_gg.accountants.spreads import GRID_POINTS, exact_spread_pair
from opacus_gg.formatting import fmt_up

ROWS = [(3.0, 10), (3.0, 100), (3.0, 2410), (2.5, 10), (2.5, 100), (2.5, 2410)]
Q, T, DELTA = 0.01, 1000, 1e-5


def _prv(pair) -> float:
    seg = [PairSegment((("shape", pair),), Q, T, 0.0)]
    return max(_compose_tight(seg, DELTA, d, 0.01, DELTA * 1e-3).epsilon_upper for d in ("remove", "add"))


def reference(beta: float, d: int):
    """(ε, label): the largest PRV ε over the explicit shapes (module docstring)."""
    best = (0.0, "")
    ks = sorted({k for k in list(range(1, 11)) + [d // 8, d // 4, d // 2, d - 8, d - 2, d - 1, d] if 1 <= k <= d})
    for k in ks:
        best = max(best, (_prv(exact_spread_pair(1.0, beta, k, beta)), f"equal k={k}"))
    for c in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        rest = ((1.0 - c ** beta) / (d - 1)) ** (1.0 / beta)
        thin = PowerChain(split_to_grid(GGPair(rest, beta), GRID_POINTS), GRID_POINTS).power(d - 1)
        pair = compose_aligned(split_to_grid(GGPair(c, beta), GRID_POINTS), thin).regrid(GRID_POINTS)
        best = max(best, (_prv(pair), f"c={c} + thin"))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", action="store_true", help="also the explicit shapes' PRV (slow)")
    args = ap.parse_args()
    print(f"{'beta=p':>6} {'d':>5} {'proven':>10} {'alpha':>5} {'integer orders':>14} {'cold s':>6}"
          + (f" {'reference':>10} {'shape':>14} {'ratio':>6}" if args.reference else ""))
    for beta, d in ROWS:
        ball_rdp.clear_caches()
        low_orders.clear_cache()
        clear_query_cache()
        t0 = time.process_time()
        r = compute_epsilon(noise_multiplier=1.0, sample_rate=Q, steps=T, delta=DELTA, beta=beta, dim=d,
                            clip_norm_p=beta)
        cold = time.process_time() - t0
        integer = r.details.get("epsilon_rdp_integer_orders", r.details["epsilon_rdp"])
        line = (f"{beta:>6g} {d:>5d} {fmt_up(r.epsilon, 6):>10} {r.details['rdp_order']:>5g} "
                f"{fmt_up(integer, 6):>14} {cold:>6.2f}")
        if args.reference:
            ref, label = reference(beta, d)
            line += f" {fmt_up(ref, 6):>10} {label:>14} {fmt_up(r.epsilon / ref, 4):>6}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
