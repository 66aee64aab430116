r"""The audit's figure: the attack's operating points (FPR, TPR) inside the (ε, δ) region of the proven ε.

An (ε, δ)-DP mechanism allows a membership test only the points with (Kairouz, Oh & Viswanath 2015)

    TPR ≤ min(1, e^ε FPR + δ, 1 − e^{−ε} (1 − δ − FPR))                         (the (ε, δ) region)

(the second bound is the first applied to the complementary test). The figure shades that region for the proven
ε and draws its edge for the audited ε_L; the points are the empirical ROC of "included iff score ≥ t" over all
thresholds t, with no confidence attached (the confidence statement is ε_L's, :mod:`opacus_gg.audit.bound`).
Both axes are logarithmic: the low-FPR corner is where the privacy loss shows.
"""

from __future__ import annotations

import os
from typing import Any, Union

import numpy as np

from ...formatting import fmt_down, fmt_up
from . import pyplot, save_figure

__all__ = ["dp_region_tpr", "plot_audit"]


def dp_region_tpr(fpr: np.ndarray, epsilon: float, delta: float) -> np.ndarray:
    """The largest TPR an (ε, δ)-DP mechanism allows at each FPR in [0, 1] (module docstring)."""
    f = np.asarray(fpr, dtype=float)
    if np.any((f < 0) | (f > 1)) or not (epsilon >= 0 and 0 <= delta <= 1):
        raise ValueError(f"need FPR in [0, 1], ε ≥ 0 and δ in [0, 1], got ε={epsilon!r}, δ={delta!r}")
    if np.isinf(epsilon):  # ε = ∞ allows every test
        return np.ones_like(f)
    return np.minimum.reduce([np.ones_like(f), np.exp(epsilon) * f + delta,
                              1.0 - np.exp(-epsilon) * (1.0 - delta - f)])


def plot_audit(result: Any, path: Union[str, "os.PathLike[str]"]) -> str:
    """Write the audit figure of an :class:`~opacus_gg.audit.AuditResult` to ``path`` (PNG); returns ``path``."""
    plt = pyplot()
    cfg = result.config
    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    lo = 0.5 / max(1, int((~result.included).sum()))  # half the smallest nonzero empirical FPR
    grid = np.geomspace(lo, 1.0, 400)
    eps_p, eps_a = result.epsilon_proven, result.epsilon_audit_lower
    proven = dp_region_tpr(grid, eps_p, cfg.delta)
    ax.fill_between(grid, grid, proven, color="tab:blue", alpha=0.15,
                    label=f"allowed by the proven ε ≤ {fmt_up(eps_p, 3)} (δ = {cfg.delta:g})")
    ax.plot(grid, proven, color="tab:blue", lw=1.2)
    ax.plot(grid, dp_region_tpr(grid, eps_a, cfg.delta), color="tab:red", ls="--", lw=1.2,
            label=f"edge at the audited ε ≥ {fmt_down(eps_a, 3)} ({cfg.confidence:.0%} conf.)")
    ax.plot(grid, grid, color="0.5", lw=0.8, ls=":", label="chance (TPR = FPR)")
    keep = result.fpr > 0
    ax.plot(result.fpr[keep], np.maximum(result.tpr[keep], lo), ".", color="k", ms=3,
            label=f"attack's operating points ({cfg.canaries} canaries)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, 1.0)
    ax.set_ylim(lo, 1.05)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    broken = ("\nBROKEN ENGINE (test-only hook): " + ", ".join(f"{k[5:]} = {v}" for k, v in result.broken.items())
              if result.broken else "")
    ax.set_title(f"one-run audit: β={cfg.beta:g}, p={cfg.clip_norm_p:g}, σ={cfg.noise_multiplier:g}, "
                 f"q={cfg.sample_rate:g}, T={cfg.steps}{broken}", fontsize=8)
    ax.legend(loc="lower right", fontsize=7)
    return save_figure(fig, path)
