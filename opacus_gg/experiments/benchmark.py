"""Wall time of β-DP-SGD steps for a config's model at the real dataset's input shape (random inputs).

Seconds per step are measured over ``steps`` Poisson-sampled private steps (after one warm-up step) and
multiplied by the full dataset's steps per epoch, ⌈n / batch_size⌉; the one-time scattering transform and
the accountant are not included (they are reported separately by :func:`opacus_gg.experiments.train.run`).
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any, Dict

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from .config import Config, validate_config
from .models import build_model, count_parameters

__all__ = ["FULL_SIZES", "time_epoch"]

# training-set size, input shape, classes of the paper's datasets (scatternet models see 243×8×8 features)
FULL_SIZES: Dict[str, Dict[str, Any]] = {
    "cifar10": {"n": 50000, "shape": (3, 32, 32), "classes": 10},
    "svhn": {"n": 73257, "shape": (3, 32, 32), "classes": 10},
    "adult": {"n": 32561, "shape": (108,), "classes": 2},
    "imdb": {"n": 25000, "shape": None, "classes": 2},
}


def time_epoch(cfg: Config, steps: int = 10) -> Dict[str, Any]:
    """Measure s/step of private training for ``cfg``'s model; extrapolate to one full epoch."""
    from .train import make_privacy_engine

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
    steps_full = math.ceil(info["n"] / batch)
    return {"config": cfg["name"], "beta": float(p["beta"]), "dim": count_parameters(model._module),
            "batch_size": batch, "seconds_per_step": per_step, "steps_per_epoch": steps_full,
            "seconds_per_epoch": per_step * steps_full, "steps_timed": len(times) - 1}
