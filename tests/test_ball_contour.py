"""The contour Base in the library (:mod:`opacus_gg.accountants.ball_contour`, docs/accounting.md "C5 in the
library"): the float64 K_c against the research tool's Arb K_c (``benchmarks/contour_base.error_rate``: above it, and
within 1 %), the tail against an Arb sum of the same pieces at 200 bits, the shipped data against what ``export``
writes, a corrupted file refused, the recursion of the Base states (C2), where the table uses the contour Base and
where it falls back (and says so), and the tables' ε: above the independent oracle's rigorous lower bounds, below the
U, V table's, and above the Arb contour Base's (the issue's setting: test_ball_table.py's
test_default_table_above_beta_two_at_p_two_against_one_coordinate, slow)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math

import numpy as np
import pytest
from flint import arb, ctx

from lower_bound_oracle import epsilon_lower
from opacus_gg.accountants import ball_contour, ball_prv, spreads
from opacus_gg.accountants.api import _compose_tight, _validate_errors
from opacus_gg.accountants.ball_contour import parse_contour_data
from opacus_gg.accountants.ball_prv import ABOVE_TWO_SPEC, TableSpec, build_table
from opacus_gg.accountants.checks import AccountingError
from opacus_gg.accountants.gg_pair import GGPair
from opacus_gg.accountants.history import PairSegment

from benchmark_modules import BENCHMARKS, load_benchmark

cb = load_benchmark("contour_base")
#: every β with a shipped file (docs "C5 in the library": the grid 2.05, 2.1, …, 3)
SHIPPED = ball_contour.shipped_betas()
#: the β the float-vs-Arb and table tests run at: 2.5, 2.2 (docs "β = 2.2, p = 2: what it takes"), 3 and the grid's
#: first, nearest β = 2
BETAS = (2.5, 2.2, 3.0, 2.05)


def _row_files_of(beta: float):
    """C3's rows files (c = 1.2, 2, 4) a shipped file is exported from (β = 2.5: the first, unsuffixed names)."""
    return [str(BENCHMARKS / "data" / f"c3_rows_{'' if beta == 2.5 else f'b{beta:g}_'}c{c}.json")
            for c in ("1.2", "2", "4")]


ROW_FILES_OF = {beta: _row_files_of(beta) for beta in BETAS}
DATAS = {beta: ball_contour.load_contour_data(beta) for beta in BETAS}
DATA = DATAS[2.5]
ROW_FILES = ROW_FILES_OF[2.5]
#: the Base-state width of ABOVE_TWO_SPEC at σ = 1 (ΔR < a_0²/4, a_0 = lat[0]) and of a coarse spec (a_0²)
_DR = float(ball_prv._lattice(1.0, ABOVE_TWO_SPEC)[0]) ** 2 / 4.0
#: ~30 intervals in (0, 1.2]: consecutive states of the default table (low, mid and top mass), wider ones, one wide
INTERVALS = ([(k * _DR, (k + 1) * _DR) for k in (1, 3, 4, 10, 40, 100, 200, 300, 410)]
             + [(r - 0.01, r) for r in (0.02, 0.05, 0.16, 0.3, 0.5, 0.64, 0.8, 1.0, 1.2)]
             + [(r, r) for r in (0.0025, 0.01, 0.25, 1.0)]
             + [(0.0025, 0.005), (0.01, 0.04), (0.1, 0.2), (0.3, 0.6), (0.6, 1.2), (1e-3, 1.2), (0.9, 1.1)])
#: a small table with the contour Base at σ = 2 (a_0 = 0.1m ≤ the data's 0.1; coarse cells, V on; ~5 s)
SMALL = TableSpec(a0=0.1, ratio_low=1.5, ratio_high=1.5, high_from=0.7, h=0.05, half_width=8.0, mass_split=1,
                  mean_variance=True)


#: C3's rows per c, as the tool reads them
ROWS_OF = {beta: {r.c: r for r in cb._row_files(files)} for beta, files in ROW_FILES_OF.items()}
ROWS = ROWS_OF[2.5]


@functools.lru_cache(maxsize=None)
def _decay(c: float, beta: float = 2.5):
    """C4's constants at (β, c) (Arb, a few seconds each)."""
    return cb.contour_decay.decay_constants(beta, c, ROWS_OF[beta][c].a0)


def _table(c: float, beta: float = 2.5) -> ball_contour.ContourRows:
    return next(t for t in DATAS[beta].tables if t.c == c)


def _check_rates(beta, cs, intervals) -> None:
    for c in cs:
        for lo, hi in intervals:
            ref = cb.error_rate(ROWS_OF[beta][c], _decay(c, beta), lo, hi)
            ours = ball_contour.error_rate(DATAS[beta], _table(c, beta), lo, hi)
            assert ref <= ours <= 1.01 * ref, (beta, c, lo, hi, ours, ref)


@pytest.mark.parametrize("beta", BETAS)
def test_float_error_rate_is_above_the_arb_one_and_within_one_percent_quick(beta):
    _check_rates(beta, (2.0,), [(_DR, 2 * _DR), (0.16 - _DR, 0.16), (0.9975, 1.0), (0.01, 1.2)])


@pytest.mark.parametrize("beta", BETAS)
def test_float_error_rate_is_above_the_arb_one_and_within_one_percent(beta):
    _check_rates(beta, (1.2, 2.0, 4.0), INTERVALS)


def _arb_tail(t: ball_contour.ContourRows, R: float) -> arb:
    """C4's tail sum on the file's pieces, in Arb (no code shared with :func:`ball_contour.tail_rate`)."""
    y, r, lam = [arb(float(v)) for v in t.tail_y], arb(R), arb(t.log_moment_rate)
    total = (r * (lam - arb(float(t.tail_kappa[-1])))).exp() / y[-1]
    for i in range(len(y) - 1):
        total += (r * (lam - arb(float(t.tail_kappa[i])))).exp() * (1 / y[i] - 1 / y[i + 1])
    return total / arb.pi()


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("c", [1.2, 2.0, 4.0])
def test_float_tail_is_above_the_arb_tail_and_tight(c, beta):
    old = ctx.prec
    ctx.prec = 200
    try:
        for R in (1e-4, _DR, 0.01, 0.16, 0.5, 1.0, 1.2):
            ref = _arb_tail(_table(c, beta), R)
            ours = ball_contour.tail_rate(_table(c, beta), R)
            assert ref.upper() <= arb(ours) and ours <= float(ref.upper()) * (1 + 1e-12), (c, R, ours, ref)
    finally:
        ctx.prec = old


@pytest.mark.parametrize("beta", BETAS)
def test_shipped_data_is_what_export_writes_quick(beta):
    # a few κ of C4 recomputed (the rows, Λ_c and I_β's ends of every shipped file: the test below; the full
    # export: the slow sibling)
    t = _table(2.0, beta)
    for i in (0, 1, 50, len(t.tail_y) - 1):
        assert t.tail_kappa[i] == cb.contour_decay.kappa_lower(_decay(2.0, beta), float(t.tail_y[i]),
                                                               y_end=cb.TAIL_END)


def test_the_shipped_grid_reaches_from_near_two_to_three_in_steps_of_a_twentieth():
    assert SHIPPED == tuple(round(2.0 + 0.05 * k, 2) for k in range(1, 21))
    assert set(BETAS) <= set(SHIPPED)


@pytest.mark.parametrize("beta", SHIPPED)
def test_every_shipped_file_holds_its_committed_rows_fisher_ends_and_log_moment_rates(beta):
    # the parts of export that cost < 1 s (the whole file: the slow sibling below)
    data = ball_contour.load_contour_data(beta)
    rows = {r.c: r for r in cb._row_files(_row_files_of(beta))}
    assert data.beta == beta and sorted(rows) == sorted(t.c for t in data.tables) == [1.2, 2.0, 4.0]
    for t in data.tables:
        r = rows[t.c]
        assert r.beta == beta and r.a0 == data.a0 == 0.1 and r.y_max == 40.0
        assert all(np.array_equal(getattr(t, k), getattr(r, k)) for k in ("y_lo", "y_hi", "rho", "lam"))
        assert t.log_moment_rate == cb.contour_decay.log_moment_rate(t.c, beta, r.a0)
    i_b = cb.fisher(beta)
    assert data.fisher_lower == cb.contour_decay._down(i_b) and data.fisher_upper == cb._up(i_b)


@pytest.mark.parametrize("beta", [b if b in BETAS else pytest.param(b, marks=pytest.mark.slow) for b in SHIPPED])
def test_shipped_data_is_what_export_writes(beta):
    with open(cb.export_path(beta)) as fh:
        shipped = json.load(fh)
    files = _row_files_of(beta)
    assert cb.export_data(cb._row_files(files), files) == shipped


def _raw() -> dict:
    with open(cb.export_path(2.5)) as fh:
        return json.load(fh)


@pytest.mark.parametrize("corrupt", [
    lambda d: d["tables"][0]["rho"].__setitem__(3, float("nan")),  # a NaN
    lambda d: d["tables"][1]["y_lo"].__setitem__(5, d["tables"][1]["y_lo"][5] + 0.01),  # a gap
    lambda d: d["tables"][0]["rho"].__setitem__(0, -1e-3),  # a negative ρ
    lambda d: d["tables"][2]["lam"].__setitem__(2, float("inf")),  # an infinite λ
    lambda d: d["tables"][0]["tail_kappa"].pop(),  # a κ missing
    lambda d: d["tables"][0]["tail_y"].__setitem__(0, 30.0),  # the tail does not start at Y
    lambda d: d["tables"][0].pop("log_moment_rate"),  # a field missing
    lambda d: d.__setitem__("fisher_lower", d["fisher_upper"] * 1.1),  # I_β's ends swapped
    lambda d: d["tables"][1].__setitem__("a0", 0.2),  # a table for another a_0
])
def test_a_corrupted_data_file_is_refused(corrupt):
    data = _raw()
    parse_contour_data(copy.deepcopy(data), "shipped")  # the shipped file passes
    corrupt(data)
    with pytest.raises(AccountingError, match="contour Base data"):
        parse_contour_data(data, "corrupted")


def test_contour_base_applies_at_beta_with_data_p_two_and_a_small_base_cell_only():
    ok, why = ball_prv.table_base(1.0, 2.5, 2.0, ABOVE_TWO_SPEC)
    assert isinstance(ok, ball_contour.ContourBase) and why.startswith("contour Base (beta = 2.5")
    # σ < 1/2: the Base cell 0.1m/2 exceeds the data's a_0 = 0.1; β without a file; p < 2; β ≤ 2; off
    for args, reason in (((1 / 0.4, 2.5, 2.0), "exceeds the data's a_0"), ((1.0, 2.33, 2.0), "no data shipped"),
                         ((1.0, 2.5, 1.5), "clip_norm_p = 1.5"), ((1.0, 1.5, 2.0), "beta <= 2")):
        none, why = ball_prv.table_base(*args, ABOVE_TWO_SPEC)
        assert none is None and reason in why, why
    assert ball_prv.table_base(1.0, 2.5, 2.0, ABOVE_TWO_SPEC, contour_base=False)[0] is None
    assert ball_contour.load_contour_data(2.33) is None
    # the note names the shipped β and the nearest one
    why = ball_contour.contour_applies(2.33, 2.0, 0.05)[1]
    assert "shipped: 2.05, 2.1, 2.15, " in why and ", 3; the nearest 2.35)" in why, why


def test_a_beta_that_a_file_name_rounds_has_no_data_and_falls_back_to_the_moments_base():
    """The file name holds f"{β:g}": β = 0.7·3 = 2.0999999999999996 or 2.5000001 read the 2.1 / 2.5 file's name but
    are not its β; they get no data (the Base min(U, V), as for any β without a file), not an error (found by a
    review: the β check raised, so default_spec failed instead of falling back)."""
    for beta in (0.7 * 3, 2.5000001):
        assert ball_contour.load_contour_data(beta) is None
        ok, why = ball_contour.contour_applies(beta, 2.0, 0.05)
        assert not ok and f"no data shipped for beta = {beta!r}" in why, why
        spec = ball_prv.default_spec(2.0, beta, 1.0)  # no raise
        assert ball_prv.table_base(1.0, beta, 2.0, spec)[0] is None
    assert ball_contour.load_contour_data(2.1) is not None  # the file's own β still reads it


def test_gauss_tail_integral_is_above_the_exact_one_and_within_six_percent():
    """∫_y^∞ e^{−s²t²}dt = √π·erfc(sy)/(2s) (mpmath, 40 digits) ≤ :func:`ball_contour.gauss_tail_integral_up` (A&S
    7.1.13), ≤ 1.06× it where it is a normal float, and > 0 where it underflows."""
    import mpmath as mp
    with mp.workdps(40):
        for s2 in (1e-12, 1e-6, 1e-3, 7.3e-3, 0.1, 1.0, 30.0, 1e6):
            for y in (0.0, 1e-3, 0.5, 3.0, 10.0, 40.0, 100.0, 1e4):
                s = mp.sqrt(s2)
                exact = mp.sqrt(mp.pi) / (2 * s) * mp.erfc(s * y)
                ours = ball_contour.gauss_tail_integral_up(s2, y)
                assert ours >= exact and ours > 0.0, (s2, y, ours, exact)
                if exact > 1e-300:
                    assert ours <= 1.06 * exact, (s2, y, ours, exact)
    with pytest.raises(ValueError, match="s2"):
        ball_contour.gauss_tail_integral_up(0.0, 1.0)


@pytest.mark.parametrize("c", [1.2, 4.0])
def test_error_rate_charges_the_gaussian_beyond_the_rows(c, monkeypatch):
    """Beyond the rows' end Y, |M − M_G| ≤ |M| + |M_G|: K_c holds C4's tail for |M| and, separately, the Gaussian's
    (1/π)∫_Y^∞ |M_G|/|z(z − 1)| (a review found it missing: covered by tail(r_lo) + tail(r_hi) only where r_lo/r_hi is
    not small). K_c less its value without the Gaussian part is ≥ that integral's sup over R' ∈ [r_lo, r_hi]
    (mpmath quadrature at both ends: |M_G| = e^{I_β R'(c² − c − y²)/2} decreases in R' for y² > c² − c)."""
    import mpmath as mp
    t = _table(c)
    Y = float(t.y_hi[-1])
    for lo, hi in ((1e-3, 1.2), (0.01, 0.0102), (1e-4, 1e-4)):
        full = ball_contour.error_rate(DATA, t, lo, hi)
        with monkeypatch.context() as mpatch:
            mpatch.setattr(ball_contour, "gauss_tail_rate", lambda *a: 0.0)
            without = ball_contour.error_rate(DATA, t, lo, hi)
        with mp.workdps(30):
            def part(r):
                f = lambda y: mp.exp(DATA.fisher_lower * r * (c * c - c - y * y) / 2) / (
                    mp.sqrt(c * c + y * y) * mp.sqrt((c - 1) ** 2 + y * y))
                return mp.quad(f, [Y, 2 * Y, mp.inf]) / mp.pi
            need = max(part(lo), part(hi))
        assert full - without >= float(need) * (1 - 1e-9) > 0.0, (c, lo, hi, full - without, need)


def test_fallback_table_is_the_moments_table_bit_for_bit():
    # where the contour Base does not apply (σ = 1 with the Base cell 0.3m > the data's 0.1) the U, V table
    spec = dataclasses.replace(SMALL, a0=0.3)
    tab, off = (build_table(1.0, 2.5, 2.0, spec, contour_base=b) for b in (True, False))
    assert "not used" in tab.base and "exceeds" in tab.base
    np.testing.assert_array_equal(tab.top.omega, off.top.omega)


def test_base_states_take_the_contour_values_above_the_threshold_and_cover_the_state_below():
    t = ball_prv.loss_grid(0.5, SMALL, 2.5)
    grid = ball_prv._Grid(t)
    orders = SMALL.orders
    a0 = 0.05
    rates = ball_prv.base_log_moment_rates(a0, 2.5, 2.0, orders)
    d_r, n = a0 * a0 / 4.0, 40
    base = ball_contour.ContourBase(DATA)
    states = ball_prv.base_states(d_r, n, rates, t, grid, SMALL, None, base, a0)
    plain = ball_prv.base_states(d_r, n, rates, t, grid, SMALL, None, None, a0)
    alpha = np.exp(np.linspace(0.0, 3.0, 13))
    prev = None
    for i in range(1, n + 1):
        h, h_uv = states[i][0].h_pq(alpha), plain[i][0].h_pq(alpha)
        if i * d_r < a0 * a0:  # below the threshold: U, V alone, bit for bit
            np.testing.assert_array_equal(states[i][0].omega, plain[i][0].omega)
        else:
            assert np.all(h <= h_uv * (1 + 1e-12))  # a min with U, V
            assert np.all(h >= prev * (1 - 1e-9))  # C2: covers every member of the states below
        prev = h
    assert np.any(h < 0.9 * h_uv)  # the contour values are below U, V at mass 10 a_0²
    with pytest.raises(ValueError, match="exceeds"):
        base.applies(0.01, 0.02, 0.2)


def _eps(tab, q, steps, delta):
    eps_error, delta_error = _validate_errors(delta, 0.01, None)
    seg = PairSegment(tab.pairs, q, steps, tab.roundoff)
    return max(_compose_tight([seg], delta, d, eps_error, delta_error).epsilon_upper for d in ("remove", "add"))


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("q,steps", [(1.0, 1), (0.2, 5)])
def test_contour_table_is_above_the_oracle_and_below_the_moments_table(q, steps, beta):
    """β ∈ {2.5, 2.2, 3, 2.05}, p = 2, σ = 2 (SMALL: the contour Base from mass a_0² on): ε ≥ the independent oracle's
    rigorous lower bounds for one, two, eight and 32 equal coordinates (δ = 10⁻³), and ≤ the U, V table's ε."""
    sigma, delta = 2.0, 1e-3
    tab = build_table(1.0 / sigma, beta, 2.0, SMALL)
    assert tab.base.startswith("contour Base (")
    eps = _eps(tab, q, steps, delta)
    lows = {k: epsilon_lower([(sigma, q, steps, beta)], delta, shift=(k ** -0.5,) * k) for k in (1, 2, 8, 32)}
    assert all(0 < low <= eps for low in lows.values()), (lows, eps)
    assert eps <= _eps(build_table(1.0 / sigma, beta, 2.0, SMALL, contour_base=False), q, steps, delta)


@pytest.mark.parametrize("beta", [2.5, 3.0])
@pytest.mark.parametrize("sigma", [2.0, 4.0])
def test_contour_base_at_the_data_a0_dominates_many_equal_coordinates_at_large_sigma(sigma, beta):
    """default_spec above σ = 1 holds the Base cell at the data's a_0 = 0.1 absolute (0.2m / 0.4m here), so the Base
    states reach the whole mass m² in coordinates ≤ 0.1: the state of mass ≥ m² is above the exact curves
    (`spreads.exact_spread_pair`, both orientations) of k equal coordinates m/√k ≤ 0.1, and the contour values are
    what it takes there (below U, V)."""
    m = 1.0 / sigma
    a0 = 0.1 * (1.0 - 1e-9)
    t = ball_prv.loss_grid(m, dataclasses.replace(SMALL, h=0.01, half_width=10.0, tail=1e-13), beta)
    grid = ball_prv._Grid(t)
    rates = ball_prv.base_log_moment_rates(a0, beta, 2.0, SMALL.orders)
    d_r = a0 * a0 / 4.0
    n = int(math.ceil(m * m / d_r))
    states = ball_prv.base_states(d_r, n, rates, t, grid, SMALL, None, ball_contour.ContourBase(DATAS[beta]), a0)
    plain = ball_prv.base_states(d_r, n, rates, t, grid, SMALL, None, None, a0)
    (top, c), alpha = states[n], np.exp(np.linspace(0.0, 3.0, 13))
    assert np.any(top.h_pq(alpha) < 0.9 * plain[n][0].h_pq(alpha))
    for k in sorted({int(math.ceil((m / 0.1) ** 2)), 32, 128}):
        exact = spreads.exact_spread_pair(sigma, beta, k, 2.0)
        # the exact pair's own padding (its masses at ±∞, ~2·10⁻¹⁶, its round-off) is below its resolution
        pad = 4.0 * (exact.p_inf + exact.q_ninf)
        assert np.all((1 - c) * exact.h_pq(alpha) <= top.h_pq(alpha) + pad), k
        assert np.all((1 - c) * exact.h_qp(alpha) <= top.h_qp(alpha) + pad), k


def test_contour_table_is_above_the_arb_contour_table():
    # the same recursion with the tool's Arb K_c (K_float ≥ K_Arb, so every value and the ε are ≥)
    lib = build_table(0.5, 2.5, 2.0, SMALL)
    arb_base = cb.ArbContourBase(cb._row_files(ROW_FILES), ball_contour.MIN_CELLS)
    ref = build_table(0.5, 2.5, 2.0, SMALL, contour_base=arb_base)
    assert arb_base.used
    alpha = np.exp(np.linspace(0.0, 3.0, 13))
    assert np.all(lib.top.h_pq(alpha) >= ref.top.h_pq(alpha))
    assert _eps(lib, 0.2, 5, 1e-3) >= _eps(ref, 0.2, 5, 1e-3)


def test_gaussian_limit_curve_is_above_the_exact_shift_curve():
    # the float shift √(I_β R) ≥ the Arb ball's upper end, so the curve is ≥ GGPair's at that (exact-up) shift
    for R in (1e-3, 0.16, 1.0):
        s_up = cb._up((cb.fisher(2.5) * arb(R)).sqrt())
        la = np.linspace(0.0, 4.0, 9)
        ours = ball_contour.gaussian_limit_curve(DATA, R, la)
        assert np.all(ours >= GGPair(s_up, 2.0).h_pq(np.exp(la), la))
        assert math.sqrt(DATA.fisher_upper * R) * (1 + 4 * 2.0 ** -53) >= s_up
