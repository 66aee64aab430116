"""The GG distribution: exact sampling (KS vs scipy.stats.gennorm), moments, density, CDF, conventions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from opacus_gg import _ziggurat as Z
from opacus_gg import distribution as D

BETAS = [1.0, 1.5, 2.0, 3.0, 4.0]


def _gennorm(beta: float, scale: float):
    """The independent oracle of GG(β, s) (density ∝ exp(−|x|^β/(β s^β))): scipy's gennorm, scale s·β^{1/β}; the one
    copy the other test modules import."""
    return stats.gennorm(beta, scale=scale * beta ** (1.0 / beta))


@pytest.mark.parametrize("beta", BETAS + [1.2, 2.5, 8.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sample_ks_against_gennorm(beta, dtype):
    g = torch.Generator().manual_seed(1234)
    x = D.sample(200_000, beta, 1.7, generator=g, dtype=dtype)
    assert x.dtype == dtype and x.shape == (200_000,)
    res = stats.kstest(x.double().numpy(), _gennorm(beta, 1.7).cdf)
    assert res.pvalue > 1e-3, (beta, res)


@pytest.mark.parametrize("beta", BETAS)
def test_ks_detects_wrong_shape(beta):
    """The KS check has power: samples of β are rejected as samples of β + 0.5."""
    g = torch.Generator().manual_seed(7)
    x = D.sample(200_000, beta, 1.0, generator=g, dtype=torch.float64).numpy()
    assert stats.kstest(x, _gennorm(beta + 0.5, 1.0).cdf).pvalue < 1e-6


@pytest.mark.parametrize("beta", BETAS)
def test_empirical_variance_matches_formula(beta):
    g = torch.Generator().manual_seed(99)
    x = D.sample(1_000_000, beta, 0.8, generator=g, dtype=torch.float64)
    v = D.variance(beta, 0.8)
    assert v == pytest.approx(_gennorm(beta, 0.8).var(), rel=1e-10)
    # standard error of the sample variance: sqrt((m4 - v^2)/n)
    m4 = _gennorm(beta, 0.8).moment(4)
    se = math.sqrt((m4 - v * v) / x.numel())
    assert abs(float(x.var()) - v) < 5 * se


def test_variance_special_cases():
    assert D.variance(2.0, 3.0) == pytest.approx(9.0, rel=1e-12)
    assert D.variance(1.0, 3.0) == pytest.approx(18.0, rel=1e-12)  # Laplace(b): 2b²


def test_beta2_is_opacus_gaussian_bit_for_bit():
    shape = (3, 1000)
    g1 = torch.Generator().manual_seed(5)
    g2 = torch.Generator().manual_seed(5)
    x = D.sample(shape, 2.0, 0.7, generator=g1)
    y = torch.normal(mean=0, std=0.7, size=shape, generator=g2)
    assert torch.equal(x, y)


def test_generator_reproducible_and_shape():
    a = D.sample((4, 5, 6), 1.5, 1.0, generator=torch.Generator().manual_seed(3))
    b = D.sample((4, 5, 6), 1.5, 1.0, generator=torch.Generator().manual_seed(3))
    c = D.sample((4, 5, 6), 1.5, 1.0, generator=torch.Generator().manual_seed(4))
    assert a.shape == (4, 5, 6) and torch.equal(a, b) and not torch.equal(a, c)
    assert D.sample(0, 3.0, 1.0).shape == (0,)


@pytest.mark.parametrize("beta", BETAS)
def test_log_prob_cdf_sf_match_scipy(beta):
    x = np.linspace(-6, 6, 101)
    ref = _gennorm(beta, 1.3)
    np.testing.assert_allclose(D.log_prob(x, beta, 1.3), ref.logpdf(x), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(D.cdf(x, beta, 1.3), ref.cdf(x), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(D.sf(x, beta, 1.3), ref.sf(x), rtol=1e-9, atol=1e-15)
    total, _ = integrate.quad(lambda t: math.exp(D.log_prob(t, beta, 1.3)), -np.inf, np.inf)
    assert total == pytest.approx(1.0, abs=1e-8)


def test_sf_accurate_in_far_tail():
    # Gaussian tail at 30 sigma: ~4.9e-198, far below 1 - cdf resolution
    assert D.sf(30.0, 2.0, 1.0) == pytest.approx(stats.norm.sf(30.0), rel=1e-8)


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0])
def test_paper_convention_roundtrip(beta):
    s = 0.9
    sp = D.scale_to_paper_sigma(beta, s)
    assert sp == pytest.approx(beta * s**beta)
    assert D.paper_sigma_to_scale(beta, sp) == pytest.approx(s)
    gg = D.GeneralizedGaussian.from_paper(beta, sp)
    # paper density exp(-|x|^β / σ_p) up to normalisation
    x = np.array([0.0, 0.5, 2.0])
    np.testing.assert_allclose(gg.log_prob(x) - gg.log_prob(0.0), -np.abs(x) ** beta / sp, rtol=1e-12)


@pytest.mark.parametrize("bad", [0.5, 0.999, -1.0, float("inf"), float("nan"), "a", None])
def test_bad_beta(bad):
    with pytest.raises(ValueError, match="beta"):
        D.sample(10, bad, 1.0)
    with pytest.raises(ValueError, match="beta"):
        D.variance(bad, 1.0)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan"), "x"])
def test_bad_scale(bad):
    with pytest.raises(ValueError, match="scale"):
        D.sample(10, 2.0, bad)
    with pytest.raises(ValueError, match="scale"):
        D.cdf(0.0, 2.0, bad)


@pytest.mark.parametrize("beta,t", [(1.0, 8.0), (1.2, 8.0), (1.5, 5.0), (2.2, 3.5), (3.0, 2.2), (3.0, 2.8)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_tail_mass_matches_sf(beta, t, dtype):
    """The sampler's tails (base-layer tail drawn in float64) have the right mass."""
    n = 2_000_000
    x = D.sample(n, beta, 1.0, generator=torch.Generator().manual_seed(11), dtype=dtype)
    p = 2 * float(D.sf(t, beta, 1.0))
    k = int((x.abs() > t).sum())
    assert abs(k - n * p) < 5 * math.sqrt(n * p * (1 - p)) + 1, (k, n * p)


@pytest.mark.parametrize("beta", [1.5, 3.0])
def test_gamma_reference_sampler_ks(beta):
    x = D.sample_gamma(100_000, beta, 2.0, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert stats.kstest(x.numpy(), _gennorm(beta, 2.0).cdf).pvalue > 1e-3
    y = D.sample(100_000, beta, 2.0, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    assert stats.ks_2samp(x.numpy(), y.numpy()).pvalue > 1e-3


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0])
def test_sample_ks_1e6_float32(beta):
    """10^6 float32 Ziggurat draws (22-bit uniforms, float32 widths) against the exact CDF."""
    x = D.sample(1_000_000, beta, 1.0, generator=torch.Generator().manual_seed(2024), dtype=torch.float32)
    assert stats.kstest(x.double().numpy(), _gennorm(beta, 1.0).cdf).pvalue > 1e-3


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0, 8.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ziggurat_tail_masses_around_r(beta, dtype):
    """P(|X| > t) at t = r/2, r, 1.2 r (r: Ziggurat base-layer edge) against the exact sf (binomial)."""
    r = Z.table(beta)[0]
    n = 2_000_000
    x = D.sample(n, beta, 1.0, generator=torch.Generator().manual_seed(5), dtype=dtype).abs()
    for t in (0.5 * r, r, 1.2 * r):
        p = 2 * float(D.sf(t, beta, 1.0))
        k = int((x > t).sum())
        assert abs(k - n * p) < 5 * math.sqrt(n * p * (1 - p)) + 1, (t, k, n * p)


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0, 8.0])
def test_ziggurat_table_layers_have_equal_area(beta):
    r, v, xs, gs, gt = Z.table(beta)
    n = Z.LAYERS
    assert xs.shape == (n + 1,) and xs[-1] == 0 and np.all(np.diff(xs[1:]) < 0) and xs[0] > r == xs[1]
    np.testing.assert_allclose(xs[1:n] * (gt[1:] - gs[1:]), v, rtol=1e-12)  # layers 1..N-1
    assert xs[0] * math.exp(-(r**beta) / beta) == pytest.approx(v, rel=1e-12)  # base strip + tail
    assert gt[-1] >= 1.0 and gt[-1] - 1.0 < 1e-9  # top layer covers the mode
    tail = integrate.quad(lambda t: math.exp(-(t**beta) / beta), r, np.inf)[0]
    assert v == pytest.approx(r * math.exp(-(r**beta) / beta) + tail, rel=1e-9)


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0])
def test_ziggurat_tail_sampler_ks(beta):
    """The base-layer tail X | X > r (shifted-exponential rejection) against the exact conditional CDF."""
    r = Z.table(beta)[0]
    y = Z.tail(200_000, beta, r, torch.Generator().manual_seed(1), "cpu").numpy()
    assert y.min() > r
    sf_r = float(D.sf(r, beta, 1.0))
    cond_cdf = lambda t: 1.0 - D.sf(t, beta, 1.0) / sf_r  # noqa: E731
    assert stats.kstest(y, cond_cdf).pvalue > 1e-3


def test_sizes_across_chunks_reproducible():
    n = Z.CHUNK * 2 + 3
    a = D.sample(n, 1.5, 1.0, generator=torch.Generator().manual_seed(8))
    b = D.sample(n, 1.5, 1.0, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and torch.isfinite(a).all()
    for m in (1, 2, 7, 511):
        assert D.sample(m, 3.0, 1.0).shape == (m,)
