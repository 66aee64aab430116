"""Single-step δ(ε) of the subsampled GG mechanism vs a Monte Carlo estimate (fixed seed).

δ_remove(ε) = E_{x~(1−q)Q+qP}[(1 − e^{ε−Y})_+] with Y = log(1 − q + q e^{L(x)}), and
δ_add(ε) = E_{x~Q}[(1 − e^{ε−Y'})_+] with Y' = −log(1 − q + q e^{L(x)}), L(x) = Σ_i (|x_i|^β − |x_i − a_i|^β)/β.
The certified δ (max over both) must lie within the Monte Carlo confidence interval (4 standard errors).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from opacus_gg.accountants import compute_delta

N = 1_000_000


def _mc_delta(beta, shifts, q, eps, seed):
    rng = np.random.default_rng(seed)
    shifts = np.asarray(shifts, dtype=float)
    noise = stats.gennorm(beta, scale=beta ** (1.0 / beta))
    z = noise.rvs(size=(N, shifts.size), random_state=rng)
    use_p = rng.random(N) < q
    x = z + np.where(use_p[:, None], shifts[None, :], 0.0)  # x ~ (1−q)Q + qP
    loss = lambda v: np.sum((np.abs(v) ** beta - np.abs(v - shifts) ** beta) / beta, axis=1)  # noqa: E731
    y_rem = np.log1p(q * np.expm1(loss(x)))
    y_add = -np.log1p(q * np.expm1(loss(z)))  # z ~ Q
    out = []
    for y in (y_rem, y_add):
        v = np.maximum(-np.expm1(eps - y), 0.0)
        out.append((v.mean(), v.std(ddof=1) / np.sqrt(N)))
    return out


@pytest.mark.parametrize("beta,sigma,q,eps", [(1.5, 0.7, 0.3, 1.0), (1.5, 0.5, 0.5, 2.0), (3.0, 1.0, 0.3, 0.5),
                                              (3.0, 0.8, 1.0, 1.5)])
def test_single_step_delta_one_coordinate(beta, sigma, q, eps):
    (d_rem, se_rem), (d_add, se_add) = _mc_delta(beta, [1.0 / sigma], q, eps, seed=1234)
    mc, se = (d_rem, se_rem) if d_rem >= d_add else (d_add, se_add)
    ours = compute_delta(epsilon=eps, noise_multiplier=sigma, sample_rate=q, steps=1, beta=beta, dim=1)
    assert mc > 20 * se  # the check is informative
    assert abs(ours - mc) <= 4 * se, (ours, mc, se)


def test_single_step_delta_two_coordinates_equal_spread_is_covered():
    # β = 1.5, ℓ1.5 clipping in d = 2: the equal spread (k = 2) is one of the covered shapes
    beta, sigma, q, eps = 1.5, 0.6, 0.5, 1.0
    shifts = [2 ** (-1 / beta) / sigma] * 2
    (d_rem, se_rem), (d_add, se_add) = _mc_delta(beta, shifts, q, eps, seed=99)
    ours = compute_delta(epsilon=eps, noise_multiplier=sigma, sample_rate=q, steps=1, beta=beta, dim=2)
    assert ours >= max(d_rem, d_add) - 4 * max(se_rem, se_add)
