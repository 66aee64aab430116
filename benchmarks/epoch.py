"""Wall time of one β-DP-SGD epoch of each paper config on this machine (random inputs of the real shapes).

    python benchmarks/epoch.py [--steps 10] [--beta 2] [--device cpu] [adult_fcn ...]

Seconds per step are measured over ``steps`` Poisson-sampled private steps (after one warm-up step) and
multiplied by the full dataset's steps per epoch, ``steps_for_epochs(1, sample_rate=batch_size/n)`` = ⌈n/batch_size⌉;
the one-time scattering transform and the accountant are not included (:func:`opacus_gg.experiments.train.run`
reports them separately).
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any, Dict

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg.experiments.config import Config, apply_overrides, bundled_configs, load_config, validate_config
from opacus_gg.experiments.models import build_model, count_parameters
from opacus_gg.steps import steps_for_epochs

# training-set size, input shape, classes of the paper's datasets (scatternet models see 243×8×8 features)
FULL_SIZES: Dict[str, Dict[str, Any]] = {
    "cifar10": {"n": 50000, "shape": (3, 32, 32), "classes": 10},
    "svhn": {"n": 73257, "shape": (3, 32, 32), "classes": 10},
    "adult": {"n": 32561, "shape": (108,), "classes": 2},
    "imdb": {"n": 25000, "shape": None, "classes": 2},
}


def time_epoch(cfg: Config, steps: int = 10) -> Dict[str, Any]:
    """Measure s/step of private training for ``cfg``'s model; extrapolate to one full epoch."""
    from opacus_gg.experiments.train import make_privacy_engine

    cfg = validate_config(cfg)
    d, p, t = cfg["data"], cfg["privacy"], cfg["train"]
    info = FULL_SIZES[d["name"]]
    batch = int(t["batch_size"])
    n_data = batch * (steps + 1)
    if d["name"] == "imdb":
        shape = (int(d["max_len"]),)
        x = torch.randint(0, int(d["vocab_size"]), (n_data, *shape))
    else:
        shape = (243, 8, 8) if cfg["model"]["name"] == "scatternet_cnn" else info["shape"]
        x = torch.randn(n_data, *shape)
    y = torch.randint(0, info["classes"], (n_data,))
    model = build_model(cfg["model"], info["classes"], shape, int(d["vocab_size"])).to(cfg["device"])
    optimizer = torch.optim.SGD(model.parameters(), lr=float(t["lr"]))
    engine = make_privacy_engine()
    kw = {"beta": float(p["beta"]), "clip_norm_p": p["clip_norm_p"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, optimizer, loader = engine.make_private(
            module=model, optimizer=optimizer, data_loader=DataLoader(TensorDataset(x, y), batch_size=batch),
            noise_multiplier=1.0, max_grad_norm=float(p["max_grad_norm"]), **kw)
    crit = nn.CrossEntropyLoss()
    times = []
    for xb, yb in loader:
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        crit(model(xb.to(cfg["device"])), yb.to(cfg["device"])).backward()
        optimizer.step()
        times.append(time.perf_counter() - t0)
    per_step = sum(times[1:]) / max(len(times) - 1, 1)
    steps_full = steps_for_epochs(1, sample_rate=min(1.0, batch / info["n"]))  # Poisson rate q = B/n
    return {"config": cfg["name"], "beta": float(p["beta"]), "dim": count_parameters(model._module),
            "batch_size": batch, "seconds_per_step": per_step, "steps_per_epoch": steps_full,
            "seconds_per_epoch": per_step * steps_full, "steps_timed": len(times) - 1}


def main() -> None:
    """Time each config given on the command line (default: every paper config) and print min/epoch."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="*", default=[c for c in bundled_configs() if c != "quickstart"])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--beta", type=float, default=2.0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print(f"torch threads: {torch.get_num_threads()}")
    for path in args.configs:
        cfg = apply_overrides(load_config(path), {"privacy.beta": args.beta, "device": args.device})
        r = time_epoch(cfg, args.steps)
        print(f"{r['config']:20s} β={r['beta']:g} d={r['dim']:>8d} B={r['batch_size']:4d}: "
              f"{r['seconds_per_step']:.3f} s/step × {r['steps_per_epoch']} steps = "
              f"{r['seconds_per_epoch'] / 60:.1f} min/epoch")


if __name__ == "__main__":
    main()
