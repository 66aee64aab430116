r"""Composition by the per-state maximum over a family of one-step pairs (docs/accounting.md, "The family
maximum: adaptive choices among dominating pairs", Lemmas A1, A4 and M1).

For one-step PLDs ω_1 … ω_K of one direction (the law of the loss L under the first member, mass ρ_k at +∞),

    V_0(t) = (1 − e^t)_+,    V_s(t) = max_k E_{ω_k}[V_{s−1}(t − L)] + ρ_k,

is the largest H_{e^t} of an s-step transcript whose step pairs an adversary picks among the K after seeing the
outputs so far (Lemma A1), and ε(δ) = inf{t : V_T(t) ≤ δ}. Where every mechanism of a step is dominated (in both
orientations) by some member, the transcript's H_{e^t} is at most V_T(t) (Lemma M1): the family's maximum is a
dominating bound that composes the members' curves one state at a time instead of their envelope, which dominates
every member at every α at once (Lemma T2) and so costs more under composition.

V lives on the grid t_i = (i − i0)·h. :class:`Recursion` keeps an upper end W⁺ ≥ V (each step's atoms split between
their two grid neighbours by the chord, FFT round-off added) and, for the research tool
``benchmarks/adaptive_worst.py``, a lower end W⁻ ≤ V (atoms contracted onto the grid, round-off taken off).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence, Tuple

import numpy as np
from scipy import fft as sfft

from .checks import UNIT_ROUNDOFF, AccountingError, check_finite, fft_convolution_error
from .discretization import ctd_pmf, hull_tolerance
from .history import PairSegment
from .profile import one_step_delta

__all__ = ["Grid", "Kernel", "contract_to_grid", "make_kernel", "Recursion", "FAMILY_MAX_CONVOLUTIONS", "FAMILY_RELATIVE_MESH",
           "FAMILY_EPSILON_FLOOR", "family_refusal", "family_applies", "member_kernel", "family_epsilon"]

_U = UNIT_ROUNDOFF
_ULD = float(np.finfo(np.longdouble).eps) / 2.0


@dataclasses.dataclass
class Grid:
    """t_i = (i − i0)·h, i = 0 … n − 1 (t = 0 is a grid point; t_0 < 0 < t_{n−1})."""

    h: float
    i0: int
    n: int

    @classmethod
    def around(cls, h: float, t_min: float, t_max: float) -> "Grid":
        i0 = int(math.ceil(-t_min / h))
        return cls(h, i0, i0 + int(math.ceil(t_max / h)) + 1)

    @property
    def t(self) -> np.ndarray:
        return (np.arange(self.n) - self.i0) * self.h


@dataclasses.dataclass
class Kernel:
    r"""A step's atoms on the grid (Lemma A4): lower weights ``lo`` (a law on the grid points, below the atoms in
    the decreasing convex order) and upper weights ``hi`` (each atom split between its two grid neighbours by the
    chord) and the upper mass ``rho`` at +∞, on cell indices jmin … jmin + len − 1 (cell j: loss j·h)."""

    label: str
    jmin: int
    lo: np.ndarray
    hi: np.ndarray
    rho: float

    @property
    def jmax(self) -> int:
        return self.jmin + len(self.lo) - 1


def contract_to_grid(u: np.ndarray, m: np.ndarray, h: float) -> Tuple[np.ndarray, np.ndarray]:
    r"""(cells, masses): a law ν on the losses j·h with E_ν ψ(e^{−L}) ≤ Σ_a m_a ψ(e^{−u_a}) for every convex
    non-increasing ψ ≥ 0 (Lemma A4). In x = e^{−u}, the atoms, sorted by decreasing x, are cut into groups of
    consecutive atoms; each group's mass goes to the largest grid point x_j = e^{−jh} ≥ its barycentre b (Jensen in
    the group, then x moved up: ψ non-increasing). Any cut is valid; the cut chosen closes a group as soon as its
    barycentre falls to the grid point at or below its first atom, so a group spans about two cells and the loss is
    O(h²) (rounding each atom down to its cell would lose O(h) per step). The barycentre is summed afresh per group
    (non-negative terms: relative error ≤ (n + 4)u, n its atoms) and the cell taken below log(1/b) by that margin."""
    order = np.argsort(u, kind="stable")
    u, m = u[order], m[order]
    x = np.exp(-u)
    cm = np.concatenate([[0.0], np.cumsum(m.astype(np.longdouble))])
    cs = np.concatenate([[0.0], np.cumsum((m * x).astype(np.longdouble))])
    n = len(u)
    cuts = [0]
    s = 0
    while s < n:
        g = math.exp(-math.ceil(u[s] / h) * h)  # the grid point at or below x[s]
        # Φ(e) = S(e) − g·C(e) rises while x ≥ g and falls after; close at the first e with Φ(e) ≤ Φ(s)
        p = int(np.searchsorted(u, -math.log(g), side="right"))  # first atom with x < g (u > log(1/g))
        p = max(p, s + 1)
        target = cs[s] - g * cm[s]
        lo, hi = p, n
        if cs[n] - g * cm[n] > target:
            e = n  # never closes: the leftover group (the high-loss end)
        else:
            while lo < hi:  # first e in [p, n] with Φ(e) ≤ target (Φ falls on [p, n])
                mid = (lo + hi) // 2
                if cs[mid] - g * cm[mid] <= target:
                    hi = mid
                else:
                    lo = mid + 1
            e = lo
        cuts.append(e)
        s = e
    cuts = np.array(cuts[:-1])
    cnt = np.diff(np.append(cuts, n))
    mass = np.add.reduceat(m, cuts)
    mom = np.add.reduceat(m * x, cuts)
    keep = mass > 0
    mass, mom, cnt = mass[keep], mom[keep], cnt[keep]
    lb = -np.log(mom / mass)  # log(1/b)
    lb = lb - (2.0 * cnt + 16.0) * _U * (1.0 + np.abs(lb)) - 1e-12 * (1.0 + np.abs(lb))
    cells = np.floor(lb / h).astype(np.int64)
    return cells, mass * (1.0 - (cnt + 4.0) * _U)


def make_kernel(label: str, lower: Optional[Tuple[np.ndarray, np.ndarray, float]],
                upper: Tuple[np.ndarray, np.ndarray, float], grid: Grid) -> Kernel:
    r"""The kernel of a step on the grid's spacing h, over the loss window [−W, W] (W ≈ the grid's width): lower
    atoms beyond W are moved down to W (their loss only falls), below −W dropped (sub-probability), then contracted
    onto the grid (:func:`contract_to_grid`); upper atoms beyond W go to +∞ (ρ), below −W are moved up to −W, and
    each is split between its grid neighbours by the chord: θ(r) = (e^{−r} − e^{−h})/(1 − e^{−h}) on the lower cell
    (loss kh), 1 − θ on the next, r = u − kh; θ rounded down (the chord's weight moves to the larger V)."""
    h = grid.h
    span = grid.n + 1
    if lower is None:  # the upper end only (:class:`Recursion` with ``upper_only``): no lower weights
        k, w = np.zeros(0, dtype=np.int64), np.zeros(0)
    else:
        u, m, _ = lower
        keep = u >= -span * h
        u, m = np.minimum(u[keep], span * h), m[keep]
        k, w = contract_to_grid(u, m, h)
    up, mp, rho = upper
    kp = np.floor(up / h)
    far = kp >= span
    rho = rho + float(np.sum(mp[far])) * (1.0 + len(mp) * _U)
    up, mp, kp = up[~far], mp[~far], kp[~far]
    if kp.size == 0:  # every atom beyond the window (its mass is in ρ): an empty cell keeps the arrays' shape
        up, mp, kp = np.zeros(1), np.zeros(1), np.zeros(1)
    low = kp < -span
    kp[low], up[low] = -span, -span * h
    rp = np.clip(up - kp * h, 0.0, h)
    theta = np.clip((np.exp(-rp) - math.exp(-h)) / -math.expm1(-h) * (1.0 - 1e-9) - 1e-15, 0.0, 1.0)
    kp = kp.astype(np.int64)
    jmin = int(k.min(initial=kp.min()))  # over both ends' cells (k is empty for the upper end alone)
    jmax = int(k.max(initial=kp.max() + 1))
    n = jmax - jmin + 1
    lo = np.bincount(k - jmin, w, n) * (1.0 - (len(w) + 4) * _U)
    hi = np.bincount(kp - jmin, mp * theta, n) + np.bincount(kp + 1 - jmin, mp * (1.0 - theta), n)
    hi = hi * (1.0 + (len(mp) + 4) * _U)  # bincount's sums of non-negative terms, rounded up
    return Kernel(label, jmin, lo, hi, rho)


# --- the recursion ------------------------------------------------------------------------------------------

class Recursion:
    r"""V_s on the grid, lower (W⁻) and upper (W⁺) ends, for kernels of one direction (Lemmas A1, A4).

    Layout: every kernel on cells J_min … J_max; the extended arrays hold grid indices −J_max … n − 1 − J_min, the
    fallbacks outside 0 … n − 1 (lower: R = 0, i.e. V ≥ B; upper: R = 1 − B below, W⁺_{n−1} above); the
    convolution's entry i + J_max − J_min is Σ_j w_j·X_{i−j}, computed as a circular convolution of the length-lw
    extended array (it reads no wrapped entry there; the FFT round-off bound, Lemma R3(b), holds for any length), one
    batched transform for all kernels per end. ``upper_only``: W⁺ alone (W⁻ stays B, the trivial
    lower end), at half the FFTs, and below the grid the chord in α = e^t from (0, 1) to (e^{t_0}, W⁺_0) instead of 1:
    V is convex in α with V = 1 at α = 0, so V(t) ≤ 1 − e^{t − t_0}(1 − W⁺_0) for t < t_0 (tight where V ≈ B: its
    excess over B is at most W⁺_0 − B(t_0)), which lets the grid start at t_0 = −1."""

    def __init__(self, kernels: Sequence[Kernel], grid: Grid, upper_only: bool = False):
        self.grid, self.kernels, self.upper_only = grid, list(kernels), upper_only
        self.jmin = min([0] + [k.jmin for k in kernels])
        self.jmax = max([0] + [k.jmax for k in kernels])
        self.lk = self.jmax - self.jmin + 1
        self.lw = grid.n + self.jmax - self.jmin
        # the entries read, off … off + n − 1 (off = J_max − J_min), take X at extended indices i + off − a ∈ [0, lw − 1]
        # for every kernel cell a ∈ [0, lk − 1]: a circular convolution of any length ≥ lw never wraps onto them, so
        # the FFT needs lw points, not the linear convolution's lw + lk − 1
        self.nf = sfft.next_fast_len(self.lw, real=True)
        self.t = grid.t
        self.b = -np.expm1(np.minimum(self.t, 0.0))  # B(t_i) = (1 − e^{t_i})_+
        t_ext = (np.arange(-self.jmax, grid.n - self.jmin) - grid.i0) * grid.h
        self.below = np.minimum(np.exp(np.minimum(t_ext, 0.0)), 1.0)[:self.jmax]  # 1 − B = e^t below the grid
        # upper_only: R = V − B ≤ e^t − e^{t − t_0}(1 − W⁺_0) = e^t·(1 − e^{−t_0}(1 − W⁺_0)) below the grid (t < t_0 < 0)
        self._e_below = self.below * math.exp(-float(self.t[0])) if upper_only else None
        # per end (lower, upper), the kernels stacked: spectra (K × nf/2 + 1), ℓ2 and ℓ1 norms (rounded up), and the
        # exactly summed B part with its error bound (K × n)
        self.ends = {}
        for end in (("hi",) if upper_only else ("lo", "hi")):
            full = np.zeros((len(self.kernels), self.lk))
            l2, l1, val, err = [], [], [], []
            for i, k in enumerate(self.kernels):
                w = getattr(k, end)
                full[i, k.jmin - self.jmin:k.jmin - self.jmin + len(w)] = w
                grow = 1.0 + 4.0 * len(w) * _U
                l2.append(float(np.linalg.norm(w)) * grow)
                l1.append(float(np.sum(w)) * grow)
                v, e = self._exact_b(w, k.jmin)
                val.append(v)
                err.append(e)
            spectra = sfft.rfft(full, self.nf, axis=-1) if self.kernels else np.zeros((0, self.nf // 2 + 1), complex)
            val, err = np.array(val).reshape(-1, grid.n), np.array(err).reshape(-1, grid.n)
            if end == "hi":  # (the B part + its error + ρ), rounded up
                rho = np.array([k.rho for k in self.kernels]) * (1.0 + 2.0 * _U)
                const = val + err + rho[:, None]
            else:  # the B part − its error, rounded down
                const = val - err
            self.ends[end] = (spectra, np.array(l2), np.array(l1), const)
        self.start()

    def _exact_b(self, w: np.ndarray, jmin: int) -> Tuple[np.ndarray, np.ndarray]:
        r"""(Σ_j w_j B(t_{i−j}), its error bound) for every grid i: with t_{i−j} < 0 ⟺ j > i − i0, the sum is
        Σ_{j ≥ j*} w_j − e^{t_i}Σ_{j ≥ j*} w_j e^{−jh}, j* = i − i0 + 1 (suffix sums in long double; each of the
        two sums errs by ≤ (n + 2)u_ld times itself, the difference and its rounding to float64 by 2u more)."""
        g, h = self.grid, self.grid.h
        jj = jmin + np.arange(len(w))
        wl = w.astype(np.longdouble)
        c1 = np.concatenate([np.cumsum(wl[::-1])[::-1], [0.0]]).astype(np.longdouble)
        c2 = np.concatenate([np.cumsum((wl * np.exp(-jj.astype(np.longdouble) * h))[::-1])[::-1], [0.0]])
        start = np.clip(np.arange(g.n) - g.i0 + 1 - jmin, 0, len(w))
        a = c1[start]
        b = np.exp(np.longdouble(h) * (np.arange(g.n) - g.i0)) * c2[start]
        val = np.maximum(a - b, 0.0).astype(np.float64)
        err = ((len(w) + 8) * _ULD * (a + b)).astype(np.float64) + 4.0 * _U * val + 1e-300
        return val, err

    def start(self) -> None:
        """W⁻ = W⁺ = V_0 = B."""
        self.lo = self.b.copy()
        self.hi = self.b.copy()
        self.steps = 0

    def _ext(self, inner: np.ndarray, below: np.ndarray, above: float) -> np.ndarray:
        out = np.empty(self.lw)
        out[:self.jmax] = below
        out[self.jmax:self.jmax + self.grid.n] = inner
        out[self.jmax + self.grid.n:] = above
        return out

    def step(self, which: Optional[Sequence[int]] = None, clamp: bool = True, track: bool = True
             ) -> Optional[np.ndarray]:
        r"""One step: W⁻ ← max_k [lo_k * W⁻] − errors, W⁺ ← max_k [hi_k * W⁺ + ρ_k] + errors (k over ``which``, default
        all; * the convolution Σ_j w_j·W_{i−j}, with B's part summed directly), then the facts every V_s has (Lemma
        A1): V_s ≥ V_{s−1} ≥ B, V ≤ 1, non-increasing in t (``clamp=False``: not applied, so that the recursion is
        the bare composition formula, for its test). Returns the index of the kernel that set W⁻ (``upper_only``: W⁺)
        at each grid point (``track=False``: None, and not computed)."""
        n, off = self.grid.n, self.jmax - self.jmin
        which = None if which is None else np.asarray(which, dtype=np.int64)
        below = self.below
        if self.upper_only and self.t[0] < 0.0:  # the chord below the grid; its terms are ≤ e^t each and carry a
            # few roundings (exp, the products; 1 − W⁺_0 is exact for W⁺_0 ≥ B(t_0) ≥ 1/2), so 16u·e^t absolute covers
            # the cancellation where V ≈ B
            below = np.maximum(self.below - self._e_below * (1.0 - float(self.hi[0])), 0.0) + 16.0 * _U * self.below
            below = np.minimum(below, self.below)
        best = {}
        for end in (("hi",) if self.upper_only else ("lo", "hi")):
            x = (self._ext(self.hi - self.b, below, float(self.hi[-1])) if end == "hi"
                 else self._ext(self.lo - self.b, 0.0, 0.0))
            grow = 1.0 + 4.0 * len(x) * _U
            xf = sfft.rfft(x, self.nf)
            x2, x1 = float(np.linalg.norm(x)) * grow, float(np.sum(np.abs(x))) * grow
            spectra, k2, k1, const = self.ends[end]
            if which is not None:
                spectra, k2, k1, const = spectra[which], k2[which], k1[which], const[which]
            prod = spectra * xf
            tot = sfft.irfft(prod, self.nf, axis=-1, overwrite_x=True)[:, off:off + n]
            tot += const  # the B part (± its error; + ρ at the upper end) + the convolution (± its round-off, below)
            err = fft_convolution_error(k2, k1, x2, x1, self.nf)[:, None]
            if end == "hi":
                tot += err
            else:  # the lower end, rounded down
                tot -= err
            check_finite(tot, "recursion (upper)" if end == "hi" else "recursion (lower)")
            best[end] = tot
        arg = None
        if track:
            ids = np.arange(len(self.kernels)) if which is None else which
            arg = ids[np.argmax(best["hi" if self.upper_only else "lo"], axis=0)]
        # the two additions after the transform round to nearest: ≤ 2u of the (non-negative, up to the FFT's noise,
        # which the error term exceeds) summands each, so the upper end is raised and the lower end lowered by 4u
        best_hi = np.max(best["hi"], axis=0) * (1.0 + 4.0 * _U)
        best_lo = None if self.upper_only else np.max(best["lo"], axis=0) * (1.0 - 4.0 * _U)
        if not self.upper_only:  # (upper_only: W⁻ stays B, set by :meth:`start`)
            if clamp:
                lo = np.minimum(np.maximum(np.maximum(best_lo, self.lo), self.b), 1.0)
                self.lo = np.maximum.accumulate(lo[::-1])[::-1]
            else:
                self.lo = best_lo
        if clamp:
            hi = np.maximum(np.minimum(best_hi, 1.0), self.b)
            self.hi = np.minimum.accumulate(hi)
        else:
            self.hi = best_hi
        if np.any(self.lo > self.hi * (1.0 + 1e-9) + 1e-300):
            i = int(np.argmax(self.lo - self.hi))
            raise AccountingError(
                f"lower end above the upper end at t = {self.t[i]:.4f}: {self.lo[i]!r} > {self.hi[i]!r}")
        self.steps += 1
        return arg

    def epsilon(self, delta: float) -> Tuple[float, float]:
        r"""(ε⁻, ε⁺): V(t) > δ for every t ≤ ε⁻ (so ε(δ) ≥ ε⁻, a grid point), V(ε⁺) ≤ δ for the family's value (ε ≤
        ε⁺; between grid points by the chord, as in the recursion)."""
        h, t, lo, hi = self.grid.h, self.t, self.lo, self.hi
        above = np.nonzero(lo > delta)[0]
        if len(above) == 0:
            e_lo = -math.inf
        elif above[-1] == len(t) - 1:
            raise AccountingError("the grid ends before V falls to delta: widen it (t_max)")
        else:
            e_lo = float(t[above[-1]])  # V(t) ≥ W⁻(t_{i*}) > δ for every t ≤ t_{i*}
        below = np.nonzero(hi <= delta)[0]
        if len(below) == 0:
            raise AccountingError("the upper end never falls to delta on the grid: widen it (t_max)")
        i = int(below[0])
        e_hi = t[i]
        if i > 0:  # chord on (t_{i−1}, t_i): θ W⁺_i + (1 − θ)W⁺_{i−1} ≤ δ ⟺ θ ≥ (W⁺_{i−1} − δ)/(W⁺_{i−1} − W⁺_i)
            th = (hi[i - 1] - delta) / (hi[i - 1] - hi[i]) if hi[i - 1] > hi[i] else 1.0
            if th < 1.0:  # θ = (e^{−r} − e^{−h})/(1 − e^{−h}) at t = t_i − r
                r = -math.log(th * -math.expm1(-h) + math.exp(-h))
                e_hi = min(e_hi, t[i] - r * (1.0 - 1e-9) + 1e-12)
        return e_lo, e_hi

    def epsilon_interpolated(self, delta: float) -> float:
        """Diagnostic, NOT a bound: where log W⁻, interpolated linearly between grid points, crosses log δ (finer
        than the grid's ε⁻, for comparing schedules on the same grid)."""
        lo, t = self.lo, self.t
        above = np.nonzero(lo > delta)[0]
        if len(above) == 0 or above[-1] == len(t) - 1:
            return math.nan
        i = int(above[-1])
        if lo[i + 1] <= 0.0:
            return float(t[i])
        a, b = math.log(lo[i]), math.log(lo[i + 1])
        return float(t[i] + (a - math.log(delta)) / (a - b) * self.grid.h)


# --- the family maximum of a ball table (Lemma M1) ------------------------------------------------------------

#: the most step convolutions (steps × members) :func:`family_epsilon` runs; beyond, the envelope's ε alone is
#: published (the recursion is sequential in the steps: T·K FFTs, where the envelope composes by FFT powers; its grid
#: has ≈ 4000 + 4000/ε points at every ε (step ε/2000 over [−1, 2ε + 1]), so the cost is ∝ T·K: measured 1.4–1.5 s
#: per direction at T = 1000, K = 32 on one idle core, the median of 3)
FAMILY_MAX_CONVOLUTIONS = 80_000


#: the recursion's grid step relative to the envelope's ε (not finer than the envelope composition's mesh): the
#: recursion composes the members' connect-the-dots laws exactly on its lattice, so the step only sets how far those
#: laws' chords sit above the profiles; measured (β = 2.5, p = 2, σ = 1, q = 0.01, T = 1000, δ = 1e-5, a coarse table:
#: family ε 5.1811 on the envelope's mesh 1.45e-4, 175 s per direction) h = 0.0025 / 0.005 / 0.01 / 0.02: +0.03 % /
#: +0.12 % / +0.5 % / +2.5 %, 3.9 / 2.0 / 1.3 / 0.9 s (second order in h)
FAMILY_RELATIVE_MESH = 5e-4
#: ε below which the recursion's grid step is no longer refined (FAMILY_RELATIVE_MESH × this)
FAMILY_EPSILON_FLOOR = 0.2


def family_refusal(segs: Sequence) -> Optional[str]:
    """Why :func:`family_epsilon` does not compose ``segs`` (None where it does: one :class:`.history.PairSegment`
    with a family, of at most :data:`FAMILY_MAX_CONVOLUTIONS` step convolutions)."""
    if len(segs) != 1 or not isinstance(segs[0], PairSegment) or not segs[0].members:
        return "not one table segment with a family"
    if segs[0].steps * len(segs[0].members) > FAMILY_MAX_CONVOLUTIONS:
        return f"steps x members above FAMILY_MAX_CONVOLUTIONS = {FAMILY_MAX_CONVOLUTIONS}"
    return None


def family_applies(segs: Sequence) -> bool:
    """Whether :func:`family_epsilon` composes ``segs`` (:func:`family_refusal` says why not)."""
    return family_refusal(segs) is None


def member_kernel(label: str, pairs: Tuple, roundoff: float, sample_rate: float, ts: np.ndarray, direction: str,
                  grid: Grid) -> Kernel:
    r"""One member's subsampled one-step PLD of ``direction`` on ``grid`` (upper end only): the connect-the-dots law
    ω of the member's profile on the aligned points ``ts`` (:func:`.discretization.ctd_pmf`, whose curve is
    ≥ (1 − c) times the values read, Lemma R5(b); the values ≥ (1 − C) times an exact dominating pair's, Lemma T4),
    every mass and ρ divided by 1 − c − C rounded down (H_α is linear in the law, and (1 − c)(1 − C) ≥ 1 − c − C),
    then split onto the grid by the chord (:func:`make_kernel`)."""
    seg = PairSegment(pairs, sample_rate, 1, roundoff)
    dl, rr, _, _ = one_step_delta(seg, ts, direction)
    pmf, rho, c = ctd_pmf(ts, dl, rr, hull_tolerance(seg))
    shrink = 1.0 - c - roundoff - 4.0 * _U
    if not shrink > 0.5:
        raise AccountingError(f"family member {label}: its round-off c + C = {c + roundoff:.3g} is not small")
    keep = pmf > 0.0
    return make_kernel(label, None, (ts[keep], pmf[keep] / shrink, rho / shrink), grid)


def family_epsilon(seg: PairSegment, delta: float, direction: str, h: float, half_width: float,
                   t_max: float) -> float:
    r"""ε⁺ of ``seg``'s steps composed by the per-state maximum over its family (Lemma M1): each member's one-step law
    on the aligned points j·h, |j·h| ≤ ``half_width`` (the loss beyond is the profile's ρ), and the upper end of
    :class:`Recursion` on t_i = i·h ∈ [−1, t_max] (the chord below): the least t with V_T(t) ≤ δ, V_T ≥ the largest
    H_{e^t} over every adaptive choice of shifts the members dominate. AccountingError where W⁺ does not fall to δ
    on the grid (then ``t_max`` was too small). ε ≥ 0 (the smallest ε ≥ 0 with δ(ε) ≤ δ, as every other ε of the
    library: where V_T is already ≤ δ below t = 0 the chord's value is negative, and 0 is then exact)."""
    k = int(math.ceil(half_width / h))
    ts = np.arange(-k, k + 1, dtype=np.float64) * h
    grid = Grid.around(h, -1.0, t_max)
    kernels = [member_kernel(str(i), pairs, c, seg.sample_rate, ts, direction, grid)
               for i, (pairs, c) in enumerate(seg.members)]
    rec = Recursion(kernels, grid, upper_only=True)
    for _ in range(seg.steps):
        rec.step(track=False)
    return max(rec.epsilon(delta)[1], 0.0)
