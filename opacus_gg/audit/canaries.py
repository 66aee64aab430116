r"""White-box gradient canaries through the β-DP-SGD optimizer: one training run, m canaries, their scores.

The threat model is the strongest one for DP-SGD (Nasr et al. 2021/2023; Steinke, Nasr & Jagielski 2023, §6):
the auditor chooses the per-sample gradients and sees every update. The model is one flat parameter θ ∈ R^d,
θ_0 = 0, trained by plain SGD (lr = 1, no momentum) under :class:`~opacus_gg.optimizers.GGDPOptimizer`, the
optimizer ``GGPrivacyEngine.make_private`` returns for flat clipping, with ``loss_reduction="sum"``.

Canaries. Canary i owns the coordinates B_i = [i k, (i + 1) k) (k = ``canary_width``, disjoint blocks, so two
canaries never share a coordinate and the per-coordinate noise is independent across canaries); its gradient is
g_i = a · u_i with u_i = k^{−1/p} 1_{B_i} (‖u_i‖_p = 1, p = ``clip_norm_p``) and a = ``canary_scale`` · C, of ℓp
norm a ≥ C: the optimizer's clipping brings it back to norm C (below C by the 1e-6 of Opacus's factor), so the
honest engine releases exactly a shift of norm C in the worst-case ball, and an engine that skips clipping
releases a shift ``canary_scale`` times larger. k = 1 (Dirac canaries, value C on one coordinate) lies in every ℓp
ball of radius C; for β > 2 spreading the shift over k > 1 coordinates raises the privacy loss
(docs/accounting.md), so wider canaries audit harder there.

Each canary is included with probability ½ (S_i = +1) and, at every step, an included canary is Poisson-sampled
with probability q (the optimizer's per-sample gradients of the step are the sampled canaries' rows; there is no
other data). Two scores (``score``), both functions of the updates the white-box auditor sees:

* ``"inner"``: with U = Σ_t g̃_t = θ_0 − θ_T (the sum of the noisy updates), s_i = ⟨u_i, U⟩, the canary's inner
  product with the model's updates;
* ``"likelihood"``: the log-likelihood ratio of "included" against "excluded" given the step updates y_t on B_i,
  s_i = Σ_t log(1 − q + q e^{ℓ_{i,t}}),  ℓ_{i,t} = Σ_{j ∈ B_i} (|y_{t,j}|^β − |y_{t,j} − μ|^β) / (β (σC)^β),
  μ = C k^{−1/p} (the clipped canary's coordinate), the Neyman–Pearson statistic of one canary's steps under GG
  noise (it sees what the inner product misses: the shape of the noise, e.g. Laplace's for wide canaries).

Coordinates beyond m k (d > m k) carry noise only; d is the dimension the proven ε is computed for.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple, Type

import numpy as np
import torch

from ..optimizers import GGDPOptimizer
from ..validation import (
    STEPS_MAX,
    validate_beta,
    validate_clip_norm_p,
    validate_delta,
    validate_noise_multiplier,
    validate_positive,
    validate_positive_int,
    validate_sample_rate,
)
from .bound import AuditBound, audit_epsilon

if TYPE_CHECKING:
    from ..accountants.tradeoff import TradeoffReport

__all__ = ["AuditConfig", "AuditResult", "BrokenGGDPOptimizer", "audit", "proven_epsilon", "proven_tradeoff",
           "run_canaries", "canary_scores", "roc_points"]


#: largest audit dimension d: each step draws d noise coordinates and holds the sampled canaries as dense rows of d
DIM_AUDIT_MAX = 10**7
#: input canaries keep every included canary as a dense row of d float32 (m/2 · d · 4 bytes ≤ 800 MB)
INPUT_FLOATS_MAX = 4 * 10**8
#: the canary scores (module docstring)
SCORES = ("inner", "likelihood")
#: where the canaries enter: "gradient" (written into the optimizer's per-sample gradients, this module) or
#: "input" (training examples through ``GGPrivacyEngine.make_private``, :mod:`.inputs`)
KINDS = ("gradient", "input")


@dataclasses.dataclass(frozen=True)
class AuditConfig:
    """A checked audit setting (build it with :meth:`checked`): the mechanism (β, p, σ, q, T, δ, d, C) and the
    canaries (m, width k, raw norm ``canary_scale`` · C), the seed and the confidence of the bound."""

    beta: float
    clip_norm_p: float
    noise_multiplier: float
    sample_rate: float
    steps: int
    delta: float
    canaries: int
    canary_width: int
    dim: int
    max_grad_norm: float
    canary_scale: float
    seed: int
    confidence: float
    score: str = "inner"
    kind: str = "gradient"

    @classmethod
    def checked(cls, *, beta: float = 2.0, clip_norm_p: Optional[float] = None, noise_multiplier: float = 2.0,
                sample_rate: float = 0.05, steps: int = 100, delta: float = 1e-5, canaries: int = 1000,
                canary_width: int = 1, dim: Optional[int] = None, max_grad_norm: float = 1.0,
                canary_scale: float = 10.0, seed: int = 0, confidence: float = 0.95,
                score: str = "inner", kind: str = "gradient") -> "AuditConfig":
        """Every argument validated once (ValueError naming it); ``dim`` defaults to m·k and must be ≥ m·k."""
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        beta = validate_beta(beta)
        m = validate_positive_int(canaries, "canaries", minimum=10, maximum=10**6)
        k = validate_positive_int(canary_width, "canary_width", maximum=10**6)
        d = m * k if dim is None else validate_positive_int(dim, "dim", minimum=m * k, maximum=DIM_AUDIT_MAX)
        if d > DIM_AUDIT_MAX:
            raise ValueError(f"canaries × canary_width must be ≤ {DIM_AUDIT_MAX:.0e} (the audit's d), got {d}")
        if kind == "input" and m * d > INPUT_FLOATS_MAX:
            raise ValueError(f"input canaries hold m/2 dense rows of d floats: canaries × dim must be ≤ "
                             f"{INPUT_FLOATS_MAX:.0e}, got {m * d:.3g}")
        confidence = validate_delta(confidence, "confidence")  # (0, 1)
        scale = validate_positive(canary_scale, "canary_scale")
        if scale < 1:
            raise ValueError(f"canary_scale must be ≥ 1 (the canary's raw ℓp norm in units of C), "
                             f"got {canary_scale!r}")
        sigma = validate_noise_multiplier(noise_multiplier, allow_zero=False)  # σ = 0 has ε = ∞: nothing to audit
        return cls(beta=beta, clip_norm_p=validate_clip_norm_p(clip_norm_p, beta), noise_multiplier=sigma,
                   sample_rate=validate_sample_rate(sample_rate),
                   steps=validate_positive_int(steps, "steps", maximum=STEPS_MAX), delta=validate_delta(delta),
                   canaries=m, canary_width=k, dim=d,
                   max_grad_norm=validate_positive(max_grad_norm, "max_grad_norm"), canary_scale=scale,  # one C
                   seed=validate_positive_int(seed, "seed", minimum=0), confidence=float(confidence), score=score,
                   kind=kind)


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """One audit: the bound (:class:`~opacus_gg.audit.bound.AuditBound`), the proven ε of the same setting, the
    scores and inclusions, and the attack's operating points (FPR, TPR) over all score thresholds."""

    config: AuditConfig
    bound: AuditBound
    epsilon_proven: float
    scores: np.ndarray
    included: np.ndarray
    fpr: np.ndarray
    tpr: np.ndarray
    seconds: float
    broken: Dict[str, Any]

    @property
    def epsilon_audit_lower(self) -> float:
        """ε_L: the mechanism's ε is ≥ this at the configured confidence (one run)."""
        return self.bound.epsilon

    def to_dict(self) -> Dict[str, Any]:
        """The ``--json`` record: ``epsilon_audit_lower``, ``epsilon_proven`` and the rest."""
        return {"epsilon_audit_lower": self.bound.epsilon, "epsilon_proven": self.epsilon_proven,
                "epsilon_proven_scope": "proven",
                "confidence": self.config.confidence, "guesses": self.bound.guesses, "correct": self.bound.correct,
                "k_plus": self.bound.k_plus, "k_minus": self.bound.k_minus, "guess_rules": self.bound.rules,
                "significance_each": self.bound.significance_each, "canaries_included": int(self.included.sum()),
                "operating_points": {"fpr": self.fpr.tolist(), "tpr": self.tpr.tolist()},
                "settings": dataclasses.asdict(self.config), "broken": self.broken, "seconds": self.seconds}


class BrokenGGDPOptimizer(GGDPOptimizer):
    """TEST-ONLY: a :class:`~opacus_gg.optimizers.GGDPOptimizer` broken on purpose, to check that the audit
    catches a broken engine. ``test_noise_scale`` multiplies the noise scale σC of every step (the accountant is
    still told σ); ``test_skip_clipping=True`` adds the per-sample gradients unclipped. Never use it to train."""

    def __init__(self, *args: Any, test_noise_scale: float = 1.0, test_skip_clipping: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._test_noise_scale = validate_positive(test_noise_scale, "test_noise_scale")
        self._test_skip_clipping = bool(test_skip_clipping)

    def _factors(self, grads):  # noqa: ANN001 - the synchronising path's clip factors
        factors = super()._factors(grads)
        return [torch.ones_like(f) for f in factors] if self._test_skip_clipping else factors

    def _factors_deferred(self, grads):  # noqa: ANN001 - the accelerator path's clip factors
        factors, redo = super()._factors_deferred(grads)
        return ([torch.ones_like(f) for f in factors] if self._test_skip_clipping else factors), redo

    def add_noise(self) -> None:
        sigma = self.noise_multiplier
        self.noise_multiplier = sigma * self._test_noise_scale
        try:
            super().add_noise()
        finally:
            self.noise_multiplier = sigma


def _canary_rows(cfg: AuditConfig, which: torch.Tensor) -> torch.Tensor:
    """The raw gradients g_i = a u_i of canaries ``which`` (a 1-D index tensor), as rows of length d."""
    k, value = cfg.canary_width, cfg.canary_scale * _canary_value(cfg)
    rows = torch.zeros((len(which), cfg.dim), dtype=torch.float32)
    cols = (which[:, None] * k + torch.arange(k)[None, :]).reshape(-1)
    rows[torch.arange(len(which)).repeat_interleave(k), cols] = value
    return rows


def run_canaries(cfg: AuditConfig, *, optimizer_class: Type[GGDPOptimizer] = GGDPOptimizer,
                 optimizer_kwargs: Optional[Dict[str, Any]] = None) -> Dict[str, np.ndarray]:
    """Train T steps with the canaries (module docstring) and return ``included`` (S_i = +1), ``updates``
    (U = θ_0 − θ_T, float64) and ``scores`` (``cfg.score``). Seeded: inclusion, sampling and noise come from
    ``cfg.seed``."""
    gen = torch.Generator().manual_seed(cfg.seed)
    noise_gen = torch.Generator().manual_seed(cfg.seed + 1)
    m = cfg.canaries
    included = torch.rand(m, generator=gen) < 0.5
    theta = torch.nn.Parameter(torch.zeros(cfg.dim, dtype=torch.float32))
    opt = optimizer_class(torch.optim.SGD([theta], lr=1.0), noise_multiplier=cfg.noise_multiplier,
                          max_grad_norm=cfg.max_grad_norm, expected_batch_size=max(1, round(cfg.sample_rate * m / 2)),
                          loss_reduction="sum", generator=noise_gen, beta=cfg.beta, clip_norm_p=cfg.clip_norm_p,
                          **(optimizer_kwargs or {}))
    members = torch.nonzero(included).reshape(-1)
    llr = np.zeros(m)
    for _ in range(cfg.steps):
        sampled = members[torch.rand(len(members), generator=gen) < cfg.sample_rate]
        theta.grad_sample = _canary_rows(cfg, sampled)
        opt.step()
        if cfg.score == "likelihood":
            llr += _step_log_likelihood_ratio(cfg, theta.grad.detach()[: m * cfg.canary_width])
        opt.zero_grad()
    updates = -theta.detach().to(torch.float64).numpy()
    if not np.all(np.isfinite(updates)):
        raise FloatingPointError("the audit run's parameters are not finite")
    scores = canary_scores(cfg, updates) if cfg.score == "inner" else llr
    if not np.all(np.isfinite(scores)):
        raise FloatingPointError(f"the audit's {cfg.score} scores are not finite")
    return {"included": included.numpy(), "updates": updates, "scores": scores}


def _canary_value(cfg: AuditConfig) -> float:
    """μ = C k^{−1/p}: each coordinate of a canary clipped to norm C (k^0 = 1 for p = ∞)."""
    return cfg.max_grad_norm * (1.0 if math.isinf(cfg.clip_norm_p) else cfg.canary_width ** (-1.0 / cfg.clip_norm_p))


def _step_log_likelihood_ratio(cfg: AuditConfig, step: torch.Tensor) -> np.ndarray:
    """log(1 − q + q e^{ℓ_i}) per canary for one step's noisy update ``step`` on the canary blocks (module
    docstring); ℓ_i in float64, the mixture by ``logaddexp`` (no overflow for large ℓ)."""
    y = step.to(torch.float64).numpy().reshape(cfg.canaries, cfg.canary_width)
    beta, s = cfg.beta, cfg.noise_multiplier * cfg.max_grad_norm
    ell = ((np.abs(y) ** beta - np.abs(y - _canary_value(cfg)) ** beta) / (beta * s ** beta)).sum(axis=1)
    q = cfg.sample_rate
    return ell if q == 1.0 else np.logaddexp(math.log1p(-q), math.log(q) + ell)


def canary_scores(cfg: AuditConfig, updates: np.ndarray) -> np.ndarray:
    """s_i = ⟨u_i, U⟩ = k^{−1/p} Σ_{j ∈ B_i} U_j (the canary direction's inner product with the summed updates)."""
    k, p = cfg.canary_width, cfg.clip_norm_p
    blocks = np.asarray(updates[: cfg.canaries * k], dtype=float).reshape(cfg.canaries, k)
    return blocks.sum(axis=1) * (1.0 if math.isinf(p) else k ** (-1.0 / p))


def roc_points(scores: np.ndarray, included: np.ndarray) -> Dict[str, np.ndarray]:
    """The attack "included iff score ≥ t" at every threshold t: FPR = P̂[s ≥ t | out], TPR = P̂[s ≥ t | in], from
    (0, 0) to (1, 1), one point per distinct score (the empirical ROC, no confidence attached)."""
    s, inc = np.asarray(scores, dtype=float), np.asarray(included, dtype=bool)
    if inc.all() or not inc.any():
        raise ValueError("the ROC needs both included and excluded canaries")
    order = np.argsort(-s, kind="stable")
    s, inc = s[order], inc[order]
    last = np.r_[s[1:] != s[:-1], True]  # the last index of each run of equal scores
    tp, fp = np.cumsum(inc)[last], np.cumsum(~inc)[last]
    return {"fpr": np.r_[0.0, fp / (~inc).sum()], "tpr": np.r_[0.0, tp / inc.sum()]}


def proven_epsilon(cfg: AuditConfig) -> float:
    """The proven ε(δ) of the audited mechanism: T steps of the Poisson-subsampled GG mechanism (σ, q, β) over the
    ℓp ball of radius C in d dimensions, each canary being one example (:func:`~opacus_gg.accountants.api.
    proven_epsilon_history`, the number ``GGPrivacyEngine.get_epsilon`` publishes)."""
    from ..accountants.api import proven_epsilon_history

    return float(proven_epsilon_history([_history_entry(cfg)], cfg.delta))


def _history_entry(cfg: AuditConfig) -> Tuple[float, float, int, float, int, float]:
    """The audited mechanism as one history entry (σ, q, T, β, d, p) of the accountant."""
    return (cfg.noise_multiplier, cfg.sample_rate, cfg.steps, cfg.beta, cfg.dim, cfg.clip_norm_p)


def proven_tradeoff(cfg: AuditConfig) -> TradeoffReport:
    """The proven trade-off curve of the audited mechanism (:func:`~opacus_gg.accountants.tradeoff.
    compute_tradeoff_history` of the entry of :func:`proven_epsilon`, at δ): every attack on the canaries, the
    audit's included, has TPR ≤ its ``tpr_upper(FPR)`` at every FPR. Its ε is :func:`proven_epsilon`'s."""
    from ..accountants.tradeoff import compute_tradeoff_history

    return compute_tradeoff_history([_history_entry(cfg)], cfg.delta)


def audit(cfg: AuditConfig, *, optimizer_class: Type[GGDPOptimizer] = GGDPOptimizer,
          optimizer_kwargs: Optional[Dict[str, Any]] = None, epsilon_proven: Optional[float] = None) -> AuditResult:
    """Run the canaries (:func:`run_canaries`), bound ε from their scores (:func:`~.bound.audit_epsilon`) and
    compute the proven ε of the same setting (σ, q, T, δ, β, d, p: the accountant's published bound,
    :func:`~opacus_gg.accountants.api.proven_epsilon_history`; for input canaries ``engine.get_epsilon(δ)`` of the
    run's own engine), unless ``epsilon_proven`` (that number) is given."""
    t0 = time.perf_counter()
    if cfg.kind == "input":
        from .inputs import run_input_canaries

        run = run_input_canaries(cfg, optimizer_class=optimizer_class, optimizer_kwargs=optimizer_kwargs)
        epsilon_proven = run["epsilon_engine"] if epsilon_proven is None else epsilon_proven
    else:
        run = run_canaries(cfg, optimizer_class=optimizer_class, optimizer_kwargs=optimizer_kwargs)
    scores = run["scores"]
    bound = audit_epsilon(scores, run["included"], cfg.delta, cfg.confidence)
    roc = roc_points(scores, run["included"])
    if epsilon_proven is None:
        epsilon_proven = proven_epsilon(cfg)
    broken = {k: v for k, v in (optimizer_kwargs or {}).items() if k.startswith("test_")}
    return AuditResult(config=cfg, bound=bound, epsilon_proven=float(epsilon_proven), scores=scores,
                       included=run["included"], fpr=roc["fpr"], tpr=roc["tpr"],
                       seconds=time.perf_counter() - t0, broken=broken)
