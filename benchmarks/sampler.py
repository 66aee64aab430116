"""Benchmark: GG sampler vs torch.randn (not a test).

    python benchmarks/sampler.py [--n 10000000] [--repeats 11] [--runs 1] [--threads N] [--device cpu|cuda]
                                 [--betas 1 1.5 3 4] [--dtype float32|float64] [--gamma]

For each β, ``torch.randn(n)`` and ``opacus_gg.distribution.sample(n, β, 1)`` (the Ziggurat) are called
alternately, ``--repeats`` times; each pair gives one ratio sample/randn, and the median of these in-run
ratios is printed with the median times (target: ≤ 1.3); ``--runs R`` repeats it and prints the median
of the R per-run ratios last. Pairing the calls makes load from other
processes on a shared machine hit both sides of each ratio alike. ``--gamma`` adds the Gamma-based
reference sampler ``sample_gamma``. On a GPU: ``python benchmarks/sampler.py --device cuda``
(the device is synchronised around every timed call).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from opacus_gg import distribution as D


def _timed(fn, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def paired_times(fns, repeats: int, device: torch.device) -> list:
    """Per-repeat times of each function, called round-robin (one warm-up call each first)."""
    for fn in fns:
        fn()
    out = [[] for _ in fns]
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            out[k].append(_timed(fn, device))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--runs", type=int, default=1, help="repeat the whole measurement; prints the median ratios")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--betas", type=float, nargs="+", default=[1.0, 1.5, 3.0, 4.0])
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--gamma", action="store_true", help="also time the Gamma reference sampler")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    dtype = getattr(torch, a.dtype)
    g = torch.Generator(device=dev).manual_seed(0)
    print(f"device={dev} dtype={a.dtype} n={a.n} threads={torch.get_num_threads()} repeats={a.repeats} runs={a.runs}")
    per_run = {}
    for run in range(a.runs):
        print(f"run {run + 1}")
        print(f"{'beta':>5} {'randn ms':>9} {'sample ms':>10} {'ratio':>6} {'gamma ms':>9} {'ratio':>6}   (medians)")
        for beta in a.betas:
            fns = [
                lambda: torch.randn(a.n, generator=g, device=dev, dtype=dtype),
                lambda: D.sample(a.n, beta, 1.0, generator=g, device=dev, dtype=dtype),
            ]
            if a.gamma:
                fns.append(lambda: D.sample_gamma(a.n, beta, 1.0, generator=g, device=dev, dtype=dtype))
            t = paired_times(fns, a.repeats, dev)
            med = [statistics.median(x) for x in t]
            ratio = [statistics.median(s / r for s, r in zip(x, t[0])) for x in t]
            per_run.setdefault(beta, []).append(ratio[1])
            gam = f"{med[2] * 1e3:9.1f} {ratio[2]:6.2f}" if a.gamma else f"{'-':>9} {'-':>6}"
            print(f"{beta:5.2f} {med[0] * 1e3:9.1f} {med[1] * 1e3:10.1f} {ratio[1]:6.2f} {gam}")
    if a.runs > 1:
        print(f"median over {a.runs} runs of the sample/randn ratio")
        for beta, ratios in per_run.items():
            print(f"{beta:5.2f} {statistics.median(ratios):6.2f}   ({' '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
