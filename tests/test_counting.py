"""GG counting queries (opacus_gg.companions.counting): analytic Gaussian reference, ℓ∞ error vs Monte Carlo, calibration."""

import math
import warnings

import pytest
import torch
from scipy import special

from opacus_gg import accountants as acc
from opacus_gg.accountants.ball_rdp import rdp_ball_epsilon
from opacus_gg.accountants.history import normalize_history
from opacus_gg.companions import counting
from opacus_gg.distribution import sample


@pytest.mark.parametrize("eps,delta,sens", [(1.0, 1e-5, 1.0), (0.5, 1e-6, math.sqrt(100)), (3.0, 1e-3, 2.0)])
def test_analytic_gaussian_against_dp_accounting(eps, delta, sens):
    from dp_accounting.pld import privacy_loss_distribution as pld

    sigma = counting.analytic_gaussian_sigma(eps, delta, sens)
    # independent check: dp-accounting's Gaussian PLD (pessimistic) at σ and slightly below σ
    d_at = pld.from_gaussian_mechanism(sigma, sensitivity=sens, value_discretization_interval=1e-4)
    d_below = pld.from_gaussian_mechanism(sigma * 0.99, sensitivity=sens, value_discretization_interval=1e-4)
    # dp-accounting's pessimistic PLD on a 1e-4 loss grid overstates δ slightly: 2 % covers it
    assert d_at.get_delta_for_epsilon(eps) == pytest.approx(delta, rel=2e-2)
    assert d_below.get_delta_for_epsilon(eps) > delta
    # classical σ = Δ√(2 log(1.25/δ))/ε is valid for ε < 1 and never smaller than the analytic one
    if eps < 1:
        assert sigma < sens * math.sqrt(2 * math.log(1.25 / delta)) / eps


@pytest.mark.parametrize("k,beta,scale", [(1, 2.0, 1.0), (50, 1.0, 2.0), (1000, 1.5, 1.0), (1000, 4.0, 3.0)])
def test_linf_error_matches_monte_carlo(k, beta, scale):
    n = 4000
    gen = torch.Generator().manual_seed(1234)
    m = sample((n, k), beta, scale, generator=gen, dtype=torch.float64).abs().amax(dim=1).numpy()
    mean = counting.linf_error_mean(k, beta, scale)
    assert abs(m.mean() - mean) < 4 * m.std() / math.sqrt(n)
    q95 = counting.linf_error_quantile(k, beta, scale, 0.95)
    frac = (m <= q95).mean()
    assert abs(frac - 0.95) < 4 * math.sqrt(0.95 * 0.05 / n)


@pytest.mark.parametrize("beta", [1.0, 2.0, 3.5])
def test_single_query_closed_form(beta):
    s = 1.7  # E|X| = s β^{1/β} Γ(2/β)/Γ(1/β)
    ref = s * beta ** (1 / beta) * math.exp(special.gammaln(2 / beta) - special.gammaln(1 / beta))
    assert counting.linf_error_mean(1, beta, s) == pytest.approx(ref, rel=1e-8)  # closed form vs quadrature


def test_paper_closed_form_and_conditions():
    p = counting.paper_scale(10**6, 4.0, 1.0, 1e-7)
    assert p["sigma_paper"] == pytest.approx(185 * math.sqrt(10**6 * 4 * math.log(1e7)))
    assert p["scale"] == pytest.approx(p["sigma_paper"] / 4 ** 0.25)
    assert p["conditions_met"]
    assert not counting.paper_scale(100, 3.0, 1.0, 1e-3)["conditions_met"]  # odd p


@pytest.mark.parametrize("kwargs,name", [
    (dict(k=0), "k"), (dict(beta=0.5), "beta"), (dict(epsilon=-1.0), "epsilon"), (dict(delta=2.0), "delta")])
def test_bad_input(kwargs, name):
    base = dict(k=10, beta=2.0, epsilon=1.0, delta=1e-5)
    base.update(kwargs)
    with pytest.raises(ValueError, match=name):
        counting.counting_report(base["k"], base["beta"], base["epsilon"], base["delta"], scale=1.0)


@pytest.mark.parametrize("k", [1, 10, 100])
def test_gaussian_calibration_equals_analytic_gaussian(k):
    eps, delta = 1.0, 1e-5
    s = counting.calibrate_scale(k, 2.0, eps, delta)
    ref = counting.analytic_gaussian_sigma(eps, delta, math.sqrt(k))
    assert ref * (1 - 1e-3) <= s <= ref * 1.01


@pytest.mark.parametrize("beta", [1.5, 3.0])
def test_vertex_form_equals_k_fold_composition(beta):
    """calibrate_scale asks for (steps=1, dim=k, p=inf); that is the k-fold composition (steps=k, dim=1)."""
    kw = dict(noise_multiplier=6.0, sample_rate=1.0, delta=1e-5, beta=beta)
    vertex = acc.compute_epsilon(steps=1, dim=20, clip_norm_p=math.inf, **kw)
    composed = acc.compute_epsilon(steps=20, dim=1, **kw).epsilon
    # two accountant runs of the same mechanism: each within eps_error of the truth
    assert vertex.method == "prv" and vertex.epsilon == pytest.approx(composed, rel=2e-3)


def test_vertex_form_at_beta_4_is_the_prv_composition_between_the_oracle_and_the_renyi_bound():
    """β = 4, σ = 6, d = 20, p = ∞: the product pair's one-step PRV had mass 1 + 3.4e-8 (its grid drifted from the
    one its masses were split on, docs/accounting.md Lemma R2), so the Rényi bound 6.98 was published. Now the PRV
    is used, without a warning: equal to the 20-fold composition, above the rigorous lower bound, below Rényi."""
    from lower_bound_oracle import epsilon_lower

    kw = dict(noise_multiplier=6.0, sample_rate=1.0, delta=1e-5, beta=4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        vertex = acc.compute_epsilon(steps=1, dim=20, clip_norm_p=math.inf, **kw)
    composed = acc.compute_epsilon(steps=20, dim=1, **kw).epsilon
    rdp = rdp_ball_epsilon(normalize_history([(6.0, 1.0, 1, 4.0, 20, math.inf)]), 1e-5)[0]
    lower = epsilon_lower([(6.0, 1.0, 1, 4.0)], 1e-5, shift=[1.0] * 20)
    # measured: oracle 5.7517 (5.8646 with bins=8000) ≤ PRV 5.8918 ≈ composed 5.8917 < Rényi 6.9789
    assert vertex.method == "prv" and "prv_failed" not in vertex.details
    assert lower <= vertex.epsilon < rdp
    assert vertex.epsilon == pytest.approx(composed, rel=2e-3)  # two accountant runs, each within eps_error


def test_counts_at_beta_4_are_calibrated_by_the_prv_to_the_target_epsilon():
    """k = 20 counts at ε = 5: the search used to meet the Rényi fallback (σ = 7.63, ε = 4.39, loose); the PRV
    gives σ whose proven ε is within the solver's tolerance of the target."""
    s = counting.calibrate_scale(20, 4.0, 5.0, 1e-5)
    eps = acc.compute_epsilon(noise_multiplier=s, sample_rate=1.0, steps=1, delta=1e-5, beta=4.0, dim=20,
                              clip_norm_p=math.inf, eps_error=0.002)  # the solver's grid
    assert eps.method == "prv" and 5.0 - 0.01 <= eps.epsilon <= 5.0


def test_report_and_comparisons():
    rep = counting.counting_report(100, 4.0, 1.0, 1e-5)
    assert rep.certified and rep.noise_std > 0
    assert rep.paper["scale"] > 10 * rep.scale  # the closed form is far more conservative than exact calibration
    assert rep.linf_error_mean < rep.paper["linf_error_mean"]
