"""Benchmark: one training step of GGPrivacyEngine (β ∈ {1.5, 2, 3}) vs Opacus's PrivacyEngine (not a test).

    python benchmarks/step_overhead.py [--batch 256] [--steps 5] [--device cpu|cuda] [--threads N]

Same ~1M-parameter CNN (CIFAR-shaped input), same fixed batch, same run; engines are timed
round-robin (so machine load affects all alike) and the median step time is reported with its
ratio to Opacus (target ≤ 1.10×). The clip_norm_p=2 rows isolate the cost of GG noise from the
cost of ℓp (p ≠ 2) clipping. A step = zero_grad + forward + backward (per-sample grads) +
clip + noise + accountant hook + SGD update.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine


def make_cnn() -> nn.Module:
    """~1.0M parameters: 3 conv layers + a linear head, for 3×32×32 inputs."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128 * 4 * 4, 448), nn.ReLU(), nn.Linear(448, 10),
    )


def build(name: str, beta: float, batch: int, device: torch.device, clip_norm_p=None):
    torch.manual_seed(0)
    model = make_cnn().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dl = DataLoader(TensorDataset(torch.randn(batch * 4, 3, 32, 32), torch.randint(0, 10, (batch * 4,))),
                    batch_size=batch)
    gen = torch.Generator(device=device).manual_seed(1)
    if name == "opacus":
        pe = PrivacyEngine(accountant="prv")
        model, opt, _ = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                        max_grad_norm=1.0, noise_generator=gen)
    else:
        pe = GGPrivacyEngine(accountant="gg_prv")
        model, opt, _ = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                        max_grad_norm=1.0, beta=beta, clip_norm_p=clip_norm_p,
                                        noise_generator=gen)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    configs = [("opacus", 2.0, None), ("gg", 1.5, None), ("gg", 2.0, None), ("gg", 3.0, None),
               ("gg", 1.5, 2.0), ("gg", 3.0, 2.0)]
    built = {c: build(c[0], c[1], a.batch, dev, c[2]) for c in configs}
    n_params = sum(p.numel() for p in built[configs[0]][0].parameters())
    torch.manual_seed(2)
    x = torch.randn(a.batch, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    times = {c: [] for c in configs}
    for i in range(a.warmup + a.steps):
        for c in configs:  # round-robin
            t = step(*built[c], x, y, dev)
            if i >= a.warmup:
                times[c].append(t)
    print(f"device={dev} params={n_params} batch={a.batch} steps={a.steps} threads={torch.get_num_threads()}")
    base = statistics.median(times[configs[0]])
    for c in configs:
        med = statistics.median(times[c])
        label = "Opacus PrivacyEngine" if c[0] == "opacus" else f"GG beta={c[1]} clip_norm_p={c[2] or c[1]}"
        print(f"{label:28s} median {med * 1e3:8.1f} ms  ratio {med / base:5.3f}  (min {min(times[c]) * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
