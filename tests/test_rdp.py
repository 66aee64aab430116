"""Rényi-DP upper bound (opacus_gg.companions.rdp): moments by quadrature, Opacus's Gaussian RDP, add-direction bounds."""

import math

import numpy as np
import pytest
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent
from scipy import integrate, stats

from opacus_gg.companions import rdp
from opacus_gg.accountants import compute_epsilon

ORDERS = list(range(2, 33))


@pytest.mark.parametrize("a", [0.3, 1.0, 2.0])
@pytest.mark.parametrize("j", [2, 7, 64])
def test_log_moment_gaussian_closed_form(a, j):
    # quadrature vs the Gaussian closed form j(j−1)a²/2
    assert rdp.log_moment(j, a, 2.0) == pytest.approx(j * (j - 1) * a * a / 2, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("alpha", [2, 3, 10])
def test_laplace_renyi_closed_form(alpha):
    a = 0.8  # Mironov 2017, Laplace with scale 1 and shift a
    ref = math.log(alpha / (2 * alpha - 1) * math.exp((alpha - 1) * a)
                   + (alpha - 1) / (2 * alpha - 1) * math.exp(-alpha * a)) / (alpha - 1)
    assert rdp.renyi_divergence(alpha, a, 1.0) == pytest.approx(ref, rel=1e-9)  # quadrature vs Mironov's closed form


@pytest.mark.parametrize("beta", [1.5, 3.0])
@pytest.mark.parametrize("alpha", [2, 5])
def test_renyi_matches_plain_scipy_quadrature(beta, alpha):
    a = 0.7
    dist = stats.gennorm(beta, scale=beta ** (1 / beta))
    lim = 40 if beta < 2 else 20
    val, _ = integrate.quad(lambda x: np.exp(alpha * dist.logpdf(x - a) + (1 - alpha) * dist.logpdf(x)), -lim, lim,
                            points=[0, a], limit=400)
    # our quadrature vs plain scipy quadrature
    assert rdp.renyi_divergence(alpha, a, beta) == pytest.approx(math.log(val) / (alpha - 1), rel=1e-7)
    # symmetric in the order of the pair (reflection x -> a - x)
    val2, _ = integrate.quad(lambda x: np.exp(alpha * dist.logpdf(x) + (1 - alpha) * dist.logpdf(x - a)), -lim,
                             lim, points=[0, a, a - 6.6, 6.6], limit=400)
    assert math.log(val2) == pytest.approx(math.log(val), rel=1e-7)  # two quadratures of the same integral


@pytest.mark.parametrize("sigma,q", [(1.1, 256 / 60000), (0.7, 0.05), (2.0, 1.0)])
def test_remove_direction_matches_opacus_gaussian_rdp(sigma, q):
    r = rdp.subsampled_rdp(ORDERS, noise_multiplier=sigma, sample_rate=q, beta=2.0)
    ref = compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=ORDERS)
    # our quadrature vs Opacus's closed-form Gaussian RDP
    np.testing.assert_allclose(r["remove"], ref, rtol=1e-8, atol=1e-12)
    eps = rdp.compute_rdp_epsilon(noise_multiplier=sigma, sample_rate=q, steps=1000, delta=1e-5, orders=ORDERS)
    ref_eps, _ = get_privacy_spent(orders=ORDERS, rdp=ref * 1000, delta=1e-5)
    assert eps.epsilon >= ref_eps - 1e-9  # both directions: never below Opacus's remove-only RDP
    if q < 0.01 or q == 1.0:  # the add-direction bound is within (1-q)^{-α-1} of remove; tight at small q and q = 1
        # the add direction exceeds remove by at most a factor (1 − q)^{−α−1}: ≤ 0.2 % here
        assert eps.epsilon == pytest.approx(ref_eps, rel=2e-3)
    assert eps.certified


@pytest.mark.parametrize("beta", [1.0, 1.5, 2.0, 3.0])
def test_add_direction_bound_is_an_upper_bound(beta):
    """Exact add-direction E_Q[(1-q+q e^ℓ)^{1-α}] by 1-D quadrature never exceeds the bound used."""
    sigma, q = 0.9, 0.1
    a = 1 / sigma
    dist = stats.gennorm(beta, scale=beta ** (1 / beta))
    orders = [2, 3, 5, 8] if beta <= 2 else [2, 3, 5]  # β = 3, α = 8: the reference integrand overflows
    r = rdp.subsampled_rdp(orders, noise_multiplier=sigma, sample_rate=q, beta=beta)
    lim = 40 if beta < 2 else 20
    for alpha, bound_add, rem in zip(orders, r["add"], r["remove"]):
        lmix = lambda x: np.logaddexp(np.log1p(-q) + dist.logpdf(x), np.log(q) + dist.logpdf(x - a))  # noqa: E731
        add_exact, _ = integrate.quad(lambda x: np.exp(alpha * dist.logpdf(x) + (1 - alpha) * lmix(x)), -lim, lim,
                                      points=[0, a], limit=400)
        rem_exact, _ = integrate.quad(lambda x: np.exp(alpha * lmix(x) + (1 - alpha) * dist.logpdf(x)), -lim, lim,
                                      points=[0, a], limit=400)
        assert math.log(add_exact) / (alpha - 1) <= bound_add + 1e-12
        # quadrature vs the exact subsampled value
        assert rem == pytest.approx(math.log(rem_exact) / (alpha - 1), rel=1e-6)
        # the bound is O(q^2), not the O(q) of Jensen alone: within a factor 3 of the remove RDP here
        assert bound_add <= 3 * rem


def test_shapes_and_labels():
    assert rdp.shift_shapes(1000, 2.0) == [1]
    shapes = rdp.shift_shapes(1000, 3.0)
    assert shapes[0] == 1 and shapes[-1] == 1000 and len(shapes) >= 5
    small = rdp.compute_rdp_epsilon(noise_multiplier=1.0, sample_rate=0.01, steps=100, delta=1e-5, beta=3.0, dim=1)
    big = rdp.compute_rdp_epsilon(noise_multiplier=1.0, sample_rate=0.01, steps=100, delta=1e-5, beta=3.0, dim=1000)
    assert big.epsilon > small.epsilon and big.shape_k == 1000
    assert small.certified and not big.certified and "evaluated shift shapes" in big.label


@pytest.mark.parametrize("kwargs,name", [
    (dict(noise_multiplier=0.0), "noise_multiplier"), (dict(sample_rate=0.0), "sample_rate"),
    (dict(delta=1.0), "delta"), (dict(beta=0.9), "beta"), (dict(dim=-3), "dim"), (dict(steps=1.5), "steps"),
    (dict(clip_norm_p=0.5), "clip_norm_p")])
def test_bad_input(kwargs, name):
    base = dict(noise_multiplier=1.0, sample_rate=0.01, steps=10, delta=1e-5)
    base.update(kwargs)
    with pytest.raises(ValueError, match=name):
        rdp.compute_rdp_epsilon(**base)


@pytest.mark.parametrize("beta", [1.0, 2.0, 3.0])
def test_rdp_bound_is_above_certified_prv(beta):
    kw = dict(noise_multiplier=1.0, sample_rate=0.02, steps=200, delta=1e-5, beta=beta, dim=1)
    cert = compute_epsilon(**kw)
    assert rdp.compute_rdp_epsilon(**kw).epsilon >= cert.epsilon_lower
