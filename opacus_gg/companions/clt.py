r"""Gaussian-DP / central-limit (CLT) *estimates* for Poisson-subsampled β-DP-SGD (Bu, Dong, Long, Su 2019).

**Every number here is an estimate, NOT a privacy guarantee.** The privacy CLT is asymptotic
(q√T → ν, T → ∞); at finite T the exact ε can be larger than the CLT ε (it is on most of Bu et al.'s own
MNIST rows), so nothing in this module is ever what ``get_epsilon`` returns.

Units: noise scale 1, one-coordinate shift a = 1/noise_multiplier, P = GG(a), Q = GG(0).

* χ² = E_Q[(dP/dQ - 1)²] = M(2) - 1 with M(2) = ∫ p²/q (quadrature, :func:`opacus_gg.accountants.renyi.log_moment`);
  closed forms e^{a²} - 1 (β = 2) and (2/3)e^{a} + (1/3)e^{-2a} - 1 (β = 1, Laplace).
* A shift spread equally over k coordinates (each moves a_k = a/k^{1/p}) has 1 + χ²_k = (1 + χ²(a_k))^k.
* μ = q·√(T·χ²_k), maximised over the evaluated shapes k (:func:`opacus_gg.companions.rdp.shift_shapes`).
* μ-GDP → (ε, δ):  δ(ε) = Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2); trade-off f(α) = Φ(Φ^{-1}(1-α) - μ).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Optional, Union

import numpy as np
from scipy import optimize
from scipy.stats import norm

from ..accountants.shapes import per_coordinate_shift
from ..accountants.renyi import log_moment
from .rdp import shift_shapes
from ..validation import (
    validate_beta,
    validate_clip_norm_p,
    validate_delta,
    validate_noise_multiplier,
    validate_nonnegative,
    validate_positive,
    validate_positive_int,
    validate_sample_rate,
)

__all__ = [
    "CLTEstimate",
    "chi_squared",
    "chi_squared_gaussian",
    "chi_squared_laplace",
    "clt_mu",
    "delta_from_mu",
    "epsilon_from_mu",
    "tradeoff",
    "clt_epsilon",
]

NOT_A_GUARANTEE = "CLT estimate (Bu et al. 2019) — NOT a privacy guarantee"


def chi_squared_gaussian(noise_multiplier: float) -> float:
    r"""χ²(N(a,1)‖N(0,1)) = e^{a²} - 1 with a = 1/noise_multiplier."""
    a = 1.0 / validate_noise_multiplier(noise_multiplier, allow_zero=False)
    return math.expm1(a * a)


def chi_squared_laplace(noise_multiplier: float) -> float:
    r"""χ²(Lap(a,1)‖Lap(0,1)) = (2/3)e^{a} + (1/3)e^{-2a} - 1 with a = 1/noise_multiplier."""
    a = 1.0 / validate_noise_multiplier(noise_multiplier, allow_zero=False)
    return (2.0 / 3.0) * math.exp(a) + (1.0 / 3.0) * math.exp(-2.0 * a) - 1.0


def chi_squared(
    noise_multiplier: float, beta: float = 2.0, *, k: int = 1, clip_norm_p: Optional[float] = None
) -> float:
    r"""χ² of the k-coordinate GG pair: (1 + χ²(a_k))^k - 1 = expm1(k·log M(2; a_k)), a_k = a/k^{1/p}."""
    beta = validate_beta(beta)
    sigma = validate_noise_multiplier(noise_multiplier, allow_zero=False)
    k = validate_positive_int(k, "k")
    p = validate_clip_norm_p(clip_norm_p, beta)
    log_m2 = k * log_moment(2.0, per_coordinate_shift(sigma, k, p), beta)
    return math.expm1(log_m2) if log_m2 < 700 else math.inf


def clt_mu(
    *, noise_multiplier: float, sample_rate: float, steps: Union[int, float], beta: float = 2.0,
    k: int = 1, clip_norm_p: Optional[float] = None,
) -> float:
    r"""CLT GDP parameter μ = q·√(T·χ²_k) (Bu et al. eq. (5) generalised to GG noise and k-coordinate shapes)."""
    q = validate_sample_rate(sample_rate)
    t = validate_positive(steps, "steps")
    return q * math.sqrt(t * chi_squared(noise_multiplier, beta, k=k, clip_norm_p=clip_norm_p))


def delta_from_mu(epsilon: Union[float, np.ndarray], mu: float) -> Union[float, np.ndarray]:
    r"""δ(ε) of μ-GDP: Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2) (log-space for the second term)."""
    mu = validate_positive(mu, "mu")
    eps = np.asarray(epsilon, dtype=np.float64)
    if np.any(eps < 0) or np.any(np.isnan(eps)):
        raise ValueError(f"epsilon must be ≥ 0, got {epsilon!r}")
    val = norm.cdf(-eps / mu + mu / 2) - np.exp(eps + norm.logcdf(-eps / mu - mu / 2))
    val = np.maximum(val, 0.0)
    return float(val) if val.ndim == 0 else val


def epsilon_from_mu(mu: float, delta: float) -> float:
    r"""ε(δ) of μ-GDP: the root of δ(ε; μ) = δ (0 when δ ≥ δ(0; μ) = 2Φ(μ/2) - 1)."""
    mu = validate_positive(mu, "mu")
    delta = validate_delta(delta)
    if delta_from_mu(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while delta_from_mu(hi, mu) > delta:
        hi *= 2.0
        if hi > 1e7:
            return math.inf
    return float(optimize.brentq(lambda e: delta_from_mu(e, mu) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12))


def tradeoff(alpha: Union[float, np.ndarray], mu: float) -> Union[float, np.ndarray]:
    r"""GDP trade-off curve G_μ(α) = Φ(Φ^{-1}(1 - α) - μ) (minimal type-II error at type-I error α)."""
    mu = validate_nonnegative(mu, "mu")
    a = np.asarray(alpha, dtype=np.float64)
    if np.any((a < 0) | (a > 1)) or np.any(np.isnan(a)):
        raise ValueError("alpha must lie in [0, 1]")
    val = norm.cdf(norm.ppf(1.0 - a) - mu)
    return float(val) if val.ndim == 0 else val


@dataclass
class CLTEstimate:
    """A CLT/GDP estimate: ``certified`` is always False."""

    mu: float
    epsilon: float
    delta: float
    shape_k: int
    chi2: float
    certified: bool = False
    label: str = NOT_A_GUARANTEE
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain-dict form (JSON friendly)."""
        return asdict(self)


def clt_epsilon(
    *, noise_multiplier: float, sample_rate: float, steps: Union[int, float], delta: float,
    beta: float = 2.0, dim: int = 1, clip_norm_p: Optional[float] = None,
) -> CLTEstimate:
    r"""CLT estimate of ε(δ): μ = max_k q√(T·χ²_k) over the evaluated shift shapes, then ε(δ; μ).

    NOT a guarantee (see module doc). For β = p = 2 every shape gives the same μ (Bu et al.'s eq. (5)).
    """
    beta = validate_beta(beta)
    delta = validate_delta(delta)
    dim = validate_positive_int(dim, "dim")
    p = validate_clip_norm_p(clip_norm_p, beta)
    per_shape = {}
    for k in shift_shapes(dim, beta, p):
        per_shape[k] = clt_mu(
            noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps, beta=beta, k=k, clip_norm_p=p
        )
    k_star = max(per_shape, key=per_shape.get)
    mu = per_shape[k_star]
    eps = epsilon_from_mu(mu, delta) if math.isfinite(mu) else math.inf
    return CLTEstimate(
        mu=mu, epsilon=eps, delta=delta, shape_k=k_star,
        chi2=chi_squared(noise_multiplier, beta, k=k_star, clip_norm_p=p),
        details={"mu_per_shape": {str(k): v for k, v in per_shape.items()}},
    )
