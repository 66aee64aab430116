r"""A rigorous lower bound on ε(δ) of the Poisson-subsampled GG mechanism (numpy/scipy only; no opacus-gg code).

Setting. Noise density μ_c(x) ∝ Π_i exp(−|x_i − c_i|^β / (β s^β)), s = σ (clip norm 1), β ≥ 1. One step with
shift v (‖v‖_p ≤ 1 is any shift the clipping allows) is sampled with probability q:

    remove: P = (1 − q) μ_0 + q μ_v, Q = μ_0;        add: P = μ_0, Q = (1 − q) μ_0 + q μ_v.

With ℓ(x) = log μ_v(x)/μ_0(x) = Σ_i ℓ_i(x_i), ℓ_i(t) = φ(t) − φ(t − v_i), φ(t) = |t/s|^β/β, the privacy loss
L = log dP/dQ is g(ℓ) (remove) and −g(ℓ) (add), where g(ℓ) = log(1 − q + q e^ℓ) is increasing.

Why the result is a lower bound (each step below keeps "≤ the true δ(ε)"):

1. δ(ε) = sup_S P(S) − e^ε Q(S) = E_P[f_ε(L)], f_ε(L) = (1 − e^{ε−L})_+, non-decreasing in L. For T composed steps
   (any schedule of (σ, q, β, v)) L = Σ_t L_t with L_t independent under P^T.
2. If L'_t ≤ L_t pointwise (L'_t = −∞ allowed: that mass is dropped), then E[f_ε(Σ_t L'_t)] ≤ δ(ε), and the law of
   Σ_t L'_t is the convolution of the laws of the L'_t. So ANY pointwise rounding-down of each step's loss, composed
   exactly, gives a lower bound on δ(ε); tails may be dropped.
3. The rounding-down. φ is convex (β ≥ 1), so ℓ_i is non-decreasing for v_i ≥ 0 (we take v_i ≥ 0: reflecting a
   coordinate changes nothing). Cut ℝ into intervals [x_j, x_{j+1}) (x_0 = −∞, x_N = +∞); on one interval
   ℓ_i ∈ [ℓ_i(x_j), ℓ_i(x_{j+1})] (limits at ±∞: ±v_i/s for β = 1, ±∞ for β > 1). For remove we use the lower end
   rounded down to the grid hℤ (−∞: dropped), for add the upper end rounded up (+∞ gives L = −∞: dropped). Under
   μ_c the coordinates are independent, so the law of Σ_i ℓ_i^± is the convolution over i; under P (remove) it is
   the mixture (1 − q)·law_0 + q·law_v. Then L' = ⌊±g(ℓ^∓)⌋_h ≤ L, g being increasing (g(ℓ) = ℓ + log q +
   log1p((1 − q)/q·e^{−ℓ}) above ℓ = 700, where e^ℓ overflows). A law whose whole mass is dropped is one empty cell.
4. Round-off. Floors/ceils are taken with a margin of 1e-12 relative to the largest term computed; interval masses
   come from scipy's gammaincc (assumed accurate to 1e-12 relative: checked against mpmath in the tests), each one
   lowered by 1e-12 × the tail values it is a difference of; every sum of non-negative terms (bincount, convolve,
   the δ sum) of n terms has relative error ≤ n·u, u = 2^-53, and is multiplied by (1 − 4 n u) afterwards.
5. ε. If δ'(ε₀) > δ for the lower bound δ' then the true δ(ε₀) > δ, so the true ε(δ) > ε₀. The answer is the
   largest ε₀ found by bisection with δ'(ε₀) > δ checked; both directions are computed and the max returned.

Grid. h is (width of the widest one-step loss PMF)/bins; that width is read on a grid of 0.01, or 10× coarser at a
time where that grid would need more than MAX_CELLS cells (one-step losses of 10⁴ and more: β = 11, σ = 0.3).

Tightness: each step loses at most (number of coordinates + 1) grid cells plus the spread of ℓ over one x-interval.
"""

from __future__ import annotations

import math
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np
from scipy import special

U = 2.0 ** -53
MARGIN = 1e-12  # relative margin of floors/ceils and of the masses (item 4)
N_X = 100_000  # x-intervals per coordinate
Pmf = Tuple[int, np.ndarray]  # (k0, m): mass m[j] at loss (k0 + j)·h
MAX_CELLS = 4_000_000  # a PMF wider than this is refused (GridTooFine): the coarse pass then takes a wider h


class GridTooFine(ValueError):
    """A grid PMF would need more than MAX_CELLS cells (losses of 10⁴ and more on a grid of 0.01)."""


def _shrink(m: np.ndarray, n_terms: int) -> np.ndarray:
    """Lower a computed sum of ≤ n_terms non-negative terms by its worst relative round-off."""
    return m * (1.0 - 4.0 * (n_terms + 1) * U)


def _tail(y: np.ndarray, beta: float) -> np.ndarray:
    """P(Y > y) for y ≥ 0, Y standard GG (density ∝ exp(−|y|^β/β)): ½ Q(1/β, y^β/β)."""
    return 0.5 * special.gammaincc(1.0 / beta, y ** beta / beta)


def _interval_masses(x: np.ndarray, c: float, s: float, beta: float) -> np.ndarray:
    """Lower bounds on μ_c([x_j, x_{j+1})) for j = −1 … N−1 (x_{−1} = −∞, x_N = +∞), computed without cancellation."""
    y = (x - c) / s
    lo_t = _tail(np.abs(y), beta)  # P(Y > |y|) = P(Y < −|y|)
    below = np.where(y < 0, lo_t, 1.0 - lo_t)  # P(Y < y)
    above = np.where(y >= 0, lo_t, 1.0 - lo_t)  # P(Y > y)
    a, b = y[:-1], y[1:]
    inner = np.where(a >= 0, above[:-1] - above[1:],
                     np.where(b <= 0, below[1:] - below[:-1], 1.0 - below[:-1] - above[1:]))
    err = MARGIN * (lo_t[:-1] + lo_t[1:]) + np.where((a < 0) & (b > 0), 4 * U, 0.0)  # 1 − … loses U absolute
    m = np.concatenate([[below[0]], np.maximum(inner - err, 0.0), [above[-1]]])
    return np.maximum(m * (1.0 - MARGIN), 0.0)


def _coordinate_loss(v: float, s: float, beta: float, upper: bool) -> Tuple[np.ndarray, List[np.ndarray]]:
    """Per-interval bounds on ℓ_i (lower ends, or upper ends if ``upper``) and the masses under μ_0 and μ_v."""
    reach = (60.0 * beta) ** (1.0 / beta) * s  # beyond: tail mass < e^-60
    x = np.union1d(np.linspace(-reach, v + reach, N_X + 1), np.linspace(0.0, v, 2001))  # ℓ_i varies most on [0, v]
    phi = lambda t: np.abs(t / s) ** beta / beta  # noqa: E731
    lx = phi(x) - phi(x - v)
    lim = v / s if beta == 1.0 else math.inf  # ℓ_i(+∞); ℓ_i(−∞) = −lim
    ends = np.concatenate([[-lim], lx, [lim]])  # ℓ_i at x_{−1} … x_N
    ell = ends[1:] if upper else ends[:-1]
    scale = 1.0 + np.concatenate([[0.0], phi(x) + phi(x - v), [0.0]])
    scale = np.maximum(scale[1:], scale[:-1])
    ell = ell + (1 if upper else -1) * MARGIN * scale
    return ell, [_interval_masses(x, c, s, beta) for c in (0.0, v)[:1 if upper else 2]]


def _to_grid(values: np.ndarray, mass: np.ndarray, h: float, up: bool) -> Pmf:
    """PMF of ⌊values⌋_h (⌈·⌉_h if ``up``); non-finite values are dropped (item 3)."""
    keep = np.isfinite(values) & (mass > 0)
    if not keep.any():  # every value dropped: no mass left (a lower bound still)
        return 0, np.zeros(1)
    k = np.ceil(values[keep] / h) if up else np.floor(values[keep] / h)
    k = k.astype(np.int64)
    k0 = int(k.min())
    if int(k.max()) - k0 > MAX_CELLS:
        raise GridTooFine(f"{int(k.max()) - k0} cells of width {h:g}")
    return k0, _shrink(np.bincount(k - k0, weights=mass[keep]), len(k))


def _conv(a: Pmf, b: Pmf, tail: float) -> Pmf:
    """Exact-up-to-round-off convolution of two grid PMFs, then both ends with mass ≤ tail dropped (item 2)."""
    m = _shrink(np.convolve(a[1], b[1]), min(len(a[1]), len(b[1])))
    return _trim(a[0] + b[0], m, tail)


def _trim(k0: int, m: np.ndarray, tail: float) -> Pmf:
    """Both ends of mass ≤ tail dropped (one empty cell where the whole mass is ≤ tail)."""
    c = np.cumsum(m)
    if c[-1] <= tail:
        return k0, np.zeros(1)
    lo = int(np.searchsorted(c, tail, side="right"))
    r = np.cumsum(m[::-1])
    hi = len(m) - int(np.searchsorted(r, tail, side="right"))
    lo = min(lo, hi - 1)
    return k0 + lo, m[lo:max(hi, lo + 1)].copy()


def _span(ell: np.ndarray, mass: np.ndarray, tail: float) -> float:
    """Width of the range of ℓ_i values left once both tails of mass ≤ tail are cut (sets the ℓ grid only)."""
    c = np.cumsum(mass)
    i0, i1 = np.searchsorted(c, tail), min(int(np.searchsorted(c, c[-1] - tail)), len(c) - 1)
    vals = ell[i0:i1 + 1]
    vals = vals[np.isfinite(vals)]
    return float(vals.max() - vals.min()) if len(vals) else 0.0


def step_pmf(beta: float, sigma: float, q: float, shift: Sequence[float], direction: str, h: float,
             tail: float = 1e-25, bins: int = 1500) -> Pmf:
    r"""Grid PMF (under P) of a pointwise lower bound L' ≤ L of one step's privacy loss, on hℤ (items 3-4)."""
    if direction not in ("remove", "add"):
        raise ValueError(direction)
    upper = direction == "add"
    v = [abs(float(t)) for t in shift if t != 0]
    if not v:  # zero shift: L = 0
        return 0, np.ones(1)
    # per coordinate: interval bounds on ℓ_i and masses under μ_0 (and μ_v for remove)
    coords = {vi: _coordinate_loss(vi, sigma, beta, upper) for vi in set(v)}
    if q == 1:  # L = ±ℓ: the ℓ grid is the L grid, no second rounding
        h_ell = h
    else:  # finer than h, but one coordinate's law on ≤ 4·bins cells (its convolutions stay cheap)
        h_ell = max(h / 4, max(_span(e, m, tail) for e, ms in coords.values() for m in ms) / (4 * bins))
    laws = None  # (law under μ_0, law under μ_v) of Σ ℓ_i^±
    for vi in v:
        ell, masses = coords[vi]
        pair = [_trim(*_to_grid(ell, m, h_ell, upper), tail) for m in masses]
        laws = pair if laws is None else [_conv(a, b, tail) for a, b in zip(laws, pair)]
    if upper:
        k0, m = laws[0]
    else:  # the mixture (1 − q) law_0 + q law_v on one index range
        (a0, ma), (b0, mb) = laws
        k0 = min(a0, b0)
        m = np.zeros(max(a0 + len(ma), b0 + len(mb)) - k0)
        m[a0 - k0:a0 - k0 + len(ma)] += (1 - q) * ma
        m[b0 - k0:b0 - k0 + len(mb)] += q * mb
        m = _shrink(m, 2)
    if q == 1:  # L = ℓ (remove) or −ℓ (add), exactly
        return _trim(-(k0 + len(m) - 1), m[::-1].copy(), tail) if upper else _trim(k0, m, tail)
    ell = (k0 + np.arange(len(m))) * h_ell
    # g(ℓ) = log1p(q·expm1(ℓ)), and ℓ + log q + log1p((1 − q)/q·e^{−ℓ}) where expm1 would overflow (the same
    # value, a few ulps of |ℓ| + |log q| ≤ the margin below; that mass was dropped before, a weaker bound)
    big = ell > 700.0
    g = np.log1p(q * np.expm1(np.minimum(ell, 700.0)))
    g[big] = ell[big] + math.log(q) + np.log1p((1.0 - q) / q * np.exp(-ell[big]))
    loss = (-g if upper else g) - MARGIN * (1.0 + np.abs(ell))
    return _trim(*_to_grid(loss, m, h, up=False), tail)


def compose(steps: Iterable[Pmf], tail: float = 1e-25) -> Pmf:
    """PMF of the sum of independent steps' rounded-down losses (item 2)."""
    out: Optional[Pmf] = None
    for p in steps:
        out = p if out is None else _conv(out, p, tail)
    return out


def delta_lower(pmf: Pmf, epsilon: float, h: float) -> float:
    """A lower bound on δ(ε): Σ_k m_k (1 − e^{ε − k h})_+, lowered by its round-off (items 1, 4)."""
    k0, m = pmf
    loss = (k0 + np.arange(len(m))) * h
    sel = loss > epsilon
    terms = m[sel] * -np.expm1(epsilon - loss[sel])
    return float(_shrink(np.array([terms.sum()]), len(terms) + 8)[0])


def epsilon_lower_from_pmf(pmf: Pmf, delta: float, h: float) -> float:
    """Largest ε₀ (bisection) with δ'(ε₀) > δ checked; 0 if δ'(0) ≤ δ (item 5)."""
    if delta_lower(pmf, 0.0, h) <= delta:
        return 0.0
    lo, hi = 0.0, (pmf[0] + len(pmf[1])) * h
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if delta_lower(pmf, mid, h) > delta:
            lo = mid
        else:
            hi = mid
    return lo


def direction_pmfs(history: Sequence[Tuple], shift: Sequence[float], tail: float, bins: int = 1500,
                   h: Optional[float] = None) -> List[Tuple[Pmf, float]]:
    r"""[(PMF, h)] of the composed rounded-down loss of a history ``[(σ, q, steps, β), ...]`` with one fixed shift v,
    one per direction (remove, add): each bounds that direction's δ(ε) from below at every ε (items 1-4). The grid h
    defaults to (width of the widest one-step loss PMF)/``bins``, found by a coarse pass; every step uses it."""
    out = []
    for direction in ("remove", "add"):
        hh = h
        if hh is None:
            hh = max(max(_width(b, s, q, shift, direction, tail, bins) for s, q, _, b in history) / bins, 1e-5)
        steps = [p for s, q, t, b in history for p in [step_pmf(b, s, q, shift, direction, hh, tail, bins)] * int(t)]
        out.append((compose(steps, tail), hh))
    return out


def _width(beta: float, sigma: float, q: float, shift: Sequence[float], direction: str, tail: float,
           bins: int) -> float:
    """Width of one step's loss PMF, on a grid of 0.01, or of 1/20000 of the summed widths of the coordinates' loss
    ranges where that is coarser (their convolution on a grid of 0.01 would take hours), or 10× coarser at a time
    where that is still too fine."""
    upper = direction == "add"
    span = 0.0
    for v in {abs(float(t)) for t in shift if t != 0}:
        ell, masses = _coordinate_loss(v, sigma, beta, upper)
        span += sum(1 for t in shift if abs(float(t)) == v) * max(_span(ell, m, tail) for m in masses)
    h = max(0.01, span / 20000.0)
    while True:
        try:
            return len(step_pmf(beta, sigma, q, shift, direction, h, tail, bins)[1]) * h
        except GridTooFine:
            h *= 10.0


def epsilon_tail(history: Sequence[Tuple], delta: float, shift: Sequence[float]) -> float:
    """The trim of :func:`epsilon_lower`: all trims together drop < 1e-6·δ of δ(ε)."""
    n_steps = sum(int(t) for _, _, t, _ in history)
    return 1e-6 * delta / (2 * n_steps * (len(shift) + 2))


def epsilon_lower(history: Sequence[Tuple], delta: float, shift: Sequence[float] = (1.0,), h: Optional[float] = None,
                  bins: int = 1500) -> float:
    r"""Lower bound on the add/remove ε(δ) of a history ``[(σ, q, steps, β), ...]`` with one fixed shift v.

    Max over the two directions. The grid h defaults to (width of the widest one-step loss PMF)/``bins``: the
    bound is then within about ``steps · (len(v) + 1) · h`` of the true ε of this shift.
    """
    pmfs = direction_pmfs(history, shift, epsilon_tail(history, delta, shift), bins, h)
    return max([0.0] + [epsilon_lower_from_pmf(pmf, delta, hh) for pmf, hh in pmfs])


def tpr_lower_from_pmf(pmf: Pmf, fpr: Sequence[float], h: float) -> np.ndarray:
    r"""A lower bound on the largest TPR at each FPR α of the ordering whose δ_PQ this PMF bounds from below.

    For a pair (P, Q) the largest TPR at FPR α is inf over ε ∈ ℝ of e^ε α + δ_PQ(ε) (the convex dual), and δ' ≤ δ_PQ
    at every ε (item 2 holds for negative ε too), so inf_ε e^ε α + δ'(ε) is below it. With δ'(ε) = D1_{j+1} −
    e^ε D2_{j+1} on [l_j, l_{j+1}] (suffix sums of m and m·e^{−l}) the function is D1 + e^ε(α − D2) there, monotone,
    so the infimum is at a loss l_j or at ε → −∞ (the total mass D1_0): exact over the grid. Round-off: each value
    is lowered by 4(n + 8)u·D1_{j+1} (the suffix sums' error) and by the relative factor of item 4.
    """
    k0, m = pmf
    n = len(m)
    loss = (k0 + np.arange(n)) * h
    a = np.asarray(fpr, dtype=np.float64)
    if np.any(a < 1e-300):
        raise ValueError("tpr_lower_from_pmf: FPRs below 1e-300")
    d1 = np.concatenate((np.cumsum(m[::-1])[::-1], [0.0]))
    d2 = np.concatenate((np.cumsum((m * np.exp(-loss))[::-1])[::-1], [0.0]))
    e = np.exp(np.minimum(loss, 700.0))
    base = d1[1:] - e * d2[1:] - 4.0 * (n + 8) * U * d1[1:]
    cand = e[None, :] * a[:, None] + base[None, :]
    # at a loss l_j > 700, D2_{j+1} ≤ e^{−700}·D1 and the candidate D1 + e^{l_j}(α − D2) > e^{700}(α − e^{−700}) > 1 ≥
    # D1_0 for α ≥ 1e-300: never the minimum, left out (e^{l_j} would overflow)
    cand[:, loss > 700.0] = np.inf
    vals = np.min(cand, axis=1)
    return _shrink(np.minimum(vals, d1[0]), n + 8)


def tpr_lower(history: Sequence[Tuple], fpr: Sequence[float], shift: Sequence[float] = (1.0,), bins: int = 1500,
              tail: float = 1e-15) -> np.ndarray:
    r"""Lower bound on the largest membership-inference TPR at each FPR of a history ``[(σ, q, steps, β), ...]`` with
    one fixed shift v: the larger over the two directions of :func:`tpr_lower_from_pmf` (each direction's PMF is one
    ordering of the neighbouring pair; dropped tails only lower δ')."""
    pmfs = direction_pmfs(history, shift, tail, bins)
    return np.max([np.zeros(len(fpr))] + [tpr_lower_from_pmf(pmf, fpr, hh) for pmf, hh in pmfs], axis=0)
