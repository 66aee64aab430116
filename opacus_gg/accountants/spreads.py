r"""Every equal spread k = 1 … d, covered by certified interval bounds (branch and bound).

Units as in :mod:`.shapes`: noise GG(β, 1) per coordinate, m = 1/noise_multiplier, a shift with
‖μ‖_p ≤ m spread equally over k coordinates has a_k = m·k^{−1/p} per coordinate, and its pair
(P_k, Q_k) is the k-fold product of the one-coordinate pair (GG at a_k, GG at 0).

Interval bound (docs/accounting.md, "Every equal spread: the interval bound"): for k₀ ≤ k ≤ k₁,
(P_k, Q_k) is Blackwell-dominated by B[k₀, k₁] = k₁ coordinates each shifted by a_{k₀}, because
(a) a ≤ a′ ⇒ (GG_a, GG_0) ≼ (GG_{a′}, GG_0) (log-concave symmetric location family), (b) domination
tensorizes, (c) an extra shifted coordinate only adds information. Hence every hockey-stick curve
H_α of every k in the interval, and (by (d), Poisson subsampling applies one kernel to both
pairs) every subsampled δ, lies below that of B[k₀, k₁].

Branch and bound: start from the dyadic intervals [2^j, 2^{j+1} − 1] (capped at d − 1) and {d};
keep an interval's bound where its curves H_pq(α), H_qp(α) on :data:`LOG_ALPHA_GRID` are
≤ (1 + τ)·E(α) + η, with E the max over the exact pairs evaluated so far (each interval's lower end
k₀ and d); otherwise bisect it in log k. A single k is its exact pair. The acceptance test only
decides how fine the cover is: rigour comes from every k ∈ [1, d] lying in some kept interval.
The cover computes B[k₀, k₁′] with k₁′ ≥ k₁ rounded up to few binary digits (cheaper powering; by (c)
it dominates B[k₀, k₁]).
"""

from __future__ import annotations

import functools
import math
import os
import contextvars
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

from ..validation import (
    validate_beta,
    validate_clip_norm_p,
    validate_nonnegative,
    validate_positive,
    validate_positive_int,
)
from .discrete import PowerChain, split_to_grid
from .gg_pair import GGPair
from .shapes import candidate_shapes, is_certified, per_coordinate_shift

__all__ = ["SpreadCover", "spread_cover", "spread_pairs", "spread_shift", "interval_bound_pair", "exact_spread_pair",
           "TAU", "ETA", "MAX_PAIRS", "LOG_ALPHA_GRID"]

#: relative tolerance of a kept interval bound: H_bound ≤ (1 + TAU)·E + ETA on the α grid
TAU = 0.01
#: absolute tolerance of the acceptance test (ignores tail values where relative comparison is meaningless)
ETA = 1e-12
#: at most this many pairs (intervals); past it the coarser, still rigorous, bounds are kept
MAX_PAIRS = 128
#: loss-grid points of the discrete k > 1 pairs (formerly composition.SHAPE_GRID_POINTS)
GRID_POINTS = 1 << 13
#: log α where the acceptance test looks: α < 1 and α > 1, dense near α = 1 (what δ_rem / δ_add need)
LOG_ALPHA_GRID = np.concatenate([-np.geomspace(30.0, 1e-4, 160), [0.0], np.geomspace(1e-4, 60.0, 320)])
#: threads building the chains of one refinement round
_THREADS = min(2, os.cpu_count() or 1)


@dataclass(frozen=True)
class SpreadCover:
    """Result of :func:`spread_cover`.

    ``pairs``: ((k₀, k₁), pair), ... sorted by k₀, disjoint intervals whose union is {1, …, d}; the pair
    dominates every equal spread k ∈ [k₀, k₁] (exact pair when k₀ = k₁). ``reference_ks``: the exact
    spreads evaluated (the envelope E of the acceptance test). ``capped``: refinement stopped at
    ``max_pairs`` with intervals still outside tolerance. ``max_excess``: max over kept intervals and the
    α grid of (H_bound − η)/E − 1 (≤ τ unless capped).
    """

    pairs: Tuple[Tuple[Tuple[int, int], object], ...]
    reference_ks: Tuple[int, ...]
    capped: bool
    max_excess: float
    tau: float
    eta: float


def spread_shift(noise_multiplier: float, k: int, clip_norm_p: float) -> float:
    r"""a_k = m·k^{−1/p}, m = 1/noise_multiplier (per-coordinate shift of the spread over k coordinates), rounded
    up: :func:`.shapes.per_coordinate_shift`."""
    return per_coordinate_shift(noise_multiplier, int(k), clip_norm_p)


class _Chain(PowerChain):
    """:class:`.discrete.PowerChain` of the one-coordinate pair with shift a (the exact GGPair for k = 1)."""

    def __init__(self, a: float, beta: float, n: int) -> None:
        self.a, self.beta = a, beta
        super().__init__(split_to_grid(GGPair(a, beta), n), n)

    def power(self, k: int):
        """Dominating pair of k coordinates shifted by a (the exact GGPair for k = 1)."""
        if k == 1:
            return GGPair(self.a, self.beta)
        return super().power(k)


def exact_spread_pair(noise_multiplier: float, beta: float, k: int, clip_norm_p: float, n: int = GRID_POINTS):
    """Pair of the spread over k coordinates (exact GGPair for k = 1, dominating discrete pair otherwise)."""
    return _Chain(spread_shift(noise_multiplier, k, clip_norm_p), beta, n).power(k)


def interval_bound_pair(noise_multiplier: float, beta: float, k0: int, k1: int, clip_norm_p: float,
                        n: int = GRID_POINTS):
    r"""B[k₀, k₁]: k₁ coordinates each shifted by a_{k₀}; dominates every spread k ∈ [k₀, k₁]."""
    if not 1 <= k0 <= k1:
        raise ValueError(f"need 1 <= k0 <= k1, got k0={k0!r}, k1={k1!r}")
    return _Chain(spread_shift(noise_multiplier, k0, clip_norm_p), beta, n).power(k1)


def _cheap_upper(k0: int, k1: int) -> int:
    r"""k₁′ ∈ [k₁, k₁ + (k₁ − k₀)/64] with few binary digits (fewer products in the power chain).

    B[k₀, k₁′] dominates B[k₀, k₁] (Lemma C: more shifted coordinates), so it is an equally valid bound;
    rounding k₁ up to a multiple of the largest power of two that stays within the slack.
    """
    slack = (k1 - k0) // 64
    for s in range(k1.bit_length(), -1, -1):
        up = -(-k1 // (1 << s)) << s
        if up <= k1 + slack:
            return up
    return k1


def _curves(pair) -> np.ndarray:
    """(H_pq, H_qp) on the acceptance grid, stacked."""
    alpha = np.exp(LOG_ALPHA_GRID)
    return np.stack([pair.h_pq(alpha, LOG_ALPHA_GRID), pair.h_qp(alpha, LOG_ALPHA_GRID)])


def _validate(noise_multiplier: float, beta: float, dim: int, clip_norm_p: float, tau: float, eta: float,
              max_pairs: int) -> None:
    """ValueError naming the parameter and its allowed range (the shared validators)."""
    validate_positive(noise_multiplier, "noise_multiplier")
    validate_clip_norm_p(clip_norm_p, validate_beta(beta))
    validate_positive_int(dim, "dim", allow_float=False)
    validate_nonnegative(tau, "tau")
    validate_nonnegative(eta, "eta")
    validate_positive_int(max_pairs, "max_pairs", minimum=2, allow_float=False)


def spread_cover(noise_multiplier: float, beta: float, dim: int, clip_norm_p: float, *, tau: float = TAU,
                 eta: float = ETA, max_pairs: int = MAX_PAIRS, n: int = GRID_POINTS) -> SpreadCover:
    r"""Certified cover of every equal spread k = 1 … d by interval bound pairs (module docstring).

    Exact reductions (no intervals needed, :func:`shapes.is_certified`) are kept from
    :func:`shapes.candidate_shapes`: β = 2 (one 1-D Gaussian pair dominating every direction), p = ∞ (k = d
    contains every other spread) and β = p = 1 (k = 1 dominates the ℓ1 ball); their label is (1, d): the pair
    covers every k.
    """
    _validate(noise_multiplier, beta, dim, clip_norm_p, tau, eta, max_pairs)
    dim = int(dim)
    if is_certified(beta, dim, clip_norm_p):
        shapes = candidate_shapes(noise_multiplier, beta, dim, clip_norm_p)
        (k, a, exact), = shapes  # one shape in every exact reduction
        pair = GGPair(a, beta) if exact else _Chain(a, beta, n).power(k)
        return SpreadCover((((1, dim), pair),), (k,), False, 0.0, tau, eta)

    chains: Dict[int, _Chain] = {}  # one chain per lower end k₀ (shift a_{k₀}): exact k₀ and bound k₁ share it
    exact: Dict[int, np.ndarray] = {}  # k -> curves of the exact spread k
    bounds: Dict[Tuple[int, int], Tuple[object, np.ndarray]] = {}

    def build(iv: Tuple[int, int]):
        k0, k1 = iv
        chain = chains.get(k0) or _Chain(spread_shift(noise_multiplier, k0, clip_norm_p), beta, n)
        ex = chain.power(k0)
        bd = ex if k1 == k0 else chain.power(_cheap_upper(k0, k1))
        return iv, chain, _curves(ex), bd, (None if k1 == k0 else _curves(bd))

    def evaluate(ivs: List[Tuple[int, int]]) -> None:
        # independent chains; numpy/pocketfft release the GIL; largest exponents first
        ivs = sorted(ivs, key=lambda iv: -iv[1])
        if _THREADS > 1 and len(ivs) > 1:
            ctx = contextvars.copy_context()  # the caller's numpy errstate (a context variable) holds in the workers
            with ThreadPoolExecutor(max_workers=_THREADS) as pool:
                out = list(pool.map(lambda iv: ctx.copy().run(build, iv), ivs))
        else:
            out = [build(iv) for iv in ivs]
        for iv, chain, ex_c, bd, bd_c in out:
            chains[iv[0]] = chain
            exact[iv[0]] = ex_c
            bounds[iv] = (bd, ex_c if bd_c is None else bd_c)

    leaves: List[Tuple[int, int]] = []
    j = 0
    while (1 << j) <= dim - 1:
        leaves.append((1 << j, min((1 << (j + 1)) - 1, dim - 1)))
        j += 1
    leaves.append((dim, dim))
    evaluate(leaves)

    def excess(iv: Tuple[int, int], env: np.ndarray) -> float:
        """max over the grid of (H_bound − η)/E − 1 (−inf for a single k)."""
        if iv[0] == iv[1]:
            return -math.inf
        c = bounds[iv][1]
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(c - eta > 0, (c - eta) / env, 0.0)
        return float(np.max(r)) - 1.0

    capped = False
    while True:
        env = np.max(np.stack(list(exact.values())), axis=0)
        # failing leaves, largest absolute excess max(H_B − (1 + τ)E − η) first (what the cap keeps coarse
        # then matters least for δ)
        bad = [(float(np.max(bounds[iv][1] - (1.0 + tau) * env - eta)), iv) for iv in leaves if excess(iv, env) > tau]
        bad = [iv for _, iv in sorted(bad, reverse=True)]
        if not bad:
            break
        room = max_pairs - len(leaves)
        if room <= 0:
            capped = True
            break
        split, new = bad[:room], []
        for iv in split:
            k0, k1 = iv
            km = min(max(int(math.isqrt(k0 * k1)), k0), k1 - 1)
            new += [(k0, km), (km + 1, k1)]
            leaves.remove(iv)
            del bounds[iv]
        leaves += new
        evaluate([iv for iv in new if iv not in bounds])
    env = np.max(np.stack(list(exact.values())), axis=0)
    leaves.sort()
    worst = max((excess(iv, env) for iv in leaves), default=-math.inf)
    return SpreadCover(tuple((iv, bounds[iv][0]) for iv in leaves), tuple(sorted(exact)), capped,
                       max(worst, 0.0), tau, eta)


@functools.lru_cache(maxsize=64)
def spread_pairs(noise_multiplier: float, beta: float, dim: int, clip_norm_p: float) -> Tuple[Tuple[Tuple[int, int], object], ...]:
    """((k₀, k₁), pair), ...: the shape set of the one-step profile (profile.pairs_of), covering every equal spread k = 1 … d."""
    return spread_cover(noise_multiplier, beta, dim, clip_norm_p).pairs
