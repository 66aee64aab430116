"""Benchmark: one training step of GGPrivacyEngine (β = clip_norm_p = p) vs Opacus's PrivacyEngine (not a test).

    python benchmarks/step_overhead.py [--batch 256] [--steps 5] [--runs 1] [--device cpu|cuda] [--threads N]
                                       [--ps 1 1.5 3 4] [--clipping flat per_layer] [--no-factors]

Same ~1M-parameter CNN (CIFAR-shaped input), same fixed batch, same run. For each clipping mode the
Opacus engine (ℓ2 clipping, Gaussian noise) and the GG engines (ℓp clipping and GG(β = p) noise) are
timed round-robin, step by step, so that load from other processes hits all alike; each row prints
the median step time and the median of the per-step in-run ratios to Opacus's step of the same round
(target ≤ 1.05); with ``--runs R`` the whole measurement is repeated and the median of the R in-run
ratios is printed last. A step = zero_grad + forward + backward (per-sample grads) + clip + noise +
accountant hook + optimizer update. Peak memory is printed too, with its ratio to Opacus's: on CUDA the
max allocated bytes of a whole step above those before it; on CPU the peak bytes allocated inside ``optimizer.step()`` (clip +
noise + update; forward and backward are Opacus's own hooks), from every allocation record of the profiler; on
CPU also the GG step's peak on the accelerator branches (forced on CPU by ``_device.accelerator_path``: one
fused norm pass, the deferred sampler), as "accel-path" with its ratio to Opacus's (target ≤ 1.1).
The CNN's linear layer holds 0.92M of its 1.0M parameters; GG reads its per-sample ℓp norms from the
layer's factors (``opacus_gg.rank1``: ‖δ_i ⊗ a_i‖_p = ‖δ_i‖_p‖a_i‖_p). ``--no-factors`` turns that off, so
every norm reads all B × d per-sample entries: the cost for models whose parameters sit in convolutions.
On a GPU: ``python benchmarks/step_overhead.py --device cuda``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
import warnings

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the CPU profiler (peak memory) would log every start/stop

import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine, _device
from opacus_gg._device import accelerator_path
from opacus_gg.rank1 import use_factors


def make_cnn() -> nn.Module:
    """~1.0M parameters: 3 conv layers + a linear head, for 3×32×32 inputs."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128 * 4 * 4, 448), nn.ReLU(), nn.Linear(448, 10),
    )


def build(name: str, p: float, clipping: str, batch: int, device: torch.device):
    torch.manual_seed(0)
    model = make_cnn().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dl = DataLoader(TensorDataset(torch.randn(batch * 4, 3, 32, 32), torch.randint(0, 10, (batch * 4,))),
                    batch_size=batch)
    gen = torch.Generator(device=device).manual_seed(1)
    n_tensors = sum(1 for _ in model.parameters())
    mgn = 1.0 if clipping == "flat" else [1.0 / n_tensors**0.5] * n_tensors
    kw = dict(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0, max_grad_norm=mgn,
              clipping=clipping, noise_generator=gen)
    if name == "opacus":
        model, opt, _ = PrivacyEngine(accountant="prv").make_private(**kw)
    else:
        model, opt, _ = GGPrivacyEngine(accountant="gg_prv").make_private(beta=p, clip_norm_p=p, **kw)
    return model, opt


def step(model, opt, x, y, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def peak_bytes(model, opt, x, y, device) -> float:
    """Peak memory of a step. CUDA: max allocated bytes over the whole step, above those allocated before it (the
    model, the data, the other engines' state). CPU: peak of the bytes
    allocated and not yet freed inside ``opt.step()`` (clipping + noise + update, the part that differs
    from Opacus; forward and backward run Opacus's own hooks), from every allocation record of the profiler
    (``opacus_gg._device.peak_bytes``, on one thread)."""
    if device.type == "cuda":
        return float(_device.peak_bytes(lambda: step(model, opt, x, y, device), device))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the CPU sampler's split over Python threads stays on this one, which is profiled
    try:
        return float(_device.peak_bytes(opt.step, device))
    finally:
        torch.set_num_threads(threads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--runs", type=int, default=1, help="repeat the whole measurement; prints the median ratios")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--ps", type=float, nargs="+", default=[1.0, 1.5, 3.0, 4.0])
    ap.add_argument("--clipping", nargs="+", choices=["flat", "per_layer"], default=["flat", "per_layer"])
    ap.add_argument("--no-factors", action="store_true", help="norms of linear layers read every entry too")
    a = ap.parse_args()
    with use_factors(not a.no_factors):
        measure(a)


def measure(a: argparse.Namespace) -> None:
    warnings.filterwarnings("ignore")
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.manual_seed(2)
    x = torch.randn(a.batch, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    print(f"device={dev} batch={a.batch} steps={a.steps} threads={torch.get_num_threads()} runs={a.runs} "
          f"linear-layer factors={'off' if a.no_factors else 'on'}")
    per_run = {}  # (clipping, config) -> in-run ratio of each run
    for run in range(a.runs):
        for clipping in a.clipping:
            configs = [("opacus", 2.0)] + [("gg", p) for p in a.ps]
            built = {c: build(c[0], c[1], clipping, a.batch, dev) for c in configs}
            times = {c: [] for c in configs}
            for i in range(a.warmup + a.steps):
                for c in configs:  # round-robin
                    t = step(*built[c], x, y, dev)
                    if i >= a.warmup:
                        times[c].append(t)
            peaks = {c: peak_bytes(*built[c], x, y, dev) for c in configs}
            accel = {}
            if dev.type == "cpu":  # the accelerator branches' memory, measured on CPU
                with accelerator_path():
                    accel = {c: peak_bytes(*built[c], x, y, dev) for c in configs[1:]}
            base = times[configs[0]]
            print(f"run {run + 1}: clipping={clipping}")
            for c in configs:
                med = statistics.median(times[c])
                ratio = statistics.median(t / b for t, b in zip(times[c], base))
                per_run.setdefault((clipping, c), []).append(ratio)
                mem = f"  peak {peaks[c] / 2**20:7.1f} MiB ratio {peaks[c] / peaks[configs[0]]:5.3f}"
                if c in accel:
                    mem += f"  accel-path peak {accel[c] / 2**20:7.1f} MiB ratio {accel[c] / peaks[configs[0]]:5.3f}"
                print(f"  {_label(c):24s} median {med * 1e3:8.1f} ms  in-run ratio {ratio:5.3f}{mem}")
            del built
            gc.collect()  # the engines' hook cycles: free this round's models before the next is built
    if a.runs > 1:
        print(f"median over {a.runs} runs of the in-run ratios")
        for (clipping, c), ratios in per_run.items():
            runs = " ".join(f"{r:.3f}" for r in ratios)
            print(f"  {clipping:9s} {_label(c):24s} {statistics.median(ratios):5.3f}   ({runs})")


def _label(c) -> str:
    return "Opacus (l2, Gaussian)" if c[0] == "opacus" else f"GG beta=clip_norm_p={c[1]:g}"


if __name__ == "__main__":
    main()
