r"""β-DP-SGD optimizers: Opacus's DPOptimizer family with ℓp clipping and GG noise.

``get_gg_optimizer_class(clipping, distributed, grad_sample_mode)`` mirrors
``opacus.optimizers.get_optimizer_class``. Every class takes Opacus's arguments plus ``beta``
(noise shape, default 2), ``clip_norm_p`` (ℓp clipping norm, default β) and ``rectify_bound``
(clamp noisy sum coordinates to [−a, a]); attributes ``beta``, ``clip_norm_p``, ``dim`` are what
the ``gg_prv`` accountant hook reads (and ``count_noise_multiplier`` for adaptive clipping,
:mod:`.adaptive`).
"""

from __future__ import annotations

from typing import Optional, Type

import torch

from opacus.optimizers import (
    DistributedDPOptimizer,
    DistributedDPOptimizerFastGradientClipping,
    DPOptimizer,
    DPOptimizerFastGradientClipping,
    DPPerLayerOptimizer,
    FSDPOptimizerFastGradientClipping,
)
from opacus.optimizers.optimizer import _check_processed_flag, _mark_as_processed

from .adaptive import GGAdaClipDPOptimizer, GGAdaClipMixin
from .base import GGClipMixin, GGNoiseMixin, GGParamsMixin

__all__ = [
    "GGClipMixin",
    "GGNoiseMixin",
    "GGParamsMixin",
    "GGAdaClipMixin",
    "GGDPOptimizer",
    "GGDPPerLayerOptimizer",
    "GGDistributedDPOptimizer",
    "GGSimpleDistributedPerLayerOptimizer",
    "GGDPOptimizerFastGradientClipping",
    "GGDistributedDPOptimizerFastGradientClipping",
    "GGFSDPOptimizerFastGradientClipping",
    "GGAdaClipDPOptimizer",
    "get_gg_optimizer_class",
]


class GGDPOptimizer(GGClipMixin, GGNoiseMixin, DPOptimizer):
    """Flat ℓp clipping + GG noise (β-DP-SGD)."""


class GGDPPerLayerOptimizer(GGClipMixin, GGNoiseMixin, DPPerLayerOptimizer):
    """Per-layer ℓp clipping (C_l per tensor, total sensitivity ‖(C_l)‖_p) + GG noise."""


class _GGDistributed:
    def _no_rectify(self) -> None:
        if self.rectify_bound is not None:
            raise ValueError(
                "rectify_bound is not supported with distributed training: the released sum is "
                "only formed after the all-reduce (set rectify_bound=None)"
            )

    def add_noise(self) -> None:
        """Ranks other than 0 add no noise (Opacus): they settle the step's clipping check before their
        ``summed_grad`` becomes ``p.grad``; rank 0 settles it with the noise's. That settlement is collective
        (:meth:`_settle`): the ranks agree on refusing the step."""
        self._collective = True
        try:
            if self.rank != 0:
                self._settle()
            super().add_noise()
        finally:
            self._collective = False

    def _settle(self) -> None:
        r"""At a real step: all ranks agree, within the step's one host synchronisation. Round 1 all-reduces
        (MAX) "some deferred check of this rank is set" before it is read; only if it is set anywhere, each rank
        runs its handlers (a NaN/inf raises there) and round 2 all-reduces "refused": if any rank refused, every
        rank raises ``FloatingPointError`` with nothing applied. Elsewhere (skipped steps): rank-local."""
        if not getattr(self, "_collective", False):
            return super()._settle()
        self._collective = False  # once per step
        self._agreed = True  # this step's agreement is under way: a refusal raised from here has taken part
        checks, self._step_checks = self._step_checks, []
        dev = self.params[0].device
        flags = [flag.to(dev) for flag, _ in checks] or [torch.zeros((), dtype=torch.bool, device=dev)]
        anywhere = torch.stack(flags).any().to(torch.int32).reshape(1)
        torch.distributed.all_reduce(anywhere, op=torch.distributed.ReduceOp.MAX)
        if not bool(anywhere):  # the step's one synchronisation
            return
        refused: Optional[FloatingPointError] = None
        for flag, handle in checks:
            if bool(flag):
                try:
                    handle()
                except FloatingPointError as e:
                    refused = e
                    break
        self._agree_on_refusal(refused)

    def _agree_on_refusal(self, refused: Optional[FloatingPointError]) -> None:
        """Round 2: raise on every rank if any rank refused this step."""
        t = torch.tensor([int(refused is not None)], dtype=torch.int32, device=self.params[0].device)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        if refused is not None:
            raise refused
        if bool(t):
            raise FloatingPointError("NaN or inf per-sample gradient on another rank: the step is refused on every "
                                     "rank (nothing noised, accounted or applied)")

    def _join_refusal(self) -> None:
        """This rank refused its logical batch before reaching the step's collective settlement (CPU path, or an
        earlier physical batch): take part in both rounds, saying "refused"."""
        if getattr(self, "_agreed", False):
            return
        t = torch.ones(1, dtype=torch.int32, device=self.params[0].device)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        t = torch.ones(1, dtype=torch.int32, device=self.params[0].device)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)


class GGDistributedDPOptimizer(_GGDistributed, GGClipMixin, DistributedDPOptimizer, GGNoiseMixin):
    """DDP variant: GG noise added once per step, on rank 0 only (as in Opacus)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._no_rectify()


class GGSimpleDistributedPerLayerOptimizer(
    _GGDistributed, GGClipMixin, DPPerLayerOptimizer, DistributedDPOptimizer, GGNoiseMixin
):
    """DDP + per-layer ℓp clipping; noise on rank 0 only."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._no_rectify()


def _require_l2(self: GGParamsMixin) -> None:
    if self.clip_norm_p != 2.0 or self.rectify_bound is not None:
        raise ValueError(
            "ghost clipping computes ℓ2 per-sample norms (Opacus's ghost norms): it needs clip_norm_p=2 and "
            f"rectify_bound=None, with any beta (got clip_norm_p={self.clip_norm_p}, "
            f"rectify_bound={self.rectify_bound})"
        )


def _require_ghost_scope(self: GGParamsMixin) -> None:
    """What every ghost-clipping optimizer needs: ℓ2 clipping (:func:`_require_l2`) and float32/float64
    parameters. Ghost clipping clips with Opacus's ℓ2 norms in the parameters' dtype, not rounded up: in 16 bits the
    stored clipped sum of one sample reached 1.0106·C (bfloat16) and 1.00095·C (float16), so 16-bit parameters are
    refused (the hooks mode, ``grad_sample_mode="hooks"``, certifies the stored norm in every dtype)."""
    _require_l2(self)
    bad = sorted({str(p.dtype) for p in self.params if p.dtype in (torch.float16, torch.bfloat16)})
    if bad:
        raise ValueError(
            f"ghost clipping needs float32 or float64 parameters (its ℓ2 clipping is Opacus's, not certified in "
            f"16 bits), got {', '.join(bad)}; use grad_sample_mode='hooks' for 16-bit models"
        )


def _refuse_nonfinite(grads) -> None:
    """Raise ``FloatingPointError`` before any noise or step if a clipped sum holds a NaN or inf (a NaN/inf
    per-sample gradient, whose ghost norm makes its clip factor 0 or NaN)."""
    if any(not bool(torch.isfinite(g).all()) for g in grads):
        raise FloatingPointError(
            "a ghost-clipped gradient sum is NaN or inf (a NaN/inf per-sample gradient); refusing to noise or "
            "step on it (nothing was applied to the parameters)"
        )


class _GGGhostNoise(DPOptimizerFastGradientClipping):
    """Opacus's ghost-clipping step (the model's backward already holds the ℓ2-clipped sum) with GG(β, σC)
    noise for β ≠ 2; at β = 2 Opacus's Gaussian noise, unchanged."""

    def add_noise(self) -> None:
        r"""p.grad = ĝ + Z, Z ~ GG(β, σC)^{⊗ shape} (one draw for all parameters, :meth:`_noise_like`); a NaN/inf
        sum raises first."""
        _refuse_nonfinite([p.summed_grad for p in self.params])
        if self.beta == 2.0:
            super().add_noise()
            return
        for p in self.params:
            _check_processed_flag(p.summed_grad)
        noise = self._noise_like([p.summed_grad for p in self.params], self.noise_multiplier * self.max_grad_norm)
        for p, z in zip(self.params, noise):
            p.grad = (p.summed_grad + z).view_as(p)
            _mark_as_processed(p.summed_grad)


class GGDPOptimizerFastGradientClipping(GGParamsMixin, _GGGhostNoise):
    """Ghost clipping (Opacus's ℓ2 clipping, ``grad_sample_mode="ghost"``) + GG noise: clip_norm_p = 2, any β."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _require_ghost_scope(self)


class GGDistributedDPOptimizerFastGradientClipping(GGParamsMixin, DistributedDPOptimizerFastGradientClipping, _GGGhostNoise):
    """Distributed ghost clipping + GG noise (rank 0 only, as Opacus's); clip_norm_p = 2, any β."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _require_ghost_scope(self)


class GGFSDPOptimizerFastGradientClipping(GGParamsMixin, FSDPOptimizerFastGradientClipping):
    """FSDP ghost clipping (Opacus's ``grad_sample_mode="ghost_fsdp"``) + GG noise; clip_norm_p = 2, any β."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _require_ghost_scope(self)

    def add_noise(self) -> None:
        r"""As Opacus's FSDP step: each rank adds noise shaped like the full parameter to its shards
        (``implicit_replication``), divided by the world size for ``loss_reduction="mean"``; GG(β, σC) for
        β ≠ 2; a NaN/inf sum raises first."""
        _refuse_nonfinite([self.grad_state[p]["summed_grad"] for p in self.params])
        if self.beta == 2.0:
            super().add_noise()
            return
        noise = self._noise_like([p.grad for p in self.params], self.noise_multiplier * self.max_grad_norm)
        for p, z in zip(self.params, noise):
            if self.loss_reduction == "mean":
                z = z / self.world_size
            p.grad = (self.grad_state[p]["summed_grad"] + z).view_as(p)


def get_gg_optimizer_class(clipping: str, distributed: bool, grad_sample_mode: Optional[str] = None) -> Type[DPOptimizer]:
    """The GG optimizer class for an Opacus (clipping, distributed, grad_sample_mode) triple."""
    if grad_sample_mode == "ghost":
        if clipping == "flat":
            return GGDistributedDPOptimizerFastGradientClipping if distributed else GGDPOptimizerFastGradientClipping
        raise ValueError(f"clipping={clipping!r} is not supported with grad_sample_mode='ghost' (use 'flat')")
    if grad_sample_mode == "ghost_fsdp":
        if clipping == "flat" and distributed:
            return GGFSDPOptimizerFastGradientClipping
        raise ValueError(
            f"grad_sample_mode='ghost_fsdp' needs clipping='flat' and an FSDP-wrapped module (as in Opacus), "
            f"got clipping={clipping!r}, distributed={distributed}"
        )
    if clipping == "flat":
        return GGDistributedDPOptimizer if distributed else GGDPOptimizer
    if clipping == "per_layer":
        if distributed and grad_sample_mode not in ("hooks", "ew"):
            raise ValueError(f"Unexpected grad_sample_mode={grad_sample_mode!r} for distributed per-layer clipping")
        return GGSimpleDistributedPerLayerOptimizer if distributed else GGDPPerLayerOptimizer
    if clipping == "adaptive":
        if distributed:
            raise ValueError("clipping='adaptive' is not supported with distributed training (as in Opacus)")
        return GGAdaClipDPOptimizer
    raise ValueError(f"clipping must be one of 'flat', 'per_layer', 'adaptive', 'ghost', got {clipping!r}")
