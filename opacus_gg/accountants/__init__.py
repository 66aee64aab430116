"""Certified privacy accounting for the Poisson-subsampled Generalized Gaussian mechanism.

Public API (see docs/CONTRACT.md and docs/accounting.md): :class:`EpsilonReport`, :func:`compute_epsilon`,
:func:`compute_epsilon_history`, :func:`compute_delta`, :func:`get_noise_multiplier`,
:class:`GGPRVAccountant` (registered in Opacus's registry as ``"gg_prv"`` at import).
"""

from opacus.accountants.registry import register_accountant

from .api import compute_delta, compute_epsilon, compute_epsilon_history, get_noise_multiplier
from .gg_prv import GGPRVAccountant
from .report import EpsilonReport

register_accountant("gg_prv", GGPRVAccountant, force=True)

__all__ = [
    "EpsilonReport",
    "GGPRVAccountant",
    "compute_delta",
    "compute_epsilon",
    "compute_epsilon_history",
    "get_noise_multiplier",
]
