r"""Composition of Poisson-subsampled GG steps on Opacus's PRV machinery: one core for ε and δ.

Each segment's one-step profile (:mod:`.profile`) is discretized dominatingly on one aligned grid
(:mod:`.discretization`), and the segments are composed with Opacus's ``compose_heterogeneous``
(exact on an aligned grid up to FFT wrap-around and floating-point round-off). The masses ρ_s at +∞ add
T_s·ρ_s to δ; the wrapped tails are budgeted by the domain (≤ δ_error/8, :func:`.discretization.domain_size`);
the round-off of every FFT carries its own ℓ2 bound (:func:`_err_self`, :func:`_err_conv`, docs/accounting.md
Lemma R3), turned into a bound B(ε) on the error of δ(ε) and added to δ. Where B is not small, the one-step PMFs
are tilted by e^{λt} before composing (tilting commutes with convolution), which puts the FFT's relative
accuracy where δ(ε) is read. ε is the exact ε of the composed PMF at δ − ρ − δ_error − B(ε)
(:func:`epsilon_for_delta`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from opacus.accountants.analysis.prv import DiscretePRV, Domain, compose_heterogeneous

from .checks import UNIT_ROUNDOFF, AccountingError, LossBeyondGrid, check_finite, fft_convolution_error, fft_eta

from .discretization import ctd_pmf, fine_half_width, hull_tolerance, logsumexp_rows, make_domain, mesh_for, step_dprv
from .history import PairSegment, Segment
from .profile import one_step_delta

__all__ = ["CompositionResult", "compose_history", "compose_delta"]


@dataclass
class CompositionResult:
    """Composed ε bounds for one direction."""

    direction: str
    epsilon_lower: float
    epsilon_estimate: float
    epsilon_upper: float
    inf_mass: float
    domain_L: float
    mesh: float
    shape_scores: Dict[int, float]


_U = UNIT_ROUNDOFF
#: the smallest normal float64, 2^{−1022}: below it arithmetic is subnormal (each operation ~10–40× slower on x86)
_TINY = float(np.finfo(np.float64).tiny)
#: e^{x} < 2^{−1022} for x < this (e^{−709} = 1.2168·10^{−308})
_EXP_NORMAL_MIN = -709.0


@dataclass(frozen=True)
class _Err:
    """A computed PMF's ℓ2 round-off bound ``e`` (‖computed − exact‖₂ ≤ e), its exact mass ``m`` and ℓ2 norm
    bound ``l2`` (of the exact PMF), length ``n``; ‖computed‖₁ ≤ m + √n·e."""

    e: float
    m: float
    l2: float
    n: int

    @property
    def l1(self) -> float:
        return self.m + math.sqrt(self.n) * self.e


def _err_self(pmf: np.ndarray, steps: int) -> _Err:
    r"""Round-off bound of Opacus's ``_compose_fourier``: out = irfft(rfft(p)^T) (Lemma R3).

    rfft: ‖ΔP‖₂ ≤ η√N‖p‖₂ (η = :func:`.checks.fft_eta`). Power: |P_k| ≤ m, so |Δ(P_k^T)| ≤ T(m + ‖ΔP‖₂)^{T−1}|ΔP_k|
    from the input, plus the power's own rounding ≤ u((πT + 8)|P_k|^T + 1/e) (exp(T·log z) or repeated
    squaring; T|log|z||·|z|^T ≤ 1/e). irfft: divides ℓ2 norms by √N and adds (η + 2u)‖out‖₂ (2u: the rounded 1/N).
    With ‖out‖₂ ≤ m^T: ‖Δout‖₂ ≤ T(m + ‖ΔP‖₂)^{T−1}η‖p‖₂ + u((πT + 8)m^T + 1/e) + (η + 2u)m^T.
    """
    n = pmf.size
    eta = fft_eta(n)
    m = float(np.sum(pmf))
    l2 = float(np.sqrt(np.dot(pmf, pmf)))
    dp = eta * math.sqrt(n) * l2
    log_g = math.log(steps) + (steps - 1) * math.log(m + dp)
    if log_g > 700.0:
        raise AccountingError(f"FFT self-composition of {steps} steps: the round-off bound overflows (mass {m!r}); "
                              "reduce the number of steps")
    mt = m ** steps
    e = math.exp(log_g) * eta * l2 + _U * ((math.pi * steps + 8.0) * mt + 1.0 / math.e) + (eta + 2.0 * _U) * mt
    return _Err(e, mt, mt, n)


def flush_subnormal(pmf: np.ndarray, steps: int) -> Tuple[np.ndarray, float]:
    r"""(p′, F): p′ = p with its masses below the normal range (0 < p_j < 2^{−1022}) set to 0, and F ≥ ‖p^{*T} −
    p′^{*T}‖₂ for ``steps`` = T (Lemma R3(e)).

    The FFT reads subnormal inputs ~6× slower (a one-step PMF of β = 1 carried 71,332 of them beside 422 normal
    masses); their mass s ≤ n_s·2^{−1022} in all. p^{*T} − p′^{*T} = Σ_k p^{*k} * (p − p′) * p′^{*(T−1−k)} ≥ 0 has
    ℓ1 norm ≤ T·s·max(m, 1)^{T−1} (m = Σp), and ℓ2 ≤ ℓ1: F = 1.01 × that (the 1.01 covers its own rounding). F is
    added to the FFT's round-off bound (:func:`_err_self`), of which it is far below one ulp (the bound is ≥ u/e ≈
    4·10^{−17}): the bound's float is unchanged, and so is, in every setting compared, the composed PMF."""
    low = (pmf > 0.0) & (pmf < _TINY)
    n_low = int(np.count_nonzero(low))
    if n_low == 0:
        return pmf, 0.0
    m = max(float(np.sum(pmf)), 1.0)
    log_f = math.log(steps) + math.log(n_low * _TINY) + (steps - 1) * math.log(m)
    return np.where(low, 0.0, pmf), 1.01 * math.exp(log_f)


def _err_conv(a: _Err, b: _Err) -> _Err:
    r"""Round-off bound of scipy's ``convolve(a, b, mode="same")`` (FFT or direct, whichever it picks; Lemma R3).

    Input errors: ‖e_a * b‖₂ ≤ ‖e_a‖₂‖b‖₁. FFT route (length N′ < 2n): :func:`.checks.fft_convolution_error`;
    direct route: γ_n‖a‖₂‖b‖₁ (n = the shorter length); the larger of the two is used.
    """
    n = max(a.n, b.n)
    la, lb = a.l1, b.l1
    l2a, l2b = a.l2 + a.e, b.l2 + b.e
    fft = fft_convolution_error(l2a, la, l2b, lb, 2 * n)
    direct = 1.01 * min(a.n, b.n) * _U * l2a * lb
    e = a.e * lb + b.e * la + max(fft, direct)
    return _Err(e, a.m * b.m, min(a.l2 * b.m, a.m * b.l2), n)


def _err_heterogeneous(errs: List[_Err]) -> _Err:
    """Round-off bound of Opacus's ``compose_heterogeneous`` tree (the same pairing as its ``_compose_convolution_tree``)."""
    errs = list(errs)
    while len(errs) > 1:
        nxt = []
        if len(errs) % 2 == 1:
            nxt.append(errs.pop())
        for left, right in zip(errs[:-1:2], errs[1::2]):
            nxt.append(_err_conv(left, right))
        errs = nxt
    return errs[0]


@dataclass(frozen=True)
class _OneStepBudget:
    r"""What the one-step PMFs' own round-off costs δ (Lemma R5): the composed profile of the computed PMFs is ≥
    ``shrink`` = Π_s (1 − c_s)^{T_s} times that of the exact ones, and every partial product of the computed PMFs
    has mass ≤ ``mass_factor`` = Π_s max(1, m_s)^{T_s} (m_s: one step's total mass, ≥ 1 only by clipped
    negative masses, which are pessimistic)."""

    shrink: float
    mass_factor: float

    def certify(self, delta: float, rho: float, delta_error: float) -> float:
        """The δ left for the composed finite PMF (+ its FFT round-off B) that certifies ``delta``."""
        return delta * self.shrink - rho * self.mass_factor - delta_error

    def bound(self, composed: float, rho: float) -> float:
        """Certified δ from the composed finite PMF's δ (+ B, + tail slack) and the mass ρ at +∞."""
        return (composed + rho * self.mass_factor) / self.shrink


def _budget(parts: Sequence[Tuple[float, float, int]]) -> _OneStepBudget:
    """:class:`_OneStepBudget` of [(c_s, m_s, T_s)]; AccountingError where Σ T_s c_s is not small (≥ 0.01)."""
    total_c = sum(t * c for c, _, t in parts)
    if not total_c < 0.01:
        raise AccountingError(f"the one-step PMFs' round-off (Lemma R5) is not small: Σ T·c = {total_c:.3g}; "
                              "increase noise_multiplier or reduce steps")
    log_shrink = sum(t * math.log1p(-c) for c, _, t in parts)
    log_mass = sum(t * math.log(max(m, 1.0)) for _, m, t in parts)
    return _OneStepBudget(math.exp(log_shrink), math.exp(log_mass))


def _step_pmfs(segs: Sequence, direction: str, domain: Domain):
    """([(one-step pmf, steps)], total mass at +∞ Σ_s T_s ρ_s, per-shape scores, :class:`_OneStepBudget`) of all
    segments on ``domain``."""
    out = []
    rho_tot = 0.0
    shape_scores: Dict[int, float] = {}
    parts = []
    for seg in segs:
        if isinstance(seg, PairSegment):
            dl, rr, ks, scores = one_step_delta(seg, domain.ts, direction)
            pmf, rho, c = ctd_pmf(domain.ts, dl, rr, hull_tolerance(seg))
            c = c + seg.roundoff  # (1 − c)(1 − C) ≥ 1 − c − C: the pairs' own round-off (Lemma T4)
        else:
            pmf, rho, c, (ks, scores) = step_dprv(seg.step_key, direction, domain.t_min, domain.t_max, domain.size)
        rho_tot += seg.steps * rho
        for k, sc in zip(ks, scores):
            shape_scores[k] = shape_scores.get(k, 0.0) + seg.steps * sc
        out.append((pmf, seg.steps))
        parts.append((c, float(np.sum(pmf)) + rho, seg.steps))
    return out, rho_tot, shape_scores, _budget(parts)


def _checked_domain(segs: Sequence, direction: str, delta_error: float, eps_error: float, *,
                    mesh: Optional[float] = None, min_half_width: float = 0.0, delta: Optional[float] = None):
    """(domain, one-step PMFs, ρ, scores, one-step budget) on a grid whose half-width passes the fine-PMF Chernoff
    check (:func:`.discretization.fine_half_width`, Lemma R4), widened until it does (at most 4 times)."""
    for _ in range(4):
        domain = make_domain(segs, direction, delta_error, eps_error, min_half_width=min_half_width, mesh=mesh,
                             delta=delta)
        steps, rho_tot, scores, budget = _step_pmfs(segs, direction, domain)
        need = fine_half_width(steps, domain.ts, delta_error, segs, direction)
        if need <= domain.t_max:
            return domain, steps, rho_tot, scores, budget
        min_half_width = max(need * 1.05, domain.t_max * 1.1)
    raise AccountingError(f"the PRV grid fails its tail bound after 4 widenings (needs half-width {need:.4g}); "
                          "increase noise_multiplier or reduce steps")


@dataclass
class _Certified:
    """A composed PMF for the upper bound: ``pmf`` on ``ts`` (entries at t < 0 may be dropped: δ(ε ≥ 0) does not
    read them), and ``log_bound[i]`` ≥ log of the round-off in δ(ε) for ε ∈ (t_{i−1}, t_i] (Lemma R3)."""

    ts: np.ndarray
    pmf: np.ndarray
    log_bound: np.ndarray
    #: ≤ 1: the exact composed PMF's δ is ≤ (that of the exact composition of the tilted PMFs as rounded, untilted
    #: exactly)/``shrink`` (the rounding of the tilt's and of the untilting's inputs, Lemma R9(d)): certify at δ·shrink
    shrink: float = 1.0
    #: δ to subtract besides: the mass of tilted entries below the normal range, dropped (:func:`tilt_pmf`)
    dropped: float = 0.0


def tilt_pmf(pmf: np.ndarray, t: np.ndarray, lam: float) -> Tuple[np.ndarray, float, float, float]:
    r"""(p̃, log Z, κ, dropped): p̃_j = p_j·e^{λt_j − log Z} as computed (log Z = log Σ p e^{λt}, any number works: the
    same one untilts) and κ with |p̃_j − p_j e^{λt_j − log Z}| ≤ κ·p_j e^{λt_j − log Z} at the grid's losses t_j: the
    argument log p + λt − log Z carries ≤ 4u(|log p| + 2λ|t| + |log Z|) (log, λ·t and t's own rounding, ≤ u|t|, two
    additions) and exp ≤ 2u, so κ = expm1(4u(max|log p| + 2λ·max|t| + |log Z|) + 2u) (Lemma R9(d)). Entries whose
    tilt falls below the normal range (relative error unbounded there) are set to 0 and their untilted mass
    ``dropped`` (rounded up) is returned: the exact δ(ε) of a composition is at most that without them plus
    Σ_s T_s·dropped_s (the probability that some step draws one).

    The same floats as computed plainly (``tests/test_accountant_fast_paths.py``): log p once (for the tilt and for
    κ: the log of each entry is the same float either way), log Z by :func:`.discretization.logsumexp_rows` (scipy's
    ``logsumexp``, the same floats), and e^{x} only where x = lw − log Z is not below −709 (NaN included): below,
    e^{x} < e^{−709} ≈ 1.217·10^{−308} < 2^{−1022} ≈ 2.225·10^{−308}, and exp, within one subnormal unit there, returns
    less than 2^{−1022} too, so the entry is dropped whatever it returns; exp there costs ~35× a normal one."""
    with np.errstate(divide="ignore"):
        log_p = np.log(pmf)
    lw = log_p + lam * t
    log_z = float(logsumexp_rows(lw[None, :])[0])
    x = lw - log_z
    normal = ~(x < _EXP_NORMAL_MIN)  # a NaN goes through exp and stays NaN (check_finite refuses it downstream)
    tilted = np.zeros_like(pmf)
    tilted[normal] = np.exp(x[normal])
    pos = pmf > 0
    low = (tilted < _TINY) & pos
    dropped = float(np.sum(pmf[low])) * (1.0 + 2.0 * pmf.size * _U) if low.any() else 0.0
    tilted[low] = 0.0
    kappa = math.expm1(4.0 * _U * (float(np.max(np.abs(log_p[pos]), initial=0.0))
                                   + 2.0 * lam * float(np.max(np.abs(t))) + abs(log_z)) + 2.0 * _U)
    return tilted, log_z, kappa, dropped


def untilt_pmf(pk: np.ndarray, log_r: np.ndarray, lam_t: float, scale_slack: float) -> Tuple[np.ndarray, float]:
    r"""(out, κ): out_j = p_j·r_j as computed in log space (r_j = e^{log r_j} alone can overflow), log r_j = log_scale
    − λt_j, and κ with |out_j − p_j·r_j| ≤ κ|p_j r_j| at the exact r_j: log r carries ``scale_slack`` (log_scale =
    Σ T_s log Z_s summed: ≤ 2u(#terms + 1)·Σ|T_s log Z_s|) + 2u·λ|t| (the product and t's rounding, ``lam_t`` =
    λ·max|t|) + u|log r|; then log|p|, the sum and exp: κ = expm1(4u(max|log|p|| + max|log r| + 2λ·max|t|) +
    ``scale_slack`` + 2u) (Lemma R9(d)), for entries in the normal range; below it, ≤ the smallest subnormal more
    (absolute)."""
    with np.errstate(divide="ignore", over="ignore"):
        out = np.sign(pk) * np.exp(np.log(np.abs(pk)) + log_r)
    nz = pk != 0
    kappa = math.expm1(4.0 * _U * (float(np.max(np.abs(np.log(np.abs(pk[nz]))), initial=0.0))
                                   + float(np.max(np.abs(log_r), initial=0.0)) + 2.0 * lam_t)
                       + scale_slack + 2.0 * _U)
    return out, kappa


def _certified_composition(steps, domain: Domain, lam: float) -> _Certified:
    r"""Compose the one-step PMFs tilted by e^{λt} (normalized), untilt, and bound the round-off (Lemma R3).

    Tilting commutes with convolution, so õut = Π_s Z_s^{−T_s} e^{λt} out on every index not reached by the FFT's
    wrap-around (wrapped mass lands at t < 0 and is dropped, or is mass beyond ±L, budgeted by the domain). With
    E the ℓ2 round-off bound of õut (:func:`_err_self`, :func:`_err_conv`) and r_j = Π_s Z_s^{T_s} e^{−λ t_j},
    |Σ_{t_j > ε} Δout_j (1 − e^{ε − t_j})| ≤ E·(Σ_{t_j > ε} r_j²)^{1/2} (Cauchy–Schwarz). λ = 0 is the plain
    composition (r ≡ 1); λ near the Esscher tilt of ε makes r small where δ is read.
    """
    t = domain.ts
    dprvs, errs, log_scale = [], [], 0.0
    log_shrink, scale_err, dropped_total = 0.0, 0.0, 0.0
    for pmf, count in steps:
        flushed = 0.0
        if lam == 0.0:
            (tilted, flushed), log_z = flush_subnormal(pmf, count), 0.0
        else:
            tilted, log_z, kappa, dropped = tilt_pmf(pmf, t, lam)
            # a composition of non-negative entries each within 1 ± κ_s is within (1 ± κ_s)^{T_s} per entry
            log_shrink += count * math.log1p(-kappa)
            dropped_total += count * dropped
            scale_err += abs(count * log_z)
        check_finite(tilted, "tilted one-step PMF")
        dprvs.append(DiscretePRV(pmf=tilted, domain=domain))
        err = _err_self(pmf if lam == 0.0 else tilted, count)  # p′ ≤ p: p's norms bound those of p′
        errs.append(_Err(err.e + flushed, err.m, err.l2, err.n))
        log_scale += count * log_z
    composed = compose_heterogeneous(dprvs=dprvs, num_self_compositions=[c for _, c in steps])
    err = _err_heterogeneous(errs)
    tc = composed.domain.ts
    check_finite(composed.pmf, "composed PMF")
    keep = tc >= 0.0
    log_r = log_scale - lam * tc[keep]
    pk = composed.pmf[keep]
    if lam == 0.0:
        out = pk  # r ≡ 1: nothing to untilt
    else:
        out, kappa = untilt_pmf(pk, log_r, lam * float(np.max(np.abs(tc), initial=0.0)),
                                2.0 * _U * (len(steps) + 1) * scale_err)
        log_shrink += math.log1p(-kappa)
        dropped_total += out.size * float(np.finfo(np.float64).smallest_subnormal)  # subnormal results, absolute
    check_finite(out, "untilted composed PMF")
    # |entry error| ≤ r_j·E: the computed PMF may dip below 0 by that much, and no further
    if np.any(out < -np.exp(log_r) * err.e * (1.0 + 1e-6) - 1e-300):
        raise AccountingError("composed PMF: a negative mass beyond its round-off bound (FFT composition failed)")
    # log Σ_{j ≥ i} r_j² (suffix sums in log space), then log E + ½·that
    suffix = np.logaddexp.accumulate((2.0 * log_r)[::-1])[::-1]
    log_bound = math.log(err.e) + 0.5 * suffix if err.e > 0 else np.full(suffix.shape, -np.inf)
    # a negative entry (FFT noise, ≥ −r_j·E: checked above) untilted with relative error κ is not covered by the
    # factor 1/(1 − κ) of `shrink`: ≤ 2κ·r_j·E more, so B(1 + 3κ) (Lemma R9(d))
    log_bound = log_bound + math.log1p(3.0 * (1.0 - math.exp(log_shrink)))
    return _Certified(tc[keep], out, log_bound, math.exp(log_shrink), dropped_total)


def epsilon_for_delta(dprv, delta: float, log_bound: Optional[np.ndarray] = None) -> float:
    r"""The exact ε(δ) of a discrete PRV: the smallest ε ≥ 0 with δ(ε) + B(ε) ≤ δ, δ(ε) = Σ_j p_j (1 − e^{ε − t_j})_+.

    With D1_i = Σ_{j ≥ i} p_j and D2_i = Σ_{j ≥ i} p_j e^{−t_j}, δ(t_i) = D1_i − e^{t_i} D2_i is
    non-increasing in i; for i the first index with δ(t_i) + B_i ≤ δ, on [t_{i−1}, t_i] only atoms j ≥ i count
    (and B = B_i, ``exp(log_bound[i])``, the round-off bound of those atoms, Lemma R3; 0 if not given), so
    δ(ε) = D1_i − e^ε D2_i there and ε = log((D1_i − δ + B_i)/D2_i) solves it exactly (Opacus's ``find_epsilon``,
    without its ± eps_error). ∞ if δ(t_{N−1}) + B > δ. ``dprv``: a DiscretePRV or a :class:`_Certified`.
    AccountingError for a PMF with NaN or ±∞.
    """
    if isinstance(dprv, _Certified):
        t, p = dprv.ts, dprv.pmf
    else:
        t, p = dprv.domain.ts, dprv.pmf
    check_finite(p, "composed PMF")
    if not (delta > 0 and math.isfinite(delta)):
        raise AccountingError(f"epsilon_for_delta: the δ left for the composition is {delta!r} (must be > 0)")
    d1 = np.cumsum(p[::-1])[::-1]
    d2 = np.cumsum((p * np.exp(-t))[::-1])[::-1]
    bound = np.zeros(t.size) if log_bound is None else np.exp(np.minimum(log_bound, 700.0))
    target = delta - bound  # −δ(t_i) ≥ −target_i: both sides non-decreasing in i
    ndelta = np.exp(t) * d2 - d1  # −δ(t_i), non-decreasing
    ok = ndelta >= -target
    if not ok.any():
        return math.inf
    i = int(np.argmax(ok))
    if i == 0:
        if t[0] < 0:  # δ(t_0) ≤ δ with t_0 < 0 (the grid is symmetric): ε = 0
            return 0.0
        if d1[0] <= target[0] or d2[0] <= 0:  # δ(ε) ≤ D1_0 ≤ δ − B for every ε ≥ 0
            return 0.0
        return float(min(max(math.log((d1[0] - target[0]) / d2[0]), 0.0), t[0]))
    if d1[i] <= target[i] or d2[i] <= 0:  # only by round-off (δ(t_{i−1}) > δ forces D1_i > δ): t_i is safe
        return float(max(t[i], 0.0))
    # clamped to [t_{i−1}, t_i]: below t_{i−1} the bound is B_{i−1} (atom i−1 counts) and δ + B > δ_target there
    # (index i−1 failed), so the root of D1_i − e^ε D2_i + B_i = δ can fall below t_{i−1} only because B_i < B_{i−1}
    return float(min(max(math.log((d1[i] - target[i]) / d2[i]), t[i - 1], 0.0), max(t[i], 0.0)))


#: the second, milder tilt tried beside the Esscher λ of ε (:func:`compose_history`)
TILT_MILD = 0.8


def _esscher_tilt(steps, ts: np.ndarray, epsilon: float, half_width: float) -> float:
    r"""λ ≥ 0 whose tilted composed law e^{λt}p/Z has mean ε, capped so that λ·L ≤ 300 on the one-step grid (no
    overflow in the tilted PMFs). Tilting commutes with convolution, so that mean is Σ_s T_s·(the tilted mean of
    step s's one-step PMF on ``ts``): read from the one-step PMFs, not from the composed one, whose far tail is FFT
    round-off (chosen from the composed PMF, a 1e-9 relative change of one step's PMF moved λ from 6.4 to 8.2 and
    the certified ε from 2.4919 to 2.8197 at σ = 1, q = 0.01, T = 300, δ = 1e-10). The means are read from the
    masses in the normal range (≥ 2^{−1022}): every λ certifies, and those below it (in all ≤ N·2^{−1022}, weighted
    by e^{λt} ≤ e^{300} against the largest mass's weight) sit below the means' rounding, while each cost ~35× a
    normal one in exp (Lemma R9(d))."""
    logs = []
    for pmf, count in steps:
        pos = pmf >= _TINY
        logs.append((np.log(pmf[pos]), ts[pos], count))
    if not any(t.size for _, t, _ in logs) or not math.isfinite(epsilon):
        return 0.0

    def tilted_mean(lam: float) -> float:
        total = 0.0
        for lp, t, count in logs:
            w = lp + lam * t
            w = np.exp(w - w.max())
            total += count * float(np.dot(w, t) / w.sum())
        return total

    lo, hi = 0.0, 300.0 / half_width
    if tilted_mean(lo) >= epsilon:
        return 0.0
    if tilted_mean(hi) <= epsilon:
        return hi
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if tilted_mean(mid) < epsilon else (lo, mid)
    return lo


def compose_history(
    segs: Sequence[Segment], delta: float, direction: str, *, eps_error: float, delta_error: float,
    mesh: Optional[float] = None,
) -> CompositionResult:
    """Compose all segments in one adjacency direction; ε bounds at δ (``mesh``: a finer grid if given).

    epsilon_upper = :func:`epsilon_for_delta` (δ·shrink − ρ·M − δ_error, with the FFT round-off bound B(ε) of
    Lemma R3; shrink and M: the one-step PMFs' own round-off, Lemma R5, :class:`_OneStepBudget`) of the dominating
    composition: a certified bound with no ε_error added (the connect-the-dots PRV dominates, and
    composition on the aligned grid is exact up to B); δ_error covers the composed right tail beyond the grid
    (≤ δ_error/8, wrapped by the FFT). Where B is not small against δ the composition is redone tilted by the
    Esscher λ of ε (Lemma R3), which makes B negligible where δ is read; where even that cannot certify δ,
    AccountingError. epsilon_lower/estimate as Opacus defines them (estimate at δ, lower at δ + δ_error minus
    ε_error), not certified; each at most epsilon_upper (lower ≤ estimate ≤ upper: an estimate above a proven
    bound is known to be too high — the plain composition's FFT round-off at small δ and long runs).
    """
    domain, steps, rho_tot, shape_scores, budget = _checked_domain(segs, direction, delta_error, eps_error,
                                                                   mesh=mesh, delta=delta)
    eff_delta = delta - rho_tot
    target = budget.certify(delta, rho_tot, delta_error)  # Lemma R5: the one-step PMFs' round-off
    if target <= 0:
        raise LossBeyondGrid(
            f"epsilon is too large to bound at delta={delta}: the probability that the privacy loss of these steps "
            f"is infinite or beyond the accounting grid is only bounded by {min(rho_tot, 1.0):.3g} (≥ delta); "
            "increase noise_multiplier or delta, "
            "or reduce the number of steps"
        )
    plain = _certified_composition(steps, domain, 0.0)
    est = epsilon_for_delta(plain, eff_delta)
    # Opacus's ε_error is the error of its mesh; a grid the cap made coarser (make_domain) widens it in proportion
    lo_error = eps_error * max(1.0, float(domain.dt) / mesh_for(eps_error, sum(s.steps for s in segs), delta_error))
    lo = max(epsilon_for_delta(plain, eff_delta + delta_error) - lo_error, 0.0)
    up = epsilon_for_delta(plain, target, plain.log_bound)
    naive = epsilon_for_delta(plain, target)
    if up < naive:  # on one PMF the round-off bound only ever raises ε: a smaller one means a step above went wrong
        raise AccountingError(f"composition self-check failed: the certified epsilon {up!r} is below the one without "
                              f"its round-off bound {naive!r} (delta={delta}, direction={direction})")
    # round-off bound at the plain answer; re-compose tilted when it is above 1e-3 of the δ being certified
    i = int(np.searchsorted(plain.ts, naive, side="right")) if math.isfinite(naive) else plain.ts.size
    if math.isfinite(naive) and (not math.isfinite(up) or i >= plain.ts.size
                                 or plain.log_bound[min(i, plain.ts.size - 1)] > math.log(1e-3 * target)):
        lam = _esscher_tilt(steps, domain.ts, naive, float(domain.t_max))
        # every λ certifies; the mean-ε tilt and a milder one, the smaller ε kept (measured σ = 1, q = 0.01, T = 300,
        # δ = 1e-10: 2.4928 at λ, 2.4919 at 0.8λ; other settings equal at 6 decimals)
        for lam_try in ((lam, TILT_MILD * lam) if lam > 0 else ()):
            try:
                tilted = _certified_composition(steps, domain, lam_try)
            except AccountingError:
                # the tilted run failed its own checks (e.g. the untilting factor Π Z^T e^{−λt} overflows on
                # every entry: measured at T = 1e5, λ = 5.3): it only ever lowers the certified `up` of the plain
                # run, which stands on its own; if that is not finite either, the error below is raised
                continue
            left = target * tilted.shrink - tilted.dropped
            if left > 0:
                up = min(up, epsilon_for_delta(tilted, left, tilted.log_bound))
    if math.isfinite(naive) and not math.isfinite(up):
        raise AccountingError(
            f"cannot certify delta={delta} after {sum(t for _, t in steps)} steps: the floating-point round-off of "
            f"the FFT composition (Lemma R3) is not below it; increase delta (or reduce steps)")
    # the estimate is the plain composition's; where the tilted one certified less, the plain one's round-off had
    # raised it past a proven bound: the estimate is taken no higher than that bound (nor the lower end above it)
    est = min(est, up)
    lo = min(lo, est)
    return CompositionResult(direction, float(lo), float(est), float(up), rho_tot, float(domain.t_max),
                             float(domain.dt), shape_scores)


def compose_delta(segs: Sequence[Segment], epsilon: float, direction: str, *, eps_error: float = 0.01,
                  delta_error: float = 1e-12) -> float:
    r"""Certified δ(ε) in one direction: (ρ·M (mass at +∞) + δ of the dominating composed PRV + its round-off bound
    (Lemma R3) + δ_error/4 (tails))/shrink (the one-step PMFs' round-off, Lemma R5)."""
    domain, steps, rho_tot, _, budget = _checked_domain(segs, direction, delta_error, eps_error,
                                                        min_half_width=epsilon + 1.0)
    cert = _certified_composition(steps, domain, 0.0)
    above = cert.ts > epsilon
    i = int(np.argmax(above)) if above.any() else cert.ts.size
    composed = float(np.sum(cert.pmf[above] * -np.expm1(epsilon - cert.ts[above])))
    bound = math.exp(min(float(cert.log_bound[i]), 0.0)) if i < cert.ts.size else 0.0
    return float(min(1.0, budget.bound(composed + bound + delta_error / 4.0, rho_tot)))
