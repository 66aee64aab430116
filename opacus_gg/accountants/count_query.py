r"""A noisy count released with the clipped sum: one more coordinate of the step's pair.

Adaptive clipping (:mod:`opacus_gg.optimizers.adaptive`) releases, from the same Poisson batch, the noisy
clipped sum and a noisy count of sensitivity Δ with Gaussian noise of std σ_c·Δ. In noise units the count
is one Gaussian coordinate with shift c = 1/σ_c (either sign: the Gaussian is symmetric), so the step's
non-subsampled pair is the product (P ⊗ N(c, 1), Q ⊗ N(0, 1)) of the shift's pair (P, Q) and the count's,
and Poisson subsampling acts on that product (docs/accounting.md, "Adaptive clipping: the count query
inside the accountant").

* PRV path (:func:`count_pairs`): each shape pair of :func:`.spreads.spread_pairs` times the count pair.
  β = 2: the product of two Gaussian shifts a and c is one Gaussian shift √(a² + c²) (rotation
  invariance), exact. Otherwise both pairs are discretized dominatingly (:func:`.discrete.split_to_grid`)
  and multiplied by :func:`.discrete.compose_aligned`, the product of the k-coordinate shapes.
* Rényi path: the count adds its Gaussian log-moment j(j−1)c²/2 at every order j (:func:`count_log_moments`).
"""

from __future__ import annotations

import functools
import math
from typing import Tuple

import numpy as np

from ..validation import shift_radius
from .discrete import DiscretePair, compose_aligned, split_to_grid
from .gg_pair import GGPair
from .spreads import GRID_POINTS, spread_pairs

__all__ = ["count_pair_product", "count_pairs", "count_log_moments"]


def count_pair_product(pair, count_shift: float, n: int = GRID_POINTS):
    r"""(P ⊗ N(c, 1), Q ⊗ N(0, 1)) of a shape pair (P, Q) and the count's Gaussian pair with shift c.

    An exact Gaussian pair (β = 2) gives the exact Gaussian pair with shift √(a² + c²); any other pair gives
    a discrete pair on ≤ ``n`` loss points that dominates the product (each factor's discretization
    dominates it, the product of discrete pairs is exact, re-gridding dominates).
    """
    if isinstance(pair, GGPair) and pair.beta == 2.0:
        return GGPair(math.hypot(pair.a, count_shift), 2.0)
    base = pair if isinstance(pair, DiscretePair) else split_to_grid(pair, n)
    return compose_aligned(base, split_to_grid(GGPair(count_shift, 2.0), n)).regrid(n)


@functools.lru_cache(maxsize=64)
def count_pairs(noise_multiplier: float, beta: float, dim: int, clip_norm_p: float,
                count_noise_multiplier: float) -> Tuple:
    """((label, pair), ...): :func:`.spreads.spread_pairs` with every pair multiplied by the count's pair
    (shift 1/count_noise_multiplier); the shape set of a step that also releases the noisy count."""
    c = shift_radius(count_noise_multiplier)
    return tuple((label, count_pair_product(pair, c))
                 for label, pair in spread_pairs(noise_multiplier, beta, dim, clip_norm_p))


def count_log_moments(max_order: int, count_noise_multiplier: float) -> np.ndarray:
    r"""log E_Q[e^{jℓ}] = j(j−1)c²/2 of the count's Gaussian pair (c = 1/σ_c), j = 0 … ``max_order``, rounded up:
    c = :func:`.validation.shift_radius` (≥ 1/σ_c), then two rounded operations (c·c, its product with the exact
    integer j(j−1) < 2^53; the halving is exact), each within a factor 1 ± u of exact (u = 2^{−53}); three steps
    up by an ulp (each ≥ u times the value) restore ≥ the exact value: (1 − u)²(1 + 3u) ≥ 1."""
    j = np.arange(int(max_order) + 1, dtype=np.float64)
    c = shift_radius(count_noise_multiplier)
    out = j * (j - 1.0) * (c * c) / 2.0
    for _ in range(3):
        out = np.nextafter(out, np.inf)
    out[:2] = 0.0  # j = 0, 1: exactly 0
    return out
