r"""The one-run audit's ε lower bound (Steinke, Nasr & Jagielski 2023, "Privacy auditing with one (1) training
run", Theorem 5.2 and its Algorithm: the p-value of the guesses, then the largest ε it rejects).

Setting. m canaries, each included independently with probability ½ (S_i ∈ {−1, +1} uniform); the mechanism M is
(ε, δ)-DP with respect to the inclusion of each canary, the others held fixed. After the run an auditor makes
r guesses T_i ∈ {−1, +1} (abstaining on the other m − r canaries) and v of them are correct
(W = Σ_i max(0, T_i S_i)). With q_ε = e^ε / (1 + e^ε) and f(v) = P[Binomial(r, q_ε) ≥ v], Theorem 5.2 gives

    P[W ≥ v] ≤ f(v) + 2 m δ · max_{1 ≤ i ≤ v} (f(v − i) − f(v)) / i  =: p_ε(v)

(the maximum over i > v adds nothing: f(v − i) = 1 there and (1 − f(v))/i falls with i). For δ = 0 this is the
binomial tail of randomized response: ε-DP guesses are no better than coin flips of accuracy q_ε.

The bound. Observing v correct guesses rejects "(ε, δ)-DP" at level α when p_ε(v) ≤ α. (ε', δ)-DP implies
(ε, δ)-DP for every ε ≥ ε', so rejecting ε rejects every smaller ε too, and the reported bound
ε_L (a value with p_{ε_L}(v) ≤ α, found by bisection between 0 and a value that is not rejected) satisfies
P[ε_L > ε_true] ≤ P[p_{ε_true}(W) ≤ α] ≤ α: "ε ≥ ε_L at confidence 1 − α" holds whether or not p_ε(v) is
monotone in ε. The bisection keeps that invariant (the returned value is one that was evaluated and rejected),
so the bound is never rounded up past a rejected value. Several guess rules tried on the same scores share α
(Bonferroni: each at α / K, :func:`audit_epsilon`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Sequence, Tuple

import numpy as np
from scipy import special, stats

from ..validation import validate_positive_int, validate_probability

__all__ = ["p_value", "epsilon_lower_bound", "guess_counts", "audit_epsilon", "AuditBound", "guess_grid"]

#: bisection steps on ε: the bracket [0, ε_hi ≤ 64] shrinks to below 64 · 2^-40 ≈ 6e-11
BISECTION_STEPS = 40
#: largest ε searched: q_ε = 1 − e^−ε to within float64 resolution beyond it, no finite v rejects more
EPSILON_SEARCH_MAX = 64.0


def _check_counts(m: int, r: int, v: int) -> Tuple[int, int, int]:
    m = validate_positive_int(m, "m (canaries)")
    r = validate_positive_int(r, "r (guesses)", minimum=0, maximum=m)
    v = validate_positive_int(v, "v (correct guesses)", minimum=0, maximum=r)
    return m, r, v


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    r"""p_ε(v) of the module docstring: an upper bound on P[≥ v of r guesses correct] under (ε, δ)-DP.

    f(v − i) − f(v) = P[v − i ≤ Binomial(r, q_ε) < v] is summed from the probability masses (no cancellation);
    the result is clipped to [0, 1] and checked finite."""
    m, r, v = _check_counts(m, r, v)
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number ≥ 0, got {epsilon!r}")
    delta = validate_probability(delta, "delta")
    q = float(special.expit(epsilon))  # e^ε / (1 + e^ε)
    tail = float(stats.binom.sf(v - 1, r, q))  # f(v) = P[Binomial(r, q) ≥ v]
    alpha = 0.0
    if delta > 0 and v > 0:
        below = np.cumsum(stats.binom.pmf(v - np.arange(1, v + 1), r, q))  # P[v − i ≤ Bin < v], i = 1..v
        alpha = float(np.max(below / np.arange(1, v + 1)))
    p = tail + 2.0 * m * delta * alpha
    if not math.isfinite(p) or p < 0:
        raise ArithmeticError(f"p-value not a finite number ≥ 0 (m={m}, r={r}, v={v}, ε={epsilon}, δ={delta}): {p}")
    return min(p, 1.0)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, significance: float = 0.05) -> float:
    r"""ε_L: a value with p_{ε_L}(v) ≤ ``significance`` (0 when even ε = 0 is not rejected), the largest such on
    the bisection between 0 and the first ε = 1, 2, 4, … not rejected (module docstring: a lower bound on the
    mechanism's ε at confidence 1 − significance)."""
    m, r, v = _check_counts(m, r, v)
    if not 0 < significance < 1:
        raise ValueError(f"significance must be in (0, 1), got {significance!r}")
    if p_value(m, r, v, 0.0, delta) > significance:
        return 0.0
    lo, hi = 0.0, 1.0
    while p_value(m, r, v, hi, delta) <= significance:
        lo, hi = hi, 2.0 * hi
        if hi > EPSILON_SEARCH_MAX:
            return lo  # rejected up to the search's end: report what was rejected
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if p_value(m, r, v, mid, delta) <= significance:
            lo = mid
        else:
            hi = mid
    if p_value(m, r, v, lo, delta) > significance:  # the invariant: lo was evaluated and rejected
        raise ArithmeticError(f"one-run bound: ε = {lo} is not rejected (m={m}, r={r}, v={v}, δ={delta})")
    return lo


def guess_counts(scores: Sequence[float], included: Sequence[bool], k_plus: int, k_minus: int) -> Tuple[int, int]:
    """(r, v): guess "included" for the ``k_plus`` highest scores and "excluded" for the ``k_minus`` lowest
    (ties broken by index, a rule fixed before looking at ``included``); r = k_plus + k_minus, v the correct ones."""
    s = np.asarray(scores, dtype=float)
    inc = np.asarray(included, dtype=bool)
    if s.shape != inc.shape or s.ndim != 1:
        raise ValueError(f"scores and included must be 1-D of one length, got {s.shape} and {inc.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite (a NaN/inf score cannot be ranked)")
    if k_plus < 0 or k_minus < 0 or k_plus + k_minus > len(s):
        raise ValueError(f"need 0 ≤ k_plus, k_minus and k_plus + k_minus ≤ {len(s)}, got {k_plus}, {k_minus}")
    order = np.argsort(s, kind="stable")
    top = order[len(s) - k_plus:] if k_plus else order[:0]
    bottom = order[:k_minus]
    return k_plus + k_minus, int(inc[top].sum() + (~inc[bottom]).sum())


def guess_grid(m: int) -> List[Tuple[int, int]]:
    """The guess rules tried, fixed in advance from m alone: k₊ = k₋ = k and (k₊, k₋) = (k, 0) for
    k = 5, 10, 20, 50, 100, 200, 500, … < m/2 (and k = ⌊m/2⌋, every canary guessed)."""
    ks = sorted({k for k in (5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000) if 2 * k < m} | {m // 2})
    ks = [k for k in ks if k >= 1]
    return [(k, k) for k in ks] + [(k, 0) for k in ks]


@dataclasses.dataclass(frozen=True)
class AuditBound:
    """The best guess rule's bound: ε_L, its rule (k₊, k₋), r guesses, v correct, and the level it was taken at."""

    epsilon: float
    k_plus: int
    k_minus: int
    guesses: int
    correct: int
    significance_each: float
    rules: int


def audit_epsilon(scores: Sequence[float], included: Sequence[bool], delta: float,
                  confidence: float = 0.95) -> AuditBound:
    r"""ε_L at ``confidence`` from canary scores (higher = "included" more likely): the largest
    :func:`epsilon_lower_bound` over the rules of :func:`guess_grid`, each taken at significance (1 − confidence)/K
    for K rules (Bonferroni), so the maximum is a lower bound at ``confidence``."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    m = len(scores)
    rules = guess_grid(validate_positive_int(m, "number of canaries", minimum=2))
    each = (1.0 - confidence) / len(rules)
    best = None
    for kp, km in rules:
        r, v = guess_counts(scores, included, kp, km)
        eps = epsilon_lower_bound(m, r, v, delta, each)
        if best is None or eps > best.epsilon:
            best = AuditBound(epsilon=eps, k_plus=kp, k_minus=km, guesses=r, correct=v, significance_each=each,
                              rules=len(rules))
    return best
