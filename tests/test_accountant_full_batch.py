"""Full-batch Gaussian runs (β = 2, q = 1 in every segment): the composition is one Gaussian pair, whose exact ε is
published rounded up (opacus_gg.accountants.full_batch; docs/accounting.md, Lemma G), for T up to 10⁶ and δ down
to 1e-12, against the closed form computed here independently (mpmath erfc, its own root-find); mixed histories
still go through the PRV; where the PRV grid is too big the refusal names T, δ and the T it serves (issue 19)."""

from __future__ import annotations

import math

import mpmath
import pytest

from opacus_gg.accountants import compute_delta, compute_epsilon, compute_epsilon_history, discretization
from opacus_gg.accountants.history import normalize_history


def _delta_exact(mu, eps):
    """δ(ε) of (N(μ, 1), N(0, 1)) from erfc (Balle & Wang 2018, Thm 8), 80 digits."""
    with mpmath.workdps(80):
        mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
        r2 = mpmath.sqrt(2)
        return (mpmath.erfc((eps / mu - mu / 2) / r2) - mpmath.exp(eps) * mpmath.erfc((eps / mu + mu / 2) / r2)) / 2


def _epsilon_exact(mu, delta):
    """The root of δ(ε) = δ (δ decreasing in ε) by 300 bisection steps in 80 digits (bracket width < 10^{-60})."""
    with mpmath.workdps(80):
        lo, hi = mpmath.mpf(0), mpmath.mpf(mu) ** 2 / 2 + 10 * mpmath.mpf(mu) + 10
        assert _delta_exact(mu, hi) < delta < _delta_exact(mu, lo)
        for _ in range(300):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _delta_exact(mu, mid) > delta else (lo, mid)
        return hi


@pytest.mark.parametrize("steps", [1, 10**4, 10**6])
@pytest.mark.parametrize("delta", [1e-5, 1e-12])
def test_full_batch_gaussian_epsilon_is_the_closed_form_rounded_up(steps, delta):
    sigma = 50.0
    rep = compute_epsilon(noise_multiplier=sigma, sample_rate=1.0, steps=steps, delta=delta, beta=2.0, dim=1)
    with mpmath.workdps(80):  # μ in 80 digits: 1/50 is not a double
        mu = mpmath.sqrt(steps) / sigma
    exact = _epsilon_exact(mu, delta)
    assert rep.certified and rep.method == "gaussian"
    # proven: never below the exact ε; equal to it up to the round-up to a double
    assert exact <= rep.epsilon <= exact * (1 + 1e-6)
    assert rep.epsilon - exact <= 4 * math.ulp(rep.epsilon)


def test_full_batch_gaussian_delta_is_the_closed_form_rounded_up():
    for eps in (0.5, 3.0, 40.0):
        d = compute_delta(epsilon=eps, noise_multiplier=2.0, sample_rate=1.0, steps=100, beta=2.0, dim=1)
        exact = _delta_exact(5, eps)
        assert exact <= d <= exact * (1 + 1e-14)


def test_full_batch_shift_of_p_above_two_and_of_the_count_query():
    # β = 2, p = ∞, d = 4: the worst shift (1, 1, 1, 1)/σ has ℓ2 norm 2/σ; a noisy count adds 1/σ_c² per step
    sigma, sigma_c, steps, delta = 3.0, 10.0, 50, 1e-6
    rep = compute_epsilon(noise_multiplier=sigma, sample_rate=1.0, steps=steps, delta=delta, beta=2.0, dim=4,
                          clip_norm_p=math.inf, count_noise_multiplier=sigma_c)
    with mpmath.workdps(80):
        mu = mpmath.sqrt(steps * (4 / mpmath.mpf(sigma) ** 2 + 1 / mpmath.mpf(sigma_c) ** 2))
    exact = _epsilon_exact(mu, delta)
    assert rep.method == "gaussian" and exact <= rep.epsilon <= exact * (1 + 1e-12)
    # at p ≤ 2 the shift is 1/σ whatever d is
    two = compute_epsilon(noise_multiplier=sigma, sample_rate=1.0, steps=steps, delta=delta, beta=2.0, dim=10**6)
    assert two.epsilon == compute_epsilon(noise_multiplier=sigma, sample_rate=1.0, steps=steps, delta=delta,
                                          beta=2.0, dim=1).epsilon


def test_mixed_full_batch_and_subsampled_history_goes_through_the_prv():
    hist = [(4.0, 1.0, 20, 2.0, 1, 2.0), (4.0, 0.1, 200, 2.0, 1, 2.0)]
    rep = compute_epsilon_history(hist, 1e-6)
    assert rep.method == "prv" and rep.certified
    # sandwich: above the full-batch part alone, below the history with every step at q = 1
    with mpmath.workdps(80):
        part = _epsilon_exact(mpmath.sqrt(20) / 4, 1e-6)
        all_full = _epsilon_exact(mpmath.sqrt(220) / 4, 1e-6)
    assert part <= rep.epsilon <= all_full


def test_grid_refusal_names_steps_delta_and_the_steps_it_serves(monkeypatch):
    monkeypatch.setattr(discretization, "MAX_DOMAIN_POINTS", 200_000)
    segs = normalize_history([(1.0, 0.05, 2000, 2.0, 1, 2.0)])
    with pytest.raises(ValueError, match=r"steps=2000 at delta=1e-08") as e:
        discretization.make_domain(segs, "remove", 1e-11, 0.01, delta=1e-8)
    msg = str(e.value)
    assert "\n" not in msg
    serve = int(msg.split("serves about steps <= ")[1].split(":")[0])
    assert 1 <= serve < 2000
    fits = normalize_history([(1.0, 0.05, serve, 2.0, 1, 2.0)])
    discretization.make_domain(fits, "remove", 1e-11, 0.01, delta=1e-8)  # the T it names is served
    with pytest.raises(ValueError):
        discretization.make_domain(normalize_history([(1.0, 0.05, 2 * serve, 2.0, 1, 2.0)]), "remove", 1e-11,
                                   0.01, delta=1e-8)
