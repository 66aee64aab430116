"""Bounded support (opacus_gg.companions.bounded): every formula against numerical integration; rectification."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate
from scipy.stats import norm

from opacus_gg.companions import bounded
from opacus_gg.engine import GGPrivacyEngine

CASES = [(0.0, 1.0, 1.0, 1.0, 2.0), (0.5, -1.0, 1.0, 1.0, 3.0), (2.0, 1.0, 0.7, 1.5, 5.0),
         (-3.0, 0.5, 1.0, 1.0, 2.5), (0.3, 0.2, 2.0, 0.5, 8.0)]  # theta, c, sigma, a, alpha


def _quad_rectified(th, c, s, a, al):
    v = integrate.quad(lambda x: norm.pdf(x, th, s) ** al * norm.pdf(x, th + c, s) ** (1 - al), -a, a)[0]
    v += norm.cdf(-a, th, s) ** al * norm.cdf(-a, th + c, s) ** (1 - al)
    v += norm.sf(a, th, s) ** al * norm.sf(a, th + c, s) ** (1 - al)
    return math.log(v) / (al - 1)


def _z(th, s, a):
    return norm.cdf(a, th, s) - norm.cdf(-a, th, s)


def _quad_truncated(th, c, s, a, al):
    z0, z1 = _z(th, s, a), _z(th + c, s, a)
    v = integrate.quad(lambda x: (norm.pdf(x, th, s) / z0) ** al * (norm.pdf(x, th + c, s) / z1) ** (1 - al), -a, a)[0]
    return math.log(v) / (al - 1)


@pytest.mark.parametrize("th,c,s,a,al", CASES)
def test_rdp_formulas_match_quadrature(th, c, s, a, al):
    # two quadratures of the same integral (scipy quad, rel. error ≪ 1e-8)
    assert bounded.rdp_rectified(th, c, s, a, al) == pytest.approx(_quad_rectified(th, c, s, a, al), rel=1e-8)
    # two quadratures; the truncated normalizer adds one more (≪ 1e-7)
    assert bounded.rdp_truncated(th, c, s, a, al) == pytest.approx(_quad_truncated(th, c, s, a, al), rel=1e-7)
    # amplification (Hu et al. Prop. 4.6 / Thm. 4.9): never above the Gaussian's α c²/(2σ²)
    gauss = bounded.rdp_gaussian(c, s, al)
    assert bounded.rdp_rectified(th, c, s, a, al) <= gauss + 1e-12
    assert bounded.rdp_truncated(th, c, s, a, al) <= gauss + 1e-12


def _paper_main_text_eq6(th, c, s, a, al):
    """Hu et al. main-text eq. (6), as printed (wrong)."""
    d = lambda x: norm.cdf((a - x) / s) - norm.cdf((-a - x) / s)  # noqa: E731
    return al * c**2 / (2 * s**2) + math.log(d(th + c) / d(th) * (d((1 - al) * (c + th)) / d(th)) ** (1 - al))


def test_paper_main_text_truncated_rdp_is_wrong():
    th, c, s, a, al = 0.5, 1.0, 1.0, 1.0, 3.0
    exact = _quad_truncated(th, c, s, a, al)
    assert abs(_paper_main_text_eq6(th, c, s, a, al) - exact) > 1e-2
    # closed form vs quadrature: quad's relative error ≪ 1e-8
    assert bounded.rdp_truncated(th, c, s, a, al) == pytest.approx(exact, rel=1e-8)


def _fisher_by_quadrature(th, s, a, mech, h=1e-5):
    """E[(∂θ log p)²], score by central finite differences of the log-density (atoms for rectified)."""
    if mech == "truncated":
        def logp(x, t):
            return norm.logpdf(x, t, s) - math.log(_z(t, s, a))
        score = lambda x: (logp(x, th + h) - logp(x, th - h)) / (2 * h)  # noqa: E731
        return integrate.quad(lambda x: score(x) ** 2 * math.exp(logp(x, th)), -a, a)[0]
    inner = integrate.quad(lambda x: ((norm.logpdf(x, th + h, s) - norm.logpdf(x, th - h, s)) / (2 * h)) ** 2
                           * norm.pdf(x, th, s), -a, a)[0]
    lo = lambda t: norm.cdf(-a, t, s)  # noqa: E731
    hi = lambda t: norm.sf(a, t, s)  # noqa: E731
    atoms = sum(((math.log(m(th + h)) - math.log(m(th - h))) / (2 * h)) ** 2 * m(th) for m in (lo, hi))
    return inner + atoms


@pytest.mark.parametrize("th,s,a", [(0.0, 1.0, 1.0), (0.7, 1.0, 1.0), (3.0, 0.5, 2.0), (-2.0, 2.0, 1.0)])
def test_fisher_information_matches_quadrature(th, s, a):
    rect = bounded.fisher_information_rectified(th, s, a)
    trunc = bounded.fisher_information_truncated(th, s, a)
    # Fisher information by finite differences of a quadrature: ~1e-7 error
    assert rect == pytest.approx(_fisher_by_quadrature(th, s, a, "rectified"), rel=1e-6)
    # Fisher information by finite differences of a quadrature: ~1e-7 error
    assert trunc == pytest.approx(_fisher_by_quadrature(th, s, a, "truncated"), rel=1e-6)
    assert 0 < rect <= 1 / s**2 and 0 < trunc <= 1 / s**2  # Thm. 4.2: FIL amplification


def test_paper_rectified_fil_sign_error_and_limits():
    th, s, a = 0.0, 1.0, 1.0
    zm, zp = (-a - th) / s, (a - th) / s
    paper_eq4 = (norm.pdf(zm) ** 2 / norm.cdf(zm) + norm.pdf(-zp) ** 2 / norm.cdf(-zp)
                 + norm.cdf((th - a) / s) - norm.cdf((th + a) / s) + zm * norm.pdf(zm) - zp * norm.pdf(zp)) / s**2
    exact = _fisher_by_quadrature(th, s, a, "rectified")
    assert abs(paper_eq4 - exact) > 0.5  # the printed interior term has the wrong sign
    # a → ∞ recovers the Gaussian's 1/σ²; far outside the box the information vanishes
    # a = 40 is ≈ 26σ from θ: the bound changes I(θ) by ~e^{-26²/2}, far below round-off
    assert bounded.fisher_information_rectified(0.3, 1.5, 40.0) == pytest.approx(1 / 1.5**2, rel=1e-10)
    # a = 40 is ≈ 26σ from θ: the bound changes I(θ) by ~e^{-26²/2}, far below round-off
    assert bounded.fisher_information_truncated(0.3, 1.5, 40.0) == pytest.approx(1 / 1.5**2, rel=1e-10)
    assert bounded.fisher_information_rectified(30.0, 1.0, 1.0) < 1e-6


def test_rectify_clamps_and_validates():
    x = torch.tensor([-5.0, -0.5, 0.0, 0.7, 9.0])
    assert torch.equal(bounded.rectify(x, 1.0), torch.tensor([-1.0, -0.5, 0.0, 0.7, 1.0]))
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="rectify_bound"):
            bounded.rectify(x, bad)


def test_per_instance_report():
    rng = np.random.default_rng(0)
    g = np.clip(rng.normal(size=(6, 4)), -1, 1)
    rep = bounded.per_instance_report(g, sigma=1.0, a=2.0, max_grad_norm=1.0, alphas=[2.0, 4.0], mechanism="truncated")
    assert rep["certified"] is False and "NOT a DP guarantee" in rep["label"]
    theta = g.sum(0)
    i, al = 3, 4.0
    fwd = bounded.rdp_truncated(theta, -g[i], 1.0, 2.0, al).sum()
    bwd = bounded.rdp_truncated(theta - g[i], g[i], 1.0, 2.0, al).sum()
    assert rep["rdp_per_example"][i, 1] == pytest.approx(max(fwd, bwd))
    info = bounded.fisher_information_truncated(theta, 1.0, 2.0)
    assert rep["fil_per_example"][i] == pytest.approx(math.sqrt((info * g[i] ** 2).sum()))
    gauss = bounded.per_instance_report(g, sigma=1.0, a=2.0, alphas=[4.0], mechanism="gaussian")
    assert np.all(rep["rdp_per_example"][:, 1] <= gauss["rdp_per_example"][:, 0] + 1e-12)
    assert rep["rdp_for_all"][1] <= bounded.rdp_gaussian(1.0, 1.0, 4.0) * 4 + 1e-12
    with pytest.raises(ValueError, match="mechanism"):
        bounded.per_instance_report(g, sigma=1.0, a=2.0, mechanism="laplace")
    with pytest.raises(ValueError, match="alpha"):
        bounded.per_instance_report(g, sigma=1.0, a=2.0, alphas=[1.0])


def _train_one_epoch(engine, bound, beta=1.5):
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    model = torch.nn.Linear(5, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dl = DataLoader(TensorDataset(torch.randn(64, 5), torch.randint(0, 2, (64,))), batch_size=16)
    extra = {} if bound is None else {"rectify_bound": bound}
    model, opt, dl = engine.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                         max_grad_norm=1.0, beta=beta, **extra)
    max_abs = 0.0
    for x, y in dl:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        max_abs = max(max_abs, max(p.grad.abs().max().item() for p in model.parameters()))
    return max_abs


@pytest.mark.parametrize("beta,accountant", [(1.5, "gg_prv"), (2.0, "rdp")])
def test_engine_rectify_bound_clamps_released_gradient(beta, accountant):
    """Through the engine: the released (noisy, then averaged) gradient lies in [-a, a]."""
    a = 1e-3
    assert _train_one_epoch(GGPrivacyEngine(accountant=accountant), None, beta) > a  # the noise alone exceeds a
    assert _train_one_epoch(GGPrivacyEngine(accountant=accountant), a, beta) <= a + 1e-7


def test_engine_rectify_bound_leaves_epsilon_unchanged():
    """Rectification is post-processing: the certified accountant's ε is the same with and without it."""
    eps = []
    for bound in (None, 1e-3):
        eng = GGPrivacyEngine(accountant="gg_prv")
        _train_one_epoch(eng, bound)
        eps.append(eng.get_epsilon(1e-5))
    # post-processing: the same accountant history, so the same ε up to round-off
    assert eps[0] == pytest.approx(eps[1], rel=1e-12)
