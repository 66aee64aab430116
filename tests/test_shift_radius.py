"""Every shift the accountant uses is rounded UP from its exact real value (docs/accounting.md, "What is computed":
the rounding direction; Lemma A: a larger shift only raises the curves).

Oracles share no code with the library: ``fractions.Fraction`` (exact) for m = 1/σ, mpmath at 50 digits for the
derived shifts a_k = m·k^{−1/p}, m·k^{1/2−1/p} and m^p. The site tests read the shift each certified path hands to
its primitive at σ = 3 (where the nearest float 1.0/3.0 lies below 1/3) and fail with the nearest-rounded one.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from opacus_gg.accountants import api, ball_rdp
from opacus_gg.accountants.count_query import count_log_moments
from opacus_gg.accountants.history import Segment
from opacus_gg.accountants.prv_variable import GGPrivacyRandomVariable
from opacus_gg.accountants.shapes import candidate_shapes, l2_shift, per_coordinate_shift, radius_power
from opacus_gg.accountants.spreads import spread_shift
from opacus_gg.validation import NOISE_MULTIPLIER_MAX, NOISE_MULTIPLIER_MIN, shift_radius

SIGMAS = st.floats(NOISE_MULTIPLIER_MIN, NOISE_MULTIPLIER_MAX, allow_nan=False, allow_infinity=False)
FIXED = settings(max_examples=300, derandomize=True, deadline=None, database=None,
                 phases=[Phase.explicit, Phase.generate])


def _is_least_float_at_or_above(f: float, exact) -> bool:
    """f ≥ exact and the float below f is < exact (``exact``: a Fraction, or an mpf at 50 digits)."""
    below = math.nextafter(f, -math.inf)
    if isinstance(exact, Fraction):
        return Fraction(f) >= exact and Fraction(below) < exact
    return mpmath.mpf(f) >= exact and mpmath.mpf(below) < exact


@FIXED
@given(SIGMAS)
@example(3.0)
@example(0.1)
@example(1e-3)
@example(7.7e3)
@example(NOISE_MULTIPLIER_MIN)
@example(NOISE_MULTIPLIER_MAX)
def test_shift_radius_is_the_least_float_at_or_above_one_over_sigma(sigma):
    assert _is_least_float_at_or_above(shift_radius(sigma), 1 / Fraction(sigma))


def test_nearest_rounding_is_below_one_over_sigma_at_three():
    """Why the radius exists (and that the oracle above can fail): the nearest float to 1/3 is below it."""
    assert Fraction(1.0 / 3.0) < Fraction(1, 3)
    assert shift_radius(3.0) == math.nextafter(1.0 / 3.0, math.inf)


def _exact(expr):
    with mpmath.workdps(50):
        return expr()


@FIXED
@given(SIGMAS, st.integers(2, 10**15), st.sampled_from([1.0, 1.2, 1.5, 1.8, 2.0, 2.01, 2.5, 3.0, 7.3, 33.0]))
@example(3.0, 2410, 1.5)
@example(3.0, 10**6, 2.5)
@example(0.1, 3, 1.2)
def test_derived_shifts_are_at_or_above_their_exact_values(sigma, k, p):
    """a_k = m·k^{−1/p} and ‖μ‖_2 = m·k^{1/2−1/p} each ≥ exact, at most one float above the least float ≥ exact
    (the interval enclosure is ~2^{−75} wide: the least float itself unless exact lies that close to a float)."""
    m, s, kk = mpmath.mpf(1), mpmath.mpf(sigma), mpmath.mpf(k)
    for got, exact in ((per_coordinate_shift(sigma, k, p), _exact(lambda: m / s * kk ** (-1 / mpmath.mpf(p)))),
                       (l2_shift(sigma, k, p), _exact(lambda: m / s * kk ** (mpmath.mpf(1) / 2 - 1 / mpmath.mpf(p))))):
        with mpmath.workdps(50):
            assert mpmath.mpf(got) >= exact
            assert mpmath.mpf(math.nextafter(math.nextafter(got, -math.inf), -math.inf)) < exact


@FIXED
@given(SIGMAS, st.sampled_from([1.0, 1.2, 1.5, 1.8, 2.0, 2.01, 2.5, 3.0, 7.3, 33.0]))
@example(3.0, 1.5)
def test_mass_budget_is_at_or_above_exact_power(sigma, p):
    exact = _exact(lambda: (1 / mpmath.mpf(sigma)) ** mpmath.mpf(p))
    got = radius_power(sigma, p)
    with mpmath.workdps(50):
        assert mpmath.mpf(got) >= exact
        assert mpmath.mpf(math.nextafter(math.nextafter(got, -math.inf), -math.inf)) < exact


def test_p_infinity_and_one_coordinate_shifts_are_the_radius():
    assert per_coordinate_shift(3.0, 10**6, math.inf) == shift_radius(3.0)
    assert per_coordinate_shift(3.0, 1, 1.5) == l2_shift(3.0, 1, 2.5) == shift_radius(3.0)
    assert l2_shift(3.0, 4, math.inf) == math.nextafter(2.0 / 3.0, math.inf)  # m·√4 = 2/3, rounded up


# ---- the certified sites read the rounded-up shifts (each fails at σ = 3 with 1.0 / σ) --------------------------

THIRD = Fraction(1, 3)


def test_one_coordinate_prv_shift_is_rounded_up():
    assert Fraction(GGPrivacyRandomVariable(3.0, 0.01, 1.5).a) >= THIRD


def test_count_coordinate_shift_and_moments_are_rounded_up():
    assert Fraction(Segment(1.0, 0.01, 10, 2.0, 1, 2.0, 3.0).count_shift) >= THIRD
    got = count_log_moments(256, 3.0)
    assert all(Fraction(float(g)) >= Fraction(j * (j - 1), 18) for j, g in enumerate(got))


@pytest.mark.parametrize("beta,dim,p", [(1.5, 2410, 1.5), (2.0, 100, 3.0), (2.0, 7, math.inf), (1.2, 5, math.inf),
                                        (1.0, 10, 1.0), (2.5, 33, 2.0)])
def test_shape_shifts_are_at_or_above_exact(beta, dim, p):
    """Every (k, a) the PRV envelope composes at σ = 3 (the β = 2 norms and the equal spreads) ≥ its exact shift."""
    for k, a, _ in candidate_shapes(3.0, beta, dim, p):
        with mpmath.workdps(50):
            inv_p = 0 if math.isinf(p) else 1 / mpmath.mpf(p)
            e = mpmath.mpf(1) / 2 - inv_p if beta == 2.0 and k > 1 else -inv_p
            assert mpmath.mpf(a) >= mpmath.mpf(k) ** e / 3
    for k in (1, 2, 17, dim):
        with mpmath.workdps(50):
            assert mpmath.mpf(spread_shift(3.0, k, 1.5)) >= mpmath.mpf(k) ** (-1 / mpmath.mpf(1.5)) / 3


@pytest.mark.parametrize("p", [1.5, 3.0])
def test_tables_are_built_at_the_rounded_up_radius(monkeypatch, p):
    """api hands the ball table (p ≤ 2) and the count table (p > 2, d ≤ 32) m ≥ 1/σ (the table's top cell is m)."""
    seen = []

    def spy(m, *args, **kwargs):
        seen.append(m)
        raise LookupError("spy")

    monkeypatch.setattr(api, "ball_table", spy)
    monkeypatch.setattr(api, "count_table", spy)
    seg = Segment(3.0, 0.01, 10, 1.5, 4, p)
    with pytest.raises(LookupError):
        api._ball_table_segments([seg], None)
    assert len(seen) == 1 and Fraction(seen[0]) >= THIRD


@pytest.mark.parametrize("dim,p", [(1, 1.5), (5, math.inf), (5, 1.5)])
def test_renyi_ball_reads_the_rounded_up_radius(monkeypatch, dim, p):
    """The Rényi bound over the ball: L_j at m (d = 1, p = ∞) and the dual's top grid shift m are ≥ 1/σ."""
    seen = []
    real = ball_rdp.log_moment_upper

    def spy(j, a, beta):
        seen.append(a)
        return real(j, a, beta)

    monkeypatch.setattr(ball_rdp, "log_moment_upper", spy)
    rounds = ball_rdp._ball_log_moment_rounds(2, 3.0, 1.5, dim, p)
    try:
        top = float(next(rounds)[-1])  # the dual's first grid of shifts, ending at m
    except StopIteration:  # d = 1, p = ∞: no grid, L_j(m) directly
        top = seen[-1]
    assert Fraction(top) >= THIRD
    assert np.isfinite(top)


def test_gaussian_domination_constant_is_at_or_above_the_exact_kappa_and_keeps_its_float():
    """κ_β = √(2π)/(2β^{1/β}Γ(1 + 1/β)) as published is ≥ its 50-digit value at every β of a grid over [1, 2]
    (the interval Γ makes it so even where scipy's gammaln would be off), and it is the float of before (scipy's
    formula raised by 10⁻¹²) wherever that one is already above: no published number moves."""
    from scipy import special
    from opacus_gg.accountants.gaussian_domination import gaussian_domination_constant
    for beta in np.concatenate([np.linspace(1.0, 2.0, 41), [1.0 + 1e-9, 1.2345678901, 2.0 - 1e-9]]):
        beta = float(beta)
        k = gaussian_domination_constant(beta)
        with mpmath.workdps(50):
            b = mpmath.mpf(beta)
            exact = mpmath.sqrt(2 * mpmath.pi) / (2 * b ** (1 / b) * mpmath.gamma(1 + 1 / b))
        assert mpmath.mpf(k) >= exact
        old = math.exp(0.5 * math.log(2.0 * math.pi) - math.log(2.0) - math.log(beta) / beta
                       - special.gammaln(1.0 + 1.0 / beta)) * (1.0 + 1e-12)
        assert k == old
