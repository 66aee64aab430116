r"""Composition of Poisson-subsampled GG steps on Opacus's PRV machinery: one core for ε and δ.

Each segment's one-step profile (:mod:`.profile`) is discretized dominatingly on one aligned grid
(:mod:`.discretization`), and the segments are composed with Opacus's ``compose_heterogeneous``
(exact on an aligned grid up to FFT wrap-around). The masses ρ_s at +∞ add T_s·ρ_s to δ. ε comes
from ``DiscretePRV.compute_epsilon`` with its δ_error / ε_error slack (which covers FFT wrap-around,
bounded below by a Chernoff bound); δ(ε) is ρ + the composed δ + δ_error/4 (tails).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Sequence, Tuple

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
            key = (seg.noise_multiplier, seg.sample_rate, 1, seg.beta, seg.dim, seg.clip_norm_p)
            pmf, rho, (ks, scores) = step_dprv(key, direction, domain.t_min, domain.t_max, domain.size)
        rho_tot += seg.steps * rho
        for k, sc in zip(ks, scores):
            shape_scores[k] = shape_scores.get(k, 0.0) + seg.steps * sc
        dprvs.append(DiscretePRV(pmf=pmf, domain=domain))
        counts.append(seg.steps)
    return compose_heterogeneous(dprvs=dprvs, num_self_compositions=counts), rho_tot, shape_scores


def compose_history(
    segs: Sequence[Segment], delta: float, direction: str, *, eps_error: float, delta_error: float
) -> CompositionResult:
    """Compose all segments in one adjacency direction and return ε bounds at δ."""
    domain = make_domain(segs, direction, delta_error, eps_error)
    composed, rho_tot, shape_scores = _compose(segs, direction, domain)
    eff_delta = delta - rho_tot
    if eff_delta - delta_error <= 0:
        raise ValueError(
            f"epsilon is too large to bound at delta={delta}: the privacy loss of these steps is infinite or beyond "
            f"the accounting grid with probability {rho_tot:.3g} (≥ delta); increase noise_multiplier or delta, "
            "or reduce the number of steps"
        )
    lo, est, up = composed.compute_epsilon(eff_delta, delta_error, eps_error)
    return CompositionResult(direction, float(lo), float(est), float(up), rho_tot, float(domain.t_max),
                             float(domain.dt), shape_scores)


def compose_delta(segs: Sequence[Segment], epsilon: float, direction: str, *, eps_error: float = 0.01,
                  delta_error: float = 1e-12) -> float:
    r"""Certified δ(ε) in one direction: ρ (mass at +∞) + δ of the dominating composed PRV + δ_error/4 (tails)."""
    domain = make_domain(segs, direction, delta_error, eps_error, min_half_width=epsilon + 1.0)
    composed, rho_tot, _ = _compose(segs, direction, domain)
    return float(min(1.0, rho_tot + composed.compute_delta_estimate(epsilon) + delta_error / 4.0))
