"""Test-only helper: the privacy pair of an arbitrary shift vector (product of one-coordinate pairs)."""

from __future__ import annotations

from opacus_gg.accountants.discrete import compose_aligned, split_to_grid
from opacus_gg.accountants.gg_pair import GGPair


def product_pair(shifts, beta: float, n: int = 1 << 13):
    r"""Pair of an arbitrary shift vector μ (coordinates |μ_i|): the product of one-coordinate pairs.

    A single non-zero coordinate gives the exact :class:`GGPair`; otherwise a dominating
    :class:`DiscretePair` (each factor split onto a grid, products re-gridded). Used to check the
    worst-case shapes against arbitrary directions.
    """
    a = [abs(float(x)) for x in shifts if abs(float(x)) > 0]
    if not a:
        raise ValueError("shifts must contain a non-zero coordinate")
    if len(a) == 1:
        return GGPair(a[0], beta)
    result = split_to_grid(GGPair(a[0], beta), n)
    for ai in a[1:]:
        result = compose_aligned(result, split_to_grid(GGPair(ai, beta), n)).regrid(n)
    return result
