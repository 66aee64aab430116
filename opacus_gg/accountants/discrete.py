r"""Discrete privacy pairs on a uniform loss grid: dominating discretization, exact products, powers.

:class:`DiscretePair` is a pair supported on a uniform grid of loss values plus atoms at ±∞ (P mass at
+∞, Q mass at −∞). :func:`split_to_grid` turns the exact one-coordinate pair into a discrete pair that
*dominates* it: the "connect the dots" discretization (Doroshenko et al. 2022) of its rounded-up curve, on a coarser
grid where the finest is ill-conditioned, refused where none is well conditioned (docs/accounting.md, Lemma R10).
A product of discrete pairs convolves the loss laws by FFT and puts the FFT's round-off bound into the masses, so each is ≥ the exact product's
(docs/accounting.md, Lemma R7); k-coordinate shapes are built by binary powering (:class:`PowerChain`) with a
dominating re-gridding after every product, the squares that a chain reuses many times in long double (Lemma R8;
:mod:`.spreads` builds the pairs covering every equal spread from these).

Mass normalization (docs/accounting.md, Lemma R6): a pair whose computed law has mass above 1 (round-off, within
the checked budget) has its finite part scaled by s < 1; both its curves are then ≥ s·those before, products
multiply these factors, and the pair's ``roundoff`` C = 1 − Π s (over every normalization in its chain, each as
often as the chain uses it) is divided out of the curves it returns: ``h_pq``/``h_qp`` are upper bounds on the
curves of the same chain computed without normalizations. A P-law short by round-off is scaled up (not filled at
+∞). Without this, a mass error of the k-fold power grows like k times that of one factor (≈ 2·10^{−17} per
coordinate: 1.08·10^{−8} at k = 2^{29}), a Q-law's excess lowers H(P‖Q), and deficits put at +∞ add up to ~10^{−7}.
"""

from __future__ import annotations

import math
from dataclasses import InitVar, dataclass
from typing import List, Optional, Tuple

import numpy as np
from scipy import fft as sp_fft

from .checks import (UNIT_ROUNDOFF, AccountingError, LossBeyondGrid, check_finite, check_pmf, fft_convolution_error,
                     mass_budget)
from .gg_pair import GGPair, _safe_log

__all__ = ["DiscretePair", "split_to_grid", "PowerChain", "power_pair", "compose_aligned", "shape_pair", "tie_mismatch",
           "read_roundoff"]

#: threads for the batched FFTs of the binary powering (2 measured no faster on 2 cores)
_FFT_WORKERS = 1
#: round-off allowed in a discrete pair's mass beyond :func:`.checks.mass_budget`, per construction (every input
#: of a product is normalized to mass ≤ 1, so one product's own round-off: measured ≤ 1e-15, Lemma R6)
PRODUCT_MASS_BUDGET = 1e-12
#: a pair whose accumulated normalization factor C reaches this is refused (AccountingError)
MAX_ROUNDOFF = 1e-4
#: the precision of the chains' reused squares (Lemma R8): long double where it is IEEE-like (x87's 64-bit or IEEE
#: quad's 113-bit significand, rounding to nearest with u = eps/2), else float64 (then only C is larger)
WIDE_DTYPE = np.longdouble if np.finfo(np.longdouble).nmant in (63, 112) else np.float64
#: mass below which tails of convolved laws are cut, kept above floating-point FFT noise (~1e-17 per point)
CUT_MASS = 1e-24


@dataclass
class DiscretePair:
    r"""A pair on loss values ``t0 + j·h`` (j = 0..n−1): P-masses ``omega``, Q-masses ``nu``; plus P mass
    ``p_inf`` at loss +∞ (Q = 0 there) and Q mass ``q_ninf`` at loss −∞ (P = 0 there).

    Validity: ν_j = ω_j e^{−t_j} (up to rounding, which :meth:`h_pq`/:meth:`h_qp` bound, Lemma R7(d)); both laws have
    total mass ≤ 1 (1 up to rounding and what the normalizations, accounted by C, took away).

    ``roundoff`` C (Lemma R6): the mass normalizations of this pair and of every pair it was built from shrink the
    curves by at most the factor 1 − C; :meth:`h_pq` and :meth:`h_qp` return the curves divided by 1 − C.
    """

    t0: float
    h: float
    omega: np.ndarray
    nu: np.ndarray
    p_inf: float
    q_ninf: float
    roundoff: float = 0.0
    #: mass a product added on purpose (its FFT round-off bound, Lemma R7): allowed above 1 besides the round-off
    added_mass: InitVar[float] = 0.0

    def __post_init__(self, added_mass: float) -> None:
        # both laws finite, non-negative and of mass ≤ 1 within the round-off budget (Lemma R2); the inputs of a
        # product are normalized (below), so this is one construction's own round-off, plus what the product added
        if not (added_mass >= 0.0 and math.isfinite(added_mass)):
            raise AccountingError(f"discrete pair: the added round-off mass must be finite and >= 0, got {added_mass!r}")
        budget = mass_budget(self.omega.size) + PRODUCT_MASS_BUDGET + added_mass
        check_pmf(self.omega, "discrete pair (P-law)", mass_budget=budget, inf_mass=self.p_inf)
        check_pmf(self.nu, "discrete pair (Q-law)", mass_budget=budget, inf_mass=self.q_ninf)
        self._normalize(budget)

    def _normalize(self, budget: float) -> None:
        r"""Both laws to mass ≤ 1 without lowering a curve by more than the factor 1 − C (Lemma R6); sums in long
        double (error ≪ u where its mantissa is wider, as on x86-64), so a float64 sum's own rounding is neither
        filled nor scaled away.

        (a) A P-law of mass 1 − d with 0 < d ≤ ``budget`` + C (round-off of the atoms on the grid, and the mass
        earlier scalings (b) freed; mass beyond the grid is the caller's ``p_inf``) has its finite part scaled up by
        f = (1 − p_∞)/Σω: both curves only rise. At +∞, as before, such a d would add d to H(P‖Q) at every α, and
        the powering multiplies these atoms by k (1e-7 at k = 10^9: more than δ = 1e-5 allows at T = 10^5,
        q = 10^{−3}); a larger deficit still goes to +∞.
        (b) A law of mass > 1 (after (a)): the finite part is scaled by s = min((1 − p_∞)/Σω, (1 − q_∞)/Σν); both
        curves are then ≥ s·those before, and C becomes 1 − (1 − C)·s(1 − u) (u: the rounding of the scaled
        masses). The P-mass that scaling frees is not put anywhere (the factor s accounts for it).
        (c) A Q-law of mass < 1 gets the rest at −∞ (callers leave the Q-mass of losses below the grid to this),
        computed first, from the law as given: the scaling (a) then cannot shrink that atom (it would lower
        H(Q‖P)); the Q-excess (a) creates instead is scaled away by (b), which C accounts for.
        C is updated by the net factor g = f·s of the finite part when g < 1 (the atoms at ±∞ are ≥ those given),
        so normalizing a normalized pair again leaves it and its C as they are. A C ≥ :data:`MAX_ROUNDOFF` is refused:
        :class:`LossBeyondGrid` where a law scaled by (b) has more than half its mass at its infinite atom (the loss
        has left the grid, e.g. a product of many far-shifted coordinates), else AccountingError."""
        omega, nu = self.omega, self.nu
        tot_p, tot_q = np.sum(omega, dtype=np.longdouble), np.sum(nu, dtype=np.longdouble)
        self.q_ninf = float(min(max(self.q_ninf, float(1 - tot_q)), 1.0))  # (c), from the law as given
        rest_p, rest_q = 1 - np.longdouble(self.p_inf), 1 - np.longdouble(self.q_ninf)
        deficit = float(rest_p - tot_p)
        f = 1.0
        if tot_p > 0 and 0 < deficit <= budget + self.roundoff:
            # rounded up (a deficit below half an ulp of f would stay behind): the overshoot, < u, is scaled by (b)
            f = max(float(rest_p / tot_p), float(np.nextafter(1.0, 2.0)))
            tot_p, tot_q = tot_p * f, tot_q * f
        elif deficit > 0:
            self.p_inf = float(min(self.p_inf + deficit, 1.0))  # mass the caller left off the grid: at +∞
            rest_p = 1 - np.longdouble(self.p_inf)
        s, off_grid = 1.0, []
        for law, tot, rest in (("P", tot_p, rest_p), ("Q", tot_q, rest_q)):
            if tot > rest:
                s = min(s, max(float(rest / tot), 0.0))
                if rest < 0.5:  # most of this law at its infinite atom: the loss has left the grid
                    off_grid.append(f"{law}-law {float(tot):.3g} on the grid, {1.0 - float(rest):.17g} at "
                                    f"{'+' if law == 'P' else '−'}∞")
        g = f * s
        if g != 1.0:
            omega, nu = omega * g, nu * g
        if g < 1.0:
            self.roundoff = 1.0 - (1.0 - self.roundoff) * g * (1.0 - UNIT_ROUNDOFF)
        self.omega, self.nu = omega, nu
        self.q_ninf = float(min(max(self.q_ninf, 1.0 - float(np.sum(nu, dtype=np.longdouble))), 1.0))
        if not self.roundoff < MAX_ROUNDOFF and off_grid:
            raise LossBeyondGrid(f"discrete pair: the privacy loss lies beyond its loss grid [{self.t0:.6g}, "
                                 f"{self.t0 + self.h * (self.omega.size - 1):.6g}] ({'; '.join(off_grid)}): "
                                 "no PRV grid holds this step")
        if not self.roundoff < MAX_ROUNDOFF:
            raise AccountingError(f"discrete pair: its mass normalizations shrink its curves by C = "
                                  f"{self.roundoff:.3g} (≥ {MAX_ROUNDOFF:g}): the round-off is not small")

    @property
    def ts(self) -> np.ndarray:
        """Grid of loss values."""
        return self.grid(np.float64)

    def grid(self, dtype) -> np.ndarray:
        """Grid of loss values t_0 + j·h computed in ``dtype`` (float64: :attr:`ts`; long double: Lemma R8)."""
        return dtype(self.t0) + dtype(self.h) * np.arange(self.omega.size, dtype=dtype)

    def _cumsums(self):
        """(upper sums of ω, of ν, of m_pq, of z, lower sums of ω, of ν, of m_qp), computed once (the masses are not
        mutated); m_pq, m_qp, z: :func:`tie_mismatch`."""
        key = (id(self.omega), id(self.nu))
        cached = self.__dict__.get("_cums")
        if cached is None or cached[0] != key:
            m_pq, m_qp, z = tie_mismatch(self)
            sums = tuple(np.concatenate([np.cumsum(v[::-1])[::-1], [0.0]]) for v in (self.omega, self.nu, m_pq, z))
            sums += tuple(np.concatenate([[0.0], np.cumsum(v)]) for v in (self.omega, self.nu, m_qp))
            cached = (key, sums)
            self.__dict__["_cums"] = cached
        return cached[1]

    def h_pq(self, alpha: np.ndarray, log_alpha: Optional[np.ndarray] = None) -> np.ndarray:
        r"""H_α(P‖Q) = (p_inf + Σ_{t_j > log α} ω_j(1 − α e^{−t_j}))/(1 − C), α ≥ 0 (= 1 − α for α ≤ 0), rounded up:
        read as p_inf + Σω_j − αΣν_j plus α·Σm_pq (ν's tie to ω e^{−t}, :func:`tie_mismatch`) and the round-off of
        the sums and of this arithmetic (:func:`read_roundoff`; Lemma R7(d))."""
        alpha = np.asarray(alpha, dtype=np.float64)
        sw, sn, sm, _, _, _, _ = self._cumsums()
        pos = alpha > 0
        j = first_above(self.t0, self.h, self.omega.size, _safe_log(alpha, pos, log_alpha))
        a_sn = alpha * sn[j]
        up = (np.maximum(self.p_inf + sw[j] - a_sn, 0.0) + alpha * sm[j] * (1.0 + read_roundoff(self.omega.size))
              + read_roundoff(self.omega.size) * (self.p_inf + sw[j] + a_sn))
        return np.where(pos, self.undo_normalization(up), 1.0 - alpha)

    def h_qp(self, alpha: np.ndarray, log_alpha: Optional[np.ndarray] = None) -> np.ndarray:
        r"""H_α(Q‖P) = (q_ninf + Σ_{t_j < −log α} ω_j(e^{−t_j} − α))/(1 − C), α ≥ 0 (= 1 − α for α ≤ 0), rounded up as
        :meth:`h_pq` (Lemma R7(d))."""
        alpha = np.asarray(alpha, dtype=np.float64)
        _, _, _, sz, cw, cn, cm = self._cumsums()
        pos = alpha > 0
        j = count_below(self.t0, self.h, self.omega.size, -_safe_log(alpha, pos, log_alpha))
        a_cw = alpha * cw[j]
        up = (np.maximum(self.q_ninf + cn[j] - a_cw, 0.0) + (cm[j] + sz[j]) * (1.0 + read_roundoff(self.omega.size))
              + read_roundoff(self.omega.size) * (self.q_ninf + cn[j] + a_cw))
        return np.where(pos, self.undo_normalization(up), 1.0 - alpha)

    def undo_normalization(self, h: np.ndarray) -> np.ndarray:
        """h/(1 − C): curve values read from this pair's masses, made upper bounds on those of the same chain
        computed without its mass normalizations (Lemma R6); every reader of the masses goes through this."""
        return h / (1.0 - self.roundoff) if self.roundoff else h

    def compose(self, other: "DiscretePair", keep_transform: bool = False, wide: bool = False) -> "DiscretePair":
        """Product pair (P⊗P', Q⊗Q'): loss laws convolve, the FFT's round-off bound put into the masses (Lemma R7:
        every mass ≥ the exact product's); the spacings must agree bit for bit (the tilt identity needs one h; see
        :func:`compose_aligned`). ``keep_transform``: keep this pair's tilted transforms for its next products (one
        factor composed with many: the same numbers). ``wide``: the bound computed in long double (Lemma R8: the
        squares of the powering chains, whose C compounds with the number of times they are used)."""
        if self.h != other.h:
            raise ValueError(f"can only compose discrete pairs with equal grid spacing, bit for bit (Lemma R7's tilt "
                             f"identity needs one h): got {self.h!r} and {other.h!r}; use compose_aligned")
        n_out = self.omega.size + other.omega.size - 1
        if wide:  # the claimed losses t_0 + j·h, rounded to long double (Lemma R8)
            ld = WIDE_DTYPE
            ta, tb = self.grid(ld), other.grid(ld)
            t_out = (ld(self.t0) + ld(other.t0)) + ld(self.h) * np.arange(n_out, dtype=ld)
        else:
            ta, tb = self.ts, other.ts
            t_out = self.t0 + other.t0 + self.h * np.arange(n_out)
        cache = self.__dict__.setdefault("_transforms", {}) if keep_transform else None
        q_mass = float(np.sum(self.nu, dtype=np.longdouble) * np.sum(other.nu, dtype=np.longdouble))
        om, nu, added, p_extra, q_extra = _tilted_convolve(ta, self.omega, tb, other.omega, t_out, q_mass,
                                                           square=other is self, a_cache=cache, wide=wide)
        # 1 − (1 − a)(1 − b) without cancellation (it rounded tiny atoms by ~u, which the powering multiplies by k)
        p_inf = self.p_inf + other.p_inf - self.p_inf * other.p_inf + p_extra
        q_ninf = self.q_ninf + other.q_ninf - self.q_ninf * other.q_ninf + q_extra
        # the factors' normalizations multiply (Lemma R6)
        roundoff = 1.0 - (1.0 - self.roundoff) * (1.0 - other.roundoff)
        return DiscretePair(self.t0 + other.t0, self.h, om, nu, p_inf, q_ninf, roundoff, added_mass=added)

    def window(self) -> Tuple[float, float]:
        """Loss range outside of which both laws carry < CUT_MASS."""
        cw, cn = np.cumsum(self.omega), np.cumsum(self.nu)
        sw, sn = np.cumsum(self.omega[::-1])[::-1], np.cumsum(self.nu[::-1])[::-1]
        ts = self.ts
        keep = (cw > CUT_MASS) | (cn > CUT_MASS)
        lo = ts[np.argmax(keep)] if keep.any() else ts[0]
        keep = (sw > CUT_MASS) | (sn > CUT_MASS)
        hi = ts[len(ts) - 1 - np.argmax(keep[::-1])] if keep.any() else ts[-1]
        if hi <= lo:
            hi = lo + self.h
        return float(lo), float(hi)

    def regrid(self, n: int) -> "DiscretePair":
        """Dominating re-discretization onto ``n`` points spanning :meth:`window` (mass-preserving split)."""
        lo, hi = self.window()
        h = (hi - lo) / (n - 1)
        if h <= self.h and self.omega.size <= n:
            return self
        ts = self.ts
        return _split_atoms(ts, self.omega, self.nu, self.p_inf, self.q_ninf, lo, h, n, self.roundoff)


def tie_mismatch(pair: DiscretePair) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""(m_pq, m_qp, z): what reading a pair's curves from its stored ν can miss (Lemma R7(d)). The pair a product
    bounds (Lemma R7) has ν_j = ω_j e^{−t_j} at the claimed losses t_j = t_0 + j·h where ω_j > 0, and Q-only atoms
    (0, ν_j) where ω_j underflowed (≡ Q-mass at −∞); the stored ν_j is within a few u(1 + |t_j|) of ω_j e^{−t_j},
    or not tied at all (the split pair's ν_lo = Q_j − ν_hi). A posteriori: f_j = e^{log ω_j − t_j} as computed errs
    by ≤ e_j·f_j, e_j = expm1(1.01u(h·j + |t_j|) + 2u(|log ω_j| + |log ω_j − t_j|) + 4u) (t_j's rounding, ≤
    u(h·j + |t_j|), moves e^{−t} by that relative amount; log, the difference, exp), plus the smallest subnormal s.
    H_α(P‖Q) read as Σ(ω_j − αν_j) is low by ≤ α·Σ m_pq, m_pq = (ν_j − (1 − e_j)f_j)_+ + s (with f_j = 0 where
    ω_j = 0: a Q-only atom counts 0 there); H_α(Q‖P) read as Σ_{t_j < −log α}(ν_j − αω_j) is low by ≤ Σ m_qp,
    m_qp = ((1 + e_j)f_j − ν_j)_+ + s where ω_j > 0, plus the Q-only atoms z_j = ν_j at t_j ≥ −log α (not read
    there, while Q-mass at −∞ counts at every α)."""
    j = np.arange(pair.omega.size, dtype=np.float64)
    t = pair.ts
    pos = pair.omega > 0
    with np.errstate(divide="ignore"):
        lw = np.log(pair.omega)  # in log space: e^{−t} alone overflows on windows wider than ~700
    arg = np.where(pos, lw - t, -np.inf)
    f = np.exp(arg)
    check_finite(f, "discrete pair: ω·e^{−t}")
    e = np.expm1(1.01 * UNIT_ROUNDOFF * (pair.h * j + np.abs(t))
                 + 2.0 * UNIT_ROUNDOFF * np.where(pos, np.abs(lw) + np.abs(arg), 0.0) + 4.0 * UNIT_ROUNDOFF)
    tiny = np.finfo(np.float64).smallest_subnormal
    m_pq = np.maximum(pair.nu - (1.0 - e) * f, 0.0) + tiny
    m_qp = np.where(pos, np.maximum((1.0 + e) * f - pair.nu, 0.0) + tiny, 0.0)
    z = np.where(pos, 0.0, pair.nu)
    return m_pq, m_qp, z


def read_roundoff(n: int) -> float:
    r"""Relative round-off of a curve read from an n-point pair as p_∞ + Σ_{j ≥ i} ω_j − αΣ_{j ≥ i} ν_j (or its
    mirror), /(1 − C): each running sum of non-negative terms errs by ≤ γ_{n}·itself (np.cumsum, sequential), the
    product, the two additions and the division by 1 − C by u each: 1.01·(n + 8)·u times p_∞ + Σω + αΣν (Lemma
    R7(d))."""
    return 1.01 * (n + 8) * UNIT_ROUNDOFF


def _scaled_tilts(w: np.ndarray, expo: np.ndarray, expo_slack: np.ndarray,
                  unit_roundoff: float = UNIT_ROUNDOFF) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""(x, m, κ) row by row: x = w·e^{expo − m} (m the largest log w + expo of the row, 0 for an all-zero row; every
    entry ≤ 1, entries below the smallest subnormal of the dtype (e^{−745} in float64) flush to 0), and κ with
    |x_computed − x_exact| ≤ κ·x_exact + the smallest subnormal (2^{−1074} in float64) entry by
    entry (the absolute part: subnormal and flushed entries), x_exact = w·e^{λ(t − c) − m} at the exact losses: the
    argument carries ≤ 2u|log w| (log, 1 ulp) + 3u|expo| (``expo`` = λ·(t − c) as computed) + ``expo_slack`` (the
    losses' own rounding, per row) + u|log w + expo| + u|log w + expo − m| ≤ 5u(|log w| + |expo| + |m|) + slack of
    rounding, exp ≤ 2u relative (8u is used) (Lemma R7). u = ``unit_roundoff``, that of the arithmetic of
    ``w`` and ``expo`` (float64, or long double in the chains' products, Lemma R8)."""
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    lw = logw[None, :] + expo
    m = np.max(lw, axis=1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    finite = np.isfinite(logw)
    arg = (np.max(np.abs(logw[finite])) if finite.any() else 0.0) + np.max(np.abs(expo), axis=1) + np.abs(m[:, 0])
    kappa = np.expm1(8.0 * unit_roundoff * arg + expo_slack + 2.0 * unit_roundoff)
    return np.exp(lw - m), m, kappa


def _row_norms(x: np.ndarray, unit_roundoff: float = UNIT_ROUNDOFF) -> Tuple[np.ndarray, np.ndarray]:
    """Upper bounds on the ℓ2 and ℓ1 norms of each (non-negative) row: float sums of n non-negative terms err by
    ≤ γ_n relative, covered by the factor 1 + 2nu (u = ``unit_roundoff``, that of ``x``'s arithmetic)."""
    f = x.dtype.type(1.0) + x.dtype.type(2.0 * x.shape[1] * unit_roundoff)  # in x's precision (1 + 2nu ≠ 1)
    return np.sqrt(np.einsum("ij,ij->i", x, x) * f) * f, np.sum(x, axis=1) * f


def first_above(t0: float, h: float, n: int, t: np.ndarray) -> np.ndarray:
    """For each t, the first index j of the grid t0 + j·h (j < n) with t_j > t (n if none), guarded against the
    rounding of (t − t0)/h (:meth:`DiscretePair.h_pq`)."""
    j = np.clip(np.floor((t - t0) / h).astype(np.int64) + 1, 0, n)
    ts = t0 + h * j
    j = np.where((j > 0) & (t0 + h * (j - 1) > t), j - 1, j)  # guard rounding
    return np.where((j < n) & (ts <= t), j + 1, j)


def count_below(t0: float, h: float, n: int, t: np.ndarray) -> np.ndarray:
    """For each t, the number of grid points t0 + j·h (j < n) with t_j < t, guarded against rounding
    (:meth:`DiscretePair.h_qp`)."""
    j = np.clip(np.ceil((t - t0) / h).astype(np.int64), 0, n)
    j = np.where((j > 0) & (t0 + h * (j - 1) >= t), j - 1, j)
    return np.where((j < n) & (t0 + h * j < t), j + 1, j)


def _tilted_convolve(ta, wa, tb, wb, t_out, q_mass: float, square=False, a_cache=None,
                     wide=False) -> Tuple[np.ndarray, np.ndarray, float, float, float]:
    r"""(ω, ν, added, p_extra, q_extra): the P-law ω of the product, its Q-law ν, the mass ``added`` on purpose, and
    the masses to add to the atoms at ±∞. ω ≥ ω_a * ω_b entry by entry and ν = ω e^{−t} (up to the rounding of
    t, as in every stored pair), except where the bound is below float64's smallest normal number:
    there the entry is 0 and 2·10^{−308} goes to ``p_extra`` (``q_extra``). ``added`` ≥ the excess of either law over
    the exact product's total (``q_mass``: the product of the factors' Q-law totals): the round-off bound put into
    the masses, scaled
    away by the normalization and counted in its C (docs/accounting.md, Lemmas R2, R6, R7, R8).

    Convolution commutes with exponential tilting, (ω_a e^{λt}) * (ω_b e^{λt}) = (ω_a * ω_b) e^{λt}, so we
    convolve the tilts λ ∈ {0, ±1, ±30/w, ±300/w} (w = window width) by FFT. Each tilt's FFT convolution errs by at
    most E_λ in every entry (:func:`.checks.fft_convolution_error`, from the ℓ2 and ℓ1 norms of its inputs); at every
    point one tilt is taken (the one whose bound E_λ·e^{back_λ}, untilted and evaluated in float64, is smallest:
    any choice is valid), and the entry is its computed value plus E_λ, untilted, times the relative round-off of
    the tilts and of untilting: an upper bound on the exact product entry. Both curves of a pair are non-decreasing
    in every ω_j at fixed losses, so the pair's curves are ≥ the exact product's. Without the tilts, FFT noise of
    ~1e-17 would be amplified by e^{±t} in the tails. ``a_cache`` (a dict kept with the pair of ``wa``): the first
    factor's tilted transforms, reused when it is composed again on the same FFT length and tilts.

    ``wide`` (Lemma R8, the squares of the powering chains, whose C compounds with the number of times they are
    used): every step — tilts, FFTs, products, untilting — in long double (``ta``, ``tb``, ``t_out`` given in long
    double, computed from the grids' t_0 and h), so u is long double's (2^{−64} on x86-64: C ~ 10^{−15} per product
    instead of ~10^{−12}), and each mass rounded up to float64 at the end. Where long double is float64, this is
    the float64 bound.
    """
    dt = WIDE_DTYPE if wide else np.float64
    u = float(np.finfo(dt).eps) / 2.0
    wa, wb = np.asarray(wa, dtype=dt), np.asarray(wb, dtype=dt)
    ca, cb = 0.5 * (ta[0] + ta[-1]), 0.5 * (tb[0] + tb[-1])
    width = max(float(t_out[-1] - t_out[0]), 1e-300)
    lams = [0.0, -1.0, 1.0]
    for c in (30.0, 300.0):  # tilts on the scale of the window
        if c / width > 1.0:
            lams += [-c / width, c / width]
    # all tilts in one batched real FFT (a squaring, a is b, transforms once); each tilted input is scaled by
    # e^{−m} (m: its largest log-mass), so no tilt overflows however wide the window (λ = ±1 on windows wider
    # than ~700 overflowed the product of the transforms before, and those tilts were lost); m returns in `back`
    lam_col = np.asarray(lams, dtype=dt)[:, None]
    n_out = wa.size + wb.size - 1
    nfft = sp_fft.next_fast_len(n_out, real=True)
    key = (nfft, tuple(lams), float(ca), wide)

    def tilted(t, w, c):  # (transform, m, κ, ℓ2, ℓ1) of each tilt
        expo = lam_col * (t - c)[None, :]
        # the claimed losses are t_0 + i·h exactly; the array t is their rounding, ≤ u(|t_0| + h·i + |t_i|) off
        slack = 2.0 * u * np.abs(lam_col[:, 0]) * (2.0 * np.max(np.abs(t)) + (t[-1] - t[0]))
        x, m, kappa = _scaled_tilts(w, expo, slack, u)
        return (sp_fft.rfft(x, nfft, axis=-1, workers=_FFT_WORKERS), m, kappa) + _row_norms(x, u)

    if a_cache is not None and key in a_cache:
        fa, ma, ka, l2a, l1a = a_cache[key]
    else:
        fa, ma, ka, l2a, l1a = tilted(ta, wa, ca)
        if a_cache is not None:
            a_cache[key] = (fa, ma, ka, l2a, l1a)
    if square:
        prod, mb, kb, l2b, l1b = fa * fa, ma, ka, l2a, l1a
    else:
        fb, mb, kb, l2b, l1b = tilted(tb, wb, cb)
        prod = np.multiply(fb, fa, out=fb)  # as numpy evaluated fa * rfft(·): in place, this order (same rounding)
    conv = np.maximum(sp_fft.irfft(prod, nfft, axis=-1, workers=_FFT_WORKERS)[:, :n_out], 0.0)
    check_finite(conv, "product pair: tilted FFT convolution")
    # ≥ |conv − exact conv of the computed tilts|, plus their absolute part (twice the smallest subnormal ·‖·‖₁)
    err = (fft_convolution_error(l2a, l1a, l2b, l1b, nfft, u) + 2 * np.finfo(dt).smallest_subnormal * (l1a + l1b))
    # exact ω_j = (exact tilted conv)_j·e^{back_j}, back = −λ·shift + m_a + m_b; the computed tilts are within
    # (1 ± κ) of the exact ones. Per point, the tilt whose untilted bound E_λ·e^{back} is smallest (float64; first
    # minimum, as np.argmin(axis=0), row by row on contiguous rows: much faster)
    shift = t_out - ca - cb
    mab = (ma + mb)[:, 0]
    with np.errstate(divide="ignore"):
        log_noise = np.log(np.asarray(err, dtype=np.float64))[:, None] + (
            -np.asarray(lams)[:, None] * np.asarray(shift, dtype=np.float64)[None, :]
            + np.asarray(mab, dtype=np.float64)[:, None])
    pick = np.zeros(n_out, dtype=np.intp)
    best = log_noise[0].copy()
    for i in range(1, len(lams)):
        better = log_noise[i] < best
        pick[better] = i
        np.minimum(best, log_noise[i], out=best)
    cols = np.arange(n_out)
    upper = np.log(conv[pick, cols] + err[pick])
    arg = upper + (-lam_col[pick, 0] * shift + mab[pick])
    # relative round-off of fl(ĉ + E) (u), of log (2u|upper|), of back (λ·shift with the shift's own rounding, plus
    # ma + mb) and of the sum, and of exp (2u); and the inputs' tilts (1 ± κ_a)(1 ± κ_b): ω_j ≤ computed·(1 + rel)
    # t_out as computed is the exact loss t_0^a + t_0^b + j·h up to u(|t_0^a| + |t_0^b| + h·j + |t_j|)
    lam_p = np.abs(lam_col[pick, 0])
    d_arg = 4.0 * u * (np.abs(upper) + np.abs(arg)
                       + lam_p * (np.abs(shift) + 2.0 * np.abs(t_out) + abs(ca) + abs(cb)
                                  + abs(ta[0]) + abs(tb[0]) + (t_out - t_out[0]))
                       + np.abs(mab)[pick])
    factor = (np.expm1(d_arg + 4.0 * u) + 1.0) / ((1.0 - ka[pick]) * (1.0 - kb[pick])) * (dt(1.0) + dt(2.0 * u))
    om = np.exp(arg) * factor  # (1 + 2u): the last two products' own rounding
    # the Q-law ν = ω e^{−t} with the same factor, from the log (ν from the rounded ω put P-masses that underflow at
    # t ≪ 0 into Q-masses of e^{|t|}·10^{−308}): the tie is kept up to the rounding of arg − t (u|arg − t|), what
    # every stored pair has (docs/accounting.md, Lemma R8)
    nu = np.exp(arg - t_out) * factor
    if wide:  # to float64, rounded up (the comparison is exact in long double)
        om64, nu64 = om.astype(np.float64), nu.astype(np.float64)
        om = np.where(om64 < om, np.nextafter(om64, np.inf), om64)
        nu = np.where(nu64 < nu, np.nextafter(nu64, np.inf), nu64)
    # where a bound is below the smallest normal number (exp underflows: windows wider than ~700) the entry is 0 and
    # twice that number per such entry goes to the law's atom (P at +∞, Q at −∞): a P-mass raised at t ≪ 0 would be
    # a Q-mass of ~e^{|t|}·10^{−308} (and vice versa); the atoms only raise both curves
    check_finite(nu, "product pair: Q-law bound")
    tiny = np.finfo(np.float64).tiny
    extra = []
    for law in (om, nu):
        low = law < tiny
        law[low] = 0.0
        extra.append(2.0 * tiny * float(np.count_nonzero(low)))
    # the excess of each law over the exact product's total
    ld = np.longdouble
    exact_p = np.sum(wa, dtype=ld) * np.sum(wb, dtype=ld)
    added = max(float(np.sum(om, dtype=ld) - exact_p), float(np.sum(nu, dtype=ld) - ld(q_mass)), 0.0)
    return om, nu, added + 4.0 * UNIT_ROUNDOFF, extra[0], extra[1]


def _split_atoms(ts, omega, nu, p_inf, q_ninf, t0, h, n, roundoff: float = 0.0) -> DiscretePair:
    r"""Move atoms (ω, ν) at loss t onto the grid t0 + j h (j < n) so that the result dominates.

    Inside the grid an atom at t ∈ [g_j, g_{j+1}] goes to g_{j+1} with P-fraction
    θ = (1 − e^{−(t−g_j)})/(1 − e^{−h}) and to g_j with 1 − θ; the Q-masses follow as ν·θe^{t−g_{j+1}}
    and ν·(1−θ)e^{t−g_j} (both P and Q totals preserved). Below the grid: P mass moves up to g_0
    with Q mass ω e^{−g_0}, the rest of Q goes to −∞. Above: Q mass moves down to g_{n−1} with P mass
    ν e^{g_{n−1}}, the rest of P goes to +∞. Each step is a refinement, hence dominating. The map is linear in the
    finite atoms, so the result keeps the input's normalization factor (``roundoff``, Lemma R6).
    """
    om_new = np.zeros(n)
    nu_new = np.zeros(n)
    g_last = t0 + (n - 1) * h
    below = ts < t0
    above = ts > g_last
    inside = ~(below | above)
    # below: P up to g_0
    wb = omega[below].sum()
    om_new[0] += wb
    nu_b = float(np.sum(omega[below] * np.exp(np.minimum(-t0, 700.0))))
    nu_new[0] += nu_b
    q_ninf = q_ninf + max(nu[below].sum() - nu_b, 0.0)
    # above: Q down to g_{n-1}
    nua = nu[above].sum()
    nu_new[-1] += nua
    om_a = float(np.sum(nu[above] * np.exp(min(g_last, 700.0))))
    om_new[-1] += om_a
    p_inf = p_inf + max(omega[above].sum() - om_a, 0.0)
    # inside
    t = ts[inside]
    w = omega[inside]
    v = nu[inside]
    j = np.clip(np.floor((t - t0) / h).astype(np.int64), 0, n - 2)
    u = np.clip(t - (t0 + j * h), 0.0, h)
    theta = np.clip(np.expm1(-u) / np.expm1(-h), 0.0, 1.0)
    om_new += np.bincount(j + 1, theta * w, n) + np.bincount(j, (1.0 - theta) * w, n)
    nu_new += np.bincount(j + 1, v * theta * np.exp(u - h), n) + np.bincount(j, v * (1.0 - theta) * np.exp(u), n)
    return DiscretePair(t0, h, om_new, nu_new, float(p_inf), float(q_ninf), roundoff)


#: a split pair from the rounded-up curve (:func:`_curve_split`) is used where its round-off factor C is at most this
#: (the chains multiply it by up to 10⁹: C ≤ 10^{−5} there); elsewhere (small shifts: its masses, the curve's second
#: differences on a grid of spacing ~a/n, drown in the values' round-off) a coarser grid is tried (Lemma R10)
CURVE_SPLIT_MAX_ROUNDOFF = 1e-14

#: the coarsest grid :func:`split_to_grid` tries (halving from n) before it refuses
CURVE_SPLIT_MIN_POINTS = 4

#: :func:`_curve_split`'s grid spans the loss window cut at ±this (e^t stays finite with room for ω = e^t·ν); the
#: P-mass of losses above sits at +∞ (δ_{n−1} = H(α_{n−1})), the Q-mass below at −∞: a dominating cut
CURVE_SPLIT_MAX_LOSS = 600.0


def _symmetric_spacing(half_width: float, n: int) -> float:
    """The spacing h ≥ 2·``half_width``/(n − 1), rounded up to 52 − bit_length(n) significant bits, so that every
    loss h·(2j − n + 1)/2 of the symmetric grid (j < n) is a double, exactly."""
    mant, expo = math.frexp(2.0 * half_width / (n - 1))
    bits = 52 - int(n).bit_length()
    return math.ldexp(math.ceil(math.ldexp(mant, bits)), expo - bits)


def _curve_split(pair: GGPair, n: int, clear_top: bool = False) -> Optional[DiscretePair]:
    r"""The connect-the-dots pair of the one-coordinate pair's rounded-up curve on n (even) symmetric loss points,
    or None where its round-off factor exceeds :data:`CURVE_SPLIT_MAX_ROUNDOFF` (docs/accounting.md, Lemma R10(a)).

    Grid t_j = h·(2j − n + 1)/2, every t_j a double exactly (:func:`_symmetric_spacing`), spanning the pair's loss
    window cut at ±:data:`CURVE_SPLIT_MAX_LOSS` (``clear_top``: 16u(1 + top) wider, β = 1's top atom read above it,
    where H = 0, not its rounding-up slack). The GG pair is symmetric (H_α(Q‖P) = H_α(P‖Q)), so only δ_i = ``pair.h_pq`` at α_i = e^{t_i}, t_i > 0, is
    read: upper bounds (Lemma R9), at α rounded down (H is non-increasing in α). In long double (:data:`WIDE_DTYPE`):
    chord slopes s_i = (δ_{i+1} − δ_i)/(α_{i+1} − α_i), s_{n−1} = 0 above the grid (δ_{n−1} is the P-mass at +∞), and
    the chord through t = 0 to the mirror point (1/α_m, 1 − 1/α_m + δ_m/α_m), s_{m−1} = (δ_m − 1)/(α_m + 1) (m = n/2);
    ν_i = (s_i − s_{i−1})_+ and ω_i = α_i·ν_i at t_i > 0, the mirror atom at −t_i with P-mass ν_i (Q-mass ω_i). ω is
    rounded up to float64 from α_i raised by 4u_ld (so ω_i ≥ e^{t_i}ν_i exactly), ν down. C (``roundoff``): Lemma
    R5(b)'s relative round-off with u = u_ld on the δ side, of the chord through t = 0 against a lower bound on
    H(α_m), and 2u (the roundings to float64); the mass that clipping negative ν_i adds is scaled away by the
    normalization (C)."""
    lo, hi = pair.loss_window()
    half = min(max(hi, -lo), CURVE_SPLIT_MAX_LOSS)
    if clear_top:  # the top point read (at t − 4u) above a top atom (β = 1's loss a, where the curve drops to 0)
        half += 16.0 * UNIT_ROUNDOFF * (1.0 + half)
    h = _symmetric_spacing(half, n)
    t0 = -0.5 * (n - 1) * h  # exact, and t0 + j·h = h·(2j − n + 1)/2 exactly
    m = n // 2
    tp = t0 + h * np.arange(m, n)  # t_m = h/2 … t_{n−1}, exact
    delta = pair.h_pq(np.exp(tp) * (1.0 - 4.0 * UNIT_ROUNDOFF))
    check_finite(delta, f"one-coordinate curve of the GG pair (a={pair.a}, beta={pair.beta})")
    if not (np.all(delta >= 0.0) and delta[0] < 1.0):
        return None
    ld = WIDE_DTYPE
    u_ld = float(np.finfo(ld).eps) / 2.0
    alpha = np.exp(tp.astype(ld))
    dl = delta.astype(ld)
    s = np.empty(m + 1, dtype=ld)  # s_{m−1}, s_m, …, s_{n−1}
    s[0] = (dl[0] - 1) / (alpha[0] + 1)
    s[1:m] = np.diff(dl) / (alpha[:-1] * np.expm1(ld(h)))
    s[m] = 0
    nu_ld = np.maximum(np.diff(s), 0)
    om_ld = (alpha * (1 + 4 * ld(u_ld))) * nu_ld
    om = om_ld.astype(np.float64)
    om = np.where(om < om_ld, np.nextafter(om, np.inf), om)  # up (an exact comparison in long double)
    nu = nu_ld.astype(np.float64)
    nu = np.maximum(np.where(nu > nu_ld, np.nextafter(nu, -np.inf), nu), 0.0)  # down
    # Lemma R5(b) with u_ld on the δ side: at t_i, 6u·Σ_{k≥i}|Δ_k| + 3u·δ_i; the chord through t = 0 at α = 1:
    # 6u·Σ|Δ_k| + 6u·δ_m + 3u·h against a lower bound on H(1) ≥ H(α_m); float64's roundings of ω and ν: 2u
    dif = np.abs(np.diff(delta))
    tail = np.concatenate([np.cumsum(dif[::-1])[::-1], [0.0]])
    if np.any((delta <= 0) & (tail > 0)):
        return None
    ratio = np.where(delta > 0, (6.0 * u_ld * tail + 3.0 * u_ld * delta) / np.where(delta > 0, delta, 1.0), 0.0)
    a_hi = np.exp(tp[:1]) * (1.0 + 4.0 * UNIT_ROUNDOFF)  # ≥ α_m: H there ≤ H(α_m)
    low_m = float(2.0 * pair.h_pq(a_hi, upper=False)[0] - pair.h_pq(a_hi)[0])  # ≤ H(α_m) (Lemma R9's bound)
    if not low_m > 0.0:
        return None
    chord = 6.0 * u_ld * tail[0] + 6.0 * u_ld * float(delta[0]) + 3.0 * u_ld * h
    c = 2.0 * max(float(np.max(ratio)), chord / low_m) + 2.0 * UNIT_ROUNDOFF
    rho = float(delta[-1])
    if not float(np.sum(om, dtype=np.longdouble) + np.sum(nu, dtype=np.longdouble)) + rho <= 1.0 + mass_budget(n):
        return None  # clipped negative masses (values not convex beyond round-off): the normalization would refuse
    out = DiscretePair(float(t0), float(h), np.concatenate([nu[::-1], om]), np.concatenate([om[::-1], nu]), rho, rho, c)
    return out if out.roundoff <= CURVE_SPLIT_MAX_ROUNDOFF else None


def split_to_grid(pair: GGPair, n: int) -> DiscretePair:
    r"""Dominating discrete pair of the exact one-coordinate pair on at most ``n`` (even) symmetric loss points: the
    connect-the-dots pair of its rounded-up curve (:func:`_curve_split`, Lemma R10(a)) on n points, or where that is
    ill-conditioned on n/2, n/4, … ≥ :data:`CURVE_SPLIT_MIN_POINTS` points (a coarser grid of the same curve
    dominates too, and its masses, the curve's second differences, grow like the square of the spacing); a loss window
    wider than ±:data:`CURVE_SPLIT_MAX_LOSS` is cut there (the P-mass above goes to +∞, which only overestimates).
    At β = 1 the grids whose top point clears the loss's top atom a are tried first (Lemma R10(b)).
    Raises :class:`.checks.AccountingError` where no grid is well conditioned (tiny shifts, a ≲ 10^{−10}; shifts so
    large that H ≈ 1 to double precision, β = 4 at a = 10); the callers publish the proven Rényi bound with a
    warning, or say the equal-spread reference is not available (Lemma R10(b))."""
    if not (isinstance(n, (int, np.integer)) and n >= 4 and n % 2 == 0):
        raise ValueError(f"split_to_grid: the number of grid points n must be an even integer >= 4, got {n!r}")
    for clear_top in ((True, False) if pair.beta == 1.0 else (False,)):
        m = int(n)
        while m >= CURVE_SPLIT_MIN_POINTS and m % 2 == 0:
            curve = _curve_split(pair, m, clear_top)
            if curve is not None:
                return curve
            m //= 2
    raise AccountingError(
        f"the one-coordinate pair of the p = inf vertex / equal spreads / count query at shift a={pair.a!r}, "
        f"beta={pair.beta!r} cannot be discretized with a certified round-off on any grid of {n} down to "
        f"{CURVE_SPLIT_MIN_POINTS} points (docs/accounting.md Lemma R10: a tiny shift's curve is flat below the "
        f"values' round-off, a huge shift's is 1 to double precision)")


#: a square that its chain uses more than this many times is computed in long double (Lemma R8): its C, ~10^{−12} in
#: float64, is multiplied by that count
WIDE_USES = 1 << 11


class PowerChain:
    """Binary powering of one discrete base pair, re-gridding (dominating) to ≤ ``n`` points after every product,
    the squares shared between several exponents. Every product's round-off is bounded (Lemma R7); a square used
    more than :data:`WIDE_USES` times by the exponent that builds it is computed in long double (Lemma R8)."""

    def __init__(self, base: DiscretePair, n: int) -> None:
        self.n = n
        self.squares: List[DiscretePair] = [base]

    def power(self, k: int) -> DiscretePair:
        """Dominating pair of the k-fold product of the base (k ≥ 1)."""
        if not (isinstance(k, (int, np.integer)) and k >= 1):
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        k = int(k)
        while len(self.squares) < k.bit_length():
            last, uses = self.squares[-1], k >> len(self.squares)
            self.squares.append(last.compose(last, wide=uses > WIDE_USES).regrid(self.n))
        result = None
        for i in range(k.bit_length()):
            if (k >> i) & 1:
                result = self.squares[i] if result is None else compose_aligned(result, self.squares[i]).regrid(self.n)
        return result


def power_pair(base: DiscretePair, k: int, n: int) -> DiscretePair:
    """k-fold product of ``base`` by binary powering (:class:`PowerChain`)."""
    return PowerChain(base, n).power(k)


def compose_aligned(x: DiscretePair, y: DiscretePair) -> DiscretePair:
    """Compose two pairs (round-off bounded, Lemma R7), first re-gridding the finer one onto the coarser spacing
    (dominating) where the spacings differ in any bit."""
    if x.h == y.h:
        return x.compose(y)
    if x.h < y.h:
        x, y = y, x
    # y is finer: move y onto spacing x.h
    lo, hi = y.window()
    n = max(int(math.ceil((hi - lo) / x.h)) + 1, 2)
    y2 = _split_atoms(y.ts, y.omega, y.nu, y.p_inf, y.q_ninf, lo, x.h, n, y.roundoff)
    return x.compose(y2)


def shape_pair(a: float, beta: float, k: int, n: int = 1 << 14) -> DiscretePair:
    """Dominating discrete pair of the k-coordinate shape: each coordinate shifted by ``a``."""
    return power_pair(split_to_grid(GGPair(a, beta), n), k, n)
