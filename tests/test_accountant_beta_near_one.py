"""β just above 1 on the PRV path (d = 1, PATE, the σ solvers): the proven ε is continuous in β at β = 1 and
β = 2 and never below an independent rigorous lower bound (tests/lower_bound_oracle.py); the inverse loss
solves ℓ_a(x) = t to its stated residual for every β > 1 and saturates exactly (issue 19, item 1)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from lower_bound_oracle import epsilon_lower
from opacus_gg.accountants import compute_epsilon, get_noise_multiplier
from opacus_gg.accountants.checks import AccountingError
from opacus_gg.accountants.gg_pair import GGPair, inverse_loss, loss, saturation_point
from opacus_gg.pate import pate_noise_multiplier

DELTA = 1e-5
BETAS = (1.0 + 1e-9, 1.0001, 1.001, 1.01, 1.02, 1.05)
SIGMAS = (0.5, 1.0, 2.0, 4.0, 8.0)
#: the cells of the issue where the old inverse loss printed a wrong ε, and one neighbour each
FAST_CELLS = ((1.0001, 1.0), (1.001, 0.5), (1.01, 2.0), (1.02, 4.0), (1.0001, 8.0), (1.0 + 1e-9, 2.0))


def _eps(sigma, beta, q=1.0, steps=5):
    return compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA, beta=beta,
                           dim=1).epsilon


def _check_cell(beta, sigma):
    eps, eps_one = _eps(sigma, beta), _eps(sigma, 1.0)
    lower = epsilon_lower([(sigma, 1.0, 5, beta)], DELTA)
    assert eps >= lower, (beta, sigma, eps, lower)
    assert eps <= lower + 0.01 * lower + 0.01  # tight: within one percent of a rigorous lower bound
    # continuity at β = 1: |ε(β) − ε(1)| ≤ 3(β − 1)·ε(1) + 10^{-4}·ε(1) (the β = 1 path is exact Laplace)
    assert abs(eps - eps_one) <= (3.0 * (beta - 1.0) + 1e-4) * eps_one, (beta, sigma, eps, eps_one)


@pytest.mark.parametrize("beta,sigma", FAST_CELLS)
def test_beta_near_one_epsilon_is_above_lower_bound_and_near_beta_one(beta, sigma):
    _check_cell(beta, sigma)


@pytest.mark.slow
@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("sigma", SIGMAS)
def test_beta_near_one_grid_is_above_lower_bound_and_near_beta_one(beta, sigma):
    _check_cell(beta, sigma)


def test_cli_example_of_the_issue_is_sound(cli):
    code, out, _ = cli(["epsilon", "--beta", "1.01", "--dim", "1", "--noise-multiplier", "2", "--sample-rate", "1",
                        "--steps", "5", "--delta", "1e-5"])
    assert code == 0
    printed = float(out.split("epsilon = ")[1].split()[0])
    assert printed >= epsilon_lower([(2.0, 1.0, 5, 1.01)], DELTA) >= 2.49


@pytest.mark.parametrize("beta", (1.000001, 1.0001, 1.01))
def test_subsampled_beta_near_one_is_continuous_and_above_lower_bound(beta):
    one = _eps(1.0, beta, q=0.01, steps=1)
    assert one >= epsilon_lower([(1.0, 0.01, 1, beta)], DELTA)
    assert abs(one - _eps(1.0, 1.0, q=0.01, steps=1)) <= (3.0 * (beta - 1.0) + 1e-4) * one
    long = _eps(1.0, beta, q=0.01, steps=1000)  # raised "Cannot compute epsilon" before
    ref = _eps(1.0, 1.0, q=0.01, steps=1000)
    assert abs(long - ref) <= (3.0 * (beta - 1.0) + 1e-4) * ref


@pytest.mark.parametrize("beta", (2.0 - 1e-9, 2.0 + 1e-9))
def test_epsilon_is_continuous_at_beta_two(beta):
    for sigma, q, steps in ((2.0, 1.0, 5), (1.0, 0.01, 100)):
        two = _eps(sigma, 2.0, q, steps)
        assert abs(_eps(sigma, beta, q, steps) - two) <= 1e-4 * two


def test_sigma_solvers_inherit_the_beta_near_one_fix():
    # the β = 1 solution is 2.50; β = 1.01 returned 2.0 (true ε ≈ 2.5 > target) before
    sigma = get_noise_multiplier(target_epsilon=2.0, target_delta=DELTA, sample_rate=1.0, steps=5, beta=1.01, dim=1)
    assert sigma >= 2.49
    assert epsilon_lower([(sigma, 1.0, 5, 1.01)], DELTA) <= 2.0
    pate = pate_noise_multiplier(target_epsilon=2.0, target_delta=DELTA, n_queries=5, beta=1.01,
                                 adjacency="add_remove")
    assert pate >= 2.49


@pytest.mark.parametrize("beta", (1.0 + 1e-9, 1.0001, 1.01, 1.5, 3.0, 8.0))
@pytest.mark.parametrize("a", (0.01, 0.5, 20.0))
def test_inverse_loss_residual_against_mpmath(beta, a):
    mpmath.mp.dps = 40
    t = np.linspace(-3.0 * a, 3.0 * a, 2001)
    x = inverse_loss(t, a, beta)
    fin = np.isfinite(x)
    # saturated exactly where t is beyond ℓ_a(X_max), and only there
    t_max = float(loss(np.array([saturation_point(a, beta)]), a, beta)[0])
    assert np.array_equal(~fin, np.abs(t) > t_max)
    assert np.all(x[1:] >= x[:-1])  # non-decreasing (±∞ included)
    for i in range(0, t.size, 100):
        if fin[i]:
            xi = mpmath.mpf(float(x[i]))
            exact = (abs(xi) ** beta - abs(xi - a) ** beta) / beta
            dl = abs(xi) ** (beta - 1) + abs(xi - a) ** (beta - 1)
            assert abs(float(exact) - t[i]) <= 1e-12 * (1 + abs(t[i])) + 1e-14 * abs(float(xi)) * float(dl)


def test_saturated_mass_is_below_the_stated_bound():
    # beyond X_max both laws carry ≤ e^{−800}/2: the hockey-stick curve there is 0 to the last float
    for beta in (1.0 + 1e-9, 1.01, 3.0):
        pair = GGPair(0.5, beta)
        sp, sq = pair.sf_pq(np.array([float(loss(np.array([saturation_point(0.5, beta)]), 0.5, beta)[0])]))
        assert sp[0] == 0.0 and sq[0] == 0.0


def test_inverse_loss_refuses_nan():
    with pytest.raises(AccountingError):
        inverse_loss(np.array([0.1, math.nan]), 0.5, 1.01)
