r"""Carrying an ℓ2-tuned clipping bound C over to ℓp clipping.

Opacus clips each per-sample gradient to ‖g‖₂ ≤ C. ``GGPrivacyEngine.make_private(beta=β)`` clips in ℓp with
p = ``clip_norm_p`` (default β), and the same number C then bounds ‖g‖_p. For a gradient with d coordinates

    ‖g‖₂ ≤ ‖g‖_p ≤ d^{1/p − 1/2}·‖g‖₂   (p ≤ 2; reversed for p ≥ 2),

so the ratio r = ‖g‖_p / ‖g‖₂ lies between 1 (one non-zero coordinate) and d^{1/p−1/2} (all coordinates equal):
it depends on the gradient, not on C, and no data-free rule gives it. On per-sample gradients it is
concentrated (the digits MLP of ``opacus-gg study``, d = 2410, at initialisation: ℓ1.5 median 2.38, 10 %–90 % of
the examples 2.2–2.5; ℓ1 median 16.8; ℓ3 median 0.53), so one number per model and p carries C over:

    C_p = C₂ · median_i r_i.

Example i is clipped under ℓp at C_p iff ‖g_i‖₂ > C₂ · median(r)/r_i, i.e. (nearly) the examples ℓ2 clipping at C₂
clips. What it does not carry over is the noise: the GG noise scale is σ·C_p, r times Opacus's σ·C₂, so at
equal σ ℓp clipping (p < 2) keeps the same signal under r times more noise; ``clip_norm_p=2`` keeps Opacus's
clipping (and its C) exactly (docs/beta_study.md measures both).

Privacy of the calibration: median(r) is a statistic of the examples whose gradients are passed in. From public
data (or data outside the training set) it costs nothing; computed on the private training set it is *not*
covered by the accountant's ε, like choosing C by a grid search (standard practice, but not accounted).
"""

from __future__ import annotations

from typing import Sequence

import torch

from .clipping import per_sample_norms
from .validation import validate_clip_norm_p, validate_max_grad_norm

__all__ = ["grad_norm_ratio", "lp_max_grad_norm"]


def grad_norm_ratio(grad_samples: Sequence[torch.Tensor], clip_norm_p: float, quantile: float = 0.5) -> float:
    r"""The ``quantile`` of r_i = ‖g_i‖_p / ‖g_i‖₂ over the samples (flat norms over all tensors, batch on dim 0,
    as Opacus's ``p.grad_sample``); samples with g_i = 0 have no ratio and are skipped."""
    p = validate_clip_norm_p(clip_norm_p, 2.0)
    if not 0.0 <= float(quantile) <= 1.0:
        raise ValueError(f"quantile must be a number in [0, 1], got {quantile!r}")
    grads = [g.detach() for g in grad_samples]
    if not grads or len(grads[0]) == 0:
        raise ValueError("grad_samples must hold per-sample gradients of at least one example "
                         "(tensors with the batch on dim 0)")
    n2, np_ = per_sample_norms(grads, 2.0), per_sample_norms(grads, p)
    keep = n2 > 0
    if not bool(keep.any()):
        raise ValueError("grad_samples: every per-sample gradient is zero, so ‖g‖_p/‖g‖₂ is undefined")
    return float(torch.quantile(np_[keep] / n2[keep], float(quantile)))


def lp_max_grad_norm(max_grad_norm: float, clip_norm_p: float, grad_samples: Sequence[torch.Tensor]) -> float:
    r"""C_p = C₂ · median_i ‖g_i‖_p/‖g_i‖₂: the ℓp clipping bound that clips (nearly) the examples an ℓ2 bound
    ``max_grad_norm`` = C₂ clips (module docstring). ``grad_samples``: per-sample gradients (e.g. the
    ``grad_sample`` of every parameter after one backward pass of Opacus's ``GradSampleModule``) of public or
    held-out examples; from the private training set the calibration is not covered by ε."""
    return validate_max_grad_norm(max_grad_norm) * grad_norm_ratio(grad_samples, clip_norm_p)
