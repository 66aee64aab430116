r"""The truth under adaptively chosen shapes (issue 35): rigorous LOWER bounds on the ε of β-DP-SGD when the
adversary picks the gradient's shape at every step (``python benchmarks/adaptive_worst.py --help``;
docs/accounting.md, "The truth under adaptive shapes: lower bounds (issue 35)", Lemmas A1–A5).

Units (docs/accounting.md): noise GG(β, 1) per coordinate (density ∝ e^{−|x|^β/β}), shift radius m = 1/σ. A *shape*
is a shift μ with ‖μ‖_p ≤ m, given by its GG coordinates (size a, multiplicity n), optionally with a Gaussian factor
N(s): the d → ∞ limit of the rest of the shape spread equally (s = √I_β·‖rest‖_2, Lemma A5: a limit of shapes, a
lower bound on the truth over every dimension, not at one d). Its one-step pair (P_μ, Q), loss ℓ = Σ_i ℓ_{μ_i}(x_i),
is symmetric: ℓ under Q has the law of −ℓ under P_μ (x ↦ μ − x). Poisson subsampling at rate q, g(ℓ) = log(1 − q +
qe^ℓ):

    remove: (1 − q)Q + qP_μ against Q, loss L = g(ℓ), ℓ ~ (1 − q)·law_Q + q·law_P;
    add:    Q against (1 − q)Q + qP_μ, loss L = −g(ℓ), ℓ ~ law_Q.

A step's PLD ω (the law of L under the pair's first member; mass ρ at +∞) gives H_{e^t} = E_ω[(1 − e^{t−L})_+] + ρ.

**The recursion** (Lemma A1): with V_0(t) = (1 − e^t)_+ and

    V_s(t) = max_k E_{ω_k}[V_{s−1}(t − L)] + ρ_k,

V_s(t) = sup H_{e^t} over s-step adaptive choices among the family's shapes (one direction), and ε_adaptive(δ) =
inf{t : V_T(t) ≤ δ}. A fixed schedule (one shape, or f·T steps of A then the rest of B) is the same recursion
without the max.

**Discretization** (Lemmas A2–A4). Each shape's loss laws are bounded on a fine grid h_c of ℓ through their survival
functions (lower: survival ≤ the exact one at every grid point, sub-probability; upper: ≥, the rest of the mass at
+∞), composed over coordinates by FFT with the round-off bound of :func:`.checks.fft_convolution_error` taken off
(lower) or added (upper), plainly and under the tilts e^{±ℓ} (each cell the least error). V lives on the grid t_i =
(i − i_0)h. With x = e^{−L}, E_ω[V(t − L)] = E[ψ(x)] for ψ(x) = V(e^t·x), convex and non-increasing (V is a supremum
of hockey-stick curves, convex in α = e^t); so the lower end replaces a step's atoms by a law on the grid points x_j
= e^{−jh} below them in the decreasing convex order (:func:`contract_to_grid`: groups of consecutive atoms, each
moved to its barycentre, then up to a grid point), and the upper end splits each atom between its two grid
neighbours by the chord (connect the dots). Both cost O(h²) per step where a step's masses vary slowly over a cell
(rounding each atom's loss down to the grid would cost O(h); in steep tails the contraction's groups widen and the
lower end loses more: docs, Lemma A4 and Table C). Outside the grid V ≥ (1 − e^t)_+ and V ≥ 0 (lower), V ≤ 1 and V ≤
W⁺(t_max) (upper). V is written as B + R, B = (1 − e^t)_+, whose convolution with a kernel is summed directly (long
double suffix sums), so the FFT's round-off bound scales with ‖R‖, not with the ~1/h ones of B. The lower end is a
rigorous lower bound on the truth wherever every shape is a shape of the ball (limits: over every dimension, Lemma
A5); the upper end bounds the family's own adaptive value (the discretization's other side: NOT a bound on the
truth). Both assume the tail functions' error models of :mod:`.gg_pair` (SF_RTOL) and :func:`.checks.fft_eta`.

Subcommands: ``run`` (one setting: the fixed shapes, mixtures of the worst pairs, the adaptive recursion, both
directions), ``grid`` (the same at several h, to see the discretization converge) and ``envelope`` (the PRV of the
family's envelope pair by the library: the upper-side floor of a per-step dominating pair). Run one job at a time with
``OMP_NUM_THREADS=1``; the commands of the docs' numbers are listed there.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy import fft as sfft
from scipy import special

from opacus_gg.accountants.checks import UNIT_ROUNDOFF, AccountingError, check_finite, fft_convolution_error
from opacus_gg.accountants.family_composition import Grid, Kernel, Recursion, contract_to_grid, make_kernel
from opacus_gg.accountants.fisher import fisher_information
from opacus_gg.accountants.gg_pair import SF_ATOL, inverse_loss, loss, sf_relative_error
from opacus_gg.distribution import sf as gg_sf
from opacus_gg.formatting import fmt_down, fmt_up

_U = UNIT_ROUNDOFF
#: tails of a coordinate's law below e^{−TAIL_LOG} are cut (lower: dropped; upper: moved to +∞)
TAIL_LOG = 75.0
#: mass below which the ends of a product's law are trimmed (lower: dropped; upper: bottom moved up, top to +∞)
TRIM = 1e-32
#: relative error assumed of scipy's ``ndtr`` (the Gaussian factor's tail; measured ≤ 1e-15, ×10⁴)
NDTR_RTOL = 1e-11
#: threshold margin: survival read at v ± TAU·(1 + |v|), covering the root's residual (checked) and the argument's
#: rounding
TAU = 1e-9


# --- shapes and their loss laws on the ℓ grid ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Shape:
    """A shift of the ball: GG coordinates ``coords`` = ((a, n), …) (n coordinates of size a, units of the noise
    scale) and a Gaussian factor of shift ``gauss`` (0: none; Lemma A5: the limit of a rest spread over many
    coordinates)."""

    label: str
    coords: Tuple[Tuple[float, int], ...]
    gauss: float = 0.0

    @property
    def count(self) -> int:
        """Factors whose grid rounding adds up (each GG coordinate and the Gaussian one)."""
        return sum(n for _, n in self.coords) + (1 if self.gauss > 0 else 0)


@dataclasses.dataclass
class Law:
    """A law on the grid h_c: mass ``m[j]`` at loss (j0 + j)·h_c, mass ``rho`` at +∞ (upper laws only)."""

    j0: int
    m: np.ndarray
    rho: float = 0.0


@dataclasses.dataclass
class ShapeLaws:
    """Bounds on the loss laws of one shape's pair: survival below the exact one (``lo_q``, ``lo_p``: under Q and
    under P_μ, sub-probabilities) and above it (``hi_q``, ``hi_p``, the rest of the mass at +∞), on the grid ``hc``."""

    shape: Shape
    hc: float
    lo_q: Law
    lo_p: Law
    hi_q: Law
    hi_p: Law


def _survival_bounds(kind: str, size: float, beta: float, v: np.ndarray) -> List[Tuple[np.ndarray, np.ndarray]]:
    r"""[(S⁻, S⁺) under Q, (S⁻, S⁺) under P_μ] with S⁻ ≤ P(ℓ > v) ≤ S⁺, for one factor's loss ℓ.

    GG coordinate of size a: P(ℓ > v) = P(X > x*(v)) (X ~ GG at 0, or at a), x* = :func:`.gg_pair.inverse_loss`,
    read at v + τ (S⁻) and v − τ (S⁺), the roots' loss checked to lie on the right side of v, and the tail
    function's relative error (:func:`.gg_pair.sf_relative_error`, ×1.01, + 3u) and SF_ATOL taken off / added.
    Gaussian factor N(s): ℓ = sx − s²/2, P(ℓ > v) = Φ̄((v ± s²/2)/s) (− under P_μ), with NDTR_RTOL; the argument's
    rounding, ≤ 4u(|v| + s²)/s, is inside τ(1 + |v|)/s."""
    tau = TAU * (1.0 + np.abs(v))
    lo: List[np.ndarray] = []
    hi: List[np.ndarray] = []
    for sign in (1.0, -1.0):  # S⁻ at v + τ, S⁺ at v − τ
        w = v + sign * tau
        if kind == "gauss":
            vals = [(special.ndtr(-(w + size * size / 2.0) / size), NDTR_RTOL),
                    (special.ndtr(-(w - size * size / 2.0) / size), NDTR_RTOL)]
        else:
            x = inverse_loss(w, size, beta)
            fin = np.isfinite(x)
            got = loss(x[fin], size, beta)
            if not (np.all(got >= v[fin]) if sign > 0 else np.all(got <= v[fin])):
                raise AccountingError(f"threshold margin too small for a={size}, beta={beta}")
            vals = [(gg_sf(arg, beta, 1.0), 1.01 * sf_relative_error(arg, beta, rounded) + 3.0 * _U)
                    for arg, rounded in ((x, False), (x - size, True))]
        for s, rel in vals:
            check_finite(s, f"survival of the loss ({kind}, size {size}, beta {beta})")
            if sign > 0:
                lo.append(np.maximum(s * (1.0 - rel) - SF_ATOL, 0.0))
            else:
                hi.append(np.minimum(s * (1.0 + rel) + SF_ATOL, 1.0))
    return list(zip(lo, hi))


def _factor_range(kind: str, size: float, beta: float) -> Tuple[float, float]:
    """Loss range outside which both laws carry < e^{−TAIL_LOG}."""
    if kind == "gauss":
        r = math.sqrt(2.0 * TAIL_LOG) * size
        return -size * size / 2.0 - r, size * size / 2.0 + r
    reach = (beta * TAIL_LOG) ** (1.0 / beta)
    lo, hi = loss(np.array([-reach, size + reach]), size, beta)
    return float(lo), float(hi)


def _factor_laws(kind: str, size: float, beta: float, hc: float) -> Tuple[Law, Law, Law, Law]:
    r"""(lo_q, lo_p, hi_q, hi_p) of one factor (Lemma A2). From survival bounds S⁻ ≤ S ≤ S⁺ at v_j = j·h_c, made
    monotone (a running min of S⁻ from the left, a running max of S⁺ from the right: both still bounds, S being
    non-increasing): the lower law puts S⁻_j − S⁻_{j+1} at v_j (ℓ rounded down; the top cell takes S⁻ of the top,
    the mass below v_0 is dropped), so its survival at every v is ≤ the exact one; the upper law puts S⁺_j − S⁺_{j+1}
    at v_{j+1}, 1 − S⁺_0 at v_0 and S⁺ of the top at +∞, so its survival is ≥ the exact one."""
    lo, hi = _factor_range(kind, size, beta)
    j_lo, j_hi = int(math.floor(lo / hc)) - 1, int(math.ceil(hi / hc)) + 1
    v = np.arange(j_lo, j_hi + 1) * hc
    laws = []
    for s_lo, s_hi in _survival_bounds(kind, size, beta, v):
        s_lo = np.minimum.accumulate(s_lo)
        s_hi = np.maximum.accumulate(s_hi[::-1])[::-1]
        m_lo = np.append(s_lo[:-1] - s_lo[1:], s_lo[-1])
        m_hi = np.concatenate([[max(1.0 - s_hi[0], 0.0)], s_hi[:-1] - s_hi[1:]])
        laws.append((Law(j_lo, m_lo), Law(j_lo, m_hi, float(s_hi[-1]))))
    (lq, hq), (lp, hp) = laws
    return lq, lp, hq, hp


def _trim(law: Law, upper: bool) -> Law:
    """Cut both ends of mass ≤ TRIM: lower laws drop them (survival only falls); upper laws move the bottom end onto
    the first atom kept (up) and the top end to +∞ (survival only rises)."""
    m = law.m
    c = np.cumsum(m)
    lo = int(np.searchsorted(c, TRIM, side="right"))
    r = np.cumsum(m[::-1])
    hi = len(m) - int(np.searchsorted(r, TRIM, side="right"))
    lo = min(lo, max(hi - 1, 0))
    hi = max(hi, lo + 1)
    out = m[lo:hi].copy()
    rho = law.rho
    if upper:
        out[0] += float(c[lo - 1]) * (1.0 + 4.0 * len(m) * _U) if lo > 0 else 0.0
        rho += float(r[len(m) - hi - 1]) * (1.0 + 4.0 * len(m) * _U) if hi < len(m) else 0.0
    return Law(law.j0 + lo, out, rho)


#: tilts e^{λℓ} under which the products are also convolved (:func:`_convolve`)
TILTS = (0.0, 1.0, -1.0)


def _convolve(a: Law, b: Law, upper: bool, hc: float) -> Law:
    r"""The law of the sum of independent a and b: FFT convolution with its round-off bound taken off every mass
    and clipped at 0 (lower: every mass ≤ the exact product's) or added (upper); the upper sum's mass at +∞ ≤ ρ_a +
    ρ_b. The bound E_λ of :func:`.checks.fft_convolution_error` is absolute, so read plainly it is ~10⁻¹⁷ in every
    one of ~10⁶ cells, far above the exact masses in the tails (the upper law of ten coordinates at β = 3 carried
    3·10⁻⁹ beyond ℓ = 20 instead of 3·10⁻¹⁴). Tilting commutes with convolution, (a e^{λv}) * (b e^{λv}) = (a * b)
    e^{λv}, so each cell takes the value of the tilt λ ∈ TILTS whose error E_λ·e^{−λv} is least there, plus the
    tilts' own rounding: the factors e^{±λv} carry ≤ (|λv| + 4)u each, ≤ 4(|λ|·max|v| + 4)u of the value in all."""
    n = len(a.m) + len(b.m) - 1
    nf = sfft.next_fast_len(n, real=True)
    va = (a.j0 + np.arange(len(a.m))) * hc
    vb = (b.j0 + np.arange(len(b.m))) * hc
    v = (a.j0 + b.j0 + np.arange(n)) * hc
    vmax = float(max(np.max(np.abs(va)), np.max(np.abs(vb)), np.max(np.abs(v))))
    grow = 1.0 + 4.0 * (len(a.m) + len(b.m)) * _U  # the norms below, computed, rounded up
    val = err = None
    for lam in TILTS:
        ta, tb = (a.m, b.m) if lam == 0.0 else (a.m * np.exp(lam * va), b.m * np.exp(lam * vb))
        out = sfft.irfft(sfft.rfft(ta, nf) * sfft.rfft(tb, nf), nf)[:n]
        e = fft_convolution_error(np.linalg.norm(ta) * grow, np.sum(ta) * grow, np.linalg.norm(tb) * grow,
                                  np.sum(tb) * grow, nf)
        if lam != 0.0:
            back = np.exp(-lam * v)
            out = out * back
            e = e * back * (1.0 + 8.0 * _U) + 4.0 * (abs(lam) * vmax + 4.0) * _U * np.abs(out)
        check_finite(out, "product law")
        e = np.broadcast_to(e, out.shape)
        if val is None:
            val, err = out.copy(), e.copy()
        else:
            better = e < err
            val[better], err[better] = out[better], e[better]
    m = val + err if upper else np.maximum(val - err, 0.0)
    return _trim(Law(a.j0 + b.j0, np.maximum(m, 0.0), a.rho + b.rho if upper else 0.0), upper)


def _power(law: Law, n: int, upper: bool, hc: float) -> Law:
    """law^{*n} by repeated squaring."""
    out, base = None, law
    while n:
        if n & 1:
            out = base if out is None else _convolve(out, base, upper, hc)
        n >>= 1
        if n:
            base = _convolve(base, base, upper, hc)
    return out


def shape_laws(shape: Shape, beta: float, hc: float) -> ShapeLaws:
    """The shape's four laws (Lemma A2): each factor's laws (:func:`_factor_laws`), powers and products."""
    acc: Optional[List[Law]] = None
    factors = [("gg", a, n) for a, n in shape.coords] + ([("gauss", shape.gauss, 1)] if shape.gauss > 0 else [])
    for kind, size, n in factors:
        lq, lp, hq, hp = _factor_laws(kind, size, beta, hc)
        cur = [_power(_trim(x, u), n, u, hc) for x, u in ((lq, False), (lp, False), (hq, True), (hp, True))]
        acc = cur if acc is None else [_convolve(x, y, u, hc) for x, y, u in zip(acc, cur, (False, False, True, True))]
    return ShapeLaws(shape, hc, *acc)


# --- one subsampled step on the t grid -------------------------------------------------------------------------

def _g(v: np.ndarray, q: float) -> np.ndarray:
    """g(v) = log(1 − q + qe^v): log1p(q·expm1(v)), and v + log q + log1p((1 − q)/q·e^{−v}) above 700."""
    big = v > 700.0
    with np.errstate(divide="ignore"):  # q = 1, v far below: log(0) = −∞, the loss of that mass (dropped or moved up)
        out = np.log1p(q * np.expm1(np.minimum(v, 700.0)))
    out[big] = v[big] + math.log(q) + np.log1p((1.0 - q) / q * np.exp(-v[big]))
    return out


def step_atoms(laws: ShapeLaws, q: float, direction: str, upper: bool) -> Tuple[np.ndarray, np.ndarray, float]:
    r"""(u, mass, ρ): atoms of a step's loss law L, below the exact law (lower: P(L' ≥ u) ≤ P(L ≥ u) at every u) or
    above it (upper, ρ at +∞); Lemma A3. remove: L = g(ℓ) with ℓ ~ (1 − q)·law_Q + q·law_P (g increasing); add: L =
    −g(ℓ_Q) with ℓ_Q read as −ℓ_P (the pair's symmetry), so the lower (upper) law of ℓ_P gives the lower (upper)
    law of L; its +∞ atom maps to L = −log(1 − q). Each u is moved by 10⁻¹²(1 + |u| + |v|) in the safe direction
    (the rounding of g)."""
    hc = laws.hc
    if direction == "remove":
        a, b = (laws.hi_q, laws.hi_p) if upper else (laws.lo_q, laws.lo_p)
        j0 = min(a.j0, b.j0)
        n = max(a.j0 + len(a.m), b.j0 + len(b.m)) - j0
        m = np.zeros(n)
        m[a.j0 - j0:a.j0 - j0 + len(a.m)] += (1.0 - q) * a.m
        m[b.j0 - j0:b.j0 - j0 + len(b.m)] += q * b.m
        m = m * (1.0 + 2.0 * _U) if upper else m * (1.0 - 2.0 * _U)
        v = (j0 + np.arange(n)) * hc
        u = _g(v, q)
        rho = ((1.0 - q) * a.rho + q * b.rho) * (1.0 + 2.0 * _U) if upper else 0.0
    elif direction == "add":
        b = laws.hi_p if upper else laws.lo_p
        v = -(b.j0 + np.arange(len(b.m))) * hc
        u = -_g(v, q)
        m = b.m.copy()
        rho = 0.0
        if upper and b.rho > 0.0:
            if q < 1.0:
                u = np.append(u, -math.log1p(-q))
                m = np.append(m, b.rho)
            else:  # L = −g(−∞) = +∞
                rho = b.rho
    else:
        raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")
    margin = 1e-12 * (1.0 + np.abs(u) + np.abs(np.resize(v, u.shape)))
    keep = m > 0.0
    return (u + margin if upper else u - margin)[keep], m[keep], rho


# --- settings ---------------------------------------------------------------------------------------------

def family(setting: str, sigma: float, rest: str = "limit") -> Tuple[float, float, List[Shape]]:
    r"""(β, p, shapes) of a setting (units of the noise scale, m = 1/σ). ``rest``: "limit" (the Gaussian factor,
    Lemma A5) or an integer k (the rest spread equally over k real coordinates)."""
    m = 1.0 / sigma

    def beside(a: float, beta: float, p: float) -> Shape:
        rest_p = (m ** p - (a * m) ** p)  # the rest's p-mass
        if rest == "limit":  # p = 2 only: the 2-mass of the rest
            return Shape(f"{a:g}m + limit", ((a * m, 1),), math.sqrt(fisher_information(beta) * rest_p))
        k = int(rest)
        return Shape(f"{a:g}m + {k} x", ((a * m, 1), ((rest_p / k) ** (1.0 / p), k)))

    if setting == "item3":
        beta, p = 1.5, 2.0
        si = math.sqrt(fisher_information(beta))
        shapes = [Shape("limit", (), si * m), Shape("one", ((m, 1),))]
        shapes += [beside(a, beta, p) for a in (0.3, 0.5, 0.7, 0.9)]
    elif setting == "item1":
        beta, p = 2.5, 2.0
        si = math.sqrt(fisher_information(beta))
        shapes = [Shape("one", ((m, 1),)), Shape("two", ((m / math.sqrt(2.0), 2),)), Shape("limit", (), si * m)]
        shapes += [beside(a, beta, p) for a in (0.5, 0.7, 0.9)]
    elif setting == "item2":
        beta = p = 3.0
        d = 10
        shapes = [Shape(f"equal k={k}", ((m * k ** (-1.0 / p), k),)) for k in range(1, d + 1)]
        for c in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
            thin = m * ((1.0 - c ** p) / (d - 1)) ** (1.0 / p)
            shapes.append(Shape(f"{c:g}m + thin", ((c * m, 1), (thin, d - 1))))
    else:
        raise ValueError(f"unknown setting {setting!r}")
    return beta, p, shapes


def kernels_for(shapes: Sequence[Shape], beta: float, q: float, grid: Grid, hc: float,
                ) -> Dict[str, List[Kernel]]:
    """Both directions' kernels of every shape."""
    out: Dict[str, List[Kernel]] = {"remove": [], "add": []}
    for s in shapes:
        laws = shape_laws(s, beta, hc)
        for dirn in ("remove", "add"):
            out[dirn].append(make_kernel(s.label, step_atoms(laws, q, dirn, False), step_atoms(laws, q, dirn, True),
                                         grid))
    return out


def run_schedule(rec: Recursion, steps: int, schedule: Optional[Sequence[int]] = None) -> np.ndarray:
    """T steps: the adaptive max (``schedule`` None) or kernel schedule[s] at step s; returns, for the adaptive
    recursion, how often each kernel set W⁻ over the steps at the grid points t ∈ [0, t_max)."""
    rec.start()
    uses = np.zeros(len(rec.kernels), dtype=np.int64)
    for s in range(steps):
        arg = rec.step(None if schedule is None else [schedule[s]])
        if schedule is None:
            uses += np.bincount(arg[rec.grid.i0:], minlength=len(rec.kernels))
    return uses


def _eps_both(recs: Dict[str, Recursion], delta: float) -> Tuple[float, float, float, str]:
    """(ε⁻, ε⁺, the interpolated diagnostic, per direction) over the directions computed (the add/remove ε is the
    larger of the two: one direction's ε⁻ is already a lower bound)."""
    per = {d: recs[d].epsilon(delta) + (recs[d].epsilon_interpolated(delta),) for d in recs}
    txt = "; ".join(f"{d} {fmt_down(v[0])}/{v[2]:.5f}" for d, v in per.items())
    return (max(v[0] for v in per.values()), max(v[1] for v in per.values()), max(v[2] for v in per.values()), txt)


def run_setting(setting: str, sigma: float, q: float, steps: int, delta: float, h: float, hc: float, t_min: float,
                t_max: float, fractions: Sequence[float], mix_pairs: int, rest: str, adaptive: bool = True,
                directions: Sequence[str] = ("remove", "add"), out=sys.stdout) -> Dict:
    """Print and return the fixed shapes, mixtures of the worst pairs and the adaptive recursion (ε⁻ a rigorous
    lower bound where every shape is one of the ball; ε⁺ the family's upper end, a diagnostic)."""
    beta, p, shapes = family(setting, sigma, rest)
    grid = Grid.around(h, t_min, t_max)
    t0 = time.process_time()
    ker = kernels_for(shapes, beta, q, grid, hc)
    recs = {d: Recursion(ker[d], grid) for d in directions}
    print(f"{setting}: beta {beta:g}, p {p:g}, sigma {sigma:g}, q {q:g}, T {steps}, delta {delta:g}; grid h {h:g} on "
          f"[{grid.t[0]:.3f}, {grid.t[-1]:.3f}] ({grid.n} points), h_c {hc:g}; "
          f"kernels {time.process_time() - t0:.1f} s",
          file=out)
    res: Dict = {"fixed": {}, "mix": {}, "setting": setting}
    print("| schedule | eps lower (rigorous) | eps upper (this family, diagnostic) | interpolated (diagnostic) |"
          " per direction: lower/interpolated | CPU s |\n|---|---|---|---|---|---|", file=out)
    for i, s in enumerate(shapes):
        t1 = time.process_time()
        for d in recs:
            run_schedule(recs[d], steps, [i] * steps)
        e = _eps_both(recs, delta)
        res["fixed"][s.label] = e
        print(f"| fixed: {s.label} | {fmt_down(e[0])} | {fmt_up(e[1])} | {e[2]:.5f} | {e[3]} |"
              f" {time.process_time() - t1:.0f} |", file=out)
        out.flush()
    order = sorted(range(len(shapes)), key=lambda i: -res["fixed"][shapes[i].label][0])
    top = order[:mix_pairs + 1] if mix_pairs else []
    pairs = [(a, b) for x, a in enumerate(top) for b in top[x + 1:]]
    for a, b in pairs:
        for f in fractions:
            na = int(round(f * steps))
            t1 = time.process_time()
            for d in recs:
                run_schedule(recs[d], steps, [a] * na + [b] * (steps - na))
            e = _eps_both(recs, delta)
            res["mix"][(shapes[a].label, shapes[b].label, f)] = e
            print(f"| mixture: {f:g}·T {shapes[a].label}, rest {shapes[b].label} | {fmt_down(e[0])} | {fmt_up(e[1])} |"
                  f" {e[2]:.5f} | {e[3]} | {time.process_time() - t1:.0f} |", file=out)
            out.flush()
    if adaptive:
        t1 = time.process_time()
        uses = {d: run_schedule(recs[d], steps) for d in recs}
        e = _eps_both(recs, delta)
        res["adaptive"] = e
        res["uses"] = uses
        print(f"| adaptive (max over {len(shapes)} shapes per state) | {fmt_down(e[0])} | {fmt_up(e[1])} |"
              f" {e[2]:.5f} | {e[3]} | {time.process_time() - t1:.0f} |", file=out)
        for d in recs:
            tot = max(int(uses[d].sum()), 1)
            used = ", ".join(f"{shapes[i].label} {uses[d][i] / tot:.2f}" for i in np.argsort(-uses[d]) if uses[d][i])
            print(f"  {d}: the shape that sets W- (share of grid points t >= 0 over the steps): {used}", file=out)
    best_fixed = max(res["fixed"].values(), key=lambda e: e[0])
    res["best_fixed"] = best_fixed
    return res


def library_pair(shape: Shape, beta: float, p: float, h: float = 0.005):
    r"""The library's dominating pair of a shape (for the envelope's PRV, an upper-side object): one coordinate the
    exact :class:`.gg_pair.GGPair`, n equal ones :func:`.spreads.exact_spread_pair` (noise multiplier n^{−1/p}/a), the
    Gaussian factor GGPair(s, 2), a product by :func:`.discrete.compose_aligned` of the factors' envelope pairs on a
    loss grid of step h (the one coordinate's tail width of ``ABOVE_TWO_SPEC`` above β = 2, ±10 below)."""
    from opacus_gg.accountants import ball_prv
    from opacus_gg.accountants.discrete import compose_aligned
    from opacus_gg.accountants.gg_pair import GGPair
    from opacus_gg.accountants.spreads import exact_spread_pair

    factors = [GGPair(a, beta) if n == 1 else exact_spread_pair(n ** (-1.0 / p) / a, beta, n, p)
               for a, n in shape.coords]
    if shape.gauss > 0:
        factors.append(GGPair(shape.gauss, 2.0))
    if len(factors) == 1:
        return factors[0]
    big = max([a for a, _ in shape.coords] + [shape.gauss])
    half = ball_prv.ABOVE_TWO_SPEC.half_width_at(big, beta) if beta > 2.0 else 10.0 * max(big, 1.0)
    t = np.arange(-int(math.ceil(half / h)), int(math.ceil(half / h)) + 1) * h
    out = None
    for f in factors:
        f = f if not isinstance(f, GGPair) else ball_prv.envelope_pair([f], t)[0]
        out = f if out is None else compose_aligned(out, f)
    return out


def envelope_epsilon(setting: str, sigma: float, q: float, steps: int, delta: float, rest: str = "limit") -> float:
    """The PRV ε (upper end, max over directions) of the envelope pair of the family's shapes composed T times by
    the library: every per-step dominating pair of the family is above it (the floor of the table route, "A
    PRV-level Base: the ceiling, measured"); an upper-side object, NOT a bound on the truth."""
    from opacus_gg.accountants.api import _compose_tight, _validate_errors
    from opacus_gg.accountants.history import PairSegment

    beta, p, shapes = family(setting, sigma, rest)
    pairs = tuple((s.label, library_pair(s, beta, p)) for s in shapes)
    eps_error, delta_error = _validate_errors(delta, 0.01, None)
    seg = PairSegment(pairs, q, steps, 0.0)
    return max(_compose_tight([seg], delta, d, eps_error, delta_error).epsilon_upper for d in ("remove", "add"))


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, hlp in (("run", "one setting: fixed shapes, mixtures, the adaptive recursion"),
                      ("grid", "the adaptive recursion (and the worst fixed shape) at several grid spacings h"),
                      ("envelope", "the PRV of the family's envelope pair (upper-side; the library's composition)")):
        r = sub.add_parser(name, help=hlp)
        r.add_argument("--setting", default="item3", choices=["item3", "item1", "item2"],
                       help="item3: beta 1.5, p 2; item1: beta 2.5, p 2; item2: beta = p = 3, d = 10 (default item3)")
        r.add_argument("--sigma", type=float, default=1.0)
        r.add_argument("--q", type=float, default=0.01)
        r.add_argument("--steps", type=int, default=1000)
        r.add_argument("--delta", type=float, default=1e-5)
        r.add_argument("--rest", default="limit", help="'limit' (Gaussian factor, p = 2) or k coordinates")
        if name == "envelope":
            continue
        r.add_argument("--hc", type=float, default=2e-5, help="the loss grid of the shapes' laws (default 2e-5)")
        r.add_argument("--t-min", type=float, default=-8.0, help="grid start (default -8)")
        r.add_argument("--t-max", type=float, default=8.0, help="grid end (default 8)")
        r.add_argument("--directions", nargs="+", default=["remove", "add"], choices=["remove", "add"],
                       help="directions composed (default both; one alone still gives a lower bound)")
        if name == "run":
            r.add_argument("--h", type=float, default=2e-3, help="grid spacing of V (default 2e-3)")
            r.add_argument("--fractions", type=float, nargs="*", default=[0.25, 0.5, 0.75])
            r.add_argument("--mix-pairs", type=int, default=2, help="mix the pairs among the worst n+1 fixed shapes")
            r.add_argument("--no-adaptive", action="store_true")
        else:
            r.add_argument("--h", type=float, nargs="+", default=[8e-3, 4e-3, 2e-3])
    a = ap.parse_args(argv)
    if a.cmd == "envelope":
        e = envelope_epsilon(a.setting, a.sigma, a.q, a.steps, a.delta, a.rest)
        print(f"{a.setting}: envelope of the family's pairs, PRV eps (upper end; NOT a bound on the truth) {fmt_up(e)}")
    elif a.cmd == "run":
        run_setting(a.setting, a.sigma, a.q, a.steps, a.delta, a.h, a.hc, a.t_min, a.t_max, a.fractions,
                    a.mix_pairs, a.rest, not a.no_adaptive, a.directions)
    else:
        for h in a.h:
            run_setting(a.setting, a.sigma, a.q, a.steps, a.delta, h, a.hc, a.t_min, a.t_max, (), 0, a.rest, True,
                        a.directions)


if __name__ == "__main__":
    main()
