r"""The Poisson-subsampled 1-D GG mechanism as a ``prv_accountant`` privacy random variable (PRV).

Units: noise GG(β, 1) (density ∝ exp(−|x|^β/β)), sensitivity shift a = 1/noise_multiplier (one coordinate;
at β = 2 this is Opacus's N(0, σ²C²) with clip norm C). With P = GG at a, Q = GG at 0 and the
non-subsampled loss ℓ(x) = log P(x)/Q(x) (non-decreasing in x), the two Poisson-subsampled pairs are

    remove:  P' = (1−q)Q + qP,  Q' = Q:   Y = log(1 − q + q e^{ℓ(X)}),    X ~ P',
    add:     P' = Q,  Q' = (1−q)Q + qP:   Y = −log(1 − q + q e^{ℓ(X)}),   X ~ Q,

and the PRV is the law of Y. With u(t) = log(1 + (e^t − 1)/q) (the ℓ-value where Y = t, for t > log(1−q)),
x*(u) = sup{x : ℓ(x) ≤ u} and x₋(u) = inf{x : ℓ(x) ≥ u} (equal for β > 1; ``pairs.inverse_loss``),

    remove:  F(t) = P'(Y ≤ t) = (1−q) F_GG(x*(u(t))) + q F_GG(x*(u(t)) − a)     (0 for t ≤ log(1−q)),
    add:     F(t) = Q(Y ≤ t)  = 1 − F_GG(x₋(u(−t)))                             (1 for t ≥ −log(1−q)).

No Monte Carlo: F_GG is :func:`opacus_gg.distribution.cdf` (regularized incomplete gamma). At β = 1 the loss
ℓ is −a on x ≤ 0, 2x − a on (0, a), a on x ≥ a, so Y has atoms at both support ends
log(1 − q + q e^{∓a}) (remove; negated and swapped for add); F is the right-continuous CDF including them
and :meth:`GGPrivacyRandomVariable.atoms` lists them (``kinks``: where the numerical mean splits its integral).

``rdp(α)`` is an upper bound on the Rényi divergence D_α(P'‖Q') from :func:`.renyi.subsampled_rdp`
(remove: exact at integer orders; add: its Jensen/Taylor bound) at the order ⌈α⌉ (≥ 2): D_α is
non-decreasing in α, so this is ≥ the RDP at α. ``prv_accountant`` only uses it to size the domain, where
an upper bound is safe (a wider domain).

prv-accountant 0.2.0 (the release on PyPI) has a defect in ``PrivacyRandomVariableTruncated.mean``: the
breakpoints of its ``quad`` integration are the fixed list [t_min, ±1e-1 … ±1e-5, t_max], independent of the
domain, so on wide domains the integral is inaccurate and ``CellCentred.discretise`` raises
"Discrete mean differs from continuous mean significantly" (microsoft/prv_accountant issue #36, fixed upstream
by PR #38, which derives log-spaced breakpoints from t_min and t_max; Opacus 1.6 vendors the fixed version).
Its truncated ``cdf`` is also F(t)/m on [t_min, t_max) where the truncated law needs (F(t) − F(t_min))/m (as in
Opacus's vendored copy). :class:`TruncatedPRV` fixes both locally (the mean by error-controlled adaptive
cubature split at this PRV's support ends and kinks) and :class:`PRVAccountant` is
``prv_accountant.PRVAccountant`` using it; composition (``composers.Heterogeneous``), discretisation
(``discretisers.CellCentred``), the domain rule (``compute_safe_domain_size``, Theorem 5.5 mesh) and the error
bounds (``DiscretePrivacyRandomVariable.compute_epsilon``) are the package's own.
"""

from __future__ import annotations

import math
import warnings
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from prv_accountant import PRVAccountant as _UpstreamPRVAccountant
from prv_accountant import composers, discretisers
from prv_accountant.accountant import compute_safe_domain_size
from prv_accountant.domain import Domain
from prv_accountant.privacy_random_variables import PrivacyRandomVariable, PrivacyRandomVariableTruncated
from scipy import integrate

from .. import distribution
from .renyi import subsampled_rdp
from ..validation import (
    shift_radius,
    validate_beta,
    validate_delta,
    validate_noise_multiplier,
    validate_order,
    validate_positive,
    validate_positive_int,
    validate_sample_rate,
)
from .gg_pair import inverse_loss

__all__ = ["DIRECTIONS", "GGPrivacyRandomVariable", "TruncatedPRV", "PRVAccountant", "prv_accountant_epsilon"]

DIRECTIONS = ("remove", "add")


class GGPrivacyRandomVariable(PrivacyRandomVariable):
    r"""PRV Y of one Poisson-subsampled GG step, one coordinate (laws in the module docstring).

    ``cdf``/``sf``/``probability`` are vectorised and exact up to floating point; ``rdp`` is an upper bound.
    Both adjacency directions are supported (``direction="remove"`` is the one Opacus and prv-accountant's
    Gaussian PRV use; the add direction can be larger for β ≠ 2, so an ε for a guarantee takes the max).
    """

    def __init__(self, noise_multiplier: float, sample_rate: float, beta: float = 2.0,
                 direction: str = "remove") -> None:
        sigma = validate_noise_multiplier(noise_multiplier)
        if sigma == 0:
            raise ValueError("noise_multiplier must be > 0 for a privacy random variable (0 gives epsilon=inf)")
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        self.noise_multiplier = sigma
        self.sample_rate = validate_sample_rate(sample_rate)
        self.beta = validate_beta(beta)
        self.direction = direction
        self.a = shift_radius(sigma)
        q = self.sample_rate
        self._log1mq = math.log1p(-q) if q < 1.0 else -math.inf
        self._rdp_cache: Dict[int, float] = {}

    # -- support and atoms -------------------------------------------------------------------------
    def _y_of_loss(self, loss: float) -> float:
        """Y as a function of the non-subsampled loss ℓ: ±log(1 − q + q e^ℓ)."""
        q = self.sample_rate
        if loss > 0:  # ℓ + log(q + (1 − q)e^{−ℓ}): no overflow for large ℓ
            y = loss + math.log(q + (1.0 - q) * math.exp(-loss))
        else:
            y = math.log1p(q * math.expm1(loss))
        return y if self.direction == "remove" else -y

    def support(self) -> Tuple[float, float]:
        """(inf, sup) of the support of Y: finite at β = 1 (the atoms); log(1−q) resp. −log(1−q) otherwise."""
        if self.beta == 1.0:
            ends = sorted((self._y_of_loss(-self.a), self._y_of_loss(self.a)))
            return ends[0], ends[1]
        return (self._log1mq, math.inf) if self.direction == "remove" else (-math.inf, -self._log1mq)

    def atoms(self) -> List[float]:
        """Locations of point masses of Y: the two support ends at β = 1, none for β > 1."""
        return list(self.support()) if self.beta == 1.0 else []

    def kinks(self) -> List[float]:
        r"""Y at x = 0 and x = a (ℓ = ∓a^β/β), where ℓ is not smooth: atoms (β = 1), F'' singular (β < 2)."""
        ends = self.a ** self.beta / self.beta
        return sorted((self._y_of_loss(-ends), self._y_of_loss(ends)))

    # -- exact laws ------------------------------------------------------------------------------
    def _loss_level(self, t: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(u, valid): u = log(1 + (e^s − 1)/q) with s = t (remove) or −t (add), where s > log(1 − q)."""
        s = t if self.direction == "remove" else -t
        valid = s > self._log1mq
        with np.errstate(over="ignore"):
            r = np.expm1(np.where(valid, s, 0.0)) / self.sample_rate
        with np.errstate(divide="ignore"):  # q = 1, s → −∞: r = −1, u = −∞ (x* = −∞), exact
            return np.log1p(np.where(valid, r, 0.0)), valid

    def _inverse(self, u: np.ndarray) -> np.ndarray:
        """x*(u) (= x₋(u) for β > 1); at β = 1 clipped to [0, a] (ends handled by the support masks)."""
        if self.beta == 1.0:
            return np.clip(0.5 * (u + self.a), 0.0, self.a)
        return inverse_loss(u, self.a, self.beta)

    def cdf_sf(self, t) -> Tuple[np.ndarray, np.ndarray]:
        r"""(F(t), 1 − F(t)) = (P'(Y ≤ t), P'(Y > t)), each from its own GG tail (accurate in both tails)."""
        t = np.asarray(t, dtype=np.float64)
        u, valid = self._loss_level(t)
        x = self._inverse(u)
        q = self.sample_rate
        lo, hi = self.support()
        if self.direction == "remove":
            f = (1.0 - q) * distribution.cdf(x, self.beta, 1.0) + q * distribution.cdf(x - self.a, self.beta, 1.0)
            s = (1.0 - q) * distribution.sf(x, self.beta, 1.0) + q * distribution.sf(x - self.a, self.beta, 1.0)
            below, above = ~valid, np.zeros(t.shape, dtype=bool)
        else:
            f = distribution.sf(x, self.beta, 1.0)
            s = distribution.cdf(x, self.beta, 1.0)
            below, above = np.zeros(t.shape, dtype=bool), ~valid
        if self.beta == 1.0:
            below |= t < lo
            above |= t >= hi
        f = np.where(below, 0.0, np.where(above, 1.0, f))
        s = np.where(below, 1.0, np.where(above, 0.0, s))
        return f, s

    def cdf(self, t):
        r"""F(t) = P'(Y ≤ t) (module docstring), vectorised."""
        return self.cdf_sf(t)[0]

    def sf(self, t):
        r"""1 − F(t) = P'(Y > t), from the GG survival function (no cancellation in the upper tail)."""
        return self.cdf_sf(t)[1]

    def probability(self, a, b):
        r"""P'(a < Y ≤ b) = F(b) − F(a), or S(a) − S(b) where F(a) ≥ ½ (accurate in the upper tail)."""
        fa, sa = self.cdf_sf(a)
        fb, sb = self.cdf_sf(b)
        return np.maximum(np.where(fa >= 0.5, sa - sb, fb - fa), 0.0)

    def rdp(self, alpha: float) -> float:
        r"""Upper bound on D_α(P'‖Q'): :func:`.renyi.subsampled_rdp` at the integer order max(2, ⌈α⌉)."""
        alpha = float(alpha)
        if alpha == math.inf:
            return math.inf
        order = max(2, math.ceil(validate_order(alpha)))
        if order not in self._rdp_cache:
            r = subsampled_rdp([order], noise_multiplier=self.noise_multiplier, sample_rate=self.sample_rate,
                               beta=self.beta)[self.direction][0]
            self._rdp_cache[order] = float(r) if np.isfinite(r) else math.inf
        return self._rdp_cache[order]


class TruncatedPRV(PrivacyRandomVariableTruncated):
    r"""Y conditioned on t_min < Y ≤ t_max, with prv-accountant 0.2.0's two defects fixed (module docstring).

    CDF G(t) = (F(t) − F(t_min))/m, m = F(t_max) − F(t_min); mean E = t_max − ∫_{t_min}^{t_max} G(t) dt by
    scipy's adaptive, vectorised Gauss–Kronrod ``cubature`` (error-controlled, split at log-spaced points and at
    the PRV's support ends and kinks, where G jumps or is not smooth) in place of 0.2.0's fixed-breakpoint ``quad``.
    """

    #: absolute error allowed in ∫G (shared by its pieces; the round-off floor of F is ~1e-10). A mean error e
    #: shifts each discretised step by e, the N-fold composition by N·e: ≤ 1e-3 (a tenth of the default
    #: eps_error) for N ≤ 10^6 steps
    MEAN_ATOL = 1e-9

    def __init__(self, prv: PrivacyRandomVariable, t_min: float, t_max: float) -> None:
        super().__init__(prv, t_min, t_max)
        self._f_min = float(self.prv.cdf(np.float64(t_min)))

    def cdf(self, t):
        """G(t) (0 below t_min, 1 from t_max on)."""
        t = np.asarray(t, dtype=np.float64)
        inside = (self.prv.cdf(t) - self._f_min) / self.remaining_mass
        return np.where(t < self.t_min, 0.0, np.where(t < self.t_max, inside, 1.0))

    def mean(self) -> float:
        r"""E[Y | t_min < Y ≤ t_max] = t_max − ∫ G; RuntimeError if a piece's cubature does not converge.

        The integral is a sum of pieces split at 0, at ±10^{k/4} (k/4 from −6 up to the decades of t_min,
        t_max: upstream PR #38's idea) and at the PRV's support ends and kinks (atoms at β = 1): an adaptive rule
        whose nodes miss a narrow feature (e.g. a law concentrated on [log(1−q), 0] inside [t_min, 0]) reports
        convergence to a wrong value.
        """
        hi_exp = math.ceil(math.log10(max(abs(self.t_min), abs(self.t_max), 1e-6)))
        decades = np.logspace(-6, hi_exp, 4 * (hi_exp + 6) + 1)
        support = getattr(self.prv, "support", lambda: (-math.inf, math.inf))()
        kinks = getattr(self.prv, "kinks", lambda: [])()
        cuts = np.unique(np.concatenate([[0.0], decades, -decades, support, kinks]))
        edges = np.concatenate([[self.t_min], cuts[(cuts > self.t_min) & (cuts < self.t_max)], [self.t_max]])
        atol = self.MEAN_ATOL / (edges.size - 1)
        integral = 0.0
        for left, right in zip(edges[:-1], edges[1:]):
            res = integrate.cubature(lambda x: self.cdf(x[:, 0])[:, None], [left], [right], rtol=0.0, atol=atol,
                                     max_subdivisions=1000)
            if res.status != "converged":
                raise RuntimeError(f"mean of the truncated PRV: no convergence on [{left}, {right}] "
                                   f"(error estimate {res.error[0]:.3g} > {atol:.3g})")
            integral += float(res.estimate[0])
        return float(self.t_max - integral)


class PRVAccountant(_UpstreamPRVAccountant):
    r"""``prv_accountant.PRVAccountant`` with :class:`TruncatedPRV` in place of the defective 0.2.0 truncation.

    Same arguments and the same algorithm as upstream: domain half-width L from ``compute_safe_domain_size``
    (RDP, uses ``prv.rdp``) or ``eps_max``; mesh eps_error/√(N/2 · log(12/δ_error)) (Gopi et al. 2021,
    Thm 5.5, N = Σ max_self_compositions); cell-centred discretisation; Fourier/convolution-tree composition.
    """

    def __init__(self, prvs: Union[PrivacyRandomVariable, Sequence[PrivacyRandomVariable]], eps_error: float,
                 delta_error: float, max_self_compositions: Optional[Sequence[int]] = None,
                 eps_max: Optional[float] = None) -> None:
        if isinstance(prvs, PrivacyRandomVariable):
            prvs = [prvs]
            if max_self_compositions is not None:
                max_self_compositions = [max_self_compositions]
        prvs = list(prvs)
        if max_self_compositions is None:
            max_self_compositions = [1] * len(prvs)
        max_self_compositions = [validate_positive_int(n, "max_self_compositions") for n in max_self_compositions]
        if len(max_self_compositions) != len(prvs):
            raise ValueError("max_self_compositions must have one entry per PRV")
        self.eps_error = validate_positive(eps_error, "eps_error")
        self.delta_error = validate_delta(delta_error, "delta_error")
        self.prvs = prvs
        self.max_self_compositions = max_self_compositions
        if eps_max is not None:
            L = validate_positive(eps_max, "eps_max")
            warnings.warn(f"Assuming that true epsilon < {L} (as upstream); pass eps_max=None to size the domain "
                          "from the RDP bound instead.")
        else:
            L = compute_safe_domain_size(prvs, max_self_compositions, eps_error=self.eps_error,
                                         delta_error=self.delta_error)
        total = sum(max_self_compositions)
        mesh_size = self.eps_error / np.sqrt(total / 2 * np.log(12 / self.delta_error))
        domain = Domain.create_aligned(-L, L, mesh_size)
        tprvs = [TruncatedPRV(prv, domain.t_min(), domain.t_max()) for prv in prvs]
        dprvs = [discretisers.CellCentred().discretise(tprv, domain) for tprv in tprvs]
        self.domain = domain
        self.composer = composers.Heterogeneous(dprvs)


def prv_accountant_epsilon(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                           beta: float = 2.0, direction: str = "remove", eps_error: float = 0.01,
                           delta_error: Optional[float] = None) -> Tuple[float, float, float]:
    r"""(ε_lower, ε_estimate, ε_upper) of ``steps`` Poisson-subsampled 1-D GG steps from prv-accountant.

    ``direction`` ∈ {"remove", "add", "both"} ("both": the max over the two, componentwise). prv-accountant's
    bounds: ε_lower ≤ ε(δ) ≤ ε_upper with ε_upper − ε_lower ≈ 2·eps_error (δ_error defaults to δ/1000).
    """
    steps = validate_positive_int(steps, "steps")
    delta = validate_delta(delta)
    delta_error = delta / 1000.0 if delta_error is None else float(delta_error)
    if not 0 < delta_error < delta:
        raise ValueError(f"delta_error must be in (0, delta={delta}), got {delta_error!r}")
    if direction not in DIRECTIONS + ("both",):
        raise ValueError(f"direction must be one of {DIRECTIONS + ('both',)}, got {direction!r}")
    results = []
    for d in (DIRECTIONS if direction == "both" else (direction,)):
        prv = GGPrivacyRandomVariable(noise_multiplier, sample_rate, beta, d)
        acc = PRVAccountant([prv], eps_error=eps_error, delta_error=delta_error, max_self_compositions=[steps])
        results.append(acc.compute_epsilon(delta=delta, num_self_compositions=[steps]))
    return tuple(max(r[i] for r in results) for i in range(3))
