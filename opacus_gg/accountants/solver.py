r"""The σ solver: the smallest noise_multiplier whose certified ε(σ) meets target_epsilon.

ε(σ) is non-increasing in σ; geometric bracketing finds [lo, hi] with ε(lo) > target ≥ ε(hi), then
safeguarded secant steps in (log σ, log ε) (bisection after slow steps) shrink it. Only a σ whose
computed ε(σ) ≤ target is ever returned (the safe end of the bracket).
"""

from __future__ import annotations

import math
import warnings
from typing import Callable, Optional

from ..validation import (validate_delta, validate_epsilon, validate_noise_multiplier, validate_positive,
                          validate_sample_rate)
from ..steps import steps_for_epochs
from .api import MODES, compute_epsilon, proven_epsilon_history, validate_ball_bound
from .history import parse_segment

__all__ = ["get_noise_multiplier", "solver_epsilon"]


def get_noise_multiplier(
    *,
    target_epsilon: float,
    target_delta: float,
    sample_rate: float,
    steps: Optional[int] = None,
    epochs: Optional[float] = None,
    beta: float = 2.0,
    dim: Optional[int] = None,
    clip_norm_p: Optional[float] = None,
    count_noise_multiplier: Optional[float] = None,
    mode: str = "certified",
    epsilon_tolerance: float = 0.002,
    eps_error: float = 0.01,
    sigma_min: float = 0.05,
    sigma_max: float = 1e4,
    progress: Optional[Callable[[float, float], None]] = None,
    ball_bound: str = "renyi",
) -> float:
    r"""Smallest σ (to ε-tolerance) with ε(σ) ≤ target_epsilon: geometric bracketing, then safeguarded secant steps.

    Returns the σ at the safe end of the bracket, so ε(σ) ≤ target_epsilon always holds (for the same
    eps_error) and target_epsilon − ε(σ) ≤ epsilon_tolerance unless σ hits ``sigma_min``. Settings the
    numerics refuse are treated as ε = ∞ (the safe side). ValueError if even ``sigma_max`` misses the target.
    Every argument is validated before the first accountant run (``dim`` is required unless β = 2 with p ≤ 2,
    :func:`opacus_gg.validation.validate_dim`), so bad input is one clear error, never "unreachable".
    The default tolerance 0.002 lands within the 0.005 of the target that Opacus's own engine test
    (``test_make_private_with_epsilon``, two decimal places) expects of the ε after training.
    ``progress(σ, ε)``, if given, is called after every accountant run (for progress lines).
    ``count_noise_multiplier``: every step also releases adaptive clipping's noisy count (fixed σ_c; σ is
    solved for the gradient noise, the count's share of ε is accounted, never subtracted).
    ``ball_bound="table"`` (:data:`.api.BALL_BOUNDS`): σ is first solved on the default bound (Rényi, or the
    dominating Gaussian's where smaller; fast), then lowered on the published ε with the ball table (each probe
    builds one table, 35 s–30 min; at most
    :data:`TABLE_PROBES` probes, each feasible probe keeps its σ).
    """
    target_epsilon = validate_epsilon(target_epsilon)
    target_delta = validate_delta(target_delta, "target_delta")
    sample_rate = validate_sample_rate(sample_rate)
    if (steps is None) == (epochs is None):
        raise ValueError("get_noise_multiplier takes exactly one of steps or epochs")
    if steps is None:  # the steps training runs (never fewer): opacus_gg.steps.steps_for_epochs
        steps = steps_for_epochs(epochs, sample_rate=sample_rate)
    # (σ, q, T, β, d, p) validated as the accountant will parse them, at a σ inside the search range
    seg = parse_segment((1.0, sample_rate, steps, beta, dim, clip_norm_p, count_noise_multiplier))
    steps, beta, dim, clip_norm_p = seg.steps, seg.beta, seg.dim, seg.clip_norm_p
    count_noise_multiplier = seg.count_noise_multiplier
    sigma_min = validate_noise_multiplier(sigma_min, "sigma_min", allow_zero=False)
    sigma_max = validate_noise_multiplier(sigma_max, "sigma_max", allow_zero=False)
    if not sigma_min < sigma_max:
        raise ValueError(f"sigma_min must be < sigma_max, got sigma_min={sigma_min!r}, sigma_max={sigma_max!r}")
    epsilon_tolerance = validate_positive(epsilon_tolerance, "epsilon_tolerance")
    eps_error = validate_positive(eps_error, "eps_error")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    ball_bound = validate_ball_bound(ball_bound)
    if mode == "paper" and ball_bound != "renyi":
        raise ValueError("ball_bound='table' needs mode='certified' (paper mode solves on the paper's estimate)")
    table = ball_bound == "table"

    def eps(sigma: float, bound: str = "renyi") -> float:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                e = solver_epsilon(
                    noise_multiplier=sigma, sample_rate=sample_rate, steps=steps, delta=target_delta,
                    beta=beta, dim=dim, clip_norm_p=clip_norm_p, mode=mode, eps_error=eps_error,
                    count_noise_multiplier=count_noise_multiplier, ball_bound=bound,
                )
        except (ValueError, RuntimeError, FloatingPointError, OverflowError):
            e = math.inf
        if progress is not None:
            progress(sigma, e)
        return e

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
                + ("" if count_noise_multiplier is None else
                   f"; the noisy count (count_noise_multiplier={count_noise_multiplier}) spends epsilon that no "
                   "sigma removes: raise count_noise_multiplier (2*unclipped_num_std)")
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
    if table:
        slope = _log_slope(eps, hi, e_hi)
        return _lower_with_table(lambda sg: eps(sg, "table"), hi, target_epsilon, epsilon_tolerance, slope)
    return hi


def _log_slope(eps: Callable[[float], float], sigma: float, e1: float) -> float:
    """k with ε(σ) ≈ c·σ^{−k} near ``sigma``, from the (cheap) Rényi bound e1 = ε(σ) and ε(0.95σ); 1 where
    undefined."""
    e0 = eps(0.95 * sigma)
    if not (math.isfinite(e0) and math.isfinite(e1) and e0 > e1 > 0):
        return 1.0
    return math.log(e0 / e1) / -math.log(0.95)


#: at most this many σ probes (one ball table each) when ``ball_bound="table"`` lowers the Rényi solution
TABLE_PROBES = 4


def _lower_with_table(eps: Callable[[float], float], hi: float, target: float, tol: float,
                      slope: float = 1.0) -> float:
    r"""Lower σ from the Rényi solution ``hi`` on ε(σ) with the ball table (feasible at ``hi``: the published ε
    is the smaller bound). First probe: ε ∝ σ^{−k} locally (k = ``slope``, the Rényi bound's),
    σ = hi·(ε(hi)/(target − tol/2))^{1/k}; then safeguarded secant steps; only a σ with a computed ε(σ) ≤ target
    is returned."""
    e_hi = eps(hi)
    lo, e_lo = None, math.inf
    for _ in range(TABLE_PROBES):
        if target - e_hi <= tol:
            break
        if lo is None:
            mid = hi * (e_hi / (target - 0.5 * tol)) ** (1.0 / slope)
        else:
            mid = _next_probe(lo, e_lo, hi, e_hi, target, tol, bisect=False)
        if not mid < hi:
            break
        e_mid = eps(mid)
        if e_mid <= target:
            hi, e_hi = mid, e_mid
        else:
            lo, e_lo = mid, e_mid
    return hi


def solver_epsilon(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float, beta: float,
                   dim: int, clip_norm_p: Optional[float], mode: str, eps_error: float,
                   count_noise_multiplier: Optional[float] = None, ball_bound: str = "renyi") -> float:
    r"""ε(σ) the solver searches on: the published ε of :func:`.api.compute_epsilon`.

    Certified mode computes the proven number alone (:func:`.api.proven_epsilon_history`: for β ≠ 2, d > 1,
    p < ∞ the Rényi bound over the ℓp ball, whose per-coordinate moments are cached across σ), so the full
    report is built once, by the caller, at the σ found.
    """
    if mode == "certified":
        entry = (noise_multiplier, sample_rate, steps, beta, dim, clip_norm_p, count_noise_multiplier)
        return proven_epsilon_history([entry], delta, eps_error=eps_error, ball_bound=ball_bound)
    return compute_epsilon(noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps, delta=delta,
                           beta=beta, dim=dim, clip_norm_p=clip_norm_p, count_noise_multiplier=count_noise_multiplier,
                           mode=mode, eps_error=eps_error).epsilon


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
