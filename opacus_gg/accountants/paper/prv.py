r"""The empirical privacy random variable of paper mode and the Monte Carlo losses it is built from.

One-hot loss under P: ℓ_P = (|z + a|^β − |z|^β)/β, z ~ GG(β, 1), a = 1/σ; one Poisson-subsampled step
(remove direction): Y = log(1 − q + q e^ℓ), ℓ ~ ℓ_P w.p. q and ℓ ~ −ℓ_P w.p. 1 − q.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from scipy.special import logsumexp

from ...distribution import sample as gg_sample
from ...validation import validate_beta, validate_positive, validate_positive_int, validate_sample_rate

__all__ = ["DEFAULT_N_SAMPLES", "EmpiricalPRV", "one_hot_loss_samples", "sampled_prv", "prv_from_losses", "draw_losses"]

DEFAULT_N_SAMPLES = 1_000_000


@dataclass(frozen=True)
class EmpiricalPRV:
    r"""A discrete privacy random variable given by sorted atoms ``values`` with probabilities ``weights``.

    cdf(t) = Σ_{v_j ≤ t} w_j (right-continuous, non-decreasing); mean() = Σ_j w_j v_j. This is the interface
    Opacus's ``discretize`` needs. ``truncated(t_min, t_max)`` keeps the atoms in [t_min, t_max] and
    renormalizes (Gopi et al.'s truncation).
    """

    values: np.ndarray
    weights: np.ndarray

    @functools.cached_property
    def _cum(self) -> np.ndarray:
        return np.cumsum(self.weights)

    def cdf(self, t) -> np.ndarray:
        """F(t) = Σ_{v_j ≤ t} w_j."""
        idx = np.searchsorted(self.values, np.asarray(t, dtype=np.float64), side="right")
        cum = np.concatenate([[0.0], self._cum])
        return np.minimum(cum[idx], 1.0)

    def mean(self) -> float:
        """E[Y] = Σ_j w_j v_j."""
        return float(np.dot(self.values, self.weights))

    def std(self) -> float:
        """sd(Y) = (Σ_j w_j (v_j - E Y)²)^{1/2}."""
        m = self.mean()
        return float(math.sqrt(max(np.dot(self.weights, (self.values - m) ** 2), 0.0)))

    def log_mgf(self, lam: np.ndarray, bins: int = 4096) -> np.ndarray:
        """An upper bound on K(λ) = log Σ_j w_j e^{λ v_j} for each λ in ``lam``.

        Atoms are binned on ``bins`` equal cells and moved to the cell edge that increases e^{λv}
        (right edge for λ > 0, left edge for λ < 0), so the Chernoff bounds built on it stay valid.
        """
        lam = np.atleast_1d(np.asarray(lam, dtype=np.float64))
        v0, v1 = float(self.values[0]), float(self.values[-1])
        if v1 - v0 <= 0:
            return lam * v0
        edges = np.linspace(v0, v1, bins + 1)
        cum = np.concatenate([[0.0], self._cum])
        mass = np.diff(cum[np.searchsorted(self.values, edges, side="right")])
        mass[0] += float(self.cdf(v0))  # atoms sitting exactly on the first edge
        with np.errstate(divide="ignore"):
            logw = np.log(np.maximum(mass, 0.0))
        right, left = edges[1:], edges[:-1]
        return np.array([logsumexp(l * (right if l > 0 else left) + logw) for l in lam])

    def delta(self, epsilon: float) -> float:
        """δ(ε) = E[(1 - e^{ε - Y})_+] of this discrete PRV."""
        m = self.values > epsilon
        return float(np.dot(self.weights[m], -np.expm1(epsilon - self.values[m])))

    def truncated(self, t_min: float, t_max: float) -> "EmpiricalPRV":
        """Atoms in [t_min, t_max], renormalized to total mass 1."""
        lo = np.searchsorted(self.values, t_min, side="left")
        hi = np.searchsorted(self.values, t_max, side="right")
        w = self.weights[lo:hi]
        if w.sum() <= 0:
            raise ValueError("truncation removed all the mass of the sampled PRV")
        return EmpiricalPRV(self.values[lo:hi], w / w.sum())

    def trimmed(self, mass: float, side: str) -> "EmpiricalPRV":
        """Remove the lowest (``side="low"``) or highest (``"high"``) ``mass`` of probability, renormalize.

        Used for the DKW envelopes: F⁺ = max(F_n - r, 0) is "trim the low r, put r at +∞";
        F⁻ = min(F_n + r, 1) is "trim the high r, put r at -∞".
        """
        if not (0.0 <= mass < 1.0):
            raise ValueError(f"mass must be in [0, 1), got {mass}")
        v, w = self.values, self.weights.copy()
        if side == "high":
            v, w = v[::-1], w[::-1]
        elif side != "low":
            raise ValueError(f"side must be 'low' or 'high', got {side!r}")
        cum = np.cumsum(w)
        k = int(np.searchsorted(cum, mass, side="right"))  # atoms 0..k-1 removed whole
        removed = cum[k - 1] if k > 0 else 0.0
        w = w[k:].copy()
        v = v[k:]
        w[0] -= mass - removed  # partial removal of the boundary atom
        if side == "high":
            v, w = v[::-1], w[::-1]
        keep = w > 0
        v, w = v[keep], w[keep]
        return EmpiricalPRV(np.ascontiguousarray(v), np.ascontiguousarray(w / w.sum()))


@functools.lru_cache(maxsize=16)
def _loss_samples_cached(noise_multiplier: float, beta: float, n_samples: int, seed: int) -> np.ndarray:
    loss = draw_losses(noise_multiplier, beta, n_samples, seed)
    loss.setflags(write=False)
    return loss


def one_hot_loss_samples(noise_multiplier: float, beta: float, n_samples: int = DEFAULT_N_SAMPLES,
                         seed: int = 0) -> np.ndarray:
    r"""n sorted samples of the one-hot, non-subsampled privacy loss under P.

    ℓ_P = (|z + a|^β - |z|^β)/β, z ~ GG(β, 1) (``opacus_gg.distribution.sample`` with a torch generator seeded
    by ``seed``), a = 1/noise_multiplier. Read-only array; cached on (σ, β, n, seed).
    """
    return _loss_samples_cached(
        validate_positive(noise_multiplier, "noise_multiplier"),
        validate_beta(beta),
        validate_positive_int(n_samples, "n_samples", minimum=1000),
        int(seed),
    )


def prv_from_losses(loss: np.ndarray, sample_rate: float, weights: Optional[np.ndarray] = None) -> EmpiricalPRV:
    """Atoms of Y = log(1-q+q e^ℓ): ℓ = ℓ_P with weight q·w_i and ℓ = -ℓ_P with weight (1-q)·w_i (Σ w_i = 1).

    ``loss`` is sorted; ``weights`` (default uniform 1/n) are per-sample, renormalized.
    """
    q = sample_rate
    n = loss.size
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=np.float64) / np.sum(weights)
    if q == 1.0:
        keep = w > 0
        return EmpiricalPRV(np.ascontiguousarray(loss[keep], dtype=np.float64), np.ascontiguousarray(w[keep]))
    log1mq, logq = math.log1p(-q), math.log(q)
    y_p = np.logaddexp(log1mq, logq + loss)  # sorted increasing
    y_q = np.logaddexp(log1mq, logq - loss[::-1])  # sorted increasing
    values = np.concatenate([y_p, y_q])
    weights_all = np.concatenate([q * w, (1.0 - q) * w[::-1]])
    keep = weights_all > 0
    values, weights_all = values[keep], weights_all[keep]
    order = np.argsort(values, kind="mergesort")
    return EmpiricalPRV(values[order], weights_all[order])


def sampled_prv(noise_multiplier: float, sample_rate: float, beta: float,
                n_samples: int = DEFAULT_N_SAMPLES, seed: int = 0) -> EmpiricalPRV:
    r"""The paper's sampled PRV of one Poisson-subsampled GG step (remove direction, one-hot).

    Y = log(1 - q + q e^{ℓ}) with ℓ ~ ℓ_P w.p. q and ℓ ~ -ℓ_P w.p. 1-q, as an empirical distribution of 2n atoms.
    """
    loss = one_hot_loss_samples(noise_multiplier, beta, n_samples, seed)
    return prv_from_losses(loss, validate_sample_rate(sample_rate))


def draw_losses(noise_multiplier: float, beta: float, n: int, seed: int) -> np.ndarray:
    """n sorted one-hot losses ℓ_P from an independent generator seeded by ``seed`` (not cached)."""
    gen = torch.Generator().manual_seed(int(seed))
    z = gg_sample((n,), beta, 1.0, generator=gen, dtype=torch.float64).numpy()
    a = 1.0 / noise_multiplier
    loss = (np.abs(z + a) ** beta - np.abs(z) ** beta) / beta
    loss.sort()
    return loss
