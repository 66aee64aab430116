r"""Paper mode's composition: domain sized from the samples (Chernoff), Opacus's discretize + compose.

Gopi et al.'s mesh h = ε_err / sqrt(T log(12/δ_err)/2) and half-width L from Chernoff bounds with the
empirical cumulant generating function (never from the Gaussian).
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from opacus.accountants.analysis.prv import DiscretePRV, Domain, compose_heterogeneous, discretize
from scipy.fft import next_fast_len

from ...validation import validate_delta, validate_delta_error, validate_positive
from ..history import DEFAULTS, parse_segment
from .prv import DEFAULT_N_SAMPLES, EmpiricalPRV, sampled_prv

__all__ = ["dkw_radius", "sampled_compose_epsilon", "domain_for", "compose", "epsilon_bracket", "paper_history"]


_LAMBDAS = np.geomspace(1e-2, 200.0, 40)


def _chernoff_tail(prvs: Sequence[EmpiricalPRV], steps: Sequence[int], log_target: float) -> float:
    r"""x with Pr[|Σ_i Σ_{steps_i} Y_i| ≥ x] ≤ 2·e^{log_target} by Chernoff, for the exact (discrete) PRVs.

    Upper tail: x = min_λ (Σ_i T_i K_i(λ) - log_target)/λ; lower tail with -λ. K_i is the empirical CGF.
    """
    out = 0.0
    for sign in (1.0, -1.0):
        total = np.zeros_like(_LAMBDAS)
        for prv, t in zip(prvs, steps):
            total += t * prv.log_mgf(sign * _LAMBDAS)
        x = (total - log_target) / _LAMBDAS
        out = max(out, float(np.min(x[np.isfinite(x)])))
    return out


#: largest number of grid points paper mode allocates (float64: 256 MiB per array, several arrays at once)
PAPER_GRID_MAX = 2 ** 25


def domain_for(prvs: Sequence[EmpiricalPRV], steps: Sequence[int], eps_error: float,
                delta_error: float) -> Domain:
    """Gopi et al.'s domain [-L, L] and mesh h = ε_err / sqrt(T log(12/δ_err)/2), L sized from the samples.

    L ≥ 2 + ε_err + the Chernoff half-width of the composition at δ_err/8 and of each single step at
    δ_err/(8T) (remark 5.6 of Gopi et al., with Chernoff bounds in place of the Gaussian RDP bound).
    """
    total = int(sum(steps))
    l_comp = _chernoff_tail(prvs, steps, math.log(delta_error / 8.0))
    l_single = max(_chernoff_tail([p], [1], math.log(delta_error / (8.0 * total))) for p in prvs)
    span = max(abs(float(p.values[0])) for p in prvs) + max(abs(float(p.values[-1])) for p in prvs)
    L = max(l_comp, l_single, eps_error) + 3.0
    L = min(L, max(3.0, total * span + 3.0))  # never wider than the exact support of the sum
    mesh = eps_error / math.sqrt(total * math.log(12.0 / delta_error) / 2.0)
    # pad to an FFT-friendly even length, keeping Opacus's layout [-m h, (m+1) h] (only widens the domain)
    m = math.ceil(L / mesh)
    if 2 * m + 2 > PAPER_GRID_MAX:
        raise ValueError(f"paper mode's PRV grid would need {2 * m + 2:.3g} points (> {PAPER_GRID_MAX:.3g}: more "
                         f"memory than a machine has) at steps={total}, eps_error={eps_error:g}: lower steps or "
                         "raise eps_error, or use mode='certified'")
    size = next_fast_len(2 * m + 2, real=True)
    while size % 2:
        size = next_fast_len(size + 1, real=True)
    m = (size - 2) // 2
    return Domain(-m * mesh, (m + 1) * mesh, size)


def compose(prvs: Sequence[EmpiricalPRV], steps: Sequence[int], domain: Domain) -> DiscretePRV:
    dprvs = [discretize(p.truncated(domain.t_min, domain.t_max), domain) for p in prvs]
    return compose_heterogeneous(dprvs=dprvs, num_self_compositions=list(steps))


def epsilon_bracket(dprv: DiscretePRV, delta: float, delta_error: float, eps_error: float) -> Tuple[float, float, float]:
    try:
        lo, est, up = dprv.compute_epsilon(delta, delta_error, eps_error)
    except RuntimeError:  # ε below the domain: δ(ε) < δ already at the bottom
        return (0.0, 0.0, float("inf"))
    return float(max(lo, 0.0)), float(max(est, 0.0)), float(max(up, 0.0))


def dkw_radius(n_samples: int, failure_prob: float) -> float:
    r"""Dvoretzky–Kiefer–Wolfowitz–Massart radius: Pr[sup_x |F_n(x) - F(x)| > r] ≤ 2e^{-2nr²} = γ,

    r = sqrt(log(2/γ) / (2n)).
    """
    validate_delta(failure_prob, "failure_prob")
    return math.sqrt(math.log(2.0 / failure_prob) / (2.0 * int(n_samples)))


def paper_history(history: Sequence[tuple]) -> List[Tuple[float, float, int, float]]:
    """Validated (σ, q, steps, β) per entry (:func:`..history.parse_segment`; dim and p are ignored)."""
    if not history:
        raise ValueError("history must contain at least one (noise_multiplier, sample_rate, steps, ...) entry")
    segs = [parse_segment(entry, (DEFAULTS[0], 1, DEFAULTS[2])) for entry in history]  # d unused: one-hot
    if any(s.noiseless for s in segs):
        raise ValueError("noise_multiplier must be > 0 in paper mode (noise_multiplier=0 gives epsilon=inf)")
    return [(s.noise_multiplier, s.sample_rate, s.steps, s.beta) for s in segs]


def sampled_compose_epsilon(history: Sequence[tuple], delta: float, *, eps_error: float = 0.01,
                            delta_error: Optional[float] = None, n_samples: int = DEFAULT_N_SAMPLES,
                            seed: int = 0) -> Dict[str, float]:
    r"""ε(δ) of the composed sampled PRVs (the paper's SampledComposePRV), remove direction, one-hot.

    Returns ``{"lower", "estimate", "upper"}``: the discretization bracket of Gopi et al. for the *empirical*
    distributions (ε_est ∓ ε_err at δ ± δ_err). These do NOT include the Monte Carlo error.
    history entries: (noise_multiplier, sample_rate, steps, beta[, dim, clip_norm_p]); dim/p ignored.
    """
    delta = validate_delta(delta)
    hist = paper_history(history)
    delta_error = validate_delta_error(delta_error, delta)
    eps_error = validate_positive(eps_error, "eps_error")
    prvs = [sampled_prv(s, q, b, n_samples, seed) for s, q, _, b in hist]
    steps = [t for _, _, t, _ in hist]
    domain = domain_for(prvs, steps, eps_error, delta_error)
    lo, est, up = epsilon_bracket(compose(prvs, steps, domain), delta, delta_error, eps_error)
    return {"lower": lo, "estimate": est, "upper": up, "domain_L": float(domain.t_max),
            "mesh": float(domain.dt)}
