"""The β study's figure (like the GG paper's Fig. 4): test accuracy against β, one line per (target ε, clipping
norm), error bars = sd over seeds, each point at its best C (:func:`opacus_gg.experiments.study.best_c`). The
y-axis spans 0–100 % (a one-test-row difference stays small to the eye), and the image says that C was tuned on
test accuracy."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Sequence

from . import pyplot, save_figure

__all__ = ["plot_beta_study", "TUNING_NOTE"]

#: printed on the figure: how each point's C was chosen, and that the choice is not in ε
TUNING_NOTE = "each point at the C with the best mean test accuracy: C tuned on test accuracy (not accounted)"


def plot_beta_study(best: Sequence[Dict[str, Any]], path: Path, title: str = "") -> Path:
    """Accuracy (%, axis 0–100) vs β: solid = ℓ2 clipping (p = 2), dashed = ℓβ clipping (p = β), one colour per
    target ε; the β = 2 point belongs to both lines; the title's last line: :data:`TUNING_NOTE`. Saves a PNG at
    ``path``."""
    plt = pyplot()

    if not best:
        raise ValueError("plot_beta_study: nothing to plot")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    epsilons = sorted({b["target_epsilon"] for b in best})
    for i, eps in enumerate(epsilons):
        for lbeta, style, marker, label in ((False, "-", "o", "ℓ2 clipping (p = 2)"),
                                            (True, "--", "s", "ℓβ clipping (p = β)")):
            pts = sorted((b for b in best if b["target_epsilon"] == eps
                          and (b["clip_norm_p"] == (b["beta"] if lbeta else 2.0))), key=lambda b: b["beta"])
            if not pts:
                continue
            ax.errorbar([b["beta"] for b in pts], [100 * b["accuracy_mean"] for b in pts],
                        yerr=[100 * b["accuracy_sd"] for b in pts], color=colours[i % len(colours)], ls=style,
                        marker=marker, ms=4, capsize=3, label=f"ε = {eps:g}, {label}")
    ax.set_xlabel("β (GG noise shape: 1 Laplace, 2 Gaussian)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"{title}\n{TUNING_NOTE}" if title else TUNING_NOTE, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return Path(save_figure(fig, path, dpi=130))
