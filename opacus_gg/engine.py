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

import difflib
import inspect
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

import torch
from opacus import PrivacyEngine
from opacus.accountants.utils import get_noise_multiplier as opacus_get_noise_multiplier
from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP
from opacus.optimizers import AdaClipDPOptimizer, DPOptimizer
from torch import nn, optim
from torch.distributed._composable.fsdp import FSDPModule
from torch.distributed.fsdp import FullyShardedDataParallel
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

from . import rank1
from .accountants import get_noise_multiplier as gg_get_noise_multiplier
from .accountants.api import validate_ball_bound
from .accountants.history import validate_accountant_state
from .checkpoint import PathLike, load_checkpoint_file
from .optimizers import get_gg_optimizer_class
from .optimizers.adaptive import GGAdaClipMixin
from .steps import expected_batch_size, steps_for_epochs
from .validation import (
    COUNT_SENSITIVITY,
    validate_adaptive_keywords,
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

__all__ = ["GGPrivacyEngine", "GAUSSIAN_ACCOUNTANTS", "CLIP_BOUND_KEY", "ClippingAdvice", "split_max_grad_norm"]

GAUSSIAN_ACCOUNTANTS = ("prv", "rdp", "gdp")
#: checkpoint key of adaptive clipping's current bound C_t (the optimizer's state_dict, the wrapped optimizer's,
#: does not hold it; Opacus's checkpoints do not store it)
CLIP_BOUND_KEY = "adaptive_max_grad_norm"
#: keywords of ``make_private_with_epsilon`` that opacus_gg's certified σ solver understands
_GG_SOLVER_KEYWORDS = ("eps_error", "epsilon_tolerance", "progress")


def split_max_grad_norm(max_grad_norm: float, n_layers: int, p: float) -> List[float]:
    r"""Per-layer bounds with total ℓp sensitivity C: C_l = C · L^(−1/p), so ‖(C_l)_l‖_p = C.

    At p = 2 this is Opacus's C/√L; at p = ∞ every C_l = C. (Opacus's C/√L under ℓp, p < 2, gives
    ‖(C_l)‖_p = C · L^(1/p − 1/2), i.e. that much more noise for the same σ.)
    """
    c = validate_max_grad_norm(max_grad_norm)
    if not (isinstance(n_layers, int) and n_layers >= 1):
        raise ValueError(f"n_layers must be an integer ≥ 1, got {n_layers!r}")
    return [c * n_layers ** (-1.0 / p)] * n_layers


class ClippingAdvice(UserWarning):
    """The advice of :func:`lp_clipping_advice` (silence it with ``warnings.simplefilter("ignore", ClippingAdvice)``)."""


#: whether :func:`lp_clipping_advice` has been shown in this process
_ADVICE_SHOWN = False


def lp_clipping_advice(beta: float, clip_norm_p: float, clipping: str) -> None:
    r"""Warn once per process (:class:`ClippingAdvice`) when β ≠ 2 and p = β with a fixed bound: the C of an Opacus
    script bounds ‖g‖₂, while ℓβ clipping bounds ‖g‖_β (for β < 2 larger, up to d^{1/β−1/2}·‖g‖₂; for β > 2
    smaller), so the tuned C clips much harder (β < 2) or looser (β > 2) than it did (:mod:`opacus_gg.tuning`)."""
    global _ADVICE_SHOWN
    if _ADVICE_SHOWN or beta == 2.0 or clip_norm_p != beta or clipping == "adaptive":
        return
    _ADVICE_SHOWN = True
    try:  # name adaptive clipping only where this version allows it
        validate_clipping("adaptive", beta, clip_norm_p)
        adaptive = ", or clipping='adaptive'"
    except ValueError:
        adaptive = ""
    ratio = "larger (l1: 17x, l1.5: 2.4x" if beta < 2 else "smaller (l2.5: 0.66x, l3: 0.53x"
    warnings.warn(
        f"beta={beta:g} clips per-sample gradients in the l{beta:g} norm (clip_norm_p defaults to beta), but a "
        f"max_grad_norm tuned for Opacus bounds the l2 norm; the l{beta:g} norm of a gradient is {ratio} the l2 "
        f"norm on the digits MLP), so that C clips {'much harder' if beta < 2 else 'looser'} than it did. Pass "
        f"clip_norm_p=2 to keep Opacus's clipping and its tuned C with GG noise (the best clipping at every beta "
        f"in docs/beta_study.md){adaptive}, or map C with opacus_gg.tuning.lp_max_grad_norm(C, {beta:g}, "
        f"grad_samples) on public data. Shown once per process.",
        ClippingAdvice,
        stacklevel=3,
    )


def _trainable_tensors(optimizer: optim.Optimizer) -> int:
    """L = number of trainable parameter tensors of the optimizer."""
    return sum(1 for g in optimizer.param_groups for q in g["params"] if q.requires_grad)


def _trainable_dim(optimizer: optim.Optimizer) -> int:
    """d = Σ numel of the optimizer's parameters with requires_grad."""
    return int(sum(q.numel() for g in optimizer.param_groups for q in g["params"] if q.requires_grad))


def _check_fsdp(module: nn.Module, grad_sample_mode: str, beta: float) -> None:
    """A module with FSDP inside (``fully_shard``, Opacus's ``FSDP2Wrapper``, or FSDP1) gets per-sample gradients only
    from Opacus's ``grad_sample_mode="ghost_fsdp"``; every other mode fails deep inside Opacus or torch (hooks:
    "FSDP does not support deepcopy"; on a root-only ``fully_shard``: an AttributeError), so refuse it first."""
    if grad_sample_mode == "ghost_fsdp":
        return
    if any(isinstance(m, (FSDPModule, FullyShardedDataParallel)) for m in module.modules()):
        p2 = "" if beta == 2.0 else " and clip_norm_p=2 (ghost norms are l2; any beta)"
        raise ValueError(
            f"module is wrapped by FSDP, whose per-sample gradients Opacus computes only with "
            f"grad_sample_mode='ghost_fsdp'{p2}; got grad_sample_mode={grad_sample_mode!r}"
        )


@dataclass(frozen=True)
class _Checked:
    """Cleaned β-DP-SGD arguments (see :meth:`GGPrivacyEngine._check_arguments`)."""

    beta: float
    clip_norm_p: float
    clipping: str
    grad_sample_mode: str
    max_grad_norm: Union[float, List[float]]
    sample_rate: float


def _keyword_names(*functions) -> frozenset:
    """Keyword parameter names of ``functions`` (``self`` and ``**kwargs`` left out)."""
    return frozenset(n for f in functions for n, q in inspect.signature(f).parameters.items()
                     if n != "self" and q.kind in (q.KEYWORD_ONLY, q.POSITIONAL_OR_KEYWORD))


#: the extra keywords ``make_private`` passes on: Opacus's own, and adaptive clipping's
_MAKE_PRIVATE_KEYWORDS = _keyword_names(PrivacyEngine.make_private, AdaClipDPOptimizer.__init__) - {
    "optimizer", "noise_multiplier", "max_grad_norm", "expected_batch_size", "generator", "secure_mode"}
#: and those ``make_private_with_epsilon`` also gives the σ solver (ours, or Opacus's accountants' get_epsilon)
_SOLVER_KEYWORDS = frozenset(_GG_SOLVER_KEYWORDS) | {"alphas", "delta_error"}


def _check_keywords(kwargs: Dict[str, Any], valid: frozenset, method) -> None:
    """Unknown keywords (which Opacus's ``**kwargs`` would silently swallow) → ``ValueError`` naming the closest
    valid one, ``method``'s own parameters included (``betta`` → ``beta``)."""
    where = method.__name__
    for name in kwargs:
        if name not in valid:
            close = difflib.get_close_matches(name, sorted(valid | _keyword_names(method)), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{where}() got an unknown keyword {name!r}{hint}")


class GGPrivacyEngine(PrivacyEngine):
    """Opacus ``PrivacyEngine`` with ℓp clipping and Generalized Gaussian noise (β-DP-SGD)."""

    def __init__(self, *, accountant: str = "gg_prv", secure_mode: bool = False, ball_bound: str = "renyi"):
        """Opacus's constructor. ``secure_mode=True`` without ``torchcsprng``: Opacus's ImportError, led by what
        matters first here: secure mode exists only at β = 2 (GG noise has no proven floating-point defence).
        ``ball_bound`` ("renyi" or "table", ``gg_prv`` only): the proven bound over the ℓp ball that ``get_epsilon``
        and ``make_private_with_epsilon`` use where the PRV covers equal spreads only (:data:`.accountants.api.BALL_BOUNDS`)."""
        ball_bound = validate_ball_bound(ball_bound)
        if ball_bound != "renyi" and accountant != "gg_prv":
            raise ValueError(f"ball_bound={ball_bound!r} needs accountant='gg_prv', got accountant={accountant!r}")
        try:
            super().__init__(accountant=accountant, secure_mode=secure_mode)
        except ImportError as e:
            raise ImportError(
                "secure_mode=True works only with beta=2 (Gaussian noise; for beta ≠ 2 make_private refuses it: "
                f"Opacus's floating-point-attack defence has no proven GG analogue), and at beta=2 it needs: {e}"
            ) from e
        if accountant == "gg_prv":
            self.accountant.ball_bound = ball_bound

    # -- the one argument check -------------------------------------------------------------------
    def _check_arguments(
        self,
        *,
        module: nn.Module,
        optimizer: optim.Optimizer,
        data_loader: DataLoader,
        max_grad_norm: Union[float, List[float]],
        beta: float,
        clip_norm_p: Optional[float],
        clipping: str,
        grad_sample_mode: str,
    ) -> _Checked:
        r"""Validate and normalise the arguments shared by ``make_private`` and ``make_private_with_epsilon``.

        * β ≥ 1, p ∈ [1, ∞] (None → β), clipping ∈ {flat, per_layer, adaptive, ghost}; ghost clipping and
          ``grad_sample_mode`` "ghost"/"ghost_fsdp" only with p = 2 (any β); an FSDP module only with
          "ghost_fsdp" (:func:`_check_fsdp`); adaptive (any β, p) only with
          ``gg_prv``, the accountant that sees its noisy count.
        * ``clipping="ghost"`` → ("flat", grad_sample_mode="ghost") (Opacus's ghost clipping).
        * per-layer: a list of L numbers > 0 (one per trainable tensor), or one total C split as
          C_l = C · L^(−1/p) (:func:`split_max_grad_norm`, total ℓp sensitivity C).
        * a Gaussian accountant only with β = 2 and p ≤ 2 (ℓp ball ⊂ ℓ2 ball for p ≤ 2).
        * q = 1/len(data_loader) ∈ (0, 1].
        """
        beta = validate_beta(beta)
        p = validate_clip_norm_p(clip_norm_p, beta)
        validate_clipping(clipping, beta, p)
        if grad_sample_mode in ("ghost", "ghost_fsdp"):
            validate_clipping("ghost", beta, p, name="grad_sample_mode")
        if clipping == "ghost":
            clipping, grad_sample_mode = "flat", "ghost"
        _check_fsdp(module, grad_sample_mode, beta)
        max_grad_norm = validate_max_grad_norm(max_grad_norm)
        n_tensors = _trainable_tensors(optimizer)
        if clipping == "per_layer":
            if not isinstance(max_grad_norm, list):
                max_grad_norm = split_max_grad_norm(max_grad_norm, n_tensors, p)
            elif len(max_grad_norm) != n_tensors:
                raise ValueError(
                    f"max_grad_norm must be one total C > 0 or a list of {n_tensors} numbers > 0 (one per "
                    f"trainable parameter tensor) with clipping='per_layer', got {len(max_grad_norm)} numbers"
                )
        elif isinstance(max_grad_norm, list):
            raise ValueError(f"max_grad_norm must be a single number > 0 with clipping={clipping!r}, got a list")
        mech = self.accountant.mechanism()
        if clipping == "adaptive" and mech != "gg_prv":
            raise ValueError(
                f"clipping='adaptive' releases a noisy unclipped count each step, which accountant={mech!r} does "
                "not see; use GGPrivacyEngine(accountant='gg_prv') (it accounts the count: docs/accounting.md, "
                "Lemma 8)"
            )
        if mech in GAUSSIAN_ACCOUNTANTS and (beta != 2.0 or p > 2.0):
            raise ValueError(
                f"accountant={mech!r} is a Gaussian (ℓ2) accountant and cannot certify beta={beta}, "
                f"clip_norm_p={p}; use GGPrivacyEngine(accountant='gg_prv') "
                f"(Gaussian accountants are allowed only with beta=2 and clip_norm_p ≤ 2)"
            )
        if len(data_loader) == 0:
            raise ValueError("data_loader must have at least one batch (sample_rate = 1/len(data_loader))")
        sample_rate = validate_sample_rate(1.0 / len(data_loader))
        return _Checked(beta, p, clipping, grad_sample_mode, max_grad_norm, sample_rate)

    # -- model ---------------------------------------------------------------------------------
    def _prepare_model(self, module: nn.Module, **kwargs):
        """Opacus's ``_prepare_model``; a hooks-mode wrapper also records each ``nn.Linear`` weight's factors,
        so that its per-sample ℓp norms cost out + in operations (:mod:`opacus_gg.rank1`; same per-sample
        gradients, bit for bit)."""
        wrapped = super()._prepare_model(module, **kwargs)
        rank1.install(wrapped)
        return wrapped

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
        **kwargs,
    ) -> DPOptimizer:
        """Opacus's ``_prepare_optimizer`` with the GG optimizer class (β, p, rectify_bound in kwargs,
        already checked by :meth:`_check_arguments`; the optimizer re-validates its own state)."""
        if isinstance(optimizer, DPOptimizer):
            optimizer = optimizer.original_optimizer
        generator = self.secure_rng if self.secure_mode else noise_generator
        optim_class = get_gg_optimizer_class(
            clipping=clipping, distributed=distributed, grad_sample_mode=grad_sample_mode
        )
        return optim_class(
            optimizer=optimizer,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            expected_batch_size=expected_batch_size,
            loss_reduction=loss_reduction,
            generator=generator,
            secure_mode=self.secure_mode,
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
        division by expected_batch_size; post-processing). ``clipping="ghost"`` is a shorthand for
        Opacus's ghost clipping (clip_norm_p = 2, any β); with ``clipping="per_layer"`` a single ``max_grad_norm``
        is the total ℓp sensitivity C, split as C_l = C·L^(−1/p). Returns what Opacus returns."""
        _check_keywords(kwargs, _MAKE_PRIVATE_KEYWORDS | _SOLVER_KEYWORDS, GGPrivacyEngine.make_private)
        c = self._check_arguments(module=module, optimizer=optimizer, data_loader=data_loader,
                                  max_grad_norm=max_grad_norm, beta=beta, clip_norm_p=clip_norm_p, clipping=clipping,
                                  grad_sample_mode=grad_sample_mode)
        noise_multiplier = validate_noise_multiplier(noise_multiplier)  # the cleaned value is what is used
        rectify_bound = validate_rectify_bound(rectify_bound)
        if c.clipping == "adaptive":  # refused before Opacus wraps anything (the accountant would refuse σ_c later)
            kwargs.update(validate_adaptive_keywords(kwargs))
        lp_clipping_advice(c.beta, c.clip_norm_p, c.clipping)
        if not poisson_sampling:
            warnings.warn(
                "poisson_sampling=False: the accountant assumes Poisson subsampling, so the reported "
                "epsilon is NOT a guarantee for shuffled fixed-size batches",
                stacklevel=2,
            )
            if hasattr(self.accountant, "poisson_sampling"):  # gg_prv: its reports say so (scope "shuffled")
                self.accountant.poisson_sampling = False
        distributed = isinstance(module, (DPDDP, DDP, FSDPModule))  # Opacus's test, on the module passed in
        result = super().make_private(
            module=module,
            optimizer=optimizer,
            data_loader=data_loader,
            noise_multiplier=noise_multiplier,
            max_grad_norm=c.max_grad_norm,
            poisson_sampling=poisson_sampling,
            clipping=c.clipping,
            grad_sample_mode=c.grad_sample_mode,
            beta=c.beta,
            clip_norm_p=c.clip_norm_p,
            rectify_bound=rectify_bound,
            **kwargs,
        )
        # Opacus's int(N·(1/n_b)) can truncate N/n_b = 1 to 0 (a division by zero); per worker as in Opacus
        dp_optimizer, dp_loader = result[1], result[-1]
        ebs = expected_batch_size(len(dp_loader.dataset), len(dp_loader))
        dp_optimizer.expected_batch_size = ebs / torch.distributed.get_world_size() if distributed else ebs
        return result

    def make_private_with_epsilon(
        self,
        *,
        module: nn.Module,
        optimizer: optim.Optimizer,
        data_loader: DataLoader,
        target_epsilon: float,
        target_delta: float,
        epochs: float,
        max_grad_norm: Union[float, List[float]],
        beta: float = 2.0,
        clip_norm_p: Optional[float] = None,
        clipping: str = "flat",
        grad_sample_mode: str = "hooks",
        **kwargs,
    ):
        r"""``make_private`` with σ chosen so that the accountant's ε after T steps is ≤ target_epsilon
        at target_delta, T = ``steps_for_epochs(epochs, data_loader=data_loader)`` = ⌈epochs·len(loader)⌉
        (never fewer than training runs), q = 1/len(data_loader).

        * ``gg_prv``: ``opacus_gg.accountants.get_noise_multiplier`` with β, d (trainable parameters) and
          p (certified: ε(σ) ≤ target_epsilon); ``eps_error``, ``epsilon_tolerance`` and ``progress`` are forwarded.
        * a Gaussian accountant (β = 2 only): Opacus's ``get_noise_multiplier`` with every extra keyword
          forwarded, as Opacus does, so σ is Opacus's whenever Opacus's ``int(epochs/q)`` equals T.
        As in Opacus, the extra keywords are also passed on to ``make_private``.
        """
        _check_keywords(kwargs, _MAKE_PRIVATE_KEYWORDS | _SOLVER_KEYWORDS, GGPrivacyEngine.make_private_with_epsilon)
        c = self._check_arguments(module=module, optimizer=optimizer, data_loader=data_loader,
                                  max_grad_norm=max_grad_norm, beta=beta, clip_norm_p=clip_norm_p, clipping=clipping,
                                  grad_sample_mode=grad_sample_mode)
        validate_epsilon(target_epsilon)
        validate_delta(target_delta, "target_delta")
        if c.clipping == "adaptive":
            kwargs.update(validate_adaptive_keywords(kwargs))
        steps = steps_for_epochs(epochs, data_loader=data_loader)
        if len(self.accountant) > 0:
            warnings.warn(
                "You're calling make_private_with_epsilon with non-zero privacy budget already spent. "
                "Returned noise_multiplier assumes zero starting point, so your overall privacy budget "
                "will be higher."
            )
        mech = self.accountant.mechanism()
        if mech == "gg_prv":
            solver_kw: Dict[str, Any] = {k: kwargs[k] for k in _GG_SOLVER_KEYWORDS if k in kwargs}
            if c.clipping == "adaptive":  # σ for the gradient noise with the count's share of ε included
                solver_kw["count_noise_multiplier"] = kwargs["unclipped_num_std"] / COUNT_SENSITIVITY
            sigma = gg_get_noise_multiplier(
                target_epsilon=target_epsilon, target_delta=target_delta, sample_rate=c.sample_rate,
                steps=steps, beta=c.beta, dim=_trainable_dim(optimizer), clip_norm_p=c.clip_norm_p,
                ball_bound=self.accountant.ball_bound, **solver_kw,
            )
        elif mech in GAUSSIAN_ACCOUNTANTS:
            sigma = opacus_get_noise_multiplier(
                target_epsilon=target_epsilon, target_delta=target_delta, sample_rate=c.sample_rate,
                steps=steps, accountant=mech, **kwargs,
            )
        else:
            raise ValueError(f"accountant {mech!r} has no noise-multiplier solver in opacus-gg")
        return self.make_private(
            module=module,
            optimizer=optimizer,
            data_loader=data_loader,
            noise_multiplier=sigma,
            max_grad_norm=max_grad_norm,
            beta=c.beta,
            clip_norm_p=clip_norm_p,
            clipping=clipping,
            grad_sample_mode=grad_sample_mode,
            **kwargs,
        )

    # -- checkpoints ----------------------------------------------------------------------------
    def save_checkpoint(self, *, path, module: nn.Module, optimizer: Optional[DPOptimizer] = None,
                        checkpoint_dict: Optional[Dict[str, Any]] = None, **kwargs) -> None:
        """Opacus's ``save_checkpoint``; with ``clipping="adaptive"`` also the current clip bound C_t
        (:data:`CLIP_BOUND_KEY`)."""
        checkpoint_dict = checkpoint_dict or {}
        if isinstance(optimizer, GGAdaClipMixin):
            checkpoint_dict[CLIP_BOUND_KEY] = float(optimizer.max_grad_norm)
        super().save_checkpoint(path=path, module=module, optimizer=optimizer, checkpoint_dict=checkpoint_dict,
                                **kwargs)

    def load_checkpoint(
        self,
        *,
        path: PathLike,
        module: nn.Module,
        optimizer: Optional[DPOptimizer] = None,
        noise_scheduler=None,
        grad_clip_scheduler=None,
        module_load_dict_kwargs: Optional[Dict[str, Any]] = None,
        torch_load_kwargs: Optional[Dict[str, Any]] = None,
    ) -> Dict:
        """Opacus's ``load_checkpoint`` (same arguments, same result), read safely: ``torch.load`` with
        ``weights_only=True`` unless ``torch_load_kwargs`` says otherwise (:func:`opacus_gg.checkpoint.
        load_checkpoint_file`), and the accountant's history validated before anything is loaded (a NaN,
        string or negative σ, q, steps or dim: ``ValueError``). Checkpoints of Opacus's ``PrivacyEngine``
        load here and ours there. (Opacus's own method hard-codes ``weights_only=False``, so its body is
        restated here rather than called.) An adaptive optimizer continues from the saved clip bound C_t (a
        checkpoint without one, Opacus's or an older one, loads with a warning and C_t restarts at the optimizer's
        bound: C_t is post-processing of released counts, so either way ε is unchanged)."""
        checkpoint = load_checkpoint_file(path, torch_load_kwargs)
        missing = [k for k in ("module_state_dict", "privacy_accountant_state_dict") if k not in checkpoint]
        if missing:
            raise ValueError(f"checkpoint has no {' and no '.join(missing)}: not written by save_checkpoint")
        validate_accountant_state(checkpoint["privacy_accountant_state_dict"], self.accountant.mechanism())
        module.load_state_dict(checkpoint["module_state_dict"], **(module_load_dict_kwargs or {}))
        self.accountant.load_state_dict(checkpoint["privacy_accountant_state_dict"])
        optimizer_state_dict = checkpoint.pop("optimizer_state_dict", {})
        if optimizer is not None and len(optimizer_state_dict) > 0:
            optimizer.load_state_dict(optimizer_state_dict)
        elif (optimizer is not None) ^ (len(optimizer_state_dict) > 0):
            warnings.warn(f"optimizer_state_dict has {len(optimizer_state_dict)} items"
                          f" but optimizer is {'' if optimizer else 'not'} provided.")
        for key, target in (("noise_scheduler_state_dict", noise_scheduler),
                            ("grad_clip_scheduler_state_dict", grad_clip_scheduler)):
            state = checkpoint.pop(key, {})
            if target is not None and len(state) > 0:
                target.load_state_dict(state)
        if isinstance(optimizer, GGAdaClipMixin):
            if checkpoint.get(CLIP_BOUND_KEY) is None:
                warnings.warn(f"the checkpoint has no adaptive clip bound ({CLIP_BOUND_KEY}: saved by Opacus or an "
                              f"older opacus-gg); clipping='adaptive' restarts at max_grad_norm="
                              f"{optimizer.max_grad_norm:g}", stacklevel=2)
            else:
                optimizer.max_grad_norm = validate_max_grad_norm(checkpoint[CLIP_BOUND_KEY], CLIP_BOUND_KEY)
        return checkpoint

    def get_epsilon(self, delta: float) -> float:
        """ε spent so far at δ (a certified upper bound with ``gg_prv``, 0 before any step), as Opacus's
        ``get_epsilon``; with a Gaussian accountant exactly Opacus's accountant's answer."""
        return self.accountant.get_epsilon(validate_delta(delta))

    def get_tradeoff(self, delta: float, **kwargs):
        """The proven trade-off curve so far (:class:`.accountants.tradeoff.TradeoffReport`: the TPR bound of any
        membership-inference attack at every FPR, μ-GDP, the proven ε at δ), the query beside ``get_epsilon``;
        with a Gaussian accountant, the curve of its history (σ, q, steps) as β = 2 steps."""
        delta = validate_delta(delta)
        if hasattr(self.accountant, "get_tradeoff"):
            return self.accountant.get_tradeoff(delta, **kwargs)
        from .accountants.tradeoff import compute_tradeoff_history

        return compute_tradeoff_history(list(self.accountant.history), delta, **kwargs)
