r"""A rigorous lower bound on ε(δ) for long runs in many coordinates (numpy/scipy only; no opacus-gg code).

Setting as :mod:`lower_bound_oracle` (its items 1–5 are cited as LB1–LB5): noise μ_c(x) ∝ Π_i exp(−|x_i − c_i|^β/
(β s^β)), one step with shift v sampled with probability q, ℓ(x) = Σ_i ℓ_i(x_i), ℓ_i(t) = φ(t) − φ(t − v_i),
φ(t) = |t/s|^β/β, L = g(ℓ) (remove) or −g(ℓ) (add), g(ℓ) = log(1 − q + q e^ℓ). A *law* is a measure ω on losses
(the P-masses; its Q-masses are e^{−L}ω, not necessarily of total 1); δ_ω(ε) = Σ ω(L)(1 − e^{ε−L})_+ (LB1). What is
new against lower_bound_oracle is the reach (T = 10⁵ steps, k = 6·10⁴ coordinates) with no first-order grid bias:
a grid rounding-down that loses h per step would lose T·h in ε, so grids are left by merging (pooling) instead.

1. Coordinate pair, base view. Let B = μ_0 and r_i = e^{ℓ_i} = dμ_{v_i}/dμ_0 per coordinate (independent under B).
   The composed δ of any history is E_{B^{⊗}}[F]: remove F = (Π_t(1 − q_t + q_t ρ_t) − e^ε)_+; add, after the
   reflection x ↦ v − x (which maps (μ_0, μ_v) to (μ_v, μ_0), the noise being symmetric), F = (Π_t ρ_t −
   e^ε Π_t(1 − q_t + q_t ρ_t))_+, with ρ_t = Π_i r_{t,i}. In any one r_{t,i}, or in the product ρ of any group of
   one step's coordinates, F is (α r − β)_+ with β ≥ 0 (or 0): convex and non-decreasing. So replacing such an R by
   any R' ≤_icx R under B (independent of the rest) never increases δ (condition on the rest; Jensen), and R' ≤_icx
   R holds for (a) merging outcomes, R' = E_B[R | cell] (a Markov kernel, fractional splits allowed), (b) R' ≤ R
   pointwise, (c) dropping B-mass. Both directions use the same coordinate law (P-masses e^{ℓ}·B-masses).
2. Step pair. After subsampling, the step's law ω_t; the composed δ is E_{⊗ω_t}[f_ε(Σ L_t)] (LB1) and also
   E_{⊗ν_t}[(Π e^{L_t} − e^ε)_+], ν_t = e^{−L}ω_t: so (i) L' ≤ L pointwise at fixed P-mass (LB2) and (ii) (a)–(c)
   of item 1 for e^{L} under ν_t, for one step or for the sum of several, never increase δ.
3. :func:`pool` (grids h are powers of two, so any two are nested): cells [kh, (k+1)h) come in pairs (k − 1, k),
   k even. Where the pair's pooled ratio ΣP/ΣQ is ≥ e^{kh} (checked with a 1e-9 relative margin over the sums'
   round-off), the pair is one atom at kh with its whole Q-mass (a then b); else all of cell k and the same fraction
   θ = A_k/B_{k−1}·(1 − 1e-9) of each atom of cell k − 1 are (A_k = Σ_k P − e^{kh}Q ≥ 0, B_{k−1} = Σ_{k−1} e^{kh}Q −
   P ≥ 0: then θB_{k−1} ≤ A_k, the pooled ratio ≥ e^{kh}), and the rest of cell k − 1 goes to (k − 1)h (b); atoms
   exactly at an odd grid point stay (so a finer grid's pairs are symmetric about kh). The loss is second order
   in h where the law is smooth (the pair's ratio straddles e^{kh}).
4. One coordinate (:func:`coordinate_law`). ℓ_i is non-decreasing (v_i ≥ 0, φ convex). x̂_k is a point where the
   computed ℓ_i, lowered by 1e-12·(1 + φ(x) + φ(x − v_i)), is ≥ kh (vectorised bisection, made non-decreasing by a
   running max, which keeps ℓ_i(x̂_k) ≥ kh). The cell [x̂_k, x̂_{k+1}) merged (1a) has ratio ≥ e^{kh} (every point)
   and ≥ μ_v,low/μ_0,up (the masses' bounds, LB4 both ways): the larger, at its μ_0 lower bound (1b, 1c); below x̂_0
   is dropped. Then :func:`pool` onto hℤ.
5. Sums (k coordinates of a group, the groups, T steps, the segments of a history) by repeated squaring; each
   convolution is :func:`convolve_lower` (below, an entrywise lower bound: 1c/2ii-c), each result is trimmed (both
   ends of mass ≤ ``tail`` dropped, 1c/2ii-c) and, past ``max_cells`` cells, pooled onto a coarser grid (1, 2ii).
6. The step. Remove: atoms g(ℓ_j) with P-mass (1 − q)e^{−ℓ_j}N_j + qN_j (N the coordinate law's P-masses); add:
   −g(−ℓ_j) with P-mass N_j (1); each lowered by 1e-12(1 + |ℓ_j|) (2i; g as lower_bound_oracle.step_pmf, and where
   1 − q + q e^ℓ < ½ as its two positive terms), then pooled onto the step grid H (2ii).
7. FFT convolution from below. For non-negative a, b with N-point FFTs (N a power of two), Higham (Accuracy and
   Stability of Numerical Algorithms, 2nd ed., Thm 24.2) bounds a computed transform by ‖ŷ − y‖₂ ≤ η‖y‖₂, η =
   log₂N·(μ + γ₄(√2 + μ)) ≈ 7u·log₂N; through rfft, the product and irfft, ‖ĉ − a∗b‖_∞ ≤ (2η + 5u)(‖a‖₁‖b‖₂ +
   ‖a‖₂‖b‖₁) to first order. E takes η = 16u·log₂N and a 1 + 1e-6 factor for the computed norms, assuming pocketfft
   meets Higham's bound (as LB4 assumes of gammaincc; ``tests/test_long_run_oracle.py`` checks E against direct
   convolution). E is relative to the largest entries and the tails matter, so a and b are split by magnitude into
   BANDS pieces (entries in (τ^{i+1}M, τ^i M], M the largest; the last piece the rest), a∗b = Σ_s Σ_{i+j=s} a_i∗b_j
   with one inverse transform per s: the s-th sum is exactly 0 outside the hull of its products' supports (set so)
   and inside it their E's sum is subtracted and the result clipped at 0. Small products (len(a)·len(b) ≤ DIRECT)
   use np.convolve and LB4's relative bound.
8. ε: LB5 (:func:`lower_bound_oracle.epsilon_lower_from_pmf`), max over the two directions.

Reach (measured against dp-accounting's pessimistic PLD, tests/test_long_run_oracle.py): one coordinate at T = 10³ –
10⁵ within 0.1–1 %; k equal coordinates keep 4's per-cell loss of about 0.1·h (the masses' bounds) each, about
k·h/20 in ℓ per step: tight to k ≈ 10⁴, weak at 10⁶ (a bound still). A shape of k coordinates is a shift of any d ≥ k.
"""

from __future__ import annotations

import functools
import math
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from lower_bound_oracle import _interval_masses, _shrink, _tail, delta_lower, epsilon_lower_from_pmf

U = 2.0 ** -53
MARGIN = 1e-12
DIRECT = 10_000_000  # len(a)·len(b) up to this: np.convolve (exact up to LB4's relative bound)
BANDS, TAU = 3, 1e-4  # FFT convolution by magnitude bands (item 7)
Law = Tuple[int, np.ndarray, float]  # (k0, m, h): mass m[j] at loss (k0 + j)·h, h a power of two
Group = Tuple[int, float, float, float]  # (count k, shift v_i ≥ 0, β, scale s): k equal coordinates


def _pow2_floor(x: float) -> float:
    return 2.0 ** math.floor(math.log2(x))


def fft_error_bound(a: np.ndarray, b: np.ndarray, n_fft: int) -> float:
    """E of item 7: a bound on every entry's error of the FFT convolution of non-negative a and b."""
    n1a, n1b = float(a.sum()), float(b.sum())
    n2a, n2b = float(np.sqrt(np.dot(a, a))), float(np.sqrt(np.dot(b, b)))
    return (2 * 16 * U * math.log2(n_fft) + 5 * U) * (n1a * n2b + n2a * n1b) * (1 + 1e-6)


def _bands(a: np.ndarray) -> List[Tuple[np.ndarray, int, int]]:
    """a split by magnitude into BANDS pieces (entries in (τ^{i+1}M, τ^i M], M = max a, the last: the rest), each as
    (piece, first, last) index of its non-zero entries; empty pieces left out (item 7)."""
    top = float(a.max())
    edges = [top * TAU ** i for i in range(1, BANDS)] + [0.0]
    out, upper = [], math.inf
    for i, lower in enumerate(edges):
        band = (a > lower) & (a <= upper) if i else a > lower
        upper = lower
        nz = np.flatnonzero(band)
        if len(nz):
            out.append((i, np.where(band, a, 0.0), int(nz[0]), int(nz[-1])))
    return out


def convolve_lower(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """An entrywise lower bound (≥ 0) on the exact convolution of non-negative a and b (item 7)."""
    n = len(a) + len(b) - 1
    if len(a) * len(b) <= DIRECT or not a.any() or not b.any():
        return _shrink(np.convolve(a, b), min(len(a), len(b)))
    n_fft = 1 << (n - 1).bit_length()
    pa = _bands(a)
    pb = pa if b is a else _bands(b)
    fa = {i: np.fft.rfft(x, n_fft) for i, x, _, _ in pa}
    fb = fa if b is a else {i: np.fft.rfft(x, n_fft) for i, x, _, _ in pb}
    out = np.zeros(n)
    for s in range(2 * BANDS - 1):  # one inverse transform per order of magnitude τ^s of the products
        acc, err, lo, hi = None, 0.0, n, -1
        for i, x, x0, x1 in pa:
            for j, y, y0, y1 in pb:
                if i + j != s:
                    continue
                prod = fa[i] * fb[j]
                acc = prod if acc is None else acc + prod
                err += fft_error_bound(x, y, n_fft)
                lo, hi = min(lo, x0 + y0), max(hi, x1 + y1)  # the exact product is 0 outside [lo, hi]
        if acc is not None:
            c = np.fft.irfft(acc, n_fft)[lo:hi + 1]
            out[lo:hi + 1] += np.maximum(c - err, 0.0)
    return _shrink(out, 2 * BANDS)


def pool(loss: np.ndarray, mass: np.ndarray, h: float) -> Law:
    r"""Atoms (loss_j, mass_j) (mass under P; the atom's Q-mass is e^{−loss_j}·mass_j) on the grid hℤ, by pooling
    (item 3): cells come in pairs (k − 1, k), k even; the pair's atoms are merged into one atom at kh with its whole
    Q-mass where their pooled ratio ΣP/ΣQ is ≥ e^{kh}, else all of cell k and the fraction θ = A_k/B_{k−1} of cell
    k − 1 (A_k = Σ_{cell k} P − e^{kh}Q ≥ 0, B_{k−1} = Σ_{cell k−1} e^{kh}Q − P ≥ 0) are, and the rest of cell k − 1
    goes to (k − 1)h; each new atom keeps its Q-mass and takes P = e^{kh}·Q. Atoms exactly at an odd grid point stay."""
    c = np.floor(loss / h).astype(np.int64)
    c0 = int(c.min()) - 1
    c0 -= c0 % 2  # even: the first pair is (c0 − 1, c0), with cell c0 − 1 empty
    idx = c - c0  # ≥ 1
    n = int(idx.max()) + 1
    n += n % 2  # cells c0 … c0 + n (index 0 … n), n even: the last pair is (n − 1, n)
    lo, hi = c * h - loss, (c + 1) * h - loss  # in (−h, 0] and (0, h]
    # atoms exactly at an odd grid point stay there (no loss); then a pair's atoms lie in ((k − 1)h, (k + 1)h),
    # symmetric about kh where a finer grid is pooled (else its pooled ratio falls half a fine cell short)
    on_odd = (lo == 0.0) & (idx % 2 == 1)
    exact = np.bincount(idx[on_odd], weights=mass[on_odd], minlength=n + 1)[:n + 1]
    mass = np.where(on_odd, 0.0, mass)

    def per_cell(w: np.ndarray) -> np.ndarray:
        return np.bincount(idx, weights=w, minlength=n + 1)[:n + 1]

    s1, a = per_cell(mass * np.exp(lo)), per_cell(-mass * np.expm1(lo))  # e^{ch}Q and P − e^{ch}Q, cell c
    s2, b = per_cell(mass * np.exp(hi)), per_cell(mass * np.expm1(hi))  # e^{(c+1)h}Q and e^{(c+1)h}Q − P
    even = np.arange(2, n + 1, 2)  # cells c0 + 2, c0 + 4, …: their pair (k − 1, k); cell c0 pairs with an empty one
    # computed sums of ≤ len(mass) non-negative terms: relative error < 1e-9 (LB4), hence the margins
    full = a[even] >= b[even - 1] * (1.0 + 1e-9)
    theta = np.where(full, 1.0, a[even] / np.where(b[even - 1] > 0, b[even - 1], 1.0) * (1.0 - 1e-9))
    out = np.zeros(n + 1)
    out[even] = s1[even] + theta * s2[even - 1]
    out[even - 1] = (1.0 - theta) * s1[even - 1]
    out[0] = s1[0]  # cell c0 (even) with the empty cell c0 − 1
    return trim((c0, _shrink(out + exact, len(mass) + 4), h), 0.0)


def coarsen(law: Law, h: float) -> Law:
    """The law on the grid h ≥ its grid (a power-of-two multiple), by :func:`pool` (item 3)."""
    k0, m, h0 = law
    if h == h0:
        return law
    f = h / h0
    if f < 1 or f != 2.0 ** round(math.log2(f)):
        raise ValueError(f"grid {h!r} is not a power-of-two multiple of {h0!r}")
    keep = m > 0
    if not keep.any():
        return math.floor(k0 / f), np.zeros(1), h
    return pool((k0 + np.flatnonzero(keep)) * h0, m[keep], h)


def trim(law: Law, tail: float) -> Law:
    """Both ends of mass ≤ tail dropped (one empty cell where the whole mass is ≤ tail)."""
    k0, m, h = law
    c = np.cumsum(m)
    if c[-1] <= tail:
        return k0, np.zeros(1), h
    lo = int(np.searchsorted(c, tail, side="right"))
    r = np.cumsum(m[::-1])
    hi = len(m) - int(np.searchsorted(r, tail, side="right"))
    lo = min(lo, hi - 1)
    return k0 + lo, m[lo:max(hi, lo + 1)].copy(), h


def fit(law: Law, max_cells: int) -> Law:
    """The law on the finest power-of-two multiple of its grid with at most max_cells cells (item 5)."""
    k0, m, h = law
    f = 1
    while (len(m) + f - 1) // f + 1 > max_cells:
        f *= 2
    return coarsen(law, h * f)


def add(a: Law, b: Law, tail: float, max_cells: int) -> Law:
    """The law (entrywise lower bound) of the sum of independent variables with laws a and b, trimmed and fitted."""
    if a is b:  # a square
        return fit(trim((2 * a[0], convolve_lower(a[1], a[1]), a[2]), tail), max_cells)
    h = max(a[2], b[2])
    a, b = coarsen(a, h), coarsen(b, h)
    return fit(trim((a[0] + b[0], convolve_lower(a[1], b[1]), h), tail), max_cells)


def self_sum(law: Law, k: int, tail: float, max_cells: int) -> Law:
    """The law of the sum of k i.i.d. copies (k ≥ 1), by repeated squaring (item 5)."""
    out: Optional[Law] = None
    base = fit(trim(law, tail), max_cells)
    while True:
        if k & 1:
            out = base if out is None else add(out, base, tail, max_cells)
        k >>= 1
        if not k:
            return out
        base = add(base, base, tail, max_cells)


def _phi(x: np.ndarray, s: float, beta: float) -> np.ndarray:
    return np.abs(x / s) ** beta / beta


def _ell_low(x: np.ndarray, v: float, s: float, beta: float) -> np.ndarray:
    """ℓ_i(x) lowered by its round-off margin (item 4)."""
    a, b = _phi(x, s, beta), _phi(x - v, s, beta)
    return a - b - MARGIN * (1.0 + a + b)


@functools.lru_cache(maxsize=64)
def coordinate_law(v: float, beta: float, s: float, tail: float, cells: int) -> Law:
    """One coordinate with shift v > 0 (item 4): atoms kh with P-mass e^{kh}·μ_0([x̂_k, x̂_{k+1})) (the pair (μ_v, μ_0)
    with each cell's ratio lowered to e^{kh} at its μ_0-mass); h a power of two with about ``cells`` cells over the
    range of ℓ_i on the x-range outside of which each tail has mass < tail/10."""
    reach = s * (beta * (math.log(10.0 / tail) + 2.0)) ** (1.0 / beta)  # P(|X − c| > reach) < tail/10 (GG tail)
    lo_x, hi_x = -reach, v + reach
    lo_l, hi_l = float(_ell_low(np.array([lo_x]), v, s, beta)[0]), float(_ell_low(np.array([hi_x]), v, s, beta)[0])
    h = _pow2_floor((hi_l - lo_l) / cells)
    k = np.arange(math.floor(lo_l / h), math.floor(hi_l / h) + 1)
    level = k * h
    # x̂_k: bisection for a point with ℓ_low(x̂_k) ≥ kh; ℓ_low(lo) < level ≤ ℓ_low(hi) is kept at every step
    lo = np.full(len(k), lo_x)
    hi = np.full(len(k), hi_x)
    first_ok = _ell_low(lo, v, s, beta) >= level  # the lowest level(s), reached already at lo_x
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        ok = _ell_low(mid, v, s, beta) >= level
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    hi = np.where(first_ok, lo_x, hi)
    assert np.all(_ell_low(hi, v, s, beta) >= level), "coordinate_law: bisection lost its bracket"
    x = np.maximum.accumulate(hi)
    # cell k: [x̂_k, x̂_{k+1}) (the last: [x̂_K, ∞)); below x̂_0 dropped. Its ratio μ_v/μ_0 is ≥ e^{kh} (every point)
    # and ≥ μ_v,low/μ_0,up (the masses' bounds): the larger, at its μ_0 lower bound (item 4)
    (m0, m0_up), (mv, _) = (_interval_bounds(x, c, s, beta) for c in (0.0, v))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where((mv[1:] > 0) & (m0_up[1:] > 0), np.log(mv[1:]) - np.log(m0_up[1:]), -np.inf)
    loss = np.maximum(level, ratio - 4 * U * (1.0 + np.abs(ratio)))  # the logs' round-off
    keep = m0[1:] > 0
    return trim(pool(loss[keep], _shrink(m0[1:][keep] * np.exp(loss[keep]), 1), h), tail)


def _interval_bounds(x: np.ndarray, c: float, s: float, beta: float) -> Tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds on μ_c([x_j, x_{j+1})), j = −1 … N−1 (x_{−1} = −∞, x_N = +∞): the lower ones are
    :func:`lower_bound_oracle._interval_masses`; the upper ones add back its margins (LB4, both ways)."""
    low = _interval_masses(x, c, s, beta)
    t = _tail(np.abs((x - c) / s), beta)
    t = np.concatenate([[0.5], t, [0.5]])
    up = (low / (1.0 - MARGIN) + 2.0 * (MARGIN * (t[:-1] + t[1:]) + 4 * U)) * (1.0 + MARGIN)
    return low, up


@functools.lru_cache(maxsize=16)
def ell_law(groups: Tuple[Group, ...], tail: float, max_cells: int, coord_cells: int) -> Law:
    """P-law (the μ_v-role masses) of the lowered ℓ = Σ_i ℓ_i for a shift made of ``groups`` (items 4–5)."""
    law: Optional[Law] = None
    for count, v, beta, s in groups:
        if count == 0 or v == 0.0:
            continue
        part = self_sum(coordinate_law(float(v), float(beta), float(s), tail, coord_cells), int(count), tail,
                        max_cells)
        law = part if law is None else add(law, part, tail, max_cells)
    return (0, np.ones(1), 1.0) if law is None else law  # zero shift: ℓ = 0


def _g(ell: np.ndarray, q: float) -> np.ndarray:
    """g(ℓ) = log(1 − q + q e^ℓ) (as lower_bound_oracle.step_pmf: the ℓ > 700 branch without overflow;
    where 1 − q + q e^ℓ < ½ as the sum of its two positive terms, few ulps, where log1p would lose digits)."""
    big = ell > 700.0
    e = np.expm1(np.minimum(ell, 700.0))
    far = q * -e > 0.5  # 1 − q + q e^ℓ < ½: two positive terms (1 − q exact, q > ½), not log1p near −1
    with np.errstate(divide="ignore"):  # log1p(−1) = −inf only where the other branch is taken
        g = np.where(far, np.log((1.0 - q) + q * np.exp(np.minimum(ell, 0.0))), np.log1p(q * e))
    g[big] = ell[big] + math.log(q) + np.log1p((1.0 - q) / q * np.exp(-ell[big]))
    return g


def step_law(groups: Sequence[Group], q: float, direction: str, tail: float, max_cells: int, coord_cells: int,
             step_cells: int, h_step: Optional[float] = None) -> Law:
    """The law of one step's rounded-down loss (item 6) on a power-of-two grid (``h_step``, or the finest with
    about ``step_cells`` cells over the trimmed range)."""
    k0, m, h = ell_law(tuple(groups), tail, max_cells, coord_cells)
    ell = (k0 + np.arange(len(m))) * h
    if direction == "remove":  # P = (1 − q)·D + q·N, D = e^{−ℓ}N the μ_0-role masses (item 6)
        with np.errstate(divide="ignore"):
            mass = _shrink((1 - q) * np.exp(np.log(m) - ell) + q * m, 3)
        loss = _g(ell, q)
    elif direction == "add":  # P = N at L = −g(−ℓ) (items 1, 6)
        mass, loss = m, -_g(-ell, q)
    else:
        raise ValueError(direction)
    loss = loss - MARGIN * (1.0 + np.abs(ell))
    keep = np.isfinite(loss) & (mass > 0)
    loss, mass = loss[keep], mass[keep]
    if not len(mass):
        return 0, np.zeros(1), 1.0
    # both tails of mass ≤ tail dropped (the atoms are in the order of ℓ, so of the loss: g is increasing)
    (k0, m, _) = trim((0, mass, 1.0), tail)  # each end's cumulated from its own side (a float sum from the other
    loss, mass = loss[k0:k0 + len(m)], m  # side would lose the far tail's 1e-16 and less)
    if h_step is None:  # the grid: about step_cells cells over that range
        h_step = _pow2_floor(max(float(loss.max() - loss.min()), 1e-12) / step_cells)
    return trim(pool(loss, mass, h_step), tail)


def history_laws(history: Sequence[Tuple], shift_groups: Sequence[Group], delta: float, *,
                 max_cells: int = 1 << 19, coord_cells: int = 1 << 17, step_cells: int = 1 << 18) -> List[Law]:
    r"""[law of the composed rounded-down loss, remove and add] of ``history = [(σ, q, steps, β), ...]`` at the
    shift ``shift_groups`` = [(count, v_i[, β, s])]: count coordinates with shift v_i, of the segment's β and σ
    unless given (a count query: (1, 1, 2, σ_c), a Gaussian coordinate of shift 1 and std σ_c).
    Trims drop < 1e-4·δ in all (item 5): each trimmed partial sum enters the total at most
    (coordinates + 2)·steps times."""
    n_steps = sum(int(t) for _, _, t, _ in history)
    coords = sum(int(g[0]) for g in shift_groups)
    tail = 1e-4 * delta / (8.0 * n_steps * (coords + 2) * (2 + len(shift_groups)) * len(history))
    out = []
    for direction in ("remove", "add"):
        total: Optional[Law] = None
        for sigma, q, t, beta in history:
            groups = tuple((int(g[0]), float(g[1]), float(g[2] if len(g) > 2 else beta),
                            float(g[3] if len(g) > 3 else sigma)) for g in shift_groups)
            law = step_law(groups, q, direction, tail, max_cells, coord_cells, step_cells)
            seg = self_sum(law, int(t), tail, max_cells)
            total = seg if total is None else add(total, seg, tail, max_cells)
        out.append(total)
    return out


def epsilon_lower(history: Sequence[Tuple], delta: float, shift_groups: Sequence[Group], **kw) -> float:
    """A rigorous lower bound on the add/remove ε(δ) of ``history`` (max over directions; item 8)."""
    return max([0.0] + [epsilon_lower_from_pmf((k0, m), delta, h)
                        for k0, m, h in history_laws(history, shift_groups, delta, **kw)])


def delta_lower_at(laws: Iterable[Law], epsilon: float) -> float:
    """A rigorous lower bound on δ(ε) from :func:`history_laws`'s laws (max over directions)."""
    return max(delta_lower((k0, m), epsilon, h) for k0, m, h in laws)


def shapes(d: int, p: float, k_max: int = 1 << 20) -> Dict[str, List[Tuple[int, float]]]:
    r"""Shifts of the unit ℓp ball in d coordinates, as [(count, v_i)]: one coordinate at the radius; k equal
    coordinates k^{−1/p} for k ∈ {2, 16, 256, 4096, 65536, 2^20, d} ∩ [2, min(d, k_max)]; one coordinate c ∈
    {0.5, 0.8} plus the rest of the p-mass over k − 1 others. p = ∞: every coordinate 1."""
    out: Dict[str, List[Tuple[int, float]]] = {"one": [(1, 1.0)]}
    ks = sorted({k for k in (2, 16, 256, 4096, 65536, 1 << 20, d) if 2 <= k <= min(d, k_max)})
    for k in ks:
        out[f"equal{k}"] = [(k, 1.0 if math.isinf(p) else k ** (-1.0 / p))]
    for c in (0.5, 0.8):
        for k in ks[-1:]:
            rest = 1.0 if math.isinf(p) else ((1.0 - c ** p) / (k - 1)) ** (1.0 / p)
            out[f"c{c:g}+{k - 1}"] = [(1, c), (k - 1, rest)]
    return out
