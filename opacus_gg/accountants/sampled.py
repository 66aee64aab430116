r"""The GG paper's "Sampled PRV" accountant (Appendix B.3), for reproducing the paper — NOT a guarantee.

Paper mode accounts one coordinate ("one-hot" shift, the paper's dimension-independence claim, which is
false for β ≠ 2: see ``../shared/notes/worst_case_direction.md``) in the *remove* direction, with the
privacy-loss CDF replaced by a Monte Carlo empirical CDF. Units: noise GG(β, 1), density ∝ exp(-|x|^β/β),
sensitivity a = 1/σ (σ = noise_multiplier).

One step, no subsampling: ℓ(x) = log f(x-a)/f(x) = (|x|^β - |x-a|^β)/β. Under P (x = a + z, z ~ GG(0, 1))
ℓ_P = (|z+a|^β - |z|^β)/β; under Q, ℓ has the law of -ℓ_P (substitute z → -z). Poisson subsampling with
rate q (remove direction, P_q = (1-q)Q + qP against Q) gives the PRV

    Y = log(1 - q + q e^{ℓ}),   F_Y(t) = (1-q)·Pr[-ℓ_P ≤ g(t)] + q·Pr[ℓ_P ≤ g(t)],   g(t) = log((e^t - 1 + q)/q),

so n samples of ℓ_P give an empirical Y with 2n weighted atoms (weights (1-q)/n and q/n). Its domain is
sized from the samples (Chernoff bounds with the empirical cumulant generating function), never from the
Gaussian; it is composed with Opacus's ``discretize``/``compose_heterogeneous``/``DiscretePRV``. Samples are
cached keyed by every parameter that defines them (σ, q, β, n, seed) — the paper code's stale-cache fault
is not reproduced.

Error reporting (see ``docs/paper_mode_and_cli.md``): the Monte Carlo spread (independent replicates and
the sensitivity to the few largest losses), the
paper's Theorem 6 terms (both published versions, with why they are unusable), and a correct
high-probability bracket from the Dvoretzky–Kiefer–Wolfowitz–Massart inequality.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from opacus.accountants.analysis.prv import DiscretePRV, Domain, compose_heterogeneous, discretize
from scipy.fft import next_fast_len
from scipy.special import logsumexp

from ..distribution import sample as gg_sample
from ..validation import (
    validate_beta,
    validate_delta,
    validate_positive,
    validate_positive_int,
    validate_sample_rate,
)

__all__ = [
    "PAPER_LABEL",
    "EmpiricalPRV",
    "one_hot_loss_samples",
    "sampled_prv",
    "dkw_radius",
    "sampled_compose_epsilon",
    "paper_theorem6_terms",
    "sampled_epsilon_details",
    "paper_epsilon_report",
]

PAPER_LABEL = "paper mode (one-hot, sampled PRV): NOT a privacy guarantee for beta != 2"
PAPER_LABEL_BETA2 = "paper mode (one-hot, sampled PRV): a Monte Carlo estimate at beta = 2, NOT a certified guarantee"
DEFAULT_N_SAMPLES = 1_000_000


# ------------------------------------------------------------------------------------------ the empirical PRV
@dataclass(frozen=True)
class EmpiricalPRV:
    r"""A discrete privacy random variable given by sorted atoms ``values`` with probabilities ``weights``.

    cdf(t) = Σ_{v_j ≤ t} w_j (right-continuous, non-decreasing); mean() = Σ_j w_j v_j. This is the interface
    Opacus's ``discretize`` needs. ``truncated(t_min, t_max)`` keeps the atoms in [t_min, t_max] and
    renormalizes (Gopi et al.'s truncation).
    """

    values: np.ndarray
    weights: np.ndarray

    @functools.cached_property
    def _cum(self) -> np.ndarray:
        return np.cumsum(self.weights)

    def cdf(self, t) -> np.ndarray:
        """F(t) = Σ_{v_j ≤ t} w_j."""
        idx = np.searchsorted(self.values, np.asarray(t, dtype=np.float64), side="right")
        cum = np.concatenate([[0.0], self._cum])
        return np.minimum(cum[idx], 1.0)

    def mean(self) -> float:
        """E[Y] = Σ_j w_j v_j."""
        return float(np.dot(self.values, self.weights))

    def std(self) -> float:
        """sd(Y) = (Σ_j w_j (v_j - E Y)²)^{1/2}."""
        m = self.mean()
        return float(math.sqrt(max(np.dot(self.weights, (self.values - m) ** 2), 0.0)))

    def log_mgf(self, lam: np.ndarray, bins: int = 4096) -> np.ndarray:
        """An upper bound on K(λ) = log Σ_j w_j e^{λ v_j} for each λ in ``lam``.

        Atoms are binned on ``bins`` equal cells and moved to the cell edge that increases e^{λv}
        (right edge for λ > 0, left edge for λ < 0), so the Chernoff bounds built on it stay valid.
        """
        lam = np.atleast_1d(np.asarray(lam, dtype=np.float64))
        v0, v1 = float(self.values[0]), float(self.values[-1])
        if v1 - v0 <= 0:
            return lam * v0
        edges = np.linspace(v0, v1, bins + 1)
        cum = np.concatenate([[0.0], self._cum])
        mass = np.diff(cum[np.searchsorted(self.values, edges, side="right")])
        mass[0] += float(self.cdf(v0))  # atoms sitting exactly on the first edge
        with np.errstate(divide="ignore"):
            logw = np.log(np.maximum(mass, 0.0))
        right, left = edges[1:], edges[:-1]
        return np.array([logsumexp(l * (right if l > 0 else left) + logw) for l in lam])

    def delta(self, epsilon: float) -> float:
        """δ(ε) = E[(1 - e^{ε - Y})_+] of this discrete PRV."""
        m = self.values > epsilon
        return float(np.dot(self.weights[m], -np.expm1(epsilon - self.values[m])))

    def truncated(self, t_min: float, t_max: float) -> "EmpiricalPRV":
        """Atoms in [t_min, t_max], renormalized to total mass 1."""
        lo = np.searchsorted(self.values, t_min, side="left")
        hi = np.searchsorted(self.values, t_max, side="right")
        w = self.weights[lo:hi]
        if w.sum() <= 0:
            raise ValueError("truncation removed all the mass of the sampled PRV")
        return EmpiricalPRV(self.values[lo:hi], w / w.sum())

    def trimmed(self, mass: float, side: str) -> "EmpiricalPRV":
        """Remove the lowest (``side="low"``) or highest (``"high"``) ``mass`` of probability, renormalize.

        Used for the DKW envelopes: F⁺ = max(F_n - r, 0) is "trim the low r, put r at +∞";
        F⁻ = min(F_n + r, 1) is "trim the high r, put r at -∞".
        """
        if not (0.0 <= mass < 1.0):
            raise ValueError(f"mass must be in [0, 1), got {mass}")
        v, w = self.values, self.weights.copy()
        if side == "high":
            v, w = v[::-1], w[::-1]
        elif side != "low":
            raise ValueError(f"side must be 'low' or 'high', got {side!r}")
        cum = np.cumsum(w)
        k = int(np.searchsorted(cum, mass, side="right"))  # atoms 0..k-1 removed whole
        removed = cum[k - 1] if k > 0 else 0.0
        w = w[k:].copy()
        v = v[k:]
        w[0] -= mass - removed  # partial removal of the boundary atom
        if side == "high":
            v, w = v[::-1], w[::-1]
        keep = w > 0
        v, w = v[keep], w[keep]
        return EmpiricalPRV(np.ascontiguousarray(v), np.ascontiguousarray(w / w.sum()))


# ---------------------------------------------------------------------------------------------- sampling
@functools.lru_cache(maxsize=16)
def _loss_samples_cached(noise_multiplier: float, beta: float, n_samples: int, seed: int) -> np.ndarray:
    loss = _draw_losses(noise_multiplier, beta, n_samples, seed)
    loss.setflags(write=False)
    return loss


def one_hot_loss_samples(noise_multiplier: float, beta: float, n_samples: int = DEFAULT_N_SAMPLES,
                         seed: int = 0) -> np.ndarray:
    r"""n sorted samples of the one-hot, non-subsampled privacy loss under P.

    ℓ_P = (|z + a|^β - |z|^β)/β, z ~ GG(β, 1) (``opacus_gg.distribution.sample`` with a torch generator seeded
    by ``seed``), a = 1/noise_multiplier. Read-only array; cached on (σ, β, n, seed).
    """
    return _loss_samples_cached(
        validate_positive(noise_multiplier, "noise_multiplier"),
        validate_beta(beta),
        validate_positive_int(n_samples, "n_samples", minimum=1000),
        int(seed),
    )


def _prv_from_losses(loss: np.ndarray, sample_rate: float, weights: Optional[np.ndarray] = None) -> EmpiricalPRV:
    """Atoms of Y = log(1-q+q e^ℓ): ℓ = ℓ_P with weight q·w_i and ℓ = -ℓ_P with weight (1-q)·w_i (Σ w_i = 1).

    ``loss`` is sorted; ``weights`` (default uniform 1/n) are per-sample, renormalized.
    """
    q = sample_rate
    n = loss.size
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=np.float64) / np.sum(weights)
    if q == 1.0:
        keep = w > 0
        return EmpiricalPRV(np.ascontiguousarray(loss[keep], dtype=np.float64), np.ascontiguousarray(w[keep]))
    log1mq, logq = math.log1p(-q), math.log(q)
    y_p = np.logaddexp(log1mq, logq + loss)  # sorted increasing
    y_q = np.logaddexp(log1mq, logq - loss[::-1])  # sorted increasing
    values = np.concatenate([y_p, y_q])
    weights_all = np.concatenate([q * w, (1.0 - q) * w[::-1]])
    keep = weights_all > 0
    values, weights_all = values[keep], weights_all[keep]
    order = np.argsort(values, kind="mergesort")
    return EmpiricalPRV(values[order], weights_all[order])


def sampled_prv(noise_multiplier: float, sample_rate: float, beta: float,
                n_samples: int = DEFAULT_N_SAMPLES, seed: int = 0) -> EmpiricalPRV:
    r"""The paper's sampled PRV of one Poisson-subsampled GG step (remove direction, one-hot).

    Y = log(1 - q + q e^{ℓ}) with ℓ ~ ℓ_P w.p. q and ℓ ~ -ℓ_P w.p. 1-q, as an empirical distribution of 2n atoms.
    """
    loss = one_hot_loss_samples(noise_multiplier, beta, n_samples, seed)
    return _prv_from_losses(loss, validate_sample_rate(sample_rate))


# ------------------------------------------------------------------------------------- domain and compose
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


def _domain_for(prvs: Sequence[EmpiricalPRV], steps: Sequence[int], eps_error: float,
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
    m = int(math.ceil(L / mesh))
    size = next_fast_len(2 * m + 2, real=True)
    while size % 2:
        size = next_fast_len(size + 1, real=True)
    m = (size - 2) // 2
    return Domain(-m * mesh, (m + 1) * mesh, size)


def _compose(prvs: Sequence[EmpiricalPRV], steps: Sequence[int], domain: Domain) -> DiscretePRV:
    dprvs = [discretize(p.truncated(domain.t_min, domain.t_max), domain) for p in prvs]
    return compose_heterogeneous(dprvs=dprvs, num_self_compositions=list(steps))


def _eps(dprv: DiscretePRV, delta: float, delta_error: float, eps_error: float) -> Tuple[float, float, float]:
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


def _normalize_history(history: Sequence[tuple]) -> List[Tuple[float, float, int, float]]:
    if not history:
        raise ValueError("history must contain at least one (noise_multiplier, sample_rate, steps, ...) entry")
    out = []
    for entry in history:
        if len(entry) < 3:
            raise ValueError(f"history entries are (noise_multiplier, sample_rate, steps[, beta, dim, p]), got {entry!r}")
        beta = entry[3] if len(entry) > 3 and entry[3] is not None else 2.0
        out.append((
            validate_positive(entry[0], "noise_multiplier"),
            validate_sample_rate(entry[1]),
            validate_positive_int(entry[2], "steps"),
            validate_beta(beta),
        ))
    return out


def sampled_compose_epsilon(history: Sequence[tuple], delta: float, *, eps_error: float = 0.01,
                            delta_error: Optional[float] = None, n_samples: int = DEFAULT_N_SAMPLES,
                            seed: int = 0) -> Dict[str, float]:
    r"""ε(δ) of the composed sampled PRVs (the paper's SampledComposePRV), remove direction, one-hot.

    Returns ``{"lower", "estimate", "upper"}``: the discretization bracket of Gopi et al. for the *empirical*
    distributions (ε_est ∓ ε_err at δ ± δ_err). These do NOT include the Monte Carlo error.
    history entries: (noise_multiplier, sample_rate, steps, beta[, dim, clip_norm_p]); dim/p ignored.
    """
    delta = validate_delta(delta)
    hist = _normalize_history(history)
    delta_error = delta / 1000.0 if delta_error is None else validate_delta(delta_error, "delta_error")
    if not (eps_error > 0):
        raise ValueError(f"eps_error must be > 0, got {eps_error!r}")
    prvs = [sampled_prv(s, q, b, n_samples, seed) for s, q, _, b in hist]
    steps = [t for _, _, t, _ in hist]
    domain = _domain_for(prvs, steps, eps_error, delta_error)
    lo, est, up = _eps(_compose(prvs, steps, domain), delta, delta_error, eps_error)
    return {"lower": lo, "estimate": est, "upper": up, "domain_L": float(domain.t_max),
            "mesh": float(domain.dt)}


# ---------------------------------------------------------------------------------- error terms (Thm 6)
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


def _dkw_bracket(prvs: Sequence[EmpiricalPRV], steps: Sequence[int], n: int, delta: float, eps_error: float,
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
        dom = _domain_for(lo, steps, eps_error, min(delta_error, d_lo / 1000.0))
        out["dkw_epsilon_lower"] = _eps(_compose(lo, steps, dom), delta / keep, min(delta_error, d_lo / 1000.0),
                                        eps_error)[0]
    else:
        out["dkw_epsilon_lower"] = 0.0
    target = (delta - slack) / keep
    if slack < delta:
        de = min(delta_error, target / 1000.0)
        dom = _domain_for(hi, steps, eps_error, de)
        out["dkw_epsilon_upper"] = _eps(_compose(hi, steps, dom), target, de, eps_error)[2]
    else:
        out["dkw_epsilon_upper"] = float("inf")
        out["dkw_samples_needed"] = K * K * math.log(2.0 / failure_prob) / (2.0 * delta * delta)
    return out


# ------------------------------------------------------------------------------------------------ report
def sampled_epsilon_details(history: Sequence[tuple], delta: float, *, eps_error: float = 0.01,
                            delta_error: Optional[float] = None, n_samples: int = DEFAULT_N_SAMPLES,
                            seed: int = 0, n_replicates: int = 8, mc_z: float = 3.0, tail_count: int = 10,
                            dkw_failure_prob: float = 1e-6) -> Dict[str, object]:
    r"""Everything paper mode reports, as a dict.

    ``epsilon`` = the paper's number: upper end of the discretization bracket of the composed sampled PRV.
    Monte Carlo error (estimated, not bounded):
      ``mc_std_error`` = sd(ε_r) over R independent full-size replicates (seeds derived from ``seed``);
      ``tail_sensitivity_lower/upper`` = ε estimate with the ``tail_count`` largest losses removed / doubled
      (the estimator is dominated by a few extreme samples when β > 2 and δ is small).
    ``epsilon_lower``/``epsilon_upper`` = [min(ε_lo, ε_tail⁻ - ε_err) - z·sd, max(ε_up, ε_tail⁺ + ε_err) + z·sd]:
    statistical error bars, not bounds. Plus the Theorem 6 terms and the DKW bracket (module docstring).
    """
    delta = validate_delta(delta)
    hist = _normalize_history(history)
    n = validate_positive_int(n_samples, "n_samples", minimum=1000)
    delta_error = delta / 1000.0 if delta_error is None else validate_delta(delta_error, "delta_error")
    R = int(n_replicates)
    if R < 2:
        raise ValueError(f"n_replicates must be an integer >= 2, got {n_replicates!r}")
    if int(tail_count) < 1 or int(tail_count) > n // 100:
        raise ValueError(f"tail_count must be an integer in [1, n_samples/100], got {tail_count!r}")
    losses = [one_hot_loss_samples(s, b, n, seed) for s, _, _, b in hist]
    prvs = [_prv_from_losses(loss, q) for loss, (_, q, _, _) in zip(losses, hist)]
    steps = [t for _, _, t, _ in hist]
    domain = _domain_for(prvs, steps, eps_error, delta_error)

    def eps_of(ps):
        return _eps(_compose(ps, steps, domain), delta, delta_error, eps_error)

    lo, est, up = eps_of(prvs)
    # independent full-size replicates (not cached): the spread of the estimator at this n
    rep_eps = []
    for r in range(R):
        rseed = (int(seed) + 1) * 1_000_003 + 7919 * (r + 1)
        rprvs = [_prv_from_losses(_draw_losses(s, beta, n, rseed), q) for s, q, _, beta in hist]
        rep_eps.append(eps_of(rprvs)[1])
    rep_eps = np.asarray(rep_eps)
    sd = float(np.std(rep_eps, ddof=1)) if np.all(np.isfinite(rep_eps)) else float("inf")
    # tail sensitivity: the few largest losses removed / counted twice
    m = int(tail_count)
    t_lo = eps_of([_prv_from_losses(loss, q, _tail_weights(n, m, 0.0)) for loss, (_, q, _, _) in zip(losses, hist)])[1]
    t_hi = eps_of([_prv_from_losses(loss, q, _tail_weights(n, m, 2.0)) for loss, (_, q, _, _) in zip(losses, hist)])[1]

    K = int(sum(steps))
    details: Dict[str, object] = {
        "label": PAPER_LABEL if any(b != 2.0 for *_, b in hist) else PAPER_LABEL_BETA2,
        "n_samples": n, "seed": int(seed), "eps_error": eps_error, "delta_error": delta_error,
        "epsilon_discretization_lower": lo, "epsilon_discretization_estimate": est,
        "epsilon_discretization_upper": up,
        "mc_std_error": sd, "mc_replicates": R, "mc_replicate_estimates": rep_eps.tolist(), "mc_z": mc_z,
        "tail_count": m, "tail_sensitivity_lower": t_lo, "tail_sensitivity_upper": t_hi,
        "domain_L": float(domain.t_max), "mesh": float(domain.dt), "total_steps": K,
        "direction": "remove", "shape_k": 1,
    }
    details.update(paper_theorem6_terms(n_samples=n, steps=K, mesh=float(domain.dt), domain_L=float(domain.t_max),
                                        delta=delta, prv_std=max(p.std() for p in prvs)))
    details.update(_dkw_bracket(prvs, steps, n, delta, eps_error, delta_error, dkw_failure_prob))
    details["epsilon"] = up
    details["epsilon_lower"] = max(min(lo, t_lo - eps_error) - mc_z * sd, 0.0)
    details["epsilon_upper"] = max(up, t_hi + eps_error) + mc_z * sd
    details["epsilon_estimate"] = est
    return details


def _draw_losses(noise_multiplier: float, beta: float, n: int, seed: int) -> np.ndarray:
    """n sorted one-hot losses ℓ_P from an independent generator seeded by ``seed`` (not cached)."""
    gen = torch.Generator().manual_seed(int(seed))
    z = gg_sample((n,), beta, 1.0, generator=gen, dtype=torch.float64).numpy()
    a = 1.0 / noise_multiplier
    loss = (np.abs(z + a) ** beta - np.abs(z) ** beta) / beta
    loss.sort()
    return loss


def _tail_weights(n: int, m: int, w_top: float) -> np.ndarray:
    """Per-sample weights 1, with the m largest (last, samples sorted) set to ``w_top``."""
    w = np.ones(n)
    w[n - m:] = w_top
    return w


def paper_epsilon_report(history: Sequence[tuple], delta: float, *, eps_error: float = 0.01,
                         delta_error: Optional[float] = None, n_samples: int = DEFAULT_N_SAMPLES,
                         seed: int = 0, **kwargs):
    r"""Paper-mode ε as an :class:`opacus_gg.accountants.EpsilonReport` (``mode="paper"``, ``certified=False``).

    ε = the sampled-PRV composition's upper discretization bound (what the paper's code returns);
    epsilon_lower/upper = statistical error bars (replicate spread, tail sensitivity). Not a guarantee:
    one-hot accounting is wrong for β ≠ 2 and Monte Carlo error is only estimated (see ``details``).
    """
    from . import EpsilonReport  # lazy: the accountant package imports this module lazily too

    d = sampled_epsilon_details(history, delta, eps_error=eps_error, delta_error=delta_error,
                                n_samples=n_samples, seed=seed, **kwargs)
    if any(b != 2.0 for *_, b in _normalize_history(history)):
        warnings.warn(PAPER_LABEL, UserWarning, stacklevel=2)
    extra = {k: v for k, v in d.items() if k not in ("epsilon", "epsilon_lower", "epsilon_upper", "epsilon_estimate")}
    return EpsilonReport(epsilon=d["epsilon"], epsilon_lower=d["epsilon_lower"], epsilon_estimate=d["epsilon_estimate"],
                         epsilon_upper=d["epsilon_upper"], delta=float(delta), mode="paper", scope="estimate",
                         method="paper",
                         direction="remove", shape_k=1, details=extra)
