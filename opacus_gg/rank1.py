r"""Per-sample ℓp norms of ``nn.Linear`` weight gradients from their factors.

On a 2-D input, sample i's weight gradient is the outer product G_i = δ_i a_iᵀ of the backprop
δ_i ∈ R^out and the activation a_i ∈ R^in, and for every p ≥ 1

    ‖G_i‖_p^p = Σ_jk |δ_ij a_ik|^p = ‖δ_i‖_p^p · ‖a_i‖_p^p,

so its norm costs out + in operations instead of out·in. The stored per-sample gradient is the
rounded product Ĝ_ijk = fl(δ_ij · a_ik) (one IEEE rounding: computed here by a broadcast multiply,
never a matmul, whose float32 precision setting could round the inputs first), so
|Ĝ_ijk| ≤ (1 + u)|δ_ij a_ik| + η with u the unit roundoff and η half the smallest subnormal of its dtype
(η covers gradual underflow; a flushed result is ≤ |δa|), and by Minkowski

    ‖Ĝ_i‖_p ≤ (1 + u) ‖δ_i‖_p ‖a_i‖_p + η · (out·in)^{1/p}.

:func:`install` gives an Opacus ``GradSampleModule`` (hooks mode) a Linear grad sampler that returns
the same per-sample gradients as Opacus's (bit for bit: one rounding each) and records (δ, a), and a
backward hook, run after Opacus's, that attaches them to the weight's new ``grad_sample`` tensor,
with that tensor's version counter. :func:`factors` returns them only while they still describe the
tensor the optimizer reads: the same object (not a concatenation of accumulated batches, not one set
by hand), its version unchanged (no in-place edit), recorded by a backward in which the layer ran
once (no accumulation of several uses). Anything else falls back to the full pass over Ĝ.
"""

from __future__ import annotations

import contextlib
from collections import ChainMap
from typing import Dict, Iterator, List, Optional, Tuple

import torch
from opacus.grad_sample.grad_sample_module import GradSampleHooks, GradSampleModule
from opacus.grad_sample.linear import compute_linear_grad_sample
from torch import nn

__all__ = ["install", "factors", "rank1_bound", "use_factors"]

_KEY = "_gg_rank1"  # on the weight (pending factors of this backward), then on its grad_sample tensor
_ENABLED = True


@contextlib.contextmanager
def use_factors(enabled: bool) -> Iterator[None]:
    """Internal switch: inside ``use_factors(False)`` :func:`factors` returns None, so every norm reads all
    entries (the path of convolutions and of models wrapped otherwise); for benchmarks and tests."""
    global _ENABLED
    before, _ENABLED = _ENABLED, enabled
    try:
        yield
    finally:
        _ENABLED = before


def _linear_grad_sampler(
    layer: nn.Linear, activations: List[torch.Tensor], backprops: torch.Tensor
) -> Dict[nn.Parameter, torch.Tensor]:
    """Opacus's Linear grad sampler; on 2-D inputs G_i = δ_i ⊗ a_i by one broadcast multiply, with (δ, a)
    recorded on the weight when this is the layer's first use in the batch (nothing accumulated yet)."""
    w = layer.weight
    a = activations[0]
    if a.dim() != 2 or backprops.dim() != 2 or not w.requires_grad:
        w.__dict__.pop(_KEY, None)
        return compute_linear_grad_sample(layer, activations, backprops)
    a = a.to(backprops.dtype)
    out = {w: backprops[:, :, None] * a[:, None, :]}
    if layer.bias is not None and layer.bias.requires_grad:
        out[layer.bias] = backprops
    if hasattr(w, "_current_grad_sample"):  # a second use in this batch: Opacus adds it to the first
        w.__dict__.pop(_KEY, None)
    else:
        setattr(w, _KEY, (backprops, a))
    return out


def _attach(layer: nn.Linear, _grad_input, _grad_output) -> None:
    """After Opacus's backward hook: move this backward's (δ, a) onto the promoted ``grad_sample`` tensor,
    with its version; drop them if the batch is not complete (layer used again) or was accumulated."""
    w = layer.weight
    pending = w.__dict__.pop(_KEY, None)
    gs = getattr(w, "grad_sample", None)
    if pending is None or hasattr(w, "_current_grad_sample") or not isinstance(gs, torch.Tensor):
        return
    setattr(gs, _KEY, (pending[0], pending[1], gs._version))


def install(gsm: object) -> None:
    """Give an Opacus hooks-mode ``GradSampleModule``/``GradSampleHooks`` the recording Linear grad sampler
    (an instance-level entry over Opacus's registry, so later registrations still apply) and the hooks that
    attach the factors; the hooks are removed with Opacus's (``remove_hooks``). No-op for other modes (ghost
    clipping, expanded weights: subclasses included), for ``force_functorch`` and when already installed."""
    if type(gsm) not in (GradSampleModule, GradSampleHooks) or gsm.force_functorch:
        return  # ghost clipping, expanded weights, functorch, no_op: their own per-sample machinery
    if isinstance(gsm.GRAD_SAMPLERS, ChainMap):
        return
    gsm.GRAD_SAMPLERS = ChainMap({nn.Linear: _linear_grad_sampler}, type(gsm).GRAD_SAMPLERS)
    for module in gsm.iterate_submodules(gsm._module):
        if type(module) is nn.Linear:
            gsm.autograd_grad_sample_hooks.append(module.register_full_backward_hook(_attach))


def factors(grad_sample: torch.Tensor) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """(δ, a) with grad_sample[i] = fl(δ_i ⊗ a_i) for i < len(δ) (rows beyond are Opacus's zero padding), or
    None when that is not known to hold (see the module docstring)."""
    rec = getattr(grad_sample, _KEY, None) if _ENABLED else None
    if rec is None or rec[2] != grad_sample._version:
        return None
    return rec[0], rec[1]


def rank1_bound(norms_d: torch.Tensor, norms_a: torch.Tensor, dtype: torch.dtype, numel: int, p: float) -> torch.Tensor:
    r"""Upper bound on ‖Ĝ_i‖_p^p (float64) from upper bounds on ‖δ_i‖_p and ‖a_i‖_p:

        ((1 + u)·N_δ,i·N_a,i + η·numel^{1/p} + ν)^p · (1 + 10⁻¹²) + ν,

    u and η of the gradient's dtype (see the module docstring), ν = 2⁻¹⁰⁷⁴ the smallest float64: the first ν
    covers an underflow of the float64 product N_δ·N_a, the second one of the p-th power (each at most ν/2
    when rounded to nearest); the factor (1 + 10⁻¹²) covers the relative float64 roundings of this formula
    and of the sum and root it then enters (a few ulps of 2⁻⁵³ each)."""
    fi = torch.finfo(dtype)
    u, eta = fi.eps / 2, fi.tiny * fi.eps / 2
    nu = torch.finfo(torch.float64).tiny * torch.finfo(torch.float64).eps
    t = norms_d.double() * norms_a.double().to(norms_d.device)
    return (t * (1.0 + u) + (eta * numel ** (1.0 / p) + nu)).pow_(p).mul_(1.0 + 1e-12).add_(nu)
