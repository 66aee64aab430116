r"""Adaptive clipping against a grid of fixed bounds at equal proven ε (scikit-learn digits, quickstart's MLP).

``PYTHONPATH=$PWD OMP_NUM_THREADS=1 python3 benchmarks/adaptive_clipping.py [--seeds 0 1 2] [--beta 1.5]``

Per clipping norm p ∈ {β, 2}: σ solved once per clipping mode (``make_private_with_epsilon``; for adaptive the
count's share of ε is included, so its σ is larger), then final test accuracy (mean ± sd over seeds) for every
fixed C of ``C_GRID`` and for adaptive clipping started at C = 1 (γ = 0.5, η = 0.2, σ_b = batch/20). Model,
schedule and data as ``configs/quickstart.yaml`` (10 epochs, batch 64, lr 1.0, ε = 3, δ = 1e-5). The tuning's own
privacy (choosing C on test accuracy) is not accounted.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader

from opacus_gg import GGPrivacyEngine
from opacus_gg.experiments.data import load_digits
from opacus_gg.experiments.models import build_model
from opacus_gg.formatting import fmt_up

C_GRID = (0.1, 0.3, 1.0, 3.0)
EPOCHS, BATCH, LR, EPS, DELTA = 10, 64, 1.0, 3.0, 1e-5
ADAPTIVE = dict(target_unclipped_quantile=0.5, clipbound_learning_rate=0.2, max_clipbound=100.0,
                min_clipbound=1e-3, unclipped_num_std=BATCH / 20)


def run(beta, p, c, seed, adaptive, sigma=None):
    """(test accuracy, σ, final C, ε) of one training run (``adaptive``: None, or the adaptive keywords)."""
    bundle = load_digits()
    torch.manual_seed(seed)
    model = build_model({"name": "mlp", "hidden": 32}, 10, (64,))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    loader = DataLoader(bundle.train, batch_size=BATCH, shuffle=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus's "Secure RNG turned off"
        pe = GGPrivacyEngine()
    kw = dict(module=model, optimizer=opt, data_loader=loader, max_grad_norm=c, beta=beta, clip_norm_p=p)
    if adaptive:
        kw.update(clipping="adaptive", **adaptive)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if sigma is None:
            model, opt, loader = pe.make_private_with_epsilon(target_epsilon=EPS, target_delta=DELTA, epochs=EPOCHS,
                                                              epsilon_tolerance=0.02, **kw)
        else:
            model, opt, loader = pe.make_private(noise_multiplier=sigma, **kw)
        for _ in range(EPOCHS):
            for xb, yb in loader:
                opt.zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
    x, y = bundle.test.tensors
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    return acc, opt.noise_multiplier, opt.max_grad_norm, pe.get_epsilon(DELTA)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--beta", type=float, default=1.5)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--quantiles", type=float, nargs="+", default=[ADAPTIVE["target_unclipped_quantile"]],
                    help="target_unclipped_quantile values of the adaptive runs")
    ap.add_argument("--clipbound-lr", type=float, default=ADAPTIVE["clipbound_learning_rate"])
    ap.add_argument("--adaptive-only", action="store_true", help="skip the fixed-C grid")
    a = ap.parse_args()
    t0 = time.time()
    modes = [] if a.adaptive_only else [(None, C_GRID)]
    modes += [(dict(ADAPTIVE, target_unclipped_quantile=g, clipbound_learning_rate=a.clipbound_lr), (1.0,))
              for g in a.quantiles]
    for p in sorted({a.beta, 2.0}):
        for adaptive, grid in modes:
            sigma = None
            for c in grid:
                accs, finals = [], []
                for seed in a.seeds:
                    acc, sigma, c_end, eps = run(a.beta, p, c, seed, adaptive, sigma)
                    accs.append(acc)
                    finals.append(c_end)
                sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
                mode = (f"adaptive γ={adaptive['target_unclipped_quantile']:g} η={adaptive['clipbound_learning_rate']:g} "
                        f"from C={c:g} (final C {statistics.mean(finals):.3g})" if adaptive else f"C={c:g}")
                print(f"beta={a.beta:g} p={p:g} {mode:50s} sigma={sigma:.4f} eps={fmt_up(eps)} "
                      f"acc={statistics.mean(accs):.3f}±{sd:.3f}", flush=True)
    print(f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
