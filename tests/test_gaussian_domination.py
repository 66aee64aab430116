"""Lemma N (:mod:`opacus_gg.accountants.gaussian_domination`, docs/accounting.md): a GG(β, 1) coordinate shifted by
a is dominated by N(κ_β·a, 1) for 1 ≤ β ≤ 2, κ_β = f(0)·√(2π); hence every shift μ by N(κ_β‖μ‖_2).

Each step of the proof is checked on its own. Against references that share no code with the library (scipy.stats
gennorm / norm, mpmath): the constant; the gamma-shape order Q(1/β, y) ≥ Q(1/2, y) (property test); the slope of the
transport map g = Φ^{−1}∘F is largest at 0; the trade-off curves of the threshold tests are ordered. Then the
hockey-stick curves of one coordinate (the library's exact curves, ``GGPair``) and of two (quadrature) are below the
Gaussian's closed form (scipy); the constant cannot be lowered (the curves cross at 2 % less); the lemma is refused for
β > 2, where it is false. Last, the accountant: the dominating Gaussian published where smaller, on every path.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import special, stats

from lower_bound_oracle import epsilon_lower
from opacus_gg.accountants import compute_delta, compute_epsilon
from opacus_gg.accountants.api import gaussian_dominated_history, proven_epsilon_history
from opacus_gg.accountants.full_batch import gaussian_epsilon
from opacus_gg.accountants.gaussian_domination import gaussian_domination_applies, gaussian_domination_constant
from opacus_gg.accountants.gg_pair import GGPair
from opacus_gg.accountants.history import normalize_history
from test_accountant_spreads import _h_two

BETAS = [1.0, 1.05, 1.2, 1.5, 1.8, 1.95, 2.0]


def _gennorm(beta: float):
    """GG(β, 1) (density ∝ e^{−|x|^β/β}) as scipy's gennorm (density ∝ e^{−|x/s|^β}, s = β^{1/β})."""
    return stats.gennorm(beta, scale=beta ** (1.0 / beta))


@pytest.mark.parametrize("beta", BETAS)
def test_constant_is_the_density_at_zero_times_root_two_pi_rounded_up(beta):
    b = mpmath.mpf(beta)
    exact = mpmath.sqrt(2 * mpmath.pi) / (2 * mpmath.power(b, 1 / b) * mpmath.gamma(1 + 1 / b))
    k = gaussian_domination_constant(beta)
    assert k >= exact and k <= exact * (1 + 1e-11)
    assert k == pytest.approx(_gennorm(beta).pdf(0.0) * math.sqrt(2 * math.pi), rel=5e-12)


def test_constant_at_laplace_and_gaussian_and_refused_above_two():
    assert gaussian_domination_constant(2.0) == pytest.approx(1.0, rel=1e-11)
    assert gaussian_domination_constant(1.0) == pytest.approx(math.sqrt(math.pi / 2), rel=1e-11)
    assert not gaussian_domination_applies(2.5) and not gaussian_domination_applies(0.9)
    for beta in (0.5, 2.0001, 3.0):
        with pytest.raises(ValueError, match="1 <= beta <= 2"):
            gaussian_domination_constant(beta)


@settings(max_examples=300, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.floats(1.0, 2.0), st.floats(0.0, 700.0))
def test_gamma_law_increases_with_its_shape(beta, y):
    """Step 3: Q(1/β, y) ≥ Q(1/2, y) (|X|^β/β ~ Gamma(1/β) is stochastically larger than Z²/2 ~ Gamma(1/2))."""
    assert special.gammaincc(1.0 / beta, y) >= special.gammaincc(0.5, y) * (1 - 1e-13)


@pytest.mark.parametrize("beta", BETAS)
def test_transport_map_slope_is_largest_at_zero(beta):
    """Step 3: g'(x) = f(x)/φ(g(x)) ≤ g'(0) = κ_β, g = Φ^{−1}∘F, on x ∈ [0, x_max] (logs: no underflow)."""
    gg = _gennorm(beta)
    x = np.concatenate([np.geomspace(1e-8, 1.0, 400), np.linspace(1.0, (600.0 * beta) ** (1 / beta), 4000)])
    z = -stats.norm.ppf(np.exp(gg.logsf(x)))  # g(x) = Φ^{−1}(F(x)) = −Φ^{−1}(S(x)) for x ≥ 0
    ok = np.isfinite(z)
    log_slope = gg.logpdf(x[ok]) - stats.norm.logpdf(z[ok])
    k = gaussian_domination_constant(beta)
    assert np.all(log_slope <= math.log(k) + 1e-9)
    assert log_slope[0] == pytest.approx(math.log(k), abs=1e-6)  # attained as x → 0


@pytest.mark.parametrize("beta", [1.0, 1.2, 1.5, 1.8])
@pytest.mark.parametrize("a", [1e-3, 0.05, 0.5, 2.0])
def test_trade_off_curve_of_a_coordinate_is_above_the_gaussians(beta, a):
    """Steps 1–2: the threshold tests' trade-off F(F^{−1}(u) − a) ≥ Φ(Φ^{−1}(u) − κa) (scipy only)."""
    gg = _gennorm(beta)
    u = np.concatenate([np.geomspace(1e-12, 0.5, 300), 1 - np.geomspace(1e-12, 0.5, 300)])
    k = gaussian_domination_constant(beta)
    assert np.all(gg.cdf(gg.ppf(u) - a) >= stats.norm.cdf(stats.norm.ppf(u) - k * a) - 1e-13)


def _alphas(a: float) -> np.ndarray:
    return np.exp(np.concatenate([np.linspace(0.0, 6.0 * a + 1e-3, 200), np.linspace(0.0, 30.0, 61)]))


def _gauss_h(mu: float, alphas: np.ndarray) -> np.ndarray:
    """H_α(N(μ, 1)‖N(0, 1)) = Φ(−ε/μ + μ/2) − α·Φ(−ε/μ − μ/2), ε = log α ≥ 0 (scipy, closed form)."""
    eps = np.log(alphas)
    return stats.norm.cdf(-eps / mu + mu / 2) - alphas * stats.norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("beta", [1.0, 1.2, 1.5, 1.8, 1.95])
@pytest.mark.parametrize("a", [1e-3, 0.03, 0.3, 1.0, 3.0])
def test_hockey_stick_curve_of_a_coordinate_is_below_its_gaussian(beta, a):
    """The lemma on the library's exact curves: H_α(GG_a) ≤ H_α(N(κa)) for α ≥ 1 (both pairs symmetric)."""
    al = _alphas(a)
    gg = GGPair(a, beta).h_pq(al)
    gauss = _gauss_h(gaussian_domination_constant(beta) * a, al)
    assert np.all(gg <= gauss * (1 + 1e-9) + 1e-15)


@pytest.mark.parametrize("beta", [1.2, 1.5, 1.8])
def test_constant_cannot_be_lowered(beta):
    """κ_β is the least constant: with 0.98·κ_β the curves cross near α = 1 for a small shift (total variation
    f(0)·a against 0.98·κ_β·a/√(2π))."""
    a = 0.01
    al = _alphas(a)
    gg = GGPair(a, beta).h_pq(al, upper=False)  # the computed curve, not rounded up: the crossing is real
    gauss = _gauss_h(0.98 * gaussian_domination_constant(beta) * a, al)
    assert np.any(gg > gauss * (1 + 1e-6))


@pytest.mark.parametrize("beta,a1,a2", [(1.5, 0.4, 0.4), (1.8, 0.9, 0.2)] + [
    pytest.param(b, a1, a2, marks=pytest.mark.slow) for b in (1.2, 1.5, 1.8)
    for a1, a2 in ((0.4, 0.4), (0.9, 0.2), (0.05, 0.03)) if (b, a1, a2) not in ((1.5, 0.4, 0.4), (1.8, 0.9, 0.2))])
def test_two_coordinates_are_below_the_gaussian_of_their_l2_norm(beta, a1, a2):
    """Tensorization: H_α(GG_{a1} ⊗ GG_{a2}) (quadrature, :func:`_h_two`) ≤ H_α(N(κ·‖(a1, a2)‖_2))."""
    al = np.exp(np.linspace(0.0, 6.0, 25))
    two = _h_two(a1, a2, beta, al)
    gauss = _gauss_h(gaussian_domination_constant(beta) * math.hypot(a1, a2), al)
    assert np.all(two <= gauss * (1 + 1e-8) + 1e-13)


@pytest.mark.parametrize("beta", [1.5, 1.8])
def test_many_equal_coordinates_are_below_the_gaussian_of_their_l2_norm(beta):
    """k equal coordinates, one step without subsampling: the rigorous lower bound on their ε (independent
    oracle) is ≤ the exact ε of N(κ_β·√k·a) (closed form, rounded up)."""
    delta = 1e-5
    for k, a in ((4, 0.5), (25, 0.2), (100, 0.1)):
        gauss = gaussian_epsilon(mpmath.mpf(gaussian_domination_constant(beta) * math.sqrt(k) * a), delta)
        assert epsilon_lower([(1.0, 1.0, 1, beta)], delta, shift=(a,) * k) <= gauss, k


def test_lemma_fails_above_two():
    """For β > 2 the gamma-shape order reverses and no κ works: at β = 3 the slope of g grows away from 0."""
    gg = _gennorm(3.0)
    x = np.linspace(1e-6, 3.0, 300)
    log_slope = gg.logpdf(x) - stats.norm.logpdf(-stats.norm.ppf(gg.sf(x)))
    assert log_slope.max() > log_slope[0] + 0.05


# ---- the accountant: the dominating Gaussian's PRV beside the Rényi bound ----------------------------------------

NEAR_TWO = dict(noise_multiplier=1.0, sample_rate=0.05, steps=200, delta=1e-5, beta=1.9, dim=10, clip_norm_p=2.0)


def test_dominating_gaussian_history_scales_by_kappa_and_the_l2_radius():
    seg = normalize_history([(2.0, 0.1, 7, 1.5, 100, 2.0)])[0]
    (g,) = gaussian_dominated_history([seg])
    k = gaussian_domination_constant(1.5)
    assert (g.beta, g.dim, g.clip_norm_p, g.sample_rate, g.steps) == (2.0, 1, 2.0, 0.1, 7)
    assert g.noise_multiplier == pytest.approx(2.0 / k, rel=1e-11) and g.noise_multiplier <= 2.0 / k
    (g4,) = gaussian_dominated_history(normalize_history([(2.0, 0.1, 7, 1.5, 100, 4.0)]))  # ‖μ‖_2 ≤ d^{1/4}‖μ‖_4
    assert g4.noise_multiplier == pytest.approx(2.0 / (k * 100 ** 0.25), rel=1e-11)
    # the count coordinate (σ_c = 4) is Gaussian already: κ_β scales the gradient's shift only
    (gc,) = gaussian_dominated_history(normalize_history([(2.0, 0.1, 7, 1.5, 100, 2.0, 4.0)]))
    assert gc.noise_multiplier == pytest.approx(1.0 / math.hypot(k * 0.5, 0.25), rel=1e-11)
    assert gaussian_dominated_history(normalize_history([(2.0, 0.1, 7, 3.0, 100, 2.0)])) is None


def test_dominating_gaussian_is_published_where_it_beats_the_renyi_bound():
    """β = 1.9, p = 2: the Gaussian's PRV (κ_β/√I_β = 1.026) is below the Rényi bound; it is the published ε, equals
    the PRV of the Gaussian mechanism at σ/κ_β, and the per-step path and compute_delta agree with it."""
    rep = compute_epsilon(**NEAR_TWO)
    d = rep.details
    assert rep.method == "prv_gaussian" and rep.certified and d["gaussian_domination"] == "composed"
    assert rep.epsilon == d["epsilon_gaussian_domination"] < d["epsilon_rdp"]
    gauss = compute_epsilon(**{**NEAR_TWO, "noise_multiplier": 1.0 / gaussian_domination_constant(1.9),
                               "beta": 2.0, "dim": 1})
    assert gauss.method == "prv" and rep.epsilon == pytest.approx(gauss.epsilon, rel=1e-9)
    hist = [(1.0, NEAR_TWO["sample_rate"], NEAR_TWO["steps"], 1.9, 10, 2.0)]
    assert proven_epsilon_history(hist, NEAR_TWO["delta"]) == rep.epsilon
    kw = {k: v for k, v in NEAR_TWO.items() if k != "delta"}
    assert compute_delta(epsilon=rep.epsilon, **kw) <= NEAR_TWO["delta"] * (1 + 1e-6)


@pytest.mark.parametrize("beta", [1.9, 1.6])
def test_published_epsilon_near_two_is_above_rigorous_lower_bounds(beta):
    """Soundness of what is published (Gaussian or Rényi) against the independent lower-bound oracle: one
    coordinate at the radius, and the radius spread over 10 coordinates."""
    kw = dict(NEAR_TWO, beta=beta, steps=50)
    eps = compute_epsilon(**kw).epsilon
    hist = [(kw["noise_multiplier"], kw["sample_rate"], kw["steps"], beta)]
    for shift in ((1.0,), (10 ** -0.5,) * 10):
        assert epsilon_lower(hist, kw["delta"], shift=shift) <= eps, shift


def test_dominating_gaussian_is_skipped_where_it_cannot_win_and_refused_above_two():
    rep = compute_epsilon(**{**NEAR_TWO, "beta": 1.5, "clip_norm_p": 1.5})
    assert rep.method == "rdp" and rep.details["gaussian_domination"].startswith("skipped")
    assert "epsilon_gaussian_domination" not in rep.details
    rep3 = compute_epsilon(**{**NEAR_TWO, "beta": 3.0})
    assert rep3.details["gaussian_domination"].startswith("not applicable")


def test_published_epsilon_is_the_smallest_proven_bound_with_the_table_too(monkeypatch):
    """ball_bound="table" (a coarse spec): the published ε is the least of the table's, the Rényi bound and the
    Gaussian's, and the per-step path gives the same number."""
    from opacus_gg.accountants import api
    from opacus_gg.accountants.ball_prv import TableSpec

    coarse = TableSpec(a0=0.1, ratio_low=1.1, ratio_high=1.03, high_from=0.5, h=0.02, half_width=8.0,
                       orders=tuple(range(2, 9)), mass_split=2)
    monkeypatch.setattr(api, "TABLE_SPEC", coarse)
    kw = dict(NEAR_TWO, beta=1.95, clip_norm_p=1.8, steps=20)
    rep = compute_epsilon(**kw, ball_bound="table")
    d = rep.details
    bounds = [d[k] for k in ("epsilon_rdp", "epsilon_gaussian_domination", "epsilon_ball_table") if k in d]
    assert len(bounds) == 3 and rep.epsilon == min(bounds)
    hist = [(1.0, kw["sample_rate"], kw["steps"], 1.95, 10, 1.8)]
    assert proven_epsilon_history(hist, kw["delta"], ball_bound="table") == rep.epsilon


def test_dominating_gaussian_is_published_where_the_equal_spread_prv_fails(monkeypatch):
    """The path where the equal-spread PRV is out of range (simulated: it raises for the GG segments): the
    report publishes the Gaussian (its own PRV, at β = 2, still runs) and equals the per-step path's ε."""
    from opacus_gg.accountants import api

    real = api.compose_history

    def failing(segs, *a, **k):
        if any(getattr(s, "beta", 2.0) != 2.0 for s in segs):
            raise ArithmeticError("simulated: the equal-spread PRV is out of range")
        return real(segs, *a, **k)

    monkeypatch.setattr(api, "compose_history", failing)
    with pytest.warns(UserWarning, match="not available"):
        rep = compute_epsilon(**NEAR_TWO, diagnostics=True)
    assert "prv_failed" in rep.details and rep.method == "prv_gaussian" and rep.certified
    assert rep.epsilon == rep.details["epsilon_gaussian_domination"] < rep.details["epsilon_rdp"]
    hist = [(1.0, NEAR_TWO["sample_rate"], NEAR_TWO["steps"], 1.9, 10, 2.0)]
    assert proven_epsilon_history(hist, NEAR_TWO["delta"]) == rep.epsilon


def test_compute_delta_keeps_the_renyi_bound_where_the_gaussians_prv_fails(monkeypatch):
    from opacus_gg.accountants import api
    from opacus_gg.accountants.ball_rdp import rdp_ball_delta

    kw = {k: v for k, v in NEAR_TWO.items() if k != "delta"}
    segs = normalize_history([(1.0, kw["sample_rate"], kw["steps"], 1.9, 10, 2.0)])
    both = compute_delta(epsilon=1.0, **kw)
    assert both < rdp_ball_delta(segs, 1.0)  # the Gaussian's δ is the smaller here

    def failing(*a, **k):
        raise ArithmeticError("simulated")

    monkeypatch.setattr(api, "compose_delta", failing)
    assert compute_delta(epsilon=1.0, **kw) == rdp_ball_delta(segs, 1.0)


def test_dominating_gaussian_is_composed_at_small_epsilon_whatever_the_gate():
    """Where the Rényi bound sits near its floor (ε ≈ 0.02 at δ = 1e-5) the conversion loses several times over: the
    Gaussian is composed past the ratio gate and published (β = p = 1.5, measured 0.0197 → 0.0032)."""
    kw = dict(noise_multiplier=8.0, sample_rate=0.001, steps=100, delta=1e-5, beta=1.5, dim=100, clip_norm_p=1.5)
    rep = compute_epsilon(**kw)
    d = rep.details
    assert d["epsilon_rdp"] <= 0.1 and rep.method == "prv_gaussian" and d["gaussian_domination"] == "composed"
    assert rep.epsilon < d["epsilon_rdp"] / 3
    assert epsilon_lower([(8.0, 0.001, 100, 1.5)], 1e-5, shift=(0.125,)) <= rep.epsilon
