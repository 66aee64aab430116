"""Benchmark: peak memory of one optimizer step, GGPrivacyEngine vs Opacus's PrivacyEngine (not a test).

    python benchmarks/step_memory.py [--betas 1 1.5 3] [--runs 3] [--models cnn equal big] [--big-width 8000]

For each model, Opacus's step (ℓ2 clipping, Gaussian noise) and the GG steps (β, ℓβ clipping) are built fresh
in the same run and one ``optimizer.step()`` (clip + noise + update; forward and backward are Opacus's own hooks)
of each is measured on CPU by ``opacus_gg._device.peak_bytes``: the peak of the bytes allocated inside the step
and not yet freed, from every allocation record of the CPU profiler (one thread). The GG step is measured on
the CPU path and on the accelerator branches (forced on CPU by ``_device.accelerator_path``: the deferred sampler,
what a GPU runs); each is printed with its ratio to Opacus's (target ≤ 1.1). Models: ``cnn`` the ~1M-parameter
CNN of ``benchmarks/step_overhead.py``; ``equal`` 8 Linear layers of 500×500 (2M parameters in equal-size
tensors: Opacus draws noise per parameter, so its own peak is lowest there, 2 + 2/8 copies); ``big`` one
Linear of width² parameters (``--big-width 8000``: 64M). With ``--runs R`` the measurement is repeated and the
median ratio printed last.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import warnings

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the CPU profiler would log every start/stop

import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine
from opacus_gg._device import accelerator_path, peak_bytes
from step_overhead import make_cnn


def models(big_width: int) -> dict:
    """name -> (constructor, input shape of one example)."""
    return {
        "cnn": (make_cnn, (3, 32, 32)),
        "equal": (lambda: nn.Sequential(*[nn.Linear(500, 500) for _ in range(8)]), (500,)),
        "big": (lambda: nn.Linear(big_width, big_width), (big_width,)),
    }


def step_peak(make, shape, engine: str, beta: float, accel: bool) -> float:
    """Peak bytes of one ``optimizer.step()`` of a fresh private model."""
    torch.manual_seed(0)
    model = make()
    x = torch.randn(2, *shape)
    dl = DataLoader(TensorDataset(x, torch.zeros(2)), batch_size=2)
    kw = dict(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), data_loader=dl,
              noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=False)
    if engine == "opacus":
        model, opt, _ = PrivacyEngine(accountant="prv").make_private(**kw)
    else:
        model, opt, _ = GGPrivacyEngine().make_private(beta=beta, **kw)
    opt.zero_grad()
    model(x).square().sum().backward()
    with accelerator_path(accel):
        peak = peak_bytes(opt.step, "cpu")
    del model, opt
    gc.collect()
    return float(peak)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--betas", type=float, nargs="+", default=[1.0, 1.5, 3.0])
    ap.add_argument("--models", nargs="+", choices=["cnn", "equal", "big"], default=["cnn", "equal", "big"])
    ap.add_argument("--big-width", type=int, default=8000)
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)  # peak_bytes sees this thread's allocations; the CPU sampler then stays on it
    ratios: dict = {}
    for run in range(a.runs):
        print(f"run {run + 1}")
        for name in a.models:
            make, shape = models(a.big_width)[name]
            d = sum(p.numel() for p in make().parameters())
            base = step_peak(make, shape, "opacus", 2.0, False)
            print(f"  {name:5s} d={d:>9,d}  Opacus peak {base / 2**20:8.1f} MiB ({base / (4 * d):.2f} float32 copies)")
            for beta in a.betas:
                for accel in (False, True):
                    ours = step_peak(make, shape, "gg", beta, accel)
                    path = "accel-path" if accel else "CPU path  "
                    ratios.setdefault((name, beta, path), []).append(ours / base)
                    print(f"    GG beta={beta:<4g} {path} peak {ours / 2**20:8.1f} MiB  ratio {ours / base:5.3f}")
    if a.runs > 1:
        print(f"median over {a.runs} runs of the in-run ratios to Opacus")
        for (name, beta, path), r in ratios.items():
            print(f"  {name:5s} beta={beta:<4g} {path} {statistics.median(r):5.3f}   ({' '.join(f'{x:.3f}' for x in r)})")


if __name__ == "__main__":
    main()
