r"""Paper mode's report: the sampled-PRV ε (one composition) and its Theorem 6 terms; on request
(``diagnostics=True``) its Monte Carlo spread, tail sensitivity and DKW bracket."""

from __future__ import annotations

import warnings
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np
from opacus.accountants.analysis.prv import Domain

from ...validation import validate_delta, validate_positive_int
from ..report import NOT_COMPUTED, EpsilonReport
from .compose import compose, domain_for, epsilon_bracket, paper_history
from .errors import dkw_bracket, paper_theorem6_terms
from .prv import DEFAULT_N_SAMPLES, EmpiricalPRV, draw_losses, one_hot_loss_samples, prv_from_losses

__all__ = ["PAPER_LABEL", "PAPER_LABEL_BETA2", "sampled_epsilon_details", "paper_epsilon_report"]

PAPER_LABEL = "paper mode (one-hot, sampled PRV): NOT a privacy guarantee for beta != 2"
PAPER_LABEL_BETA2 = "paper mode (one-hot, sampled PRV): a Monte Carlo estimate at beta = 2, NOT a certified guarantee"


def sampled_epsilon_details(history: Sequence[tuple], delta: float, *, eps_error: float = 0.01,
                            delta_error: Optional[float] = None, n_samples: int = DEFAULT_N_SAMPLES,
                            seed: int = 0, diagnostics: bool = False,
                            progress: Optional[Callable[[str], None]] = None, n_replicates: int = 8,
                            mc_z: float = 3.0, tail_count: int = 10,
                            dkw_failure_prob: float = 1e-6) -> Dict[str, object]:
    r"""Paper mode's numbers, as a dict: one composition by default, the error bars with ``diagnostics=True``.

    Always (one composition of the sampled PRVs, plus closed forms):
      ``epsilon`` = the paper's number: upper end of the discretization bracket of the composed sampled PRV;
      ``epsilon_estimate`` = that bracket's estimate; ``epsilon_discretization_lower/estimate/upper``, the
      domain, and the Theorem 6 terms (:func:`.errors.paper_theorem6_terms`, closed form).
    With ``diagnostics`` (up to R + 4 more compositions: R full-size replicates, 2 tail sensitivities, the DKW
    bracket's 2 sides; ``progress`` is called with a short text before each group), the Monte Carlo error
    (estimated, not bounded):
      ``mc_std_error`` = sd(ε_r) over R independent full-size replicates (seeds derived from ``seed``);
      ``tail_sensitivity_lower/upper`` = ε estimate with the ``tail_count`` largest losses removed / doubled
      (the estimator is dominated by a few extreme samples when β > 2 and δ is small);
      ``epsilon_lower``/``epsilon_upper`` =
      [min(ε_lo, ε_tail⁻ - ε_err) - z·sd, max(ε_up, ε_tail⁺ + ε_err) + z·sd]: statistical error bars,
      not bounds; and the DKW bracket (:func:`.errors.dkw_bracket`).
    Without it ``epsilon_lower``/``epsilon_upper`` are None and ``diagnostics`` holds :data:`..report.NOT_COMPUTED`;
    ``epsilon`` and ``epsilon_estimate`` are bit-identical either way (the same composition, computed first).
    """
    delta = validate_delta(delta)
    hist = paper_history(history)
    n = validate_positive_int(n_samples, "n_samples", minimum=1000)
    delta_error = delta / 1000.0 if delta_error is None else validate_delta(delta_error, "delta_error")
    R = int(n_replicates)
    if R < 2:
        raise ValueError(f"n_replicates must be an integer >= 2, got {n_replicates!r}")
    if int(tail_count) < 1 or int(tail_count) > n // 100:
        raise ValueError(f"tail_count must be an integer in [1, n_samples/100], got {tail_count!r}")
    losses = [one_hot_loss_samples(s, b, n, seed) for s, _, _, b in hist]
    prvs = [prv_from_losses(loss, q) for loss, (_, q, _, _) in zip(losses, hist)]
    steps = [t for _, _, t, _ in hist]
    domain = domain_for(prvs, steps, eps_error, delta_error)
    lo, est, up = epsilon_bracket(compose(prvs, steps, domain), delta, delta_error, eps_error)

    K = int(sum(steps))
    details: Dict[str, object] = {
        "label": PAPER_LABEL if any(b != 2.0 for *_, b in hist) else PAPER_LABEL_BETA2,
        "n_samples": n, "seed": int(seed), "eps_error": eps_error, "delta_error": delta_error,
        "epsilon_discretization_lower": lo, "epsilon_discretization_estimate": est,
        "epsilon_discretization_upper": up,
        "domain_L": float(domain.t_max), "mesh": float(domain.dt), "total_steps": K,
        "direction": "remove", "shape_k": 1,
    }
    # closed form (no composition): kept in the default report
    details.update(paper_theorem6_terms(n_samples=n, steps=K, mesh=float(domain.dt), domain_L=float(domain.t_max),
                                        delta=delta, prv_std=max(p.std() for p in prvs)))
    details["epsilon"] = up
    details["epsilon_estimate"] = est
    if not diagnostics:  # the error bars: on request (up to R + 4 compositions)
        details.update(epsilon_lower=None, epsilon_upper=None, diagnostics=NOT_COMPUTED)
        return details
    details.update(_error_bars(hist, losses, prvs, domain, delta, eps_error, delta_error, (lo, est, up), seed=seed,
                               n_replicates=R, mc_z=mc_z, tail_count=int(tail_count), progress=progress))
    if progress is not None:
        progress("DKW bracket (diagnostics): up to 2 compositions")
    details.update(dkw_bracket(prvs, steps, n, delta, eps_error, delta_error, dkw_failure_prob))
    return details


def _error_bars(hist: Sequence[tuple], losses: Sequence[np.ndarray], prvs: Sequence[EmpiricalPRV], domain: Domain,
                delta: float, eps_error: float, delta_error: float, bracket: Tuple[float, float, float], *,
                seed: int, n_replicates: int, mc_z: float, tail_count: int,
                progress: Optional[Callable[[str], None]]) -> Dict[str, object]:
    r"""The statistical error bars of :func:`sampled_epsilon_details` (its docstring) around ``bracket`` =
    (ε_lo, ε_est, ε_up) of the samples ``losses``: ``n_replicates`` full-size replicates and the two tail
    sensitivities, each composed on ``domain``."""
    steps = [t for _, _, t, _ in hist]
    n = len(losses[0])

    def eps_of(ps):
        return epsilon_bracket(compose(ps, steps, domain), delta, delta_error, eps_error)[1]

    if progress is not None:
        progress(f"Monte Carlo replicates (diagnostics): {n_replicates} compositions")
    # independent full-size replicates (not cached): the spread of the estimator at this n
    rep_eps = []
    for r in range(n_replicates):
        rseed = (int(seed) + 1) * 1_000_003 + 7919 * (r + 1)
        rprvs = [prv_from_losses(draw_losses(s, beta, n, rseed), q) for s, q, _, beta in hist]
        rep_eps.append(eps_of(rprvs))
    rep_eps = np.asarray(rep_eps)
    sd = float(np.std(rep_eps, ddof=1)) if np.all(np.isfinite(rep_eps)) else float("inf")
    if progress is not None:
        progress("tail sensitivity (diagnostics): 2 compositions")
    # tail sensitivity: the few largest losses removed / counted twice
    m = tail_count
    t_lo = eps_of([prv_from_losses(loss, q, _tail_weights(n, m, 0.0)) for loss, (_, q, _, _) in zip(losses, hist)])
    t_hi = eps_of([prv_from_losses(loss, q, _tail_weights(n, m, 2.0)) for loss, (_, q, _, _) in zip(losses, hist)])
    lo, _, up = bracket
    return {
        "mc_std_error": sd, "mc_replicates": n_replicates, "mc_replicate_estimates": rep_eps.tolist(), "mc_z": mc_z,
        "tail_count": m, "tail_sensitivity_lower": t_lo, "tail_sensitivity_upper": t_hi,
        "epsilon_lower": max(min(lo, t_lo - eps_error) - mc_z * sd, 0.0),
        "epsilon_upper": max(up, t_hi + eps_error) + mc_z * sd,
    }


def _tail_weights(n: int, m: int, w_top: float) -> np.ndarray:
    """Per-sample weights 1, with the m largest (last, samples sorted) set to ``w_top``."""
    w = np.ones(n)
    w[n - m:] = w_top
    return w


def paper_epsilon_report(history: Sequence[tuple], delta: float, *, eps_error: float = 0.01,
                         delta_error: Optional[float] = None, n_samples: int = DEFAULT_N_SAMPLES,
                         seed: int = 0, diagnostics: bool = False,
                         progress: Optional[Callable[[str], None]] = None, **kwargs) -> EpsilonReport:
    r"""Paper-mode ε as an :class:`opacus_gg.accountants.EpsilonReport` (``mode="paper"``, ``certified=False``).

    ε = the sampled-PRV composition's upper discretization bound (what the paper's code returns), with its
    estimate; by default that one composition is all that is computed (epsilon_lower/upper None,
    :meth:`~.EpsilonReport.prv_bracket` says "not computed"). ``diagnostics=True`` adds the statistical error
    bars epsilon_lower/upper (replicate spread, tail sensitivity) and the DKW bracket in ``details``
    (:func:`sampled_epsilon_details`; ε unchanged, bit for bit). Not a guarantee: one-hot accounting is wrong for
    β ≠ 2 and Monte Carlo error is only estimated.
    """
    d = sampled_epsilon_details(history, delta, eps_error=eps_error, delta_error=delta_error,
                                n_samples=n_samples, seed=seed, diagnostics=diagnostics, progress=progress, **kwargs)
    if any(b != 2.0 for *_, b in paper_history(history)):
        warnings.warn(PAPER_LABEL, UserWarning, stacklevel=2)
    extra = {k: v for k, v in d.items() if k not in ("epsilon", "epsilon_lower", "epsilon_upper", "epsilon_estimate")}
    return EpsilonReport(epsilon=d["epsilon"], epsilon_lower=d["epsilon_lower"], epsilon_estimate=d["epsilon_estimate"],
                         epsilon_upper=d["epsilon_upper"], delta=float(delta), mode="paper", scope="estimate",
                         method="paper",
                         direction="remove", shape_k=1, details=extra)
