r"""Composition of Poisson-subsampled GG steps on Opacus's PRV machinery: one core for ε and δ.

Each segment's one-step profile (:mod:`.profile`) is discretized dominatingly on one aligned grid
(:mod:`.discretization`), and the segments are composed with Opacus's ``compose_heterogeneous``
(exact on an aligned grid up to FFT wrap-around). The masses ρ_s at +∞ add T_s·ρ_s to δ. ε comes
from ``DiscretePRV.compute_epsilon`` with its δ_error / ε_error slack (which covers FFT wrap-around,
bounded below by a Chernoff bound); δ(ε) is ρ + the composed δ + δ_error/4 (tails).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
from opacus.accountants.analysis.prv import DiscretePRV, Domain, compose_heterogeneous

from .discretization import ctd_pmf, make_domain, step_dprv
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


def _compose(segs: Sequence, direction: str, domain: Domain) -> Tuple[DiscretePRV, float, Dict[int, float]]:
    """(composed discrete PRV, total mass at +∞ Σ_s T_s ρ_s, per-shape scores) of all segments on ``domain``."""
    dprvs, counts = [], []
    rho_tot = 0.0
    shape_scores: Dict[int, float] = {}
    for seg in segs:
        if isinstance(seg, PairSegment):
            dl, rr, ks, scores = one_step_delta(seg, domain.ts, direction)
            pmf, rho = ctd_pmf(domain.ts, dl, rr)
        else:
            pmf, rho, (ks, scores) = step_dprv(seg.step_key, direction, domain.t_min, domain.t_max, domain.size)
        rho_tot += seg.steps * rho
        for k, sc in zip(ks, scores):
            shape_scores[k] = shape_scores.get(k, 0.0) + seg.steps * sc
        dprvs.append(DiscretePRV(pmf=pmf, domain=domain))
        counts.append(seg.steps)
    return compose_heterogeneous(dprvs=dprvs, num_self_compositions=counts), rho_tot, shape_scores


def epsilon_for_delta(dprv: DiscretePRV, delta: float) -> float:
    r"""The exact ε(δ) of a discrete PRV: the smallest ε ≥ 0 with δ(ε) = Σ_j p_j (1 − e^{ε − t_j})_+ ≤ δ.

    With D1_i = Σ_{j ≥ i} p_j and D2_i = Σ_{j ≥ i} p_j e^{−t_j}, δ(t_i) = D1_i − e^{t_i} D2_i is
    non-increasing in i; for i the first index with δ(t_i) ≤ δ, on [t_{i−1}, t_i] only atoms j ≥ i count,
    so δ(ε) = D1_i − e^ε D2_i there and ε = log((D1_i − δ)/D2_i) solves δ(ε) = δ exactly (Opacus's
    ``find_epsilon``, without its ± eps_error). ∞ if δ(t_{N−1}) > δ.
    """
    t, p = dprv.domain.ts, dprv.pmf
    d1 = np.cumsum(p[::-1])[::-1]
    d2 = np.cumsum((p * np.exp(-t))[::-1])[::-1]
    ndelta = np.exp(t) * d2 - d1  # −δ(t_i), non-decreasing
    i = int(np.searchsorted(ndelta, -delta, side="left"))
    if i >= t.size:
        return math.inf
    if i == 0:  # δ(t_0) ≤ δ with t_0 < 0 (the grid is symmetric): ε = 0
        return 0.0
    if d1[i] <= delta or d2[i] <= 0:  # only by round-off (δ(t_{i−1}) > δ forces D1_i > δ): t_i is safe
        return float(max(t[i], 0.0))
    return float(min(max(math.log((d1[i] - delta) / d2[i]), 0.0), max(t[i], 0.0)))


def compose_history(
    segs: Sequence[Segment], delta: float, direction: str, *, eps_error: float, delta_error: float,
    mesh: Optional[float] = None,
) -> CompositionResult:
    """Compose all segments in one adjacency direction; ε bounds at δ (``mesh``: a finer grid if given).

    epsilon_upper = :func:`epsilon_for_delta` (δ − ρ − δ_error) of the dominating composition: a certified
    bound with no ε_error added (the connect-the-dots PRV dominates, and composition on the aligned grid is
    exact); δ_error covers the composed right tail beyond the grid (≤ δ_error/8, wrapped by the FFT) and
    round-off. epsilon_lower/estimate are Opacus's (estimate at δ, lower at δ + δ_error minus ε_error).
    """
    domain = make_domain(segs, direction, delta_error, eps_error, mesh=mesh)
    composed, rho_tot, shape_scores = _compose(segs, direction, domain)
    eff_delta = delta - rho_tot
    if eff_delta - delta_error <= 0:
        raise ValueError(
            f"epsilon is too large to bound at delta={delta}: the privacy loss of these steps is infinite or beyond "
            f"the accounting grid with probability {rho_tot:.3g} (≥ delta); increase noise_multiplier or delta, "
            "or reduce the number of steps"
        )
    lo, est, _ = composed.compute_epsilon(eff_delta, delta_error, eps_error)
    up = epsilon_for_delta(composed, eff_delta - delta_error)
    return CompositionResult(direction, float(lo), float(est), float(up), rho_tot, float(domain.t_max),
                             float(domain.dt), shape_scores)


def compose_delta(segs: Sequence[Segment], epsilon: float, direction: str, *, eps_error: float = 0.01,
                  delta_error: float = 1e-12) -> float:
    r"""Certified δ(ε) in one direction: ρ (mass at +∞) + δ of the dominating composed PRV + δ_error/4 (tails)."""
    domain = make_domain(segs, direction, delta_error, eps_error, min_half_width=epsilon + 1.0)
    composed, rho_tot, _ = _compose(segs, direction, domain)
    return float(min(1.0, rho_tot + composed.compute_delta_estimate(epsilon) + delta_error / 4.0))
