r"""A proven Rényi-DP bound over every shift in the ℓp ball (any β ≥ 1, any d), and ε(δ) from it.

Units: noise GG(β, 1) per coordinate (density ∝ exp(-|x|^β/β)), m = 1/noise_multiplier, shift μ with
‖μ‖_p ≤ m. Per coordinate, L_j(a) = log E_Q[e^{jℓ}] = (j-1)·D_j(GG(a)‖GG(0)) (enclosed, docs Lemma Q; see
:func:`log_moment_upper`), additive over coordinates. With u = |a|^p and g_j(u) = L_j(u^{1/p}) (non-decreasing):

    S_j := sup_{‖μ‖_p ≤ m} Σ_i L_j(|μ_i|) ≤ min_{λ ≥ 0} [ λ m^p + d · sup_{u ∈ [0, m^p]} (g_j(u) − λu) ],

the inner sup bounded on a grid 0 = u_0 < … < u_N = m^p by g_j(u_{i+1}) − λu_i on [u_i, u_{i+1}]
(:func:`ball_log_moment`). S_j is convex in j (a sup of log-MGFs), so chords between computed orders bound
the others. Poisson subsampling (rate q), integer α ≥ 2, any pair with moments M(j) ≤ e^{S_j}:

    remove: E_Q[(1-q+qe^ℓ)^α] = Σ_j C(α,j)(1-q)^{α-j} q^j M(j)                 (coefficients ≥ 0),
    add:    E_Q[(1-q+qe^ℓ)^{1-α}] ≤ min((1-q) + q M(α), 1 + C(α,2)(1-q)^{-α-1} q² (M(2)-1)),

both non-decreasing in every M(j), so M(j) → e^{S_j} bounds them. RDP(α) = log(·)/(α-1), summed over steps
and segments per direction, and ε = max over directions of Opacus's ``get_privacy_spent`` (Balle et al.
2020). Proof: docs/accounting.md, "Every shift: the Rényi bound over the ℓp ball".
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Dict, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from opacus.accountants.analysis.rdp import get_privacy_spent
from scipy import special

from . import renyi
from .renyi import DEFAULT_ORDERS
from .fisher import fisher_log_moments
from ..validation import shift_radius, validate_delta
from .count_query import count_log_moments
from .history import Segment, normalize_history
from .report import EpsilonReport
from .checks import LEAST_SUBNORMAL, AccountingError
from .shapes import radius_power

__all__ = [
    "log_moment_upper",
    "ball_log_moment",
    "ball_log_moments",
    "subsampled_rdp_upper",
    "step_rdp",
    "rdp_ball_curves",
    "rdp_ball_epsilon",
    "rdp_ball_epsilon_below",
    "gaussian_rdp_epsilon_below",
    "rdp_ball_delta",
    "rdp_deltas",
    "combine",
    "clear_caches",
]

#: tightness asked of the per-coordinate moment enclosures (:func:`.renyi.log_moments_upper`; every value is an
#: upper bound whatever this is): they stop refining within 1e-7 of M (of log M for small shifts, see
#: :func:`_moment_epsrel`); β = 1.5, d = 10^6, σ = 1, q = 0.01, T = 10^4 gives ε = 5.0517567 (QUADPACK with its
#: error estimate added, not an enclosure, gave 5.0517569) — most of a cold get_epsilon is these enclosures
MOMENT_EPSREL = 1e-7
_EXACT_ORDERS = 8  # S_j computed at every j ≤ this, then at a geometric set of j (chords between)
_REFINE_ROUNDS = 24  # at most this many rounds of interval splits per order
_SPLITS_PER_ROUND = 16  # loosest intervals split per round
_QUADRATIC_MAX_SHIFT = 0.1  # the quadratic bound (Lemma 4b) is only evaluated for shifts up to this
_REL_TOL = 3e-3  # stop refining when the grid slack is below this fraction of the bound
_FP_SLACK = 1e-12  # relative slack added to every floating-point sum that must round up
_EPS = 2.0 ** -52
_FLOAT_MAX = float(np.finfo(np.float64).max)
#: Newton steps for the chord bound's stationary point (:func:`_chord_sup_at`, p ≠ 2): on random intervals (ratios up
#: to 10⁴, p ∈ {1.05, 1.2, 1.5, 1.8, 2.5, 3}) 6 steps give the 24-step bisection's bound within 2e-10 relative or
#: below it (5: 5e-6); lattice intervals (ratio ≤ 2^{1/2}) and [0, A_1] (Φ nearly linear) need fewer
_NEWTON_STEPS = 8


#: the K enclosure stops refining within this relative gap (its result is an upper bound whatever this is)
K_EPSREL = 1e-8
_K_GRADE_LEVELS = 10  # [0, 3^{-10}] takes the monotone bound, then subintervals [3^{-k-1}, 3^{-k}] up to 1
_K_TAIL_U = 60.0  # the body ends where u = X^β/(2β) ≥ this (beyond: the closed-form tail)
_k_cache: Dict[Tuple[int, float, float], float] = {}
_PEAK_CHECK = 4  # :func:`_k_peak` reads its bisection's convergence every this many steps


def quadratic_coefficient(j: int, a_s: float, beta: float) -> float:
    r"""K with L_j(a) ≤ K·a² for every 0 ≤ a ≤ a_s (an enclosure's upper end; :func:`quadratic_coefficients`)."""
    return float(quadratic_coefficients(j, [a_s], beta)[0])


def _log_orders(j: np.ndarray) -> np.ndarray:
    """log j per entry, each by ``math.log`` (the value a scalar order gets), for integer orders j (once per
    distinct order)."""
    orders, where = np.unique(j, return_inverse=True)
    return np.array([math.log(v) for v in orders.tolist()])[where].reshape(j.shape)


def _k_log_parts(x: np.ndarray, a: np.ndarray, j: int, beta: float) -> Tuple[np.ndarray, np.ndarray]:
    r"""(log(A(x)·Z), −x^β/β) of the K integrand A(x)B(x), A = (x + a)^{2β−2}·φ/Z, B = e^{−x^β/β}, with
    φ = j²e^{jaw} − je^{−aw} = j(j−1) + j²(e^{jaw} − 1) + j(1 − e^{−aw}) > 0, w = (x + a)^{β−1}, in a form without
    cancellation: the sum of non-negative terms while jaw ≤ 1, else jaw + log(j² − je^{−(j+1)aw}). ``j``: a number or
    an array broadcast with ``a``."""
    return _k_log_terms(x, a, j, beta)[:2]


def _k_log_terms(x: np.ndarray, a: np.ndarray, j, beta: float):
    """(log(A·Z), −x^β/β, log(x + a), w) of :func:`_k_log_parts`, each of φ's two forms computed only where it is
    taken (elementwise: the floats of both computed everywhere and selected)."""
    xa = x + a
    w = xa ** (beta - 1.0)
    z = a * w
    jb = np.broadcast_to(j, z.shape)
    small = jb * z <= 1.0
    log_phi = np.empty(z.shape)
    zs, js = z[small], jb[small]
    log_phi[small] = np.log(js * (js - 1.0) + js * js * np.expm1(js * zs) - js * np.expm1(-zs))
    big = ~small
    zb, jg = z[big], jb[big]
    log_phi[big] = jg * zb + np.log(jg * jg - jg * np.exp(-(jg + 1.0) * zb))
    lxa = np.log(xa)
    return (2.0 * beta - 2.0) * lxa + log_phi, -(x ** beta) / beta, lxa, w


def _k_peak(ja: np.ndarray, a: np.ndarray, beta: float) -> np.ndarray:
    r"""The maximiser on (0, ∞) of H(x) = ja(x + a)^{β−1} − x^β/β (bisection on the sign of H'; H' has one sign
    change: H'(x)/x^{β−1} = ja(β−1)(x + a)^{β−2}/x^{β−1} − 1 is decreasing), 0 at β = 1."""
    if beta == 1.0:
        return np.zeros_like(a)
    lo, hi = np.zeros_like(a), np.ones_like(a)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        coef = ja * (beta - 1.0)

        def rising(x):
            return coef * (x + a) ** (beta - 2.0) > x ** (beta - 1.0)
        for _ in range(2100):  # hi doubles up to float range, at most 1024 + 1075 steps
            grow = rising(hi) & np.isfinite(hi)
            if not grow.any():
                break
            lo, hi = np.where(grow, hi, lo), np.where(grow, 2.0 * hi, hi)
        # the bisection, its convergence test read every _PEAK_CHECK steps: a converged entry (no float strictly
        # between lo and hi) is left as it is by a step, as mid is lo or hi, rising(hi) is false (or hi = ∞) and
        # rising(lo) is true where lo > 0 (each was set where rising was read so); only lo = 0 with hi the least
        # subnormal can move (hi to 0, where rising(0) is false), and is put back after the loop
        steps = 0
        while steps < 2100:
            for _ in range(min(_PEAK_CHECK, 2100 - steps)):
                mid = 0.5 * (lo + hi)
                up = rising(mid)
                np.copyto(lo, mid, where=up)  # in place: lo and hi are this function's own arrays
                np.copyto(hi, mid, where=~up)
            steps += _PEAK_CHECK
            mid = 0.5 * (lo + hi)
            if not ((lo < mid) & (mid < hi)).any():
                break
        hi[hi == 0.0] = LEAST_SUBNORMAL
    return hi


def _k_bounds(xl: np.ndarray, xr: np.ndarray, prm: np.ndarray, beta: float):
    r"""(upper, lower) on ∫_{xl}^{xr} A(x)B(x)·Z·e^{−ref} dx per subinterval (``prm`` rows: a, ref, x_H, j): the
    smaller of the monotone bound (xr − xl)·A(xr)B(xl) (A non-decreasing, B decreasing) and Gauss–Legendre with
    its Bernstein-ellipse bound (:func:`.renyi.gauss_legendre_bounds`, where the ellipse stays in Re z > 0); lower
    (a refinement target) GL minus its error bound, or (xr − xl)·A(xl)B(xr) where the monotone bound alone applies."""
    a, ref, x_h, j = prm
    log_j = _log_orders(j)
    c, hw, e_lo, e_hi, V = renyi._gauss_legendre_box(xl, xr)
    x = renyi._gauss_legendre_points_t(c, hw)  # the nodes transposed; every operation below is elementwise
    la, lb, lxa, w = _k_log_terms(x, a, j, beta)
    # round-off of log(A·B) at a node: 8 ulps of its terms and of ref, and the node's own rounding × |d/dx log|
    # (|φ'/φ| ≤ (j + 3)·a·w' for j ≥ 2, w' = (β−1)(x + a)^{β−2})
    size = (np.abs(la) + np.abs(lb) + np.abs(ref) + 2.0 * beta * np.abs(lxa) + j * a * w)
    slope = ((2.0 * beta - 2.0) / (x + a) + (j + 3.0) * a * (beta - 1.0) * (x + a) ** (beta - 2.0)
             + x ** (beta - 1.0))
    err = 8.0 * _EPS * (size + x * slope)
    values = np.ascontiguousarray(np.exp(la + lb - ref + err).T)  # rows × nodes, as the GL sums read them
    # sup over the ellipse's box [e_lo, e_hi] × [−V, V] (e_lo > 0): |z + a| ≤ D, |(z + a)^{β−1}| ≤ W,
    # Re(−z^β/β) ≤ −e_lo^β/β + V²/2·(β−1)·sup|z|^{β−2} (Re g(x + iv) ≤ g(x) + v²/2·sup|g''|, g' real on the axis)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        pos = e_lo > 0
        el = np.where(pos, e_lo, 1.0)
        D = np.hypot(e_hi + a, V)
        W = D ** (beta - 1.0)
        s2 = np.hypot(e_hi, V) ** (beta - 2.0) if beta >= 2.0 else el ** (beta - 2.0)
        re_g = -el ** beta / beta + 0.5 * V * V * (beta - 1.0) * s2
        # |φ| ≤ j(j−1) + j²(e^{ja|w|} − 1) + j(e^{a|w|} − 1)  (|e^ζ − 1| ≤ e^{|ζ|} − 1)
        log_phi1 = np.log(j * (j - 1.0) + j * j * np.expm1(j * a * W) + j * np.expm1(a * W))
        # |φ| e^{Re g} ≤ j² e^{Re H} + j e^{aW + Re g}, H = ja(z + a)^{β−1} − z^β/β unimodal on x > 0 (peak x_H):
        # sup_x H at the clipped peak (+1: the bisection's bracket),
        # |H''| ≤ ja(β−1)|β−2|·sup|z + a|^{β−3} + (β−1)·sup|z|^{β−2}
        xh = np.clip(x_h, el, e_hi)
        s3 = D ** (beta - 3.0) if beta >= 3.0 else (el + a) ** (beta - 3.0)
        re_h = (j * a * (xh + a) ** (beta - 1.0) - xh ** beta / beta + 1.0
                + 0.5 * V * V * (j * a * (beta - 1.0) * abs(beta - 2.0) * s3 + (beta - 1.0) * s2))
        log_phi2 = np.logaddexp(2.0 * log_j + re_h, log_j + a * W + re_g)
        log_sup = (2.0 * beta - 2.0) * np.log(D) + np.minimum(log_phi1 + re_g, log_phi2) - ref
        # safety margin of the sup's own round-off: 1e-10 relative to its size (the error term is ~1e-15 × it)
        log_sup = log_sup + 1e-10 * (np.abs(log_sup) + np.abs(ref)) + 1e-10
        la_r, lb_r, lxa_r, w_r = _k_log_terms(xr, a, j, beta)
        la_l, lb_l, lxa_l, _ = _k_log_terms(xl, a, j, beta)
        h = (xr - xl) * (1.0 + 2.0 * _EPS)
        crude_log = la_r + lb_l - ref
        crude = h * np.exp(crude_log + 8.0 * _EPS * (np.abs(la_r) + np.abs(lb_l) + np.abs(ref) + 2.0 * beta
                                                     * np.abs(lxa_r) + j * a * w_r))
        # the refinement target where the monotone bound is the value: (xr − xl)·A(xl)B(xr) ≤ the integral
        crude_lower = (xr - xl) * (1.0 - 2.0 * _EPS) * np.exp(
            la_l + lb_r - ref - 8.0 * _EPS * (np.abs(la_l) + np.abs(lb_r) + np.abs(ref) + 2.0 * beta
                                              * np.abs(lxa_l) + j * a * w_r))
    return renyi.gauss_legendre_bounds(hw, values, log_sup, pos, crude, crude_lower)


def _k_subintervals(X: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""(xl, xr, owner) of the K enclosures' first subintervals, shift by shift: edges 0, 3^{−_K_GRADE_LEVELS}, …,
    3^{−1}, 1, then 2^k (k ≥ 1) below X_i, then X_i (every shift's edges in one array operation)."""
    grade = np.concatenate([[0.0], 3.0 ** -np.arange(_K_GRADE_LEVELS, 0, -1.0), [1.0]])
    n = X.size
    body = 2.0 ** np.arange(1, max(1, math.ceil(math.log2(float(np.max(X))))) + 1, dtype=np.float64)
    pts = np.concatenate([np.broadcast_to(grade, (n, grade.size)), np.broadcast_to(body, (n, body.size)),
                          X[:, None]], axis=1)
    valid = np.concatenate([np.ones((n, grade.size), dtype=bool), body[None, :] < X[:, None],
                            np.ones((n, 1), dtype=bool)], axis=1)
    edges = pts[valid]
    own = np.repeat(np.arange(n), valid.sum(axis=1))
    inside = own[:-1] == own[1:]  # consecutive edges of one shift
    return edges[:-1][inside], edges[1:][inside], own[:-1][inside]


def quadratic_coefficients(j, shifts: Sequence[float], beta: float) -> np.ndarray:
    r"""K(a_s) for every a_s in ``shifts``, with L_j(a) ≤ K(a_s)·a² for every 0 ≤ a ≤ a_s (Lemma 4b):

        K = ½ E_Q[w² (j(j-1) + j²(e^{j a_s w} − 1) + j(1 − e^{−a_s w}))],  w = (|X| + a_s)^{β−1}, X ~ GG(β, 1),

    from |ℓ(x)| ≤ a·w(x) (mean value theorem), φ_j(ℓ) = e^{jℓ} − 1 − j(e^ℓ − 1) ≤ ℓ²/2·max_{|t|≤|ℓ|} φ_j''(t)
    and L_j = log(1 + E_Q[φ_j(ℓ)]) ≤ E_Q[φ_j(ℓ)]. As a_s → 0, K → j(j−1)·E|X|^{2β−2}/2 (the Fisher term).

    Enclosed (docs/accounting.md, Lemma 4c): K = ∫_0^∞ A(x)B(x) dx, A = (x + a)^{2β−2}φ(x)/Z non-decreasing, B =
    e^{−x^β/β} decreasing; [0, 3^{−10}] by the monotone bound h·A(r)B(l) (refined towards h·A(l)B(r) ≤ its
    integral), then subintervals graded (ratio 3) up to
    1 and doubling up to X, each the smaller of that bound and Gauss–Legendre with its Bernstein-ellipse error
    bound (:func:`.renyi.gauss_legendre_bounds`), refined by :func:`.renyi.refine_enclosure` to 1e-8; beyond X ≥
    max(a, 2βja2^{β−1}): ∫_X^∞ ≤ 4^{β−1}j²/Z·(2β)^{2−1/β}/β·Γ(2 − 1/β, U), U = X^β/(2β), with
    Γ(s, U) ≤ U^{s−1}e^{−U}/(1 − (s−1)/U). +∞ where K exceeds float range (no cap), or where U does (large β and
    a_s: the bound is then not used). Cached per (j, a_s, β).
    ``j``: one integer order, or one per shift (several orders in one batch, each shift's value the one it gets
    alone: every operation is elementwise, each shift's subintervals keep their order, log j is ``math.log``'s).
    """
    shifts = np.atleast_1d(np.asarray(shifts, dtype=np.float64))
    j_all = np.broadcast_to(np.asarray(j, dtype=np.float64), shifts.shape)
    j_list = j_all.tolist()  # Python floats, read per shift (the same values)
    out, todo = renyi.cached_split(shifts, _k_cache, lambda i, a: (int(j_list[i]), a, float(beta)))
    if not todo:
        return out
    a = shifts[todo]
    j = j_all[todo]
    if not np.all(np.isfinite(a) & (a > 0)):
        raise ValueError(f"quadratic_coefficients: shifts must be finite and ≥ 0, got {shifts!r}")
    # the end of the body: X ≥ a, X ≥ 2βc (c = ja2^{β−1}: there jaw ≤ x^β/(2β)), U ≥ 60
    with np.errstate(over="ignore"):
        X = np.maximum.reduce([a, 2.0 * beta * j * a * 2.0 ** (beta - 1.0),
                               np.full(len(a), (2.0 * beta * _K_TAIL_U) ** (1.0 / beta)), np.ones(len(a))])
        U = X ** beta / (2.0 * beta)
    huge = ~np.isfinite(U)  # the tail's U beyond float range (large β): K = +∞, the quadratic bound unused
    for k in np.nonzero(huge)[0]:
        out[todo[k]] = math.inf
        _k_cache[(int(j_all[todo[k]]), float(shifts[todo[k]]), float(beta))] = math.inf
    if huge.any():
        todo = [i for i, h in zip(todo, huge) if not h]
        if not todo:
            return out
        a, j, X, U = a[~huge], j[~huge], X[~huge], U[~huge]
    log_z = renyi._log_z(beta)
    n = len(todo)
    s = 2.0 - 1.0 / beta
    log_tail = ((2.0 * beta - 2.0) * math.log(2.0) + 2.0 * _log_orders(j) - log_z + s * math.log(2.0 * beta)
                - math.log(beta) + (s - 1.0) * np.log(U) - U - np.log1p(-(s - 1.0) / U))
    # subintervals: [0, 3^{-10}], [3^{-k-1}, 3^{-k}] (k = 9 … 0), then [2^i, 2^{i+1}] up to X (the last ends at X)
    xl, xr, owner = _k_subintervals(X)
    x_h = _k_peak(j * a, a, beta)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        rows = np.concatenate([owner, np.arange(n)])
        la, lb = _k_log_parts(np.concatenate([xr, x_h]), a[rows], j[rows], beta)
        ref = np.maximum(np.maximum.reduceat((la + lb)[: len(xr)], np.searchsorted(owner, np.arange(n))),
                         np.nan_to_num((la + lb)[len(xr):], nan=-np.inf))
    if not np.all(np.isfinite(ref) | (ref == np.inf)):
        raise AccountingError(f"quadratic_coefficient(j={sorted(set(j.tolist()))}, beta={beta}): the integrand is not "
                              "a number")
    prm = np.vstack([a, np.where(np.isfinite(ref), ref, 0.0), x_h, j])
    tot, cnt = renyi.refine_enclosure(xl, xr, owner, n, np.full(n, K_EPSREL),
                                      lambda l, r, o: _k_bounds(l, r, np.take(prm, o, axis=1), beta))
    a_s, refs, tots, cnts, tails, shift_list = (v.tolist() for v in (a, ref, tot, cnt, log_tail, shifts))
    for k, i in enumerate(todo):  # per shift, on Python floats (the arrays' values)
        if math.isfinite(refs[k]) and math.isnan(tots[k]):
            raise AccountingError(f"quadratic_coefficient(j={j[k]:g}, a_s={a_s[k]}, beta={beta}): a subinterval bound "
                                  "is not a number")
        if not math.isfinite(refs[k]) or not math.isfinite(tots[k]):
            val = math.inf
        else:
            # the sums of positive terms: (terms + 20) ulps; then the tail, log Z, and 4 ulps of the exponent
            body = tots[k] * (1.0 + 2.0 * (cnts[k] + 20) * _EPS)
            log_k = refs[k] - log_z + math.log(body) if body > 0 else -math.inf
            log_k = float(np.logaddexp(log_k, tails[k]))
            log_k += 4.0 * _EPS * (abs(refs[k]) + abs(log_z) + abs(log_k)) + 1e-15
            if math.isnan(log_k):
                raise AccountingError(f"quadratic_coefficient(j={j[k]:g}, a_s={a_s[k]}, beta={beta}) is not a number")
            val = math.exp(log_k) if log_k < 709.0 else math.inf
        out[i] = val
        _k_cache[(int(j_list[i]), shift_list[i], float(beta))] = val
    return out


def _moment_epsrel(j: int, a: np.ndarray, beta: float) -> np.ndarray:
    r"""Relative accuracy asked of the enclosure of M(j; a): MOMENT_EPSREL × min(1, the Fisher estimate
    j(j−1)/2·E|X|^{2β−2}·a² of log M) (floor 1e-12), so log M is within MOMENT_EPSREL of itself for small shifts
    too (there log M ≈ M − 1). Any value gives a valid bound; this only sets the tightness."""
    fisher = math.exp((2 * beta - 2) / beta * math.log(beta) + special.gammaln((2 * beta - 1) / beta)
                      - special.gammaln(1 / beta))
    est = 0.5 * j * (j - 1) * fisher * np.asarray(a, dtype=np.float64) ** 2
    return np.maximum(MOMENT_EPSREL * np.minimum(est, 1.0), 1e-12)


def log_moment_uppers(j: int, shifts: Sequence[float], beta: float) -> np.ndarray:
    r"""Upper bounds on L_j(a) = log E_Q[e^{jℓ}] = (j-1)·D_j(GG(a)‖GG(0)) for every a in ``shifts`` (one batch
    of :func:`.renyi.log_moments_upper`, an enclosing quadrature), integer j ≥ 2, scale 1."""
    return _log_moment_uppers_by_order({j: shifts}, beta)[j]


def _log_moment_uppers_by_order(requests: Dict[int, Sequence[float]], beta: float) -> Dict[int, np.ndarray]:
    """{j: :func:`log_moment_uppers` (j, shifts)} for {j: shifts}, every order in one batch of quadratures (the same
    floats as one call per order: :func:`.renyi.log_moments_upper` takes one order per shift)."""
    js = list(requests)
    shifts = [np.abs(np.asarray(requests[j], dtype=np.float64)) for j in js]
    if not js:
        return {}
    flat = np.concatenate(shifts)
    orders = np.concatenate([np.full(a.size, float(j)) for j, a in zip(js, shifts)])
    epsrel = np.concatenate([_moment_epsrel(j, a, beta) for j, a in zip(js, shifts)])
    vals = renyi.log_moments_upper(orders, flat, beta, epsrel)
    return dict(zip(js, np.split(vals, np.cumsum([a.size for a in shifts])[:-1])))


@lru_cache(maxsize=1 << 18)
def log_moment_upper(j: int, a: float, beta: float) -> float:
    r"""Upper bound on L_j(a) (:func:`log_moment_uppers` for one shift)."""
    if a == 0.0:
        return 0.0
    return float(log_moment_uppers(j, [a], beta)[0])


def _upper_hull_slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Slopes of the upper concave hull of the points (x_i, y_i), x sorted ascending (monotone chain)."""
    hull: list = []
    for px, py in zip(x.tolist(), y.tolist()):
        if hull and hull[-1][0] == px:
            if py <= hull[-1][1]:
                continue
            hull.pop()
        while len(hull) >= 2:
            (ax, ay), (bx, by) = hull[-2], hull[-1]
            if (bx - ax) * (py - ay) - (by - ay) * (px - ax) >= 0:  # b is not above the chord a–p
                hull.pop()
            else:
                break
        hull.append((px, py))
    hx = np.array([h[0] for h in hull])
    hy = np.array([h[1] for h in hull])
    with np.errstate(over="ignore"):  # a slope beyond float range (U = A^p underflows at large p) is +∞: the dual's
        return np.diff(hy) / np.diff(hx) if len(hull) > 1 else np.zeros(0)  # candidates drop it (finite ones only)


def _power_sup(lam: np.ndarray, K: np.ndarray, s: float, lo: np.ndarray, hi: np.ndarray,
               lam_lo: Optional[np.ndarray] = None) -> np.ndarray:
    r"""sup_{lo ≤ u ≤ hi} (K u^s − λu), broadcast over λ (rows) and intervals (columns).

    K u^s − λu is convex (s ≥ 1) or concave (s < 1) in u, so the max is at lo, hi or the stationary point
    u* = (λ/(Ks))^{1/(s−1)} clipped to [lo, hi]. K = +∞ (no quadratic bound, Lemma 4c) gives +∞: the bound unused
    (not ∞·0 = NaN at u = 0). ``lam_lo``: λ·lo where the caller has it (the same float); the operations in place.
    """
    lam = lam[:, None]
    unused = K == np.inf  # np.isposinf's booleans, without its wrapper
    K = np.where(unused, 0.0, K)
    vals = np.subtract(K * lo ** s, lam * lo if lam_lo is None else lam_lo)
    np.maximum(vals, K * hi ** s - lam * hi, out=vals)
    if s < 1.0:
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            ustar = np.where(lam > 0, (lam / (K * s)) ** (1.0 / (s - 1.0)), hi)
        ustar = np.clip(np.nan_to_num(ustar, nan=hi, posinf=hi), lo, hi)
        vals = np.maximum(vals, K * ustar ** s - lam * ustar)
    np.copyto(vals, np.inf, where=unused)
    return vals


def _chord_sup(lam: np.ndarray, G: np.ndarray, A: np.ndarray, p: float, rounded: bool = False) -> np.ndarray:
    r"""Upper bounds on sup_{a ∈ [A_i, A_{i+1}]} (L_j(a) − λa^p), rows λ, columns intervals (Lemma 4d):
    :func:`_chord_sup_at` at every (λ, interval)."""
    return _chord_sup_at(*_chord_grid(lam, G, A, p, rounded))


def _chord_grid(lam: np.ndarray, G: np.ndarray, A: np.ndarray, p: float, rounded: bool = False) -> "_Chords":
    """The request of :func:`_chord_sup`: every (λ row, interval column), broadcast."""
    E = _chord_excess(G)
    return _Chords(lam[:, None], A[None, :-1], A[None, 1:], E[None, :-1], E[None, 1:], p, rounded)


class _Chords(NamedTuple):
    r"""A request for :func:`_chord_sup_at` (its arguments, arrays broadcast together), yielded by the dual's step
    generators (:func:`_dual_steps`, :func:`_min_row_steps`, :func:`_interval_max_steps`,
    :func:`_interval_values_steps`), which are sent its value: :func:`_run` answers each alone,
    :func:`_chords_batched` the requests of several orders in one call (the same floats: the bound is elementwise)."""
    lam: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    Ei: np.ndarray
    Ej: np.ndarray
    p: float
    rounded: bool


def _run(steps):
    """The value a step generator returns, each of its :class:`_Chords` requests answered alone (the plain path)."""
    try:
        ask = next(steps)
        while True:
            ask = steps.send(_chord_sup_at(*ask))
    except StopIteration as done:
        return done.value


def _chords_batched(asks: Sequence["_Chords"]) -> list:
    r"""[:func:`_chord_sup_at` (*ask) for ask in ``asks``], one call per (p, rounded): every request's entries are
    broadcast, flattened and concatenated, and each gets the float it gets alone (every operation of
    :func:`_chord_sup_at` is elementwise, each array contiguous in both). At p = 2 (closed form, no bisection: few
    operations per entry) a request of several λ rows is answered alone (flattening its grid costs more than the
    call it saves); the one-row requests (each dual's rounded value and its row at λ_low, about half of the calls
    and 1 % of the entries) are batched like the others."""
    out: list = [None] * len(asks)
    groups: Dict[Tuple[float, bool], list] = {}
    for k, ask in enumerate(asks):
        if ask.p == 2.0 and ask.lam.size > 1:
            out[k] = _chord_sup_at(*ask)
        else:
            groups.setdefault((ask.p, bool(ask.rounded)), []).append(k)
    for (p, rounded), ks in groups.items():
        if len(ks) == 1:
            out[ks[0]] = _chord_sup_at(*asks[ks[0]])
            continue
        parts, shapes = [], []
        for k in ks:
            arrays = asks[k][:5]
            shape = np.broadcast(*arrays).shape
            parts.append([x.ravel() if x.shape == shape else _filled(x, shape) for x in arrays])
            shapes.append(shape)
        vals = _chord_sup_at(*(np.concatenate([a[f] for a in parts]) for f in range(5)), p, rounded)
        start = 0
        for k, shape, part in zip(ks, shapes, parts):
            out[k] = vals[start: start + part[0].size].reshape(shape)
            start += part[0].size
    return out


def _filled(x: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
    """``np.broadcast_to(x, shape).ravel()``: the same entries, copied (without its Python-level setup)."""
    out = np.empty(shape, dtype=x.dtype)
    out[...] = x
    return out.ravel()


def _chord_excess(G: np.ndarray) -> np.ndarray:
    """E = e^G − 1 ≥ M − 1 at the grid points (L_j ≥ 0: raising an upper bound to 0 keeps it one)."""
    with np.errstate(over="ignore"):
        return np.expm1(np.maximum(G, 0.0))


def _chord_sup_at(lam: np.ndarray, lo: np.ndarray, hi: np.ndarray, Ei: np.ndarray, Ej: np.ndarray, p: float,
                  rounded: bool = False) -> np.ndarray:
    r"""Upper bounds on sup_{a ∈ [lo, hi]} (L_j(a) − λa^p) from E = e^G − 1 at the ends (:func:`_chord_excess`),
    elementwise over the broadcast arrays (Lemma 4d).

    M_j(a) = e^{L_j(a)} is convex in a, so with E = e^G − 1 ≥ M − 1 at the grid points and t = (a − A_i)/(A_{i+1} −
    A_i), L_j(a) ≤ log(1 + (1 − t)E_i + tE_{i+1}); F(a) := that − λa^p is concave in a (p ≥ 1), so its sup is at
    most its value plus its tangent's rise at any b ∈ [A_i, A_{i+1}]: F(b) + max(F'(b)(A_i − b), F'(b)(A_{i+1} − b)).
    b: the stationary point (closed form at p = 2: 2λσ b² + 2λB b − σ = 0, σ the chord's slope, B = 1 + E_i − σA_i;
    else _NEWTON_STEPS Newton steps from A_{i+1} on an increasing convex Φ whose root it is: with 1 + C(b) = B + σb,
    F'(b) = 0 iff Φ(v) = (p − 1)v + log(B + σe^v) − log(σ/(λp)) = 0 in v = log b where B ≥ 0 (Φ' = p − 1 +
    σb/(1 + C) ∈ [p − 1, p), increasing), iff Φ(v) = v + (p − 1)·log((e^v + |B|)/σ) − log(σ/(λp)) = 0 in
    v = log(1 + C(b)) where B < 0 (Φ' = 1 + (p − 1)e^v/(e^v + |B|) ∈ [1, p), increasing); from the right of the root
    of an increasing convex function Newton's iterates decrease to it without crossing it; b = A_i or A_{i+1} where
    the root is outside, b = A_i where σ ≤ 0, b = A_{i+1} where λ = 0), clipped; any b gives a valid bound (the
    iterates are only a good b: after 8 steps the bound is the 24-step bisection's or below it, or above it by at
    most 2e-10 × (1 + |bound|), on 1.5·10⁶ random intervals, p ∈ {1.05, …, 3}; tests/test_accountant_fast_paths.py).
    ``rounded``: raised by 1e-14 × the
    size of its operands (1 + log1p(C) for the chord C ≥ 0, a sum of non-negative terms; λb^p; the tangent term:
    a few ulps each, and 1e-14 ≥ 45 ulps). Elementwise: an entry's value does not depend on the others'.
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        width = hi - lo
        slope = (Ej - Ei) / width
        B = 1.0 + Ei - slope * lo  # 1 + C(b) = B + slope·b
        # below, each array operation in place is the one the formula names (elementwise: the same floats)
        if p == 2.0:
            positive = lam > 0
            lam_1 = np.where(positive, lam, 1.0)
            disc = 2.0 * slope * slope / lam_1
            disc += B * B  # B² + 2·slope²/λ
            np.sqrt(disc, out=disc)
            b = B + disc
            b *= lam_1
            np.divide(slope, b, out=b)  # slope / (λ(B + disc)) where B ≥ 0
            disc -= B
            disc /= 2.0 * slope  # (disc − B) / (2·slope) where B < 0
            np.copyto(b, disc, where=~(B >= 0))
            if not positive.all():
                np.copyto(b, hi, where=~positive)  # λ = 0: b = hi (only where a row has λ = 0)
        else:  # F'(b) = 0 by Newton's method from hi (docstring), in v = log b (B ≥ 0) or v = log(1 + C(b)) (B < 0)
            up = B >= 0
            # both as Φ(v) = c1·v + c2·log(k1·e^v + k0) − t, Φ' = c1 + c2·k1e^v/(k1e^v + k0)
            c1, c2 = np.where(up, p - 1.0, 1.0), np.where(up, 1.0, p - 1.0)
            k1, k0 = np.where(up, slope, 1.0), np.where(up, B, -B)
            t = np.log(slope / (lam * p)) + np.where(up, 0.0, (p - 1.0) * np.log(slope))
            v_lo, v_hi = np.where(up, np.log(lo), np.log1p(Ei)), np.where(up, np.log(hi), np.log1p(Ej))
            v = v_hi
            for _ in range(_NEWTON_STEPS):
                e = k1 * np.exp(v)
                inner = e + k0
                v = np.minimum(np.maximum(v - (c1 * v + c2 * np.log(inner) - t) / (c1 + c2 * e / inner), v_lo), v_hi)
            b = np.where(up, np.exp(v), (np.exp(v) - B) / slope)
            # slope ≤ 0: F' < 0 on the interval (b = lo); λ = 0 < slope: F' > 0 (b = hi)
            b = np.where(slope > 0, np.where(lam > 0, b, hi), lo)
        if not np.isfinite(np.sum(b)):  # some b not finite (or a finite sum overflowed: the fix is then a no-op)
            b = np.nan_to_num(b, nan=0.5, posinf=0.5)
        np.maximum(b, lo, out=b)
        np.minimum(b, hi, out=b)  # np.clip's floats (b has no NaN), without its overhead
        # the chord C = (1 − t)E_i + tE_j, t = (b − lo)/width (C − 1 of the chord, ≥ 0)
        t = b - lo
        t /= width
        C = 1.0 - t
        C *= Ei
        t *= Ej
        C += t
        log_c, lam_bp = np.log1p(C), b ** p
        lam_bp *= lam  # λb^p
        out = log_c - lam_bp  # F(b)
        C += 1.0
        one_c = C  # 1 + C
        lam_bp1 = np.multiply(lam * p, b ** (p - 1.0) if p != 2.0 else b, out=t)  # λp·b^{p−1} (b^1 = b exactly)
        d1 = slope / one_c
        d1 -= lam_bp1  # F'(b) = slope/(1 + C) − λp·b^{p−1}
        rise = lo - b
        rise *= d1
        np.subtract(hi, b, out=b)
        b *= d1
        np.maximum(rise, b, out=rise)
        out += rise  # F(b) + max(F'(b)(A_i − b), F'(b)(A_{i+1} − b))
        if rounded:  # C is a sum of non-negative terms (few ulps of C), so log1p(C) is within few ulps of 1 + itself
            out = out + 1e-14 * (1.0 + log_c + lam_bp + width * (np.abs(slope) / one_c + lam_bp1))
    if np.isnan(np.sum(out)):  # some entry NaN (or ∞ − ∞ in the sum: the fix is then a no-op)
        out[np.isnan(out)] = np.inf
    return out


def _step_power(lam: np.ndarray, G: np.ndarray, Kq: np.ndarray, U: np.ndarray, s: float,
                rounded: bool = False) -> np.ndarray:
    r"""min(G_{i+1} − λU_i, sup_{[U_i, U_{i+1}]} (K_{i+1} u^s − λu)), rows λ, columns intervals: the two bounds of
    :func:`_interval_values` other than the chord (``rounded``: as there)."""
    U_lo, U_hi = (U * (1.0 - 4.0 * _EPS), U * (1.0 + 4.0 * _EPS)) if rounded else (U, U)
    lam_lo = lam[:, None] * U_lo[None, :-1]
    step = G[None, 1:] - lam_lo
    power = _power_sup(lam, Kq[None, 1:], s, U_lo[None, :-1], U_hi[None, 1:], lam_lo)
    if rounded:  # the bound read: a sum that is not a number is no bound, +∞
        with np.errstate(over="ignore", invalid="ignore"):
            step = step + 1e-15 * (np.abs(G[None, 1:]) + lam[:, None] * U_lo[None, :-1])
            power = power + 1e-15 * (Kq[None, 1:] * U_hi[None, 1:] ** s + lam[:, None] * U_hi[None, 1:])
        step = np.where(np.isnan(step), np.inf, step)
        power = np.where(np.isnan(power), np.inf, power)
    return np.minimum(step, power, out=step)


def _interval_values(lam: np.ndarray, G: np.ndarray, Kq: np.ndarray, U: np.ndarray, A: np.ndarray, s: float,
                     rounded: bool = False) -> np.ndarray:
    r"""Upper bounds on sup_{a ∈ [A_i, A_{i+1}]} (L_j(a) − λa^p) = sup_{[U_i, U_{i+1}]} (g(u) − λu) (U = A^p):
    min(G_{i+1} − λU_i, sup (K_{i+1} u^s − λu), the chord bound of :func:`_chord_sup`).

    g ≤ G_{i+1} on the interval by monotonicity; g(u) ≤ K_{i+1} u^s there by :func:`quadratic_coefficient`
    (K(a_s) bounds L_j(a)/a² for every a ≤ a_s); M_j convex in a (Lemma 4d). ``rounded``: each bound is first
    raised by 1e-15 (1e-14 for the chord) × the size of its own operands (a few ulps of its subtraction), and
    U_i = fl(A_i^p) is widened by 4 ulps at each end (so [U_i, U_{i+1}] ⊇ [A_i^p, A_{i+1}^p] exactly), so the min
    is an upper bound in floating point too; the slack of a bound is never charged to another (a huge K of an
    unused power bound once inflated a bound by 10^49).
    """
    return _run(_interval_values_steps(lam, G, Kq, U, A, s, rounded))


def _interval_values_steps(lam: np.ndarray, G: np.ndarray, Kq: np.ndarray, U: np.ndarray, A: np.ndarray, s: float,
                           rounded: bool = False):
    """:func:`_interval_values` as a step generator (its chord bounds one :class:`_Chords` request)."""
    chord = yield _chord_grid(lam, G, A, 2.0 / s, rounded)
    return np.minimum(_step_power(lam, G, Kq, U, s, rounded), chord)


def _interval_max(lam: np.ndarray, G: np.ndarray, Kq: np.ndarray, U: np.ndarray, A: np.ndarray, s: float,
                  rounded: bool = False) -> np.ndarray:
    r"""``np.max(_interval_values(lam, …), axis=1)``, the same floats, computing the chord bound (the costly one) only
    where it can matter: per row, first at the interval whose other two bounds are largest, which gives a value v
    the row's max is at least; an interval whose other two bounds are ≤ v cannot raise the max (its value is ≤ them),
    so its chord is skipped. Every chord bound computed is :func:`_chord_sup_at` of that entry alone (elementwise).
    At p = 2 (the chord's stationary point in closed form, no bisection) the plain max is faster: taken there."""
    return _run(_interval_max_steps(lam, G, Kq, U, A, s, rounded))


def _interval_max_steps(lam: np.ndarray, G: np.ndarray, Kq: np.ndarray, U: np.ndarray, A: np.ndarray, s: float,
                        rounded: bool = False):
    """:func:`_interval_max` as a step generator (:class:`_Chords` requests)."""
    p = 2.0 / s
    if p == 2.0:
        return np.max((yield from _interval_values_steps(lam, G, Kq, U, A, s, rounded)), axis=1)
    sp = _step_power(lam, G, Kq, U, s, rounded)
    E = _chord_excess(G)

    def chord_at(r: np.ndarray, c: np.ndarray) -> _Chords:
        return _Chords(lam[r], A[c], A[c + 1], E[c], E[c + 1], p, rounded)

    rows = np.arange(lam.size)
    top = np.argmax(sp, axis=1)
    if lam.size == 1:  # one row (the dual's rounded value): every column in one request, the same columns read
        cols = np.arange(sp.shape[1])
        vals = np.minimum(sp[0], (yield chord_at(np.zeros_like(cols), cols)))
        with np.errstate(invalid="ignore"):
            read = sp[0] > vals[top[0]]
        read[top[0]] = True
        return np.array([np.max(vals[read])])
    first = np.minimum(sp[rows, top], (yield chord_at(rows, top)))
    with np.errstate(invalid="ignore"):
        todo = sp > first[:, None]  # NaN rows (the first value NaN) compare False: their max is that NaN
    todo[rows, top] = False
    r, c = np.nonzero(todo)
    vals = np.full(sp.shape, -np.inf)
    vals[rows, top] = first
    vals[r, c] = np.minimum(sp[r, c], (yield chord_at(r, c)))
    return np.max(vals, axis=1)


def _min_row(lam: np.ndarray, mp: float, dim: int, G: np.ndarray, Kq: np.ndarray, U: np.ndarray, A: np.ndarray,
             s: float) -> Tuple[int, float]:
    r"""(i, F_i) with i = ``np.argmin(F)``, F = λ m^p + d·``_interval_max``(λ, …) over the rows λ: the same index and
    float, computing each row's max only where it can be the least (p ≠ 2, no NaN bound). Each row's max M
    is at least v, the row's value at its interval of largest other bounds, so
    fl(λm^p + fl(d·v)) ≤ F (rounding is monotone); the row of least lower end is computed, then every row whose
    lower end is at most its F (a row above it cannot be the least, nor tie it)."""
    return _run(_min_row_steps(lam, mp, dim, G, Kq, U, A, s))[:2]


def _min_row_steps(lam: np.ndarray, mp: float, dim: int, G: np.ndarray, Kq: np.ndarray, U: np.ndarray,
                   A: np.ndarray, s: float, seed: Optional[Tuple[int, float, int]] = None):
    """:func:`_min_row` as a step generator (:class:`_Chords` requests), returning (i, F_i, c_i), c_i a column where
    row i's max was found (−1 where not known; a hint for rows of nearby λ, any column is valid). ``seed`` =
    (k, F_k, c): row k's F (its float: computed before on the same λ, G, K, U, A) and such a column; then row k is
    not computed again, and the rows' lower ends read column c beside their top column in the same request (two
    requests instead of four)."""
    p = 2.0 / s
    sp = _step_power(lam, G, Kq, U, s) if p != 2.0 else None
    if sp is None or np.isnan(sp).any():
        return (yield from _least_row_plain_steps(lam, mp, dim, G, Kq, U, A, s))
    E = _chord_excess(G)

    def chord_at(r: np.ndarray, c: np.ndarray) -> _Chords:
        return _Chords(lam[r], A[c], A[c + 1], E[c], E[c + 1], p, False)

    rows = np.arange(lam.size)
    top = np.argmax(sp, axis=1)
    if seed is None:
        first = np.minimum(sp[rows, top], (yield chord_at(rows, top)))
    else:
        r0, F0, hint = seed
        both = yield chord_at(np.concatenate([rows, rows]), np.concatenate([top, np.full(rows.size, hint)]))
        first = np.minimum(sp[rows, top], both[: rows.size])
        at_hint = np.minimum(sp[rows, hint], both[rows.size:])
    if np.isnan(first).any():
        return (yield from _least_row_plain_steps(lam, mp, dim, G, Kq, U, A, s))
    low = lam * mp + dim * first

    def row_values(sel: np.ndarray, known: np.ndarray):
        # as _interval_max: only where the other bounds exceed the value already known (``known`` at top, and at
        # the hint column where not -inf), which the row's max is at least
        todo = sp[sel] > np.maximum(first[sel], known)[:, None]
        todo[np.arange(sel.size), top[sel]] = False
        todo[np.arange(sel.size), hint] = False
        r, c = np.nonzero(todo)
        vals = np.full((sel.size, sp.shape[1]), -np.inf)
        vals[np.arange(sel.size), top[sel]] = first[sel]
        vals[np.arange(sel.size), hint] = np.maximum(vals[np.arange(sel.size), hint], known)
        vals[r, c] = np.minimum(sp[sel[r], c], (yield chord_at(sel[r], c)))
        return vals

    F = np.full(lam.size, np.inf)
    cols = np.full(lam.size, -1)
    if seed is None:
        r0 = int(np.argmin(low))
        hint = int(top[r0])
        vals = yield from row_values(np.array([r0]), np.array([-np.inf]))
        F[r0] = lam[r0] * mp + dim * np.max(vals[0])
        cols[r0] = hint = int(np.argmax(vals[0]))
        rest = np.nonzero(low <= F[r0])[0]
        rest = rest[rest != r0]
        if rest.size:
            # the column of r0's max: the other rows (nearby λ) often peak there too; their value there raises their
            # lower end (rows above F[r0] are dropped) and the value every other column must exceed to be computed
            at_hint = np.minimum(sp[rest, hint], (yield chord_at(rest, np.full(rest.size, hint))))
            known = np.maximum(first[rest], at_hint)
    else:
        F[r0], cols[r0] = F0, hint
        rest = rows[rows != r0]
        known = np.maximum(first, at_hint)[rest]
    if rest.size:
        keep = lam[rest] * mp + dim * known <= F[r0]
        rest, known = rest[keep], known[keep]
    if rest.size:
        vals = yield from row_values(rest, known)
        F[rest] = lam[rest] * mp + dim * np.max(vals, axis=1)
        cols[rest] = np.argmax(vals, axis=1)
    i = int(np.argmin(F))
    return i, float(F[i]), int(cols[i])


def _least_row_plain_steps(lam: np.ndarray, mp: float, dim: int, G: np.ndarray, Kq: np.ndarray, U: np.ndarray,
                           A: np.ndarray, s: float):
    """(i, F_i, −1) of :func:`_min_row_steps` from every row's :func:`_interval_max` (p = 2, or a NaN bound)."""
    F = lam * mp + dim * (yield from _interval_max_steps(lam, G, Kq, U, A, s))
    i = int(np.argmin(F))
    return i, float(F[i]), -1


def _dual(
    G: np.ndarray, Kq: np.ndarray, U: np.ndarray, A: np.ndarray, mp: float, dim: int, s: float
) -> Tuple[float, float, float, float]:
    r"""(bound, λ, lower, λ_low): bound = min over candidate λ ≥ 0 of F(λ) = λ m^p + d·max_i(interval value),
    rounded up; lower = min_λ [λ m^p + d·max(0, max_i (G_i − λU_i))] (the same dual on grid points only:
    a refinement target, not used as a bound). Candidates: 0 and the upper-hull slopes of (U_i, G_i).
    """
    return _run(_dual_steps(G, Kq, U, A, mp, dim, s))


#: :func:`_dual_steps`' polishing rows, λ·(1 + t) for 81 t from −0.02 to 0.02 (its middle one 1 + 0.0 = 1 exactly);
#: read-only, built once (the factors are the same floats at every call)
_POLISH = 1.0 + np.linspace(-0.02, 0.02, 81)
_POLISH.setflags(write=False)


def _dual_steps(G: np.ndarray, Kq: np.ndarray, U: np.ndarray, A: np.ndarray, mp: float, dim: int, s: float):
    """:func:`_dual` as a step generator (:class:`_Chords` requests)."""
    slopes = np.concatenate([_upper_hull_slopes(U, G), _upper_hull_slopes(U[:-1], G[1:])])
    cand = np.unique(np.concatenate([[0.0], slopes[np.isfinite(slopes) & (slopes > 0)]]))
    # a λ with λm^p beyond float range has F(λ) ≥ λm^p = ∞: never the least (λ = 0 always stays); U_i ≤ m^p, so no
    # λU_i of the rows kept overflows either (large p: U = A^p spans hundreds of decades)
    cand = cand[cand <= _FLOAT_MAX / (mp * (1.0 + 0.03))]
    best, val, col = yield from _min_row_steps(cand, mp, dim, G, Kq, U, A, s)
    low_vals = cand * mp + dim * np.maximum(0.0, np.max(G[None, :] - cand[:, None] * U[None, :], axis=1))
    lb = int(np.argmin(low_vals))
    lower, lam_low = float(low_vals[lb]), float(cand[lb])
    if cand[best] > 0:  # F need not be convex (min of step and power bounds): polish around the best candidate
        near = cand[best] * _POLISH
        # the middle row is the best candidate itself (1 + 0.0): its F is known, the same float
        same = np.nonzero(near == cand[best])[0]
        seed = (int(same[0]), val, col) if same.size and col >= 0 else None
        near_best, near_val, _ = yield from _min_row_steps(near, mp, dim, G, Kq, U, A, s, seed)
        if near_val < val:
            cand, best = near, near_best
    lam = float(cand[best])
    # Round up: each interval value by 1e-15 × the size of its own operands, then λ m^p + d·max by 1e-12.
    v = float((yield from _interval_max_steps(np.array([lam]), G, Kq, U, A, s, rounded=True))[0])
    bound = (lam * mp + dim * v) * (1.0 + _FP_SLACK)
    return bound, lam, lower, lam_low


#: the shift grid lives on the lattice a = 2^{i/_LATTICE} (integer i), shared by every σ: a noise schedule,
#: the σ solver and growing histories reuse the cached per-coordinate moments of the shifts they share
_LATTICE = 64
#: initial grid: every _INITIAL_STEP-th lattice point (ratio 2^{1/2} in a), from the quadratic region to m
_INITIAL_STEP = 32


def _lattice_shift(i: int) -> float:
    """a = 2^{i/64} from its integer lattice index (bit-identical for every caller, so caches hit)."""
    return 2.0 ** (i / _LATTICE)


#: S_j bounds computed so far: {(j, σ, β, d, p): bound} (:func:`ball_log_moment`, :func:`ball_log_moments`)
_ball_cache: Dict[Tuple[int, float, float, int, float], float] = {}


def ball_log_moment(j: int, noise_multiplier: float, beta: float, dim: int, clip_norm_p: float) -> float:
    r"""Upper bound on S_j = sup_{‖μ‖_p ≤ m} Σ_i L_j(|μ_i|), m = 1/noise_multiplier (Lagrangian dual, see module).

    d = 1: L_j(m). p = ∞: d·L_j(m) (every coordinate at m, by monotonicity). Otherwise the dual bound on a grid
    of shifts 0 = A_0 < A_1 < … < A_N = m (U_i = A_i^p), A_1 ≤ min(m, 10^{-3}/j), the inner points on the
    σ-independent lattice 2^{i/64} (every 32nd point at first), with per-interval bounds
    min(g(U_{i+1}), K(A_{i+1})·u^{2/p}), refined (interval split at the lattice point nearest the geometric
    midpoint) where the bound exceeds the same dual on grid points by more than 3e-3 relative (at most 24
    rounds of 16 splits). Any grid gives a valid bound; the lattice only lets different σ share quadratures.
    Cached; :func:`ball_log_moments` computes several orders at once (the same floats).
    """
    return _ball_log_moments_of([int(j)], noise_multiplier, beta, dim, clip_norm_p, batched=False)[0]


def _ball_log_moments_of(js: Sequence[float], noise_multiplier: float, beta: float, dim: int, clip_norm_p: float,
                         batched: bool = True, cache: Optional[dict] = None, k_order: Optional[int] = None) -> list:
    r"""[:func:`ball_log_moment` (j, …) for j in ``js``]: the orders not cached run their refinements
    (:func:`_ball_log_moment_rounds`) side by side; each round's quadratures of every order go in one batch, and so do
    the chord bounds of every order's dual (its :class:`_Chords` requests, stage by stage: answered while any order
    asks for them, the quadratures once every order waits for its own) (``batched``; False: one batch of quadratures
    per order and each chord request alone, the plain path the tests compare with). Every order's grid and bound
    are those it gets alone: its refinement reads only its own values, and a batch gives each shift the value it
    gets alone (:func:`_log_moment_uppers_by_order`, :func:`quadratic_coefficients`, :func:`_chords_batched`).
    ``cache`` (default the integer orders' ``_ball_cache``) and ``k_order``: the order whose quadratic bound K each
    order's dual reads (default its own; the real orders in (1, 2] of :mod:`.low_orders` read K_2 ≥ K_α)."""
    cache = _ball_cache if cache is None else cache
    keys = {j: (j, noise_multiplier, beta, dim, clip_norm_p) for j in js}
    runs = {j: _ball_log_moment_rounds(j, noise_multiplier, beta, dim, clip_norm_p) for j in keys
            if keys[j] not in cache}
    asks = {}
    for j, run in list(runs.items()):
        try:
            asks[j] = next(run)
        except StopIteration as done:
            cache[keys[j]] = done.value
    while asks:
        chords = [j for j, a in asks.items() if isinstance(a, _Chords)]
        if chords:
            vals = _chords_batched([asks[j] for j in chords]) if batched else [_chord_sup_at(*asks[j]) for j in chords]
            answers = dict(zip(chords, vals))
        else:
            groups = [asks] if batched else [{j: a} for j, a in asks.items()]
            answers = {}
            for group in groups:
                G = _log_moment_uppers_by_order(group, beta)
                K = _quadratic_bounds_by_order(group, beta, k_order)
                answers.update({j: (G[j], K[j]) for j in group})
        for j in list(answers):
            try:
                asks[j] = runs[j].send(answers[j])
            except StopIteration as done:
                cache[keys[j]] = done.value
                del asks[j]
    return [cache[keys[j]] for j in js]


def _quadratic_bounds_by_order(requests: Dict[int, np.ndarray], beta: float,
                               k_order: Optional[int] = None) -> Dict[int, np.ndarray]:
    """{j: K(a) of :func:`quadratic_coefficients` where a ≤ _QUADRATIC_MAX_SHIFT, +∞ elsewhere (there the quadratic
    bound does not help: K(0) = 0)} for {j: shifts a}, every order in one batch; K at order ``k_order`` for every j
    where given (the real orders of :mod:`.low_orders` read K_2 ≥ K_α)."""
    small = {j: a <= _QUADRATIC_MAX_SHIFT for j, a in requests.items()}
    shifts = [requests[j][small[j]] for j in requests]
    if not shifts:
        return {}
    orders = np.concatenate([np.full(a.size, float(j if k_order is None else k_order))
                             for j, a in zip(requests, shifts)])
    vals = np.split(quadratic_coefficients(orders, np.concatenate(shifts), beta),
                    np.cumsum([a.size for a in shifts])[:-1])
    out = {}
    for (j, a), v in zip(requests.items(), vals):
        out[j] = np.full(a.shape, math.inf)
        out[j][small[j]] = v
    return out


def _ball_log_moment_rounds(j: int, noise_multiplier: float, beta: float, dim: int, clip_norm_p: float):
    """The refinement of :func:`ball_log_moment` as a generator: it yields the shifts whose (L_j upper bounds,
    K bounds) it needs next, or its dual's chord bounds (:class:`_Chords`), is sent them, and returns the bound."""
    m = shift_radius(noise_multiplier)
    p = clip_norm_p
    if dim == 1:
        return log_moment_upper(j, m, beta)
    if math.isinf(p):
        return dim * log_moment_upper(j, m, beta) * (1.0 + _FP_SLACK)
    mp = radius_power(noise_multiplier, p)  # ≥ (1/σ)^p: the budget only grows
    s = 2.0 / p
    i_lo = _INITIAL_STEP * math.floor(_LATTICE * math.log2(min(m, 1e-3 / j)) / _INITIAL_STEP)
    i_hi = math.ceil(_LATTICE * math.log2(m))
    A = np.array([0.0] + [a for a in (_lattice_shift(i) for i in range(i_lo, i_hi + 1, _INITIAL_STEP)) if a < m] + [m])
    G, Kq = yield A
    U = A ** p
    U[-1] = mp
    if not np.all(np.isfinite(G)):
        return math.inf
    bound = math.inf
    for _ in range(_REFINE_ROUNDS):
        bound, lam, lower, lam_low = yield from _dual_steps(G, Kq, U, A, mp, dim, s)
        if bound <= lower * (1.0 + _REL_TOL):
            return bound
        e = (yield from _interval_values_steps(np.array([lam_low]), G, Kq, U, A, s))[0]
        attained = max(0.0, float(np.max(G - lam_low * U)))
        loose = np.nonzero(dim * (e - attained) > _REL_TOL * lower)[0]
        if loose.size == 0:
            return bound
        loose = _pick_splits(loose, e, G, Kq, U, s, lam_low)
        new = np.array([a for a in (_split(A[i], A[i + 1]) for i in loose.tolist())])
        new = new[(new > A[loose]) & (new < A[loose + 1])]
        if new.size == 0:
            return bound
        G_new, K_new = yield new
        A = np.concatenate([A, new])
        U = np.concatenate([U, new ** p])
        G = np.concatenate([G, G_new])
        Kq = np.concatenate([Kq, K_new])
        order = np.argsort(A, kind="stable")
        A, U, G, Kq = A[order], U[order], G[order], Kq[order]
    return bound


def _pick_splits(loose: np.ndarray, e: np.ndarray, G: np.ndarray, Kq: np.ndarray, U: np.ndarray, s: float,
                 lam_low: float) -> np.ndarray:
    r"""Which loose intervals to split (a heuristic: any grid is valid): half of the _SPLITS_PER_ROUND by the
    largest interval value e at λ_low, half by the largest critical slope λ_i = min(G_{i+1}/U_i,
    K_{i+1}·max(U_i, U_{i+1})^{s−1}) above λ_low (the intervals that keep λ, hence λ·m^p, from coming down
    when the worst shift spreads over many coordinates)."""
    by_value = loose[np.argsort(-e[loose])][: _SPLITS_PER_ROUND // 2]
    lo, hi = U[loose], U[loose + 1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a ranking only: inf is fine
        step = np.where(lo > 0, G[loose + 1] / lo, np.inf)
        power = Kq[loose + 1] * np.maximum(np.where(lo > 0, lo ** (s - 1.0), np.inf if s < 1 else 0.0),
                                           hi ** (s - 1.0))
    # np.nan_to_num(·, nan=np.inf)'s floats without its wrapper: NaN → +∞, ±∞ → ±the largest float (masks first)
    crit = np.minimum(step, power)
    nan = np.isnan(crit)
    np.copyto(crit, _FLOAT_MAX, where=crit == np.inf)
    np.copyto(crit, -_FLOAT_MAX, where=crit == -np.inf)
    crit[nan] = np.inf
    above = crit > lam_low * (1.0 + _REL_TOL)
    steep = loose[above]
    steep = steep[np.argsort(-crit[above])]  # (loose ascending: crit[above] is each steep interval's crit)
    taken = set(by_value.tolist())
    by_slope = [i for i in steep.tolist() if i not in taken][: _SPLITS_PER_ROUND // 2]
    return np.array(sorted(taken.union(by_slope)), dtype=by_value.dtype)  # np.unique's values, sorted


def _split(a_lo: float, a_hi: float) -> float:
    """A shift inside (a_lo, a_hi): the lattice point 2^{k/64} at or below the geometric midpoint when it lies
    strictly inside (a_lo = 0: a_hi / 2^{1/2} rounded down to the lattice), else the exact geometric midpoint."""
    x_hi = _LATTICE * math.log2(a_hi)
    if a_lo == 0.0:
        return _lattice_shift(math.floor(x_hi) - _INITIAL_STEP)
    k = math.floor(0.5 * (_LATTICE * math.log2(a_lo) + x_hi))
    a = _lattice_shift(k)
    return a if a_lo < a < a_hi else math.sqrt(a_lo * a_hi)


def _computed_orders(max_order: int) -> np.ndarray:
    """Orders j where S_j is computed: every j ≤ 8, then ratio ≈ 1.4 (chords between), and ``max_order``."""
    small = np.arange(2, min(_EXACT_ORDERS, max_order) + 1)
    n_big = int(math.ceil(math.log(max_order / _EXACT_ORDERS) / math.log(1.4))) + 1 if max_order > _EXACT_ORDERS else 0
    big = np.round(np.geomspace(_EXACT_ORDERS, max_order, n_big)).astype(int) if n_big else np.zeros(0, int)
    return np.unique(np.concatenate([small, big, [max_order]])).astype(int)


def ball_log_moments(max_order: int, noise_multiplier: float, beta: float, dim: int, clip_norm_p: float,
                     upto: Optional[int] = None) -> np.ndarray:
    r"""Array B[j] ≥ S_j for j = 0 … max_order (B[0] = B[1] = 0): computed orders, chords in between.

    S_j is convex in j (a supremum of the convex log-MGFs j ↦ log E_Q[e^{jℓ}]), so the chord through upper
    bounds at j_a < j < j_b is an upper bound at j. ``upto``: only B[0 … upto], from the computed orders of
    ``max_order`` up to the first one ≥ ``upto`` (the same floats as the full array's: a chord reads its two ends).
    """
    js = _computed_orders(int(max_order))
    last = int(max_order) if upto is None else int(upto)
    js = js[: int(np.searchsorted(js, last)) + 1]
    vals = np.array(_ball_log_moments_of([int(j) for j in js], noise_multiplier, beta, dim, clip_norm_p))
    xs = np.concatenate([[1], js])
    ys = np.concatenate([[0.0], vals])
    out = np.zeros(last + 1)
    with np.errstate(invalid="ignore"):
        out[1:] = np.interp(np.arange(1, last + 1), xs, ys)
    inside = js[js <= last]
    out[inside] = vals[: inside.size]
    out[1:] = out[1:] * (1.0 + _FP_SLACK)  # interpolation round-off, upward
    out[np.isnan(out)] = np.inf
    return out


def subsampled_rdp_upper(orders: Sequence[int], sample_rate: float, logm: np.ndarray) -> Dict[str, np.ndarray]:
    r"""One-step RDP per order from upper bounds logm[j] ≥ log M(j) (Lemma 6:
    :func:`.renyi.subsampled_rdp_from_log_moments`, monotone in every logm[j]), rounded up by 1 + 1e-12."""
    one = renyi.subsampled_rdp_from_log_moments(orders, sample_rate, logm)
    return {k: v * (1.0 + _FP_SLACK) for k, v in one.items()}


@lru_cache(maxsize=256)
def step_rdp(noise_multiplier: float, sample_rate: float, beta: float, dim: int, clip_norm_p: float,
             orders: Tuple[int, ...], count_noise_multiplier: Optional[float] = None,
             grid_order: Optional[int] = None) -> Dict[str, np.ndarray]:
    r"""One step's proven RDP(α) per direction, cached by what it depends on: (σ, q, β, d, p, orders, σ_c, grid).

    = :func:`subsampled_rdp_upper` (orders, q, :func:`ball_log_moments` (G, σ, β, d, p, upto = max α)), G =
    ``grid_order`` (default: max α; it sets the orders where S_j is computed, chords between), the moments
    replaced order by order by the smaller dimension-free bound of :func:`.fisher.fisher_log_moments` where it
    is proven (β = 1, p ≤ 2); the
    arrays are read-only (shared by every history with this step: growing histories and noise schedules).
    A noisy count released from the same batch (σ_c not None) is one more independent coordinate (Lemma 1):
    its Gaussian log-moment j(j−1)/(2σ_c²) is added to the ball's before subsampling (Lemma 8).
    """
    logm = ball_log_moments(max(orders) if grid_order is None else grid_order, noise_multiplier, beta, dim,
                            clip_norm_p, upto=max(orders))
    fisher = fisher_log_moments(max(orders), noise_multiplier, beta, clip_norm_p)  # β = 1, p ≤ 2: dimension-free
    if fisher is not None:
        logm = np.minimum(logm, fisher)  # both bound S_j from above, order by order
    if count_noise_multiplier is not None:
        logm = logm + count_log_moments(max(orders), count_noise_multiplier)
    one = subsampled_rdp_upper(orders, sample_rate, logm)
    # every pair here is symmetric (x ↦ μ − x swaps P_μ and Q, with the count coordinate too), so the add RDP is
    # ≤ the remove RDP order by order (docs/accounting.md, Lemma S): the remove bound caps the add bound
    one = {"remove": one["remove"], "add": np.minimum(one["add"], one["remove"])}
    for v in one.values():
        v.setflags(write=False)
    return one


def _validate_orders(orders: Optional[Sequence[int]]) -> list:
    orders = [int(o) for o in (DEFAULT_ORDERS if orders is None else orders)]
    if not orders or any(o < 2 for o in orders):
        raise ValueError(f"orders must be integers ≥ 2, got {orders!r}")
    return orders


def rdp_ball_curves(segments: Sequence, orders: Sequence[int],
                    grid_order: Optional[int] = None) -> Optional[Dict[str, np.ndarray]]:
    r"""{direction: RDP(α) for α in ``orders``}: Σ_segments steps·RDP_seg(α), proven over every shift in the ball.

    ``segments``: :class:`.history.Segment` objects or raw entries (σ, q, steps[, β, d, p]). None for an empty
    history; every value +inf when a segment has σ = 0. ``grid_order``: as in :func:`step_rdp` (default max α).
    """
    segs = list(segments) if all(isinstance(s, Segment) for s in segments) else normalize_history(segments)
    if not segs:
        return None
    if any(s.noise_multiplier == 0.0 for s in segs):
        return {k: np.full(len(orders), np.inf) for k in ("remove", "add")}
    total = {"remove": np.zeros(len(orders)), "add": np.zeros(len(orders))}
    for s in segs:
        one = step_rdp(s.noise_multiplier, s.sample_rate, s.beta, s.dim, s.clip_norm_p, tuple(int(o) for o in orders),
                       s.count_noise_multiplier, grid_order)
        for k in total:
            total[k] = total[k] + s.steps * one[k]
    return {k: np.where(np.isfinite(v), v, np.inf) for k, v in total.items()}


def rdp_ball_epsilon(
    segments: Sequence[Sequence], delta: float, orders: Optional[Sequence[int]] = None,
) -> Tuple[float, float]:
    r"""(ε, α): proven ε(δ) over every shift in the ℓp ball, for segments (σ, q, steps[, β, d, p]).

    Per direction: ε = min_α Opacus ``get_privacy_spent``: RDP(α) + log((α−1)/α) − (log δ + log α)/(α−1)
    (Balle et al. 2020); the larger direction is returned. σ = 0 gives (inf, nan), an empty history (0, nan).
    ``orders=None``: the default orders ≤ 16 first, then ≤ 64, then all, moving on only when the best order is in
    the top quarter of the range tried (a min over fewer orders is an upper bound too; each order's moments cost
    a few hundred quadratures, and the high orders only help small ε); within a tier the orders are taken from
    below and the higher ones only while the best order is the highest one taken (:func:`_tier_epsilon`).
    """
    delta = validate_delta(delta)
    if orders is None:
        segs = list(segments) if all(isinstance(s, Segment) for s in segments) else normalize_history(segments)
        low, below = _below(segs, delta)  # a guess of the best order (the windows move on where it is wrong)
        guess = int(below) if math.isfinite(below) else None
        for cap in ORDER_TIERS:
            found = _tier_epsilon(cap, segs, delta, guess, low=low)
            if not isinstance(found, int):
                return found
            guess = max(found + 1, guess or 0)  # the tier's best order is ≥ found
        return _tier_epsilon(DEFAULT_ORDERS[-1], segs, delta, guess, last=True, low=low)
    return _rdp_ball_epsilon(_validate_orders(orders), segments, delta)


#: :func:`rdp_ball_epsilon` tries the default orders up to each of these in turn, then all of them
ORDER_TIERS = (16, 64)
#: :func:`_tier_epsilon`'s first window ends at the computed order ≥ this (S_2, S_3 decide where ε is large)
_FIRST_WINDOW = 3
#: :func:`_settled`: windows stop only where the window's ε is within this fraction of the lower end's
_WINDOW_GAP = 0.03


def _tier_epsilon(cap: int, segments: Sequence, delta: float, guess: Optional[int] = None, last: bool = False,
                  low: Optional[float] = None):
    r"""One tier of :func:`rdp_ball_epsilon`: ``_rdp_ball_epsilon`` (the default orders ≤ ``cap``), its (ε, α) where
    α < 0.75·cap or ``last``; else (the tier says "go on") a lower end of that α, an int.

    S_j is computed at the orders of ``_computed_orders(cap)`` (chords between) from below, in windows: the RDP at
    every α ≤ J (J a computed order) reads S_j at computed j ≤ J only, so it is the tier's own float. Each
    direction's min over the window is the tier's min when the window's best α is not its highest order, provided
    the conversion (ε as a function of α) has no second local minimum above that one (the windows stop there; a
    min over fewer orders is an upper bound whatever the orders, so a second minimum could only make the printed
    ε larger than the full tier's, never unsound); a direction whose best α is its window's highest order
    sends the window on to the next computed order. Windows: up to the first computed order past ``guess`` (the
    best order of :func:`_below`, or past the previous tier's; where it is in the top quarter, up to the first
    computed order in it, enough to move on), then one computed order at a time; without a guess up to 3, then 8,
    then one at a time.
    """
    orders = [o for o in DEFAULT_ORDERS if o <= cap]
    computed = [int(j) for j in _computed_orders(max(orders))]
    if guess is None:
        ends = [j for j in computed if j >= _FIRST_WINDOW][:1] + [j for j in computed if j >= _EXACT_ORDERS]
    else:  # past the guess; where it is in the top quarter, just into the top quarter (enough to move on)
        first = guess + 1 if last or guess < 0.75 * cap else min(guess + 1, math.ceil(0.75 * cap))
        ends = [j for j in computed if j >= max(first, _FIRST_WINDOW)]
    for J in sorted(set(ends)):
        window = [o for o in orders if o <= J] or orders[:1]
        if window[-1] == orders[-1]:
            break
        curves = rdp_ball_curves(segments, window, grid_order=max(orders))
        if curves is None:
            return 0.0, float("nan")
        if not all(np.isfinite(rdp).any() for rdp in curves.values()):
            continue  # the full tier may have no finite order either: (∞, nan) is decided on all of them
        bests = [_best_order(rdp, window, delta) for rdp in curves.values()]
        inside = [_settled(rdp, window, delta, computed, J, low) for rdp in curves.values()]
        top = max((e for (e, _), k in zip(bests, inside) if k), default=-math.inf)
        if all(k or e < top for (e, _), k in zip(bests, inside)):
            # every direction not settled has a window min (≥ its tier min) below a settled one's: the larger
            # direction (the first of equals, as in _rdp_ball_epsilon) is among the settled ones
            eps, order = max(((e, o) for (e, o), k in zip(bests, inside) if k), key=lambda b: b[0])
            return (eps, order) if last or not order >= 0.75 * cap else int(order)
        if not last and all(o >= 0.75 * cap for _, o in bests):  # the tier's best order is at least this
            return int(min(o for _, o in bests))
    eps, order = _rdp_ball_epsilon(orders, segments, delta)
    return (eps, order) if last or not order >= 0.75 * cap else int(order)


def _settled(rdp: np.ndarray, window: list, delta: float, computed: list, end: int,
             low: Optional[float] = None) -> bool:
    r"""Whether one direction's min over ``window`` (S_j computed at the orders ``computed`` ≤ ``end``) is taken as
    its min over every order of the tier: its best α is below the window's highest order α_w, ε rises from the
    previous computed order to α_w, and by more than 2·_REL_TOL·RDP(α_w) + 2·g above the window's min, g the min's
    excess over the lower end ``low`` of the bound's ε (:func:`_below`), with g ≤ _WINDOW_GAP of the min. ε is
    scalloped between computed orders (each chord raises it), so its local minima sit at computed orders; each S_j
    is within about _REL_TOL of the dual on its grid points where the dual converged (how far that noise moves ε
    where the curve is flat, e.g. q = 1), and g measures how loose the S_j are where it did not (d = 10^9, q = 1:
    ε zigzags, and the whole tier is computed). Without ``low``: not settled. A heuristic for where the full tier's
    min lies, never for soundness."""
    a = np.asarray(window, dtype=np.float64)
    eps = _conversion_epsilons(rdp, a, delta)
    prev = [j for j in computed if j < end]
    if not prev or not np.isfinite(eps[-1]):
        return False
    i_prev = int(np.searchsorted(a, prev[-1], side="right")) - 1  # the window's order at or below it
    eps_min = float(np.min(np.where(np.isfinite(eps), eps, np.inf)))
    best = int(np.argmin(np.where(np.isfinite(eps), eps, np.inf)))
    if low is None or not math.isfinite(low) or eps_min - low > _WINDOW_GAP * abs(eps_min):
        return False  # the bounds are far above the lower end: S_j may be loose by as much (the whole tier then)
    noise = 2.0 * _REL_TOL * float(rdp[-1]) + 2.0 * max(eps_min - low, 0.0)
    return (best < a.size - 1 and 0 <= i_prev < a.size - 1 and bool(eps[-1] > eps[i_prev])
            and float(eps[-1]) - eps_min > noise)


def _conversion_epsilons(rdp: np.ndarray, orders: np.ndarray, delta: float) -> np.ndarray:
    """Balle et al.'s ε at each order, element by element (Opacus's ``get_privacy_spent`` formula, before its
    min): RDP(α) − (log δ + log α)/(α − 1) + log((α − 1)/α). For choosing orders; :func:`_best_order` publishes."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return rdp - (math.log(delta) + np.log(orders)) / (orders - 1.0) + np.log((orders - 1.0) / orders)


def _best_order(rdp: np.ndarray, orders: list, delta: float) -> Tuple[float, float]:
    """(ε, α) of one direction's RDP curve by Opacus's conversion (:func:`_rdp_ball_epsilon`)."""
    # an ε = ∞ order at each end so that its "optimal order is the smallest alpha" notice (integer orders start at
    # 2) never fires: silencing it with a warnings filter would reset Python's once-per-location registry, and the
    # user's own warnings would repeat at every get_epsilon
    padded = np.concatenate(([orders[0]], orders, [orders[-1]]))
    eps, order = get_privacy_spent(orders=padded, rdp=np.concatenate(([np.inf], rdp, [np.inf])), delta=delta)
    return max(float(eps), 0.0), float(order)


def _rdp_ball_epsilon(orders: list, segments: Sequence, delta: float,
                      grid_order: Optional[int] = None) -> Tuple[float, float]:
    """(ε, α) of :func:`rdp_ball_epsilon` at the given (validated) orders (``grid_order``: :func:`step_rdp`)."""
    curves = rdp_ball_curves(segments, orders, grid_order)
    if curves is None:
        return 0.0, float("nan")
    best = (-math.inf, float("nan"))
    for rdp in curves.values():
        if not np.isfinite(rdp).any():
            return math.inf, float("nan")
        eps, order = _best_order(rdp, orders, delta)
        if eps > best[0]:
            best = (eps, order)
    return best


#: :func:`rdp_ball_epsilon_below`: S_j from below at j ≤ this (above: S_j ≥ that, S_j non-decreasing in j)
_BELOW_ORDERS = 16
#: relative margin taken off each per-coordinate moment enclosure there (they are within ~1e-7 of L_j)
_BELOW_MARGIN = 1e-5


def rdp_ball_epsilon_below(segments: Sequence, delta: float) -> float:
    r"""A number at most :func:`rdp_ball_epsilon` (segments, δ)'s ε (:func:`_below`'s ε)."""
    return _below(segments, validate_delta(delta))[0]


def _below(segments: Sequence, delta: float) -> Tuple[float, float]:
    r"""(ε_low, α): ε_low at most :func:`rdp_ball_epsilon` (segments, δ)'s ε, whatever orders it tries, and the
    order where it is least (the larger direction's): a cheap test of whether another proven bound is below the
    Rényi bound (:func:`.api.proven_epsilon_history`) and where the windows of orders start
    (:func:`_tier_epsilon`), never a privacy bound.

    Per segment, S_j ≥ k·L_j(m·k^{−1/p}) for k ∈ {1, d} (two points of the ball: one coordinate at m, every
    coordinate equal), the enclosure of L_j lowered by _BELOW_MARGIN (it is within ~1e-7 of L_j: "The moment
    quadrature encloses"), for j ≤ 16, and S_j ≥ (j − 1)/15·(that at 16) above (S_j is convex in j with S_1 = 0,
    so S_j/(j − 1) is non-decreasing); the computed bounds
    (dual, chords, Fisher's) are all ≥ S_j, the subsampled RDP and the conversion are non-decreasing in each S_j
    (as is the cap of add by remove), and a min over all default orders is ≤ the min over any of them.
    """
    segs = list(segments) if all(isinstance(s, Segment) for s in segments) else normalize_history(segments)
    key = (tuple(segs), float(delta))
    if key not in _below_cache:
        if len(_below_cache) >= 256:
            _below_cache.clear()
        _below_cache[key] = _below_of(segs, delta)
    return _below_cache[key]


#: {(segments, δ): :func:`_below`} (its gate and the windows' guess ask for the same history)
_below_cache: Dict[tuple, Tuple[float, float]] = {}


def _below_of(segs: list, delta: float) -> Tuple[float, float]:
    """:func:`_below` of normalized segments, computed."""
    if not segs:
        return 0.0, float("nan")
    if any(s.noise_multiplier == 0.0 for s in segs):
        return math.inf, float("nan")
    orders = list(DEFAULT_ORDERS)
    logms = []
    for s in segs:
        m = 1.0 / s.noise_multiplier
        k = np.array([1.0, float(s.dim)])
        a = m * k ** (-1.0 / s.clip_norm_p)  # p = ∞: every coordinate at m
        js = list(range(2, _BELOW_ORDERS + 1))
        L = _log_moment_uppers_by_order({j: a for j in js}, s.beta)  # one batch of quadratures
        low = np.zeros(_BELOW_ORDERS + 1)
        low[2:] = [float(np.max(k * L[j] * (1.0 - _BELOW_MARGIN))) for j in js]
        above = np.arange(_BELOW_ORDERS + 1, max(orders) + 1, dtype=np.float64)
        logm = np.concatenate([low, low[-1] * (above - 1.0) / (_BELOW_ORDERS - 1.0) * (1.0 - _BELOW_MARGIN)])
        if s.count_noise_multiplier is not None:
            logm = logm + count_log_moments(max(orders), s.count_noise_multiplier)
        logms.append(logm)
    return _epsilon_from_log_moments(segs, logms, orders, delta)


def _epsilon_from_log_moments(segs: list, logms: list, orders: list, delta: float,
                              margin: float = 0.0) -> Tuple[float, float]:
    r"""(ε, α) of the segments ``segs`` whose per-step log-moments are ``logms`` (one array per segment, j = 0 …
    max α): Lemma 6 at every order in one array operation (:func:`_subsampled_rdp_all`), add capped by remove, each
    step's RDP lowered by ``margin``·(|RDP| + 1e-3) (with a margin, a NaN RDP gives (−∞, nan)), summed over steps
    and segments in their order, and Opacus's conversion at the larger direction (:func:`_best_order`); every step
    non-decreasing in each log-moment. (∞, nan) where a direction has no finite order."""
    total = {"remove": np.zeros(len(orders)), "add": np.zeros(len(orders))}
    for s, logm in zip(segs, logms):
        one = _subsampled_rdp_all(orders, s.sample_rate, logm)
        one["add"] = np.minimum(one["add"], one["remove"])
        for k in total:
            v = one[k]
            if margin:
                if np.isnan(v).any():
                    return -math.inf, float("nan")  # an order with no lower end: nothing is said
                v = v - margin * (np.abs(v) + 1e-3)
            total[k] = total[k] + s.steps * v
    out = (-math.inf, float("nan"))
    for rdp in total.values():
        if not np.isfinite(rdp).any():
            return math.inf, float("nan")
        eps, order = _best_order(np.where(np.isfinite(rdp), rdp, np.inf), orders, delta)
        if eps > out[0]:
            out = (eps, order)
    return out


#: :func:`gaussian_rdp_epsilon_below`: each step's RDP lowered by this × (|RDP| + 1e-3), far more than the round-off
#: of Lemma 6's formulas here and in :func:`step_rdp` (a few ulps of the sizes of its log-terms, / (α − 1))
_GAUSS_BELOW_MARGIN = 1e-9


def gaussian_rdp_epsilon_below(segments: Sequence, delta: float) -> float:
    r"""A number at most :func:`rdp_ball_epsilon` (segments, δ)'s ε for Gaussian segments (β = 2, d = 1, no count
    coordinate: :func:`.api.gaussian_dominated_history`), in closed form, without a quadrature; −∞ where it says
    nothing. A cheap test of the cost gate of Lemma N (:mod:`.api`), never a privacy bound.

    For β = 2, L_j(a) = j(j − 1)a²/2 exactly (GG(2, 1) = N(0, 1)); with m ≤ 1/σ ≤ the code's radius
    (:func:`.validation.shift_radius`) and L_j(m)·(1 − 1e-12) below its exact value, each moment is below every bound
    the code computes at d = 1 (Lemma Q's enclosure of L_j(shift_radius(σ)), chords between computed orders, all
    ≥ the exact moment). Lemma 6's RDP is non-decreasing in every moment, the add bound's cap by remove too, and each
    step's RDP is lowered by _GAUSS_BELOW_MARGIN·(|RDP| + 1e-3), more than the round-off of both; the sums
    over steps and segments are the same operations on smaller numbers (rounding is monotone), Opacus's conversion
    is non-decreasing in the RDP at each order, and the minimum over every default order is at most the minimum
    over the orders :func:`rdp_ball_epsilon` tries (docs/accounting.md, "The gate decided from below"). Cached."""
    segs = list(segments) if all(isinstance(s, Segment) for s in segments) else normalize_history(segments)
    if not segs or any(s.beta != 2.0 or s.dim != 1 or s.count_noise_multiplier is not None for s in segs):
        raise ValueError("gaussian_rdp_epsilon_below needs Gaussian segments (beta = 2, dim = 1, no count coordinate)")
    key = (tuple(segs), validate_delta(delta))
    if key not in _gauss_below_cache:
        if len(_gauss_below_cache) >= 256:
            _gauss_below_cache.clear()
        _gauss_below_cache[key] = _gaussian_below_of(segs, key[1])
    return _gauss_below_cache[key]


#: {(segments, δ): :func:`gaussian_rdp_epsilon_below`} (the two gates of one query ask for the same history)
_gauss_below_cache: Dict[tuple, float] = {}


def _gaussian_below_of(segs: list, delta: float) -> float:
    """:func:`gaussian_rdp_epsilon_below` of normalized Gaussian segments, computed."""
    if any(s.noise_multiplier == 0.0 for s in segs):
        return math.inf
    orders = list(DEFAULT_ORDERS)
    j = np.arange(max(orders) + 1, dtype=np.float64)
    logms = [j * (j - 1.0) / 2.0 * (1.0 / s.noise_multiplier) ** 2 * (1.0 - 1e-12) for s in segs]
    with np.errstate(all="ignore"):
        eps = _epsilon_from_log_moments(segs, logms, orders, delta, margin=_GAUSS_BELOW_MARGIN)[0]
    return -math.inf if math.isnan(eps) else eps


def _subsampled_rdp_all(orders: Sequence[int], sample_rate: float, logm: np.ndarray) -> Dict[str, np.ndarray]:
    r""":func:`.renyi.subsampled_rdp_from_log_moments` (Lemma 6) at every order in one array operation: the same
    formulas, summed in another order, so equal up to round-off (~1e-15 relative; :func:`_below` takes a margin of
    1e-3 off its result)."""
    q = float(sample_rate)
    a, j, inside, a_minus_j, log_binom = _binomial_table(tuple(int(o) for o in orders), int(logm.size))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        terms = log_binom + j * math.log(q) + logm[None, :]
        terms = terms + a_minus_j * math.log1p(-q) if q < 1.0 else np.where(j == a, terms, -np.inf)
        remove = special.logsumexp(np.where(inside, terms, -np.inf), axis=1) / (a[:, 0] - 1.0)
        lm2 = float(logm[2])
        log_chi2 = (-math.inf if lm2 <= 0.0 else math.log(math.expm1(lm2)) if lm2 < 700
                    else lm2 + math.log1p(-math.exp(-lm2)))
        alpha = a[:, 0]
        jensen = np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, math.log(q) + logm[alpha.astype(int)])
        if q < 1.0:
            taylor = np.logaddexp(0.0, np.log(alpha * (alpha - 1.0) / 2.0) - (alpha + 1.0) * math.log1p(-q)
                                  + 2.0 * math.log(q) + log_chi2)
            jensen = np.minimum(jensen, taylor)
    return {"remove": remove, "add": jensen / (alpha - 1.0)}


@lru_cache(maxsize=8)
def _binomial_table(orders: Tuple[int, ...], size: int) -> Tuple[np.ndarray, ...]:
    """(α column, j row, j ≤ α, α − j, log C(α, j) where j ≤ α) of :func:`_subsampled_rdp_all` for orders α and
    j = 0 … size − 1: the arrays it built at every call, built once per (orders, size) (the same floats), read-only
    (forgotten by :func:`clear_caches`, so a cold query builds them as a new process would)."""
    a = np.asarray(orders, dtype=np.float64)[:, None]
    j = np.arange(size, dtype=np.float64)[None, :]
    inside = j <= a
    with np.errstate(invalid="ignore"):
        log_binom = special.gammaln(a + 1) - special.gammaln(j + 1) - special.gammaln(np.where(inside, a - j, 0) + 1)
    out = (a, j, inside, a - j, log_binom)
    for v in out:
        v.setflags(write=False)
    return out


def rdp_ball_delta(segments: Sequence[Sequence], epsilon: float, orders: Optional[Sequence[int]] = None) -> float:
    r"""Proven δ(ε) over every shift in the ℓp ball: the same conversion solved for δ,

        δ = min_α exp((α−1)(RDP(α) − ε) + (α−1)·log(1 − 1/α) − log α)   (≤ 1),

    max over the two directions (:func:`rdp_ball_epsilon` at this δ returns ≤ ε). σ = 0 gives 1.
    """
    orders = _validate_orders(orders)
    curves = rdp_ball_curves(segments, orders)
    if curves is None:
        return 0.0
    return float(max(rdp_deltas(rdp, orders, [float(epsilon)])[0] for rdp in curves.values()))


def rdp_deltas(rdp: np.ndarray, orders: Sequence[int], epsilons: Sequence[float]) -> np.ndarray:
    r"""δ(ε) ≤ min_α exp((α−1)(RDP(α) − ε) + (α−1)·log(1 − 1/α) − log α) (Balle et al. 2020, the conversion of
    :func:`rdp_ball_delta`) of one direction's RDP curve at every ε of ``epsilons``, capped at 1 and rounded up by
    the relative slack ``_FP_SLACK``; an order with RDP = ∞ gives no bound."""
    a = np.asarray(orders, dtype=np.float64)[None, :]
    eps = np.asarray(epsilons, dtype=np.float64)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        log_d = (a - 1.0) * (np.asarray(rdp, dtype=np.float64)[None, :] - eps) + (a - 1.0) * np.log1p(-1.0 / a) \
            - np.log(a)
    log_d = np.where(np.isfinite(log_d), log_d, np.inf)
    return np.minimum(1.0, np.exp(np.minimum(np.min(log_d, axis=1), 0.0)) * (1.0 + _FP_SLACK))


def combine(prv: EpsilonReport, rdp_epsilon: float, rdp_order: float = float("nan")) -> EpsilonReport:
    r"""The published report from the PRV report over equal spreads and the proven RDP ε over the ball.

    epsilon = rdp_epsilon (scope "proven", method "rdp"); epsilon_equal_spreads = the PRV ε when it is smaller,
    else None. A PRV report that is already proven (``prv.scope == "proven"``) is returned unchanged.
    """
    if prv.scope == "proven":
        return prv
    rdp_epsilon = float(rdp_epsilon)
    if math.isnan(rdp_epsilon) or rdp_epsilon < 0:
        raise ValueError(f"rdp_epsilon must be a number ≥ 0 or inf, got {rdp_epsilon!r}")
    details = dict(prv.details)
    details["rdp_order"] = rdp_order
    details["epsilon_rdp"] = rdp_epsilon
    return EpsilonReport(
        epsilon=rdp_epsilon,
        epsilon_lower=prv.epsilon_lower,
        epsilon_estimate=prv.epsilon_estimate,
        epsilon_upper=prv.epsilon_upper,
        delta=prv.delta,
        mode=prv.mode,
        scope="proven",
        method="rdp",
        epsilon_equal_spreads=prv.epsilon if prv.epsilon < rdp_epsilon else None,
        direction=prv.direction,
        shape_k=prv.shape_k,
        details=details,
    )


def clear_caches() -> None:
    """Forget every cached moment and bound of this module and of :mod:`.renyi` (the next call is cold)."""
    for fn in (step_rdp, log_moment_upper, _binomial_table):
        fn.cache_clear()
    _ball_cache.clear()
    _below_cache.clear()
    _gauss_below_cache.clear()
    _k_cache.clear()
    renyi.clear_moment_cache()
