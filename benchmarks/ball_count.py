"""The count table's proven ε at p = β > 2, small d, against the worst explicit shape and the Rényi bound.

``PYTHONPATH=$PWD OMP_NUM_THREADS=1 python3 benchmarks/ball_count.py [--dims 10 16] [--betas 3 2.5]
[--mass-steps N --ratio-high R ...] [--reference]``

Setting: issue 35 item 2, σ = 1, q = 0.01, T = 1000, δ = 1e-5, β = p. Per (β, d): the states (counted before the
build, :meth:`~opacus_gg.accountants.ball_count.CountSpec.states`), the table's PRV ε (max over the two directions,
``ball_table_epsilon`` with the spec given; the disk cache off, so every table is built), its build time (CPU s of
this process, one core) and round-off C, the published Rényi bound (``compute_epsilon``'s default), and the ratios to
the worst explicit shape's PRV: ``--reference`` computes it (:func:`low_orders.reference`, minutes per row), else the
numbers of docs/accounting.md ("Orders below 2" at d = 10; "A count-aware table" at d = 16).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPACUS_GG_CACHE", "off")

from opacus_gg.accountants import api  # noqa: E402
from opacus_gg.accountants.api import ball_table_epsilon, compute_epsilon  # noqa: E402
from opacus_gg.accountants.ball_count import CountSpec, count_table  # noqa: E402
from opacus_gg.accountants.history import normalize_history  # noqa: E402
from opacus_gg.formatting import fmt_up  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from low_orders import reference  # noqa: E402

Q, T, DELTA = 0.01, 1000, 1e-5
#: the worst explicit shape's PRV at σ = 1, q = 0.01, T = 1000, δ = 1e-5 (:func:`low_orders.reference`, rounded up)
KNOWN_REFERENCE = {(3.0, 10): 12.4896, (2.5, 10): 5.0038, (3.0, 16): 14.4182, (2.5, 16): 5.4402}  # d = 16: --reference


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--betas", type=float, nargs="+", default=[3.0, 2.5])
    ap.add_argument("--dims", type=int, nargs="+", default=[10])
    ap.add_argument("--reference", action="store_true", help="compute the explicit shapes' PRV (slow)")
    defaults = CountSpec()
    for f in ("mass_steps", "ratio_high", "ratio_low", "high_from", "base_steps", "h"):
        ap.add_argument("--" + f.replace("_", "-"), type=type(getattr(defaults, f)), default=getattr(defaults, f))
    args = ap.parse_args()
    spec = CountSpec(mass_steps=args.mass_steps, ratio_high=args.ratio_high, ratio_low=args.ratio_low,
                     high_from=args.high_from, base_steps=args.base_steps, h=args.h)
    api.COUNT_SPEC = spec
    print(spec)
    print(f"{'beta=p':>6} {'d':>3} {'states':>7} {'table':>9} {'build s':>8} {'C':>8} {'renyi':>9} {'reference':>9} "
          f"{'table/ref':>9} {'renyi/ref':>9}", flush=True)
    for beta in args.betas:
        for d in args.dims:
            states = spec.states(beta, d)
            t0 = time.process_time()
            tab = count_table(1.0, beta, beta, d, spec)
            build = time.process_time() - t0
            segs = normalize_history([(1.0, Q, T, beta, d, beta)])
            eps = max(ball_table_epsilon(segs, DELTA, spec=None).values())
            renyi = compute_epsilon(noise_multiplier=1.0, sample_rate=Q, steps=T, delta=DELTA, beta=beta, dim=d,
                                    clip_norm_p=beta).epsilon
            ref = reference(beta, d)[0] if args.reference else KNOWN_REFERENCE.get((beta, d))
            ratios = (f"{fmt_up(eps / ref, 4):>9} {fmt_up(renyi / ref, 4):>9}" if ref else f"{'-':>9} {'-':>9}")
            print(f"{beta:>6g} {d:>3d} {states:>7d} {fmt_up(eps, 6):>9} {build:>8.0f} {tab.roundoff:>8.1e} "
                  f"{fmt_up(renyi, 6):>9} {(fmt_up(ref, 6) if ref else '-'):>9} {ratios}", flush=True)
            assert tab.states == states


if __name__ == "__main__":
    main()
