r"""Mixins that turn Opacus's DPOptimizer family into β-DP-SGD optimizers.

One step (Algorithm 3 of the GG paper, Opacus semantics kept):

    ĝ = Σ_i g_i · min(1, C / (‖g_i‖_p + 1e-6))        (ℓp clipping, p = clip_norm_p, default β)
    g̃ = ĝ + Z,   Z_j ~ GG(β, s) i.i.d., density ∝ exp(−|z|^β / (β s^β)),  s = noise_multiplier · C
    g̃ ← clamp(g̃, −a, a)                               (only if rectify_bound = a is set)
    p.grad = g̃ / (expected_batch_size · accumulated_iterations)   (loss_reduction="mean")

At β = 2 the noise is drawn by Opacus's own ``add_noise`` (bit-identical to Opacus, secure_mode
included). For β ≠ 2, ``secure_mode=True`` raises: Opacus's floating-point-attack defence
(summing Gaussians, Holohan & Braghin) is specific to the Gaussian and has no proven GG analogue.

On accelerators (and on CPU inside :func:`opacus_gg._device.accelerator_path`) a step synchronises the
host once: clipping and the GG sampler leave 0-dim device flags for their rare cases (a norm needing the
rescaled path, a NaN/inf gradient, a sampler budget exceeded) instead of reading them, the clipped sum is
stored optimistically, and :meth:`GGParamsMixin._settle` reads all flags of the step with one ``.item()``
before ``summed_grad`` is used (in ``add_noise``; for a skipped step of a virtual batch, at the end of
``clip_and_accumulate``). A set flag runs its handler: clipping restores ``summed_grad`` and redoes the
step's contribution with the synchronising path (rescaled norms, or ``FloatingPointError`` with
``summed_grad`` as before the step); the sampler completes its unresolved draws exactly.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import torch
from opacus.optimizers.optimizer import DPOptimizer, _check_processed_flag, _mark_as_processed

from .. import distribution
from .._device import generator_restorer, uses_accelerator_path
from ..clipping import (
    any_nonfinite,
    check_finite,
    clip_factors,
    clip_factors_deferred,
    clipped_sum,
    per_layer_norms,
    per_sample_norms,
    stored_clip_bound,
    total_sensitivity,
)
from ..validation import (
    validate_beta,
    validate_clip_norm_p,
    validate_max_grad_norm,
    validate_noise_multiplier,
    validate_noise_scale,
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
        if hasattr(self, "max_grad_norms"):  # per-layer: ‖(C_l)‖_p rounded up, in float64 at every p (Opacus's p = 2
            # value is a float32 norm of the bounds rounded to float32, up to ~L·6e-8 below the exact sensitivity)
            self.max_grad_norm = total_sensitivity(self.max_grad_norms, self.clip_norm_p)
        #: this step's deferred checks: (0-dim device bool "rare case", handler run when it is set)
        self._step_checks: List[Tuple[torch.Tensor, Callable[[], None]]] = []
        self._in_step = False
        #: the current logical batch was refused (NaN/inf) and has physical batches still to come
        self._refused_batch = False
        #: within a step, after its first noise draw: puts the noise generator back if the step is refused
        self._restore_generator: Optional[Callable[[], None]] = None

    @property
    def dim(self) -> int:
        """Number of noised coordinates d = Σ numel over trainable parameters."""
        return int(sum(p.numel() for p in self.params))

    def _draw(self, total: int, scale: float, ref: torch.Tensor) -> torch.Tensor:
        """``total`` GG(β, scale) draws on ``ref``'s device (zeros at scale 0); on the accelerator path the
        sampler's exact finish is deferred to this step's :meth:`_settle`."""
        if scale == 0:
            return torch.zeros(total, device=ref.device, dtype=ref.dtype)
        if self._in_step and self._restore_generator is None:  # a refusal settled after the draw undoes it
            self._restore_generator = generator_restorer(self.generator, ref.device)
        kw = dict(generator=self.generator, device=ref.device, dtype=ref.dtype)
        if not uses_accelerator_path(ref.device):
            return distribution.sample(total, self.beta, scale, **kw)
        flat, finisher = distribution.sample_deferred(total, self.beta, scale, **kw)
        self._step_checks.append((finisher.pending, finisher.finish))
        return flat

    def _noise_like(self, refs: List[torch.Tensor], scale: float) -> List[torch.Tensor]:
        """GG(β, scale) noise shaped like each of ``refs`` (β ≠ 2): one draw per (device, dtype) of all their
        entries, then this step's checks settled (:meth:`_settle`); views of the draws, in ``refs``' dtypes."""
        groups: Dict[tuple, List[int]] = {}
        for i, r in enumerate(refs):
            groups.setdefault((r.device, r.dtype), []).append(i)
        out: List[Optional[torch.Tensor]] = [None] * len(refs)
        flats = [self._draw(sum(refs[i].numel() for i in ix), scale, refs[ix[0]]) for ix in groups.values()]
        self._settle()
        for ix, flat in zip(groups.values(), flats):
            flat, offset = flat.to(refs[ix[0]].dtype), 0
            for i in ix:
                out[i] = flat[offset : offset + refs[i].numel()].view(refs[i].shape)
                offset += refs[i].numel()
        return out

    def _join_refusal(self) -> None:
        """Distributed classes: take part in the step's agreement as a rank that refused (nothing to do alone)."""

    def _settle(self) -> None:
        """Read this step's deferred checks with ONE host synchronisation; run the handler of each set one
        (clipping's first: it may raise before the noise is touched)."""
        checks, self._step_checks = self._step_checks, []
        if not checks:
            return
        dev = checks[0][0].device
        if not bool(torch.stack([flag.to(dev) for flag, _ in checks]).any()):  # the step's one synchronisation
            return
        for flag, handle in checks:
            if bool(flag):
                handle()


class GGClipMixin(GGParamsMixin):
    """ℓp per-sample clipping (flat, or per-layer when ``self.max_grad_norms`` exists)."""

    def pre_step(self, closure=None) -> Optional[bool]:
        """Opacus's ``pre_step`` with the step's deferred checks: ``clip_and_accumulate`` leaves its check to
        ``add_noise`` (settled there with the noise's), or settles it itself when the step will be skipped
        (virtual batch); a step synchronises the host once on the accelerator path. Checks are dropped
        after an error."""
        if self._refused_batch:
            return self._discard_physical_batch()
        self._check_noise_range()
        self._agreed = False  # set by a distributed class's collective settlement
        queued = len(self._step_skip_queue)
        self._in_step = True
        try:
            done = super().pre_step(closure)
        except FloatingPointError:
            self._step_checks.clear()
            if self._restore_generator is not None:  # the noise was drawn before the refusal was known
                self._restore_generator()
            self._refuse(popped=len(self._step_skip_queue) < queued)
            raise
        except BaseException:
            self._step_checks.clear()
            raise
        finally:
            self._in_step = False
            self._restore_generator = None
        self._settle()
        return done

    def _check_noise_range(self) -> None:
        """Before anything of the step is done: the noise scale σ·C (σ may have changed since construction) must
        keep every noise coordinate finite in its parameter's dtype and be one the sampler represents there
        (:func:`~opacus_gg.validation.validate_noise_scale`, :func:`~opacus_gg.distribution.min_scale`);
        otherwise ``ValueError`` and nothing changes."""
        scale = self.noise_multiplier * self.max_grad_norm
        if scale == 0:
            return
        sizes: Dict[torch.dtype, int] = {}
        for p in self.params:
            sizes[p.dtype] = sizes.get(p.dtype, 0) + p.numel()
        for dtype, dim in sizes.items():
            validate_noise_scale(scale, self.beta, dim, float(torch.finfo(dtype).max), str(dtype),
                                 min_scale=distribution.min_scale(self.beta, dtype))

    def _refuse(self, popped: bool) -> None:
        """A refused step (NaN/inf per-sample gradient) refuses its whole logical batch: no noise, no
        accounting, parameters, optimizer state and noise generator as before it (``pre_step`` puts the generator
        back when the refusal came after the draw: the accelerator path, or another rank's refusal); the clipped sum of its earlier physical
        batches is dropped (``summed_grad = None``, and ``p.grad = None``), this physical batch's skip signal is consumed (Opacus
        pops it only after clipping), and if the logical batch has more physical batches they are consumed
        without effect (:meth:`_discard_physical_batch`), so the next logical batch starts clean."""
        more = False
        if not popped and self._step_skip_queue:
            more = self._step_skip_queue.pop(0)  # True: physical batches of this logical batch still to come
        if not popped and not more:  # the logical batch's real step, refused before its (collective) settlement
            self._join_refusal()
        for p in self.params:
            p.summed_grad = None
            p.grad = None  # no gradient after a refused step, on every path (add_noise may have freed it)
        self._is_last_step_skipped = False
        self._refused_batch = bool(more)

    def _discard_physical_batch(self) -> bool:
        """A physical batch of a refused logical batch: its skip signal consumed, its per-sample gradients
        unused; the last one ends the refusal. Always ``False`` (no step)."""
        last = not self._check_skip_next_step()
        if last:
            self._join_refusal()
        for p in self.params:
            p.summed_grad = None
        self._is_last_step_skipped = not last
        self._refused_batch = not last
        return False

    def clip_and_accumulate(self) -> None:
        r"""ĝ_l += Σ_i f_i g_{i,l},  f_i = min(1, C/(‖g_i‖_p + 1e-6)) (flat) or per tensor with C_l.

        Raises ``FloatingPointError`` on a NaN/inf per-sample gradient before anything is stored (on the
        accelerator path: when the step's check is settled, with ``summed_grad`` restored).
        """
        grads = [self._get_flat_grad_sample(p) for p in self.params]
        for p in self.params:
            _check_processed_flag(p.grad_sample)
        if not uses_accelerator_path(grads[0].device):
            self._accumulate(grads, self._factors(grads), in_place=True)
            return
        before = [p.summed_grad for p in self.params]
        factors, redo = self._factors_deferred(grads)
        self._accumulate(grads, factors, in_place=False)

        def handle() -> None:  # the rare case: restore, then the synchronising path (or raise)
            for p, s in zip(self.params, before):
                p.summed_grad = s
            again = [self._get_flat_grad_sample(p) for p in self.params]
            self._accumulate(again, self._factors(again), in_place=False)

        self._step_checks.append((redo, handle))
        if not self._in_step or self._check_skip_next_step(pop_next=False):
            self._settle()  # called alone, or the step will be skipped (no add_noise): this step's one sync

    def _opacus_l2(self, grads: List[torch.Tensor]) -> bool:
        """Opacus's own formula (bit-identical to Opacus) at β = p = 2 with float32/float64 gradients and
        parameters; 16-bit ones take the certified norms and :meth:`_stored_bounds` (Lemma S of docs/engine.md:
        Opacus's 16-bit norm and 16-bit multiply can store a clipped gradient above C)."""
        wide = (torch.float32, torch.float64)
        return (
            self.beta == 2.0
            and self.clip_norm_p == 2.0
            and all(g.dtype in wide for g in grads)
            and all(p.dtype in wide for p in self.params)
        )

    def _opacus_l2_norms(self, grads: List[torch.Tensor]) -> List[torch.Tensor]:
        """Opacus's ℓ2 norms: per tensor (per-layer), or one flat norm (a one-element list)."""
        if hasattr(self, "max_grad_norms"):
            return [g.norm(2, dim=tuple(range(1, g.ndim))) for g in grads]
        dev = grads[0].device
        return [torch.stack([g.reshape(len(g), -1).norm(2, dim=-1).to(dev) for g in grads], dim=1).norm(2, dim=1)]

    def _bounds(self) -> List[float]:
        return list(self.max_grad_norms) if hasattr(self, "max_grad_norms") else [self.max_grad_norm]

    def _stored_bounds(self, grads: List[torch.Tensor]) -> List[float]:
        """The bounds C'_l ≤ C_l the certified path clips to, so that the stored clipped gradient has ℓp norm
        ≤ C_l in the parameters' dtype (:func:`~opacus_gg.clipping.stored_clip_bound`)."""
        parts = [(g.dtype, p.dtype, g[0].numel()) for g, p in zip(grads, self.params)]
        groups = [[x] for x in parts] if hasattr(self, "max_grad_norms") else [parts]
        return [stored_clip_bound(c, self.clip_norm_p, ps) for c, ps in zip(self._bounds(), groups)]

    def _factors(self, grads: List[torch.Tensor]) -> List[torch.Tensor]:
        """Clip factors per tensor, synchronising (fast-path checks, ``check_finite``; raises on NaN/inf)."""
        if len(grads[0]) == 0:
            return [torch.zeros((0,), device=grads[0].device)] * len(grads)
        per_layer = hasattr(self, "max_grad_norms")
        opacus = self._opacus_l2(grads)
        if opacus:
            norms = self._opacus_l2_norms(grads)
        elif per_layer:
            norms = per_layer_norms(grads, self.clip_norm_p)
        else:
            norms = [per_sample_norms(grads, self.clip_norm_p)]
        factors = []
        for n, c in zip(norms, self._bounds() if opacus else self._stored_bounds(grads)):
            check_finite(n)
            factors.append(clip_factors(n, c))
        return factors if per_layer else factors * len(grads)

    def _factors_deferred(self, grads: List[torch.Tensor]) -> Tuple[List[torch.Tensor], torch.Tensor]:
        """Clip factors per tensor and one 0-dim device bool "redo with :meth:`_factors`", no synchronisation."""
        dev = grads[0].device
        if len(grads[0]) == 0:
            return [torch.zeros((0,), device=dev)] * len(grads), torch.zeros((), dtype=torch.bool, device=dev)
        per_layer = hasattr(self, "max_grad_norms")
        if self._opacus_l2(grads):
            norms = self._opacus_l2_norms(grads)
            pairs = [(clip_factors(n, c), any_nonfinite(n)) for n, c in zip(norms, self._bounds())]
        else:
            parts = [[g] for g in grads] if per_layer else [grads]
            bounds = self._stored_bounds(grads)
            pairs = [clip_factors_deferred(gs, self.clip_norm_p, c) for gs, c in zip(parts, bounds)]
        redo = torch.stack([r.to(dev) for _, r in pairs]).any()
        factors = [f for f, _ in pairs]
        return (factors if per_layer else factors * len(grads)), redo

    def _accumulate(self, grads: List[torch.Tensor], factors: List[torch.Tensor], in_place: bool) -> None:
        """summed_grad += Σ_i f_i g_i per parameter (a new tensor unless ``in_place``: the deferred check
        may restore the previous one)."""
        opacus = self._opacus_l2(grads)
        for p, g, f in zip(self.params, grads, factors):
            if opacus:  # Opacus's own product (bit-identical)
                g = g.to(p.dtype)
                grad = torch.einsum("i,i...", f.to(g.device).to(p.dtype), g)
            else:  # the certified path: formed in float32/64, so that the stored gradient is ≤ C (Lemma S)
                grad = clipped_sum(f, g, p.dtype)
            if p.summed_grad is None:
                p.summed_grad = grad
            elif in_place:
                p.summed_grad += grad
            else:
                p.summed_grad = p.summed_grad + grad
            _mark_as_processed(p.grad_sample)


class GGNoiseMixin(GGParamsMixin):
    """Adds GG(β, noise_multiplier·max_grad_norm) noise to the clipped sum, then optional clamping."""

    def add_noise(self) -> None:
        r"""p.grad = clamp(ĝ + Z, −a, a),  Z ~ GG(β, σC)^{⊗ shape}; at β = 2 Opacus's Gaussian path.

        For β ≠ 2 the noise of all parameters (per device and dtype) is drawn in ONE call into one
        flat buffer; ĝ is added into it in place and each ``p.grad`` is a view of it. σC = 0 adds no
        noise (as Opacus's ``_generate_noise`` at std 0). On the accelerator path the draw is
        :func:`~opacus_gg.distribution.sample_deferred` and the step's checks are settled (one host
        synchronisation) before ĝ is read.
        """
        if self.beta == 2.0:
            self._settle()
            self._add_gaussian_noise()
        else:
            for p in self.params:
                _check_processed_flag(p.summed_grad)
                p.grad = None  # backward's gradient, overwritten below: freed before the buffer replaces it
            scale = self.noise_multiplier * self.max_grad_norm
            groups = _group_by_device_dtype(self.params)
            flats = [self._draw(sum(p.summed_grad.numel() for p in ps), scale, ps[0].summed_grad) for ps in groups]
            self._settle()
            for ps, flat in zip(groups, flats):
                flat = flat.to(ps[0].summed_grad.dtype)
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

    def _add_gaussian_noise(self) -> None:
        """β = 2: the next ``add_noise`` of the Opacus class below (its Gaussian path, bit-identical)."""
        super().add_noise()


def _group_by_device_dtype(params) -> List[list]:
    """Parameters grouped by (device, dtype) of their ``summed_grad``, in order of first appearance."""
    groups: Dict[tuple, list] = {}
    for p in params:
        groups.setdefault((p.summed_grad.device, p.summed_grad.dtype), []).append(p)
    return list(groups.values())
