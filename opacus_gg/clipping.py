r"""ℓp per-sample norms and clip factors for β-DP-SGD.

For per-sample gradients g_i = (g_{i,1}, …, g_{i,L}) split over L parameter tensors, the flat
ℓp norm over the whole model is

    ‖g_i‖_p = (Σ_l ‖g_{i,l}‖_p^p)^{1/p}     (p = ∞: max_l ‖g_{i,l}‖_∞),

and each g_i is scaled by min(1, C / (‖g_i‖_p + 1e-6)) (Opacus's clip factor), so that
‖clipped g_i‖_p ≤ C. For numerical stability the p-norm (p ≠ 2) is computed after dividing by
the per-sample max M_i = ‖g_i‖_∞:  ‖g_i‖_p = M_i · (Σ |g/M_i|^p)^{1/p}; without the rescaling a
large p underflows tiny entries to 0 and overflows big ones to inf (an inf norm would silently
zero the gradient). A NaN/inf per-sample gradient raises ``FloatingPointError``.
"""

from __future__ import annotations

import math
from typing import List, Sequence, Union

import torch

__all__ = ["per_sample_norms", "per_layer_norms", "clip_factors", "total_sensitivity", "check_finite"]


def _flat(g: torch.Tensor) -> torch.Tensor:
    return g.reshape(len(g), -1)


def check_finite(norms: torch.Tensor, what: str = "per-sample gradient") -> None:
    """Raise ``FloatingPointError`` if any norm is NaN or inf (a NaN/inf per-sample gradient)."""
    if norms.numel() and not bool(torch.isfinite(norms).all()):
        bad = (~torch.isfinite(norms)).nonzero().flatten().tolist()[:10]
        raise FloatingPointError(
            f"{what} is NaN or inf for sample(s) {bad} of the batch; refusing to clip, noise or "
            f"step on it (nothing was applied to the parameters)"
        )


def per_layer_norms(grads: Sequence[torch.Tensor], p: float) -> List[torch.Tensor]:
    r"""ℓp norm of each per-sample gradient of each tensor: [‖g_{i,l}‖_p]_i for every l (stable)."""
    out = []
    for g in grads:
        out.append(per_sample_norms([g], p))
    return out


def _max_abs(g: torch.Tensor) -> torch.Tensor:
    """Per-sample ‖g_i‖_∞ via two allocation-free reductions (NaN propagates)."""
    f = _flat(g)
    return torch.maximum(f.amax(dim=-1), f.amin(dim=-1).neg())


def per_sample_norms(grads: Sequence[torch.Tensor], p: float) -> torch.Tensor:
    r"""Flat ℓp norm per sample over all tensors: (Σ_l ‖g_{i,l}‖_p^p)^{1/p}, shape [B].

    Each tensor has the batch on dim 0. p = 2 uses the plain 2-norm, as Opacus does (bit-equal).
    Otherwise M_i = max_l ‖g_{i,l}‖_∞ is computed first; when M_i^p·n is safely inside the
    floating-point range for every sample (no overflow, underflow losses < 1e-8 relative) the sum
    Σ|g|^p is taken directly, else as M_i (Σ_l ‖g_{i,l}/M_i‖_p^p)^{1/p}. Norms are returned on the
    device of the first tensor.
    """
    if len(grads) == 0:
        raise ValueError("grads must contain at least one tensor")
    device = grads[0].device
    B = len(grads[0])
    if B == 0:
        return torch.zeros((0,), device=device)
    if p == 2.0:
        norms = [_flat(g).norm(2, dim=-1).to(device) for g in grads]
        return torch.stack(norms, dim=1).norm(2, dim=1)
    maxes = torch.stack([_max_abs(g).to(device) for g in grads], dim=1).amax(dim=1)
    if math.isinf(p):
        return maxes
    if not bool(torch.isfinite(maxes).all()):
        return maxes  # NaN/inf entries: the caller raises
    n = sum(_flat(g).shape[1] for g in grads)
    fi = torch.finfo(grads[0].dtype if grads[0].is_floating_point() else torch.float32)
    m64 = maxes.double()
    pos = m64[m64 > 0]
    log_mp = p * torch.log(pos) if pos.numel() else torch.zeros(1, dtype=torch.float64)
    direct = bool(
        (log_mp + math.log(n) <= math.log(fi.max) - 2.0).all()
        and (log_mp >= math.log(n * fi.tiny) + 8.0 * math.log(10.0)).all()
    )
    total = None
    if direct:
        for g in grads:
            part = torch.linalg.vector_norm(_flat(g), ord=p, dim=-1).to(device, torch.float64).pow(p)
            total = part if total is None else total + part
        return total.pow(1.0 / p).to(maxes.dtype)
    safe = torch.where(maxes > 0, maxes, torch.ones_like(maxes))
    for g in grads:
        scaled = _flat(g) / safe.to(g.device, g.dtype)[:, None]
        part = torch.linalg.vector_norm(scaled, ord=p, dim=-1).to(device, torch.float64).pow(p)
        total = part if total is None else total + part
    return (total.pow(1.0 / p) * maxes.double()).to(maxes.dtype)


def clip_factors(norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    r"""Per-sample clip factor min(1, C / (‖g_i‖_p + 1e-6)) (Opacus's formula)."""
    return (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)


def total_sensitivity(max_grad_norms: Union[float, Sequence[float]], p: float) -> float:
    r"""ℓp sensitivity of per-layer clipping with bounds C_l: ‖(C_l)_l‖_p = (Σ_l C_l^p)^{1/p} (max at p = ∞)."""
    if isinstance(max_grad_norms, (int, float)):
        return float(max_grad_norms)
    c = torch.tensor([float(x) for x in max_grad_norms], dtype=torch.float64)
    return float(torch.linalg.vector_norm(c, ord=p)) if not math.isinf(p) else float(c.max())
