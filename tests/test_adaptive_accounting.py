"""Adaptive clipping's noisy count inside the accountant: the step's pair is the product of the shift's pair and
the count's Gaussian pair, Poisson-subsampled jointly (docs/accounting.md, "Adaptive clipping: the count query
inside the accountant")."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from scipy import special

from opacus_gg.accountants import GGPRVAccountant, compute_epsilon
from opacus_gg.accountants.ball_rdp import step_rdp

DELTA = 1e-5


def _quiet(fn, *args, **kwargs):
    logger = logging.getLogger()
    level = logger.level
    logger.setLevel(logging.ERROR)  # dp-accounting logs that its optimistic PLD uses privacy buckets
    try:
        return fn(*args, **kwargs)
    finally:
        logger.setLevel(level)


@pytest.mark.parametrize("sigma,sigma_c,q,steps", [(1.0, 2.0, 0.01, 1000), (2.0, 1.5, 0.05, 100)])
def test_count_at_beta2_is_one_gaussian_with_the_combined_shift(sigma, sigma_c, q, steps):
    """β = 2: N(1/σ, 1) ⊗ N(1/σ_c, 1) is one Gaussian shift √(1/σ² + 1/σ_c²) (rotation invariance), i.e.
    σ_eff = (σ⁻² + σ_c⁻²)^(−1/2) (Andrew et al. 2021, Thm 1); checked against dp-accounting's Gaussian PLD."""
    ours = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA,
                           count_noise_multiplier=sigma_c).epsilon
    sigma_eff = (sigma ** -2 + sigma_c ** -2) ** -0.5
    same = compute_epsilon(noise_multiplier=sigma_eff, sample_rate=q, steps=steps, delta=DELTA).epsilon
    assert ours == pytest.approx(same, rel=1e-9)  # a Gaussian shift √(a² + c²) against 1/σ_eff: round-off only

    def oracle(pessimistic):
        one = pld.from_gaussian_mechanism(sigma_eff, sensitivity=1.0, pessimistic_estimate=pessimistic,
                                          value_discretization_interval=1e-4, sampling_prob=q)
        return one.self_compose(steps).get_epsilon_for_delta(DELTA)

    assert _quiet(oracle, False) - 1e-12 <= ours <= 1.005 * _quiet(oracle, True)


def _laplace_gaussian_loss_cdf(t, a, c, under_p):
    r"""P(ℓ ≤ t) of ℓ = ℓ_L(x) + ℓ_G(y) for Laplace(1) shifted by a ⊗ N(0, 1) shifted by c, under Q (or P).

    ℓ_L = |x| − |x − a| is −a (mass ½ under Q, e^{−a}/2 under P), a (e^{−a}/2 under Q, ½ under P), else 2x − a
    with density e^{−x}/2 (Q) or e^{−(a−x)}/2 (P) on (0, a); ℓ_G ~ N(∓c²/2, c²) (Q: −, P: +)."""
    m = c * c / 2.0 * (1.0 if under_p else -1.0)
    lo_mass, hi_mass = (math.exp(-a) / 2, 0.5) if under_p else (0.5, math.exp(-a) / 2)
    out = lo_mass * special.ndtr((t + a - m) / c) + hi_mass * special.ndtr((t - a - m) / c)
    x = np.linspace(0.0, a, 2001)  # Simpson on (0, a), smooth integrand
    dens = np.exp(-(a - x)) / 2 if under_p else np.exp(-x) / 2
    w = np.full(x.size, 2.0)
    w[1::2] = 4.0
    w[0] = w[-1] = 1.0
    w *= (x[1] - x[0]) / 3.0
    vals = special.ndtr((t[:, None] - (2 * x[None, :] - a) - m) / c)
    return out + vals @ (w * dens)


def test_count_at_beta1_matches_an_independent_joint_subsampling_oracle():
    """β = 1 (Laplace) ⊗ Gaussian count, subsampled jointly: the loss law of the product, built here from the
    Laplace and Gaussian CDFs alone on bins of 2e-3 (a post-processing of the true pair, so a lower bound),
    mixed (1 − q)Q + qP and composed by dp-accounting's PLD; ours is above its optimistic ε and within 1 %
    of its pessimistic one, in both directions."""
    sigma, sigma_c, q, steps = 1.0, 2.0, 0.05, 50
    a, c = 1.0 / sigma, 1.0 / sigma_c
    edges = np.arange(-a - 12 * c - 1.0, a + 12 * c + 1.0, 2e-3)
    pq = [np.diff(np.concatenate([[0.0], _laplace_gaussian_loss_cdf(edges, a, c, under), [1.0]]))
          for under in (False, True)]
    qm, pm = (np.maximum(v, 0.0) for v in pq)
    mix = (1 - q) * qm + q * pm
    keep = (qm > 0) & (mix > 0)
    log_q = {i: math.log(v) for i, v in enumerate(qm) if keep[i]}
    log_m = {i: math.log(v) for i, v in enumerate(mix) if keep[i]}

    def oracle(lower, upper, pessimistic):
        one = pld.from_two_probability_mass_functions(lower, upper, pessimistic_estimate=pessimistic,
                                                      value_discretization_interval=1e-4)
        return one.self_compose(steps).get_epsilon_for_delta(DELTA)

    opt = max(_quiet(oracle, log_q, log_m, False), _quiet(oracle, log_m, log_q, False))  # remove, add
    pes = max(_quiet(oracle, log_q, log_m, True), _quiet(oracle, log_m, log_q, True))
    ours = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA, beta=1.0,
                           count_noise_multiplier=sigma_c).epsilon
    without = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA, beta=1.0).epsilon
    assert opt - 1e-12 <= ours <= 1.01 * pes
    assert ours > 1.05 * without


@pytest.mark.parametrize("beta,dim,method", [(1.5, 1, "prv"), (1.5, 10, "rdp"), (3.0, 1, "prv")])
def test_count_strictly_increases_epsilon_and_fades_as_its_noise_grows(beta, dim, method):
    """The count is accounted (ε with it > ε without, at the same σ) on the PRV path (d = 1) and on the Rényi
    path over the ℓp ball (d > 1), and its share shrinks as σ_c grows."""
    kw = dict(noise_multiplier=1.0, sample_rate=0.02, steps=100, delta=DELTA, beta=beta, dim=dim)
    without = compute_epsilon(**kw)
    loud = compute_epsilon(count_noise_multiplier=2.0, **kw)
    quiet = compute_epsilon(count_noise_multiplier=50.0, **kw)
    assert loud.method == without.method == method
    assert loud.epsilon > quiet.epsilon > without.epsilon


def test_renyi_count_coordinate_adds_the_gaussian_moment():
    """Lemma 1 with the count as one more coordinate: at β = 2, d = 1 the step's RDP with (σ, σ_c) is the Gaussian
    RDP at σ_eff = (σ⁻² + σ_c⁻²)^(−1/2), both directions, at orders where the ball's moments are computed
    (between them both sides are chords of upper bounds, not comparable)."""
    orders = (2, 3, 4, 5, 6, 7, 8)
    sigma, sigma_c, q = 1.3, 2.0, 0.03
    ours = step_rdp(sigma, q, 2.0, 1, 2.0, orders, sigma_c)
    ref = step_rdp((sigma ** -2 + sigma_c ** -2) ** -0.5, q, 2.0, 1, 2.0, orders)
    for k in ("remove", "add"):
        np.testing.assert_allclose(ours[k], ref[k], rtol=1e-6)
    assert (ours["remove"] > step_rdp(sigma, q, 2.0, 1, 2.0, orders)["remove"]).all()


def test_checkpoint_round_trip_keeps_the_count_noise():
    """History entries carry σ_c (7-tuples) through state_dict; steps with another σ_c, or none, do not merge;
    an older checkpoint (6-tuples, no count) still loads and accounts no count."""
    acc = GGPRVAccountant(beta=1.5, dim=1)
    for _ in range(3):
        acc.step(noise_multiplier=1.0, sample_rate=0.02, count_noise_multiplier=4.0)
    acc.step(noise_multiplier=1.0, sample_rate=0.02)
    acc.step(noise_multiplier=1.0, sample_rate=0.02, count_noise_multiplier=8.0)
    assert acc.history == [(1.0, 0.02, 3, 1.5, 1, 1.5, 4.0), (1.0, 0.02, 1, 1.5, 1, 1.5),
                           (1.0, 0.02, 1, 1.5, 1, 1.5, 8.0)]
    other = GGPRVAccountant()
    other.load_state_dict(acc.state_dict())
    assert other.history == acc.history
    assert other.get_epsilon(DELTA) == acc.get_epsilon(DELTA)
    old = GGPRVAccountant()
    old.load_state_dict({"history": [(1.0, 0.02, 5, 1.5, 1, 1.5)], "mechanism": "gg_prv",
                         "defaults": {"beta": 1.5, "dim": 1, "clip_norm_p": None}})
    assert old.get_epsilon(DELTA) == compute_epsilon(noise_multiplier=1.0, sample_rate=0.02, steps=5, delta=DELTA,
                                                     beta=1.5, dim=1).epsilon


def test_count_rejects_bad_noise_and_paper_mode():
    with pytest.raises(ValueError, match="count_noise_multiplier"):
        compute_epsilon(noise_multiplier=1.0, sample_rate=0.02, steps=5, delta=DELTA, count_noise_multiplier=0.0)
    with pytest.raises(ValueError, match="paper"):
        compute_epsilon(noise_multiplier=1.0, sample_rate=0.02, steps=5, delta=DELTA, count_noise_multiplier=2.0,
                        beta=1.5, dim=1, mode="paper")
