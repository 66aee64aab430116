r"""Input canaries: the same canaries as training examples, through the whole engine.

Where :mod:`.canaries` writes the canary gradients into the optimizer, here each included canary is an example
of the training set and everything between it and the update is the library's: ``GGPrivacyEngine.make_private``
wraps the model (Opacus's per-sample gradients), the data loader (``DPDataLoader``'s Poisson sampling at
q = 1/len(data_loader)) and the optimizer, and ``engine.get_epsilon(δ)`` is the proven ε the engine itself reports.

The model is a linear map x ↦ ⟨θ, x⟩ (``nn.Linear(d, 1, bias=False)``, θ_0 = 0) trained on the loss
ℓ(θ; x) = ⟨θ, x⟩, whose per-sample gradient is x itself whatever θ: canary i is the input x_i = g_i = a u_i of
:mod:`.canaries`, so the two audits see the same shifts and differ only in who computes and samples them. The scores
are the same white-box functions of the updates (``cfg.score``). q must be 1/L for an integer L (the engine's
sampling rate is 1/len(data_loader)).
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, Optional, Type

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from ..engine import ClippingAdvice, GGPrivacyEngine
from ..optimizers import GGDPOptimizer
from .canaries import AuditConfig, _canary_rows, _step_log_likelihood_ratio, canary_scores

__all__ = ["run_input_canaries"]


class _BrokenEngine(GGPrivacyEngine):
    """TEST-ONLY: ``make_private`` hands out ``optimizer_class`` (e.g. :class:`.canaries.BrokenGGDPOptimizer`) with
    ``optimizer_kwargs`` instead of the flat GG optimizer; everything else is the engine's."""

    def __init__(self, optimizer_class: Type[GGDPOptimizer], optimizer_kwargs: Dict[str, Any]):
        super().__init__()
        self._optimizer_class, self._optimizer_kwargs = optimizer_class, optimizer_kwargs

    def _prepare_optimizer(self, *, optimizer, noise_multiplier, max_grad_norm, expected_batch_size,  # noqa: ANN001
                           loss_reduction="mean", noise_generator=None, **kwargs):  # noqa: ANN001
        mech = {k: kwargs[k] for k in ("beta", "clip_norm_p", "rectify_bound") if k in kwargs}
        return self._optimizer_class(optimizer=optimizer, noise_multiplier=noise_multiplier,
                                     max_grad_norm=max_grad_norm, expected_batch_size=expected_batch_size,
                                     loss_reduction=loss_reduction, generator=noise_generator, **mech,
                                     **self._optimizer_kwargs)


def run_input_canaries(cfg: AuditConfig, *, optimizer_class: Type[GGDPOptimizer] = GGDPOptimizer,
                       optimizer_kwargs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Train T steps through ``GGPrivacyEngine.make_private`` on the included canaries (module docstring); returns
    ``included``, ``updates`` (θ_0 − θ_T), ``scores`` and ``epsilon_engine`` (``engine.get_epsilon(δ)``). Seeded:
    inclusion from ``cfg.seed``, noise from ``cfg.seed + 1``, the loader's sampling from ``cfg.seed + 2``."""
    n_batches = round(1.0 / cfg.sample_rate)
    if abs(n_batches * cfg.sample_rate - 1.0) > 1e-12:
        raise ValueError(f"input canaries need sample_rate = 1/L for an integer L (the engine samples at "
                         f"1/len(data_loader)), got {cfg.sample_rate!r}")
    gen = torch.Generator().manual_seed(cfg.seed)
    included = torch.rand(cfg.canaries, generator=gen) < 0.5
    members = torch.nonzero(included).reshape(-1)
    if len(members) < n_batches:
        raise ValueError(f"input canaries: {len(members)} included canaries cannot fill 1/q = {n_batches} batches; "
                         "use more canaries or a larger sample_rate")
    rows = _canary_rows(cfg, members)
    loader = DataLoader(TensorDataset(rows), batch_size=-(-len(members) // n_batches))
    if len(loader) != n_batches:
        raise ValueError(f"input canaries: {len(members)} included canaries make {len(loader)} batches, not "
                         f"1/q = {n_batches}; use more canaries or a larger sample_rate")
    model = torch.nn.Linear(cfg.dim, 1, bias=False)
    torch.nn.init.zeros_(model.weight)
    noise_gen = torch.Generator().manual_seed(cfg.seed + 1)
    with torch.random.fork_rng(), warnings.catch_warnings():
        torch.manual_seed(cfg.seed + 2)  # the DPDataLoader samples from the global generator: seeded, then restored
        # not the audit's business: advice on tuning C, Opacus's secure-RNG notice, the hook notice on a bare input
        warnings.filterwarnings("ignore", category=ClippingAdvice)
        warnings.filterwarnings("ignore", message="Secure RNG turned off")
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        engine = GGPrivacyEngine() if optimizer_class is GGDPOptimizer and not optimizer_kwargs else \
            _BrokenEngine(optimizer_class, optimizer_kwargs or {})
        model, opt, dp_loader = engine.make_private(
            module=model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0), data_loader=loader,
            noise_multiplier=cfg.noise_multiplier, max_grad_norm=cfg.max_grad_norm, beta=cfg.beta,
            clip_norm_p=cfg.clip_norm_p, loss_reduction="sum", noise_generator=noise_gen)
        weight = model._module.weight
        llr, done = np.zeros(cfg.canaries), 0
        while done < cfg.steps:
            for (x,) in dp_loader:
                model(x).sum().backward()  # ℓ(θ; x) = ⟨θ, x⟩: per-sample gradient x
                opt.step()
                if cfg.score == "likelihood":
                    step = weight.grad.detach().reshape(-1)[: cfg.canaries * cfg.canary_width]
                    llr += _step_log_likelihood_ratio(cfg, step)
                opt.zero_grad()
                done += 1
                if done == cfg.steps:
                    break
    updates = -weight.detach().reshape(-1).to(torch.float64).numpy()
    if not np.all(np.isfinite(updates)):
        raise FloatingPointError("the audit run's parameters are not finite")
    scores = canary_scores(cfg, updates) if cfg.score == "inner" else llr
    if not np.all(np.isfinite(scores)):
        raise FloatingPointError(f"the audit's {cfg.score} scores are not finite")
    return {"included": included.numpy(), "updates": updates, "scores": scores,
            "epsilon_engine": float(engine.get_epsilon(cfg.delta))}
