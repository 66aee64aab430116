"""benchmarks/base_ceiling.py (issue 35's Base ceiling, diagnostics, NOT bounds): its complex log-moment against
oracles that share no code with it, and its ideal Base confined to its block (docs/accounting.md, "A PRV-level
Base: the ceiling, measured")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from opacus_gg.accountants import ball_prv, renyi
from opacus_gg.accountants.ball_prv import TableSpec
from opacus_gg.accountants.gg_pair import GGPair

from benchmark_modules import load_benchmark

bc = load_benchmark("base_ceiling")

#: a table small enough for the quick tier (a_0 = 0.5m, a handful of cells, a coarse loss grid)
_TINY = TableSpec(a0=0.5, ratio_low=1.2, ratio_high=1.2, h=0.05, half_width=6.0)


@pytest.mark.parametrize("beta", [1.5, 3.0])
@pytest.mark.parametrize("j", [2, 4])
@pytest.mark.parametrize("a", [0.03, 0.3])
def test_complex_log_moment_at_real_orders_is_the_librarys_renyi_moment(beta, j, a):
    # at real z = j the script's log φ (quadrature of ∫ f·expm1(zℓ)) is the library's enclosed log-moment
    lp, _ = bc.log_phi(complex(j, 0.0), a, beta)
    ref = renyi.log_moment(j, a, beta)
    assert abs(lp.imag) < 1e-15
    assert lp.real == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize("z", [complex(2.0, 5.0), complex(1.2, 20.0), complex(4.0, -3.0)])
def test_complex_log_moment_is_the_gaussian_closed_form_at_beta_two(z):
    # β = 2: ℓ_a is Gaussian under Q, log φ(z; a) = a² z(z − 1)/2 exactly (I_2 = 1), complex z included
    a = 0.3
    lp, _ = bc.log_phi(z, a, 2.0)
    exact = a * a * z * (z - 1) / 2.0
    assert abs(lp - exact) <= 1e-9 * abs(exact)


def test_eta_cover_is_the_least_inflation_reaching_the_target():
    s, t = 0.4, 0.3
    target = float(GGPair(s * 1.05, 2.0).h_pq(np.array([math.exp(t)]), upper=False)[0])
    assert abs(float(bc._eta_cover(s, t, target)) - 0.05) <= 2e-4
    assert bc._eta_cover(s, t, 0.0) == "0"


def test_ideal_base_is_confined_to_its_block_and_below_the_librarys_base():
    originals = (ball_prv.base_gaussian_rate, ball_prv.base_pair, ball_prv.GGPair)
    lib = ball_prv.build_table(1.0, 1.5, 2.0, _TINY)
    with bc.ideal_base(1.5, 0.0):
        ideal = ball_prv.build_table(1.0, 1.5, 2.0, _TINY)
    with bc.ideal_base(1.5, 0.0, min_cells=1e9):  # no Base state qualifies: the library's table, bit for bit
        none = ball_prv.build_table(1.0, 1.5, 2.0, _TINY)
    assert (ball_prv.base_gaussian_rate, ball_prv.base_pair, ball_prv.GGPair) == originals
    again = ball_prv.build_table(1.0, 1.5, 2.0, _TINY)
    alpha = np.exp(np.linspace(0.0, 3.0, 13))
    h_lib, h_ideal = lib.top.h_pq(alpha), ideal.top.h_pq(alpha)
    # √I_1.5 < κ_1.5: the ideal Base's Gaussian is smaller, so is the table (strictly at α = 1)
    assert np.all(h_ideal <= h_lib * (1 + 1e-12)) and h_ideal[0] < h_lib[0]
    np.testing.assert_array_equal(none.top.omega, lib.top.omega)
    np.testing.assert_array_equal(again.top.omega, lib.top.omega)


def test_ideal_base_keeps_the_librarys_base_below_min_cells_where_the_contour_base_is_on():
    """With the contour Base (β = 2.5, Base cell 0.05 ≤ the data's 0.1) the Base states go through ``base_values``:
    ``min_cells`` confines the ideal rate there too (no state qualifies: the library's table bit for bit)."""
    spec = TableSpec(a0=0.1, ratio_low=1.5, ratio_high=1.5, high_from=0.7, h=0.05, half_width=8.0, mass_split=1,
                     mean_variance=True)
    lib = ball_prv.build_table(0.5, 2.5, 2.0, spec)
    assert lib.base.startswith("contour")
    with bc.ideal_base(2.5, 0.0, min_cells=1e9):
        none = ball_prv.build_table(0.5, 2.5, 2.0, spec)
    with bc.ideal_base(2.5, 0.0):
        ideal = ball_prv.build_table(0.5, 2.5, 2.0, spec)
    np.testing.assert_array_equal(none.top.omega, lib.top.omega)
    alpha = np.exp(np.linspace(0.0, 3.0, 13))
    assert np.all(ideal.top.h_pq(alpha) <= lib.top.h_pq(alpha) * (1 + 1e-12))
    assert np.any(ideal.top.h_pq(alpha) < lib.top.h_pq(alpha) * (1 - 1e-6))


def test_ideal_base_absolute_error_raises_the_base_only():
    with bc.ideal_base(3.0, 0.0):
        ideal = ball_prv.build_table(1.0, 3.0, 2.0, _TINY)
    with bc.ideal_base(3.0, 0.0, abs_err=1e-3):
        raised = ball_prv.build_table(1.0, 3.0, 2.0, _TINY)
    alpha = np.exp(np.linspace(0.0, 3.0, 13))
    assert np.all(raised.top.h_pq(alpha) >= ideal.top.h_pq(alpha))
    assert np.any(raised.top.h_pq(alpha) > ideal.top.h_pq(alpha) + 1e-4)
    with pytest.raises(ValueError):
        with bc.ideal_base(2.0, 0.0, abs_err=1e-3):
            pass
