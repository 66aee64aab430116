"""A rigorous lower bound on δ(ε) of T Poisson-subsampled 1-D GG steps, sharing no code with the library.

Post-processing can only lower every hockey-stick divergence, so the pair of laws of a binned output
(bins in x, masses from scipy's ``gennorm``) is dominated by the true pair, and so is its subsampled pair
(binning commutes with the mixture). Rounding each bin's privacy loss down to the grid h·Z lowers
δ(ε) = Σ P_i (1 − e^{ε − ℓ_i})_+ further (increasing in ℓ_i) while the P-law stays exact, and composition
is an exact (direct, no FFT) convolution of the P-laws. Hence δ_lower(ε) ≤ the true δ(ε) for every ε: a
printed proven ε with δ_lower(ε) > δ is wrong.
"""

from __future__ import annotations

import math
from typing import Tuple

import numpy as np
from scipy import optimize, stats


def lower_bound_loss_law(noise_multiplier: float, beta: float, sample_rate: float, steps: int, direction: str,
                         h: float = 2e-3, n_bins: int = 3000) -> Tuple[np.ndarray, np.ndarray]:
    """(loss grid t, P-law p) of the composed lower-bound pair (module docstring); noise GG(β, 1), shift 1/σ."""
    a, q = 1.0 / noise_multiplier, sample_rate
    law = stats.gennorm(beta, scale=beta ** (1.0 / beta))  # density ∝ exp(−|x|^β/β)
    r = (beta * 60.0) ** (1.0 / beta)
    edges = np.concatenate([[-np.inf], np.linspace(-r, r + a, n_bins), [np.inf]])

    def masses(shift: float) -> np.ndarray:
        c, s = law.cdf(edges - shift), law.sf(edges - shift)
        return np.maximum(np.where(c[1:] < 0.5, c[1:] - c[:-1], s[:-1] - s[1:]), 0.0)

    p, qm = masses(a), masses(0.0)
    keep = (p > 0) & (qm > 0)
    p, qm = p[keep], qm[keep]
    mix = (1.0 - q) * qm + q * p
    p1, q1 = (mix, qm) if direction == "remove" else (qm, mix)
    k = np.floor((np.log(p1) - np.log(q1)) / h).astype(np.int64)
    one = np.bincount(k - k.min(), weights=p1)
    law_t, off = np.array([1.0]), 0
    for _ in range(steps):
        law_t, off = np.convolve(law_t, one), off + int(k.min())
    return (np.arange(law_t.size) + off) * h, law_t


def delta_lower(t: np.ndarray, p: np.ndarray, epsilon: float) -> float:
    """δ(ε) = Σ_{t_j > ε} p_j (1 − e^{ε − t_j}) of a discrete loss law."""
    m = t > epsilon
    return float(np.sum(p[m] * -np.expm1(epsilon - t[m])))


def epsilon_lower(noise_multiplier: float, beta: float, sample_rate: float, steps: int, delta: float) -> float:
    """max over both directions of the ε where δ_lower(ε) = δ (0 if δ_lower(0) ≤ δ): every valid ε is ≥ it."""
    out = 0.0
    for direction in ("remove", "add"):
        t, p = lower_bound_loss_law(noise_multiplier, beta, sample_rate, steps, direction)
        if delta_lower(t, p, 0.0) > delta:
            out = max(out, optimize.brentq(lambda e: delta_lower(t, p, e) - delta, 0.0, float(t[-1]), xtol=1e-9))
    return out
