r"""``GGPrivacyEngine``: Opacus's ``PrivacyEngine`` for β-DP-SGD.

Change ``from opacus import PrivacyEngine`` to ``from opacus_gg import GGPrivacyEngine`` and pass
``beta=`` (and optionally ``clip_norm_p=``, ``rectify_bound=``) to ``make_private``. Per-sample
gradients are clipped in ℓp (p = clip_norm_p, default β) and GG noise with density
∝ exp(−|x|^β/(β s^β)), s = noise_multiplier · max_grad_norm, is added to their sum.

Accounting: the default accountant is ``"gg_prv"`` (certified PRV accountant for GG noise in ``dim``
dimensions with ℓp sensitivity C). Opacus's Gaussian accountants ("prv", "rdp", "gdp") are accepted
only at β = 2 with clip_norm_p ≤ 2 (ℓp ⊂ ℓ2 ball, so the ℓ2 sensitivity is still ≤ C); any other
combination raises ``ValueError`` rather than reporting a Gaussian ε for non-Gaussian noise.
"""

from __future__ import annotations

import math
import warnings
from typing import List, Optional, Union

from opacus import PrivacyEngine
from opacus.accountants.utils import get_noise_multiplier as opacus_get_noise_multiplier
from opacus.optimizers import DPOptimizer
from torch import nn, optim
from torch.utils.data import DataLoader

from .optimizers import get_gg_optimizer_class
from .validation import (
    validate_beta,
    validate_clip_norm_p,
    validate_clipping,
    validate_delta,
    validate_epsilon,
    validate_max_grad_norm,
    validate_noise_multiplier,
    validate_rectify_bound,
    validate_sample_rate,
)

__all__ = ["GGPrivacyEngine", "GAUSSIAN_ACCOUNTANTS"]

GAUSSIAN_ACCOUNTANTS = ("prv", "rdp", "gdp")


def _register_gg_accountant() -> None:
    try:
        from . import accountants  # noqa: F401  (registers "gg_prv")
    except ImportError:  # pragma: no cover - while the accountant is being written
        pass


def _trainable_dim(optimizer: optim.Optimizer) -> int:
    """d = Σ numel of the optimizer's parameters with requires_grad."""
    return int(
        sum(p.numel() for g in optimizer.param_groups for p in g["params"] if p.requires_grad)
    )


class GGPrivacyEngine(PrivacyEngine):
    """Opacus ``PrivacyEngine`` with ℓp clipping and Generalized Gaussian noise (β-DP-SGD)."""

    def __init__(self, *, accountant: str = "gg_prv", secure_mode: bool = False):
        if accountant == "gg_prv":
            _register_gg_accountant()
        super().__init__(accountant=accountant, secure_mode=secure_mode)

    # -- checks -------------------------------------------------------------------------------
    def _check_accountant(self, beta: float, clip_norm_p: float) -> None:
        """Refuse to account GG noise (β ≠ 2) or ℓp clipping with p > 2 with a Gaussian accountant."""
        mech = self.accountant.mechanism()
        if mech in GAUSSIAN_ACCOUNTANTS and (beta != 2.0 or clip_norm_p > 2.0):
            raise ValueError(
                f"accountant={mech!r} is a Gaussian (ℓ2) accountant and cannot certify beta={beta}, "
                f"clip_norm_p={clip_norm_p}; use GGPrivacyEngine(accountant='gg_prv') "
                f"(Gaussian accountants are allowed only with beta=2 and clip_norm_p ≤ 2)"
            )

    # -- optimizer ----------------------------------------------------------------------------
    def _prepare_optimizer(
        self,
        *,
        optimizer: optim.Optimizer,
        noise_multiplier: float,
        max_grad_norm: Union[float, List[float]],
        expected_batch_size: int,
        loss_reduction: str = "mean",
        distributed: bool = False,
        clipping: str = "flat",
        noise_generator=None,
        grad_sample_mode: str = "hooks",
        beta: float = 2.0,
        clip_norm_p: Optional[float] = None,
        rectify_bound: Optional[float] = None,
        **kwargs,
    ) -> DPOptimizer:
        """Build the GG optimizer class for (clipping, distributed, grad_sample_mode)."""
        beta = validate_beta(beta)
        p = validate_clip_norm_p(clip_norm_p, beta)
        if isinstance(optimizer, DPOptimizer):
            optimizer = optimizer.original_optimizer
        generator = self.secure_rng if self.secure_mode else noise_generator
        optim_class = get_gg_optimizer_class(clipping=clipping, distributed=distributed, grad_sample_mode=grad_sample_mode)
        return optim_class(
            optimizer=optimizer,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            expected_batch_size=expected_batch_size,
            loss_reduction=loss_reduction,
            generator=generator,
            secure_mode=self.secure_mode,
            beta=beta,
            clip_norm_p=p,
            rectify_bound=rectify_bound,
            **kwargs,
        )

    # -- public API -----------------------------------------------------------------------------
    def make_private(
        self,
        *,
        module: nn.Module,
        optimizer: optim.Optimizer,
        data_loader: DataLoader,
        noise_multiplier: float,
        max_grad_norm: Union[float, List[float]],
        beta: float = 2.0,
        clip_norm_p: Optional[float] = None,
        rectify_bound: Optional[float] = None,
        poisson_sampling: bool = True,
        clipping: str = "flat",
        grad_sample_mode: str = "hooks",
        **kwargs,
    ):
        """Opacus ``make_private`` plus ``beta`` (GG shape, ≥ 1), ``clip_norm_p`` (ℓp clipping norm,
        default β) and ``rectify_bound`` (clamp each noisy-sum coordinate to [−a, a], before the
        division by expected_batch_size; post-processing). ``clipping="ghost"`` is accepted as a
        shorthand for Opacus's ghost clipping (β = 2 only). Returns what Opacus returns."""
        beta = validate_beta(beta)
        p = validate_clip_norm_p(clip_norm_p, beta)
        validate_noise_multiplier(noise_multiplier)
        validate_max_grad_norm(max_grad_norm)
        validate_rectify_bound(rectify_bound)
        validate_clipping(clipping, beta, p)
        if "ghost" in grad_sample_mode:
            validate_clipping("ghost", beta, p)
        if clipping == "ghost":
            clipping, grad_sample_mode = "flat", "ghost"
        n_tensors = sum(1 for g in optimizer.param_groups for q in g["params"] if q.requires_grad)
        if clipping == "per_layer" and (not isinstance(max_grad_norm, (list, tuple)) or len(max_grad_norm) != n_tensors):
            raise ValueError(
                f"max_grad_norm must be a list of {n_tensors} numbers > 0 (one per trainable parameter "
                f"tensor) with clipping='per_layer', got {max_grad_norm!r}"
            )
        if clipping != "per_layer" and isinstance(max_grad_norm, (list, tuple)):
            raise ValueError(f"max_grad_norm must be a single number > 0 with clipping={clipping!r}, got a list")
        self._check_accountant(beta, p)
        if len(data_loader) == 0:
            raise ValueError("data_loader must have at least one batch (sample_rate = 1/len(data_loader))")
        validate_sample_rate(1.0 / len(data_loader))
        if not poisson_sampling:
            warnings.warn(
                "poisson_sampling=False: the accountant assumes Poisson subsampling, so the reported "
                "epsilon is NOT a guarantee for shuffled fixed-size batches",
                stacklevel=2,
            )
        return super().make_private(
            module=module,
            optimizer=optimizer,
            data_loader=data_loader,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            poisson_sampling=poisson_sampling,
            clipping=clipping,
            grad_sample_mode=grad_sample_mode,
            beta=beta,
            clip_norm_p=p,
            rectify_bound=rectify_bound,
            **kwargs,
        )

    def make_private_with_epsilon(
        self,
        *,
        module: nn.Module,
        optimizer: optim.Optimizer,
        data_loader: DataLoader,
        target_epsilon: float,
        target_delta: float,
        epochs: int,
        max_grad_norm: Union[float, List[float]],
        beta: float = 2.0,
        clip_norm_p: Optional[float] = None,
        clipping: str = "flat",
        epsilon_tolerance: float = 0.01,
        **kwargs,
    ):
        r"""``make_private`` with σ chosen so that the accountant's ε after ``epochs`` epochs
        (steps = ⌊epochs / q⌋, q = 1/len(data_loader)) is ≤ target_epsilon at target_delta.

        With ``gg_prv`` this calls ``opacus_gg.accountants.get_noise_multiplier`` with β, d (trainable
        parameters) and p (certified; never returns a σ whose ε exceeds the target). With a Gaussian
        accountant (β = 2 only) it calls Opacus's solver, exactly as Opacus does."""
        beta = validate_beta(beta)
        p = validate_clip_norm_p(clip_norm_p, beta)
        validate_epsilon(target_epsilon)
        validate_delta(target_delta, "target_delta")
        validate_max_grad_norm(max_grad_norm)
        validate_clipping(clipping, beta, p)
        if not (isinstance(epochs, (int, float)) and math.isfinite(epochs) and epochs > 0):
            raise ValueError(f"epochs must be a number > 0, got {epochs!r}")
        self._check_accountant(beta, p)
        if len(data_loader) == 0:
            raise ValueError("data_loader must have at least one batch")
        sample_rate = validate_sample_rate(1.0 / len(data_loader))
        if len(self.accountant) > 0:
            warnings.warn(
                "You're calling make_private_with_epsilon with non-zero privacy budget already spent. "
                "Returned noise_multiplier assumes zero starting point, so your overall privacy budget "
                "will be higher."
            )
        mech = self.accountant.mechanism()
        if mech == "gg_prv":
            from .accountants import get_noise_multiplier as gg_get_noise_multiplier

            sigma = gg_get_noise_multiplier(
                target_epsilon=target_epsilon,
                target_delta=target_delta,
                sample_rate=sample_rate,
                epochs=epochs,
                beta=beta,
                dim=_trainable_dim(optimizer),
                clip_norm_p=p,
                epsilon_tolerance=epsilon_tolerance,
            )
        elif mech in GAUSSIAN_ACCOUNTANTS:
            sigma = opacus_get_noise_multiplier(
                target_epsilon=target_epsilon,
                target_delta=target_delta,
                sample_rate=sample_rate,
                epochs=epochs,
                accountant=mech,
                epsilon_tolerance=epsilon_tolerance,
            )
        else:
            raise ValueError(f"accountant {mech!r} has no noise-multiplier solver in opacus-gg")
        return self.make_private(
            module=module,
            optimizer=optimizer,
            data_loader=data_loader,
            noise_multiplier=sigma,
            max_grad_norm=max_grad_norm,
            beta=beta,
            clip_norm_p=p,
            clipping=clipping,
            **kwargs,
        )

    def get_epsilon(self, delta: float) -> float:
        """ε spent so far at δ (a certified upper bound with ``gg_prv``), as Opacus's ``get_epsilon``."""
        return self.accountant.get_epsilon(validate_delta(delta))
