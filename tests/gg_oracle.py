"""An independent one-coordinate oracle: the Poisson-subsampled GG mechanism in Google's dp-accounting.

``dp_accounting``'s ``AdditiveNoisePrivacyLoss`` handles Poisson subsampling in both adjacency directions for any
symmetric noise whose privacy loss is monotone; we only supply the GG noise CDF (scipy's ``gennorm``), the
non-subsampled privacy loss and its inverse (root finding). Its pessimistic PLD ("connect the dots") gives an
ε that shares no code with opacus-gg's accountant.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld import privacy_loss_mechanism as plm


class GGPrivacyLoss(plm.AdditiveNoisePrivacyLoss):
    """Privacy loss of x + GG noise, density ∝ exp(-|x|^β/(β s^β)), sensitivity Δ."""

    def __init__(self, beta: float, scale: float, sensitivity: float = 1.0, sampling_prob: float = 1.0,
                 adjacency_type=plm.AdjacencyType.REMOVE, log_mass_truncation_bound: float = -50.0):
        self.beta = float(beta)
        self.scale = float(scale)
        self._rv = stats.gennorm(self.beta, scale=self.scale * self.beta ** (1.0 / self.beta))
        self._log_mass_truncation_bound = log_mass_truncation_bound
        super().__init__(sensitivity, False, sampling_prob, adjacency_type)

    def _phi(self, x: float) -> float:
        return abs(x / self.scale) ** self.beta / self.beta

    def _privacy_loss_without_subsampling_remove(self, x: float) -> float:
        # ln mu(x + Δ) / mu(x): non-increasing in x
        return self._phi(x) - self._phi(x + self.sensitivity)

    def _inverse_privacy_loss_without_subsampling_remove(self, privacy_loss: float) -> float:
        # largest x with loss(x) >= privacy_loss
        f = lambda x: self._privacy_loss_without_subsampling_remove(x) - privacy_loss  # noqa: E731
        if self.beta == 1.0:
            d = self.sensitivity / self.scale
            if privacy_loss > d:
                return -math.inf
            if privacy_loss <= -d:
                return math.inf
            return -0.5 * self.sensitivity - 0.5 * privacy_loss * self.scale
        lo, hi = -1.0, 1.0
        while f(lo) < 0:
            lo *= 2
            if lo < -1e12:
                return -math.inf
        while f(hi) >= 0:
            hi *= 2
            if hi > 1e12:
                return math.inf
        # root to float64 resolution: the oracle's loss inverse must not add error of its own
        return optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-14)

    def privacy_loss_tail(self) -> plm.TailPrivacyLossDistribution:
        lower = self._rv.ppf(0.5 * math.exp(self._log_mass_truncation_bound))
        upper = -lower
        if self.adjacency_type == plm.AdjacencyType.ADD:
            upper += self.sensitivity
        else:
            lower -= self.sensitivity
        return plm.TailPrivacyLossDistribution(lower, upper, {
            math.inf: self.mu_upper_cdf(lower),
            self.privacy_loss(upper): 1 - self.mu_upper_cdf(upper),
        })

    def connect_dots_bounds(self) -> plm.ConnectDotsBounds:
        tail = self.privacy_loss_tail()
        return plm.ConnectDotsBounds(epsilon_upper=self.privacy_loss(tail.lower_x_truncation),
                                     epsilon_lower=self.privacy_loss(tail.upper_x_truncation))

    def noise_cdf(self, x):
        return self._rv.cdf(x)

    def noise_log_cdf(self, x):
        return self._rv.logcdf(x)

    @classmethod
    def from_privacy_guarantee(cls, *args, **kwargs):  # pragma: no cover - not needed by the oracle
        raise NotImplementedError


def gg_pld(beta: float, noise_multiplier: float, sample_rate: float,
           value_discretization_interval: float = 1e-4,
           pessimistic: bool = True) -> pld_lib.PrivacyLossDistribution:
    """dp-accounting PLD of one step (both directions) of the subsampled GG mechanism, scale σ, sensitivity 1.

    ``pessimistic=True`` gives an upper bound on δ(ε) (hence on ε), ``False`` an optimistic (lower) estimate.
    """

    def single(adjacency_type):
        return pld_lib._create_pld_pmf_from_monotone_privacy_loss(
            GGPrivacyLoss(beta, noise_multiplier, 1.0, sample_rate, adjacency_type),
            pessimistic_estimate=pessimistic,
            value_discretization_interval=value_discretization_interval,
            use_connect_dots=pessimistic,
        )

    return pld_lib._pld_for_subsampled_mechanism(single, sample_rate)


def oracle_epsilon(beta: float, noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                   value_discretization_interval: float = 1e-4, pessimistic: bool = True) -> float:
    """ε(δ) after ``steps`` compositions, max over add/remove (dp-accounting's PLD does both)."""
    pld = gg_pld(beta, noise_multiplier, sample_rate, value_discretization_interval, pessimistic)
    return float(pld.self_compose(steps).get_epsilon_for_delta(delta))


def oracle_delta(beta: float, noise_multiplier: float, sample_rate: float, steps: int, epsilon: float,
                 value_discretization_interval: float = 1e-4) -> float:
    pld = gg_pld(beta, noise_multiplier, sample_rate, value_discretization_interval)
    return float(pld.self_compose(steps).get_delta_for_epsilon(epsilon))


if __name__ == "__main__":  # quick manual check
    import time

    t = time.time()
    print(oracle_epsilon(2.0, 1.0, 0.01, 1000, 1e-5), time.time() - t)
    print(np.round(oracle_epsilon(3.0, 1.0, 0.02, 500, 1e-6), 3))
