"""The Fisher bound L_j(a) ≤ j(j−1)·I_β·a²/2 (accountants/fisher.py; docs/accounting.md, Lemma F1 and
Conjecture F2): proven and used at β = 1 (any d, p ≤ 2), numerical evidence only for 1 < β < 2, false for β > 2."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from opacus.accountants.analysis.rdp import compute_rdp

from opacus_gg.accountants import ball_rdp
from opacus_gg.accountants.ball_rdp import log_moment_upper
from opacus_gg.accountants.fisher import fisher_applies, fisher_information, fisher_log_moments


def _laplace_log_moment(j: int, a: float) -> mpmath.mpf:
    """L_j(a) at β = 1: log(j/(2j−1)·e^{(j−1)a} + (j−1)/(2j−1)·e^{−ja}) (Mironov 2017), 50 digits (the closed
    form itself is checked against the quadrature in test_accountant_ball_rdp.py)."""
    with mpmath.workdps(50):
        a = mpmath.mpf(a)
        return mpmath.log(mpmath.mpf(j) / (2 * j - 1) * mpmath.exp((j - 1) * a)
                          + mpmath.mpf(j - 1) / (2 * j - 1) * mpmath.exp(-j * a))


JS = [2, 3, 5, 16, 64, 256]


def test_fisher_information_closed_form_matches_the_moment_integral():
    """I_β = E|X|^{2β−2} (= 1 at β = 1, 2) against a quadrature of |x|^{2β−2} e^{−|x|^β/β}/Z."""
    for beta in (1.0, 1.2, 1.5, 1.8, 2.0, 3.0):
        with mpmath.workdps(30):
            z = 2 * mpmath.mpf(beta) ** (1 / mpmath.mpf(beta)) * mpmath.gamma(1 + 1 / mpmath.mpf(beta))
            ref = 2 * mpmath.quad(lambda x: x ** (2 * beta - 2) * mpmath.exp(-x ** beta / beta), [0, 1, mpmath.inf]) / z
        assert abs(fisher_information(beta) - float(ref)) < 1e-13 * float(ref)
    assert fisher_information(1.0) == 1.0 and abs(fisher_information(2.0) - 1.0) < 1e-15


@pytest.mark.parametrize("j", JS)
def test_laplace_second_derivative_is_a_two_point_variance_at_most_fisher(j):
    r"""Lemma F1: L_j'' = (2j−1)²·w(1−w), w = 1/(1 + (j−1)/j·e^{−(2j−1)a}) ≥ j/(2j−1) > ½ for a ≥ 0, so
    L_j''(a) ≤ L_j''(0) = j(j−1) (formula against a central difference of the 50-digit closed form)."""
    with mpmath.workdps(50):
        for a in [0.0, 1e-4, 0.01, 0.1, 0.5, 2.0, 10.0]:
            a = mpmath.mpf(a)
            w = 1 / (1 + mpmath.mpf(j - 1) / j * mpmath.exp(-(2 * j - 1) * a))
            second = (2 * j - 1) ** 2 * w * (1 - w)
            h = mpmath.mpf("1e-12")
            fd = (_laplace_log_moment(j, a + h) - 2 * _laplace_log_moment(j, a) + _laplace_log_moment(j, a - h)) / h**2
            assert abs(second - fd) < 1e-6 * max(1, abs(second))
            assert w >= mpmath.mpf(j) / (2 * j - 1) and second <= j * (j - 1) * (1 + mpmath.mpf("1e-40"))


@pytest.mark.parametrize("j", JS)
def test_laplace_moments_below_the_fisher_quadratic(j):
    """L_j(a) ≤ j(j−1)a²/2 at β = 1 for a ∈ [1e-6, 30] (consequence of Lemma F1 with L(0) = L'(0) = 0)."""
    for a in np.logspace(-6, math.log10(30.0), 40):
        assert _laplace_log_moment(j, a) <= j * (j - 1) * mpmath.mpf(a) ** 2 / 2


@pytest.mark.parametrize("p", [1.2, 1.5, 2.0])
def test_fisher_bound_covers_sampled_shifts_in_the_lp_ball(p):
    """Σ_i L_j(|μ_i|) ≤ fisher_log_moments[j] for μ on the ℓp sphere of radius m (one-hot, equal spreads,
    random), d up to 1000, β = 1."""
    rng = np.random.default_rng(3)
    sigma = 0.8
    m = 1.0 / sigma
    bound = fisher_log_moments(32, sigma, 1.0, p)
    shapes = [np.array([m])] + [np.full(k, m * k ** (-1.0 / p)) for k in (2, 10, 1000)]
    for d in (3, 50, 1000):
        v = np.abs(rng.standard_normal(d)) ** rng.uniform(0.5, 3.0)
        shapes.append(m * v / np.sum(v ** p) ** (1.0 / p))
    for mu in shapes:
        for j in (2, 5, 32):
            total = sum(_laplace_log_moment(j, float(x)) for x in mu)
            assert total <= bound[j], (p, len(mu), j)


def test_fisher_applies_only_where_proven():
    """β = 1 with p ≤ 2 only: not for 1 < β < 2 (Conjecture F2), β > 2 (false), or p > 2."""
    assert fisher_applies(1.0, 2.0) and fisher_applies(1.0, 1.5)
    assert not fisher_applies(1.0, 3.0) and not fisher_applies(1.5, 1.5) and not fisher_applies(3.0, 2.0)
    assert fisher_log_moments(8, 1.0, 1.5, 2.0) is None


def test_beta_one_p_two_remove_rdp_is_the_gaussian_rdp_of_the_same_noise_multiplier():
    r"""With S_j ≤ j(j−1)m²/2 the remove direction equals Opacus's subsampled-Gaussian RDP at the same σ
    (the same binomial expansion with Gaussian moments; integer orders), and the used moments are ≤ the dual's."""
    orders = tuple(range(2, 17))
    sigma, q = 1.0, 0.01
    one = ball_rdp.step_rdp(sigma, q, 1.0, 10**6, 2.0, orders)
    dual = ball_rdp.ball_log_moments(16, sigma, 1.0, 10**6, 2.0)
    fisher = fisher_log_moments(16, sigma, 1.0, 2.0)
    # the dual (with the chord bound of Lemma 4d) is within ~2 % of the Fisher limit here, and never below it
    # (at d = 10^6 the equal spread gives S_j ≥ d·L_j(m/√d) = c_j m²(1 − O(1/d)))
    assert np.all(fisher[2:] <= dual[2:]) and np.max(dual[2:] / fisher[2:]) < 1.05
    gauss = compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=list(orders))
    assert np.allclose(one["remove"], gauss, rtol=1e-9, atol=0)
    assert np.all(one["remove"] >= gauss * (1 - 1e-12))


@pytest.mark.parametrize("beta", [1.2, 1.5, 1.8])
def test_fisher_conjecture_evidence_between_one_and_two(beta):
    """Conjecture F2 (NOT used): the rounded-up quadrature of L_j(a) stays ≤ c_j a² at sampled (j, a); evidence only."""
    c = fisher_information(beta) / 2
    for j in (2, 8, 64):
        for a in (1e-3, 1e-2, 0.1, 1.0, 3.0):
            assert log_moment_upper(j, a, beta) <= j * (j - 1) * c * a * a, (beta, j, a)


def test_fisher_bound_is_false_above_two():
    """β = 3, j = 2, a = 1: L_2(1) = 2.33·c_2 (the reason fisher_applies excludes β > 2)."""
    c = fisher_information(3.0) / 2
    assert log_moment_upper(2, 1.0, 3.0) > 2.0 * 2 * c
