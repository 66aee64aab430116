r"""Outlier probabilities of equally private GG mechanisms (paper Appendix B.5, Figure 5).

For GG(β, s) noise, s = noise_multiplier × max_grad_norm, the probability that one coordinate is an outlier
beyond the threshold τ is the two-sided tail

    p(τ) = P(|Y| > τ) = 2·sf(τ) = Q(1/β, τ^β / (β s^β))       (Q: regularized upper incomplete gamma),

and over ``dim`` independent coordinates P(any |Y_i| > τ) = 1 - (1 - p)^d. Mechanisms are made "equally private"
by solving, per β, the certified σ that reaches (target_epsilon, target_delta) with the accountant (with or
without Poisson subsampling), so every σ used here is a certified calibration.
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
from scipy import stats

from ... import distribution
from ...validation import (validate_beta, validate_delta, validate_noise_multiplier, validate_positive_int,
                           validate_scale)
from . import pyplot, save_figure

__all__ = [
    "outlier_probability",
    "outlier_probability_mc",
    "OutlierRow",
    "outlier_curve",
    "write_csv",
    "plot_outlier_curves",
]


def _scale(noise_multiplier: float, max_grad_norm: float) -> float:
    """s = σ·C: σ by the one rule for noise parameters (:func:`opacus_gg.validation.validate_noise_multiplier`),
    C > 0, and the product finite."""
    sigma = validate_noise_multiplier(noise_multiplier, allow_zero=False)
    return validate_scale(sigma * validate_scale(max_grad_norm, "max_grad_norm"), "noise_multiplier·max_grad_norm")


def _validate_threshold(threshold) -> np.ndarray:
    t = np.asarray(threshold, dtype=np.float64)
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError(f"threshold must be finite and ≥ 0, got {threshold!r}")
    return t


def outlier_probability(
    threshold, beta: float, noise_multiplier: float, *, max_grad_norm: float = 1.0, dim: int = 1
) -> np.ndarray:
    r"""P(outlier) = 1 - (1 - 2·sf(τ; β, s))^d, s = noise_multiplier × max_grad_norm (d = 1: one coordinate).

    Computed as -expm1(d·log1p(-p)) so tiny probabilities keep their precision.
    """
    t = _validate_threshold(threshold)
    scale = _scale(noise_multiplier, max_grad_norm)
    d = validate_positive_int(dim, "dim", allow_float=False)
    p = np.minimum(2.0 * distribution.sf(t, beta, scale), 1.0)
    if d == 1:
        return p
    with np.errstate(divide="ignore"):
        return -np.expm1(d * np.log1p(-p))


def outlier_probability_mc(
    threshold: float,
    beta: float,
    noise_multiplier: float,
    *,
    max_grad_norm: float = 1.0,
    n_samples: int = 1_000_000,
    generator: Optional[torch.Generator] = None,
    confidence: float = 0.999,
) -> Tuple[float, float, float]:
    r"""Monte Carlo estimate of P(|Y| > τ) from :func:`distribution.sample`, with a Clopper–Pearson interval.

    Returns (p̂, lower, upper), p̂ = #{|Y_i| > τ}/n. A Monte Carlo estimate, not an exact value.
    """
    t = float(_validate_threshold(threshold))
    n = validate_positive_int(n_samples, "n_samples", allow_float=False)
    confidence = validate_delta(confidence, "confidence")  # a probability in (0, 1)
    scale = _scale(noise_multiplier, max_grad_norm)
    y = distribution.sample((n,), beta, scale, generator=generator, dtype=torch.float64)
    k = int((y.abs() > t).sum())
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return k / n, float(ci.low), float(ci.high)


@dataclass
class OutlierRow:
    """One point of an outlier curve: the σ certified for (ε, δ) at this β and its tail probabilities."""

    beta: float
    noise_multiplier: float
    target_epsilon: float
    target_delta: float
    sample_rate: float
    steps: int
    dim: int
    threshold: float
    p_outlier: float  # one coordinate: P(|Y| > τ)
    p_any: float  # P(any of dim coordinates beyond τ)


def outlier_curve(
    *,
    betas: Sequence[float],
    thresholds: Sequence[float],
    target_epsilon: float,
    target_delta: float,
    sample_rate: float = 1.0,
    steps: int = 1,
    dim: int = 1,
    clip_norm_p: Optional[float] = None,
    max_grad_norm: float = 1.0,
) -> List[OutlierRow]:
    r"""Tail probabilities of GG mechanisms of equal certified (ε, δ), one σ per β.

    σ_β = accountants.get_noise_multiplier(target_epsilon, target_delta, sample_rate, steps, β, dim, clip_norm_p)
    (sample_rate = 1, steps = 1: the plain GG mechanism; q < 1: the Poisson-subsampled SGG composed ``steps``
    times), then p = :func:`outlier_probability` (τ, β, σ_β) for each τ in ``thresholds`` (units of the noise,
    i.e. absolute values when ``max_grad_norm`` = sensitivity = 1).
    """
    from ... import accountants

    betas = [validate_beta(b) for b in betas]
    if not betas:
        raise ValueError("betas must contain at least one value ≥ 1")
    ts = [float(x) for x in _validate_threshold(list(thresholds))]
    if not ts:
        raise ValueError("thresholds must contain at least one value ≥ 0")
    d = validate_positive_int(dim, "dim", allow_float=False)
    rows: List[OutlierRow] = []
    for b in betas:
        sigma = float(
            accountants.get_noise_multiplier(
                target_epsilon=target_epsilon, target_delta=target_delta, sample_rate=sample_rate, steps=steps,
                beta=b, dim=d, clip_norm_p=clip_norm_p,
            )
        )
        p1 = outlier_probability(ts, b, sigma, max_grad_norm=max_grad_norm)
        pd = outlier_probability(ts, b, sigma, max_grad_norm=max_grad_norm, dim=d)
        for t, a, c in zip(ts, p1, pd):
            rows.append(OutlierRow(b, sigma, float(target_epsilon), float(target_delta), float(sample_rate),
                                   int(steps), d, t, float(a), float(c)))
    return rows


def write_csv(rows: Iterable, path: str) -> None:
    """Write dataclass rows (or dicts) to ``path`` as CSV with a header."""
    dict_rows: List[Dict] = [r if isinstance(r, dict) else asdict(r) for r in rows]
    if not dict_rows:
        raise ValueError("no rows to write")
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(dict_rows[0]))
        writer.writeheader()
        writer.writerows(dict_rows)


def plot_outlier_curves(panels: Dict[str, List[OutlierRow]], path: str) -> None:
    """PNG with one panel per setting: log P(|Y| > τ) against β, one line per threshold τ (Figure 5)."""
    plt = pyplot()

    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (title, rows) in zip(axes[0], panels.items()):
        for t in sorted({r.threshold for r in rows}):
            pts = sorted((r.beta, r.p_any) for r in rows if r.threshold == t)
            ax.semilogy([p[0] for p in pts], [max(p[1], 1e-300) for p in pts], marker="o", label=f"τ = {t:g}")
        ax.set_xlabel("β")
        ax.set_ylabel("P(outlier)" + (f" (any of {rows[0].dim})" if rows and rows[0].dim > 1 else ""))
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    save_figure(fig, path)


def default_panels(
    *, betas: Sequence[float], thresholds: Sequence[float], target_epsilon: float, target_delta: float,
    sample_rate: float = 0.01, steps: int = 100, dim: int = 1,
) -> Dict[str, List[OutlierRow]]:
    """Figure 5's two settings: the GG mechanism (q = 1, one step) and the SGG (``sample_rate``, ``steps``)."""
    eps_txt = f"certified ({target_epsilon:g}, {target_delta:g})-DP"
    panels = {f"GG mechanism, {eps_txt}": outlier_curve(
        betas=betas, thresholds=thresholds, target_epsilon=target_epsilon, target_delta=target_delta, dim=dim)}
    if sample_rate < 1.0 or steps > 1:
        panels[f"SGG q={sample_rate:g}, {steps} steps, {eps_txt}"] = outlier_curve(
            betas=betas, thresholds=thresholds, target_epsilon=target_epsilon, target_delta=target_delta,
            sample_rate=sample_rate, steps=steps, dim=dim)
    return panels

