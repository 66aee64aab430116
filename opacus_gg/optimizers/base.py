r"""Mixins that turn Opacus's DPOptimizer family into β-DP-SGD optimizers.

One step (Algorithm 3 of the GG paper, Opacus semantics kept):

    ĝ = Σ_i g_i · min(1, C / (‖g_i‖_p + 1e-6))        (ℓp clipping, p = clip_norm_p, default β)
    g̃ = ĝ + Z,   Z_j ~ GG(β, s) i.i.d., density ∝ exp(−|z|^β / (β s^β)),  s = noise_multiplier · C
    g̃ ← clamp(g̃, −a, a)                               (only if rectify_bound = a is set)
    p.grad = g̃ / (expected_batch_size · accumulated_iterations)   (loss_reduction="mean")

At β = 2 the noise is drawn by Opacus's own ``add_noise`` (bit-identical to Opacus, secure_mode
included). For β ≠ 2, ``secure_mode=True`` raises: Opacus's floating-point-attack defence
(summing Gaussians, Holohan & Braghin) is specific to the Gaussian and has no proven GG analogue.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import torch
from opacus.optimizers.optimizer import DPOptimizer, _check_processed_flag, _mark_as_processed

from .. import distribution
from ..clipping import check_finite, clip_factors, per_layer_norms, per_sample_norms, total_sensitivity
from ..validation import (
    validate_beta,
    validate_clip_norm_p,
    validate_max_grad_norm,
    validate_noise_multiplier,
    validate_rectify_bound,
)

__all__ = ["GGParamsMixin", "GGClipMixin", "GGNoiseMixin"]


class GGParamsMixin(DPOptimizer):
    """Holds β, clip_norm_p, rectify_bound and dim; fixes the per-layer total sensitivity to ‖(C_l)‖_p."""

    def __init__(
        self,
        optimizer,
        *,
        noise_multiplier: float,
        max_grad_norm,
        beta: float = 2.0,
        clip_norm_p: Optional[float] = None,
        rectify_bound: Optional[float] = None,
        **kwargs,
    ):
        self.beta = validate_beta(beta)
        self.clip_norm_p = validate_clip_norm_p(clip_norm_p, self.beta)
        self.rectify_bound = validate_rectify_bound(rectify_bound)
        validate_noise_multiplier(noise_multiplier)
        validate_max_grad_norm(max_grad_norm)
        if kwargs.get("secure_mode", False) and self.beta != 2.0:
            raise ValueError(
                f"secure_mode=True is only supported at beta=2 (got beta={self.beta}): Opacus's "
                "floating-point-attack defence sums Gaussians and has no proven analogue for "
                "Generalized Gaussian noise. Use secure_mode=False (and say so) or beta=2."
            )
        super().__init__(optimizer, noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm, **kwargs)
        if hasattr(self, "max_grad_norms") and self.clip_norm_p != 2.0:  # per-layer: ‖(C_l)‖_p (p = 2: Opacus's)
            self.max_grad_norm = total_sensitivity(self.max_grad_norms, self.clip_norm_p)

    @property
    def dim(self) -> int:
        """Number of noised coordinates d = Σ numel over trainable parameters."""
        return int(sum(p.numel() for p in self.params))


class GGClipMixin(GGParamsMixin):
    """ℓp per-sample clipping (flat, or per-layer when ``self.max_grad_norms`` exists)."""

    def clip_and_accumulate(self) -> None:
        r"""ĝ_l += Σ_i f_i g_{i,l},  f_i = min(1, C/(‖g_i‖_p + 1e-6)) (flat) or per tensor with C_l.

        Raises ``FloatingPointError`` on a NaN/inf per-sample gradient before anything is stored.
        """
        p_norm = self.clip_norm_p
        opacus_l2 = self.beta == 2.0 and p_norm == 2.0  # Opacus's own formula: bit-identical at β = p = 2
        grads = [self._get_flat_grad_sample(p) for p in self.params]
        for p in self.params:
            _check_processed_flag(p.grad_sample)
        if len(grads[0]) == 0:
            factors = [torch.zeros((0,), device=grads[0].device)] * len(grads)
        elif hasattr(self, "max_grad_norms"):
            if opacus_l2:
                norms = [g.norm(2, dim=tuple(range(1, g.ndim))) for g in grads]
            else:
                norms = per_layer_norms(grads, p_norm)
            factors = []
            for n, c in zip(norms, self.max_grad_norms):
                check_finite(n)
                factors.append(clip_factors(n, c))
        else:
            if opacus_l2:
                dev = grads[0].device
                n = torch.stack([g.reshape(len(g), -1).norm(2, dim=-1).to(dev) for g in grads], dim=1).norm(2, dim=1)
            else:
                n = per_sample_norms(grads, p_norm)
            check_finite(n)
            factors = [clip_factors(n, self.max_grad_norm)] * len(grads)
        for p, g, f in zip(self.params, grads, factors):
            g = g.to(p.dtype)
            grad = torch.einsum("i,i...", f.to(g.device).to(p.dtype), g)
            if p.summed_grad is not None:
                p.summed_grad += grad
            else:
                p.summed_grad = grad
            _mark_as_processed(p.grad_sample)


class GGNoiseMixin(GGParamsMixin):
    """Adds GG(β, noise_multiplier·max_grad_norm) noise to the clipped sum, then optional clamping."""

    def add_noise(self) -> None:
        r"""p.grad = clamp(ĝ + Z, −a, a),  Z ~ GG(β, σC)^{⊗ shape}; at β = 2 Opacus's Gaussian path.

        For β ≠ 2 the noise of all parameters (per device and dtype) is drawn in ONE call into one
        flat buffer; ĝ is added into it in place and each ``p.grad`` is a view of it. σC = 0 adds no
        noise (as Opacus's ``_generate_noise`` at std 0).
        """
        if self.beta == 2.0:
            super().add_noise()
        else:
            for p in self.params:
                _check_processed_flag(p.summed_grad)
            scale = self.noise_multiplier * self.max_grad_norm
            for ps in _group_by_device_dtype(self.params):
                ref = ps[0].summed_grad
                total = sum(p.summed_grad.numel() for p in ps)
                if scale == 0:
                    flat = torch.zeros(total, device=ref.device, dtype=ref.dtype)
                else:
                    flat = distribution.sample(
                        total, self.beta, scale, generator=self.generator, device=ref.device, dtype=ref.dtype
                    )
                offset = 0
                for p in ps:
                    k = p.summed_grad.numel()
                    view = flat[offset : offset + k].view_as(p)
                    view.add_(p.summed_grad.view_as(p))
                    p.grad = view
                    offset += k
            for p in self.params:
                _mark_as_processed(p.summed_grad)
        if self.rectify_bound is not None:
            a = self.rectify_bound
            for p in self.params:
                p.grad.clamp_(-a, a)


def _group_by_device_dtype(params) -> List[list]:
    """Parameters grouped by (device, dtype) of their ``summed_grad``, in order of first appearance."""
    groups: Dict[tuple, list] = {}
    for p in params:
        groups.setdefault((p.summed_grad.device, p.summed_grad.dtype), []).append(p)
    return list(groups.values())
