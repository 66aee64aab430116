r"""Certified composition of Poisson-subsampled GG steps on Opacus's PRV machinery.

For one step with non-subsampled d-dimensional pair (P, Q) (worst shift shape) and sampling rate q,
the two add/remove pairs have the exact hockey-stick curves (α = e^t)

    remove ((1−q)Q + qP  vs  Q):  δ_rem(t) = q · H_{1 + (e^t − 1)/q}(P‖Q)      (H_α = 1 − α for α ≤ 0)
    add    (Q  vs  (1−q)Q + qP):  δ_add(t) = c · H_{α q / c}(Q‖P),  c = 1 − α(1−q)  (0 if c ≤ 0).

Over the candidate shapes we take the upper envelope δ_env(t) = max_k δ_k(t) (a valid privacy
profile: convex in α, δ(α=0) = 1, non-increasing), evaluate it on Opacus's aligned grid t_j
(``Domain.create_aligned``) and turn it into a discrete PRV by "connecting the dots": the discrete
law whose δ equals δ_env at every t_j and is linear in e^t in between; since δ is convex in e^t this
discrete PRV dominates the true one for every ε, so its composition is an upper bound. Its P-masses
are ω_i = α_i (s_i − s_{i−1}) with chord slopes s_j = (δ_{j+1} − δ_j)/(α_{j+1} − α_j),
s_{−1} = (δ_0 − 1)/α_0, s_{N−1} = 0, and a mass δ_env(t_{N−1}) at +∞ that is added to δ.
Composition is Opacus's ``compose_heterogeneous``; ε comes from ``DiscretePRV.compute_epsilon``
with its δ_error / ε_error slack (which covers FFT wrap-around, bounded below by a Chernoff bound).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np
from opacus.accountants.analysis.prv import DiscretePRV, Domain, compose_heterogeneous
from scipy.special import logsumexp

from .spreads import spread_pairs

__all__ = ["Segment", "PairSegment", "CompositionResult", "compose_history", "one_step_delta", "MAX_DOMAIN_POINTS"]

#: refuse (ValueError) rather than allocate more grid points than this
MAX_DOMAIN_POINTS = 60_000_000
#: β ≠ 2: exact envelope values at every CHORD_STRIDE-th point of the composition grid, chords in between
CHORD_STRIDE = 8
#: ... except where |t| ≤ max(0.2, CHORD_EXACT_RATIO · CHORD_STRIDE · mesh): every point exact there
CHORD_EXACT_RATIO = 1000.0


@dataclass(frozen=True)
class PairSegment:
    """``steps`` steps whose non-subsampled pair is the envelope of explicit ``pairs`` ((label, pair), ...)."""

    pairs: Tuple
    sample_rate: float
    steps: int


@dataclass(frozen=True)
class Segment:
    """``steps`` identical steps: (noise_multiplier, sample_rate, beta, dim, clip_norm_p)."""

    noise_multiplier: float
    sample_rate: float
    steps: int
    beta: float
    dim: int
    clip_norm_p: float

    @property
    def mechanism_key(self) -> Tuple[float, float, int, float]:
        """What defines the non-subsampled pair: (σ, β, d, p)."""
        return (self.noise_multiplier, self.beta, self.dim, self.clip_norm_p)


#: (((k₀, k₁), pair), ...) dominating every equal spread k = 1 … d (lru-cached: ``shape_pairs.cache_clear()``)
shape_pairs = spread_pairs


def _direction_args(q: float, t: np.ndarray, direction: str):
    """(α', log α', c) of the hockey-stick divergence the subsampled δ(t) needs (formulas in the module
    docstring); shared by all shapes. c is None for "remove" (δ = q·H_{α'}(P‖Q)); for "add" δ = c·H_{α'}(Q‖P)."""
    c = None
    if direction == "remove":
        arg = np.exp(t) if q == 1.0 else 1.0 + np.expm1(t) / q
    else:
        alpha = np.exp(t)
        c = 1.0 - alpha * (1.0 - q)
        pos = c > 0
        arg = np.where(pos, alpha * q / np.where(pos, c, 1.0), 0.0)
    # exactly the log α each pair would take itself, computed once for all shapes
    return arg, np.log(np.where(arg > 0, arg, 1.0)), c


def _delta_one(pair, q: float, t: np.ndarray, direction: str, args=None) -> np.ndarray:
    """δ(t) of one subsampled pair (formulas in the module docstring)."""
    arg, log_arg, c = _direction_args(q, t, direction) if args is None else args
    if direction == "remove":
        h = pair.h_pq(arg, log_arg)
        return h if q == 1.0 else q * h
    # δ_add = 0 where c ≤ 0 (losses above log(1/(1−q)) do not exist): evaluate the pair only where c > 0
    pos = c > 0
    out = np.zeros(t.shape)
    out[pos] = c[pos] * pair.h_qp(arg[pos], log_arg[pos])
    return out


def _envelope(pairs, q: float, t: np.ndarray, direction: str):
    """max over shapes of δ_k(t) (one direction), with per-shape scores Σ_{t_j ≥ 0} δ_k(t_j)."""
    env = None
    ks, scores = [], []
    args = _direction_args(q, t, direction)
    nonneg = t >= 0
    for k, pair in pairs:
        d = np.clip(_delta_one(pair, q, t, direction, args), 0.0, 1.0)
        ks.append(k)
        scores.append(float(d[nonneg].sum()))
        env = d if env is None else np.maximum(env, d, out=env)
    return env, ks, np.array(scores)


def _chord_envelope(pairs, q: float, s: np.ndarray, direction: str, stride: int, exact_below: float = 0.0):
    r"""Upper bound on max_k δ_k(s) on a monotone grid s from exact values at every ``stride``-th point.

    Every δ_k is convex in α = e^s (a hockey-stick curve of the subsampled pair), so on [s_i, s_{i+1}]
    between two anchors δ_k lies below its chord in α, which lies below the chord of the anchors'
    envelope max_k δ_k(s_i), max_k δ_k(s_{i+1}). That chord, evaluated with the α-fraction
    expm1(s − s_i)/expm1(s_{i+1} − s_i), is returned: a pointwise upper bound that is itself convex in α
    (the connect-the-dots step downstream therefore still dominates). Scores: anchor sums × stride.
    """
    n = s.size
    if stride <= 1 or n < 4 * stride:
        return _envelope(pairs, q, s, direction)
    # anchors: every point where |s| ≤ exact_below (the curves bend most near s = 0, on the scale |s|),
    # every stride-th point beyond, and both ends
    idx = np.arange(n)
    ia = np.flatnonzero((np.abs(s) <= exact_below) | (idx % stride == 0) | (idx == n - 1))
    env_a, ks, scores = _envelope(pairs, q, s[ia], direction)
    seg_idx = np.minimum(np.searchsorted(ia, idx, side="right") - 1, ia.size - 2)
    left, right = ia[seg_idx], ia[seg_idx + 1]
    w = np.expm1(s - s[left]) / np.expm1(s[right] - s[left])
    env = env_a[seg_idx] + np.clip(w, 0.0, 1.0) * (env_a[seg_idx + 1] - env_a[seg_idx])
    env[ia] = env_a  # exact at the anchors
    return env, ks, scores * (n / ia.size)


def one_step_delta(seg, t: np.ndarray, direction: str, stride: int = 1) -> Tuple[np.ndarray, np.ndarray, List[int], np.ndarray]:
    r"""(δ_env, r_env, shape ks, per-shape score) on a sorted grid t.

    δ_env(t) = max_k δ_k(t) is evaluated where t ≥ 0; for t < 0 we instead evaluate the complement
    r(t) = δ(t) − (1 − e^t) = ∫(e^t Q' − P')_+ = e^t · δ_other(−t) (δ of the other direction), which is
    small and accurate where δ ≈ 1 − e^t would lose all digits. ``delta`` holds NaN where not evaluated
    and vice versa. The score of a shape (which shape carries the envelope) is diagnostic only.
    ``stride`` > 1: exact values at every stride-th point only, chords in between (an upper bound, see
    :func:`_chord_envelope`).
    """
    other = "add" if direction == "remove" else "remove"
    pairs = shape_pairs(*seg.mechanism_key) if isinstance(seg, Segment) else seg.pairs
    pos = t >= 0
    delta = np.full(t.shape, np.nan)
    r = np.full(t.shape, np.nan)
    # chords only where the anchor spacing is ≤ 1/CHORD_EXACT_RATIO of |t| (and never for |t| ≤ 0.2)
    exact_below = max(0.2, CHORD_EXACT_RATIO * stride * float(np.max(np.diff(t)))) if stride > 1 and t.size > 1 else 0.0
    env, ks, scores = _chord_envelope(pairs, seg.sample_rate, t[pos], direction, stride, exact_below)
    delta[pos] = env
    # δ_other is convex in e^{−t} as well, so its chord bound is taken in that variable
    renv, _, _ = _chord_envelope(pairs, seg.sample_rate, -t[~pos], other, stride, exact_below)
    r[~pos] = np.exp(t[~pos]) * renv
    return delta, r, ks, scores


def ctd_pmf(t: np.ndarray, delta: np.ndarray, r: np.ndarray) -> Tuple[np.ndarray, float]:
    r"""Dominating discrete P-law on the grid t ("connect the dots"); returns (ω, mass at +∞).

    ω_i = α_i (s_i − s_{i−1}) with chord slopes s_j = (δ_{j+1} − δ_j)/(α_{j+1} − α_j), s_{−1} = (δ_0 − 1)/α_0,
    s_{N−1} = 0. Where t < 0 the slopes are taken from r = δ − 1 + α (s = −1 + Δr/Δα), without cancellation.
    """
    alpha = np.exp(t)
    n = t.size
    da = alpha[:-1] * np.expm1(np.diff(t))
    neg = ~(t >= 0)
    j0 = int(np.argmax(~neg)) if (~neg).any() else n  # first index with t ≥ 0
    full_delta = np.where(neg, 1.0 - alpha + np.nan_to_num(r), np.nan_to_num(delta))
    full_r = np.where(neg, np.nan_to_num(r), np.nan_to_num(delta) - 1.0 + alpha)
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
    ds = np.diff(s)  # s_i − s_{i−1}, i = 0..n−1
    du = np.diff(u)
    # use the r-side differences where both slopes touch t < 0 only
    use_u = np.zeros(n, dtype=bool)
    use_u[: max(j0 - 1, 0)] = True
    omega = np.maximum(alpha * np.where(use_u, du, ds), 0.0)
    return omega, float(np.nan_to_num(delta[-1]) if not neg[-1] else 0.0)


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


def _mesh(eps_error: float, total_steps: int, delta_error: float) -> float:
    """Opacus's mesh: ε_error / sqrt(T · log(12/δ_error) / 2)."""
    return eps_error / math.sqrt(total_steps * math.log(12.0 / delta_error) / 2.0)


def _domain_size(segs: Sequence[Segment], direction: str, delta_error: float, eps_error: float) -> float:
    r"""Half-width L of the grid: composed tails beyond ±L have mass ≤ δ_error/8 each.

    Right tail: Chernoff, P(ΣY ≥ L) ≤ Σ_s T_s ρ_s + exp(Σ_s T_s K_s(λ) − λL), with K_s the log-MGF of a
    coarse dominating discretization (its Rényi divergences upper-bound the true ones) and ρ_s its
    mass at +∞. The left tail needs no bound: in the circular (FFT) composition, mass below −L wraps to
    large losses, which can only increase δ, and mass dropped by the linear convolutions sits where
    (1 − e^{ε−t})_+ = 0.
    """
    L0 = 32.0
    lams = np.concatenate([np.geomspace(1e-3, 1.0, 25), np.geomspace(1.0, 2000.0, 40)[1:]])
    log_target = math.log(delta_error / 8.0)
    prev_rho = math.inf
    while True:
        t = np.linspace(-L0, L0, 40001)
        logk = np.zeros_like(lams)
        rho_tot = 0.0
        for seg in segs:
            dl, rr, _, _ = one_step_delta(seg, t, direction)
            pmf, rho = ctd_pmf(t, dl, rr)
            rho_tot += seg.steps * rho
            nz = pmf > 0  # zero masses contribute nothing to the MGF
            lp, tz = np.log(pmf[nz]), t[nz]
            logk += seg.steps * logsumexp(lp[None, :] + lams[:, None] * tz[None, :], axis=1)
        L = float(np.min((logk - log_target) / lams))
        # ρ (mass at +∞) is added to δ exactly; widening only helps while it still shrinks ρ
        if L <= 0.9 * L0 and (rho_tot <= delta_error / 16.0 or rho_tot >= 0.5 * prev_rho):
            break
        prev_rho = rho_tot
        if L0 >= 512:
            raise ValueError(
                "cannot certify this setting: the composed privacy loss needs a domain wider than ±512 "
                "(epsilon in the hundreds); increase noise_multiplier or reduce steps"
            )
        L0 *= 2.0
    # the left tail needs no bound: composed mass below −L wraps to high losses (pessimistic) or is dropped
    # where (1 − e^{ε−t})_+ = 0
    return max(L, eps_error) + 1.0


@functools.lru_cache(maxsize=4)
def _step_dprv(seg_key: Tuple, direction: str, t_min: float, t_max: float, size: int) -> Tuple[np.ndarray, float, Tuple]:
    """Cached per-segment discrete PRV on a domain: (pmf, mass at +∞, (ks, scores))."""
    seg = Segment(*seg_key)
    t = np.linspace(t_min, t_max, size)
    # β = 2 (one exact Gaussian curve, cheap) keeps every point exact; β ≠ 2 takes exact values at every
    # CHORD_STRIDE-th point and chords in between (an upper bound: δ is convex in e^t)
    stride = 1 if seg.beta == 2.0 else CHORD_STRIDE
    dl, rr, ks, scores = one_step_delta(seg, t, direction, stride)
    pmf, rho = ctd_pmf(t, dl, rr)
    return pmf, rho, (tuple(ks), tuple(scores))


def compose_history(
    segs: Sequence[Segment], delta: float, direction: str, *, eps_error: float, delta_error: float
) -> CompositionResult:
    """Compose all segments in one adjacency direction and return ε bounds at δ."""
    total = sum(s.steps for s in segs)
    L = _domain_size(segs, direction, delta_error, eps_error)
    mesh = _mesh(eps_error, total, delta_error)
    if 2 * L / mesh > MAX_DOMAIN_POINTS:
        raise ValueError(
            f"the PRV grid would need {2 * L / mesh:.3g} points (> {MAX_DOMAIN_POINTS:.0e}) for eps_error="
            f"{eps_error}; increase eps_error or noise_multiplier"
        )
    domain = Domain.create_aligned(-L, L, mesh)
    dprvs, counts = [], []
    rho_tot = 0.0
    shape_scores: Dict[int, float] = {}
    for seg in segs:
        if isinstance(seg, PairSegment):
            dl, rr, ks, scores = one_step_delta(seg, domain.ts, direction)
            pmf, rho = ctd_pmf(domain.ts, dl, rr)
        else:
            key = (seg.noise_multiplier, seg.sample_rate, 1, seg.beta, seg.dim, seg.clip_norm_p)
            pmf, rho, (ks, scores) = _step_dprv(key, direction, domain.t_min, domain.t_max, domain.size)
        rho_tot += seg.steps * rho
        for k, sc in zip(ks, scores):
            shape_scores[k] = shape_scores.get(k, 0.0) + seg.steps * sc
        dprvs.append(DiscretePRV(pmf=pmf, domain=domain))
        counts.append(seg.steps)
    composed = compose_heterogeneous(dprvs=dprvs, num_self_compositions=counts)
    eff_delta = delta - rho_tot
    if eff_delta - delta_error <= 0:
        raise ValueError(f"cannot certify delta={delta}: the numerically truncated mass {rho_tot:.3g} is too large")
    lo, est, up = composed.compute_epsilon(eff_delta, delta_error, eps_error)
    return CompositionResult(direction, float(lo), float(est), float(up), rho_tot, L, mesh, shape_scores)


def compose_delta(segs: Sequence[Segment], epsilon: float, direction: str, *, eps_error: float = 0.01,
                  delta_error: float = 1e-12) -> float:
    r"""Certified δ(ε) in one direction: ρ (mass at +∞) + δ of the dominating composed PRV + δ_error/4 (tails)."""
    total = sum(s.steps for s in segs)
    L = max(_domain_size(segs, direction, delta_error, eps_error), epsilon + 1.0)
    mesh = _mesh(eps_error, total, delta_error)
    if 2 * L / mesh > MAX_DOMAIN_POINTS:
        raise ValueError(f"the PRV grid would need {2 * L / mesh:.3g} points; increase eps_error")
    domain = Domain.create_aligned(-L, L, mesh)
    dprvs, counts, rho_tot = [], [], 0.0
    for seg in segs:
        key = (seg.noise_multiplier, seg.sample_rate, 1, seg.beta, seg.dim, seg.clip_norm_p)
        pmf, rho, _ = _step_dprv(key, direction, domain.t_min, domain.t_max, domain.size)
        rho_tot += seg.steps * rho
        dprvs.append(DiscretePRV(pmf=pmf, domain=domain))
        counts.append(seg.steps)
    composed = compose_heterogeneous(dprvs=dprvs, num_self_compositions=counts)
    return float(min(1.0, rho_tot + composed.compute_delta_estimate(epsilon) + delta_error / 4.0))
