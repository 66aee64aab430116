"""Benchmark: GG sampler vs torch.randn (not a test).

    python benchmarks/sampler.py [--n 10000000] [--repeats 5] [--threads N] [--device cpu|cuda] [--no-gamma]

Prints, for each β, the best-of-repeats time of ``opacus_gg.distribution.sample`` (Ziggurat
sampler), of the Gamma-based reference ``sample_gamma``, and their ratios to ``torch.randn`` of the
same size and dtype (target: sample ≤ 2× randn). ``torch.randn`` is re-timed for every β,
interleaved call by call with the samplers, so that load from other processes on a shared machine
hits both sides of each ratio alike.
"""

from __future__ import annotations

import argparse
import time

import torch

from opacus_gg import distribution as D


def _best(fns, repeats: int, device: torch.device) -> list:
    """Best-of-repeats time of each function, the functions called round-robin (interleaved)."""
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--betas", type=float, nargs="+", default=[1.0, 1.5, 3.0, 4.0])
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--no-gamma", action="store_true", help="skip the Gamma reference sampler")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    dtype = getattr(torch, a.dtype)
    g = torch.Generator(device=dev).manual_seed(0)
    print(f"device={dev} dtype={a.dtype} n={a.n} threads={torch.get_num_threads()}")
    print(f"{'beta':>5} {'randn ms':>9} {'sample ms':>10} {'/randn':>7} {'gamma ms':>9} {'/randn':>7}")
    for beta in a.betas:
        fns = [
            lambda: torch.randn(a.n, generator=g, device=dev, dtype=dtype),
            lambda: D.sample(a.n, beta, 1.0, generator=g, device=dev, dtype=dtype),
        ]
        if not a.no_gamma:
            fns.append(lambda: D.sample_gamma(a.n, beta, 1.0, generator=g, device=dev, dtype=dtype))
        t = _best(fns, a.repeats, dev)
        t_r, t_s = t[0], t[1]
        gam = f"{t[2] * 1e3:9.1f} {t[2] / t_r:7.2f}" if not a.no_gamma else f"{'-':>9} {'-':>7}"
        print(f"{beta:5.2f} {t_r * 1e3:9.1f} {t_s * 1e3:10.1f} {t_s / t_r:7.2f} {gam}")


if __name__ == "__main__":
    main()
