r"""WORK IN PROGRESS (issue 21 item 1; not wired into the accountant): a PRV-level dominating pair for every
shift of the ℓp ball, by a dynamic programme over (remaining p-mass R, cap c). See docs/wip_issue21_dp_table.md.

Units: noise GG(β, 1) per coordinate, m = 1/noise_multiplier, shifts μ ≥ 0 (reflection, Lemma A), ‖μ‖_p^p ≤ R.
E(R, c) dominates (P_μ, Q^{⊗n}) for every n and every μ with max μ_i ≤ c and Σ μ_i^p ≤ R.

Lattice a_0 < a_1 < … < a_J (a_J = m). Split on the cell (a_{j−1}, a_j] of the largest coordinate:

    E(R, a_0) = Base(R, a_0)                                           (every coordinate ≤ a_0)
    E(R, a_j) = env(E(R, a_{j−1}), GG_{a_j} ⊗ E(⌈R − a_{j−1}^p⌉, a_j))   if a_{j−1}^p < R, else E(R, a_{j−1})

(GG_{μ₁} ≼ GG_{a_j}: Lemma A; the rest has cap ≤ a_j and mass ≤ R − a_{j−1}^p; tensor: Lemma B; R rounded UP
on a uniform grid of step ΔR ≤ a_0^p, so the recursion only reads smaller R). env = the connect-the-dots pair
of the pointwise max of the hockey-stick curves on a uniform loss grid (realizable: a max of hockey-stick
curves is convex, non-increasing, 1 at α = 0; its chord interpolation is the curve of a discrete pair, and
the other direction's curve is a monotone transform of this one).

Base(R, a_0): every shift with coordinates ≤ a_0 and mass ≤ R has log E_Q[e^{jℓ}] = Σ_i L_j(μ_i) ≤ R·Λ_j,
Λ_j ≥ sup_{0 < a ≤ a_0} L_j(a)/a^p (enclosed moments on a grid, Lemma 2 between grid points, Lemma 4b's
quadratic bound below the grid), in both directions (Lemma 1). For every λ = j > 1 and α > 0,
(x − α)_+ ≤ x^j·(j−1)^{j−1}/(j^j α^{j−1}), so H_α ≤ U(α) = min_j exp(RΛ_j)(j−1)^{j−1}/(j^j α^{j−1}); for α < 1,
H_α(P‖Q) = 1 − α + αH_{1/α}(Q‖P) ≤ 1 − α + αU(1/α). The set's curves are convex and ≤ U, hence ≤ the lower
convex hull of U on the grid, which is realized as a pair.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

from .ball_rdp import log_moment_uppers, quadratic_coefficient
from .checks import AccountingError, check_finite
from .discrete import DiscretePair
from .discretization import ctd_pmf
from .gg_pair import GGPair

__all__ = ["envelope_pair", "base_pair", "BallTable", "build_table"]


def _grid(half_width: float, h: float) -> np.ndarray:
    n = int(math.ceil(half_width / h))
    return h * np.arange(-n, n + 1, dtype=np.float64)


def envelope_pair(pairs, t: np.ndarray) -> DiscretePair:
    r"""Connect-the-dots pair on the uniform grid t of max_k H_α(P_k‖Q_k): dominates every pair in ``pairs``."""
    pos = t >= 0
    alpha = np.exp(t[pos])
    inv = np.exp(-t[~pos])
    delta = np.full(t.shape, np.nan)
    r = np.full(t.shape, np.nan)
    d = None
    rr = None
    for pr in pairs:
        a = np.clip(pr.h_pq(alpha), 0.0, 1.0)
        b = np.clip(pr.h_qp(inv), 0.0, 1.0)
        if isinstance(pr, DiscretePair):
            pr.__dict__.pop("_cums", None)  # the table keeps thousands of pairs: drop their cumulative sums
        d = a if d is None else np.maximum(d, a)
        rr = b if rr is None else np.maximum(rr, b)
    # The max of the sampled curves is convex only up to round-off (β = 1.8: ctd_pmf's mass 1 + 2.97e-11). Take
    # the lower convex hull in α of the max, as base_pair does: each input curve is convex in α, so the chord
    # between two hull vertices lies above it there, and every hull value is ≥ every input curve (still dominates).
    alpha_all = np.exp(t)
    x = np.concatenate([[0.0], alpha_all])
    yd = np.empty(x.size)
    yr = np.empty(x.size)
    yd[0], yr[0] = 1.0, 0.0
    r_neg = alpha_all[~pos] * rr
    yd[1:][pos], yr[1:][pos] = d, d - 1.0 + alpha_all[pos]
    yd[1:][~pos], yr[1:][~pos] = 1.0 - alpha_all[~pos] + r_neg, r_neg
    hull = _lower_hull(x, yd, yr, np.concatenate([[True], ~pos]))
    delta[pos] = np.interp(alpha_all[pos], x[hull], yd[hull])
    r[~pos] = np.interp(alpha_all[~pos], x[hull], yr[hull])
    return _pair_from_profile(t, delta, r)


#: Σ over every connect-the-dots step of its relative round-off c (ctd_pmf: δ_ω ≥ (1 − c)·δ_in, Lemma R5); any
#: chain of layers in the table loses at most this fraction of δ (Π(1 − c) ≥ 1 − Σc). NOT yet fed to the
#: accountant's budget (docs/wip_issue21_dp_table.md, "Left to do").
CTD_ROUNDOFF = [0.0]


def _pair_from_profile(t: np.ndarray, delta: np.ndarray, r: np.ndarray) -> DiscretePair:
    omega, rho, c = ctd_pmf(t, delta, r)
    CTD_ROUNDOFF[0] += float(c)
    nu = omega * np.exp(-t)
    q_ninf = max(1.0 - float(nu.sum()), 0.0)
    return DiscretePair(float(t[0]), float(t[1] - t[0]), omega, nu, float(rho), q_ninf)


def base_log_moment_rates(a0: float, beta: float, p: float, orders: np.ndarray, a_min: float = 1e-4,
                          ratio: float = 1.02) -> np.ndarray:
    r"""Λ_j ≥ sup_{0 < a ≤ a0} L_j(a)/a^p, per order (p ≤ 2): grid cells [u_k, u_{k+1}] give L_j(u_{k+1})/u_k^p
    (Lemma 2), and a ≤ a_min gives K_j(a_min)·a_min^{2−p} (Lemma 4b, p ≤ 2)."""
    if p > 2:
        raise ValueError("base_log_moment_rates: p ≤ 2 only")
    n = max(int(math.ceil(math.log(a0 / a_min) / math.log(ratio))), 1)
    u = a_min * (a0 / a_min) ** (np.arange(n + 1) / n)
    u[0], u[-1] = a_min, a0  # the cells cover [a_min, a0] exactly
    out = np.empty(len(orders))
    for i, j in enumerate(orders):
        L = log_moment_uppers(int(j), u, beta)
        cells = np.max(L[1:] / u[:-1] ** p)
        small = quadratic_coefficient(int(j), a_min, beta) * a_min ** (2.0 - p)
        out[i] = max(cells, small) * (1.0 + 1e-12)
    check_finite(out, "base log-moment rates")
    return out


def _lower_hull(x: np.ndarray, yd: np.ndarray, yr: np.ndarray, use_r: np.ndarray) -> np.ndarray:
    """Indices of the lower convex hull of (x_i, y_i), x increasing, y = yd = yr + (1 − x) (the same function in
    two coordinates: yr accurate where ``use_r``). The orientation test is invariant under adding a linear
    function, so it reads yr when all three points have ``use_r`` and yd otherwise. (A wrong decision by
    round-off only makes the result slightly non-convex; the connect-the-dots step then clips a negative mass,
    which raises the curve: still an upper bound.)"""
    hull: List[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            i0, i1 = hull[-2], hull[-1]
            y = yr if (use_r[i0] and use_r[i1] and use_r[i]) else yd
            if (y[i1] - y[i0]) * (x[i] - x[i0]) >= (y[i] - y[i0]) * (x[i1] - x[i0]):
                hull.pop()  # i1 lies on or above the chord i0 → i
            else:
                break
        hull.append(i)
    return np.asarray(hull)


def base_pair(R: float, rates: np.ndarray, orders: np.ndarray, t: np.ndarray) -> DiscretePair:
    r"""Dominating pair of every shift with coordinates ≤ a_0 and p-mass ≤ R (module docstring)."""
    if R <= 0:
        return None
    j = orders[:, None].astype(np.float64)
    logc = (j - 1) * np.log(j - 1) - j * np.log(j)
    S = R * rates[:, None]

    def U(log_alpha):  # min over orders, capped at 1
        return np.minimum(np.exp(np.min(S + logc - (j - 1) * log_alpha[None, :], axis=0)), 1.0)

    alpha = np.exp(t)
    pos = t >= 0
    # t ≥ 0: δ ≤ U(α); t < 0: r = δ − 1 + α = αH_{1/α}(Q‖P) ≤ α·U(1/α); the point (α, δ) = (0, 1), r = 0
    d_pos = U(t[pos])
    r_neg = alpha[~pos] * U(-t[~pos])
    x = np.concatenate([[0.0], alpha])
    yd = np.empty(x.size)
    yr = np.empty(x.size)
    yd[0], yr[0] = 1.0, 0.0
    yd[1:][pos], yr[1:][pos] = d_pos, d_pos - 1.0 + alpha[pos]
    yd[1:][~pos], yr[1:][~pos] = 1.0 - alpha[~pos] + r_neg, r_neg
    hull = _lower_hull(x, yd, yr, np.concatenate([[True], ~pos]))
    # each side interpolated in its accurate coordinate between hull vertices (both are linear in α)
    delta = np.full(t.shape, np.nan)
    r = np.full(t.shape, np.nan)
    delta[pos] = np.interp(alpha[pos], x[hull], yd[hull])
    r[~pos] = np.interp(alpha[~pos], x[hull], yr[hull])
    return _pair_from_profile(t, delta, r)


@dataclass
class BallTable:
    """The DP table of one (β, p, m, lattice): ``top`` dominates every shift with ‖μ‖_p ≤ m."""

    top: DiscretePair
    seconds: float
    states: int
    products: int
    ctd_roundoff: float  # Σ of the ctd steps' relative round-off c while building (see CTD_ROUNDOFF)


def build_table(m: float, beta: float, p: float, *, a0: float = 0.05, ratio_low: float = 1.05,
                ratio_high: float = 1.01, high_from: float = 0.7, n_mass: int = 0, h: float = 0.005,
                half_width: float = 10.0, orders=tuple(range(2, 65)), verbose: bool = False) -> BallTable:
    r"""Build E(m^p, m) (module docstring). Lattice: ratio ``ratio_high`` on [high_from·m, m], ``ratio_low`` below,
    down to ≤ a0. Mass grid: uniform, step ΔR = min(m^p/n_mass, a_0^p)."""
    t0 = time.time()
    c0 = CTD_ROUNDOFF[0]
    t = _grid(half_width, h)
    # lattice from the top down
    lat = [m]
    while lat[-1] > a0:
        r = ratio_high if lat[-1] > high_from * m else ratio_low
        lat.append(lat[-1] / r)
    lat = np.array(lat[::-1])
    a_0 = float(lat[0])
    Rtop = m ** p
    dR = a_0 ** p * (1.0 - 1e-9)  # < a_0^p (rounded-down a_j^p included): every recursion lowers the mass index
    if n_mass:
        dR = min(dR, Rtop / n_mass)
    nR = int(math.ceil(Rtop / dR))
    dR = Rtop / nR * (1.0 + 1e-15)  # R_i = i·dR; R_nR ≥ m^p (checked)
    if not nR * dR >= Rtop:
        raise AccountingError("ball_prv: the mass grid does not reach m^p")
    orders = np.asarray(orders)
    rates = base_log_moment_rates(a_0, beta, p, orders)
    gg = [envelope_pair([GGPair(float(a), beta)], t) for a in lat]
    low = lat ** p * (1.0 - 1e-12)  # a_{j−1}^p rounded down: the rest's mass R − a_{j−1}^p is rounded up
    # E[i] = current pair for R_i at the cap being processed; process caps j = 0..J, masses increasing
    E: Dict[Tuple[int, int], DiscretePair] = {}
    products = 0
    states = 0
    base = [None] + [base_pair(i * dR, rates, orders, t) for i in range(1, nR + 1)]
    for i in range(1, nR + 1):
        R = i * dR
        cur = base[i]
        E[(i, 0)] = cur
        for jj in range(1, lat.size):
            if low[jj - 1] < R * (1 + 1e-12):
                rest = R - low[jj - 1]
                k = max(int(math.ceil(rest / dR)), 0)  # round UP
                while k * dR < rest:
                    k += 1
                if k >= i:
                    raise AccountingError("ball_prv: mass recursion does not decrease (ΔR > a_0^p)")
                inner = E.get((k, jj)) if k > 0 else None
                prod = gg[jj] if inner is None else gg[jj].compose(inner)
                products += inner is not None
                cur = envelope_pair([cur, prod], t) if cur is not None else envelope_pair([prod], t)
                states += 1
            E[(i, jj)] = cur
        # drop what is no longer read: E(k, ·) for k needed later only through lookups (keep all: small)
        if verbose and i % 10 == 0:
            print(f"R {i}/{nR} states {states} {time.time() - t0:.1f}s", flush=True)
    return BallTable(E[(nR, lat.size - 1)], time.time() - t0, states, products, CTD_ROUNDOFF[0] - c0)
