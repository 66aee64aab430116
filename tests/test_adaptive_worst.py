"""benchmarks/adaptive_worst.py (issue 35: the truth under adaptively chosen shapes, rigorous lower bounds): its
recursion against the composition formula and the library's composition, its laws against the exact one-step
curves, and the order fixed shapes ≤ adaptive ≤ envelope ≤ proven (docs/accounting.md, "The truth under adaptive
shapes: lower bounds (issue 35)", Lemmas A1–A5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from opacus_gg.accountants import ball_prv
from opacus_gg.accountants.api import compute_epsilon
from opacus_gg.accountants.fisher import fisher_information
from opacus_gg.accountants.gg_pair import GGPair
from lower_bound_oracle import epsilon_lower as oracle_epsilon_lower  # the independent oracle: numpy/scipy only


from benchmark_modules import load_benchmark

aw = load_benchmark("adaptive_worst")
bc = load_benchmark("base_ceiling")

_SI15 = math.sqrt(fisher_information(1.5))


def _recursion(shapes, beta, q, h, t_min, t_max, direction="remove", hc=2e-5):
    grid = aw.Grid.around(h, t_min, t_max)
    ker = aw.kernels_for(shapes, beta, q, grid, hc)[direction]
    return aw.Recursion(ker, grid), grid


@pytest.mark.parametrize("beta,a", [(1.5, 1.0), (3.0, 0.7)])
def test_one_step_bounds_bracket_the_exact_curve_of_one_coordinate(beta, a):
    # q = 1, one step, remove: V_1(t) = H_{e^t}(P_a‖Q), exact from the library's GG pair (to nearest); the lower end
    # must be below it and the upper end above it at every grid point, and both within 5·10⁻³ of it where it exceeds
    # 10⁻⁸ (the loss grid h_c = 10⁻⁴ sets that: one step unsampled reads the laws' rounding at full weight)
    rec, grid = _recursion([aw.Shape("one", ((a, 1),))], beta, 1.0, 2e-3, -6.0, 6.0, hc=1e-4)
    rec.step()
    exact = GGPair(a, beta).h_pq(np.exp(grid.t), upper=False)
    assert np.all(rec.lo <= exact * (1 + 1e-9) + 1e-15)
    assert np.all(rec.hi >= exact * (1 - 1e-9) - 1e-15)
    bulk = exact > 1e-8
    assert np.max((exact - rec.lo)[bulk] / exact[bulk]) < 5e-3
    assert np.max((rec.hi - exact)[bulk] / exact[bulk]) < 5e-3


def test_recursion_with_one_shape_is_the_composition_formula():
    # K = 1: V_T = H of the T-fold composition, Σ_u ν^{*T}_u B(t − u) (B = (1 − e^t)_+), for the lower kernel ν
    # composed directly (numpy's convolution, no FFT): the recursion without its clamps is that up to its round-off
    # bounds (taken off, ≤ 10⁻¹³ per step here) inside the grid, so within 10⁻¹² absolute and 10⁻⁶ relative where
    # it exceeds 10⁻⁶, for t ∈ [−6, 6] (near the ends the fallbacks V ≥ B, V ≥ 0 read less); with the clamps
    # (facts of every V_s) it is only higher
    shapes = [aw.Shape("limit", (), _SI15)]
    rec, grid = _recursion(shapes, 1.5, 0.2, 4e-3, -12.0, 12.0)
    k = rec.kernels[0]
    law = k.lo
    for _ in range(4):
        law = np.convolve(law, k.lo)
    for _ in range(5):
        rec.step(clamp=False)
    bare = rec.lo.copy()
    rec.start()
    for _ in range(5):
        rec.step()
    assert np.all(rec.lo >= bare)
    j = 5 * k.jmin + np.arange(len(law))
    direct = np.array([np.sum(law * -np.expm1(np.minimum(t - j * grid.h, 0.0))) for t in grid.t])
    inner = np.abs(grid.t) <= 6.0
    sel = (direct > 1e-6) & inner
    assert np.all(np.abs(bare - direct)[inner] <= 1e-12)
    assert np.max(np.abs(bare - direct)[sel] / direct[sel]) < 1e-6


def test_fixed_shape_brackets_the_librarys_prv_and_the_independent_oracle():
    # one GG coordinate at β = 1.5, q = 0.05, T = 20: the rigorous lower end is below the library's PRV ε (an upper
    # bound); the family's upper end is above the oracle's rigorous lower bound (tests/lower_bound_oracle.py shares
    # no code); the bracket is narrow
    q, steps, delta = 0.05, 20, 1e-5
    recs = {}
    for d in ("remove", "add"):
        rec, _ = _recursion([aw.Shape("one", ((1.0, 1),))], 1.5, q, 1e-3, -8.0, 8.0, d)
        for _ in range(steps):
            rec.step()
        recs[d] = rec
    lo, hi, _, _ = aw._eps_both(recs, delta)
    prv = bc._eps((("one", GGPair(1.0, 1.5)),), q, steps, delta)
    oracle = oracle_epsilon_lower([(1.0, q, steps, 1.5)], delta, (1.0,))
    assert lo <= prv
    assert oracle <= hi
    assert hi - lo < 0.01
    assert abs(prv - hi) < 0.01


def test_adaptive_value_is_monotone_in_the_number_of_steps():
    shapes = [aw.Shape("limit", (), _SI15), aw.Shape("one", ((1.0, 1),))]
    rec, _ = _recursion(shapes, 1.5, 0.05, 2e-3, -8.0, 8.0)
    prev_lo, prev_eps = rec.lo.copy(), -math.inf
    for _ in range(3):
        for _ in range(10):
            rec.step()
        assert np.all(rec.lo >= prev_lo)
        eps = rec.epsilon(1e-5)[0]
        assert eps >= prev_eps
        prev_lo, prev_eps = rec.lo.copy(), eps
    assert prev_eps > 0


def _limit_beside(a: float) -> object:
    t = np.arange(-2000, 2001) * 0.005
    one = ball_prv.envelope_pair([GGPair(a, 1.5)], t)[0]
    rest = ball_prv.envelope_pair([GGPair(_SI15 * math.sqrt(1 - a * a), 2.0)], t)[0]
    return one.compose(rest)


def test_fixed_shapes_at_most_adaptive_at_most_the_envelope_composition():
    # β = 1.5, p = 2: the limit, the one coordinate and 0.5m + limit (crossing curves), q = 0.05, T = 30: every fixed
    # shape's ε ≤ the adaptive recursion's lower end ≤ its upper end ≤ the PRV of the envelope pair composed (the
    # library's composition, an upper object: the envelope dominates every shape at every step)
    q, steps, delta = 0.05, 30, 1e-5
    shapes = [aw.Shape("limit", (), _SI15), aw.Shape("one", ((1.0, 1),)),
              aw.Shape("0.5 + limit", ((0.5, 1),), _SI15 * math.sqrt(0.75))]
    grid = aw.Grid.around(1e-3, -8.0, 8.0)
    ker = aw.kernels_for(shapes, 1.5, q, grid, 2e-5)
    recs = {d: aw.Recursion(ker[d], grid) for d in ker}
    fixed = []
    for i in range(len(shapes)):
        for d in recs:
            aw.run_schedule(recs[d], steps, [i] * steps)
        fixed.append(aw._eps_both(recs, delta))
        fixed_lo = [r.lo.copy() for r in recs.values()]
        for d in recs:
            aw.run_schedule(recs[d], steps)
        for r, f in zip(recs.values(), fixed_lo):  # pointwise: the max over shapes per state is ≥ each fixed shape
            assert np.all(r.lo >= f - 1e-12)  # (up to the round-off bounds taken off, which grow with the values)
    adaptive = aw._eps_both(recs, delta)
    env = bc._eps((("limit", GGPair(_SI15, 2.0)), ("one", GGPair(1.0, 1.5)), ("beside", _limit_beside(0.5))),
                  q, steps, delta)
    assert max(f[0] for f in fixed) <= adaptive[0] <= adaptive[1] <= env


def test_adaptive_choice_beats_every_fixed_shape_where_the_curves_cross():
    # one step unsampled (q = 1), two steps: the one coordinate and the limit cross (one coordinate worse at small α);
    # at some t the adaptive lower end exceeds the upper end of every fixed schedule, so the recursion's max is real
    shapes = [aw.Shape("limit", (), _SI15), aw.Shape("one", ((1.0, 1),))]
    rec, grid = _recursion(shapes, 1.5, 1.0, 2e-3, -8.0, 8.0)
    his = []
    for i in range(2):
        aw.run_schedule(rec, 2, [i, i])
        his.append(rec.hi.copy())
    aw.run_schedule(rec, 2)
    gain = rec.lo - np.maximum(*his)
    assert np.max(gain) > 1e-3


def test_adaptive_lower_bound_is_below_the_proven_epsilon():
    # β = 2.5, p = 2, d = 2410, q = 0.05, T = 30: real shapes (one coordinate, two equal coordinates, 0.7m beside the
    # rest spread over 8 coordinates): the adaptive lower end is below the library's proven ε
    q, steps, delta = 0.05, 30, 1e-5
    m = 1.0
    rest = math.sqrt((1 - 0.49) / 8)
    shapes = [aw.Shape("one", ((m, 1),)), aw.Shape("two", ((m / math.sqrt(2), 2),)),
              aw.Shape("0.7 + 8", ((0.7, 1), (rest, 8)))]
    grid = aw.Grid.around(2e-3, -8.0, 10.0)
    ker = aw.kernels_for(shapes, 2.5, q, grid, 2e-4)
    recs = {d: aw.Recursion(ker[d], grid) for d in ker}
    for d in recs:
        aw.run_schedule(recs[d], steps)
    lo = aw._eps_both(recs, delta)[0]
    proven = compute_epsilon(noise_multiplier=1.0, sample_rate=q, steps=steps, delta=delta, beta=2.5, dim=2410,
                             clip_norm_p=2.0)
    assert 0 < lo <= proven.epsilon


def test_grid_contraction_is_below_in_the_decreasing_convex_order():
    # Lemma A4's core: for the hockey sticks ψ_y(x) = (y − x)_+ (they span every convex non-increasing ψ ≥ 0 up to a
    # constant) Σ ν_j ψ_y(e^{−jh}) ≤ Σ_a m_a ψ_y(e^{−u_a}) at every y, and the mass is not raised; for a smooth ψ
    # (e^{−3x}) the gap is second order in h (a quarter when h halves, within a factor 1.6; a hockey stick's own gap
    # is first order where y falls inside a group)
    # (dense atoms, as in the kernels, spacing 10⁻⁶: a group's barycentre overshoots its grid point by about one atom,
    # a first-order term in the atoms' spacing that sparse atoms would make dominate)
    rng = np.random.default_rng(7)
    u = np.arange(-0.05, 0.5, 1e-6)
    m = np.exp(-0.5 * (u / 0.02) ** 2) + 0.01 * np.exp(-u / 0.3) * (u > 0) + 0.1 * rng.random(u.size) * (u < 0.05)
    m /= m.sum()
    x = np.exp(-u)
    ys = np.linspace(x.min(), x.max(), 401)
    gaps = []
    for h in (8e-3, 4e-3):
        cells, w = aw.contract_to_grid(u, m, h)
        xg = np.exp(-cells * h)
        assert w.sum() <= m.sum()
        exact = np.array([np.sum(m * np.maximum(y - x, 0.0)) for y in ys])
        grid = np.array([np.sum(w * np.maximum(y - xg, 0.0)) for y in ys])
        assert np.all(grid <= exact + 1e-15)
        gap = np.sum(m * np.exp(-3.0 * x)) - np.sum(w * np.exp(-3.0 * xg))
        assert gap >= 0.0
        gaps.append(gap)
    assert gaps[1] < 0.4 * gaps[0]


def test_two_coordinate_step_brackets_the_oracle_and_the_librarys_pair():
    # a product law (two equal coordinates, β = 3, ℓ2 radius 1, one step unsampled): the lower end is below the
    # library's dominating pair of the spread and the upper end above the independent oracle's rigorous lower bound
    from lower_bound_oracle import delta_lower, direction_pmfs
    from opacus_gg.accountants.spreads import exact_spread_pair

    a = 1.0 / math.sqrt(2.0)
    rec, grid = _recursion([aw.Shape("two", ((a, 2),))], 3.0, 1.0, 2e-3, -6.0, 8.0, hc=1e-4)
    rec.step()
    sel = (grid.t >= 0.0) & (grid.t <= 3.0)
    lib = exact_spread_pair(1.0, 3.0, 2, 2.0).h_pq(np.exp(grid.t[sel]))
    assert np.all(rec.lo[sel] <= lib * (1 + 1e-9) + 1e-15)
    (pmf, hh), _ = direction_pmfs([(1.0, 1.0, 1, 3.0)], (a, a), 1e-20)
    for eps in (0.0, 0.5, 1.0, 2.0):
        i = int(np.searchsorted(grid.t, eps))
        assert delta_lower(pmf, float(grid.t[i]), hh) <= rec.hi[i] * (1 + 1e-9) + 1e-15
        assert rec.hi[i] - rec.lo[i] < 0.01 * rec.hi[i] + 1e-9
