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
from ..distribution import log_prob as gg_log_prob
from ..distribution import sf as gg_sf
from .checks import UNIT_ROUNDOFF, AccountingError, check_finite

__all__ = ["GGPair", "inverse_loss", "loss", "TAIL_MASS", "SF_RTOL", "SF_ATOL", "sf_relative_error"]

#: mass below which tails of exact laws are cut (cut mass is moved pessimistically)
TAIL_MASS = 1e-30


def loss(x: np.ndarray, a: float, beta: float) -> np.ndarray:
    r"""ℓ_a(x) = (|x|^β − |x − a|^β)/β, without cancellation outside [0, a].

    For x > a: |x|^β − |x − a|^β = −x^β · expm1(β·log1p(−a/x)); for x < 0 its mirror image; near a/2
    (|x − a/2| ≤ a/4) the atanh form below. Each is accurate to a few ulp of ℓ, where the naive difference of
    two powers loses log10(x/a) digits (all of them as β → 1 and x → ∞) or, near a/2, log10(a^β/|ℓ|).
    """
    x = np.asarray(x, dtype=np.float64)
    out = np.empty(x.shape)
    mid = (x >= 0) & (x <= a)
    xm = x[mid]
    # on [0, a], with c = a/2, y = x − c, u = |y|/c: (c + |y|)^β − (c − |y|)^β = (c − |y|)^β·expm1(2β·atanh u)
    # (relative accuracy near the centre, where the two powers cancel); the plain difference for u > 1/2
    c = 0.5 * a
    y = xm - c
    u = np.abs(y) / c
    near = u <= 0.5
    out_m = (xm ** beta - (a - xm) ** beta) / beta
    un = u[near]
    out_m[near] = np.sign(y[near]) * (c - np.abs(y[near])) ** beta * np.expm1(2.0 * beta * np.arctanh(un)) / beta
    out[mid] = out_m
    hi = x > a
    xh = x[hi]
    out[hi] = -(xh ** beta) * np.expm1(beta * np.log1p(-a / xh)) / beta
    lo = x < 0
    xl = -x[lo]
    out[lo] = (xl ** beta) * np.expm1(beta * np.log1p(a / xl)) / -beta
    nan = np.isnan(x)
    out[nan] = np.nan
    return out


def _dloss(x: np.ndarray, a: float, beta: float) -> np.ndarray:
    """ℓ_a'(x) = sign(x)|x|^{β−1} − sign(x−a)|x−a|^{β−1} (> 0 for β > 1)."""
    b1 = beta - 1.0
    return np.sign(x) * np.abs(x) ** b1 - np.sign(x - a) * np.abs(x - a) ** b1


#: x*(t) is solved on [a/2, a + R] (t > 0; mirrored for t < 0) with R^β/β = SATURATION_LOG: beyond, the loss
#: is "saturated" (both laws carry < e^{−SATURATION_LOG}/2 there, docs/accounting.md, Lemma R1)
SATURATION_LOG = 800.0
#: residual allowed of a root: |ℓ_a(x) − t| ≤ RESIDUAL_TOL·(1 + |t|) + 1e-14·|x|·ℓ_a'(x) (checked; Lemma R1)
RESIDUAL_TOL = 1e-12


#: relative error assumed of :func:`opacus_gg.distribution.sf` at an exactly represented argument, per unit of
#: 1 + z/800, z = |x|^β/β (scipy's incomplete gamma functions, ``ndtr`` at β = 2, ``exp`` at β = 1, and the rounding of
#: z inside): measured ≤ 2.3e-13 against 40-digit mpmath over 23 β ∈ [1, 64], z ∈ [1e-14, 800], both signs
#: (docs/accounting.md, Lemma R9; tests/test_gg_pair_roundoff.py keeps a sample); ~10× that. An assumption checked by
#: measurement, not a proof.
SF_RTOL = 2e-12
#: absolute error assumed of the same where the value is below the normal range (subnormal results, flushes to 0):
#: measured ≤ 2.2e-304
SF_ATOL = 1e-300
_U = UNIT_ROUNDOFF


def sf_relative_error(x: np.ndarray, beta: float, argument_rounded: bool) -> np.ndarray:
    r"""ρ(x): a bound on |sf_computed − sf(x)|/sf(x) where ``sf`` is :func:`opacus_gg.distribution.sf` with scale 1:
    SF_RTOL·(1 + z/800), plus β(z + 1)·u·1.01 when the argument is itself the rounded result of one subtraction
    (fl(x − a): relative error ≤ u in x, and |d log sf/d log x| ≤ β(z + 1), z = |x|^β/β, Lemma R9)."""
    z = np.abs(x) ** beta / beta
    rho = SF_RTOL * (1.0 + z / 800.0)
    if argument_rounded:
        rho = rho + 1.01 * beta * (z + 1.0) * _U
    return np.where(np.isfinite(x), rho, 0.0)


def saturation_point(a: float, beta: float) -> float:
    r"""X_max = a + R, R = (β · SATURATION_LOG)^{1/β}: P(X > X_max) = Q(X > X_max − a) ≤ e^{−800}/2 for both laws."""
    return a + (beta * SATURATION_LOG) ** (1.0 / beta)


def inverse_loss(t: np.ndarray, a: float, beta: float) -> np.ndarray:
    r"""x*(t) = sup{x : ℓ_a(x) ≤ t} (±∞ outside the range of ℓ_a), vectorized.

    β = 2: x* = t/a + a/2. β = 1: −∞ for t < −a, (t + a)/2 on [−a, a), +∞ for t ≥ a.
    Otherwise ℓ_a is strictly increasing and odd about a/2 (ℓ_a(a − x) = −ℓ_a(x)), so x*(−t) = a − x*(t) and
    only t ≥ 0 is solved, on the fixed bracket [a/2, X_max] (:func:`saturation_point`) by a safeguarded
    Newton iteration (geometric bisection in x − a/2 when a step leaves the bracket). Where t > ℓ_a(X_max)
    (the saturated region: as β → 1, ℓ_a grows like a·x^{β−1} and x* can exceed any float) x* = +∞ is
    returned; the mass that this moves is < e^{−800} (Lemma R1). The residual |ℓ_a(x*) − t| is checked:
    :class:`.checks.AccountingError` if it exceeds RESIDUAL_TOL·(1 + |t|) + 1e-14·|x|·ℓ_a'(x).
    """
    t = np.asarray(t, dtype=np.float64)
    if beta == 2.0:
        return t / a + 0.5 * a  # not (t + a²/2)/a: a² overflows for a > 1e154 (x* = +∞ would read P(ℓ > t) = 0)
    if beta == 1.0:
        x = (t + a) / 2.0
        x = np.where(t < -a, -np.inf, x)
        return np.where(t >= a, np.inf, x)
    flat = t.ravel()
    check_finite(flat, f"privacy-loss levels of the GG pair (a={a}, beta={beta})")
    x_max = saturation_point(a, beta)
    t_max = float(loss(np.array([x_max]), a, beta)[0])
    s = np.abs(flat)
    x = np.full(flat.shape, np.inf)
    inside = s <= t_max
    if inside.any():
        x[inside] = _solve_nonneg(s[inside], a, beta, x_max)
    x = np.where(flat < 0, a - x, x)  # mirror (a − ∞ = −∞)
    fin = np.isfinite(x)
    res = np.abs(loss(x[fin], a, beta) - flat[fin])
    # |t| on the scale of t, plus 1e-14·|x|·ℓ'(x): the change of ℓ over ~50 ulp of x (steep ℓ, large β)
    tol = RESIDUAL_TOL * (1.0 + np.abs(flat[fin])) + 1e-14 * np.abs(x[fin]) * np.abs(_dloss(x[fin], a, beta))
    if not np.all(res <= tol):
        i = int(np.argmax(res - tol))
        raise AccountingError(
            f"inverse privacy loss of the GG pair (beta={beta}, shift a={a}) did not converge: at loss "
            f"{flat[fin][i]!r} the residual is {res[i]:.3g} > {tol[i]:.3g}; try a noise_multiplier or beta "
            "slightly different")
    return x.reshape(t.shape)


def _solve_nonneg(s: np.ndarray, a: float, beta: float, x_max: float) -> np.ndarray:
    """x ∈ [a/2, x_max] with ℓ_a(x) = s for 0 ≤ s ≤ ℓ_a(x_max): warm-started on sorted input."""
    n = s.size
    order = None
    if n > 4 * _ANCHOR_STRIDE:
        if not np.all(s[1:] >= s[:-1]):
            order = np.argsort(s, kind="stable")
            s = s[order]
        # solve every _ANCHOR_STRIDE-th point, then each point by the same safeguarded Newton iteration
        # inside the bracket of its two anchors (x* is non-decreasing in t), warm-started by linear
        # interpolation: same tolerance, fewer steps
        ia = np.unique(np.concatenate([np.arange(0, n, _ANCHOR_STRIDE), [n - 1]]))
        xa = _solve_nonneg(s[ia], a, beta, x_max)
        j = np.minimum(np.searchsorted(ia, np.arange(n), side="right") - 1, ia.size - 2)
        l_idx, r_idx = ia[j], ia[j + 1]
        lo = np.maximum(xa[j] - 1e-12 * (1.0 + np.abs(xa[j])), 0.5 * a)  # ℓ(lo) ≤ s_left ≤ s
        hi = np.minimum(xa[j + 1] + 1e-12 * (1.0 + np.abs(xa[j + 1])), x_max)  # ℓ(hi) ≥ s_right ≥ s
        ds = s[r_idx] - s[l_idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.where(ds > 0, (s - s[l_idx]) / ds, 0.5)
        x = np.clip(xa[j] + w * (xa[j + 1] - xa[j]), lo, hi)
        x = _newton(s, x, lo, hi, a, beta)
    else:
        lo = np.full(n, 0.5 * a)
        hi = np.full(n, x_max)
        # start: the tangent at a/2 (ℓ(a/2) = 0), inside the bracket
        x = np.clip(0.5 * a + s / _dloss(np.array([0.5 * a]), a, beta)[0], lo, hi)
        x = _newton(s, x, lo, hi, a, beta)
    if order is not None:
        out = np.empty(n)
        out[order] = x
        return out
    return x


#: anchor spacing of the warm-started inverse on sorted grids
_ANCHOR_STRIDE = 32


def _newton(flat, x, lo, hi, a, beta):
    """Safeguarded Newton for ℓ_a(x) = t on brackets lo ≤ x* ≤ hi (a/2 ≤ lo): a step leaving the bracket is
    replaced by bisection, geometric in x − a/2 while the bracket spans more than a factor 4 there."""
    active = np.ones(flat.shape, dtype=bool)
    c = 0.5 * a
    for _ in range(300):
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
        yl, yh = li - c, hii - c
        geo = (yl > 0) & (yh > 4.0 * yl)
        with np.errstate(invalid="ignore"):
            mid = np.where(geo, c + np.sqrt(np.where(geo, yl * yh, 0.0)), 0.5 * (li + hii))
        xn = np.where(f == 0, xi, np.where(bad, mid, xn))
        done = (np.abs(xn - xi) <= 4e-16 * xi) | (hii - li <= 4e-16 * xi)  # xi ≥ a/2 > 0
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

    def h_pq(self, alpha: np.ndarray, log_alpha: Optional[np.ndarray] = None, *, upper: bool = True) -> np.ndarray:
        r"""H_α(P‖Q) = P(ℓ > log α) − α Q(ℓ > log α), rounded up: the value computed plus a bound on its error
        (Lemma R9), capped at 1, so ≥ the exact H_α; = 1 − α for α ≤ 0 (``log_alpha``: log α if known;
        ``upper=False``: the value computed, to nearest, for comparisons with closed forms).

        Error bound: 1.01·(ρ_P·S_P + α·ρ_Q·S_Q) (the tail functions, :func:`sf_relative_error`; S_P is read at the
        rounded x* − a) + SF_ATOL·(1 + α) where S_P, S_Q are below the normal range + 3u·(S_P + α·S_Q) (the
        product and the difference) + 4.04·α·q(x*)·r²/ℓ'(x*) (the threshold:
        H_α is the supremum over thresholds, so a root x* with residual r = |ℓ(x*) − log α| loses only a second-order
        amount; r = |ℓ(x*) − log α| as computed + 16u(1 + |log α| + |ℓ(x*)|)); and at most (1 + ρ_P)·S_P +
        SF_ATOL + 2.02·p(x*)·r/ℓ'(x*), since H_α ≤ P(ℓ > log α) at the exact threshold. At β = 1, where log α is within
        rounding of the top atom's loss a, + 16u(1 + |log α| + a). Where the threshold is not pinned down (r/ℓ' >
        1e-6(1 + |x*|): ℓ flat), the threshold's term is 1.01·α·r and the cap is 1."""
        alpha = np.asarray(alpha, dtype=np.float64)
        pos = alpha > 0
        t = _safe_log(alpha, pos, log_alpha)
        x = inverse_loss(t, self.a, self.beta)
        sp, sq = gg_sf(x - self.a, self.beta, 1.0), gg_sf(x, self.beta, 1.0)
        a_sq = alpha * sq
        if not upper:
            return np.where(pos, np.maximum(sp - a_sq, 0.0), 1.0 - alpha)
        rho_p = 1.01 * sf_relative_error(x - self.a, self.beta, True) + 3.0 * _U
        tiny = SF_ATOL * ((sp < 1e-290) + alpha * (sq < 1e-290))  # results below the normal range
        err = rho_p * sp + (1.01 * sf_relative_error(x, self.beta, False) + 3.0 * _U) * a_sq + tiny
        # H_α ≤ P(ℓ > log α) = S_P at the exact threshold (below: + the P-mass between it and x*): the bound does not
        # grow with α where both tails vanish
        cap = (1.0 + rho_p) * sp + SF_ATOL
        fin = np.isfinite(x) & pos
        loose = np.zeros(x.shape, dtype=bool)
        if fin.any():
            xf, tf = x[fin], t[fin]
            d = _dloss(xf, self.a, self.beta)
            lf = loss(xf, self.a, self.beta)
            # |ℓ(x*) − log α|: the residual as computed, ℓ to a few ulp, and log α itself (computed, or passed as
            # ``log_alpha``: one rounding of exp or log away)
            r = np.abs(lf - tf) + 16.0 * _U * (1.0 + np.abs(tf) + np.abs(lf))
            with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                dx = r / d  # ≥ the distance to the exact threshold
                thr = 4.04 * alpha[fin] * np.exp(gg_log_prob(xf, self.beta, 1.0)) * r * dx
                move = 2.02 * np.exp(gg_log_prob(xf - self.a, self.beta, 1.0)) * dx
            # the factors cover q, p and ℓ' varying by 2× between x* and the exact threshold; where that distance is
            # not tiny (ℓ flat: large β near a/2, or ℓ' underflowing), the Q-mass between them is only bounded by 1:
            # the loss is ≤ α(e^r − 1) ≤ 1.01αr, and the cap is not used
            bad = ~(dx <= 1e-6 * (1.0 + np.abs(xf)))
            loose[fin] = bad
            err[fin] += np.where(bad, 1.01 * alpha[fin] * r, thr)
            cap[fin] += np.where(bad, 0.0, move)
        if self.beta == 1.0:
            # the top atom (ℓ = a): where fl(log α) ≥ a but log α may be below a, x* = +∞ reads H = 0, while
            # H_α = ½(1 − α e^{−a}) ≤ ½(a − log α) there
            win = 16.0 * _U * (1.0 + np.abs(t) + self.a)
            top = np.where(pos & np.isposinf(x) & (t - self.a <= win), win, 0.0)
            err, cap = err + top, cap + top
        check_finite(err, f"error bound of the GG pair's curve (a={self.a}, beta={self.beta})")
        h = np.minimum(np.maximum(sp - a_sq, 0.0) + err, np.where(loose, 1.0, np.minimum(cap, 1.0)))
        return np.where(pos, h, 1.0 - alpha)

    def h_qp(self, alpha: np.ndarray, log_alpha: Optional[np.ndarray] = None, *, upper: bool = True) -> np.ndarray:
        r"""H_α(Q‖P) = H_α(P‖Q) by the reflection x ↦ a − x, which swaps P and Q."""
        return self.h_pq(alpha, log_alpha, upper=upper)

    def loss_window(self) -> Tuple[float, float]:
        """Loss values outside of which both P and Q carry < TAIL_MASS."""
        if self.beta == 1.0:
            return -self.a, self.a
        # |X| > r has mass Q(1/β, r^β/β); choose r with this below TAIL_MASS
        r = (self.beta * special.gammainccinv(1.0 / self.beta, TAIL_MASS)) ** (1.0 / self.beta)
        lo = float(loss(np.array(-r), self.a, self.beta))
        hi = float(loss(np.array(self.a + r), self.a, self.beta))
        return lo, hi
