r"""Public functions: ε (certified or paper mode), δ(ε), and the σ solver.

A history is a list of segments ``(noise_multiplier, sample_rate, steps, beta, dim, clip_norm_p)``
(3-tuples ``(σ, q, steps)`` mean β = 2, d = 1, p = β, as Opacus writes them). The certified ε is

    ε = max_{direction ∈ {remove, add}} ε_upper(direction),

where each direction composes, step by step, the upper envelope over the worst-case shift shapes
(see :mod:`.composition`, :mod:`.shapes`); it is an upper bound on the true ε up to the stated
numerical slack (ε_error, δ_error), never an estimate.
"""

from __future__ import annotations

import math
import warnings
from typing import List, Optional, Sequence, Tuple

from ..validation import (
    validate_beta,
    validate_clip_norm_p,
    validate_delta,
    validate_epsilon,
    validate_noise_multiplier,
    validate_positive_int,
    validate_sample_rate,
)
from .ball_rdp import combine, prv_is_proven, rdp_ball_epsilon
from .composition import Segment, compose_delta, compose_history
from .report import EpsilonReport
from .shapes import warn_if_dimension_dependent

__all__ = ["compute_epsilon", "compute_epsilon_history", "compute_delta", "get_noise_multiplier", "normalize_history"]

MODES = ("certified", "paper")


def _segment(entry: Sequence, defaults: Tuple[float, int, Optional[float]] = (2.0, 1, None)) -> Segment:
    """Validate one history entry (σ, q, steps[, β, d, p]) into a :class:`Segment`."""
    if len(entry) not in (3, 4, 5, 6):
        raise ValueError(
            "history entries must be (noise_multiplier, sample_rate, steps[, beta, dim, clip_norm_p]), "
            f"got {entry!r}"
        )
    entry = list(entry) + [None] * (6 - len(entry))
    sigma, q, steps, beta, dim, p = entry
    beta = validate_beta(defaults[0] if beta is None else beta)
    dim = validate_positive_int(defaults[1] if dim is None else dim, "dim")
    p = validate_clip_norm_p(defaults[2] if p is None else p, beta)
    sigma = validate_noise_multiplier(sigma)
    if sigma == 0:
        raise ValueError("noise_multiplier must be > 0 for accounting (noise_multiplier=0 gives epsilon=inf)")
    q = validate_sample_rate(q)
    steps = validate_positive_int(steps, "steps")
    return Segment(float(sigma), float(q), steps, float(beta), dim, float(p))


def normalize_history(history: Sequence[Sequence], defaults=(2.0, 1, None)) -> List[Segment]:
    """Validate entries and merge consecutive identical segments."""
    segs: List[Segment] = []
    for entry in history:
        s = _segment(entry, defaults)
        if segs and segs[-1].mechanism_key == s.mechanism_key and segs[-1].sample_rate == s.sample_rate:
            last = segs.pop()
            s = Segment(s.noise_multiplier, s.sample_rate, last.steps + s.steps, s.beta, s.dim, s.clip_norm_p)
        segs.append(s)
    return segs


def _validate_errors(delta: float, eps_error: float, delta_error: Optional[float]) -> Tuple[float, float]:
    eps_error = float(eps_error)
    if not (math.isfinite(eps_error) and eps_error > 0):
        raise ValueError(f"eps_error must be a finite number > 0, got {eps_error!r}")
    if delta_error is None:
        delta_error = delta / 1000.0
    delta_error = float(delta_error)
    if not (0 < delta_error < delta):
        raise ValueError(f"delta_error must be in (0, delta={delta}), got {delta_error!r}")
    return eps_error, delta_error


def compute_epsilon_history(
    history: Sequence[Sequence],
    delta: float,
    *,
    mode: str = "certified",
    eps_error: float = 0.01,
    delta_error: Optional[float] = None,
    **paper_kwargs,
) -> EpsilonReport:
    r"""ε(δ) of a history of Poisson-subsampled GG steps (certified: max over add/remove of ε_upper).

    Where the PRV envelope covers equal spreads only (β ≠ 2, d > 1, finite p), the published ε is the proven
    RDP bound over every shift in the ℓp ball (:func:`.ball_rdp.rdp_ball_epsilon`, scope "proven", method
    "rdp") and the PRV ε is kept as ``epsilon_equal_spreads`` when smaller (:func:`.ball_rdp.combine`).

    ``mode="paper"`` delegates to :func:`opacus_gg.accountants.sampled.paper_epsilon_report` (the GG
    paper's one-hot, remove-only, Monte Carlo PRV; NOT a guarantee for β ≠ 2).
    """
    delta = validate_delta(delta)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    eps_error, delta_error = _validate_errors(delta, eps_error, delta_error)
    segs = normalize_history(history)
    if mode == "paper":
        from .sampled import paper_epsilon_report  # lazy: owned by the paper-mode module

        hist = [(s.noise_multiplier, s.sample_rate, s.steps, s.beta, s.dim, s.clip_norm_p) for s in segs]
        return paper_epsilon_report(hist, delta, eps_error=eps_error, delta_error=delta_error, **paper_kwargs)
    if not segs:
        return EpsilonReport(epsilon=0.0, epsilon_lower=0.0, epsilon_estimate=0.0, epsilon_upper=0.0, delta=delta,
                             details={"empty_history": True})
    results = [compose_history(segs, delta, d, eps_error=eps_error, delta_error=delta_error) for d in ("remove", "add")]
    worst = max(results, key=lambda r: r.epsilon_upper)
    uncertified = [s for s in segs if not prv_is_proven(s.beta, s.dim, s.clip_norm_p)]
    scores = worst.shape_scores
    shape_k = max(scores, key=scores.get) if scores else 1
    details = {
        "epsilon_by_direction": {r.direction: r.epsilon_upper for r in results},
        "estimate_by_direction": {r.direction: r.epsilon_estimate for r in results},
        "truncated_mass": {r.direction: r.inf_mass for r in results},
        "domain_half_width": worst.domain_L,
        "mesh": worst.mesh,
        "eps_error": eps_error,
        "delta_error": delta_error,
        "shape_scores": {int(k): float(v) for k, v in scores.items()},
        "shapes": sorted(int(k) for k in scores),
    }
    report = EpsilonReport(
        epsilon=worst.epsilon_upper,
        epsilon_lower=worst.epsilon_lower,
        epsilon_estimate=worst.epsilon_estimate,
        epsilon_upper=worst.epsilon_upper,
        delta=delta,
        mode="certified",
        scope="equal_spreads" if uncertified else "proven",
        direction=worst.direction,
        shape_k=int(shape_k),
        details=details,
    )
    # --- every shift (ball_rdp): where the PRV covers equal spreads only, publish the proven RDP bound over
    # the whole ℓp ball and keep the equal-spread PRV ε beside it (docs/accounting.md, last section) ---
    if uncertified:
        rdp_eps, rdp_order = rdp_ball_epsilon(segs, delta)
        report = combine(report, rdp_eps, rdp_order)
    return report


def compute_epsilon(
    *,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    beta: float = 2.0,
    dim: int = 1,
    clip_norm_p: Optional[float] = None,
    mode: str = "certified",
    eps_error: float = 0.01,
    delta_error: Optional[float] = None,
    **paper_kwargs,
) -> EpsilonReport:
    """ε(δ) after ``steps`` identical steps; see :func:`compute_epsilon_history`."""
    return compute_epsilon_history(
        [(noise_multiplier, sample_rate, steps, beta, dim, clip_norm_p)],
        delta,
        mode=mode,
        eps_error=eps_error,
        delta_error=delta_error,
        **paper_kwargs,
    )


def compute_delta(
    *,
    epsilon: float,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    beta: float = 2.0,
    dim: int = 1,
    clip_norm_p: Optional[float] = None,
    eps_error: float = 0.01,
) -> float:
    r"""Certified upper bound on δ(ε) = max over add/remove of the dominating composed δ (+ tail slack)."""
    epsilon = float(epsilon)
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number ≥ 0, got {epsilon!r}")
    segs = normalize_history([(noise_multiplier, sample_rate, steps, beta, dim, clip_norm_p)])
    for s in segs:
        warn_if_dimension_dependent(s.beta, s.dim, s.clip_norm_p)
    return max(compose_delta(segs, epsilon, d, eps_error=eps_error) for d in ("remove", "add"))


def get_noise_multiplier(
    *,
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    steps: Optional[int] = None,
    epochs: Optional[float] = None,
    beta: float = 2.0,
    dim: int = 1,
    clip_norm_p: Optional[float] = None,
    mode: str = "certified",
    epsilon_tolerance: float = 0.01,
    eps_error: float = 0.01,
    sigma_min: float = 0.05,
    sigma_max: float = 1e4,
) -> float:
    r"""Smallest σ (to ε-tolerance) with ε(σ) ≤ target_epsilon: geometric bracketing, then bisection.

    Returns the σ at the safe end of the bracket, so ε(σ) ≤ target_epsilon always holds (for the same
    eps_error) and target_epsilon − ε(σ) ≤ epsilon_tolerance unless σ hits ``sigma_min``. Settings the
    numerics refuse are treated as ε = ∞ (the safe side). ValueError if even ``sigma_max`` misses the target.
    """
    target_epsilon = validate_epsilon(target_epsilon)
    target_delta = validate_delta(target_delta, "target_delta")
    sample_rate = validate_sample_rate(sample_rate)
    if (steps is None) == (epochs is None):
        raise ValueError("get_noise_multiplier takes exactly one of steps or epochs")
    if steps is None:
        epochs = float(epochs)
        if not (math.isfinite(epochs) and epochs > 0):
            raise ValueError(f"epochs must be a finite number > 0, got {epochs!r}")
        steps = max(1, int(epochs / sample_rate))
    steps = validate_positive_int(steps, "steps")
    epsilon_tolerance = float(epsilon_tolerance)
    if not (epsilon_tolerance > 0):
        raise ValueError(f"epsilon_tolerance must be > 0, got {epsilon_tolerance!r}")

    def eps(sigma: float) -> float:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                return compute_epsilon(
                    noise_multiplier=sigma, sample_rate=sample_rate, steps=steps, delta=target_delta,
                    beta=beta, dim=dim, clip_norm_p=clip_norm_p, mode=mode, eps_error=eps_error,
                ).epsilon
        except (ValueError, RuntimeError, FloatingPointError, OverflowError):
            return math.inf

    validate_clip_norm_p(clip_norm_p, validate_beta(beta))
    hi = 1.0
    e_hi = eps(hi)
    lo = None
    e_lo = math.inf
    while e_hi > target_epsilon:
        lo, e_lo = hi, e_hi
        hi *= 2.0
        if hi > sigma_max:
            raise ValueError(
                f"target_epsilon={target_epsilon} is unreachable: noise_multiplier={hi / 2:g} gives epsilon="
                f"{e_hi:.4g} (beta={beta}, dim={dim}, clip_norm_p={clip_norm_p}, steps={steps}, "
                f"sample_rate={sample_rate}, target_delta={target_delta})"
            )
        e_hi = eps(hi)
    if lo is None:  # ε(1) ≤ target: shrink σ until the target is exceeded
        lo = hi / 2.0
        while True:
            e_lo = eps(lo)
            if e_lo > target_epsilon:
                break
            hi, e_hi = lo, e_lo
            if lo <= sigma_min:
                return hi
            lo = max(lo / 2.0, sigma_min)
    # Invariant: e_lo > target ≥ e_hi, lo < hi. Only a σ with a computed ε(σ) ≤ target is ever returned.
    slow = 0
    while target_epsilon - e_hi > epsilon_tolerance and hi - lo > 1e-6 * hi:
        mid = _next_probe(lo, e_lo, hi, e_hi, target_epsilon, epsilon_tolerance, bisect=slow >= 2)
        width = hi - lo
        e_mid = eps(mid)
        if e_mid <= target_epsilon:
            hi, e_hi = mid, e_mid
        else:
            lo, e_lo = mid, e_mid
        slow = slow + 1 if hi - lo > 0.5 * width else 0
    return hi


def _next_probe(lo: float, e_lo: float, hi: float, e_hi: float, target: float, tol: float, bisect: bool) -> float:
    """Next σ in (lo, hi): secant in (log σ, log ε) aimed at target − tol/2, safeguarded; bisection if asked.

    ε(σ) is decreasing and close to a power law locally, so this needs a few probes where bisection needs
    ~log2(width/tol); after two steps that did not halve the bracket the caller asks for bisection.
    """
    mid = 0.5 * (lo + hi)
    if bisect or not (math.isfinite(e_lo) and e_lo > 0 and e_hi > 0):
        return mid
    goal = max(target - 0.5 * tol, 0.5 * (target + e_hi))
    x_lo, x_hi = math.log(lo), math.log(hi)
    y_lo, y_hi = math.log(e_lo), math.log(e_hi)
    if not (y_lo > y_hi):
        return mid
    x = x_hi + (math.log(goal) - y_hi) * (x_lo - x_hi) / (y_lo - y_hi)
    guess = math.exp(x)
    margin = 0.02 * (hi - lo)
    return min(max(guess, lo + margin), hi - margin)
