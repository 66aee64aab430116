"""prv-accountant (Microsoft, 0.2.0) as a second, independent composition engine for the GG mechanism.

:mod:`opacus_gg.accountants.prv_variable` exposes the Poisson-subsampled 1-D GG privacy random variable as a
``prv_accountant`` PRV. Its laws are checked against independent closed forms (prv-accountant's own Gaussian and
Laplace PRVs, scipy's norm/gennorm with root finding); the composed ε against Opacus's ``PRVAccountant``
(β = 2), opacus-gg's certified ``compute_epsilon`` (β = 1, 1.5, 2) and dp-accounting's Laplace PLD (β = 1).

Tolerances: prv-accountant returns (ε_lower, ε_estimate, ε_upper) with ε_lower ≤ ε(δ) ≤ ε_upper and
ε_upper − ε_estimate ≈ eps_error (its Theorem 5.5 error budget, here 0.01 absolute, δ_error = δ/1000). Two
correct engines must therefore have overlapping intervals, and their estimates may differ by up to the sum of
their eps_errors; both are asserted. Against Opacus at β = 2 (the same algorithm on the same Gaussian law, on the
same origin-aligned grid; only the domain width differs) agreement is asserted to 1e-4 relative.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import prv_accountant
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from opacus.accountants import PRVAccountant as OpacusPRVAccountant
from opacus.accountants.analysis.rdp import _compute_rdp
from prv_accountant.privacy_random_variables import LaplaceMechanism, PoissonSubsampledGaussianMechanism
from scipy import integrate, optimize, stats

from opacus_gg.accountants import compute_epsilon, compute_epsilon_history
from opacus_gg.accountants.prv_variable import (
    GGPrivacyRandomVariable,
    PRVAccountant,
    TruncatedPRV,
    prv_accountant_epsilon,
)

EPS_ERROR = 0.01


def _opacus_eps(sigma, q, steps, delta):
    acc = OpacusPRVAccountant()
    acc.history = [(sigma, q, steps)]
    return acc.get_epsilon(delta, eps_error=EPS_ERROR, delta_error=delta / 1000)


def _assert_consistent(prv_bounds, report, eps_error_ours=EPS_ERROR):
    """Both engines' intervals contain the true ε: they overlap; estimates within the summed eps_errors."""
    lower, estimate, upper = prv_bounds
    assert lower <= report.epsilon + 1e-12, (prv_bounds, report.epsilon)
    assert report.epsilon_lower <= upper + 1e-12, (prv_bounds, report.epsilon_lower)
    assert abs(estimate - report.epsilon_estimate) <= EPS_ERROR + eps_error_ours, (prv_bounds, report)


# ---------------------------------------------------------------- the PRV's laws against closed forms

@pytest.mark.parametrize("sigma,q", [(1.0, 0.02), (0.6, 0.3), (2.0, 1.0)])
def test_beta2_remove_cdf_matches_prv_accountant_gaussian(sigma, q):
    t = np.linspace(-4.0, 8.0, 3001)
    ours = GGPrivacyRandomVariable(sigma, q, beta=2.0).cdf(t)
    ref = np.asarray(PoissonSubsampledGaussianMechanism(q, sigma).cdf(t), dtype=np.float64)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)  # closed-form CDFs compared pointwise: float64 round-off


@pytest.mark.parametrize("sigma,q", [(1.0, 0.02), (0.6, 0.3)])
def test_beta2_add_cdf_closed_form(sigma, q):
    # add: Y = −log(1 − q + q e^ℓ), ℓ = a x − a²/2, x ~ N(0, 1):
    # F(t) = P(x ≥ (u + a²/2)/a) with u = log((e^{−t} − 1 + q)/q)
    a = 1.0 / sigma
    t = np.linspace(-6.0, -math.log1p(-q) - 1e-9, 2001)
    u = np.log((np.exp(-t) - 1.0 + q) / q)
    ref = stats.norm.sf((u + a * a / 2) / a)
    ours = GGPrivacyRandomVariable(sigma, q, beta=2.0, direction="add").cdf(t)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)  # closed-form CDFs compared pointwise: float64 round-off
    assert np.all(GGPrivacyRandomVariable(sigma, q, 2.0, "add").cdf(np.array([-math.log1p(-q), 3.0])) == 1.0)


def test_beta1_no_subsampling_matches_prv_accountant_laplace():
    sigma = 2.0  # Laplace scale 2 per unit sensitivity: loss in [−1/2, 1/2]
    t = np.linspace(-1.0, 1.0, 2001)
    t = t[np.abs(np.abs(t) - 0.5) > 1e-9]  # LaplaceMechanism's cdf is not right-continuous at its atoms
    ours = GGPrivacyRandomVariable(sigma, 1.0, beta=1.0).cdf(t)
    # Laplace: the same closed form, float64 round-off
    np.testing.assert_allclose(ours, LaplaceMechanism(0.5).cdf(t), rtol=0, atol=1e-15)


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_beta1_atoms_have_the_exact_masses(direction):
    # x ~ Laplace(1) (Q) or Laplace(1) + a (P); ℓ = −a on x ≤ 0 and a on x ≥ a
    sigma, q = 0.8, 0.1
    a = 1.0 / sigma
    prv = GGPrivacyRandomVariable(sigma, q, beta=1.0, direction=direction)
    lo, hi = prv.support()
    if direction == "remove":  # X ~ (1−q)Q + qP; Y = log(1 − q + q e^ℓ)
        mass_lo = (1 - q) * 0.5 + q * 0.5 * math.exp(-a)  # ℓ = −a
        mass_hi = (1 - q) * 0.5 * math.exp(-a) + q * 0.5  # ℓ = a
        # atom location in closed form: float64 round-off
        assert lo == pytest.approx(math.log(1 - q + q * math.exp(-a)), abs=1e-15)
    else:  # X ~ Q; Y = −log(1 − q + q e^ℓ): ℓ = a gives the lower end
        mass_lo = 0.5 * math.exp(-a)
        mass_hi = 0.5
        # atom location in closed form: float64 round-off
        assert hi == pytest.approx(-math.log(1 - q + q * math.exp(-a)), abs=1e-15)
    assert prv.atoms() == [lo, hi]
    below = np.nextafter(np.array([lo, hi]), -np.inf)
    jumps = prv.cdf(np.array([lo, hi])) - prv.cdf(below)
    np.testing.assert_allclose(jumps, [mass_lo, mass_hi], rtol=1e-12)  # atom masses in closed form: float64 round-off
    assert prv.cdf(np.array([hi]))[0] == 1.0 and prv.cdf(below[:1])[0] == 0.0


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_beta15_cdf_matches_gennorm_with_root_finding(direction):
    beta, sigma, q = 1.5, 0.7, 0.05
    a = 1.0 / sigma
    rv = stats.gennorm(beta, scale=beta ** (1 / beta))  # density ∝ exp(−|x|^β/β)

    def x_of_loss(u):  # ℓ(x) = (|x|^β − |x − a|^β)/β = u, ℓ increasing
        return optimize.brentq(lambda x: (abs(x) ** beta - abs(x - a) ** beta) / beta - u, -1e3, 1e3, xtol=1e-14)

    prv = GGPrivacyRandomVariable(sigma, q, beta, direction)
    for t in [-2.0, -0.3, -0.01, 0.0, 0.004, 0.05, 0.4, 1.5]:
        s = t if direction == "remove" else -t
        if s <= math.log1p(-q):
            ref = 0.0 if direction == "remove" else 1.0
        else:
            x = x_of_loss(math.log((math.exp(s) - 1 + q) / q))
            ref = (1 - q) * rv.cdf(x) + q * rv.cdf(x - a) if direction == "remove" else rv.sf(x)
        # reference CDF from scipy's normal law: float64 round-off
        assert prv.cdf(np.array([t]))[0] == pytest.approx(ref, abs=1e-12), t
    f, s = prv.cdf_sf(np.linspace(-3, 3, 101))
    np.testing.assert_allclose(f + s, 1.0, atol=1e-15)  # cdf + sf = 1 up to float64 round-off
    assert np.all(np.diff(f) >= 0)


def test_no_subsampling_directions_agree_by_symmetry():
    # q = 1: remove is ℓ(X), X ~ P; add is −ℓ(X), X ~ Q; the reflection x ↦ a − x maps one onto the other
    t = np.linspace(-3, 3, 601)
    for beta in (1.0, 1.5, 2.0):
        rem = GGPrivacyRandomVariable(0.9, 1.0, beta, "remove")
        add = GGPrivacyRandomVariable(0.9, 1.0, beta, "add")
        # β = 2: both directions have the same PRV law, up to round-off
        np.testing.assert_allclose(rem.cdf(t), add.cdf(t), atol=1e-12)


def test_kinks_are_finite_for_huge_losses():
    # β = 3, σ = 0.05: ℓ(a) = a³/3 ≈ 2667 (e^ℓ overflows); Y(a) = ℓ + log(q + (1 − q)e^{−ℓ})
    q = 0.01
    prv = GGPrivacyRandomVariable(0.05, q, beta=3.0)
    lo, hi = prv.kinks()
    assert hi == pytest.approx(20.0**3 / 3 + math.log(q), rel=1e-15)  # closed-form support end: float64 round-off
    assert lo == pytest.approx(math.log1p(-q), rel=1e-12)  # closed-form support end: float64 round-off
    add = GGPrivacyRandomVariable(0.05, q, beta=3.0, direction="add").kinks()
    assert add == [-hi, -lo]


def test_probability_uses_the_upper_tail_accurately():
    prv = GGPrivacyRandomVariable(0.5, 0.01, beta=1.5)
    a, b = np.array([8.0]), np.array([8.5])  # a mass (~1e-70) far below the float64 resolution of 1 − F
    p = prv.probability(a, b)[0]
    # probability of an interval from the same sf: float64 round-off
    assert 0.0 < p == pytest.approx(prv.sf(a)[0] - prv.sf(b)[0], rel=1e-12)
    assert float(prv.cdf(b)[0] - prv.cdf(a)[0]) == 0.0  # what the CDF difference would have given


# ---------------------------------------------------------------- rdp and the truncated mean

def test_rdp_is_the_exact_gaussian_rdp_at_integer_orders_and_an_upper_bound_between():
    sigma, q = 1.1, 0.03
    prv = GGPrivacyRandomVariable(sigma, q, beta=2.0)
    for alpha in (2, 3, 8, 32):
        # our RDP by quadrature vs Opacus's closed-form sum: quadrature error < 1e-6
        assert prv.rdp(alpha) == pytest.approx(float(_compute_rdp(q, sigma, alpha)), rel=1e-6)
    for alpha in (1.1, 1.5, 2.5, 10.9):
        assert prv.rdp(alpha) >= float(_compute_rdp(q, sigma, alpha))
        assert prv.rdp(alpha) == prv.rdp(max(2, math.ceil(alpha)))
    assert prv.rdp(math.inf) == math.inf
    with pytest.raises(ValueError, match="alpha"):
        prv.rdp(1.0)


@pytest.mark.parametrize("beta,kl", [
    (1.0, lambda a: a - 1 + math.exp(-a)),  # KL of Laplace(a, 1) to Laplace(0, 1)
    (2.0, lambda a: a * a / 2),
])
def test_truncated_mean_is_the_kl_divergence_without_subsampling(beta, kl):
    # q = 1, remove: E_P[ℓ] = KL(P‖Q); at β = 1 the atoms at ±a carry mass ½ + ½e^{−a}
    sigma = 0.7
    prv = GGPrivacyRandomVariable(sigma, 1.0, beta)
    trunc = TruncatedPRV(prv, -40.0, 40.0)
    # mean of the truncated PRV by quadrature vs closed-form KL (truncated mass < 1e-9)
    assert trunc.mean() == pytest.approx(kl(1 / sigma), rel=1e-9, abs=1e-12)


def test_truncated_cdf_starts_at_zero_where_the_release_does_not():
    # add direction, β = 2: Y is unbounded below, so F(t_min) > 0 on a narrow window
    prv = GGPrivacyRandomVariable(0.5, 0.3, beta=2.0, direction="add")
    t_min, t_max = -1.0, 0.3
    f_min = float(prv.cdf(np.array([t_min]))[0])
    assert f_min > 1e-3
    ours = TruncatedPRV(prv, t_min, t_max)
    released = prv_accountant.privacy_random_variables.PrivacyRandomVariableTruncated(prv, t_min, t_max)
    t = np.linspace(t_min, t_max - 1e-9, 101)
    expected = (prv.cdf(t) - f_min) / (prv.cdf(np.array([t_max]))[0] - f_min)
    np.testing.assert_allclose(ours.cdf(t), expected, atol=1e-15)  # same closed form evaluated twice: float64 round-off
    assert ours.cdf(np.array([t_min]))[0] == 0.0 and ours.cdf(np.array([t_max]))[0] == 1.0
    assert released.cdf(np.array([t_min]))[0] > 1e-3  # F(t_min)/m: the 0.2.0 defect


@pytest.mark.parametrize("beta,sigma,q", [(1.5, 0.8, 0.2), (3.0, 1.0, 0.02), (1.2, 2.0, 0.001)])
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_truncated_mean_matches_an_x_space_integral(direction, beta, sigma, q):
    # E[Y] = ∫ y(x) dP'(x), integrated over x with gennorm densities (shares no code with the CDF path).
    # (3.0, 1.0, 0.02): a law concentrated on [log(1−q), 0] ⊂ [−20, 0], missed by an unsplit adaptive rule
    a = 1.0 / sigma
    rv = stats.gennorm(beta, scale=beta ** (1 / beta))

    def integrand(x):
        loss = (abs(x) ** beta - abs(x - a) ** beta) / beta
        y = math.log1p(q * math.expm1(loss))
        return y * ((1 - q) * rv.pdf(x) + q * rv.pdf(x - a)) if direction == "remove" else -y * rv.pdf(x)

    r = (60.0 * beta) ** (1 / beta)  # GG mass beyond |x| > r is below e^{−60}
    ref = sum(integrate.quad(integrand, lo, hi, epsabs=1e-14, epsrel=1e-12, limit=200)[0]
              for lo, hi in [(-r, 0), (0, a), (a, a + r)])
    trunc = TruncatedPRV(GGPrivacyRandomVariable(sigma, q, beta, direction), -20.0, 20.0)
    # two quadratures of the same mean: each within its own error estimate
    assert trunc.mean() == pytest.approx(ref, rel=1e-7, abs=2 * TruncatedPRV.MEAN_ATOL)


# ---------------------------------------------------------------- the released package's defect

def test_released_prv_accountant_mean_defect_and_the_local_fix():
    # prv-accountant 0.2.0 rejects its own Gaussian PRV here ("Discrete mean differs ...", upstream issue #36,
    # fixed by PR #38, not released); the local truncation fix composes it and matches Opacus's vendored copy.
    sigma, q, steps, delta = 0.5, 0.1, 20, 1e-5
    prv = PoissonSubsampledGaussianMechanism(q, sigma)
    with pytest.raises(RuntimeError, match="Discrete mean differs"):
        prv_accountant.PRVAccountant([prv], eps_error=EPS_ERROR, delta_error=delta / 1000,
                                     max_self_compositions=[steps])
    fixed = PRVAccountant([prv], eps_error=EPS_ERROR, delta_error=delta / 1000, max_self_compositions=[steps])
    upper = fixed.compute_epsilon(delta, [steps])[2]
    # both at eps_error = EPS_ERROR, far tighter than it: 1e-4 relative is discretization noise
    assert upper == pytest.approx(_opacus_eps(sigma, q, steps, delta), rel=1e-4)
    gg = prv_accountant_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=2.0)
    # same law, two discretizations: 1e-4 relative is discretization noise
    assert gg[2] == pytest.approx(upper, rel=1e-4)


# ---------------------------------------------------------------- composition: a second engine

BETA2_CASES = [(1.0, 0.02, 500, 1e-5), (2.0, 0.05, 200, 1e-6), (2.0, 0.01, 300, 1e-5)]


@pytest.mark.parametrize("sigma,q,steps,delta", BETA2_CASES)
def test_beta2_matches_opacus_and_compute_epsilon(sigma, q, steps, delta):
    remove = prv_accountant_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=2.0)
    # same law, two discretizations: 1e-4 relative is discretization noise
    assert remove[2] == pytest.approx(_opacus_eps(sigma, q, steps, delta), rel=1e-4)
    both = prv_accountant_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=2.0,
                                  direction="both")
    report = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=2.0)
    _assert_consistent(both, report)


BETA1_CASES = [(1.0, 0.02, 300, 1e-5), (2.0, 0.01, 500, 1e-5), (3.0, 1.0, 20, 1e-5)]


@pytest.mark.parametrize("sigma,q,steps,delta", BETA1_CASES)
def test_beta1_matches_compute_epsilon_and_dp_accounting_laplace(sigma, q, steps, delta):
    both = prv_accountant_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=1.0,
                                  direction="both")
    report = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=1.0, dim=1)
    _assert_consistent(both, report)
    # dp-accounting (both adjacency directions): its pessimistic (connect-the-dots) ε is ≥ the true ε ≥ ε_lower
    pess = pld.from_laplace_mechanism(sigma, sensitivity=1.0, pessimistic_estimate=True,
                                      value_discretization_interval=1e-4, sampling_prob=q)
    eps_pess = pess.self_compose(steps).get_epsilon_for_delta(delta)
    assert both[0] <= eps_pess
    assert abs(both[1] - eps_pess) <= EPS_ERROR


def test_beta15_dim1_matches_compute_epsilon():
    sigma, q, steps, delta = 1.0, 0.02, 300, 1e-5
    both = prv_accountant_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=1.5,
                                  direction="both")
    report = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=1.5, dim=1)
    _assert_consistent(both, report)


def test_heterogeneous_history_matches_compute_epsilon_history():
    # two segments with different β: prv-accountant's heterogeneous composer vs opacus-gg's history composition
    history = [(1.2, 0.02, 150, 1.0, 1), (1.0, 0.02, 150, 2.0, 1)]
    delta = 1e-5
    bounds = []
    for direction in ("remove", "add"):
        prvs = [GGPrivacyRandomVariable(s, q, beta, direction) for s, q, _, beta, _ in history]
        steps = [n for _, _, n, _, _ in history]
        acc = PRVAccountant(prvs, eps_error=EPS_ERROR, delta_error=delta / 1000, max_self_compositions=steps)
        bounds.append(acc.compute_epsilon(delta, steps))
    both = tuple(max(b[i] for b in bounds) for i in range(3))
    _assert_consistent(both, compute_epsilon_history(history, delta))


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs,name", [
    (dict(noise_multiplier=0.0, sample_rate=0.1), "noise_multiplier"),
    (dict(noise_multiplier=-1.0, sample_rate=0.1), "noise_multiplier"),
    (dict(noise_multiplier=1.0, sample_rate=0.0), "sample_rate"),
    (dict(noise_multiplier=1.0, sample_rate=1.5), "sample_rate"),
    (dict(noise_multiplier=1.0, sample_rate=0.1, beta=0.5), "beta"),
    (dict(noise_multiplier=1.0, sample_rate=0.1, direction="both"), "direction"),
])
def test_bad_prv_parameters_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        GGPrivacyRandomVariable(**kwargs)


@pytest.mark.parametrize("kwargs,name", [
    (dict(steps=0), "steps"),
    (dict(delta=0.0), "delta"),
    (dict(delta_error=1e-5), "delta_error"),
    (dict(direction="sideways"), "direction"),
    (dict(eps_error=0.0), "eps_error"),
])
def test_bad_epsilon_arguments_raise(kwargs, name):
    args = dict(noise_multiplier=1.0, sample_rate=0.01, steps=10, delta=1e-5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        prv_accountant_epsilon(**args)


def test_bad_accountant_arguments_raise():
    prv = GGPrivacyRandomVariable(1.0, 0.01)
    with pytest.raises(ValueError, match="max_self_compositions"):
        PRVAccountant([prv], eps_error=0.01, delta_error=1e-8, max_self_compositions=[0])
    with pytest.raises(ValueError, match="max_self_compositions"):
        PRVAccountant([prv, prv], eps_error=0.01, delta_error=1e-8, max_self_compositions=[5])
    with pytest.raises(ValueError, match="delta_error"):
        PRVAccountant([prv], eps_error=0.01, delta_error=0.0, max_self_compositions=[5])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # upstream's "Assuming that true epsilon < eps_max"
        with pytest.raises(ValueError, match="eps_max"):
            PRVAccountant([prv], eps_error=0.01, delta_error=1e-8, max_self_compositions=[5], eps_max=-1.0)
