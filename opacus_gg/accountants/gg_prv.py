r"""``GGPRVAccountant``: Opacus accountant for Poisson-subsampled GG noise, registered as ``"gg_prv"``.

History entries are ``(noise_multiplier, sample_rate, steps, beta, dim, clip_norm_p)``, with
``count_noise_multiplier`` appended for steps that also release adaptive clipping's noisy count
(:mod:`.history`); equal consecutive steps are merged (like Opacus's ``PRVAccountant``). ``get_epsilon`` returns the proven upper bound of
:func:`opacus_gg.accountants.compute_epsilon_history` (computed alone, :func:`.api.proven_epsilon_history`) (max over add/remove adjacency and over every shift
in ``dim`` dimensions allowed by ℓ_{clip_norm_p} clipping); ``get_epsilon_report`` returns the same number in an
:class:`EpsilonReport`, and with ``diagnostics=True`` also the equal-spread ε where it is smaller
(``epsilon_equal_spreads``, worst case found by search, not proven) and the PRV's bracket;
``get_tradeoff`` the proven trade-off curve (the TPR bound of any membership-inference attack at every FPR).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import Callable, Optional

from opacus.accountants import IAccountant

from ..validation import validate_beta, validate_clip_norm_p, validate_dim
from .api import compute_epsilon_history, proven_epsilon_history, validate_ball_bound
from .history import OPACUS_GAUSSIAN_MECHANISMS, append_step, parse_segment, validate_accountant_state
from .report import EpsilonReport
from .tradeoff import MU_FPR_MIN, TradeoffReport, compute_tradeoff_history

__all__ = ["GGPRVAccountant"]


class GGPRVAccountant(IAccountant):
    """Certified PRV accountant for β-DP-SGD; defaults (β, d, p) apply to steps that do not give them.

    Used by the engine, every step carries the model's d (the optimizer hook). Used standalone, ``dim`` is
    required wherever ε depends on it (β ≠ 2 or p > 2, :func:`opacus_gg.validation.validate_dim`): a step
    without it raises ValueError saying why, rather than accounting d = 1 (the smallest ε of all)."""

    def __init__(self, beta: float = 2.0, dim: Optional[int] = None, clip_norm_p: Optional[float] = None, *,
                 ball_bound: str = "renyi") -> None:
        super().__init__()
        #: where the PRV covers equal spreads only: "renyi" (fast: the Rényi bound, or the dominating Gaussian's PRV
        #: where smaller) or "table" (tighter, 35 s–30 min per σ, once: kept on disk; :data:`.api.BALL_BOUNDS`). A
        #: setting of this accountant, not of the history: not saved.
        self.ball_bound = validate_ball_bound(ball_bound)
        self.beta = validate_beta(beta)
        self.clip_norm_p = None if clip_norm_p is None else validate_clip_norm_p(clip_norm_p, self.beta)
        #: False when the engine trains on shuffled fixed-size batches: reports are then scoped "shuffled"
        self.poisson_sampling = True
        self.dim = None if dim is None else validate_dim(dim, self.beta, self.clip_norm_p)

    @classmethod
    def mechanism(cls) -> str:
        """Registry key."""
        return "gg_prv"

    def _defaults(self):
        return (self.beta, self.dim, self.clip_norm_p)

    def step(self, *, noise_multiplier: float, sample_rate: float, beta: Optional[float] = None,
             dim: Optional[int] = None, clip_norm_p: Optional[float] = None,
             count_noise_multiplier: Optional[float] = None) -> None:
        """Record one step (validated; σ = 0 is recorded and gives ε = ∞); merges with the last entry when
        all parameters agree. ``count_noise_multiplier``: the step also released a noisy count (adaptive
        clipping), accounted as one more Gaussian coordinate of the step's pair."""
        entry = (noise_multiplier, sample_rate, 1, beta, dim, clip_norm_p, count_noise_multiplier)
        append_step(self.history, parse_segment(entry, self._defaults()))

    def get_epsilon_report(self, delta: float, *, eps_error: float = 0.01, delta_error: Optional[float] = None,
                           mode: str = "certified", diagnostics: bool = False,
                           progress: Optional[Callable[[str], None]] = None, **kwargs) -> EpsilonReport:
        """:class:`EpsilonReport` for the history (3-tuples use the accountant's defaults): the ``get_epsilon``
        number, at about its cost; ``diagnostics=True`` also composes the equal-spread PRV beside it (its
        bracket, worst direction and spread; seconds to a minute for β ≠ 2, d > 1; in ``mode="paper"`` the Monte
        Carlo error bars), as
        :func:`.api.compute_epsilon_history` describes, calling ``progress`` (e.g. ``print``) with a short text
        before each of those compositions. Other keywords (``n_samples``, ``seed``) go to paper mode; in certified
        mode they are ignored, as Opacus's ``get_epsilon(delta, **kwargs)`` ignores what it does not use."""
        hist = [self._complete(e) for e in self.history]
        paper = kwargs if mode == "paper" else {}
        report = compute_epsilon_history(hist, delta, mode=mode, eps_error=eps_error, delta_error=delta_error,
                                         ball_bound=self.ball_bound, diagnostics=diagnostics, progress=progress,
                                         **paper)
        if not self.poisson_sampling and report.scope != "estimate":  # the Poisson assumption does not hold
            report = dataclasses.replace(report, scope="shuffled")
        return report

    def _complete(self, entry):
        entry = tuple(entry)
        if len(entry) == 3:  # written by opacus.accountants.utils.get_noise_multiplier
            return entry + self._defaults()
        return entry

    def get_epsilon(self, delta: float, *, eps_error: float = 0.01, delta_error: Optional[float] = None,
                    **kwargs) -> float:
        """Proven upper bound on ε at δ (equal to ``get_epsilon_report(delta).epsilon``).

        Computes the proven number only (:func:`.api.proven_epsilon_history`): for β ≠ 2, d > 1, p < ∞ the
        Rényi bound over the ℓp ball (or, for β ≤ 2 where smaller, the dominating Gaussian's PRV), without the
        equal-spread PRV that the report prints beside it, so printing ε every few steps stays cheap. Empty
        history: 0 (as Opacus's ``RDPAccountant``). A σ = 0 step: ``math.inf`` with a UserWarning.
        """
        hist = [self._complete(e) for e in self.history]
        return proven_epsilon_history(hist, delta, eps_error=eps_error, delta_error=delta_error,
                                      ball_bound=self.ball_bound)

    def get_tradeoff(self, delta: float, *, eps_error: float = 0.01, delta_error: Optional[float] = None,
                     fpr_min: float = MU_FPR_MIN) -> TradeoffReport:
        """The proven trade-off curve of the history (:func:`.tradeoff.compute_tradeoff_history`): ``tpr_upper(fpr)``
        bounds the TPR of any membership-inference attack at each FPR, ``mu_gdp`` the μ-GDP it implies, with the
        proven ε at ``delta`` (``get_epsilon``'s number) beside it; scoped "shuffled" as the reports are."""
        hist = [self._complete(e) for e in self.history]
        rep = compute_tradeoff_history(hist, delta, eps_error=eps_error, delta_error=delta_error,
                                       ball_bound=self.ball_bound, fpr_min=fpr_min)
        return rep if self.poisson_sampling else dataclasses.replace(rep, scope="shuffled")

    def __len__(self) -> int:
        """Number of history entries (segments of identical steps), as Opacus's accountants define it;
        the number of steps is ``sum(entry[2] for entry in history)``."""
        return len(self.history)

    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable:
        """Hook reading σ, β, p, d (and adaptive clipping's ``count_noise_multiplier``) from the optimizer;
        q = sample_rate × accumulated_iterations."""

        def hook_fn(optim) -> None:
            self.step(
                noise_multiplier=optim.noise_multiplier,
                sample_rate=sample_rate * getattr(optim, "accumulated_iterations", 1),
                beta=getattr(optim, "beta", 2.0),
                dim=getattr(optim, "dim", 1),
                clip_norm_p=getattr(optim, "clip_norm_p", None),
                count_noise_multiplier=getattr(optim, "count_noise_multiplier", None),
            )

        return hook_fn

    def state_dict(self, destination=None):
        """History, mechanism and the defaults (β, d, p)."""
        destination = super().state_dict(destination if destination is not None else OrderedDict())
        destination["defaults"] = {"beta": self.beta, "dim": self.dim, "clip_norm_p": self.clip_norm_p}
        return destination

    def load_state_dict(self, state_dict) -> None:
        """Restore history and defaults (validated like Opacus's loader, and every entry as
        :func:`~.history.validate_accountant_state` checks it, before anything is changed). The state of Opacus's
        ``prv``, ``rdp`` or ``gdp`` accountant loads too: its ``(σ, q, steps)`` entries were Gaussian steps with ℓ2
        clipping, recorded as such (β = 2, d = 1, p = 2: ε does not depend on d there) whatever this accountant's
        defaults for later steps are."""
        validate_accountant_state(state_dict, self.mechanism())
        if state_dict["mechanism"] in OPACUS_GAUSSIAN_MECHANISMS:
            self.history = [(float(s), float(q), int(t), 2.0, 1, 2.0) for s, q, t in state_dict["history"]]
            return
        super().load_state_dict(state_dict)
        self.history = [tuple(e) for e in self.history]
        d = state_dict.get("defaults")
        if d is not None:
            poisson, ball = self.poisson_sampling, self.ball_bound  # properties of this run, not of the file
            self.__init__(d.get("beta", 2.0), d.get("dim"), d.get("clip_norm_p"), ball_bound=ball)
            self.poisson_sampling = poisson
            self.history = [tuple(e) for e in state_dict["history"]]
