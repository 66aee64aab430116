"""Benchmark: GG sampler vs torch.randn (not a test).

    python benchmarks/sampler.py [--n 10000000] [--repeats 5] [--threads N] [--device cpu|cuda]

Prints, for each β, the best-of-repeats time of ``opacus_gg.distribution.sample`` (rejection
sampler), of the Gamma-based reference ``sample_gamma``, and their ratios to ``torch.randn`` of the
same size and dtype, measured in the same run (target: sample ≤ 2× randn).
"""

from __future__ import annotations

import argparse
import time

import torch

from opacus_gg import distribution as D


def _best(fn, repeats: int, device: torch.device) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--betas", type=float, nargs="+", default=[1.0, 1.5, 3.0, 4.0])
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    dtype = getattr(torch, a.dtype)
    g = torch.Generator(device=dev).manual_seed(0)
    t_randn = _best(lambda: torch.randn(a.n, generator=g, device=dev, dtype=dtype), a.repeats, dev)
    print(f"device={dev} dtype={a.dtype} n={a.n} threads={torch.get_num_threads()}")
    print(f"torch.randn: {t_randn * 1e3:.1f} ms")
    print(f"{'beta':>5} {'sample ms':>10} {'/randn':>7} {'gamma ms':>9} {'/randn':>7}")
    for beta in a.betas:
        t_s = _best(lambda: D.sample(a.n, beta, 1.0, generator=g, device=dev, dtype=dtype), a.repeats, dev)
        t_g = _best(lambda: D.sample_gamma(a.n, beta, 1.0, generator=g, device=dev, dtype=dtype), a.repeats, dev)
        print(f"{beta:5.2f} {t_s * 1e3:10.1f} {t_s / t_randn:7.2f} {t_g * 1e3:9.1f} {t_g / t_randn:7.2f}")


if __name__ == "__main__":
    main()
