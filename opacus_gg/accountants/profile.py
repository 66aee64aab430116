r"""The one-step privacy profile δ(t) of a Poisson-subsampled step, both adjacency directions.

For one step with non-subsampled d-dimensional pair (P, Q) (worst shift shape) and sampling rate q,
the two add/remove pairs have the exact hockey-stick curves (α = e^t)

    remove ((1−q)Q + qP  vs  Q):  δ_rem(t) = q · H_{1 + (e^t − 1)/q}(P‖Q)      (H_α = 1 − α for α ≤ 0)
    add    (Q  vs  (1−q)Q + qP):  δ_add(t) = c · H_{α q / c}(Q‖P),  c = 1 − α(1−q)  (0 if c ≤ 0).

Over the candidate shapes we take the upper envelope δ_env(t) = max_k δ_k(t) (a valid privacy
profile: convex in α, δ(α=0) = 1, non-increasing). The shapes come as a tuple of (label, pair) from
:func:`pairs_of` (:func:`.spreads.spread_pairs`); any pair exposing ``h_pq``/``h_qp`` works.
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

from .count_query import count_pairs
from .spreads import spread_pairs
from .history import Segment

__all__ = ["one_step_delta", "pairs_of", "CHORD_STRIDE", "CHORD_EXACT_RATIO"]

#: β ≠ 2: exact envelope values at every CHORD_STRIDE-th point of the composition grid, chords in between
CHORD_STRIDE = 8
#: ... except where |t| ≤ max(0.2, CHORD_EXACT_RATIO · CHORD_STRIDE · mesh): every point exact there
CHORD_EXACT_RATIO = 1000.0


def pairs_of(seg) -> Tuple:
    """((label, pair), ...) whose envelope is the non-subsampled pair of one step of ``seg`` (times the count's
    Gaussian pair when the step also releases a noisy count: :mod:`.count_query`)."""
    if not isinstance(seg, Segment):
        return seg.pairs
    if seg.count_noise_multiplier is None:
        return spread_pairs(*seg.mechanism_key)
    return count_pairs(*seg.mechanism_key, seg.count_noise_multiplier)


def _direction_args(q: float, t: np.ndarray, direction: str):
    """(α', log α', c) of the hockey-stick divergence the subsampled δ(t) needs (formulas in the module
    docstring); shared by all shapes. c is None for "remove" (δ = q·H_{α'}(P‖Q)); for "add" δ = c·H_{α'}(Q‖P)."""
    c = None
    if direction == "remove":
        arg = np.exp(t) if q == 1.0 else 1.0 + np.expm1(t) / q
    else:
        alpha = np.exp(t)
        c = 1.0 - alpha * (1.0 - q)
        pos = c > 0
        arg = np.where(pos, alpha * q / np.where(pos, c, 1.0), 0.0)
    # exactly the log α each pair would take itself, computed once for all shapes
    return arg, np.log(np.where(arg > 0, arg, 1.0)), c


def _delta_one(pair, q: float, t: np.ndarray, direction: str, args=None) -> np.ndarray:
    """δ(t) of one subsampled pair (formulas in the module docstring)."""
    arg, log_arg, c = _direction_args(q, t, direction) if args is None else args
    if direction == "remove":
        h = pair.h_pq(arg, log_arg)
        return h if q == 1.0 else q * h
    # δ_add = 0 where c ≤ 0 (losses above log(1/(1−q)) do not exist): evaluate the pair only where c > 0
    pos = c > 0
    out = np.zeros(t.shape)
    out[pos] = c[pos] * pair.h_qp(arg[pos], log_arg[pos])
    return out


def _envelope(pairs, q: float, t: np.ndarray, direction: str):
    """max over shapes of δ_k(t) (one direction), with per-shape scores Σ_{t_j ≥ 0} δ_k(t_j)."""
    env = None
    ks, scores = [], []
    args = _direction_args(q, t, direction)
    nonneg = t >= 0
    for k, pair in pairs:
        d = np.clip(_delta_one(pair, q, t, direction, args), 0.0, 1.0)
        ks.append(k)
        scores.append(float(d[nonneg].sum()))
        env = d if env is None else np.maximum(env, d, out=env)
    return env, ks, np.array(scores)


def _chord_envelope(pairs, q: float, s: np.ndarray, direction: str, stride: int, exact_below: float = 0.0):
    r"""Upper bound on max_k δ_k(s) on a monotone grid s from exact values at every ``stride``-th point.

    Every δ_k is convex in α = e^s (a hockey-stick curve of the subsampled pair), so on [s_i, s_{i+1}]
    between two anchors δ_k lies below its chord in α, which lies below the chord of the anchors'
    envelope max_k δ_k(s_i), max_k δ_k(s_{i+1}). That chord, evaluated with the α-fraction
    expm1(s − s_i)/expm1(s_{i+1} − s_i), is returned: a pointwise upper bound that is itself convex in α
    (the connect-the-dots step downstream therefore still dominates). Scores: anchor sums × stride.
    """
    n = s.size
    if stride <= 1 or n < 4 * stride:
        return _envelope(pairs, q, s, direction)
    # anchors: every point where |s| ≤ exact_below (the curves bend most near s = 0, on the scale |s|),
    # every stride-th point beyond, and both ends
    idx = np.arange(n)
    anchor = (np.abs(s) <= exact_below) | (idx % stride == 0) | (idx == n - 1)
    ia = np.flatnonzero(anchor)
    env_a, ks, scores = _envelope(pairs, q, s[ia], direction)
    # the anchor at or left of each point: a running count of anchors (searchsorted(ia, idx, "right") − 1)
    seg_idx = np.minimum(np.cumsum(anchor) - 1, ia.size - 2)
    left, right = ia[seg_idx], ia[seg_idx + 1]
    w = np.expm1(s - s[left]) / np.expm1(s[right] - s[left])
    env = env_a[seg_idx] + np.clip(w, 0.0, 1.0) * (env_a[seg_idx + 1] - env_a[seg_idx])
    env[ia] = env_a  # exact at the anchors
    return env, ks, scores * (n / ia.size)


def one_step_delta(seg, t: np.ndarray, direction: str, stride: int = 1) -> Tuple[np.ndarray, np.ndarray, List[int], np.ndarray]:
    r"""(δ_env, r_env, shape ks, per-shape score) on a sorted grid t.

    δ_env(t) = max_k δ_k(t) is evaluated where t ≥ 0; for t < 0 we instead evaluate the complement
    r(t) = δ(t) − (1 − e^t) = ∫(e^t Q' − P')_+ = e^t · δ_other(−t) (δ of the other direction), which is
    small and accurate where δ ≈ 1 − e^t would lose all digits. ``delta`` holds NaN where not evaluated
    and vice versa. The score of a shape (which shape carries the envelope) is diagnostic only.
    ``stride`` > 1: exact values at every stride-th point only, chords in between (an upper bound, see
    :func:`_chord_envelope`).
    """
    other = "add" if direction == "remove" else "remove"
    pairs = pairs_of(seg)
    pos = t >= 0
    delta = np.full(t.shape, np.nan)
    r = np.full(t.shape, np.nan)
    # chords only where the anchor spacing is ≤ 1/CHORD_EXACT_RATIO of |t| (and never for |t| ≤ 0.2)
    exact_below = max(0.2, CHORD_EXACT_RATIO * stride * float(np.max(np.diff(t)))) if stride > 1 and t.size > 1 else 0.0
    env, ks, scores = _chord_envelope(pairs, seg.sample_rate, t[pos], direction, stride, exact_below)
    delta[pos] = env
    # δ_other is convex in e^{−t} as well, so its chord bound is taken in that variable
    renv, _, _ = _chord_envelope(pairs, seg.sample_rate, -t[~pos], other, stride, exact_below)
    r[~pos] = np.exp(t[~pos]) * renv
    return delta, r, ks, scores
