"""Shared input validators: each returns the cleaned value or raises ``ValueError`` naming the
parameter and its allowed range. Import these rather than re-checking by hand."""

from __future__ import annotations

import math
import numbers
from typing import List, Optional, Sequence, Union

__all__ = [
    "validate_beta",
    "validate_scale",
    "validate_positive",
    "validate_nonnegative",
    "validate_order",
    "validate_noise_multiplier",
    "validate_max_grad_norm",
    "validate_clip_norm_p",
    "validate_sample_rate",
    "validate_delta",
    "validate_epsilon",
    "validate_positive_int",
    "validate_rectify_bound",
    "validate_clipping",
    "CLIPPING_MODES",
]

CLIPPING_MODES = ("flat", "per_layer", "adaptive", "ghost")


def _real(x, name: str, what: str) -> float:
    if isinstance(x, bool):
        raise ValueError(f"{name} must be {what}, got {x!r}")
    try:
        return float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {what}, got {x!r}") from None


def validate_beta(beta: float, name: str = "beta") -> float:
    """The GG shape β: a finite number ≥ 1 (1 = Laplace, 2 = Gaussian)."""
    b = _real(beta, name, "a finite number ≥ 1 (1 = Laplace, 2 = Gaussian)")
    if not math.isfinite(b) or b < 1.0:
        raise ValueError(f"{name} must be a finite number ≥ 1 (1 = Laplace, 2 = Gaussian), got {beta!r}")
    return b


def validate_scale(scale: float, name: str = "scale") -> float:
    """A scale s of the GG law (density ∝ exp(-|x|^β/(β s^β))): a finite number > 0."""
    return validate_positive(scale, name)


def validate_positive(x: float, name: str) -> float:
    """A finite number > 0."""
    v = _real(x, name, "a finite number > 0")
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {x!r}")
    return v


def validate_nonnegative(x: float, name: str) -> float:
    """A finite number ≥ 0."""
    v = _real(x, name, "a finite number ≥ 0")
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number ≥ 0, got {x!r}")
    return v


def validate_probability(x: float, name: str) -> float:
    """A number in [0, 1]."""
    v = _real(x, name, "a number in [0, 1]")
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}")
    return v


def validate_order(alpha: float, name: str = "alpha") -> float:
    """A Rényi order: a finite number > 1."""
    v = _real(alpha, name, "a finite number > 1")
    if not math.isfinite(v) or v <= 1:
        raise ValueError(f"{name} must be a finite number > 1, got {alpha!r}")
    return v


def validate_noise_multiplier(noise_multiplier: float, name: str = "noise_multiplier") -> float:
    """σ must be finite and ≥ 0 (σ = 0 adds no noise and has ε = ∞)."""
    return validate_nonnegative(noise_multiplier, name)


def validate_max_grad_norm(
    max_grad_norm: Union[float, Sequence[float]], name: str = "max_grad_norm"
) -> Union[float, List[float]]:
    """C must be finite and > 0; a list (per-layer clipping) must be non-empty with every C_l > 0."""
    if isinstance(max_grad_norm, (list, tuple)):
        if len(max_grad_norm) == 0:
            raise ValueError(f"{name} must be a number > 0 or a non-empty list of numbers > 0, got []")
        return [validate_max_grad_norm(c, f"{name}[{i}]") for i, c in enumerate(max_grad_norm)]
    c = _real(max_grad_norm, name, "a finite number > 0")
    if not math.isfinite(c) or c <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {max_grad_norm!r}")
    return c


def validate_clip_norm_p(clip_norm_p: Optional[float], beta: float, name: str = "clip_norm_p") -> float:
    """p of the ℓp clipping norm: 1 ≤ p ≤ ∞; ``None`` means p = β."""
    if clip_norm_p is None:
        return validate_beta(beta)
    p = _real(clip_norm_p, name, "a number in [1, inf] (None = beta)")
    if math.isnan(p) or p < 1:
        raise ValueError(f"{name} must be a number in [1, inf] (None = beta), got {clip_norm_p!r}")
    return p


def validate_sample_rate(sample_rate: float, name: str = "sample_rate") -> float:
    """Poisson sampling rate q ∈ (0, 1]."""
    q = _real(sample_rate, name, "a number in (0, 1]")
    if not (0.0 < q <= 1.0):
        raise ValueError(f"{name} must be a number in (0, 1], got {sample_rate!r}")
    return q


def validate_delta(delta: float, name: str = "delta") -> float:
    """δ ∈ (0, 1)."""
    d = _real(delta, name, "a number in (0, 1)")
    if not (0.0 < d < 1.0):
        raise ValueError(f"{name} must be a number in (0, 1), got {delta!r}")
    return d


def validate_delta_error(delta_error: Optional[float], delta: float, name: str = "delta_error") -> float:
    """The PRV accountant's δ slack: a number in (0, δ); ``None`` gives δ/1000."""
    if delta_error is None:
        return delta / 1000.0
    v = _real(delta_error, name, f"a number in (0, delta={delta})")
    if not (0 < v < delta):
        raise ValueError(f"{name} must be a number in (0, delta={delta}), got {delta_error!r}")
    return v


def validate_epsilon(epsilon: float, name: str = "target_epsilon") -> float:
    """ε ∈ (0, ∞)."""
    return validate_positive(epsilon, name)


def validate_positive_int(n: int, name: str, *, minimum: int = 1, allow_float: bool = True) -> int:
    """An integer ≥ ``minimum`` (default 1); integer-valued floats pass only when ``allow_float``."""
    integral = isinstance(n, numbers.Integral) or (allow_float and isinstance(n, float) and n.is_integer())
    if isinstance(n, bool) or not integral or int(n) < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum}, got {n!r}")
    return int(n)


def validate_rectify_bound(rectify_bound: Optional[float], name: str = "rectify_bound") -> Optional[float]:
    """``None`` (no clamping) or a bound a ∈ (0, ∞) for clamping noisy coordinates to [−a, a]."""
    if rectify_bound is None:
        return None
    a = _real(rectify_bound, name, "None or a finite number > 0")
    if not math.isfinite(a) or a <= 0:
        raise ValueError(f"{name} must be None or a finite number > 0, got {rectify_bound!r}")
    return a


def validate_clipping(clipping: str, beta: float, clip_norm_p: float, name: str = "clipping") -> str:
    """``clipping`` ∈ {flat, per_layer, adaptive, ghost}; ghost is ℓ2/Gaussian-only (β = p = 2), adaptive takes
    every β and p."""
    if clipping not in CLIPPING_MODES:
        raise ValueError(f"{name} must be one of {CLIPPING_MODES}, got {clipping!r}")
    if clipping == "ghost" and (beta != 2.0 or clip_norm_p != 2.0):
        raise ValueError(
            f"{name}={clipping!r} is ℓ2/Gaussian-specific and is only supported with beta=2 and "
            f"clip_norm_p=2 (got beta={beta}, clip_norm_p={clip_norm_p}); use clipping='flat' or 'per_layer'"
        )
    return clipping
