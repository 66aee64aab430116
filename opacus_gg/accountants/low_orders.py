r"""Rényi orders between 1 and 2 for the bound over the ℓp ball (docs/accounting.md, "Orders below 2").

Units as in :mod:`.ball_rdp`: noise GG(β, 1) per coordinate, m = 1/noise_multiplier, ‖μ‖_p ≤ m; ℓ = log dP_μ/dQ,
S_α ≥ sup_μ log E_Q[e^{αℓ}] (Lemmas 1–4d of "Every shift", which hold for every real order α ≥ 1).

Where the privacy loss of one step is large (β = p = 3, d = 2410, σ = 1: the worst spreads shift every
coordinate), the Rényi bound's best integer order is 2, the least that Lemma 6 (the binomial expansion) allows,
and the conversion is far from the truth (10498.7 against the worst equal spread's PRV 162.85): the best real
order is near 1. For real 1 < α ≤ 2 (Lemma F):

    (1 + w)^α ≤ 1 + αw + w^α  (w ≥ 0),   so   E_Q[(1 − q + qX)^α] ≤ (1 − q)^{α−1}(1 + (α − 1)q) + q^α·E_Q[X^α]

(X = e^ℓ, E_Q[X] = 1; u = 1 − q, v = qX: (u + v)^α ≤ u^α + αu^{α−1}v + v^α), and the remove direction's one-step
RDP is RDP(α) ≤ log[(1 − q)^{α−1}(1 + (α − 1)q) + q^α e^{S_α}]/(α − 1); the add direction's is at most the remove
direction's (Lemma S, every real order, every pair of the ball being symmetric). RDP composes over steps at every
real α > 1 and converts by Balle et al. (2020, Thm 21), as Opacus's ``get_privacy_spent`` does.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from .ball_rdp import _ball_log_moment_rounds, _best_order, _log_moment_uppers_by_order, _quadratic_bounds_by_order
from .checks import AccountingError
from .history import Segment, normalize_history

__all__ = ["LOW_ORDERS", "ball_log_moment_real", "low_order_rdp", "low_order_epsilon", "applies"]

#: the real orders in (1, 2) tried (the conversion's best order is flat around its minimum: β = p = 3,
#: d = 2410, σ = 1, q = 0.01, T = 1000 has it near 1.2, β = p = 2.5 near 1.75)
LOW_ORDERS = (1.02, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9)
_FP_SLACK = 1e-12  # relative slack on every rounded-up sum (as in :mod:`.ball_rdp`)

#: {(α, σ, β, d, p): S_α bound}
_cache: Dict[Tuple[float, float, float, int, float], float] = {}


def ball_log_moment_real(alpha: float, noise_multiplier: float, beta: float, dim: int, clip_norm_p: float) -> float:
    r"""Upper bound on S_α = sup_{‖μ‖_p ≤ m} Σ_i L_α(|μ_i|) at a real order 1 < α ≤ 2: the dual of
    :func:`.ball_rdp.ball_log_moment` (Lemmas 3, 4(a), 4d: monotone, convex in the shift, at every real order),
    with the per-coordinate moments enclosed at the real order α (Lemma Q) and the quadratic bound (b) taken at
    order 2: K_α(a) ≤ K_2(a) (each term of Lemma 4b's bracket grows with j ≥ 1), so L_α(a) ≤ K_2(a)·a²."""
    if not 1.0 < alpha <= 2.0:
        raise ValueError(f"ball_log_moment_real: the order must be in (1, 2], got {alpha!r}")
    key = (float(alpha), float(noise_multiplier), float(beta), int(dim), float(clip_norm_p))
    if key in _cache:
        return _cache[key]
    run = _ball_log_moment_rounds(float(alpha), noise_multiplier, beta, dim, clip_norm_p)
    try:
        shifts = next(run)
        while True:
            shifts = np.asarray(shifts, dtype=np.float64)
            G = _log_moment_uppers_by_order({float(alpha): shifts}, beta)[float(alpha)]
            K = _quadratic_bounds_by_order({2: shifts}, beta)[2]
            shifts = run.send((G, K))
    except StopIteration as done:
        bound = float(done.value)
    if math.isnan(bound) or bound < 0.0:
        raise AccountingError(f"ball log-moment at order {alpha}: not a number >= 0 ({bound!r})")
    _cache[key] = bound
    return bound


def low_order_rdp(alpha: float, sample_rate: float, log_moment: float) -> float:
    r"""One step's RDP at real order 1 < α ≤ 2 from S ≥ log E_Q[X^α] (Lemma F), both directions:
    log[(1 − q)^{α−1}(1 + (α − 1)q) + q^α e^{S}]/(α − 1), rounded up by 1e-12 relative (a sum of two positive
    terms, each within a few ulps of its operands: 1e-12 × their size added); q = 1: S/(α − 1)."""
    q = float(sample_rate)
    if not 1.0 < alpha <= 2.0:
        raise ValueError(f"low_order_rdp: the order must be in (1, 2], got {alpha!r}")
    if math.isinf(log_moment):
        return math.inf
    head = (alpha - 1.0) * math.log1p(-q) + math.log1p((alpha - 1.0) * q) if q < 1.0 else -math.inf
    tail = alpha * math.log(q) + log_moment
    total = float(np.logaddexp(head, tail))
    size = abs(tail) + (abs(head) if q < 1.0 else 0.0) + 1.0  # the operands' size: their round-off is ≪ 1e-12 of it
    return (max(total, 0.0) + _FP_SLACK * size) / (alpha - 1.0)


def applies(segments: Sequence[Segment]) -> bool:
    """Whether the published Rényi bound also tries :data:`LOW_ORDERS` where its best integer order is 2 (a cost
    gate, not a soundness one: every order gives a bound): every segment has d > 1, p < ∞ and no count query, and
    some segment has β > 2 (there the dominating Gaussian of Lemma N, whose cheap test reads the integer orders'
    lower end, is not tried, so the published number is the same on every path)."""
    return (bool(segments) and all(s.dim > 1 and not math.isinf(s.clip_norm_p) and s.count_noise_multiplier is None
                                   for s in segments) and any(s.beta > 2.0 for s in segments))


def low_order_epsilon(segments: Sequence, delta: float,
                      orders: Sequence[float] = LOW_ORDERS) -> Tuple[float, float]:
    r"""(ε, α): min over the orders tried of Balle et al.'s conversion of Σ_segments steps·RDP_seg(α)
    (:func:`low_order_rdp` with :func:`ball_log_moment_real`); a proven ε(δ) for every shift in the ℓp ball
    (Lemma F), add and remove. Orders: ``orders``, then steps of :data:`REFINE_STEP` within
    ±:data:`REFINE_SPAN` of the best one (a min over any orders in (1, 2] is a bound; the refinement gains
    ≤ 1 %: 252.52 → 250.76 at β = p = 3, d = 2410, σ = 1, q = 0.01, T = 1000, δ = 1e-5)."""
    segs = list(segments) if all(isinstance(s, Segment) for s in segments) else normalize_history(segments)
    if not segs:
        return 0.0, float("nan")
    if any(s.noise_multiplier == 0.0 for s in segs):
        return math.inf, float("nan")
    best = _epsilon_at(segs, delta, [float(a) for a in orders])
    if math.isfinite(best[0]):
        near = [round(best[1] + k * REFINE_STEP, 10) for k in range(-REFINE_SPAN, REFINE_SPAN + 1) if k != 0]
        best = min(best, _epsilon_at(segs, delta, [a for a in near if 1.0 < a <= 2.0]))
    return best


#: :func:`low_order_epsilon` refines around the best order in these steps, this many on each side
REFINE_STEP = 0.01
REFINE_SPAN = 4


def _epsilon_at(segs: list, delta: float, orders: list) -> Tuple[float, float]:
    """(ε, α) of :func:`low_order_epsilon` at exactly these orders ((∞, nan) where none is finite)."""
    if not orders:
        return math.inf, float("nan")
    rdp = np.zeros(len(orders))
    for s in segs:
        for i, a in enumerate(orders):
            S = ball_log_moment_real(a, s.noise_multiplier, s.beta, s.dim, s.clip_norm_p)
            rdp[i] += s.steps * low_order_rdp(a, s.sample_rate, S)
    if not np.isfinite(rdp).any():
        return math.inf, float("nan")
    return _best_order(np.where(np.isfinite(rdp), rdp * (1.0 + _FP_SLACK), np.inf), orders, delta)


def clear_cache() -> None:
    """Forget the S_α bounds computed (the next call is cold)."""
    _cache.clear()
