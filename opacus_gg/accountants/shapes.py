r"""Candidate worst-case shift shapes for d-dimensional GG noise under ℓp clipping, and when they certify.

The one definition used by the PRV accountant, :mod:`opacus_gg.companions.rdp` and :mod:`opacus_gg.companions.clt`.

Units: noise GG(β, 1) per coordinate, sensitivity m = 1/noise_multiplier. A shift μ with ‖μ‖_p ≤ m
spread equally over k coordinates has a_k = m·k^{−1/p} per coordinate (p = ∞: a_k = m); its privacy
pair is the k-fold product of the one-coordinate pair with shift a_k. Every shift here is the least float ≥ its
exact real value (m: :func:`opacus_gg.validation.shift_radius`; a_k, the β = 2 norm and m^p: decided in interval
arithmetic, :func:`_least_float_above`), so a bound at the float shift bounds the stated mechanism (Lemma A).

Exact reductions (no search needed):
* β = 2: the Gaussian pair depends on ‖μ‖_2 only (rotation invariance), and max ‖μ‖_2 over the ℓp ball
  is m for p ≤ 2 (one-hot) and m·d^{1/2−1/p} for p > 2 (all coordinates): one exact 1-D pair.
* p = ∞: every coordinate may move by m; the all-coordinates shape k = d dominates every other
  (it is a product containing each of them).
* β = p = 1: Lap_b ⊗ Lap_c ≼ Lap_{b+c}, so every shift with ‖μ‖₁ ≤ m is dominated by one coordinate
  shifted by m (docs/accounting.md, "β = p = 1: the ℓ1 ball reduces to one coordinate").
Otherwise the PRV accountant covers every equal spread k = 1 … d by interval bounds (:mod:`.spreads`,
which starts from the spreads of :func:`shape_ks`), and the companions evaluate the spreads of
:func:`shape_ks` only; neither covers unequal shifts, which the proven bound of :mod:`.ball_rdp` does.
"""

from __future__ import annotations

import functools
import math
from typing import List, Tuple

from mpmath import libmp
from mpmath.ctx_iv import MPIntervalContext

from ..validation import shift_radius

__all__ = ["shape_ks", "per_coordinate_shift", "l2_shift", "radius_power", "exact_up", "candidate_shapes", "is_certified"]

#: mpmath's interval arithmetic, a private context at 80 bits (each enclosure is ~2^{−75} wide, relative; any
#: precision gives a sound enclosure, this one a float at most one above the least)
_IV = MPIntervalContext()
_IV.prec = 80


def shape_ks(beta: float, dim: int, clip_norm_p: float) -> List[int]:
    r"""The spreads k evaluated: [1] (β = 2, p ≤ 2, or d = 1, or β = p = 1), [d] (β = 2 with p > 2, or
    p = ∞), else {1, 2, 4, …} ∪ {d}."""
    p = clip_norm_p
    if dim == 1 or _laplace_l1(beta, p):
        return [1]
    if beta == 2.0:
        return [1] if p <= 2.0 else [dim]
    if math.isinf(p):
        return [dim]
    ks = []
    k = 1
    while k < dim:
        ks.append(k)
        k *= 2
    ks.append(dim)
    return ks


def _least_float_above(x) -> float:
    """The least float ≥ the upper end of the mpmath interval ``x``: converted rounding toward +∞, then checked in
    exact comparisons (raw mpf values, independent of any mpmath context's precision)."""
    hi = x._mpi_[1]
    f = libmp.to_float(hi, rnd=libmp.round_ceiling)
    while libmp.mpf_lt(libmp.from_float(f), hi):
        f = math.nextafter(f, math.inf)
    while not libmp.mpf_lt(libmp.from_float(math.nextafter(f, -math.inf)), hi):
        f = math.nextafter(f, -math.inf)
    return f


def exact_up(expr) -> float:
    r"""The least float ≥ the exact real ``expr(c)`` (``expr`` builds it in the interval context c from exact
    floats): interval arithmetic encloses the exact value (every operation rounded outward) and
    :func:`_least_float_above` rounds the enclosure's upper end up; so the result is ≥ the exact value and at most
    one float above the least float ≥ it (only where the exact value lies within the enclosure's width of a float)."""
    return _least_float_above(expr(_IV))


@functools.lru_cache(maxsize=4096)
def per_coordinate_shift(noise_multiplier: float, k: int, clip_norm_p: float) -> float:
    r"""a_k = m·k^{−1/p} with m = 1/noise_multiplier (p = ∞ or k = 1: a_k = m), rounded up (module docstring)."""
    if math.isinf(clip_norm_p) or k == 1:
        return shift_radius(noise_multiplier)
    return exact_up(lambda c: c.mpf(k) ** (-(1 / c.mpf(clip_norm_p))) / c.mpf(noise_multiplier))


@functools.lru_cache(maxsize=4096)
def l2_shift(noise_multiplier: float, k: int, clip_norm_p: float) -> float:
    r"""‖μ‖_2 = m·k^{1/2−1/p} of the spread over k coordinates (p = ∞: m·√k), rounded up (module docstring)."""
    if k == 1:
        return shift_radius(noise_multiplier)
    if math.isinf(clip_norm_p):
        return exact_up(lambda c: c.sqrt(c.mpf(k)) / c.mpf(noise_multiplier))
    return exact_up(lambda c: c.mpf(k) ** (c.mpf(0.5) - 1 / c.mpf(clip_norm_p)) / c.mpf(noise_multiplier))


@functools.lru_cache(maxsize=1024)
def radius_power(noise_multiplier: float, clip_norm_p: float) -> float:
    r"""m^p = (1/σ)^p, the p-mass budget of the ℓp ball, rounded up (module docstring; finite p ≥ 1)."""
    return exact_up(lambda c: (1 / c.mpf(noise_multiplier)) ** c.mpf(clip_norm_p))


def candidate_shapes(noise_multiplier: float, beta: float, dim: int, clip_norm_p: float) -> List[Tuple[int, float, bool]]:
    r"""List of (k, a, exact_1d): shape spread over k coordinates with per-coordinate shift a.

    ``exact_1d`` marks a shape that equals the one-coordinate pair with shift ``a`` (β = 2 reduction:
    a = ‖μ‖_2 = √k·a_k; and k = 1).
    """
    out = []
    for k in shape_ks(beta, dim, clip_norm_p):
        if beta == 2.0 and k > 1:  # ‖μ‖_2 = m·k^{1/2−1/p}
            out.append((k, l2_shift(noise_multiplier, k, clip_norm_p), True))
        else:
            out.append((k, per_coordinate_shift(noise_multiplier, k, clip_norm_p), k == 1))
    return out


def _laplace_l1(beta: float, clip_norm_p: float) -> bool:
    """β = p = 1: the one-coordinate shift by m dominates the whole ℓ1 ball (Lemma L4 of docs/accounting.md)."""
    return beta == 1.0 and clip_norm_p == 1.0


def is_certified(beta: float, dim: int, clip_norm_p: float) -> bool:
    """Whether the equal-spread PRV envelope is itself the worst case over EVERY shift (so its ε is proven):
    β = 2 (rotation invariance), d = 1, p = ∞ (the all-coordinates shape dominates every vertex), or β = p = 1
    (one coordinate shifted by m dominates every shift in the ℓ1 ball). Otherwise the accountant publishes the
    proven Rényi bound over the ℓp ball (:mod:`.ball_rdp`) and the equal-spread PRV ε beside it, labelled
    "over equal spreads"."""
    return beta == 2.0 or dim == 1 or math.isinf(clip_norm_p) or _laplace_l1(beta, clip_norm_p)
