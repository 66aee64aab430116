"""One-step profiles that are flat on the grid: a per-step privacy loss of tens to thousands, beyond the first
Chernoff grid [−32, 32] (docs/accounting.md, Lemma R8(c)).

There δ_env ≈ 1 (q = 1) or ≈ q (subsampled) at every grid point; the values read are collinear (their hull drops
points) or, read from a discrete pair whose laws' masses differ by its round-off C, jump at t = 0 and are flat
beyond it (the hull rises). Three defects made the one-step PMF fail its mass check there (1.0107, 1.0214,
1 + 7·10^{−8}, 1 + 4·10^{−10}), so the Rényi bound was published, above the PRV's where the loss is within the
PRV's range: the chords' rounding bound was the size of the far vertex (r ≈ α = e^{32}: +1.7·10^{−5} on every r at
t < 0), a rising hull made a negative last mass, and reading the chords back made masses of ±u/h between the
vertices. Oracles: dp-accounting's PLD of the d-fold Laplace composition (q = 1), and a post-processing lower bound
(each coordinate coarsened to three cells) computed here by FFT of its characteristic function.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from scipy.optimize import brentq

from opacus_gg.accountants import compute_epsilon, discretization

INF = float("inf")


def test_chord_rounding_bound_is_local_and_above_the_exact_chord():
    # the chord in r from (0, 0) to a vertex at α = e^{32}, read at α = e^{−32}: r = α up to rounding (it was raised
    # by 4u_ld·e^{32} = 1.7e-5 before, 10^9 times the value)
    xh, yh = np.array([0.0, math.exp(32.0)]), np.array([0.0, math.exp(32.0)])
    xq = np.exp(np.array([-32.0, -1.0, 0.0, 10.0]))
    got = discretization._chord(xq, xh, yh)
    assert np.all(got >= xq) and np.all(got <= xq * (1 + 4e-16)), got / xq - 1
    # and above the exact interpolant (rational arithmetic) of random vertices, steep and flat, of both signs
    rng = np.random.default_rng(7)
    for _ in range(200):
        xh = np.sort(rng.uniform(0.0, 10.0 ** rng.uniform(-3, 14), 2))
        yh = rng.uniform(-1.0, 1.0, 2) * 10.0 ** rng.uniform(-16, 14, 2)
        xq = rng.uniform(xh[0], xh[1], 5)
        got = discretization._chord(xq, xh, yh)
        for x, g in zip(xq, got):
            fx, x0, x1, y0, y1 = (Fraction(float(v)) for v in (x, xh[0], xh[1], yh[0], yh[1]))
            assert Fraction(float(g)) >= y0 + (fx - x0) * (y1 - y0) / (x1 - x0)


def test_a_profile_flat_at_one_is_all_mass_at_infinity():
    # every loss beyond the grid: δ = 1 at t ≥ 0, r = α at t < 0 (the values read at β = 1, σ = 1000, d = 1e9,
    # p = ∞ on [−32, 32]); main's connect the dots put 0.0107 at t = 0 (mass 1.0107)
    t = np.linspace(-32.0, 32.0, 40001)
    delta, r = np.where(t >= 0, 1.0, np.nan), np.where(t < 0, np.exp(t), np.nan)
    omega, rho, c = discretization.ctd_pmf(t, delta, r)
    assert rho == 1.0 and float(omega.sum()) <= 1e-15 and c < 1e-12
    # values one ulp above 1 (rounded up): the hull is (0, 1) cut flat, the same law
    omega, rho, _ = discretization.ctd_pmf(t, np.nextafter(delta, 2.0), np.nextafter(r, 2.0))
    assert rho == 1.0 and not omega.any()


def test_a_profile_rising_after_a_jump_at_zero_is_cut_flat():
    # subsampled (q = 0.01), loss beyond the grid: δ ≈ q at every t, read at t ≥ 0 from a law of larger mass (a jump
    # J = 7.5e-8 ≤ 2C); the hull rose from t = 0 to the last point and its last mass was −7.2e-8 (clipped: mass
    # 1 + 7.2e-8, refused). Cut flat: mass 1, and every value realized is ≥ the exact profile (δ = q), ≤ the values
    t = np.linspace(-32.0, 32.0, 40001)
    q, jump = 0.01, 7.5e-8
    alpha = np.exp(t)
    delta = np.where(t >= 0, q + jump, np.nan)
    r = np.where(t < 0, np.maximum(q - 1.0 + alpha, 0.0), np.nan)  # exact δ = max(q, 1 − α) at t < 0
    omega, rho, c = discretization.ctd_pmf(t, delta, r, tolerance=2 * jump)
    assert abs(float(omega.sum()) + rho - 1.0) <= discretization.pmf_mass_budget(t.size)
    assert q - 1e-15 <= rho <= q + jump
    d2, _ = discretization.hull_profile(t, delta, r, tolerance=2 * jump)
    assert np.all(d2[t >= 0] >= q - 1e-15) and np.all(d2[t >= 0] <= q + jump)
    with pytest.raises(discretization.AccountingError, match="not convex beyond round-off"):
        discretization.ctd_pmf(t, delta, r, tolerance=jump / 2)  # the cut lowers by J: within 2C only


def _laplace_composition_epsilon(d: int, delta: float, pessimistic: bool) -> float:
    one = pld.from_laplace_mechanism(1.0, sensitivity=1.0, pessimistic_estimate=pessimistic,
                                     value_discretization_interval=1e-4, use_connect_dots=pessimistic)
    return one.self_compose(d).get_epsilon_for_delta(delta)


@pytest.mark.parametrize("dim,renyi", [(100, 72.039), (200, 133.951)])
def test_laplace_vertex_with_a_loss_beyond_the_first_grid_is_the_prv_between_dp_accounting_bounds(dim, renyi):
    # β = 1, σ = 1, p = ∞, one full-batch step: the d-fold Laplace composition (shift 1 per coordinate). On main the
    # one-step PMF failed its mass check (1 + 4.1e-10) and the Rényi bound (72.039, 133.951) was published
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "could not certify" warning
        rep = compute_epsilon(noise_multiplier=1.0, sample_rate=1.0, steps=1, delta=1e-5, beta=1.0, dim=dim,
                              clip_norm_p=INF)
    lower = _laplace_composition_epsilon(dim, 1e-5, pessimistic=False)
    upper = _laplace_composition_epsilon(dim, 1e-5, pessimistic=True)
    assert rep.method == "prv" and rep.certified
    assert lower <= rep.epsilon <= upper * (1 + 1e-4), (lower, rep.epsilon, upper)
    assert rep.epsilon < 0.96 * renyi


def _coarsened_laplace_lower_bound(d: int, a: float, delta: float) -> float:
    """ε(δ) of the d-fold Laplace pair (shift a per coordinate) with each coordinate reduced to x ≤ 0, 0 < x < a,
    x ≥ a: post-processing, so a lower bound on the pair's ε. Its loss is a·K, K = N₊ − N₋ (the middle cell has
    equal probabilities), under P (centre a) a sum of d steps +1 w.p. 1/2, −1 w.p. e^{−a}/2; the law of K by FFT
    of φ(θ)^d on 2^21 points around its mean (the window is over 100 standard deviations: wrap-around ~e^{−5000})."""
    pp, pm = 0.5, math.exp(-a) / 2.0
    n = 1 << 21
    k0 = int(d * (pp - pm) - n // 2)
    theta = 2.0 * np.pi * np.arange(n) / n
    x = -(pp + pm) * 2.0 * np.sin(theta / 2.0) ** 2  # φ − 1 = x + iy, without cancellation
    y = (pp - pm) * np.sin(theta)
    log_phi = 0.5 * np.log1p(2.0 * x + x * x + y * y) + 1j * np.arctan2(y, 1.0 + x)
    pmf = np.maximum(np.fft.ifft(np.exp(d * log_phi - 1j * theta * k0)).real, 0.0)
    loss = a * (k0 + np.arange(n))

    def excess(eps):
        above = loss > eps
        return float(np.sum(pmf[above] * -np.expm1(eps - loss[above]))) - delta

    return brentq(excess, 0.0, float(loss[-1]), xtol=1e-9)


def test_many_coordinate_laplace_vertex_is_the_prv_above_a_post_processing_lower_bound():
    # β = 1, σ = 1000, d = 10^8, p = ∞, q = 1: per-step loss ≈ 50 ± 10, flat on the first grid; main published the
    # Rényi bound 110.093 (mass check 1 + 4.2e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = compute_epsilon(noise_multiplier=1000.0, sample_rate=1.0, steps=1, delta=1e-5, beta=1.0, dim=10**8,
                              clip_norm_p=INF)
    lower = _coarsened_laplace_lower_bound(10**8, 1e-3, 1e-5)
    assert rep.method == "prv"
    assert lower - 1e-6 <= rep.epsilon <= lower * 1.001, (lower, rep.epsilon)
    assert rep.epsilon < 0.9 * 110.093


@pytest.mark.parametrize("beta,sigma,dim,q,steps", [
    (1.0, 1000.0, 10**9, 1.0, 1), (1.0, 1000.0, 10**9, 0.01, 1), (4.0, 0.2, 10, 0.01, 1), (4.0, 0.2, 10, 0.1, 10)])
def test_a_loss_beyond_the_prv_range_is_refused_for_that_reason(beta, sigma, dim, q, steps):
    # per-step ε ≈ 10^3 (β = 1) and 1.8·10^5 (β = 4): beyond the ±512 the PRV grid reaches. Main refused with
    # "one-step discrete PRV: total mass 1.0107 / 1.0214"; the reason is the loss's size, and the Rényi bound stands
    with pytest.warns(UserWarning, match=r"cannot hold this privacy loss on its grid.*epsilon is too large to bound"
                                         r".*Rényi bound instead") as rec:
        rep = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=1e-5, beta=beta, dim=dim,
                              clip_norm_p=INF)
    assert not any("total mass" in str(w.message) or "own numerics" in str(w.message) for w in rec)
    assert rep.method == "rdp" and rep.epsilon > 512 * steps / 2


def test_a_product_whose_loss_leaves_the_grid_is_refused_for_that_reason():
    # β = 4, σ = 0.2, p = ∞, d = 1000: the powering of the vertex's coordinate pair pushes the Q-law below its grid
    # (3.4e-30 left on it) and the normalization would scale the finite part by 0 (C = 1). Main said "its mass
    # normalizations shrink its curves by C = 1: the round-off is not small"; the reason is the loss's size
    with pytest.warns(UserWarning, match=r"cannot hold this privacy loss on its grid.*privacy loss lies beyond its "
                                         r"loss grid.*Q-law.*Rényi bound instead") as rec:
        rep = compute_epsilon(noise_multiplier=0.2, sample_rate=0.01, steps=100, delta=1e-5, beta=4.0, dim=1000,
                              clip_norm_p=INF)
    assert not any("shrink its curves" in str(w.message) or "own numerics" in str(w.message) for w in rec)
    assert rep.method == "rdp" and math.isfinite(rep.epsilon) and rep.epsilon > 1e6


def test_discrete_pair_refusals_name_the_loss_beyond_the_grid_or_the_round_off():
    # a Q-law with almost all its mass at −∞ (its finite part is more than 1 − q_∞ allows): LossBeyondGrid, also a
    # ValueError; a law of mass 1.5 on the grid (a broken product, not a far loss): the plain AccountingError
    from opacus_gg.accountants.checks import AccountingError, LossBeyondGrid
    from opacus_gg.accountants.discrete import DiscretePair

    omega, nu = np.array([0.5, 0.5]), np.array([1e-30, 0.0])
    with pytest.raises(LossBeyondGrid, match=r"beyond its loss grid \[-1, 0\].*Q-law 1e-30 on the grid") as info:
        DiscretePair(-1.0, 1.0, omega, nu, 0.0, 1.0)
    assert isinstance(info.value, ValueError)
    with pytest.raises(AccountingError) as info:
        DiscretePair(-1.0, 1.0, np.array([0.75, 0.75]), np.array([0.5, 0.5]), 0.0, 0.0)
    assert not isinstance(info.value, LossBeyondGrid)
