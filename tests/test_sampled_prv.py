"""Paper mode: the sampled PRV of Appendix B.3 against exact references (Opacus, dp-accounting, our oracle)."""

from __future__ import annotations

import functools
import math
import os
import sys
import warnings

import numpy as np
import pytest
from scipy import stats

from opacus.accountants import PRVAccountant
from opacus.accountants.analysis.prv import PoissonSubsampledGaussianPRV

from opacus_gg.accountants import compute_epsilon
from opacus_gg.accountants import paper as S

sys.path.insert(0, os.path.dirname(__file__))

N = 10**6


@functools.lru_cache(maxsize=None)
def _details(history: tuple, delta: float, n: int = N, seed: int = 0) -> dict:
    """Shared between tests with the same setting (the computation is deterministic given the seed)."""
    return S.sampled_epsilon_details(list(history), delta, n_samples=n, seed=seed, diagnostics=True)


def _remove_only_oracle(beta, sigma, q, steps, delta, interval=1e-4):
    """dp-accounting PLD of the remove direction only (the direction paper mode accounts)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from dp_accounting.pld import privacy_loss_mechanism as plm
    from gg_oracle import GGPrivacyLoss

    pmf = pld_lib._create_pld_pmf_from_monotone_privacy_loss(
        GGPrivacyLoss(beta, sigma, 1.0, q, plm.AdjacencyType.REMOVE), pessimistic_estimate=True,
        value_discretization_interval=interval, use_connect_dots=True)
    return float(pmf.self_compose(steps).get_epsilon_for_delta(delta))


# ------------------------------------------------------------------------------------------ the samples
def test_loss_samples_beta2_are_normal_ks():
    # at β = 2, ℓ_P = (|z+a|² - |z|²)/2 = a z + a²/2 ~ N(a²/2, a²), a = 1/σ
    sigma = 0.8
    a = 1 / sigma
    loss = S.one_hot_loss_samples(sigma, 2.0, 200_000, seed=3)
    assert np.all(np.diff(loss) >= 0)
    p = stats.kstest(loss, stats.norm(a * a / 2, a).cdf).pvalue
    assert p > 1e-3


def test_loss_samples_beta1_atoms():
    # β = 1: ℓ_P ∈ [-a, a] with atoms Pr[ℓ = a] = Pr[z ≥ 0] = 1/2 and Pr[ℓ = -a] = Pr[z ≤ -a] = e^{-a}/2
    sigma = 2.0
    a = 1 / sigma
    loss = S.one_hot_loss_samples(sigma, 1.0, 400_000, seed=1)
    assert loss.min() >= -a - 1e-12 and loss.max() <= a + 1e-12
    top = np.mean(np.isclose(loss, a))
    bottom = np.mean(np.isclose(loss, -a))
    se = math.sqrt(0.25 / loss.size)
    assert abs(top - 0.5) < 5 * se
    assert abs(bottom - math.exp(-a) / 2) < 5 * se


def test_empirical_cdf_matches_opacus_gaussian_prv_within_dkw():
    # the empirical CDF of Y = log(1-q+q e^ℓ) vs Opacus's exact subsampled-Gaussian PRV CDF: sup error ≤ DKW radius
    sigma, q = 1.0, 0.1
    prv = S.sampled_prv(sigma, q, 2.0, N, seed=0)
    assert abs(prv.weights.sum() - 1) < 1e-9
    exact = PoissonSubsampledGaussianPRV(sample_rate=q, noise_multiplier=sigma)
    ts = np.quantile(prv.values, np.linspace(0.001, 0.999, 2000))
    err = np.max(np.abs(prv.cdf(ts) - exact.cdf(ts)))
    assert err < S.dkw_radius(N, 1e-3)
    assert np.all(np.diff(prv.cdf(np.sort(ts))) >= 0)


def test_cache_keyed_by_all_parameters():
    a = S.one_hot_loss_samples(1.0, 1.5, 10_000, seed=0)
    assert a is S.one_hot_loss_samples(1.0, 1.5, 10_000, seed=0)
    assert not np.array_equal(a, S.one_hot_loss_samples(1.0, 1.5, 10_000, seed=1))
    assert not np.array_equal(a, S.one_hot_loss_samples(1.1, 1.5, 10_000, seed=0))
    assert not np.array_equal(a, S.one_hot_loss_samples(1.0, 1.6, 10_000, seed=0))
    with pytest.raises(ValueError):
        a[0] = 0.0  # read-only: the cache cannot be corrupted


def test_trimmed_moves_mass():
    prv = S.sampled_prv(1.0, 0.2, 1.5, 10_000, seed=0)
    lo, hi = prv.trimmed(0.01, "low"), prv.trimmed(0.01, "high")
    for p in (lo, hi):
        assert abs(p.weights.sum() - 1) < 1e-12
    assert lo.mean() > prv.mean() > hi.mean()
    assert lo.values[0] >= prv.values[0] and hi.values[-1] <= prv.values[-1]


# --------------------------------------------------------------------------- ε against exact references
def test_beta2_agrees_with_opacus_prv_within_error_bars():
    d = S.sampled_epsilon_details([(1.0, 0.01, 1000, 2.0)], 1e-5, n_samples=N, seed=0, diagnostics=True)
    acc = PRVAccountant()
    acc.history = [(1.0, 0.01, 1000)]
    exact = acc.get_epsilon(1e-5)  # Opacus, upper bound with eps_error 0.01
    assert d["epsilon_lower"] <= exact <= d["epsilon_upper"] + 0.01
    assert d["epsilon_upper"] - d["epsilon_lower"] < 0.3  # the error bars are informative
    assert 0 < d["mc_std_error"] < 0.08 and len(d["mc_replicate_estimates"]) == 8
    assert d["tail_sensitivity_lower"] <= d["epsilon_estimate"] <= d["tail_sensitivity_upper"]
    assert "Monte Carlo estimate" in d["label"]


def test_beta2_heterogeneous_history_matches_opacus():
    hist = [(1.2, 0.02, 200, 2.0), (0.9, 0.01, 300, 2.0)]
    d = S.sampled_epsilon_details(hist, 1e-5, n_samples=400_000, seed=2, diagnostics=True)
    acc = PRVAccountant()
    acc.history = [(1.2, 0.02, 200), (0.9, 0.01, 300)]
    exact = acc.get_epsilon(1e-5)
    assert d["epsilon_lower"] <= exact <= d["epsilon_upper"] + 0.01


def test_beta1_agrees_with_dp_accounting_laplace():
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    sigma, q, T, delta = 2.0, 0.05, 200, 1e-5
    d = S.sampled_epsilon_details([(sigma, q, T, 1.0)], delta, n_samples=N // 2, seed=0, diagnostics=True)
    pld = pld_lib.from_laplace_mechanism(sigma, sensitivity=1.0, sampling_prob=q)
    exact_remove = float(pld._pmf_remove.self_compose(T).get_epsilon_for_delta(delta))
    assert d["epsilon_lower"] <= exact_remove <= d["epsilon_upper"] + 0.01
    assert d["epsilon_upper"] - d["epsilon_lower"] < 0.1


def test_beta15_agrees_with_independent_oracle():
    sigma, q, T, delta = 1.0, 0.05, 200, 1e-5
    d = _details(((sigma, q, T, 1.5),), delta, N // 2)
    exact = _remove_only_oracle(1.5, sigma, q, T, delta)
    assert d["epsilon_lower"] <= exact <= d["epsilon_upper"] + 0.01
    assert "NOT a privacy guarantee" in d["label"]


@pytest.mark.slow
@pytest.mark.ci_slow
def test_beta3_agrees_with_independent_oracle():
    sigma, q, T, delta = 1.0, 0.02, 100, 1e-6
    d = S.sampled_epsilon_details([(sigma, q, T, 3.0)], delta, n_samples=N, seed=0, diagnostics=True)
    exact = _remove_only_oracle(3.0, sigma, q, T, delta)
    assert d["epsilon_lower"] <= exact <= d["epsilon_upper"] + 0.01


def test_dkw_bracket_contains_exact_one_step():
    # one step, δ ≫ DKW radius: the correct high-probability bracket exists and contains the exact ε
    sigma, delta = 1.0, 0.05
    d = S.sampled_epsilon_details([(sigma, 1.0, 1, 1.5)], delta, n_samples=N, seed=0, n_replicates=2, diagnostics=True)
    exact = _remove_only_oracle(1.5, sigma, 1.0, 1, delta, interval=1e-3)
    assert d["dkw_epsilon_lower"] <= exact <= d["dkw_epsilon_upper"]
    assert d["dkw_epsilon_upper"] - d["dkw_epsilon_lower"] < 0.5
    assert d["dkw_failure_prob"] == pytest.approx(1e-6)


def test_dkw_bracket_vacuous_for_many_steps_and_says_so():
    d = S.sampled_epsilon_details([(1.0, 0.01, 1000, 2.0)], 1e-5, n_samples=100_000, seed=0, n_replicates=2,
                                  diagnostics=True)
    assert d["dkw_epsilon_upper"] == math.inf
    assert d["dkw_delta_slack"] > 1e-5
    assert d["dkw_samples_needed"] > 1e12


# --------------------------------------------------------------------------------------- Theorem 6 terms
def test_theorem6_terms_values():
    t = S.paper_theorem6_terms(n_samples=10**6, steps=1, mesh=1e-3, domain_L=10.0, delta=1e-5, prv_std=1.0)
    assert t["thm6_full_eta_lower_bound"] == pytest.approx(2 * math.sqrt(10 / (1e6 * 1e-3)))
    assert not t["thm6_full_usable"]
    assert t["thm6_conference_failure_prob"] == pytest.approx(2 * math.exp(-2))
    assert t["thm6_conference_valid"] is False
    assert t["thm6_full_samples_needed"] == pytest.approx(4 * 10 / (1e-3 * 1e-10))
    big = S.paper_theorem6_terms(n_samples=10**20, steps=1, mesh=1e-3, domain_L=10.0, delta=1e-5, prv_std=1.0)
    assert big["thm6_full_usable"]


def test_details_report_theorem6_and_failure_probability():
    d = S.sampled_epsilon_details([(1.0, 0.1, 10, 2.0)], 1e-5, n_samples=100_000, seed=0, diagnostics=True)
    for key in ("thm6_conference_failure_prob", "thm6_conference_eps_shift", "thm6_full_eta_lower_bound",
                "dkw_radius", "dkw_failure_prob", "mc_std_error", "domain_L", "mesh", "tail_sensitivity_upper"):
        assert key in d and np.isfinite(d[key])
    assert d["epsilon_lower"] <= d["epsilon_estimate"] <= d["epsilon"] <= d["epsilon_upper"]
    assert d["direction"] == "remove" and d["shape_k"] == 1


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("history, delta, match", [
    ([(0.0, 0.1, 10, 2.0)], 1e-5, "noise_multiplier"),
    ([(1.0, 0.0, 10, 2.0)], 1e-5, "sample_rate"),
    ([(1.0, 1.5, 10, 2.0)], 1e-5, "sample_rate"),
    ([(1.0, 0.1, 0, 2.0)], 1e-5, "steps"),
    ([(1.0, 0.1, 10, 0.5)], 1e-5, "beta"),
    ([(1.0, 0.1, 10, 2.0)], 0.0, "delta"),
    ([(1.0, 0.1, 10, 2.0)], 1.0, "delta"),
    ([], 1e-5, "history"),
])
def test_bad_input_raises(history, delta, match):
    with pytest.raises(ValueError, match=match):
        S.sampled_compose_epsilon(history, delta, n_samples=10_000)


def test_bad_n_samples():
    with pytest.raises(ValueError, match="n_samples"):
        S.sampled_prv(1.0, 0.1, 2.0, n_samples=10)


# ----------------------------------------------------------------- the EpsilonReport (accountant package)
def test_paper_epsilon_report_labels():
    with pytest.warns(UserWarning, match="NOT a privacy guarantee"):
        rep = S.paper_epsilon_report([(1.0, 0.05, 50, 1.5, 1000, 1.5)], 1e-5, n_samples=200_000, n_replicates=2,
                                     diagnostics=True)
    assert rep.mode == "paper" and rep.certified is False
    assert rep.direction == "remove" and rep.shape_k == 1
    assert rep.epsilon_lower <= rep.epsilon_estimate <= rep.epsilon <= rep.epsilon_upper
    assert "NOT a privacy guarantee" in rep.details["label"]
    assert "thm6_full_eta_lower_bound" in rep.details
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep2 = S.paper_epsilon_report([(1.0, 0.05, 50, 2.0, 1000, 2.0)], 1e-5, n_samples=200_000, n_replicates=2)
    assert rep2.certified is False and "Monte Carlo" in rep2.details["label"]


def test_sampled_agrees_with_certified_one_hot():
    # the exact one-hot (dim = 1) certified value
    sigma, q, T, delta = 1.0, 0.05, 200, 1e-5
    cert = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=T, delta=delta, beta=1.5, dim=1)
    d = _details(((sigma, q, T, 1.5),), delta, N // 2)
    assert cert.certified
    if cert.direction == "remove":
        assert d["epsilon_lower"] <= cert.epsilon <= d["epsilon_upper"] + 0.02
    else:  # add dominates: the certified bound must be at least the remove-direction estimate
        assert cert.epsilon >= d["epsilon_lower"]
