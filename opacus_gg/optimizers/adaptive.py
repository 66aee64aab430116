r"""Adaptive clipping at every β and p: the clip bound tracks a quantile of the per-sample ℓp norms.

Andrew et al. 2021 ("Differentially private learning with adaptive clipping"), with Opacus's
``AdaClipDPOptimizer`` arguments (target_unclipped_quantile γ, clipbound_learning_rate η, max_clipbound,
min_clipbound, unclipped_num_std σ_b). One step, with the current bound C_t:

    b_i = 1[clip factor of g_i is 1]                  (g_i not clipped: ‖g_i‖_p + 1e-6 ≤ C_t)
    g̃ = Σ_i clip(g_i) + GG(β, σ·C_t)^{⊗d}            (as flat clipping; σ = noise_multiplier, not adjusted)
    N = Σ_i (b_i − ½) + N(0, σ_b²)                    (centred count: sensitivity ½ under add/remove)
    b̃ = ½ + N/m,  m = expected_batch_size · accumulated_iterations   (public; post-processing)
    C_{t+1} = clamp(C_t · exp(−η (b̃ − γ)), min_clipbound, max_clipbound)

Both releases read the same Poisson batch; the ``gg_prv`` accountant reads ``count_noise_multiplier`` =
σ_b/½ = 2σ_b and accounts the step as the product of the GG pair and the count's Gaussian pair, subsampled
jointly (docs/accounting.md, Lemma 8). Opacus's route (gradient noise at σ_adj = (σ⁻² − (2σ_b)⁻²)^{−1/2},
the accountant told σ) is a Gaussian identity and is not used; nor is its uncentred count over the realised
batch size. ``unclipped_num`` holds the noisy count estimate N + m/2 after each step (Opacus's attribute).
"""

from __future__ import annotations

import math

import torch
from opacus.optimizers import AdaClipDPOptimizer
from opacus.optimizers.optimizer import DPOptimizer, _generate_noise

from .._device import float64_device
from ..validation import ADAPTIVE_KEYWORDS, COUNT_SENSITIVITY, validate_adaptive_keywords
from .base import GGClipMixin, GGNoiseMixin

__all__ = ["GGAdaClipMixin", "GGAdaClipDPOptimizer", "COUNT_SENSITIVITY", "ADAPTIVE_KEYWORDS",
           "validate_adaptive_keywords"]


class GGAdaClipMixin(GGClipMixin, GGNoiseMixin):
    """Quantile tracking of the clip bound on top of ℓp clipping and GG noise (module docstring)."""

    def __init__(self, *args, unclipped_num_std: float, **kwargs):
        checked = validate_adaptive_keywords({**kwargs, "unclipped_num_std": unclipped_num_std})
        unclipped_num_std = checked.pop("unclipped_num_std")
        kwargs.update(checked)
        # AdaClipDPOptimizer refuses σ ≥ 2σ_b: the precondition of its σ adjustment σ_adj = (σ⁻² − (2σ_b)⁻²)^{−1/2}
        # (Theorem 1 of Andrew et al.), which is not used here: the accountant composes the count's pair at every
        # σ_b > 0 (docs/accounting.md, Lemma 8). σ_b = ∞ passes that check; the real σ_b is set right after.
        super().__init__(*args, unclipped_num_std=math.inf, **kwargs)
        self.unclipped_num_std = unclipped_num_std
        if self.expected_batch_size is None:
            raise ValueError("clipping='adaptive' needs expected_batch_size: the public denominator of the "
                             "unclipped fraction")
        self._count_base = (0, 0)

    @property
    def count_noise_multiplier(self) -> float:
        """σ_c = σ_b / (count sensitivity ½): the count's noise in units of its sensitivity (read by ``gg_prv``)."""
        return self.unclipped_num_std / COUNT_SENSITIVITY

    def zero_grad(self, set_to_none: bool = False):
        """Opacus's; the step's counts survive a skipped step (virtual batches), as ``summed_grad`` does."""
        kept = (self.sample_size, self.unclipped_num) if self._is_last_step_skipped else None
        super().zero_grad(set_to_none)
        if kept is not None:
            self.sample_size, self.unclipped_num = kept

    def clip_and_accumulate(self) -> None:
        """ℓp clipping (:class:`GGClipMixin`), counting the unclipped samples of this step."""
        self._count_base = (self.sample_size, self.unclipped_num)
        super().clip_and_accumulate()

    def _accumulate(self, grads, factors, in_place: bool) -> None:
        """summed_grad += Σ_i f_i g_i, and the counts = this step's base + (#samples, #{f_i = 1}) (a device
        tensor, no synchronisation; recomputed, not added twice, when the deferred check redoes the step)."""
        super()._accumulate(grads, factors, in_place)
        n, u = self._count_base
        f = factors[0]
        self.sample_size = n + f.numel()
        self.unclipped_num = u + (f >= 1.0).sum()

    def _add_gaussian_noise(self) -> None:
        """β = 2: Opacus's Gaussian at σ·C_t (``DPOptimizer.add_noise``), not AdaClipDPOptimizer's σ_adj."""
        DPOptimizer.add_noise(self)

    def add_noise(self) -> None:
        r"""GG noise on the clipped sum (:class:`GGNoiseMixin`), then the noisy count
        unclipped_num = Σ(b_i − ½) + N(0, σ_b²) + m/2."""
        super().add_noise()
        ref = self.params[0].grad
        noise = _generate_noise(std=self.unclipped_num_std, reference=torch.zeros((), device=ref.device),
                                generator=self.generator, secure_mode=self.secure_mode)
        m = float(self.expected_batch_size * self.accumulated_iterations)
        dev = float64_device(ref.device)  # the count is summed in float64: on the host where the device has none
        count = torch.as_tensor(self.unclipped_num).to(dev).to(torch.float64)
        self.unclipped_num = count - 0.5 * self.sample_size + noise.to(dev).to(torch.float64) + 0.5 * m
        self._count_denominator = m

    def update_max_grad_norm(self) -> None:
        """C ← clamp(C·exp(−η(b̃ − γ)), min_clipbound, max_clipbound), b̃ = unclipped_num/m (one host read)."""
        frac = float(self.unclipped_num) / self._count_denominator
        c = self.max_grad_norm * math.exp(-self.clipbound_learning_rate * (frac - self.target_unclipped_quantile))
        self.max_grad_norm = float(min(max(c, self.min_clipbound), self.max_clipbound))


class GGAdaClipDPOptimizer(GGAdaClipMixin, AdaClipDPOptimizer):
    """Adaptive ℓp clipping + GG noise (any β, p); the noisy count is accounted by ``gg_prv``."""
