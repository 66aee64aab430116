r"""Per-coordinate Rényi moments of the GG pair and the Poisson-subsampled RDP of one equal spread.

Units: noise scale 1, one-coordinate shift ``a``; P = GG(a), Q = GG(0) with density ∝ exp(-|x|^β/β). The
one-coordinate privacy loss is ℓ = log(dP/dQ) and its moments are

    M(j) = E_Q[e^{jℓ}] = ∫ p^j q^{1-j} dx = exp((j-1)·D_j(P‖Q))      (M(0) = M(1) = 1),

computed by quadrature in log space (breakpoints at 0, a and the integrand's peak), with the quadrature's
error estimate *added* to the integral so the result never rounds down. By reflection x → a - x,
D_α(P‖Q) = D_α(Q‖P). A shift spread equally over k coordinates (``‖μ‖_p = 1/noise_multiplier``, each
coordinate moving by a_k) has M_k(j) = M(j; a_k)^k.

Poisson subsampling with rate q, integer order α ≥ 2:

* remove (exact):  E_Q[(1-q+qe^ℓ)^α] = Σ_j C(α,j)(1-q)^{α-j} q^j M(j);
* add (upper bound), the smaller of
  - Jensen (convexity of x^{1-α}):  E_Q[(1-q+qe^ℓ)^{1-α}] ≤ (1-q) + q·M(α),
  - Taylor with Lagrange remainder (f(y) = (1+y)^{1-α}, y = q(e^ℓ-1) ≥ -q, f'' ≤ f''(-q)):
    E_Q[(1-q+qe^ℓ)^{1-α}] ≤ 1 + C(α,2)(1-q)^{-α-1} q² χ², with χ² = M(2) - 1.

Used by the proven bound over the ℓp ball (:mod:`.ball_rdp`), the prv_accountant variable
(:mod:`.prv_variable`) and the RDP companion (:mod:`opacus_gg.companions.rdp`).
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache
from typing import Dict, List, Optional, Sequence

import numpy as np
from scipy import integrate, optimize, special

from ..validation import validate_beta, validate_clip_norm_p, validate_positive, validate_sample_rate
from .shapes import per_coordinate_shift

__all__ = ["DEFAULT_ORDERS", "log_moment", "renyi_divergence", "subsampled_rdp", "subsampled_rdp_from_log_moments"]

DEFAULT_ORDERS: List[int] = list(range(2, 65)) + [80, 96, 128, 160, 192, 256]
_LOG_INF = 1e8  # log-moments beyond this are treated as +inf (the order is useless anyway)


def _log_z(beta: float) -> float:
    """log of the GG(β, 1) normaliser 2 β^{1/β} Γ(1 + 1/β)."""
    return math.log(2.0) + math.log(beta) / beta + special.gammaln(1.0 + 1.0 / beta)


@lru_cache(maxsize=65536)
def _log_moment_cached(j: float, a: float, beta: float, epsrel: float = 1e-11) -> float:
    if j == 0.0 or j == 1.0 or a == 0.0:
        return 0.0

    def g(x: float) -> float:  # log of p(x)^j q(x)^{1-j} (normaliser added at the end)
        return -(j * abs(x - a) ** beta + (1.0 - j) * abs(x) ** beta) / beta

    if 0.0 < j < 1.0:
        res = optimize.minimize_scalar(lambda x: -g(x), bounds=(0.0, a), method="bounded")
        x_star = float(res.x)
    elif beta == 1.0:
        x_star = a
    else:
        r = ((j - 1.0) / j) ** (1.0 / (beta - 1.0))
        x_star = a / max(1.0 - r, 1e-300)
        if not math.isfinite(x_star):
            return math.inf
    g_star = g(x_star)
    if not math.isfinite(g_star) or g_star - _log_z(beta) > _LOG_INF:
        return math.inf
    pts = sorted({0.0, a, x_star})
    pieces = [(-math.inf, pts[0])] + list(zip(pts[:-1], pts[1:])) + [(pts[-1], math.inf)]
    total = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        for lo, hi in pieces:
            if hi <= lo:
                continue
            val, err = integrate.quad(_shifted_integrand(j, a, beta, g_star), lo, hi, limit=200, epsabs=1e-14,
                                      epsrel=epsrel)
            total += val + abs(err) + 1e-10 * abs(val)  # never round the moment down
    return g_star - _log_z(beta) + math.log(total)


def _shifted_integrand(j: float, a: float, beta: float, g_star: float):
    """x ↦ exp(g(x) − g*) with g(x) = −(j|x − a|^β + (1 − j)|x|^β)/β, constants folded (the quadratures' hot loop)."""
    c1, c0, exp = -j / beta, -(1.0 - j) / beta, math.exp
    return lambda x: exp(c1 * abs(x - a) ** beta + c0 * abs(x) ** beta - g_star)


def log_moment(j: float, a: float, beta: float, *, epsrel: float = 1e-11) -> float:
    r"""log M(j) = log ∫ p^j q^{1-j} dx for P = GG(a), Q = GG(0), scale 1 (= (j-1)·D_j(P‖Q)).

    β = 2 closed form: j(j-1)a²/2 (used by the tests as reference). Quadrature in log space otherwise,
    requested to relative accuracy ``epsrel``; the error estimate is added (never rounded down) whatever it is.
    """
    beta = validate_beta(beta)
    j = float(j)
    if not math.isfinite(j) or j < 0:
        raise ValueError(f"order j must be a finite number ≥ 0, got {j!r}")
    return _log_moment_cached(j, abs(float(a)), beta, float(epsrel))


def renyi_divergence(alpha: float, a: float, beta: float) -> float:
    r"""D_α(GG(a)‖GG(0)) = log M(α)/(α-1) for α > 1 (symmetric in the order of the pair)."""
    alpha = float(alpha)
    if not alpha > 1.0:
        raise ValueError(f"alpha must be > 1, got {alpha!r}")
    return log_moment(alpha, a, beta) / (alpha - 1.0)


def subsampled_rdp(
    orders: Sequence[int], *, noise_multiplier: float, sample_rate: float, beta: float, k: int = 1,
    clip_norm_p: Optional[float] = None,
) -> Dict[str, np.ndarray]:
    r"""One-step RDP (remove exact, add upper bound) of the shape spread over k coordinates, per order.

    Returns ``{"remove": array, "add": array}`` with RDP values at each integer order α ≥ 2 (see module doc).
    """
    beta = validate_beta(beta)
    sigma = validate_positive(noise_multiplier, "noise_multiplier")
    q = validate_sample_rate(sample_rate)
    p = validate_clip_norm_p(clip_norm_p, beta)
    orders = [int(o) for o in orders]
    if any(o < 2 for o in orders):
        raise ValueError("orders must be integers ≥ 2")
    a_k = per_coordinate_shift(sigma, int(k), p)
    logm = np.array([k * log_moment(j, a_k, beta) for j in range(max(orders) + 1)])  # log M_k(j)
    return subsampled_rdp_from_log_moments(orders, q, logm)


def subsampled_rdp_from_log_moments(orders: Sequence[int], sample_rate: float, logm: np.ndarray) -> Dict[str, np.ndarray]:
    r"""One-step RDP per integer order α ≥ 2 of the Poisson-subsampled pair whose moments are logm[j] = log M(j),
    j = 0 … max(orders) (exact values, or upper bounds: both results are non-decreasing in every logm[j]).

    remove: log Σ_j C(α,j)(1-q)^{α-j} q^j M(j) / (α-1) (exact); add: log min(Jensen, Taylor) / (α-1), Jensen
    (1-q) + q·M(α), Taylor 1 + C(α,2)(1-q)^{-α-1} q² (M(2) - 1) (module doc).
    """
    q = float(sample_rate)
    lm2 = float(logm[2])
    if lm2 <= 0.0:  # no shift: χ² = 0
        log_chi2 = -math.inf
    else:  # log χ² = log(M(2) - 1)
        log_chi2 = math.log(math.expm1(lm2)) if lm2 < 700 else lm2 + math.log1p(-math.exp(-lm2))
    remove, add = [], []
    for alpha in orders:
        alpha = int(alpha)
        j = np.arange(alpha + 1)
        log_binom = special.gammaln(alpha + 1) - special.gammaln(j + 1) - special.gammaln(alpha - j + 1)
        with np.errstate(divide="ignore"):
            log_terms = log_binom + j * math.log(q) + logm[: alpha + 1]
        if q < 1.0:
            log_terms = log_terms + (alpha - j) * math.log1p(-q)
        else:
            log_terms = np.where(j == alpha, log_terms, -np.inf)
        remove.append(float(special.logsumexp(log_terms)) / (alpha - 1))
        # add direction: min(Jensen, Taylor) upper bounds of E_Q[(1-q+qe^ℓ)^{1-α}]
        jensen = float(np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, math.log(q) + logm[alpha]))
        if q < 1.0:
            taylor = float(np.logaddexp(
                0.0, math.log(alpha * (alpha - 1) / 2) - (alpha + 1) * math.log1p(-q) + 2 * math.log(q) + log_chi2
            ))
            add.append(min(jensen, taylor) / (alpha - 1))
        else:
            add.append(jensen / (alpha - 1))
    return {"remove": np.array(remove), "add": np.array(add)}
