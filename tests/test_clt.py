"""CLT / GDP estimates (opacus_gg.companions.clt): Bu et al. Table 1, Opacus's gdp accountant, χ² closed forms."""

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from opacus_gg.companions import clt
from opacus_gg.accountants import compute_epsilon

N, BATCH, DELTA = 60000, 256, 1e-5
Q = BATCH / N
# Bu et al. Table 1 (MNIST): sigma, epochs, printed CLT mu, printed CLT eps (delta = 1e-5)
TABLE1 = [(1.3, 15, 0.23, 0.83), (1.1, 60, 0.57, 2.32), (0.7, 45, 1.13, 5.07),
          (0.6, 62, 2.00, 9.98), (0.55, 68, 2.76, 14.98), (0.5, 100, 4.78, 31.12)]


def _steps(epochs):
    return round(epochs * N / BATCH)  # epochs = p T


@pytest.mark.parametrize("sigma,epochs,mu_printed,eps_printed", TABLE1)
def test_bu_table1_mu_and_eps(sigma, epochs, mu_printed, eps_printed):
    est = clt.clt_epsilon(noise_multiplier=sigma, sample_rate=Q, steps=_steps(epochs), delta=DELTA)
    assert abs(est.mu - mu_printed) <= 0.005 + 1e-12
    assert abs(est.epsilon - eps_printed) <= 0.005 + 1e-12
    assert est.certified is False and "NOT" in est.label


@pytest.mark.parametrize("sigma,epochs", [(1.3, 15), (0.7, 45), (0.5, 100)])
def test_matches_opacus_gdp_accountant(sigma, epochs):
    from opacus.accountants import GaussianAccountant

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc = GaussianAccountant()
    steps = _steps(epochs)
    for _ in range(3):
        acc.step(noise_multiplier=sigma, sample_rate=Q)
    acc.history = [(sigma, Q, steps)]
    ref = acc.get_epsilon(DELTA, poisson=True)
    est = clt.clt_epsilon(noise_multiplier=sigma, sample_rate=Q, steps=steps, delta=DELTA)
    # the same μ-GDP formula as Opacus's gdp accountant; our χ² by quadrature (≪ 1e-6)
    assert est.epsilon == pytest.approx(ref, rel=1e-6)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.5])
def test_chi2_closed_forms(sigma):
    # χ² by quadrature vs the Gaussian closed form e^{1/σ²} − 1
    assert clt.chi_squared(sigma, 2.0) == pytest.approx(math.expm1(sigma**-2), rel=1e-8)
    # χ² by quadrature vs the Laplace closed form
    assert clt.chi_squared(sigma, 1.0) == pytest.approx(clt.chi_squared_laplace(sigma), rel=1e-8)
    a = 1 / sigma
    assert clt.chi_squared_laplace(sigma) == pytest.approx((2 / 3) * math.exp(a) + math.exp(-2 * a) / 3 - 1)


@pytest.mark.parametrize("beta", [1.3, 3.0])
def test_chi2_matches_independent_scipy_quadrature(beta):
    sigma = 0.8
    dist = stats.gennorm(beta, scale=beta ** (1 / beta))  # library GG(β, 1)
    lim = 40 if beta < 2 else 9
    val, _ = integrate.quad(lambda x: dist.pdf(x - 1 / sigma) ** 2 / dist.pdf(x), -lim, lim, points=[0, 1 / sigma],
                            limit=400)
    assert clt.chi_squared(sigma, beta) == pytest.approx(val - 1, rel=1e-6)  # two quadratures of the same integral


def test_rotation_invariance_at_beta2_and_dimension_growth_above_2():
    # β = 2 is dimension-free: the same χ² up to quadrature error
    assert clt.chi_squared(1.0, 2.0, k=50) == pytest.approx(clt.chi_squared(1.0, 2.0, k=1), rel=1e-8)
    chis = [clt.chi_squared(1.0, 3.0, k=k) for k in (1, 10, 100)]
    assert chis[0] < chis[1] < chis[2]  # β > 2: spreading the shift increases χ² (no dimension independence)
    est = clt.clt_epsilon(noise_multiplier=1.0, sample_rate=0.01, steps=100, delta=1e-5, beta=3.0, dim=1000)
    assert est.shape_k == 1000


def test_delta_epsilon_duality_and_tradeoff():
    mu = 1.3
    for eps in (0.0, 0.5, 2.0):
        d = clt.delta_from_mu(eps, mu)
        # δ(ε) = 1 + f*(-e^ε) = max_α 1 - G_μ(α) - e^ε α
        alphas = np.linspace(0, 1, 200001)
        # max over a grid of step 5e-6 in α: the grid's resolution
        assert d == pytest.approx(np.max(1 - clt.tradeoff(alphas, mu) - math.exp(eps) * alphas), abs=1e-6)
        if eps > 0:
            # ε from δ inverts δ from ε with a root finder (xtol ≪ 1e-7)
            assert clt.epsilon_from_mu(mu, d) == pytest.approx(eps, rel=1e-7)
    assert clt.tradeoff(0.0, mu) == pytest.approx(1.0) and clt.tradeoff(1.0, mu) == pytest.approx(0.0)
    assert clt.epsilon_from_mu(0.01, 0.5) == 0.0  # δ above δ(0): ε = 0


@pytest.mark.parametrize("kwargs,name", [
    (dict(noise_multiplier=-1.0), "noise_multiplier"), (dict(sample_rate=1.5), "sample_rate"),
    (dict(delta=0.0), "delta"), (dict(beta=0.5), "beta"), (dict(dim=0), "dim"), (dict(steps=0), "steps")])
def test_bad_input(kwargs, name):
    base = dict(noise_multiplier=1.0, sample_rate=0.01, steps=10, delta=1e-5)
    base.update(kwargs)
    with pytest.raises(ValueError, match=name):
        clt.clt_epsilon(**base)


def test_clt_is_not_a_bound_on_bu_settings():
    """On Bu et al.'s own settings the certified ε exceeds the CLT ε (CLT is not a bound)."""
    larger = 0
    for sigma, epochs, _, _ in TABLE1[:3]:
        steps = _steps(epochs)
        cert = compute_epsilon(noise_multiplier=sigma, sample_rate=Q, steps=steps, delta=DELTA)
        est = clt.clt_epsilon(noise_multiplier=sigma, sample_rate=Q, steps=steps, delta=DELTA)
        larger += cert.epsilon_lower > est.epsilon  # even the accountant's lower bound exceeds the CLT ε
    assert larger == 3
