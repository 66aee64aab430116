"""WIP (issue 21 item 1, docs/wip_issue21_dp_table.md): the DP table over (remaining p-mass, cap).

What these check: the envelope pair dominates its inputs and is a realizable pair; the Rényi base pair dominates
every shape of small coordinates it covers (one and two coordinates, exact curves / quadrature); the table's top
pair dominates every one- and two-coordinate shape on a grid of the ℓp ball (quadrature reference of
test_accountant_spreads); its ε lies above the equal-spread PRV and the rigorous lower-bound oracle.
"""

from __future__ import annotations

import numpy as np
import pytest

from lower_bound_oracle import epsilon_lower
from opacus_gg.accountants import compute_epsilon
from opacus_gg.accountants.api import _compose_tight
from opacus_gg.accountants.ball_prv import _grid, base_log_moment_rates, base_pair, build_table, envelope_pair
from opacus_gg.accountants.gg_pair import GGPair
from opacus_gg.accountants.history import PairSegment
from test_accountant_spreads import _h_two

ALPHAS = np.exp(np.linspace(-6.0, 6.0, 25))
RTOL, ATOL = 1e-9, 1e-12  # the envelope is evaluated on a 0.005 loss grid: ctd values are exact there, chords above


def _curves(pair, alphas=ALPHAS):
    return np.stack([pair.h_pq(alphas), pair.h_qp(alphas)])


def _le(x, y):
    return bool(np.all(x <= y * (1 + RTOL) + ATOL))


def test_envelope_pair_dominates_its_pairs_and_is_realizable():
    t = _grid(10.0, 0.005)
    pairs = [GGPair(a, 1.5) for a in (0.3, 0.7, 1.1)]
    env = envelope_pair(pairs, t)
    assert np.all(env.omega >= 0) and np.all(env.nu >= 0)
    assert abs(env.omega.sum() + env.p_inf - 1.0) <= 1e-9 and env.nu.sum() <= 1.0 + 1e-9
    for pr in pairs:
        assert _le(_curves(pr), _curves(env))


def test_envelope_of_nearly_equal_crossing_curves_is_realizable_and_dominates():
    # β = 1.8: the max of near-equal sampled curves is convex only up to round-off; the hull makes it realizable
    t = _grid(10.0, 0.005)
    pairs = [GGPair(a, 1.8) for a in (0.7, 0.7 * (1 + 1e-9), 0.7 * (1 - 1e-9), 1.3)]
    env = envelope_pair(pairs, t)
    assert np.all(env.omega >= 0) and abs(env.omega.sum() + env.p_inf - 1.0) <= 1e-9
    for pr in pairs:
        assert _le(_curves(pr), _curves(env))


@pytest.mark.slow
def test_base_pair_dominates_shapes_of_small_coordinates():
    beta = p = 1.5
    a0, R = 0.1, 0.05
    orders = np.arange(2, 65)
    rates = base_log_moment_rates(a0, beta, p, orders)
    base = base_pair(R, rates, orders, _grid(10.0, 0.005))
    top = min(a0, R ** (1 / p))
    for a in np.linspace(0.01, top, 5):
        assert _le(_curves(GGPair(float(a), beta)), _curves(base))
    for a in (0.05, 0.1):
        b = min(a0, max(R - a ** p, 0.0) ** (1 / p))
        ref = np.stack([_h_two(a, b, beta, ALPHAS), _h_two(b, a, beta, ALPHAS)])  # h_qp by the reflection x ↦ μ − x
        assert _le(ref, _curves(base) + 1e-10)


@pytest.fixture(scope="module")
def small_table():
    return build_table(0.5, 1.5, 1.5, a0=0.1, ratio_low=1.1, ratio_high=1.03, h=0.005, half_width=8.0)


@pytest.mark.slow
def test_table_dominates_every_one_and_two_coordinate_shape_on_a_grid(small_table):
    m, beta, p = 0.5, 1.5, 1.5
    top = _curves(small_table.top)
    for a in np.linspace(0.05, m, 6):
        assert _le(_curves(GGPair(float(a), beta)), top)
    for frac in (0.5, 0.2):  # on the sphere ‖μ‖_p = m (the largest shapes)
        a, b = m * frac ** (1 / p), m * (1 - frac) ** (1 / p)
        ref = np.stack([_h_two(a, b, beta, ALPHAS), _h_two(b, a, beta, ALPHAS)])
        assert _le(ref, top + 1e-10), frac


@pytest.mark.slow
def test_table_epsilon_is_above_equal_spreads_and_the_lower_bound_oracle(small_table):
    sigma, q, T, delta = 2.0, 0.2, 10, 1e-5
    seg = PairSegment((((0, 0), small_table.top),), q, T)
    eps = max(_compose_tight([seg], delta, d, 0.01, delta / 1000).epsilon_upper for d in ("remove", "add"))
    spreads = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=T, delta=delta, beta=1.5, dim=8,
                              clip_norm_p=1.5)
    assert eps >= spreads.epsilon_equal_spreads if spreads.epsilon_equal_spreads is not None else True
    assert eps >= compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=T, delta=delta, beta=1.5, dim=1).epsilon
    assert eps >= epsilon_lower([(sigma, q, T, 1.5)], delta, shift=(2 ** (-1 / 1.5),) * 2)
    assert eps >= epsilon_lower([(sigma, q, T, 1.5)], delta, shift=(1.0,))


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(1.0,), (0.5, 0.5), (0.6, 0.3, 0.1), (1 / 3, 1 / 3, 1 / 3), (0.8, 0.2)])
def test_table_one_step_epsilon_is_above_the_lower_bound_oracle_for_shapes_up_to_three_coordinates(small_table, shape):
    """Brute force, one step, no subsampling: the oracle's rigorous lower bound on ε(δ) of a shape with
    ‖v‖_p = 1 (p-masses ``shape``) at σ = 2 never exceeds the table's ε (m = 1/σ = 0.5)."""
    sigma, delta = 2.0, 1e-3
    v = tuple(w ** (1 / 1.5) for w in shape)
    seg = PairSegment((((0, 0), small_table.top),), 1.0, 1)
    eps = max(_compose_tight([seg], delta, d, 0.01, delta / 1000).epsilon_upper for d in ("remove", "add"))
    assert eps >= epsilon_lower([(sigma, 1.0, 1, 1.5)], delta, shift=v)
