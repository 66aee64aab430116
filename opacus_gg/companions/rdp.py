r"""Rényi-DP upper bound for Poisson-subsampled β-DP-SGD (a companion to the certified PRV accountant).

Units: noise scale 1, one-coordinate shift ``a = 1/noise_multiplier``; P = GG(a), Q = GG(0) with density
∝ exp(-|x|^β/β). The one-coordinate privacy loss is ℓ = log(dP/dQ) and its moments are

    M(j) = E_Q[e^{jℓ}] = ∫ p^j q^{1-j} dx = exp((j-1)·D_j(P‖Q))      (M(0) = M(1) = 1),

computed by quadrature in log space (breakpoints at 0, a and the integrand's peak), with the quadrature's
error estimate *added* to the integral so the result never rounds down. By reflection x → a - x,
D_α(P‖Q) = D_α(Q‖P). A shift spread equally over k coordinates (``‖μ‖_p = a``, so each coordinate
moves by a_k = a/k^{1/p}) has M_k(j) = M(j; a_k)^k.

Poisson subsampling with rate q, integer order α ≥ 2:

* remove (exact):  E_Q[(1-q+qe^ℓ)^α] = Σ_j C(α,j)(1-q)^{α-j} q^j M(j);
* add (upper bound), the smaller of
  - Jensen (convexity of x^{1-α}):  E_Q[(1-q+qe^ℓ)^{1-α}] ≤ (1-q) + q·M(α),
  - Taylor with Lagrange remainder (f(y) = (1+y)^{1-α}, y = q(e^ℓ-1) ≥ -q, f'' ≤ f''(-q)):
    E_Q[(1-q+qe^ℓ)^{1-α}] ≤ 1 + C(α,2)(1-q)^{-α-1} q² χ², with χ² = M(2) - 1.

RDP(α) = log(·)/(α-1), composed over T steps (×T), maximised over both directions and over the evaluated
shift shapes, then converted to (ε, δ) with Opacus's ``get_privacy_spent`` (Balle et al. 2020). This is an
**RDP upper bound for the evaluated shift shapes**, the same shapes and the same certification rule as the
PRV accountant (:mod:`opacus_gg.accountants.shapes`: spreads k ∈ {1, 2, 4, …} ∪ {dim}, exact reductions at
β = 2 and p = ∞).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import List, Optional, Sequence

import numpy as np
from opacus.accountants.analysis.rdp import get_privacy_spent

from ..accountants.renyi import DEFAULT_ORDERS, log_moment, renyi_divergence, subsampled_rdp
from ..accountants.shapes import is_certified, shape_ks
from ..validation import (
    validate_beta,
    validate_clip_norm_p,
    validate_delta,
    validate_noise_multiplier,
    validate_positive_int,
    validate_sample_rate,
)

__all__ = [
    "DEFAULT_ORDERS",
    "RDPReport",
    "log_moment",
    "renyi_divergence",
    "shift_shapes",
    "subsampled_rdp",
    "compute_rdp_epsilon",
]

def shift_shapes(dim: int, beta: float, clip_norm_p: Optional[float] = None) -> List[int]:
    """Shift shapes evaluated: the spreads k of :func:`opacus_gg.accountants.shapes.shape_ks` (shared)."""
    dim = validate_positive_int(dim, "dim")
    beta = validate_beta(beta)
    return shape_ks(beta, dim, validate_clip_norm_p(clip_norm_p, beta))


@dataclass
class RDPReport:
    """Result of :func:`compute_rdp_epsilon`."""

    epsilon: float
    delta: float
    order: float
    direction: str
    shape_k: int
    shapes: List[int]
    certified: bool  # opacus_gg.accountants.shapes.is_certified (the accountant's rule)
    label: str = "RDP upper bound (for the evaluated shift shapes)"
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain-dict form (JSON friendly)."""
        return asdict(self)


def compute_rdp_epsilon(
    *, noise_multiplier: float, sample_rate: float, steps: int, delta: float, beta: float = 2.0,
    dim: int = 1, clip_norm_p: Optional[float] = None, orders: Optional[Sequence[int]] = None,
) -> RDPReport:
    r"""ε(δ) from the RDP bound: min_α [T·RDP(α) + log((α-1)/α) - (log δ + log α)/(α-1)], max over
    directions and evaluated shapes (Opacus ``get_privacy_spent``; RDP(α) as in the module doc)."""
    beta = validate_beta(beta)
    sigma = validate_noise_multiplier(noise_multiplier, allow_zero=False)
    q = validate_sample_rate(sample_rate)
    steps = validate_positive_int(steps, "steps")
    delta = validate_delta(delta)
    dim = validate_positive_int(dim, "dim")
    p = validate_clip_norm_p(clip_norm_p, beta)
    orders = list(orders) if orders is not None else DEFAULT_ORDERS
    shapes = shift_shapes(dim, beta, p)
    best: Optional[RDPReport] = None
    per_shape = {}
    for k in shapes:
        r = subsampled_rdp(orders, noise_multiplier=sigma, sample_rate=q, beta=beta, k=k, clip_norm_p=p)
        for direction in ("remove", "add"):
            rdp = np.where(np.isfinite(r[direction]), steps * r[direction], np.inf)
            eps, order = get_privacy_spent(orders=orders, rdp=rdp, delta=delta)
            eps = max(float(eps), 0.0)
            per_shape[f"k={k},{direction}"] = eps
            if best is None or eps > best.epsilon:
                best = RDPReport(
                    epsilon=eps, delta=delta, order=float(order), direction=direction, shape_k=k,
                    shapes=shapes, certified=is_certified(beta, dim, p),
                )
    assert best is not None
    best.details = {"per_shape_direction_epsilon": per_shape}
    return best
