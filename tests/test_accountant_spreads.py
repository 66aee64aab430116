"""Every equal spread k = 1 … d: the interval-bound cover (accountants/spreads.py, docs/accounting.md).

Floating-point slack used below: hockey-stick values are differences of GG survival functions computed
to ~1e-15 relative (scipy gammaincc); comparisons between two curves therefore allow
RTOL = 1e-12 relative + ATOL = 1e-15 absolute, nothing more. Where both curves come from *discrete*
pairs (dominating discretizations with FFT products), the compared pair may carry up to ~5e-13 of
round-off mass moved to ±∞ (``DiscretePair.__post_init__``: a pessimism of that pair, not part of the
true curve), so those comparisons allow ATOL_DISC = 1e-11 absolute on top.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy import integrate, special

from opacus_gg.accountants.api import compute_delta, compute_epsilon
from opacus_gg.accountants.history import PairSegment
from opacus_gg.accountants.profile import one_step_delta
from opacus_gg.accountants.gg_pair import GGPair
from opacus_gg.accountants.gg_pair import loss as _loss
from opacus_gg.accountants.spreads import (
    LOG_ALPHA_GRID,
    exact_spread_pair,
    interval_bound_pair,
    spread_cover,
    spread_pairs,
    spread_shift,
)

RTOL, ATOL, ATOL_DISC = 1e-12, 1e-15, 1e-11
ALPHAS = np.exp(np.linspace(-6.0, 8.0, 57))


def _curves(pair, alphas=ALPHAS):
    return np.stack([pair.h_pq(alphas), pair.h_qp(alphas)])


def _le(x, y, atol=ATOL):
    """x ≤ y up to floating-point slack."""
    return bool(np.all(x <= y * (1.0 + RTOL) + atol))


def _gg_pdf(x, beta):
    """Density of GG(β, 1): exp(−|x|^β/β) / (2 β^{1/β} Γ(1 + 1/β))."""
    return np.exp(-np.abs(x) ** beta / beta) / (2.0 * beta ** (1.0 / beta) * special.gamma(1.0 + 1.0 / beta))


def _h_two(a1, a2, beta, alphas):
    r"""Independent reference for two coordinates (shifts a1, a2), by quadrature:
    H_α(P₁⊗P₂‖Q₁⊗Q₂) = ∫ p₁(x) H_{α e^{−ℓ₁(x)}}(P₂‖Q₂) dx (exact 1-D inner curve)."""
    inner = GGPair(a2, beta)

    def f(x):
        return _gg_pdf(x - a1, beta) * inner.h_pq(alphas * np.exp(-_loss(np.array(x), a1, beta)), upper=False)

    r = (60.0 * beta) ** (1.0 / beta)  # GG mass beyond |x − a1| > r is below e^{−60}
    # reference integral to near float64 precision
    val, _ = integrate.quad_vec(f, a1 - r, a1 + r, points=[0.0, a1], epsabs=1e-13, epsrel=1e-10)
    return val


# ---- the reported counterexample -------------------------------------------------------------------


def test_issue_counterexample_k3_now_covered():
    """β = 1.5, σ = 0.5, d = 4, ε = 4, one step: δ ≥ 1.7240e-3 (independent rigorous lower bound for k = 3)."""
    d = compute_delta(epsilon=4, noise_multiplier=0.5, sample_rate=1, steps=1, beta=1.5, dim=4)
    assert d >= 1.7240e-3
    labels = [lab for lab, _ in spread_pairs(0.5, 1.5, 4, 1.5)]
    assert any(k0 <= 3 <= k1 for k0, k1 in labels)


# ---- lemma (a): monotonicity in the shift of the 1-D pair ----------------------------------------


@pytest.mark.parametrize("beta", [1.0, 1.2, 1.5, 1.8, 2.0, 3.0])
def test_lemma_a_loss_monotone_in_x(beta):
    """MLR: ℓ_a(x) = (|x|^β − |x − a|^β)/β is non-decreasing in x (optimal tests are half-lines)."""
    x = np.linspace(-20.0, 20.0, 20001)
    for a in (0.05, 0.7, 3.0):
        assert np.all(np.diff(_loss(x, a, beta)) >= -1e-13)


@pytest.mark.parametrize("beta", [1.0, 1.2, 1.5, 1.8, 3.0])
def test_lemma_a_hockey_stick_monotone_in_shift(beta):
    """H_α(GG_a‖GG_0) (= H_α(GG_0‖GG_a) by reflection) is non-decreasing in a, for α < 1 and α > 1."""
    shifts = np.linspace(0.02, 4.0, 60)
    curves = np.stack([GGPair(a, beta).h_pq(ALPHAS, upper=False) for a in shifts])
    assert _le(curves[:-1], curves[1:])
    # and it is not constant (the test can fail): a larger shift is strictly worse somewhere
    assert np.all(np.max(curves[1:] - curves[:-1], axis=1) > 0)


# ---- lemmas (b), (c): products, extra coordinates ---------------------------------------------------


@pytest.mark.parametrize("beta", [pytest.param(1.2, marks=pytest.mark.slow), 1.5,
                                  pytest.param(3.0, marks=pytest.mark.slow)])
def test_lemmas_b_c_by_quadrature(beta):
    """(c) adding a shifted coordinate only increases H; (b) raising either shift of a product increases H."""
    alphas = np.exp(np.linspace(-3.0, 4.0, 8))
    one = GGPair(0.8, beta).h_pq(alphas, upper=False)
    two = _h_two(0.8, 0.5, beta, alphas)
    assert _le(one, two) and np.max(two - one) > 1e-3
    assert _le(two, _h_two(0.8, 0.9, beta, alphas))
    assert _le(two, _h_two(1.1, 0.5, beta, alphas))


@pytest.mark.parametrize("beta", [1.2, 1.5, 3.0])
def test_discrete_pairs_dominate_quadrature(beta):
    """The dominating discrete pair of 2 coordinates lies above the quadrature reference."""
    alphas = np.exp(np.linspace(-3.0, 4.0, 8))
    a = spread_shift(1.0, 2, beta)
    ref = _h_two(a, a, beta, alphas)
    disc = exact_spread_pair(1.0, beta, 2, beta)
    assert _le(ref, disc.h_pq(alphas)) and _le(ref, disc.h_qp(alphas))


@pytest.mark.parametrize("beta", [1.2, 1.5, 3.0])
def test_monotone_in_number_of_coordinates(beta):
    """k + 1 coordinates shifted by a dominate k coordinates shifted by a (a = 0.7: B[1, k] at σ = 1/a)."""
    prev = _curves(GGPair(0.7, beta))
    for k in range(2, 9):
        cur = _curves(interval_bound_pair(1.0 / 0.7, beta, 1, k, beta))
        assert _le(prev, cur, ATOL_DISC) and np.max(cur - prev) > 1e-4
        prev = cur


@pytest.mark.parametrize("beta,p,sigma", [(1.5, 1.5, 0.5), (1.2, 2.0, 1.0), (3.0, 3.0, 1.0)])
def test_interval_bound_dominates_each_k_inside(beta, p, sigma):
    """B[k₀, k₁] (k₁ coordinates at a_{k₀}) ≥ the pair of every k ∈ [k₀, k₁]."""
    for k0, k1 in [(2, 3), (4, 7), (5, 9), (8, 15)]:
        bound = _curves(interval_bound_pair(sigma, beta, k0, k1, p))
        for k in range(k0, k1 + 1):
            assert _le(_curves(exact_spread_pair(sigma, beta, k, p)), bound, ATOL_DISC), (k0, k, k1)


# ---- the cover ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [1, 2, 3, 4, 5, 17, 32, 1000])
def test_cover_partitions_one_to_d(dim):
    cov = spread_cover(1.0, 1.5, dim, 1.5)
    labels = [lab for lab, _ in cov.pairs]
    assert labels[0][0] == 1 and labels[-1][1] == dim
    assert all(k0 <= k1 for k0, k1 in labels)
    assert all(b[0] == a[1] + 1 for a, b in zip(labels, labels[1:]))
    assert not cov.capped and cov.max_excess <= cov.tau


def test_cover_cap_keeps_coarser_rigorous_bounds():
    """max_pairs reached: still a partition of 1..d, flagged capped; every k dominated by its interval."""
    cov = spread_cover(0.5, 1.5, 32, 1.5, max_pairs=4)
    labels = [lab for lab, _ in cov.pairs]
    assert cov.capped and len(labels) <= 6
    assert [k for k0, k1 in labels for k in range(k0, k1 + 1)] == list(range(1, 33))
    for (k0, k1), pair in cov.pairs:
        for k in range(k0, k1 + 1):
            assert _le(_curves(exact_spread_pair(0.5, 1.5, k, 1.5)), _curves(pair), ATOL_DISC)


def test_exact_reductions_one_pair():
    """β = 2 and p = ∞ keep their exact single pair, labelled (1, d)."""
    assert [lab for lab, _ in spread_cover(1.0, 2.0, 100, 2.0).pairs] == [(1, 100)]
    assert [lab for lab, _ in spread_cover(1.0, 1.5, 100, math.inf).pairs] == [(1, 100)]


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(noise_multiplier=0.0), "noise_multiplier"),
        (dict(beta=0.5), "beta"),
        (dict(dim=0), "dim"),
        (dict(dim=2.5), "dim"),
        (dict(clip_norm_p=0.5), "clip_norm_p"),
        (dict(tau=-1.0), "tau"),
        (dict(eta=float("nan")), "eta"),
        (dict(max_pairs=1), "max_pairs"),
    ],
)
def test_bad_input(kwargs, name):
    args = dict(noise_multiplier=1.0, beta=1.5, dim=8, clip_norm_p=1.5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        spread_cover(**args)
    with pytest.raises(ValueError, match="k0"):
        interval_bound_pair(1.0, 1.5, 3, 2, 1.5)


def test_acceptance_grid_covers_both_sides_of_one():
    assert LOG_ALPHA_GRID.min() < -10 and LOG_ALPHA_GRID.max() > 10 and np.any(LOG_ALPHA_GRID == 0)


# ---- brute force: every k for d ≤ 32 never exceeds the certified envelope ---------------------------


def _brute_force(sigma, beta, p, dim, q):
    """One-step δ(t) (remove and add, at q) of every exact k ≤ the envelope of the cover's pairs."""
    t = np.linspace(-3.0, 8.0, 4001)
    seg = PairSegment(spread_cover(sigma, beta, dim, p).pairs, q, 1)
    for direction in ("remove", "add"):
        env_d, env_r, _, _ = one_step_delta(seg, t, direction)
        for k in range(1, dim + 1):
            single = PairSegment((((k, k), exact_spread_pair(sigma, beta, k, p)),), q, 1)
            d, r, _, _ = one_step_delta(single, t, direction)
            pos = t >= 0
            assert _le(d[pos], env_d[pos], ATOL_DISC) and _le(r[~pos], env_r[~pos], ATOL_DISC), (sigma, beta, p, dim, q, k, direction)


def test_brute_force_small_fast():
    _brute_force(0.5, 1.5, 1.5, 8, 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("beta", [1.2, 1.5, 1.8, 3.0])
@pytest.mark.parametrize("p_is_beta", [True, False])
@pytest.mark.parametrize("sigma", [0.5, 1.0])
@pytest.mark.parametrize("q", [1.0, 0.05])
def test_brute_force_every_k_d32(beta, p_is_beta, sigma, q):
    _brute_force(sigma, beta, beta if p_is_beta else 2.0, 32, q)


@pytest.mark.slow
@pytest.mark.parametrize("eps", [1.0, 2.0, 4.0])
def test_brute_force_compute_delta_every_k(eps):
    """compute_delta (one step, full accountant) ≥ δ_k(ε) = H_{e^ε} of every exact k ≤ 12."""
    beta, sigma, dim = 1.5, 0.5, 12
    got = compute_delta(epsilon=eps, noise_multiplier=sigma, sample_rate=1, steps=1, beta=beta, dim=dim)
    for k in range(1, dim + 1):
        pair = exact_spread_pair(sigma, beta, k, beta)
        assert float(pair.h_pq(np.array([math.exp(eps)]))[0]) <= got
        assert float(pair.h_qp(np.array([math.exp(eps)]))[0]) <= got


# ---- very large d ------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.ci_slow
def test_dim_one_billion_finishes_finite():
    t0 = time.perf_counter()
    rep = compute_epsilon(noise_multiplier=1.0, sample_rate=0.001, steps=1000, delta=1e-5, beta=1.5, dim=10**9)
    assert math.isfinite(rep.epsilon) and rep.epsilon > 0
    assert time.perf_counter() - t0 < 300.0
