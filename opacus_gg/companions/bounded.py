r"""Bounded support (Hu, Mahloujifar, Smith, Chaudhuri, Guo 2024): rectification and per-instance privacy.

1. :func:`rectify` clamps a released noisy gradient to [-a, a] coordinate-wise. This is post-processing of
   the (β-)DP release, so the DP guarantee (and the accountant's ε) is unchanged, for every β.
2. A **data-dependent per-instance report** for full-batch training with the rectified or truncated
   Gaussian mechanism on the support S = [-a, a] (per coordinate, ℓ∞ box), noise std σ, location θ:

   Δ(x) = Φ((a-x)/σ) - Φ((-a-x)/σ),   D_α^N = α c²/(2σ²)   (Gaussian, Mironov Prop. 7)

   * rectified (Hu et al. Lemma 4.4 / App. B, correct):
     D_α(N^R(θ)‖N^R(θ+c)) = 1/(α-1)·log[ e^{α(α-1)c²/(2σ²)} Δ(θ+(1-α)c)
                              + Φ((-a-θ)/σ)^α Φ((-a-θ-c)/σ)^{1-α} + Φ((θ-a)/σ)^α Φ((θ+c-a)/σ)^{1-α} ]
   * truncated (App. B, correct; the main-text eq. (6) is wrong):
     D_α(N^T(θ)‖N^T(θ+c)) = D_α^N + log(Δ(θ+c)/Δ(θ)) + 1/(α-1)·log(Δ(θ+(1-α)c)/Δ(θ))
   * Fisher information, z_± = (±a-θ)/σ, Z = Φ(z_+) - Φ(z_-):
     truncated (eq. (3), correct): I = [1 - (φ(z_+)-φ(z_-))²/Z² + (z_-φ(z_-) - z_+φ(z_+))/Z]/σ²
     rectified (eq. (4) and App. A have the sign of the interior mass wrong; correct):
     I = [φ(z_-)²/Φ(z_-) + φ(z_+)²/Φ(-z_+) + Φ(z_+) - Φ(z_-) + z_-φ(z_-) - z_+φ(z_+)]/σ²

   These numbers depend on the actual data: they are NOT a DP guarantee and must not be released
   (Wang 2019; Redberg & Wang 2021).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Union

import numpy as np
import torch
from scipy import special
from scipy.stats import norm

from ..validation import validate_order, validate_positive, validate_rectify_bound

__all__ = [
    "rectify",
    "rdp_gaussian",
    "rdp_rectified",
    "rdp_truncated",
    "fisher_information_gaussian",
    "fisher_information_rectified",
    "fisher_information_truncated",
    "symmetric_rdp",
    "per_instance_report",
    "PER_INSTANCE_LABEL",
]

PER_INSTANCE_LABEL = "data-dependent per-instance privacy — NOT a DP guarantee; do not release"
_MECHANISMS = ("rectified", "truncated", "gaussian")


def rectify(x: torch.Tensor, a: float) -> torch.Tensor:
    r"""Clamp every coordinate to [-a, a] (post-processing: the DP guarantee is unchanged for any β)."""
    a = validate_rectify_bound(validate_positive(a, "rectify_bound"))  # None is no bound for the engine, not here
    return torch.clamp(x, -a, a)


def _log_delta(x: np.ndarray, sigma: float, a: float) -> np.ndarray:
    """log Δ(x) = log P(N(x, σ²) ∈ [-a, a]), stable in both tails."""
    hi, lo = (a - x) / sigma, (-a - x) / sigma
    # Φ(hi) - Φ(lo) = Φ(-lo) - Φ(-hi); use the side with the smaller (more accurate) values
    left = special.log_ndtr(hi) + np.log(-np.expm1(np.minimum(special.log_ndtr(lo) - special.log_ndtr(hi), -1e-300)))
    right = special.log_ndtr(-lo) + np.log(
        -np.expm1(np.minimum(special.log_ndtr(-hi) - special.log_ndtr(-lo), -1e-300))
    )
    return np.where(x > 0, left, right)


def rdp_gaussian(c: Union[float, np.ndarray], sigma: float, alpha: float) -> np.ndarray:
    r"""D_α(N(θ,σ²)‖N(θ+c,σ²)) = α c²/(2σ²)."""
    sigma, alpha = validate_positive(sigma, "sigma"), validate_order(alpha)
    return alpha * np.asarray(c, dtype=np.float64) ** 2 / (2 * sigma**2)


def rdp_truncated(theta, c, sigma: float, a: float, alpha: float) -> np.ndarray:
    r"""D_α(N^T(θ,σ²,[-a,a])‖N^T(θ+c,σ²,[-a,a])) (Hu et al. App. B; see module doc)."""
    sigma, a, alpha = validate_positive(sigma, "sigma"), validate_positive(a, "a"), validate_order(alpha)
    theta, c = np.broadcast_arrays(np.asarray(theta, np.float64), np.asarray(c, np.float64))
    ld0 = _log_delta(theta, sigma, a)
    return (
        alpha * c**2 / (2 * sigma**2)
        + _log_delta(theta + c, sigma, a) - ld0
        + (_log_delta(theta + (1 - alpha) * c, sigma, a) - ld0) / (alpha - 1)
    )


def rdp_rectified(theta, c, sigma: float, a: float, alpha: float) -> np.ndarray:
    r"""D_α(N^R(θ,σ²,[-a,a])‖N^R(θ+c,σ²,[-a,a])) (Hu et al. Lemma 4.4; log-sum-exp of the three parts)."""
    sigma, a, alpha = validate_positive(sigma, "sigma"), validate_positive(a, "a"), validate_order(alpha)
    theta, c = np.broadcast_arrays(np.asarray(theta, np.float64), np.asarray(c, np.float64))
    interior = alpha * (alpha - 1) * c**2 / (2 * sigma**2) + _log_delta(theta + (1 - alpha) * c, sigma, a)
    low = alpha * special.log_ndtr((-a - theta) / sigma) + (1 - alpha) * special.log_ndtr((-a - theta - c) / sigma)
    high = alpha * special.log_ndtr((theta - a) / sigma) + (1 - alpha) * special.log_ndtr((theta + c - a) / sigma)
    return special.logsumexp(np.stack([interior, low, high]), axis=0) / (alpha - 1)


def fisher_information_gaussian(theta, sigma: float) -> np.ndarray:
    r"""I(θ) = 1/σ² for N(θ, σ²)."""
    sigma = validate_positive(sigma, "sigma")
    return np.full(np.shape(theta), 1.0 / sigma**2)


def fisher_information_truncated(theta, sigma: float, a: float) -> np.ndarray:
    r"""I(θ) of N^T(θ,σ²,[-a,a]) = Var(X)/σ⁴ (Hu et al. eq. (3), verified by quadrature)."""
    sigma, a = validate_positive(sigma, "sigma"), validate_positive(a, "a")
    theta = np.asarray(theta, np.float64)
    zp, zm = (a - theta) / sigma, (-a - theta) / sigma
    z = np.exp(_log_delta(theta, sigma, a))
    pp, pm = norm.pdf(zp), norm.pdf(zm)
    return (1.0 - ((pp - pm) / z) ** 2 + (zm * pm - zp * pp) / z) / sigma**2


def fisher_information_rectified(theta, sigma: float, a: float) -> np.ndarray:
    r"""I(θ) of N^R(θ,σ²,[-a,a]) = E[(∂_θ log p)²] (corrected Hu et al. eq. (4); see module doc)."""
    sigma, a = validate_positive(sigma, "sigma"), validate_positive(a, "a")
    theta = np.asarray(theta, np.float64)
    zp, zm = (a - theta) / sigma, (-a - theta) / sigma
    pp, pm = norm.pdf(zp), norm.pdf(zm)
    # φ(z)²/Φ(z) computed as exp(2 log φ - log Φ) for stability in the far tail
    atom_low = np.exp(2 * norm.logpdf(zm) - special.log_ndtr(zm))
    atom_high = np.exp(2 * norm.logpdf(zp) - special.log_ndtr(-zp))
    interior = np.exp(_log_delta(theta, sigma, a)) + zm * pm - zp * pp
    return (atom_low + atom_high + interior) / sigma**2


def symmetric_rdp(theta, c, sigma: float, a: float, alpha: float, mechanism: str = "rectified") -> np.ndarray:
    r"""max{D_α(B(θ)‖B(θ+c)), D_α(B(θ+c)‖B(θ))} element-wise, B ∈ {rectified, truncated, gaussian}."""
    if mechanism not in _MECHANISMS:
        raise ValueError(f"mechanism must be one of {_MECHANISMS}, got {mechanism!r}")
    theta, c = np.broadcast_arrays(np.asarray(theta, np.float64), np.asarray(c, np.float64))
    if mechanism == "gaussian":
        return rdp_gaussian(c, sigma, alpha)
    f = rdp_rectified if mechanism == "rectified" else rdp_truncated
    return np.maximum(f(theta, c, sigma, a, alpha), f(theta + c, -c, sigma, a, alpha))


def per_instance_report(
    per_sample_grads: Union[np.ndarray, torch.Tensor],
    *,
    sigma: float,
    a: float,
    max_grad_norm: Optional[float] = None,
    alphas: Sequence[float] = (2.0,),
    mechanism: str = "rectified",
) -> Dict[str, object]:
    r"""Per-example Rényi DP and Fisher information loss of one full-batch bounded-Gaussian step.

    θ = Σ_i g_i (n × d per-example, ℓ∞-clipped gradients), noise std σ, support [-a, a]^d. For example i,
    removing it moves θ to θ - g_i, so per coordinate c_ij = -g_ij and

        ε_i(α) = max_{pair order} Σ_j D_α(pair of B(θ_j), B(θ_j - g_ij)),
        η_i = √(Σ_j I(θ_j)·g_ij²)   (Fisher information about the example's contribution, J = g_i).

    With ``max_grad_norm = C`` (ℓ∞ clip) it also gives Hu et al.'s Algorithm-1 "pDP for all" value
    max_{pair order} Σ_j max_{c = ±C} D_α(...) for an arbitrary added example. Everything returned is
    data-dependent: NOT a DP guarantee, not to be released.
    """
    g = per_sample_grads.detach().cpu().double().numpy() if isinstance(per_sample_grads, torch.Tensor) else (
        np.asarray(per_sample_grads, dtype=np.float64)
    )
    if g.ndim != 2:
        raise ValueError(f"per_sample_grads must be a 2-D (n, d) array, got shape {g.shape}")
    if mechanism not in _MECHANISMS:
        raise ValueError(f"mechanism must be one of {_MECHANISMS}, got {mechanism!r}")
    sigma, a = validate_positive(sigma, "sigma"), validate_positive(a, "a")
    alphas = [validate_order(al) for al in alphas]
    theta = g.sum(axis=0)
    out: Dict[str, object] = {"label": PER_INSTANCE_LABEL, "certified": False, "mechanism": mechanism,
                              "alphas": alphas}
    f = {"rectified": rdp_rectified, "truncated": rdp_truncated}.get(mechanism)

    def _div(th, c, al):
        return rdp_gaussian(c, sigma, al) if f is None else f(th, c, sigma, a, al)

    per_example = np.empty((g.shape[0], len(alphas)))
    for m, al in enumerate(alphas):
        fwd = _div(theta[None, :], -g, al).sum(axis=1)  # D(B(θ)‖B(θ - g_i))
        bwd = _div(theta[None, :] - g, g, al).sum(axis=1)  # D(B(θ - g_i)‖B(θ))
        per_example[:, m] = np.maximum(fwd, bwd)
    out["rdp_per_example"] = per_example
    if max_grad_norm is not None:
        c = validate_positive(max_grad_norm, "max_grad_norm")
        for_all = []
        for al in alphas:
            fwd = np.maximum(_div(theta, c, al), _div(theta, -c, al)).sum()
            bwd = np.maximum(_div(theta + c, -c, al), _div(theta - c, c, al)).sum()
            for_all.append(float(max(fwd, bwd)))
        out["rdp_for_all"] = np.array(for_all)
    info = {
        "rectified": lambda t: fisher_information_rectified(t, sigma, a),
        "truncated": lambda t: fisher_information_truncated(t, sigma, a),
        "gaussian": lambda t: fisher_information_gaussian(t, sigma),
    }[mechanism](theta)
    out["fisher_information_per_coordinate"] = info
    out["fil_per_example"] = np.sqrt((g**2 * info[None, :]).sum(axis=1))
    return out
