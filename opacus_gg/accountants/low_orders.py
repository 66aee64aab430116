r"""Rényi orders between 1 and 2 for the bound over the ℓp ball (docs/accounting.md, "Orders below 2").

Units as in :mod:`.ball_rdp`: noise GG(β, 1) per coordinate, m = 1/noise_multiplier, ‖μ‖_p ≤ m; ℓ = log dP_μ/dQ,
S_α ≥ sup_μ log E_Q[e^{αℓ}] (Lemmas 1–4d of "Every shift", which hold for every real order α ≥ 1).

Where the privacy loss of one step is large (β = p = 3, d = 2410, σ = 1: the worst spreads shift every
coordinate), the Rényi bound's best integer order is 2, the least that Lemma 6 (the binomial expansion) allows,
and the conversion is far from the truth (10498.7 against the worst equal spread's PRV 162.82): the best real
order is near 1. For real 1 < α ≤ 2 (Lemma F), with X = e^ℓ, E_Q[X] = 1:

    E_Q[(1 − q + qX)^α] ≤ 1 + q^α·(E_Q[X^α] − 1)

(ψ(x) = (1 − q + qx)^α − (qx)^α is concave on x ≥ 0, so it lies below its tangent at x = 1, ψ(1) = 1 − q^α; take
E_Q), and the remove direction's one-step RDP is RDP(α) ≤ log[1 + q^α(e^{S_α} − 1)]/(α − 1); the add direction's is
at most the remove direction's (Lemma S, every real order, every pair of the ball being symmetric). RDP composes
over steps at every real α > 1 and converts by Balle et al. (2020, Thm 21), as Opacus's ``get_privacy_spent`` does.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from .ball_rdp import (_ball_log_moments_of, _best_order, _conversion_epsilons, _log_moment_uppers_by_order,
                       rdp_deltas)
from .checks import AccountingError
from .history import Segment, normalize_history

__all__ = ["LOW_ORDERS", "ball_log_moment_real", "low_order_rdp", "low_order_epsilon", "low_order_deltas", "applies"]

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
    bound = float(_ball_log_moments_of([float(alpha)], float(noise_multiplier), float(beta), int(dim),
                                       float(clip_norm_p), batched=False, cache=_cache, k_order=2)[0])
    if math.isnan(bound) or bound < 0.0:
        raise AccountingError(f"ball log-moment at order {alpha}: not a number >= 0 ({bound!r})")
    return bound


def low_order_rdp(alpha: float, sample_rate: float, log_moment: float) -> float:
    r"""One step's RDP at real order 1 < α ≤ 2 from S ≥ log E_Q[X^α] (Lemma F), both directions:
    log[1 + q^α(e^{S} − 1)]/(α − 1) = logaddexp(log(1 − q^α), α·log q + S)/(α − 1) (two positive terms; q = 1:
    S/(α − 1)), with 1e-12 × (|α·log q + S| + 1) added (the round-off, a few ulps of that); non-decreasing in q
    and S."""
    q = float(sample_rate)
    if not 1.0 < alpha <= 2.0:
        raise ValueError(f"low_order_rdp: the order must be in (1, 2], got {alpha!r}")
    if math.isinf(log_moment):
        return math.inf
    if q == 1.0:
        return (max(log_moment, 0.0) + _FP_SLACK * (abs(log_moment) + 1.0)) / (alpha - 1.0)
    head = math.log1p(-math.exp(alpha * math.log(q)))  # log(1 − q^α)
    tail = alpha * math.log(q) + log_moment
    total = float(np.logaddexp(head, tail))
    # round-off: a few ulps of |tail| + 1 (tail's own, logaddexp's); head's relative error enters with its weight
    # e^{head − total} ≤ e^{head} (total ≥ 0), and |head|·e^{head} ≤ 1/e: all ≪ 1e-12 × (|tail| + 1)
    return (max(total, 0.0) + _FP_SLACK * (abs(tail) + 1.0)) / (alpha - 1.0)


def applies(segments: Sequence[Segment]) -> bool:
    """Whether the published Rényi bound also tries the orders in (1, 2) (:func:`low_order_epsilon`; a scope and
    cost choice, not a soundness one: every order gives a bound): no segment has a count query, and some segment
    has β > 2 (there the dominating Gaussian of Lemma N, whose cheap test reads the integer orders' lower end, is
    not tried, so the published number is the same on every path). d = 1 and p = ∞ included (S_α = L_α(m),
    d·L_α(m)): there the Rényi bound is computed only where the PRV composition refuses."""
    return (bool(segments) and all(s.count_noise_multiplier is None for s in segments)
            and any(s.beta > 2.0 for s in segments))


def low_order_epsilon(segments: Sequence, delta: float, beat: float = math.inf) -> Tuple[float, float]:
    r"""(ε, α): the least of ``beat`` and of Balle et al.'s conversion of Σ_segments steps·RDP_seg(α) over α in
    :data:`LOW_ORDERS` (:func:`low_order_rdp` with :func:`ball_log_moment_real`), exactly; (∞, nan) where no order
    gives less than ``beat``. A proven ε(δ) for every shift in the ℓp ball (Lemma F), add and remove.

    Branch and bound (cost only; the result is the min over the whole set): the same formula with S_α replaced by
    its lower end max_{k ∈ {1, d}} k·L_α(m·k^{−1/p}) (two points of the ball; two quadratures per order,
    :func:`_lower_end`) is ≤ each order's ε; the orders are taken by increasing lower end, and each one's dual
    (~20 ms cold) is computed only while that lower end is below the least ε found (``beat`` at first). So the
    result is a fixed function of the setting (monotone where each order's RDP is: in q, steps, d, 1/σ)."""
    segs = list(segments) if all(isinstance(s, Segment) for s in segments) else normalize_history(segments)
    if not segs:
        return 0.0, float("nan")
    if any(s.noise_multiplier == 0.0 for s in segs):
        return math.inf, float("nan")
    low = _lower_end(segs, delta)
    best = (float(beat), float("nan"))
    for i in np.argsort(low, kind="stable").tolist():
        if not low[i] < best[0]:
            break
        eps = _epsilon_at(segs, delta, [LOW_ORDERS[i]])
        if eps[0] < best[0]:
            best = eps
    return (math.inf, float("nan")) if math.isnan(best[1]) else best


def low_order_deltas(segments: Sequence, epsilons: Sequence[float],
                     beat: Optional[Sequence[float]] = None) -> np.ndarray:
    r"""δ(ε) at each ε of ``epsilons``: the least of ``beat`` (one δ per ε; default 1) and of Balle et al.'s
    conversion solved for δ (:func:`.ball_rdp.rdp_deltas`, valid at every real α > 1) of the curve
    Σ_segments steps·RDP_seg(α) over α in :data:`LOW_ORDERS`, exactly: the δ side of :func:`low_order_epsilon`
    (the same curve, the same rounding), proven for every shift in the ℓp ball (Lemma F), add and remove.

    Branch and bound as there (cost only): an order's dual is computed only where the δ of its lower end
    (:func:`_lower_rdp`; the conversion is non-decreasing in the RDP) is below the least δ found at some ε."""
    segs = list(segments) if all(isinstance(s, Segment) for s in segments) else normalize_history(segments)
    eps = np.asarray(epsilons, dtype=np.float64).reshape(-1)
    best = np.ones(eps.size) if beat is None else np.minimum(1.0, np.asarray(beat, dtype=np.float64).reshape(-1))
    if best.shape != eps.shape:
        raise ValueError(f"low_order_deltas: {best.size} values of beat for {eps.size} epsilons")
    if not segs:
        return np.zeros(eps.size)
    if any(s.noise_multiplier == 0.0 for s in segs):
        return best
    low = _lower_rdp(segs)
    low_d = np.stack([rdp_deltas(low[i:i + 1], LOW_ORDERS[i:i + 1], eps) for i in range(len(LOW_ORDERS))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.min(np.where(best[:, None] > 0.0, low_d / best[:, None], np.inf), axis=0)
    for i in np.argsort(gain, kind="stable").tolist():
        if not np.any(low_d[:, i] < best):
            continue
        best = np.minimum(best, rdp_deltas(_composed(segs, [LOW_ORDERS[i]]), LOW_ORDERS[i:i + 1], eps))
    return best


#: the real orders in (1, 2) of :func:`low_order_epsilon`: α − 1 from 0.005 to 0.2 in ratio 1.1, then 1.2 … 1.98 in
#: steps of 0.02 (near 1 the conversion's log(1/δ)/(α − 1) makes the minimum sharp: β = p = 3, σ = 1, q = 0.01,
#: T = 1000, d = 10⁶ has its best order near 1.02; at d = 2410 the best is 1.14, 219.47)
LOW_ORDERS = tuple(sorted({round(1.0 + 0.005 * 1.1 ** k, 4) for k in range(39)}
                         | {round(1.2 + k / 50.0, 2) for k in range(40)}))
#: relative margin taken off the per-coordinate moment enclosures in the lower end (they are within ~1e-7)
_LOWER_MARGIN = 1e-5


def _lower_end(segs: list, delta: float) -> np.ndarray:
    """ε at each of :data:`LOW_ORDERS` of :func:`_lower_rdp`'s curve: each ≤ the ε that :func:`_epsilon_at` gives
    at that order (the conversion increases with the RDP). A gate and a guess of the best order, never a privacy
    bound."""
    return _conversion_epsilons(_lower_rdp(segs), np.array(LOW_ORDERS), delta)


def _lower_rdp(segs: list) -> np.ndarray:
    r"""The composed RDP at each of :data:`LOW_ORDERS` with S_α replaced by max_{k ∈ {1, d}}
    k·L_α(m·k^{−1/p})·(1 − 10⁻⁵) ≤ S_α (one coordinate at m, every coordinate equal; the enclosures lowered by more
    than their ~10⁻⁷ slack): each ≤ :func:`_composed`'s at that order (Lemma F's bound increases with S_α). A gate,
    never a privacy bound."""
    orders = np.array(LOW_ORDERS)
    rdp = np.zeros(orders.size)
    for s in segs:
        m = 1.0 / s.noise_multiplier
        k = np.array([1.0, float(s.dim)])
        a = m * k ** (-1.0 / s.clip_norm_p)
        L = _log_moment_uppers_by_order({float(al): a for al in orders}, s.beta)
        for i, al in enumerate(orders):
            S = float(np.max(k * L[float(al)])) * (1.0 - _LOWER_MARGIN)
            rdp[i] += s.steps * low_order_rdp(float(al), s.sample_rate, S) * (1.0 - 1e-9)
    return rdp


def _epsilon_at(segs: list, delta: float, orders: list) -> Tuple[float, float]:
    """(ε, α) of :func:`low_order_epsilon` at exactly these orders ((∞, nan) where none is finite)."""
    if not orders:
        return math.inf, float("nan")
    rdp = _composed(segs, orders)
    if not np.isfinite(rdp).any():
        return math.inf, float("nan")
    return _best_order(rdp, orders, delta)


def _composed(segs: list, orders: Sequence[float]) -> np.ndarray:
    """Σ_segments steps·:func:`low_order_rdp` with :func:`ball_log_moment_real` at each order, rounded up by the
    relative slack of the sum (∞ where an order's moment overflows): the one curve both conversions read."""
    rdp = np.zeros(len(orders))
    for s in segs:
        for i, a in enumerate(orders):
            S = ball_log_moment_real(a, s.noise_multiplier, s.beta, s.dim, s.clip_norm_p)
            rdp[i] += s.steps * low_order_rdp(a, s.sample_rate, S)
    return np.where(np.isfinite(rdp), rdp * (1.0 + _FP_SLACK), np.inf)


def clear_cache() -> None:
    """Forget the S_α bounds computed (the next call is cold)."""
    _cache.clear()
