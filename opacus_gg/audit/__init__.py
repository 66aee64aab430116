r"""Privacy auditing: a one-run empirical lower bound on ε beside the proven upper bound.

:mod:`.bound` turns the guesses of a membership attack on m canaries (each included with probability ½) into an
ε lower bound at a given confidence (Steinke, Nasr & Jagielski 2023, Theorem 5.2); :mod:`.canaries` runs white-box
gradient canaries through the β-DP-SGD optimizer and scores them, :mod:`.inputs` the same canaries as training
examples through ``GGPrivacyEngine.make_private``; :mod:`opacus_gg.experiments.figures.audit` draws the attack's
operating points under the proven trade-off curve of the same setting (:func:`.canaries.proven_tradeoff`).
docs/audit.md explains what the numbers mean.
"""

from .bound import AuditBound, audit_epsilon, epsilon_lower_bound, p_value
from .canaries import AuditConfig, AuditResult, audit

__all__ = ["AuditBound", "AuditConfig", "AuditResult", "audit", "audit_epsilon", "epsilon_lower_bound", "p_value"]
