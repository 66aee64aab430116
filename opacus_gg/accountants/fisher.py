r"""Dimension-free Rényi moments over the ℓp ball (p ≤ 2) from the Fisher bound on one coordinate.

Units as in :mod:`.ball_rdp`: noise GG(β, 1) per coordinate, m = 1/noise_multiplier, ‖μ‖_p ≤ m,
L_j(a) = log E_Q[e^{jℓ}] = (j−1)·D_j(GG(a)‖GG(0)). The Fisher bound is

    L_j(a) ≤ c_j·a²,   c_j = j(j−1)·I_β/2,   I_β = E|X|^{2β−2} = β^{(2β−2)/β} Γ(2 − 1/β)/Γ(1/β)   (a ≥ 0),

and where it holds, for p ≤ 2 and every d (‖μ‖_2 ≤ ‖μ‖_p):

    S_j = sup_{‖μ‖_p ≤ m} Σ_i L_j(|μ_i|) ≤ c_j Σ_i μ_i² ≤ c_j m².

Proven at β = 1 (Lemma F1 of docs/accounting.md: L_j'' ≤ j(j−1) from Mironov's closed form; I_1 = 1) and at
β = 2 (equality); for 1 < β < 2 it is a conjecture with numerical evidence only (Conjecture F2) and it is false
for β > 2, so :func:`fisher_log_moments` returns a bound at β = 1 only. :func:`.ball_rdp.step_rdp` takes the
smaller of it and the Lagrangian-dual bound, order by order (both are upper bounds on S_j).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy import special

from ..validation import shift_radius

__all__ = ["fisher_information", "fisher_applies", "fisher_log_moments"]

_FP_SLACK = 1e-12  # relative round-up of c_j·m² (a few ulps are needed)


def fisher_information(beta: float) -> float:
    r"""I_β = E|X|^{2β−2} for X ~ GG(β, 1) (the Fisher information of the location family):
    β^{(2β−2)/β}·Γ(2 − 1/β)/Γ(1/β) (1 at β = 1 and β = 2)."""
    return math.exp((2.0 * beta - 2.0) / beta * math.log(beta) + special.gammaln(2.0 - 1.0 / beta)
                    - special.gammaln(1.0 / beta))


def fisher_applies(beta: float, clip_norm_p: float) -> bool:
    """Whether S_j ≤ c_j m² is proven and used: β = 1 (Lemma F1) and p ≤ 2 (then ‖μ‖_2 ≤ ‖μ‖_p ≤ m)."""
    return beta == 1.0 and clip_norm_p <= 2.0


def fisher_log_moments(max_order: int, noise_multiplier: float, beta: float,
                       clip_norm_p: float) -> Optional[np.ndarray]:
    r"""B[j] = j(j−1)·I_β·m²/2, rounded up, for j = 0 … max_order: an upper bound on S_j over the whole ℓp
    ball for every d, where :func:`fisher_applies` (β = 1, p ≤ 2; I_1 = 1); None elsewhere."""
    if not fisher_applies(beta, clip_norm_p):
        return None
    m = shift_radius(noise_multiplier)
    j = np.arange(int(max_order) + 1, dtype=np.float64)
    return j * (j - 1.0) * (m * m) / 2.0 * (1.0 + _FP_SLACK)
