"""opacus_gg/accountants/family_composition.py: composing a ball table by the per-state maximum over its family
(docs/accounting.md, "The family maximum: adaptive choices among dominating pairs", Lemma M1): the members cover the
ball (each shift is dominated by the member of the cell of its largest coordinate), the recursion's upper end alone
is the two-sided one's bit for bit, one member is the envelope's composition, and the family's ε lies between the
rigorous lower bounds (the independent oracle's fixed shapes, the adaptive adversary's over explicit shapes) and the
envelope's PRV; the API publishes it and says so."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from lower_bound_oracle import epsilon_lower
from opacus_gg.accountants import api, ball_prv, family_composition, spreads
from opacus_gg.accountants.api import _compose_tight, _validate_errors, compute_epsilon
from opacus_gg.accountants.ball_prv import TableSpec, build_table
from opacus_gg.accountants.checks import AccountingError
from opacus_gg.accountants.discretization import ctd_pmf, hull_tolerance
from opacus_gg.accountants.family_composition import (FAMILY_EPSILON_FLOOR, FAMILY_RELATIVE_MESH, Grid, Recursion,
                                                      family_epsilon, make_kernel)
from opacus_gg.accountants.history import PairSegment
from opacus_gg.accountants.profile import one_step_delta

from benchmark_modules import load_benchmark

#: a small table with the contour Base at σ = 2 (coarse cells, V on; ~5 s; tests/test_ball_contour.py's SMALL)
SMALL = TableSpec(a0=0.1, ratio_low=1.5, ratio_high=1.5, high_from=0.7, h=0.05, half_width=8.0, mass_split=1,
                  mean_variance=True)
ALPHAS = np.exp(np.linspace(-4.0, 4.0, 17))


@functools.lru_cache(maxsize=4)
def _table(beta: float, sigma: float):
    return build_table(1.0 / sigma, beta, 2.0, SMALL)


def _segment(tab, q: float, steps: int) -> PairSegment:
    return PairSegment(tab.pairs, q, steps, tab.roundoff, tab.member_pairs)


def _both(seg: PairSegment, delta: float, members=None):
    """{direction: (envelope ε, family ε)}, the family ``members`` (default: the segment's own)."""
    eps_error, delta_error = _validate_errors(delta, 0.01, None)
    if members is not None:
        seg = PairSegment(seg.pairs, seg.sample_rate, seg.steps, seg.roundoff, members)
    out = {}
    for d in ("remove", "add"):
        res = _compose_tight([seg], delta, d, eps_error, delta_error)
        out[d] = (res.epsilon_upper, family_epsilon(seg, delta, d, _mesh(res), res.domain_L, 2.0 * res.epsilon_upper + 1.0))
    return out


def _mesh(res) -> float:
    """The recursion's grid step as :func:`.api.ball_table_epsilon` takes it."""
    return max(res.mesh, FAMILY_RELATIVE_MESH * max(res.epsilon_upper, FAMILY_EPSILON_FLOOR))


def _random_kernels(grid, u_range, seed=7):
    rng = np.random.default_rng(seed)
    out = []
    for k in range(3):
        u = np.sort(rng.uniform(*u_range, 400))
        m = rng.uniform(0.0, 1.0, 400)
        m *= (1.0 - 1e-6) / m.sum()
        atoms = (u, m, 1e-6 * k)
        out.append((make_kernel(str(k), atoms, atoms, grid), make_kernel(str(k), None, atoms, grid)))
    return out


@pytest.mark.parametrize("u_range", [(-0.8, 0.0), (-0.5, 0.8)])
def test_the_upper_end_alone_is_the_two_sided_recursions_upper_end_or_below_it_by_the_chord(u_range):
    """``upper_only``: the same W⁺ bit for bit where no step reads below the grid (losses ≤ 0), and where one does
    (losses up to 0.8 from t_0 = −1) at most the two-sided one's (the chord below the grid instead of 1) and ≥ B."""
    grid = Grid.around(1e-2, -1.0, 8.0)
    kernels = _random_kernels(grid, u_range)
    both = Recursion([a for a, _ in kernels], grid)
    upper = Recursion([b for _, b in kernels], grid, upper_only=True)
    assert all(np.array_equal(a.hi, b.hi) and a.rho == b.rho for a, b in kernels)
    for _ in range(6):
        both.step()
        upper.step()
        assert np.array_equal(upper.lo, upper.b)  # the trivial lower end
        assert np.all(upper.hi >= upper.b)
        if u_range[1] <= 0.0:
            assert np.array_equal(both.hi, upper.hi)
        else:
            assert np.all(upper.hi <= both.hi) and np.any(upper.hi < both.hi)


@pytest.mark.parametrize("u_range", [(-3.0, 3.0), (-0.2, 4.5), (-4.5, 0.1)])
def test_one_upper_step_is_the_direct_sum_over_the_extended_array(u_range):
    """The batched circular FFT of length lw (not lw + lk − 1) reads no wrapped entry: one step without the clamps
    equals max_k [Σ_j hi_k(j)·X_{i−j} + ρ_k], X = W⁺ on the grid, the chord below and W⁺_{n−1} above, summed directly
    in long double, within the step's own round-off bound, for kernels reaching far beyond both ends of the grid."""
    grid = Grid.around(1e-2, -1.0, 2.0)
    kernels = [b for _, b in _random_kernels(grid, u_range)]
    rec = Recursion(kernels, grid, upper_only=True)
    assert rec.nf < rec.lw + rec.lk - 1  # shorter than the linear convolution's length
    rng = np.random.default_rng(3)
    w0 = np.minimum.accumulate(np.maximum(rec.b + 0.3 * rng.uniform(size=grid.n) * np.exp(-grid.t), rec.b))
    rec.hi = np.minimum(w0, 1.0)
    x = rec.hi.astype(np.longdouble)
    t0 = float(grid.t[0])
    direct = np.full(grid.n, -np.inf, dtype=np.longdouble)
    for k in kernels:
        j = k.jmin + np.arange(len(k.hi))
        tot = np.zeros(grid.n, dtype=np.longdouble)
        for i in range(grid.n):
            idx = i - j
            t = (idx - grid.i0) * grid.h
            inner = np.clip(idx, 0, grid.n - 1)
            val = np.where(idx < 0, 1.0 - np.exp(t - t0) * (1.0 - x[0]), np.where(idx >= grid.n, x[-1], x[inner]))
            tot[i] = np.sum(k.hi.astype(np.longdouble) * val) + k.rho
        direct = np.maximum(direct, tot)
    rec.lo = np.zeros(grid.n)  # random kernels are no PLDs (E e^{−L} > 1): W⁺ may fall below B here
    rec.step(clamp=False)
    gap = np.abs(rec.hi - direct.astype(np.float64))
    assert np.max(gap) < 1e-12
    assert np.any(rec.hi != 0.0) and np.all(rec.hi >= direct.astype(np.float64) - 1e-15)


def test_the_members_are_the_top_states_base_and_products_and_lie_below_the_top_pair():
    tab = _table(2.5, 2.0)
    lat = ball_prv._lattice(tab.m, SMALL)
    assert len(tab.members) == min(ball_prv.FAMILY_GROUPS, lat.size)
    top = np.maximum(tab.top.h_pq(ALPHAS), tab.top.h_qp(ALPHAS))
    for pair, c in tab.members:  # Lemma T2: the top state's envelope dominates each member
        assert 0.0 <= c <= tab.roundoff
        assert np.all(pair.h_pq(ALPHAS) <= top * (1.0 + 1e-9) + 1e-12)
    labels = [pairs[0][0] for pairs, _ in tab.member_pairs]
    assert labels == [f"member-{k}" for k in range(len(tab.members))]


@pytest.mark.parametrize("beta", [2.5, 3.0])
def test_each_member_dominates_the_equal_spreads_whose_coordinates_lie_in_its_cell(beta):
    """Lemma M1's cover: k equal coordinates m/√k lie in the cell (a_{j−1}, a_j] (or the Base, ≤ a_0) of member j, which
    must dominate their exact pair (`spreads.exact_spread_pair`) in both orientations; members are ungrouped here."""
    sigma = 2.0
    tab = _table(beta, sigma)
    lat = ball_prv._lattice(tab.m, SMALL)
    assert len(tab.members) == lat.size  # one member per cell: the index is the cell's
    for k in (1, 2, 3, 5, 8, 32, 128):
        a = tab.m / math.sqrt(k)
        j = int(np.searchsorted(lat, a))  # lat[j − 1] < a ≤ lat[j] (j = 0: the Base)
        pair, c = tab.members[j]
        exact = spreads.exact_spread_pair(sigma, beta, k, 2.0)
        pad = 4.0 * (getattr(exact, "p_inf", 0.0) + getattr(exact, "q_ninf", 0.0))  # k = 1: the exact GGPair
        assert np.all((1 - c) * exact.h_pq(ALPHAS) <= pair.h_pq(ALPHAS) + pad), k
        assert np.all((1 - c) * exact.h_qp(ALPHAS) <= np.maximum(pair.h_pq(ALPHAS), pair.h_qp(ALPHAS)) + pad), k


def test_one_member_is_the_exact_composition_of_the_envelopes_law():
    """K = 1 (the envelope pair as the only member): V_T is the T-fold composition of the step's connect-the-dots law,
    so the recursion's ε equals the ε of that law convolved exactly (long double, on its lattice) to 10⁻⁸, and is
    at most the library's FFT composition of the same law (which is ≥ the exact one: its grid's tail allowance)."""
    tab = _table(2.5, 2.0)
    q, steps, delta = 0.2, 5, 1e-3
    seg = PairSegment(tab.pairs, q, steps, tab.roundoff, ((tab.pairs, tab.roundoff),))
    for d, (env, fam) in _both(seg, delta).items():
        eps_error, delta_error = _validate_errors(delta, 0.01, None)
        res = _compose_tight([seg], delta, d, eps_error, delta_error)
        h = _mesh(res)
        k = int(math.ceil(res.domain_L / h))
        ts = np.arange(-k, k + 1, dtype=np.float64) * h  # the recursion's aligned points
        dl, rr, _, _ = one_step_delta(seg, ts, d)
        pmf, rho, _ = ctd_pmf(ts, dl, rr, hull_tolerance(seg))
        law = pmf.astype(np.longdouble)
        for _ in range(steps - 1):
            law = np.convolve(law, pmf.astype(np.longdouble))
        loss = steps * ts[0] + h * np.arange(law.size)
        rho_t = 1.0 - (1.0 - rho) ** steps

        def delta_at(t: float) -> float:
            return float(np.sum(law * np.maximum(0.0, -np.expm1(t - loss)))) + rho_t

        lo, hi = 0.0, env
        for _ in range(60):
            lo, hi = ((lo + hi) / 2, hi) if delta_at((lo + hi) / 2) > delta else (lo, (lo + hi) / 2)
        assert abs(fam - hi) <= 1e-8 and fam <= env * (1 + 1e-12), (d, fam, hi, env)


@pytest.mark.parametrize("beta", [2.5, 3.0])
def test_family_epsilon_lies_between_the_rigorous_lower_bounds_and_the_envelope(beta):
    """σ = 2, q = 0.2, T = 5, δ = 10⁻³: the family's ε ≤ the envelope's (and strictly below it), ≥ the oracle's rigorous
    lower bounds for 1, 2, 8 and 32 equal coordinates and ≥ the adaptive adversary's rigorous lower end over one,
    two equal and 0.9m + 0.436m coordinates (benchmarks/adaptive_worst.py, Lemmas A1–A4)."""
    sigma, q, steps, delta = 2.0, 0.2, 5, 1e-3
    tab = _table(beta, sigma)
    by_dir = _both(_segment(tab, q, steps), delta)
    env, fam = max(e for e, _ in by_dir.values()), max(f for _, f in by_dir.values())
    assert fam < env * (1 - 1e-3), by_dir
    lows = {k: epsilon_lower([(sigma, q, steps, beta)], delta, shift=(k ** -0.5,) * k) for k in (1, 2, 8, 32)}
    assert all(0 < low <= fam for low in lows.values()), (lows, fam)
    aw = load_benchmark("adaptive_worst")
    m = 1.0 / sigma
    shapes = [aw.Shape("one", ((m, 1),)), aw.Shape("two", ((m / math.sqrt(2.0), 2),)),
              aw.Shape("mixed", ((0.9 * m, 1), (m * math.sqrt(1 - 0.81), 1)))]
    grid = aw.Grid.around(2e-3, -4.0, 6.0)
    ker = aw.kernels_for(shapes, beta, q, grid, 2e-5)
    adaptive = []
    for d in ("remove", "add"):
        rec = aw.Recursion(ker[d], grid)
        aw.run_schedule(rec, steps)
        adaptive.append(rec.epsilon(delta)[0])
    assert 0 < max(adaptive) <= fam, (adaptive, fam)


def test_the_api_takes_the_family_maximum_and_says_so(monkeypatch):
    """The report's table ε is the smaller of the envelope's and the family's per direction (the published ε is
    the smallest proven one: at this coarse spec the Rényi bound), and its details say how the table composed;
    above FAMILY_MAX_CONVOLUTIONS the envelope's alone, and the details say why."""
    monkeypatch.setattr(api, "TABLE_SPEC", SMALL)
    kw = dict(noise_multiplier=2.0, sample_rate=0.2, steps=5, delta=1e-3, beta=2.5, dim=100, clip_norm_p=2.0,
              ball_bound="table")
    rep = compute_epsilon(**kw)
    by_dir = _both(_segment(_table(2.5, 2.0), 0.2, 5), 1e-3)
    assert "per-state maximum over the table's 7 family members" in rep.details["ball_table_composition"]
    assert rep.details["epsilon_ball_table"] == max(min(e, f) for e, f in by_dir.values())
    assert rep.epsilon == min(rep.details["epsilon_ball_table"], rep.details["epsilon_rdp"])
    monkeypatch.setattr(family_composition, "FAMILY_MAX_CONVOLUTIONS", 4)  # 5 steps x 7 members: above it
    env = compute_epsilon(**kw)
    assert "envelope pair (steps x members above" in env.details["ball_table_composition"]
    assert env.details["epsilon_ball_table"] == max(e for e, _ in by_dir.values()) > rep.details["epsilon_ball_table"]


def test_a_failing_family_maximum_keeps_the_envelope_and_says_so(monkeypatch):
    monkeypatch.setattr(api, "TABLE_SPEC", SMALL)
    kw = dict(noise_multiplier=2.0, sample_rate=0.2, steps=5, delta=1e-3, beta=2.5, dim=100, clip_norm_p=2.0,
              ball_bound="table")

    def fail(*args, **kwargs):
        raise AccountingError("recursion (upper): NaN")

    monkeypatch.setattr(api, "family_epsilon", fail)
    api._family_epsilon_kept.cache_clear()  # the same query's value may be kept from another test
    with pytest.warns(UserWarning, match="family maximum could not certify its numerics.*NaN"):
        rep = compute_epsilon(**kw)
    by_dir = _both(_segment(_table(2.5, 2.0), 0.2, 5), 1e-3)
    assert rep.details["epsilon_ball_table"] == max(e for e, _ in by_dir.values())


def test_a_query_already_below_delta_at_zero_publishes_zero_not_a_negative_epsilon(monkeypatch):
    """σ = 30, q = 0.001, one step, δ = 10⁻²: δ(0) of the whole table is far below δ, so ε = 0 (the smallest ε ≥ 0
    with δ(ε) ≤ δ, the library's convention). The family recursion's chord reads below t = 0 and returned
    ≈ log(1 − δ) < 0 there, which the report published (found by a review); it is clamped at 0."""
    monkeypatch.setattr(api, "TABLE_SPEC", SMALL)
    api._family_epsilon_kept.cache_clear()
    kw = dict(noise_multiplier=30.0, sample_rate=0.001, steps=1, delta=1e-2, beta=2.5, dim=100, clip_norm_p=2.0,
              ball_bound="table")
    seg = _segment(build_table(1.0 / 30.0, 2.5, 2.0, SMALL), 0.001, 1)
    raw = min(family_composition.family_epsilon(seg, 1e-2, d, 0.01, 1.0, 2.0) for d in ("remove", "add"))
    assert raw == 0.0
    rep = compute_epsilon(**kw)
    assert rep.epsilon == 0.0 and rep.details["epsilon_ball_table"] == 0.0


def test_a_nan_in_either_direction_of_the_table_raises_not_publishes(monkeypatch):
    """max() of the two directions keeps a NaN only when it comes first: a NaN in either direction must raise
    (nothing turns a NaN into a number; unreachable today, the compositions raise first; found by a review)."""
    for by_dir in ({"remove": 1.0, "add": math.nan}, {"remove": math.nan, "add": 1.0}):
        monkeypatch.setattr(api, "_table_or_none", lambda *a, _b=by_dir: dict(_b))
        with pytest.raises(AccountingError, match="NaN"):
            compute_epsilon(noise_multiplier=2.0, sample_rate=0.2, steps=5, delta=1e-3, beta=2.5, dim=100,
                            clip_norm_p=2.0, ball_bound="table")
