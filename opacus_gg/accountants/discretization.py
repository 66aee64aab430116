r"""The dominating discretization of a one-step privacy profile, and the grid it lives on.

"Connect the dots" (Doroshenko et al. 2022): the profile δ_env (:mod:`.profile`) is evaluated on
Opacus's aligned grid t_j (``Domain.create_aligned``) and turned into the discrete PRV whose δ equals
δ_env at every t_j and is linear in e^t in between; since δ is convex in e^t this discrete PRV
dominates the true one for every ε, so its composition is an upper bound. Its P-masses are
ω_i = α_i (s_i − s_{i−1}) with chord slopes s_j = (δ_{j+1} − δ_j)/(α_{j+1} − α_j),
s_{−1} = (δ_0 − 1)/α_0, s_{N−1} = 0, and a mass δ_env(t_{N−1}) at +∞ that is added to δ.

Grid: mesh h = ε_error / sqrt(T · log(12/δ_error) / 2) (Opacus's), half-width L from a Chernoff bound
(:func:`domain_size`); beyond L = FAST_HALF_WIDTH the mesh grows with L (:func:`mesh_coarsening`, the grid cap).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Optional, Sequence, Tuple

import numpy as np
from opacus.accountants.analysis.prv import Domain
from scipy.fft import next_fast_len
from scipy.special import logsumexp

from .checks import UNIT_ROUNDOFF, AccountingError, LossBeyondGrid, check_finite, check_pmf, mass_budget
from .discrete import WIDE_DTYPE
from .history import Segment
from .profile import CHORD_STRIDE, one_step_delta, pairs_of

__all__ = ["ctd_pmf", "hull_profile", "hull_tolerance", "lower_hull", "pmf_mass_budget", "mesh_for", "domain_size", "fine_half_width", "make_domain", "fft_friendly", "step_dprv", "logsumexp_rows", "MAX_DOMAIN_POINTS",
           "FAST_HALF_WIDTH", "MAX_MESH_COARSENING", "mesh_coarsening"]

#: refuse (ValueError) rather than allocate more grid points than this
MAX_DOMAIN_POINTS = 60_000_000
#: the grid cap (:func:`mesh_coarsening`): beyond this half-width the mesh grows with L, so a grid keeps at most the
#: 2·L_F/h_O points Opacus's mesh h_O puts on ±L_F (a power of 2; every β ≤ 2 row of benchmarks/query_speed.py has
#: L ≤ 8 and keeps its grid)
FAST_HALF_WIDTH = 8.0
#: the cap coarsens the mesh by at most 2^{k/4} with k ≤ this (× 16), beyond which the grid grows again
MAX_MESH_COARSENING = 16


#: what the convex hull may lower a value read from curves of exact pairs (:func:`hull_profile`): round-off only
HULL_ROUNDOFF = 1e-12


def hull_tolerance(seg) -> float:
    r"""What the hull may lower a value of the one-step profile of ``seg`` (:func:`hull_profile`): 2·C + 10^{−12},
    C the largest round-off factor of its pairs (and of a :class:`.history.PairSegment`). A pair's two curves are
    each convex (sums of (ω_j − αν_j)_+), but its two laws' totals may differ by up to C (Lemmas R6, R8), so the
    profile read, H(P‖Q) for t ≥ 0 and H(Q‖P) for t < 0, may jump at t = 0 by up to C/(1 − C); subsampling scales
    the jump by q ≤ 1 and the envelope over shapes takes the largest. More than that is a bug: refused."""
    c = float(getattr(seg, "roundoff", 0.0))
    for _, pair in pairs_of(seg):
        c = max(c, float(getattr(pair, "roundoff", 0.0)), float(getattr(getattr(pair, "pair", None), "roundoff", 0.0)))
    return 2.0 * c + HULL_ROUNDOFF


def lower_hull(x: np.ndarray, yd: np.ndarray, yr: np.ndarray, use_r: np.ndarray) -> np.ndarray:
    """Indices of the lower convex hull of (x_i, y_i), x increasing, y = yd = yr + (1 − x) (the same function in
    two coordinates: yr accurate where ``use_r``). The orientation test is invariant under adding a linear
    function, so it reads yr when all three points have ``use_r`` and yd otherwise.

    Each pass drops every point on or above the chord of its current neighbours (such a point is not a vertex of
    the lower hull, and dropping several at once keeps every vertex: a vertex lies strictly below the chord of any
    two points around it), until the chain is convex. A pass re-tests only the points next to one dropped by the
    pass before (the others have the same neighbours, hence the same answer: no). (A wrong decision by round-off
    only leaves the result slightly non-convex; the connect-the-dots step then clips a negative mass, which raises
    the curve.)"""
    idx = np.arange(x.size)
    if idx.size < 3:
        return idx
    # the first pass tests every interior point against its neighbours in the input: slices for the gathers
    # idx[q ± 1] of the passes below (the same floats: each test reads the same three points)
    drop = _drop_above_chord(x[:-2], x[1:-1], x[2:], yd[:-2], yd[1:-1], yd[2:], yr[:-2], yr[1:-1], yr[2:],
                             use_r[:-2] & use_r[1:-1] & use_r[2:])
    q = np.arange(1, idx.size - 1)
    for _ in range(x.size):
        if not drop.any():
            return idx
        keep = np.ones(idx.size, dtype=bool)
        keep[q[drop]] = False
        near = np.zeros(idx.size, dtype=bool)  # a neighbour was dropped: the point gets new neighbours
        near[:-1] |= ~keep[1:]
        near[1:] |= ~keep[:-1]
        idx, test = idx[keep], near[keep]
        if idx.size < 3:
            return idx
        q = np.flatnonzero(test[1:-1]) + 1  # chain positions tested in this pass
        i0, i1, i2 = idx[q - 1], idx[q], idx[q + 1]
        drop = _drop_above_chord(x[i0], x[i1], x[i2], yd[i0], yd[i1], yd[i2], yr[i0], yr[i1], yr[i2],
                                 use_r[i0] & use_r[i1] & use_r[i2])
    return idx


def _drop_above_chord(x0, x1, x2, yd0, yd1, yd2, yr0, yr1, yr2, rr) -> np.ndarray:
    """Whether each middle point (x1, y1) lies on or above the chord of its neighbours (:func:`lower_hull`), read in yr
    where ``rr`` (all three points accurate there) and in yd otherwise."""
    y0 = np.where(rr, yr0, yd0)
    y1 = np.where(rr, yr1, yd1)
    y2 = np.where(rr, yr2, yd2)
    return (y1 - y0) * (x2 - x0) >= (y2 - y0) * (x1 - x0)


def _chord(xq: np.ndarray, xh: np.ndarray, yh: np.ndarray, j: Optional[np.ndarray] = None) -> np.ndarray:
    r"""The piecewise-linear interpolant of the vertices (xh, yh) at xq, rounded up: y = y_0 + p, p = (x − x_0)·s,
    s = (y_1 − y_0)/(x_1 − x_0), in long double (u = u_ld), raised by b = 8u(|y_0| + |p̃|) (p̃ the computed p), then
    rounded up to float64 (np.interp in float64 fell up to 7.5·10^{−5} relative below a steep chord; a float64 bump
    of its bound made kinks that connect the dots read as masses of ~10^{−10}). Vertices are read exactly.

    The bound is local (docs/accounting.md, Lemma R8(e)(i)): p̃ = P(1 + θ), |θ| ≤ γ_5 (two differences, the quotient,
    the difference x − x_0 and the product; P the exact (x − x_0)·s), and the two sums round by u each, so the
    result, rounded to nearest, is ≥ y_0 + P + b(1 − u) − (5u + O(u²))|p̃| − 2u(1 + 9u)(|y_0| + |p̃|) ≥ y_0 + P.
    Before, b was 4u(|y_0| + |y_1|): not local (at x → x_0 it stays the size of the far vertex: a chord in
    r = δ − 1 + α from (0, 0) to a vertex at α = e^{32} raised every r at t < 0 by 1.7·10^{−5}, and connect the dots
    read that jump at t = 0 as a mass of 0.0107), and short of the ≈ 7u|y_1 − y_0| that the error can reach near
    x_1. ``j``: the index of each query's left vertex, ``searchsorted(xh, xq, "right") − 1`` clipped to
    [0, len(xh) − 2], if known."""
    ld = WIDE_DTYPE  # long double where it is IEEE-style (float64 elsewhere: then the bound is float64's)
    u_ld = float(np.finfo(ld).eps) / 2.0
    if j is None:
        j = np.clip(np.searchsorted(xh, xq, side="right") - 1, 0, xh.size - 2)
    # the slope per hull segment (each query reads its segment's: the same operands, the same floats), then per query
    x0, x1, y0, y1 = (np.asarray(v, dtype=ld) for v in (xh[:-1], xh[1:], yh[:-1], yh[1:]))
    slope = (y1 - y0) / (x1 - x0)
    y0j = y0[j]
    p = (np.asarray(xq, dtype=ld) - x0[j]) * slope[j]
    y = (y0j + p) + 8.0 * u_ld * (np.abs(y0j) + np.abs(p))
    out = y.astype(np.float64)
    out = np.where(out < y, np.nextafter(out, np.inf), out)
    return np.where(xq == xh[j], yh[j], out)


def _hull(t: np.ndarray, delta: np.ndarray, r: np.ndarray, alpha: np.ndarray,
          tolerance: float) -> Tuple[Optional[np.ndarray], np.ndarray, np.ndarray]:
    r"""(grid indices of the vertices, δ, r) of the non-increasing lower convex hull in α of (0, 1) and the values
    read (:func:`hull_profile`); indices None where every grid point is a vertex (δ, r then the values as read).
    The hull is cut at its first vertex followed by a rising segment and continued flat from there (Lemma R8(e)(ii)).
    AccountingError where it lowers a value read by more than ``tolerance``."""
    pos = t >= 0
    x = np.concatenate([[0.0], alpha])
    use_r = np.concatenate([[True], ~pos])
    yd = np.empty(x.size)
    yr = np.empty(x.size)
    yd[0], yr[0] = 1.0, 0.0
    yd[1:][pos], yr[1:][pos] = delta[pos], delta[pos] - 1.0 + alpha[pos]
    yd[1:][~pos], yr[1:][~pos] = 1.0 - alpha[~pos] + r[~pos], r[~pos]
    hull = lower_hull(x, yd, yr, use_r)
    # rising segments (δ up, i.e. r up by more than α), each read in the coordinate of its two ends
    a, b = hull[:-1], hull[1:]
    both_r = use_r[a] & use_r[b]
    rising = np.where(both_r, yr[b] - yr[a] > x[b] - x[a], yd[b] > yd[a])
    if rising.any():
        hull = hull[: int(np.argmax(rising)) + 1]
    if hull.size == x.size:  # already convex and non-increasing: the values as read
        return None, delta, r
    flat = hull[-1] != x.size - 1  # beyond the last vertex the hull is flat at its value
    xh, ydh, yrh = x[hull], yd[hull], yr[hull]
    if flat:  # an end vertex at α_N with the same δ (its r = δ − 1 + α_N, only read where a vertex is at t < 0)
        xh, ydh, yrh = np.append(xh, x[-1]), np.append(ydh, ydh[-1]), np.append(yrh, ydh[-1] - 1.0 + x[-1])
    out_d = np.full(t.shape, np.nan)
    out_r = np.full(t.shape, np.nan)
    jd = jr = None
    if np.all(x[1:] > x[:-1]):
        # x strictly increasing: the vertices at or left of x_k are the hull's indices ≤ k (the flat end vertex, if
        # any, is x's last point), so _chord's search is a running count (the same j)
        on_hull = np.zeros(x.size, dtype=bool)
        on_hull[hull] = True
        left = np.clip(np.cumsum(on_hull) - 1, 0, xh.size - 2)[1:]
        jd, jr = left[pos], left[~pos]
    out_d[pos] = _chord(alpha[pos], xh, ydh, jd)
    out_r[~pos] = _chord(alpha[~pos], xh, yrh, jr)
    lowered = max(float(np.max(delta[pos] - out_d[pos], initial=0.0)), float(np.max(r[~pos] - out_r[~pos], initial=0.0)))
    if not lowered <= tolerance:
        raise AccountingError(f"one-step privacy profile: not convex beyond round-off (its convex hull lowers a value "
                              f"by {lowered:.3g} > {tolerance:g})")
    return hull[hull > 0] - 1, out_d, out_r


def hull_profile(t: np.ndarray, delta: np.ndarray, r: np.ndarray, alpha: Optional[np.ndarray] = None,
                 tolerance: float = HULL_ROUNDOFF) -> Tuple[np.ndarray, np.ndarray]:
    r"""(δ, r) of the non-increasing lower convex hull in α = e^t of the points (0, 1) and (α_i, δ_i), read back on
    t: δ where t ≥ 0, r = δ − 1 + α where t < 0 (each side read, and interpolated between hull vertices, in its
    accurate coordinate; both are linear in α). ``delta`` is read where t ≥ 0 and ``r`` where t < 0, as by
    :func:`ctd_pmf`. AccountingError where the hull lowers a value by more than ``tolerance`` (a profile read from
    exact pairs is convex up to round-off; from discrete pairs, up to a jump at t = 0: :func:`hull_tolerance`; the
    ball table's envelopes of maxima and Chernoff bounds are not convex, and pass ∞). Between hull vertices the
    chords are rounded up (:func:`_chord`); these are the values that :func:`ctd_pmf` realizes (it builds its masses
    from the vertices alone).

    Every privacy profile is convex in α, non-increasing and 1 at α = 0; where the values read are ≥ such a profile
    (upper bounds), so is their lower convex hull (the largest convex function below them), and, where that rises
    (a last value read above the lowest one), the hull cut at its lowest vertex and continued flat: a non-increasing
    profile is ≤ its value there beyond it. Its connect-the-dots PMF has no negative mass to clip and mass 1 (Lemma
    T2). Values that are upper bounds but not convex: the curves of a pair whose two laws' masses differ by
    round-off (after Lemma R7's bound and Lemma R6's normalization, by up to its C) jump at t = 0, where the reading
    switches from H(P‖Q) to H(Q‖P); connect the dots read across such a jump of size J a mass ~J/h, and where the
    profile is flat beyond t = 0 the hull rises after it (docs/accounting.md, Lemma R8(c), (e))."""
    alpha = np.exp(t) if alpha is None else alpha
    _, out_d, out_r = _hull(t, delta, r, alpha, tolerance)
    return out_d, out_r


def ctd_pmf(t: np.ndarray, delta: np.ndarray, r: np.ndarray,
            tolerance: float = HULL_ROUNDOFF) -> Tuple[np.ndarray, float, float]:
    r"""Dominating discrete P-law on the grid t ("connect the dots") of the non-increasing lower convex hull of the
    values read (:func:`hull_profile`, ``tolerance`` its tolerance: the values themselves where they are convex and
    non-increasing); returns (ω, mass at +∞, c).

    Where the hull drops points, the masses are those of connect the dots on its vertices alone (0 elsewhere): in
    exact arithmetic the same PMF as on every grid point (the hull is linear in α between vertices), without
    reading the chords back (their rounding made masses of ±u/h at every point between vertices, and the negative
    ones clipped added up to 4·10^{−10}: Lemma R8(e)(iii)). On the points used:

    ω_i = α_i (s_i − s_{i−1}) with chord slopes s_j = (δ_{j+1} − δ_j)/(α_{j+1} − α_j), s_{−1} = (δ_0 − 1)/α_0,
    s_{N−1} = 0. Where t < 0 the slopes are taken from r = δ − 1 + α (s = −1 + Δr/Δα), without cancellation.
    ``delta`` is read where t ≥ 0 and ``r`` where t < 0 (the other entries are not used). One chain of slopes:
    an interval with both ends at t < 0 has the slope Δr/Δα − 1 in both masses that use it (the mass at the last
    t < 0 took Δ(1 − α + r)/Δα there, whose cancellation error, ~u/Δα, then entered the profile at every t < 0
    multiplied by up to 1/Δα; Lemma R5).

    c bounds the relative round-off of the PMF's privacy profile: δ_ω(t) ≥ (1 − c)·δ_in(t) at every t, δ_in the
    connect-the-dots profile of the values read (docs/accounting.md, Lemma R5; between vertices both are linear in
    α, so the bound at the vertices holds there too); clipping a negative ω_i to 0 only raises δ_ω. Checked (Lemma
    R2): the values read are finite, and Σω + ρ = δ_env(α → 0) = 1 up to :func:`pmf_mass_budget` (the sum
    telescopes to 1 in exact arithmetic); AccountingError otherwise.
    """
    alpha = np.exp(t)
    vertices, _, _ = _hull(t, delta, r, alpha, tolerance)
    if vertices is None:
        return _ctd(t, delta, r, alpha)
    omega = np.zeros(t.size)
    if vertices.size == 0:  # every value read is ≥ 1: the hull is flat at 1, all mass at +∞
        return omega, 1.0, 0.0
    omega[vertices], rho, c = _ctd(t[vertices], delta[vertices], r[vertices], alpha[vertices])
    return omega, rho, c


def _ctd(t: np.ndarray, delta: np.ndarray, r: np.ndarray, alpha: np.ndarray) -> Tuple[np.ndarray, float, float]:
    """(ω, ρ, c) of :func:`ctd_pmf` on the points t (increasing, not necessarily equally spaced) of values that
    are convex and non-increasing up to round-off."""
    n = t.size
    da = alpha[:-1] * np.expm1(np.diff(t))
    neg = ~(t >= 0)
    j0 = int(np.argmax(~neg)) if (~neg).any() else n  # first index with t ≥ 0
    full_delta = np.empty(n)
    full_r = np.empty(n)
    full_r[neg] = r[neg]
    full_delta[neg] = 1.0 - alpha[neg] + r[neg]
    full_delta[~neg] = delta[~neg]
    full_r[~neg] = delta[~neg] - 1.0 + alpha[~neg]
    check_finite(full_delta, "one-step privacy profile on the PRV grid")
    check_finite(full_r, "one-step privacy profile (complement r) on the PRV grid")
    # s_j (j = −1..n−1) and u_j = s_j + 1, each computed from the accurate side
    s = np.empty(n + 1)
    u = np.empty(n + 1)
    s[0] = (full_delta[0] - 1.0) / alpha[0]
    u[0] = full_r[0] / alpha[0]
    s[-1], u[-1] = 0.0, 1.0
    sd = np.diff(full_delta) / da
    ud = np.diff(full_r) / da
    s[1:n] = sd
    u[1:n] = ud
    # intervals with both ends at t < 0 (and the slope s_{−1} when t_0 < 0): s = u − 1, the same slope that the
    # r-side masses below use
    s[:j0] = u[:j0] - 1.0
    ds = np.diff(s)  # s_i − s_{i−1}, i = 0..n−1
    du = np.diff(u)
    # use the r-side differences where both slopes touch t < 0 only
    use_u = np.zeros(n, dtype=bool)
    use_u[: max(j0 - 1, 0)] = True
    omega = np.maximum(alpha * np.where(use_u, du, ds), 0.0)
    # the profile is flat beyond the last point: its value is the mass at +∞ (also where that point is at t < 0: the
    # hull cut flat there; it was taken as 0, which only a profile already 0 there passed the mass check with)
    rho = float(full_delta[-1])
    check_pmf(omega, "one-step discrete PRV", mass_budget=pmf_mass_budget(n), inf_mass=rho, probability=True)
    return omega, rho, _relative_roundoff(full_delta, full_r, j0)


def _relative_roundoff(full_delta: np.ndarray, full_r: np.ndarray, j0: int) -> float:
    r"""c of :func:`ctd_pmf` (Lemma R5): 2·max_i e_i/δ_i with e_i = 6u·Σ_{k ≥ i}|Δ_k| + 3u·δ_i (+ 8u for t_i < 0),
    Δ_k the difference of the values read on interval k (r where both ends are at t < 0, δ otherwise)."""
    n = full_delta.size
    if n < 2:
        return 0.0
    dif = np.abs(np.diff(full_delta))
    dif[: max(j0 - 1, 0)] = np.abs(np.diff(full_r[: max(j0, 1)]))[: max(j0 - 1, 0)]
    tail = np.concatenate([np.cumsum(dif[::-1])[::-1], [0.0]])  # Σ_{k ≥ i} |Δ_k|
    err = 6.0 * UNIT_ROUNDOFF * tail + 3.0 * UNIT_ROUNDOFF * full_delta
    err[:j0] += 8.0 * UNIT_ROUNDOFF
    pos = full_delta > 0
    if np.any(~pos & (tail > 0)):
        raise AccountingError("one-step privacy profile: 0 at a grid point below which it still varies (not "
                              "non-increasing); its round-off cannot be bounded")
    return float(2.0 * np.max(np.where(pos, err / np.where(pos, full_delta, 1.0), 0.0)))


def pmf_mass_budget(n: int) -> float:
    r"""Round-off allowed in the total mass of an n-point connect-the-dots PMF (:func:`.checks.mass_budget`: each
    ω_i is a difference of two slopes, each of a few roundings). Lemma R2."""
    return mass_budget(n)


def mesh_for(eps_error: float, total_steps: int, delta_error: float) -> float:
    """Opacus's mesh: ε_error / sqrt(T · log(12/δ_error) / 2)."""
    return eps_error / math.sqrt(total_steps * math.log(12.0 / delta_error) / 2.0)


#: λ values of the Chernoff bound in :func:`domain_size`
_LAMBDAS = np.concatenate([np.geomspace(1e-3, 1.0, 25), np.geomspace(1.0, 2000.0, 40)[1:]])


def _log_mgf(seg, direction: str, L0: float) -> Tuple[np.ndarray, float]:
    r"""(K(λ) = log Σ_j ω_j e^{λ t_j} at each λ of _LAMBDAS, ρ) of one step's dominating discretization on
    40001 points of [−L0, L0] (ρ: its mass at +∞)."""
    t = np.linspace(-L0, L0, 40001)
    dl, rr, _, _ = one_step_delta(seg, t, direction)
    pmf, rho, _ = ctd_pmf(t, dl, rr, hull_tolerance(seg))
    nz = pmf > 0  # zero masses contribute nothing to the MGF
    lp, tz = np.log(pmf[nz]), t[nz]
    return log_mgf(lp, tz, _LAMBDAS), rho


#: e^x is 0 in float64 for x below this: e^{−750} ≈ 2·10^{−326}, under half the smallest subnormal 4.9·10^{−324}
EXP_UNDERFLOW = -750.0

#: rows of lp + λ·t that :func:`log_mgf` reduces at once (a block of 8 × 40001 float64 stays in cache)
_MGF_ROWS = 8


def log_mgf(lp: np.ndarray, t: np.ndarray, lams: np.ndarray) -> np.ndarray:
    r"""K(λ) = log Σ_j e^{lp_j + λ t_j} for each λ in ``lams``: ``scipy.special.logsumexp(lp + λ·t)``, the same floats,
    in blocks of rows that stay in cache (:func:`logsumexp_rows`); −∞ where there is no mass (all at +∞)."""
    out = np.full(len(lams), -np.inf)
    if lp.size == 0:
        return out
    for i in range(0, len(lams), _MGF_ROWS):
        out[i:i + _MGF_ROWS] = logsumexp_rows(lp[None, :] + lams[i:i + _MGF_ROWS, None] * t[None, :])
    return out


def logsumexp_rows(a: np.ndarray) -> np.ndarray:
    r"""``scipy.special.logsumexp(a, axis=1)`` of a 2-D float64 array, the same floats: scipy's steps for real input
    (the maxima m_i of each row taken out of its sum: log1p(Σ_{j ≠ max} e^{a_j − a_max}/n_max) + log n_max + a_max),
    without its second pass of exp over the whole array, which it reads only where that result is not finite: those
    rows are handed to scipy itself. e^x is left at 0 without computing it where x < EXP_UNDERFLOW (it is 0 there;
    exp of such x, an underflow, costs ~6× a normal one), in place, so the sums add the same terms in the same order."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a_max = np.max(a, axis=1, keepdims=True)
        at_max = a == a_max
        n_max = np.sum(at_max.astype(a.dtype), axis=1, keepdims=True, dtype=a.dtype)
        x = np.where(at_max, -np.inf, a) - a_max
        terms = np.zeros_like(x)
        np.exp(x, out=terms, where=~(x < EXP_UNDERFLOW))  # NaN (a NaN or −∞ row) still goes through exp
        s = np.sum(terms, axis=1, keepdims=True, dtype=a.dtype)
        s = np.where(s == 0, s, s / n_max)
        out = (np.log1p(s) + np.log(n_max) + a_max)[:, 0]
    for i in np.flatnonzero(~np.isfinite(out)):
        out[i] = logsumexp(a[i])
    return out


@functools.lru_cache(maxsize=256)
def _step_log_mgf(seg_key: Tuple, direction: str, L0: float) -> Tuple[np.ndarray, float]:
    """Cached :func:`_log_mgf` of one step of the segment ``seg_key``."""
    out = _log_mgf(Segment(*seg_key), direction, L0)
    out[0].setflags(write=False)
    return out


def _tail_events(n_segments: int) -> int:
    """Partial sums that can lose mass beyond ±L in Opacus's ``compose_heterogeneous`` with S segments: each FFT
    self-composition wraps at both ends (2S), each of the S − 1 linear convolutions drops at both ends: 4S − 2."""
    return 4 * max(n_segments, 1) - 2


def _chernoff(segs: Sequence[Segment], direction: str, delta_error: float) -> Tuple[float, float]:
    """(L, λ*) of :func:`domain_size` before its final margin (λ*: the λ of _LAMBDAS attaining the bound)."""
    L0 = 32.0
    log_target = math.log(delta_error / (8.0 * _tail_events(len(segs))))
    prev_rho = math.inf
    while True:
        logk = np.zeros_like(_LAMBDAS)
        rho_tot = 0.0
        for seg in segs:
            if isinstance(seg, Segment):  # one step's (K(λ), ρ) is cached: growing histories reuse it
                k_s, rho = _step_log_mgf(seg.step_key, direction, L0)
            else:
                k_s, rho = _log_mgf(seg, direction, L0)
            rho_tot += seg.steps * rho
            logk += seg.steps * np.maximum(k_s, 0.0)
        bounds = (logk - log_target) / _LAMBDAS
        i = int(np.argmin(bounds))
        L = float(bounds[i])
        # ρ (mass at +∞) is added to δ exactly; widening only helps while it still shrinks ρ
        if L <= 0.9 * L0 and (rho_tot <= delta_error / 16.0 or rho_tot >= 0.5 * prev_rho):
            return L, float(_LAMBDAS[i])
        prev_rho = rho_tot
        if L0 >= 512:
            raise LossBeyondGrid(
                "cannot certify this setting: the composed privacy loss needs a domain wider than ±512 "
                "(epsilon in the hundreds); increase noise_multiplier or reduce steps"
            )
        L0 *= 2.0


def domain_size(segs: Sequence[Segment], direction: str, delta_error: float, eps_error: float) -> float:
    r"""Half-width L of the grid: the composition loses at most δ_error/8 of δ beyond ±L, in all.

    Right tail: Chernoff, P(S ≥ L) ≤ Σ_s T_s ρ_s + exp(Σ_s T_s max(K_s(λ), 0) − λL) for the total S = ΣY and,
    because every term is ≥ 0, for every partial sum over a subset of the steps; K_s(λ) = log Σ_j ω_j e^{λ t_j} of
    a coarse dominating discretization here (a first guess), re-checked with the fine PMF that is composed
    (:func:`fine_half_width`, docs/accounting.md Lemma R4). max(K, 0): the finite part of a sub-probability PMF
    can have K < 0. Where δ can be lost: :func:`_tail_events` = 4S − 2 partial sums beyond ±L with S segments,
    each bounded by δ_error/(8·(4S − 2)).
    """
    L, _ = _chernoff(segs, direction, delta_error)
    # the left tail needs no bound: composed mass below −L wraps to high losses (pessimistic) or is dropped
    # where (1 − e^{ε−t})_+ = 0
    return max(L, eps_error) + 1.0


def fine_half_width(steps: Sequence[Tuple[np.ndarray, int]], ts: np.ndarray, delta_error: float,
                    segs: Sequence[Segment], direction: str) -> float:
    r"""The Chernoff half-width of :func:`domain_size` recomputed with the fine one-step PMFs ``steps`` = [(ω, T_s)]
    on the grid ``ts`` that the FFT composes (Lemma R4): min over λ near the coarse λ* of
    (Σ_s T_s max(K_s(λ), 0) − log(δ_error/(8(4S − 2))))/λ. The grid is valid iff this is ≤ its half-width."""
    _, lam_star = _chernoff(segs, direction, delta_error)
    lams = lam_star * np.array([0.5, 0.7, 1.0, 1.4, 2.0])
    logk = np.zeros(lams.size)
    for pmf, count in steps:
        nz = pmf > 0
        lp, tz = np.log(pmf[nz]), ts[nz]
        k = log_mgf(lp, tz, lams)
        logk += count * np.maximum(k, 0.0)
    log_target = math.log(delta_error / (8.0 * _tail_events(len(steps))))
    return float(np.min((logk - log_target) / lams))


def mesh_coarsening(half_width_exponent: int) -> int:
    r"""Quarter-octave steps k (the mesh × 2^{k/4}) that the grid cap takes for a half-width L = 2^{b/8}: the fewest
    that bring 2L/h to at most 2·FAST_HALF_WIDTH/h_O (h_O: :func:`mesh_for` quantized), i.e. k = ⌈(b − 8·log₂ L_F)/2⌉,
    0 where L ≤ L_F and at most MAX_MESH_COARSENING. Any mesh gives a dominating discretization (docs/accounting.md,
    "The grid cap")."""
    over = half_width_exponent - 8 * int(math.log2(FAST_HALF_WIDTH))
    return min(max(0, -(-over // 2)), MAX_MESH_COARSENING)


def _grid(segs: Sequence[Segment], direction: str, delta_error: float, eps_error: float, min_half_width: float,
          mesh: Optional[float]) -> Tuple[float, float]:
    """(L, mesh) of :func:`make_domain`, quantized (powers of 2^(1/8) and 2^(1/4)); the mesh coarsened by
    :func:`mesh_coarsening` where L > FAST_HALF_WIDTH, unless ``mesh`` (a caller's finer grid) is finer."""
    total = sum(s.steps for s in segs)
    L = max(domain_size(segs, direction, delta_error, eps_error), min_half_width)
    # quantized so that growing histories land on the same grids (and reuse step_dprv): the mesh rounded
    # down to a power of 2^(1/4), L rounded up to a power of 2^(1/8) (a finer, wider grid: still valid);
    # exponents kept as integers so that the cap's arithmetic is exact
    b = math.ceil(8.0 * math.log2(L))
    a = math.floor(4.0 * math.log2(mesh_for(eps_error, total, delta_error))) + mesh_coarsening(b)
    if mesh is not None:
        a = min(a, math.floor(4.0 * math.log2(mesh)))
    return 2.0 ** (b / 8.0), 2.0 ** (a / 4.0)


def _servable_steps(segs: Sequence[Segment], direction: str, delta_error: float, eps_error: float,
                    min_half_width: float, mesh: Optional[float]) -> int:
    """About the largest T whose grid fits MAX_DOMAIN_POINTS, every segment's steps scaled by T/(its total):
    bisection in log T (the grid grows like T^{3/2}); 0 if even one step does not fit."""
    total = sum(s.steps for s in segs)

    def fits(t: int) -> bool:
        scaled = [dataclasses.replace(s, steps=max(1, round(s.steps * t / total))) for s in segs]
        try:
            L, h = _grid(scaled, direction, delta_error, eps_error, min_half_width, mesh)
        except ValueError:  # the Chernoff domain itself is out of range
            return False
        return 2 * L / h <= MAX_DOMAIN_POINTS

    lo, hi = 0, total
    while hi - lo > max(1, lo // 100):
        mid = max(lo + 1, int(math.sqrt(max(lo, 1) * hi)))
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def make_domain(segs: Sequence[Segment], direction: str, delta_error: float, eps_error: float,
                min_half_width: float = 0.0, mesh: Optional[float] = None, delta: Optional[float] = None) -> Domain:
    """Aligned grid of half-width L ≥ max(:func:`domain_size`, ``min_half_width``) and mesh ≤
    min(:func:`mesh_for` · 2^{k/4}, ``mesh``), both quantized (powers of 2^(1/8) and 2^(1/4)); k =
    :func:`mesh_coarsening` (the grid cap: 0 where L ≤ FAST_HALF_WIDTH). ValueError (one line naming T, δ and about
    the largest T this grid rule serves) where it needs more than MAX_DOMAIN_POINTS points."""
    L, h = _grid(segs, direction, delta_error, eps_error, min_half_width, mesh)
    if 2 * L / h > MAX_DOMAIN_POINTS:
        total = sum(s.steps for s in segs)
        serve = _servable_steps(segs, direction, delta_error, eps_error, min_half_width, mesh)
        at = f"delta={delta:g}" if delta is not None else f"delta_error={delta_error:g}"
        raise LossBeyondGrid(
            f"the PRV grid for steps={total} at {at} would need {2 * L / h:.3g} points (> {MAX_DOMAIN_POINTS:.0e}); "
            f"at these settings it serves about steps <= {serve}: reduce steps, or increase noise_multiplier, "
            f"delta or eps_error (now {eps_error:g})"
        )
    return fft_friendly(Domain.create_aligned(-L, L, h), h)


def fft_friendly(domain: Domain, mesh: float) -> Domain:
    r"""``domain`` (aligned on ``mesh``) widened by the same number e of points at each end to the next size 2·m with m 5-smooth (2^a 3^b
    5^c, ``scipy.fft.next_fast_len``), the domain itself where its size is one already (or where the widened one
    would exceed MAX_DOMAIN_POINTS).

    The FFT of Opacus's ``compose_heterogeneous`` runs pocketfft on the grid's length, which for a length with a
    large prime factor takes Bluestein's algorithm: measured 5–7× slower (3.5·10⁶ points = 2·7·13·19379: 6.7 s
    against 1.4 s at the 5-smooth 3,538,944). The widened grid keeps the aligned layout that Opacus's roll assumes
    (t_min = −(N/2 − 1)·h, t_max = t_min + (N − 1)·h, the mesh h) and is wider: every bound of the grid holds on it
    (the Chernoff half-width is a lower limit, Lemma R4; the mass at +∞ is δ_env at the top point, which only falls).
    """
    n = domain.size
    wide = 2 * next_fast_len(n // 2, real=True)
    if wide == n or wide > MAX_DOMAIN_POINTS or round(domain.t_min / mesh) != 1 - n // 2:
        return domain
    k_lo = 1 - wide // 2
    out = Domain(t_min=float(k_lo * mesh), t_max=float((k_lo + wide - 1) * mesh), size=wide)
    if not abs(out.dt - mesh) < 1e-8 * mesh:  # as create_aligned checks
        raise AccountingError(f"widened PRV grid: mesh {out.dt!r} instead of {mesh!r}")
    return out


#: 2 directions × 24 segments (each pmf is one grid: ~10 MB at 10^4 steps)
@functools.lru_cache(maxsize=48)
def step_dprv(seg_key: Tuple, direction: str, t_min: float, t_max: float,
              size: int) -> Tuple[np.ndarray, float, float, Tuple]:
    """Cached per-segment discrete PRV on a domain: (pmf, mass at +∞, relative round-off c of :func:`ctd_pmf`,
    (ks, scores))."""
    seg = Segment(*seg_key)
    t = np.linspace(t_min, t_max, size)
    # β = 2 (one exact Gaussian curve, cheap) keeps every point exact; β ≠ 2 takes exact values at every
    # CHORD_STRIDE-th point and chords in between (an upper bound: δ is convex in e^t)
    stride = 1 if seg.beta == 2.0 else CHORD_STRIDE
    dl, rr, ks, scores = one_step_delta(seg, t, direction, stride)
    pmf, rho, c = ctd_pmf(t, dl, rr, hull_tolerance(seg))
    return pmf, rho, c, (tuple(ks), tuple(scores))
