r"""The proven trade-off curve as a figure and a CSV (``opacus-gg tradeoff --plot/--csv``, docs/what_epsilon_means.md).

Axes: FPR α on a log scale (membership inference is judged at low FPR), the TPR bound on a log scale too. Drawn: the
proven bound (:meth:`~opacus_gg.accountants.tradeoff.TradeoffReport.tpr_upper`), the Gaussian mechanism's curve at
the same (ε, δ) (:func:`~opacus_gg.accountants.tradeoff.gaussian_mu_for`: what the ε would mean for Gaussian noise),
the μ-GDP curve of :attr:`~opacus_gg.accountants.tradeoff.TradeoffReport.mu_gdp` where one holds, the generic (ε, δ)
bound min(e^ε α + δ, 1 − e^{−ε}(1 − α − δ)), the diagonal (guessing), and any extra points (e.g. an audit's).
"""

from __future__ import annotations

import csv
import math
import os
from typing import Optional, Sequence, Tuple

import numpy as np

from ...accountants.tradeoff import TradeoffReport, gaussian_mu_for, gaussian_tpr
from ...formatting import fmt_up
from . import pyplot, save_figure

__all__ = ["plot_tradeoff", "write_tradeoff_csv", "epsilon_delta_tpr"]

#: the sources' names in a figure's title (:data:`opacus_gg.accountants.tradeoff.SOURCE_TEXT` in full)
SOURCE_SHORT = {"prv": "PRV", "prv_gaussian": "dominating Gaussian's PRV", "prv_table": "ball table's PRV",
                "rdp": "Rényi bound", "gaussian": "Gaussian closed form", "noiseless": "no noise", "empty": "no step"}
#: extra points for :func:`plot_tradeoff`: (FPRs, TPRs, label)
Points = Tuple[Sequence[float], Sequence[float], str]


def epsilon_delta_tpr(fpr: np.ndarray, epsilon: float, delta: float) -> np.ndarray:
    r"""The TPR bound of (ε, δ)-DP alone: min(1, e^ε α + δ, 1 − e^{−ε}(1 − α − δ)) (Kairouz et al. 2015)."""
    a = np.asarray(fpr, dtype=np.float64)
    if not math.isfinite(epsilon):
        return np.ones_like(a)
    return np.minimum(1.0, np.minimum(math.exp(epsilon) * a + delta, 1.0 - math.exp(-epsilon) * (1.0 - a - delta)))


def write_tradeoff_csv(report: TradeoffReport, path: str, fpr: Optional[Sequence[float]] = None, n: int = 400) -> str:
    """Write ``fpr,tpr_upper`` (full precision) on ``n`` log-spaced FPRs from the report's fpr_min to 1 and at the
    requested ``fpr``, sorted."""
    grid, _ = report.curve(n)
    a = np.unique(np.concatenate((grid, np.asarray(fpr if fpr is not None else [], dtype=np.float64))))
    tpr = report.tpr_upper(a)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["fpr", "tpr_upper"])
        w.writerows([repr(float(x)), repr(float(y))] for x, y in zip(a, tpr))
    return path


def plot_tradeoff(report: TradeoffReport, path: str, *, extra_points: Sequence[Points] = (),
                  title: Optional[str] = None, n: int = 400) -> str:
    """The curve on log-FPR axes beside the Gaussian's at the same (ε, δ), the μ-GDP curve (where one holds) and the
    (ε, δ) bound; ``extra_points``: [(fpr, tpr, label)] drawn as markers (an audit's operating points). PNG."""
    plt = pyplot()
    fpr, tpr = report.curve(n)
    fig, ax = plt.subplots(figsize=(6, 4.6))
    ax.plot(fpr, fpr, color="0.6", lw=1, ls=":", label="guessing (TPR = FPR)")
    ax.plot(fpr, tpr, color="tab:blue", lw=2.5, label=f"proven TPR bound ({report.scope_text})")
    eps, delta = report.epsilon, report.delta
    if math.isfinite(eps):
        ax.plot(fpr, epsilon_delta_tpr(fpr, eps, delta), color="0.3", lw=1, ls="--",
                label=f"any (ε, δ)-DP mechanism, ε = {fmt_up(eps, 3)}")
        mu_g = gaussian_mu_for(eps, delta)
        ax.plot(fpr, gaussian_tpr(fpr, mu_g), color="tab:orange", lw=1.2, ls=(0, (4, 2)),
                label=f"Gaussian mechanism at the same (ε, δ): μ = {mu_g:.3g}")
    mu = report.mu_gdp
    if mu is not None and report.gaussian_mu is None:
        ax.plot(fpr, gaussian_tpr(fpr, mu), color="tab:green", lw=1, ls="-.",
                label=f"μ-GDP curve above the bound: μ = {fmt_up(mu, 3)}")
    markers, colors = "os^Dv<>", ("k", "tab:red", "tab:purple", "tab:brown")  # not the curves' colours
    for i, (xs, ys, label) in enumerate(extra_points):
        ax.plot(list(xs), list(ys), ls="none", marker=markers[i % len(markers)], color=colors[i % len(colors)],
                ms=6 if len(xs) <= 50 else 2.5, label=label)  # an audit's ROC has one point per canary: small
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(fpr[0], 1.0)
    ax.set_ylim(fpr[0], 1.05)
    ax.set_xlabel("false-positive rate of a membership-inference attack")
    ax.set_ylabel("true-positive rate (upper bound)")
    ax.set_title(title or f"What ε ≤ {fmt_up(eps, 3)} at δ = {delta:g} means for membership inference\n"
                          f"(curve from: {', '.join(SOURCE_SHORT.get(s, s) for s in report.sources)})", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3, which="both")
    return save_figure(fig, path)
