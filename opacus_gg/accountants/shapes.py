r"""Candidate worst-case shift shapes for d-dimensional GG noise under ℓp clipping.

Units: noise GG(β, 1) per coordinate, sensitivity m = 1/noise_multiplier. A shift μ with ‖μ‖_p ≤ m
spread equally over k coordinates has a_k = m·k^{−1/p} per coordinate (p = ∞: a_k = m); its privacy
pair is the k-fold product of the one-coordinate pair with shift a_k.

Exact reductions (no search needed):
* β = 2: the Gaussian pair depends on ‖μ‖_2 only (rotation invariance), and max ‖μ‖_2 over the ℓp ball
  is m for p ≤ 2 (one-hot) and m·d^{1/2−1/p} for p > 2 (all coordinates): one exact 1-D pair.
* p = ∞: every coordinate may move by m; the all-coordinates shape k = d dominates every other
  (it is a product containing each of them).
Otherwise equal spreads over k ∈ {1, 2, 4, …} ∪ {d} are evaluated and the upper envelope is used.
"""

from __future__ import annotations

import math
import warnings
from typing import List, Tuple

__all__ = ["candidate_shapes", "warn_if_dimension_dependent"]


def candidate_shapes(noise_multiplier: float, beta: float, dim: int, clip_norm_p: float) -> List[Tuple[int, float, bool]]:
    r"""List of (k, a, exact_1d): shape spread over k coordinates with per-coordinate shift a.

    ``exact_1d`` marks a shape that equals the one-coordinate pair with shift ``a`` (β = 2 reduction).
    """
    m = 1.0 / noise_multiplier
    p = clip_norm_p
    if beta == 2.0:
        if p <= 2.0 or dim == 1:
            return [(1, m, True)]
        return [(dim, m * dim ** (0.5 - 1.0 / p), True)]
    if math.isinf(p):
        return [(dim, m, dim == 1)]
    ks = []
    k = 1
    while k < dim:
        ks.append(k)
        k *= 2
    ks.append(dim)
    return [(k, m * k ** (-1.0 / p), k == 1) for k in ks]


def warn_if_dimension_dependent(beta: float, dim: int, clip_norm_p: float) -> None:
    """UserWarning for β > 2, d > 1, finite p: ε grows with d when p > 2, and is not certified over all directions."""
    if beta > 2.0 and dim > 1 and not math.isinf(clip_norm_p):
        grows = (
            f"the worst-case shift spreads over many coordinates and epsilon grows with dim={dim} (the GG "
            "paper's dimension independence does not hold for beta != 2); " if clip_norm_p > 2.0 else ""
        )
        warnings.warn(
            f"beta={beta} > 2 with clip_norm_p={clip_norm_p}: {grows}the reported epsilon covers equal-spread "
            "shifts only and is NOT certified against every shift direction (report.certified=False). "
            "Consider clip_norm_p=2 with beta<=2, or beta<=2.",
            UserWarning,
            stacklevel=3,
        )
