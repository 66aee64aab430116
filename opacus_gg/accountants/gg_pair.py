r"""The one-coordinate GG privacy pair: loss ℓ_a, its inverse, and exact hockey-stick curves.

Units: noise GG(β, 1) per coordinate (density ∝ exp(-|x|^β/β)), shift a per coordinate.
Q = GG at 0, P = GG at a, privacy loss

    ℓ_a(x) = log P(x)/Q(x) = (|x|^β − |x − a|^β)/β,   non-decreasing in x (strictly for β > 1;
    for β = 1 it is −a on x ≤ 0, 2x − a on (0, a), a on x ≥ a: atoms at ±a).

Every pair exposes the hockey-stick divergences, for α ≥ 0,

    H_pq(α) = ∫ (P − αQ)_+ = P(ℓ > log α) − α Q(ℓ > log α),
    H_qp(α) = ∫ (Q − αP)_+,

which determine the pair up to Blackwell equivalence. :class:`GGPair` evaluates them exactly from the
GG survival function :func:`opacus_gg.distribution.sf` (the one GG tail function of the library).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
from scipy import special

from ..distribution import cdf as gg_cdf
from ..distribution import sf as gg_sf

__all__ = ["GGPair", "inverse_loss", "loss", "TAIL_MASS"]

#: mass below which tails of exact laws are cut (cut mass is moved pessimistically)
TAIL_MASS = 1e-30


def loss(x: np.ndarray, a: float, beta: float) -> np.ndarray:
    """ℓ_a(x) = (|x|^β − |x − a|^β)/β."""
    return (np.abs(x) ** beta - np.abs(x - a) ** beta) / beta


def _dloss(x: np.ndarray, a: float, beta: float) -> np.ndarray:
    """ℓ_a'(x) = sign(x)|x|^{β−1} − sign(x−a)|x−a|^{β−1} (> 0 for β > 1)."""
    b1 = beta - 1.0
    return np.sign(x) * np.abs(x) ** b1 - np.sign(x - a) * np.abs(x - a) ** b1


def inverse_loss(t: np.ndarray, a: float, beta: float) -> np.ndarray:
    r"""x*(t) = sup{x : ℓ_a(x) ≤ t} (±∞ outside the range of ℓ_a), vectorized.

    β = 2: x* = (t + a²/2)/a. β = 1: −∞ for t < −a, (t + a)/2 on [−a, a), +∞ for t ≥ a.
    Otherwise a safeguarded Newton iteration on a bracket (ℓ_a is strictly increasing).
    """
    t = np.asarray(t, dtype=np.float64)
    if beta == 2.0:
        return (t + 0.5 * a * a) / a
    if beta == 1.0:
        x = (t + a) / 2.0
        x = np.where(t < -a, -np.inf, x)
        return np.where(t >= a, np.inf, x)
    flat = t.ravel()
    n = flat.size
    if n > 4 * _ANCHOR_STRIDE and np.all(np.isfinite(flat)) and np.all(flat[1:] >= flat[:-1]):
        # sorted input (the composition grids): solve every _ANCHOR_STRIDE-th point, then each point
        # by the same safeguarded Newton iteration inside the exact bracket of its two anchors
        # (x* is non-decreasing in t), warm-started by linear interpolation: same tolerance, fewer steps
        ia = np.unique(np.concatenate([np.arange(0, n, _ANCHOR_STRIDE), [n - 1]]))
        xa = inverse_loss(flat[ia], a, beta)
        j = np.minimum(np.searchsorted(ia, np.arange(n), side="right") - 1, ia.size - 2)
        l_idx, r_idx = ia[j], ia[j + 1]
        lo = xa[j] - 1e-12 * (1.0 + np.abs(xa[j]))  # ℓ(lo) < t_left ≤ t
        hi = xa[j + 1] + 1e-12 * (1.0 + np.abs(xa[j + 1]))  # ℓ(hi) > t_right ≥ t
        dt = flat[r_idx] - flat[l_idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(dt > 0, (flat - flat[l_idx]) / dt, 0.5)
        x = xa[j] + w * (xa[j + 1] - xa[j])
        x = np.clip(x, lo, hi)
        return _newton(flat, x, lo, hi, a, beta).reshape(t.shape)
    x = np.full(flat.shape, 0.5 * a)
    lo = np.full(flat.shape, 0.5 * a)
    hi = np.full(flat.shape, 0.5 * a)
    pos = flat > 0
    # bracket: ℓ(a/2) = 0; expand geometrically
    step = 1.0
    for _ in range(200):
        need = pos & (loss(hi, a, beta) < flat)
        if not need.any():
            break
        hi = np.where(need, 0.5 * a + step, hi)
        step *= 2.0
    step = 1.0
    for _ in range(200):
        need = (~pos) & (loss(lo, a, beta) > flat)
        if not need.any():
            break
        lo = np.where(need, 0.5 * a - step, lo)
        step *= 2.0
    lo = np.where(pos, np.where(hi > 0.5 * a, np.maximum(0.5 * a, 0.5 * a + 0.5 * (hi - 0.5 * a)), lo), lo)
    lo = np.where(pos, np.where(loss(lo, a, beta) > flat, 0.5 * a, lo), lo)
    hi = np.where(~pos, np.where(lo < 0.5 * a, np.minimum(0.5 * a, 0.5 * a - 0.5 * (0.5 * a - lo)), hi), hi)
    hi = np.where(~pos, np.where(loss(hi, a, beta) < flat, 0.5 * a, hi), hi)
    x = 0.5 * (lo + hi)
    return _newton(flat, x, lo, hi, a, beta).reshape(t.shape)


#: anchor spacing of the warm-started inverse on sorted grids
_ANCHOR_STRIDE = 32


def _newton(flat, x, lo, hi, a, beta):
    """Safeguarded Newton for ℓ_a(x) = t on brackets lo ≤ x* ≤ hi (bisection when a step leaves them)."""
    active = np.ones(flat.shape, dtype=bool)
    for _ in range(200):
        idx = np.nonzero(active)[0]
        if idx.size == 0:
            break
        xi, li, hii, ti = x[idx], lo[idx], hi[idx], flat[idx]
        f = loss(xi, a, beta) - ti
        li = np.where(f <= 0, xi, li)
        hii = np.where(f > 0, xi, hii)
        d = _dloss(xi, a, beta)
        with np.errstate(divide="ignore", invalid="ignore"):
            xn = xi - f / d
        bad = ~np.isfinite(xn) | (xn <= li) | (xn >= hii)
        xn = np.where(bad, 0.5 * (li + hii), xn)
        done = (np.abs(xn - xi) <= 1e-14 * (1.0 + np.abs(xi))) | (hii - li <= 1e-15 * (1.0 + np.abs(xi)))
        x[idx], lo[idx], hi[idx] = xn, li, hii
        active[idx[done]] = False
    return x


def _safe_log(alpha: np.ndarray, pos: np.ndarray, log_alpha: Optional[np.ndarray]) -> np.ndarray:
    """log α where α > 0 (0 elsewhere); a precomputed ``log_alpha`` (shared by all shapes) is used as is."""
    if log_alpha is None:
        return np.log(np.where(pos, alpha, 1.0))
    return np.where(pos, log_alpha, 0.0)


@dataclass(frozen=True)
class GGPair:
    """One coordinate: P = GG(β, 1) shifted by ``a`` > 0, Q = GG(β, 1); exact hockey-stick curves."""

    a: float
    beta: float

    def cdf_pq(self, t: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(P(ℓ ≤ t), Q(ℓ ≤ t)) via x*(t): P(ℓ ≤ t) = F(x* − a), Q(ℓ ≤ t) = F(x*)."""
        x = inverse_loss(t, self.a, self.beta)
        return gg_cdf(x - self.a, self.beta, 1.0), gg_cdf(x, self.beta, 1.0)

    def sf_pq(self, t: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(P(ℓ > t), Q(ℓ > t)) from the survival function (accurate in the upper tail)."""
        x = inverse_loss(t, self.a, self.beta)
        return gg_sf(x - self.a, self.beta, 1.0), gg_sf(x, self.beta, 1.0)

    def h_pq(self, alpha: np.ndarray, log_alpha: Optional[np.ndarray] = None) -> np.ndarray:
        r"""H_α(P‖Q) = P(ℓ > log α) − α Q(ℓ > log α); = 1 − α for α ≤ 0 (``log_alpha``: log α if known)."""
        alpha = np.asarray(alpha, dtype=np.float64)
        pos = alpha > 0
        t = _safe_log(alpha, pos, log_alpha)
        sp, sq = self.sf_pq(t)
        h = np.maximum(sp - alpha * sq, 0.0)
        return np.where(pos, h, 1.0 - alpha)

    def h_qp(self, alpha: np.ndarray, log_alpha: Optional[np.ndarray] = None) -> np.ndarray:
        r"""H_α(Q‖P) = H_α(P‖Q) by the reflection x ↦ a − x, which swaps P and Q."""
        return self.h_pq(alpha, log_alpha)

    def loss_window(self) -> Tuple[float, float]:
        """Loss values outside of which both P and Q carry < TAIL_MASS."""
        if self.beta == 1.0:
            return -self.a, self.a
        # |X| > r has mass Q(1/β, r^β/β); choose r with this below TAIL_MASS
        r = (self.beta * special.gammainccinv(1.0 / self.beta, TAIL_MASS)) ** (1.0 / self.beta)
        lo = float(loss(np.array(-r), self.a, self.beta))
        hi = float(loss(np.array(self.a + r), self.a, self.beta))
        return lo, hi
