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

from opacus.optimizers import (
    DistributedDPOptimizer,
    DistributedDPOptimizerFastGradientClipping,
    DPOptimizer,
    DPOptimizerFastGradientClipping,
    DPPerLayerOptimizer,
    FSDPOptimizerFastGradientClipping,
)

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
        ``summed_grad`` becomes ``p.grad``; rank 0 settles it with the noise's."""
        if self.rank != 0:
            self._settle()
        super().add_noise()


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


def _require_gaussian_l2(self: GGParamsMixin, what: str) -> None:
    if self.beta != 2.0 or self.clip_norm_p != 2.0 or self.rectify_bound is not None:
        raise ValueError(
            f"{what} is ℓ2/Gaussian-specific: it needs beta=2, clip_norm_p=2 and rectify_bound=None "
            f"(got beta={self.beta}, clip_norm_p={self.clip_norm_p}, rectify_bound={self.rectify_bound})"
        )


class GGDPOptimizerFastGradientClipping(GGParamsMixin, DPOptimizerFastGradientClipping):
    """Ghost clipping (Opacus's, unchanged); only β = 2 with ℓ2 clipping."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _require_gaussian_l2(self, "ghost clipping")


class GGDistributedDPOptimizerFastGradientClipping(GGParamsMixin, DistributedDPOptimizerFastGradientClipping):
    """Distributed ghost clipping (Opacus's, unchanged); only β = 2 with ℓ2 clipping."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _require_gaussian_l2(self, "ghost clipping")


class GGFSDPOptimizerFastGradientClipping(GGParamsMixin, FSDPOptimizerFastGradientClipping):
    """FSDP ghost clipping (Opacus's ``grad_sample_mode="ghost_fsdp"``, unchanged); only β = 2 with ℓ2 clipping."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _require_gaussian_l2(self, "ghost clipping")


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
