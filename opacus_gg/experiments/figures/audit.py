r"""The audit's figure: the attack's operating points (FPR, TPR) under the proven trade-off curve of its setting.

The curve is :func:`~opacus_gg.audit.canaries.proven_tradeoff` (the same σ, q, T, β, d, p and δ as the audit's
proven ε), drawn by :func:`~opacus_gg.experiments.figures.tradeoff.plot_tradeoff` with the Gaussian's curve at the
same (ε, δ) and the generic (ε, δ) bound; every membership test on the canaries has TPR ≤ the proven curve at its
FPR. The points are the empirical ROC of "included iff score ≥ t" over all thresholds t, with no confidence attached
(the confidence statement is ε_L's, :mod:`opacus_gg.audit.bound`); points with FPR or TPR 0 are off the log axes.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional, Union

from ...accountants.tradeoff import TradeoffReport
from ...formatting import fmt_down, fmt_up
from .tradeoff import Points, plot_tradeoff

__all__ = ["plot_audit"]


def _points(result: Any) -> Points:
    """One audit's operating points off the axes' zeros, labelled with its engine, canaries, score and ε_L."""
    cfg = result.config
    keep = (result.fpr > 0) & (result.tpr > 0)
    engine = ("BROKEN engine (" + ", ".join(f"{k[5:]} = {v}" for k, v in result.broken.items()) + ")"
              if result.broken else "honest engine")
    label = (f"audit, {engine}: {cfg.canaries} {cfg.kind} canaries,\n{cfg.score} score; "
             f"ε ≥ {fmt_down(result.epsilon_audit_lower, 3)} at {cfg.confidence:.0%} confidence")
    return result.fpr[keep], result.tpr[keep], label


def plot_audit(results: Any, path: Union[str, "os.PathLike[str]"], report: Optional[TradeoffReport] = None) -> str:
    """Write the figure of an :class:`~opacus_gg.audit.AuditResult` (or of a list of them, one mechanism: e.g. an
    honest and a broken engine) to ``path`` (PNG): their operating points on the proven trade-off curve ``report``
    (default :func:`~opacus_gg.audit.canaries.proven_tradeoff` of their config). Returns ``path``."""
    from ...audit.canaries import proven_tradeoff

    results = list(results) if isinstance(results, (list, tuple)) else [results]
    mechanism = [dataclasses.replace(r.config, canaries=0, canary_width=0, canary_scale=0, seed=0, confidence=0,
                                     score="", kind="") for r in results]
    if not results or any(m != mechanism[0] for m in mechanism):
        raise ValueError("results must be one or more audits of one mechanism (σ, q, T, β, p, d, δ, C)")
    cfg = results[0].config
    report = proven_tradeoff(cfg) if report is None else report
    title = (f"One-run audit (β={cfg.beta:g}, p={cfg.clip_norm_p:g}, σ={cfg.noise_multiplier:g}, "
             f"q={cfg.sample_rate:g}, T={cfg.steps}, d={cfg.dim})\nunder the proven curve: "
             f"ε ≤ {fmt_up(report.epsilon, 3)} at δ = {cfg.delta:g}")
    return plot_tradeoff(report, os.fspath(path), extra_points=[_points(r) for r in results], title=title)
