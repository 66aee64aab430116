r"""Paper mode's error terms: the paper's Theorem 6 (both versions, with why they are unusable) and a
correct high-probability bracket from the Dvoretzky–Kiefer–Wolfowitz–Massart inequality."""

from __future__ import annotations

import math
from typing import Dict, Optional, Sequence

from .compose import compose, dkw_radius, domain_for, epsilon_bracket
from .prv import EmpiricalPRV

__all__ = ["paper_theorem6_terms", "dkw_bracket"]


def paper_theorem6_terms(*, n_samples: int, steps: int, mesh: float, domain_L: float, delta: float,
                         prv_std: float, eta: Optional[float] = None) -> Dict[str, object]:
    r"""Evaluate the paper's Theorem 6 error terms, both published versions, and say whether they are usable.

    Conference version: failure probability δ' = 2e^{-2nh²}, ε shift a = h·sqrt(2k log(2/η)) + σ̄k/√n.
    Its proof is wrong: DKW bounds the Kolmogorov distance sup|F_n - F| ≤ h/2, which is not a coupling with
    |Y - Y_n| ≤ h (a Kolmogorov error moves probability mass anywhere), and δ' ≈ 2 for any usable mesh h.
    arXiv version: η ≥ 2k(t + sqrt(L/(nh))), τ ≥ s + 2kL·sqrt(L/(nh)); the δ-slack η alone exceeds δ unless
    n ≥ 4k²L/(hδ²), i.e. the bound is vacuous in practice. Returns the numbers and a verdict.
    """
    n, k, h, L = int(n_samples), int(steps), float(mesh), float(domain_L)
    eta = delta / 10.0 if eta is None else float(eta)
    conf_failure = min(1.0, 2.0 * math.exp(-2.0 * n * h * h))
    conf_shift = h * math.sqrt(2.0 * k * math.log(2.0 / eta)) + prv_std * k / math.sqrt(n)
    root = math.sqrt(L / (n * h))
    full_eta_min = 2.0 * k * root
    full_tau_min = 2.0 * k * L * root + 2.0 * k * root
    n_needed = 4.0 * k * k * L / (h * delta * delta)
    return {
        "thm6_conference_failure_prob": conf_failure,
        "thm6_conference_eps_shift": conf_shift,
        "thm6_conference_eta": eta,
        "thm6_conference_valid": False,
        "thm6_conference_note": ("DKW gives a Kolmogorov-distance bound, not the coupling |Y-Y_n| <= h the proof "
                                 "uses; and the failure probability 2exp(-2 n h^2) is ~1 for usable meshes"),
        "thm6_full_eta_lower_bound": full_eta_min,
        "thm6_full_tau_lower_bound": full_tau_min,
        "thm6_full_usable": bool(full_eta_min < delta),
        "thm6_full_samples_needed": n_needed,
        "thm6_full_note": ("the arXiv version's delta slack eta >= 2k sqrt(L/(n h)) exceeds delta unless "
                           "n >= 4 k^2 L / (h delta^2)"),
    }


def dkw_bracket(prvs: Sequence[EmpiricalPRV], steps: Sequence[int], n: int, delta: float, eps_error: float,
                 delta_error: float, failure_prob: float) -> Dict[str, object]:
    r"""Correct high-probability bracket on the one-hot remove-direction ε from the DKW band.

    On the DKW event (probability ≥ 1 - γ·#distinct steps), for each step F_n - r ≤ F ≤ F_n + r, so
    Y ≤_st Y⁺ (low r trimmed, r at +∞) and Y ≥_st Y⁻ (high r trimmed, r at -∞). δ(ε) = E(1-e^{ε-Y})_+ is
    monotone in the stochastic order, hence with K = Σ steps:
        (1-r)^K δ_{⊕Y⁻}(ε) ≤ δ(ε) ≤ 1 - (1-r)^K + (1-r)^K δ_{⊕Y⁺}(ε).
    The upper side exists only when 1 - (1-r)^K < δ, i.e. n ≳ K² log(2/γ) / (2δ²).
    """
    r = dkw_radius(n, failure_prob)
    K = int(sum(steps))
    keep = (1.0 - r) ** K
    slack = -math.expm1(K * math.log1p(-r))
    out: Dict[str, object] = {"dkw_radius": r, "dkw_failure_prob": min(1.0, failure_prob * len(prvs)),
                              "dkw_delta_slack": slack}
    hi = [p.trimmed(r, "low") for p in prvs]
    lo = [p.trimmed(r, "high") for p in prvs]
    # lower side: δ ≥ keep·δ⁻(ε) ⇒ ε(δ) ≥ ε⁻(δ/keep)
    if delta / keep < 1.0 - delta_error:
        d_lo = min(delta / keep, 0.5)
        dom = domain_for(lo, steps, eps_error, min(delta_error, d_lo / 1000.0))
        out["dkw_epsilon_lower"] = epsilon_bracket(compose(lo, steps, dom), delta / keep, min(delta_error, d_lo / 1000.0),
                                        eps_error)[0]
    else:
        out["dkw_epsilon_lower"] = 0.0
    target = (delta - slack) / keep
    if slack < delta:
        de = min(delta_error, target / 1000.0)
        dom = domain_for(hi, steps, eps_error, de)
        out["dkw_epsilon_upper"] = epsilon_bracket(compose(hi, steps, dom), target, de, eps_error)[2]
    else:
        out["dkw_epsilon_upper"] = float("inf")
        out["dkw_samples_needed"] = K * K * math.log(2.0 / failure_prob) / (2.0 * delta * delta)
    return out
