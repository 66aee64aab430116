"""Certified privacy accounting for the Poisson-subsampled Generalized Gaussian mechanism.

Public API (see docs/CONTRACT.md and docs/accounting.md): :class:`EpsilonReport`, :func:`compute_epsilon`,
:func:`compute_epsilon_history`, :func:`compute_delta`, :func:`get_noise_multiplier`,
:class:`GGPRVAccountant` (registered in Opacus's registry as ``"gg_prv"`` at import).

Layout (one concept per file, as Opacus's ``accountants/analysis/prv/``): :mod:`.gg_pair` (the 1-D GG pair),
:mod:`.discrete` (discrete pairs, products, shape pairs), :mod:`.shapes` (candidate shapes, certification),
:mod:`.profile` (one-step privacy profile), :mod:`.discretization` (dominating PMF, grid),
:mod:`.composition` (ε and δ of a history), :mod:`.history` (segments), :mod:`.solver` (σ),
:mod:`.api` (public functions), :mod:`.paper` (paper mode), :mod:`.spreads` (every equal spread),
:mod:`.renyi` (per-coordinate Rényi moments), :mod:`.ball_rdp` (the proven Rényi bound over the ℓp ball),
:mod:`.low_orders` (its Rényi orders in (1, 2), above β = 2),
:mod:`.tradeoff` (the proven trade-off curve: the TPR bound of membership inference at every FPR).
"""

from opacus.accountants.registry import register_accountant

from .api import compute_delta, compute_epsilon, compute_epsilon_history
from .gg_prv import GGPRVAccountant
from .report import EpsilonReport
from .solver import get_noise_multiplier

register_accountant("gg_prv", GGPRVAccountant, force=True)

__all__ = [
    "EpsilonReport",
    "GGPRVAccountant",
    "compute_delta",
    "compute_epsilon",
    "compute_epsilon_history",
    "get_noise_multiplier",
]
