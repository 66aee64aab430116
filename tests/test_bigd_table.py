"""benchmarks/bigd_table.py (issue 35 item 2 at large d: a count-carrying table by position chains, a prototype that
no published number reads; docs/accounting.md, "A count-aware table for p > 2 at small d", last paragraph).

What is checked, at β = p = 3 and d = 6 with a coarse spec whose position grid has steps of 2 (so the chains, the
lag charge D and the count-bound powers all occur): the top pair (its symmetric envelope with the swapped pair,
shrunk by 1 − C) dominates the exact curves of one coordinate at every size ≤ m (GG tail functions) and the
independent oracle's rigorous lower bounds on δ(ε) of k equal coordinates (k ≤ d) and of 0.8m beside d − 1 equal ones;
the ℓ2 proxy is at least the largest Σμ² over those shapes (it is the relaxed family's maximum); and the proof's case
split, followed on exact rationals for 600 shapes (random, on the sphere, staircases of cell edges, one large beside
equal small ones): each shape reaches, branch by branch, states whose sets hold its rest (mass within the bound, caps
above the coordinates). That last test fails if a charge is raised (the top's peel charged at the cell's upper end,
the lag charged 3×) or a rounding turned (λ = i + ⌊s·c_j/ΔR⌋): checked by hand on those three edits.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from lower_bound_oracle import delta_lower, step_pmf
from test_ball_count import ALPHAS, _le, _sym
from opacus_gg.accountants.gg_pair import GGPair

from benchmark_modules import load_benchmark

bt = load_benchmark("bigd_table")

#: d = 6: positions 0, 1, 2, 4, 6 (steps 1, 1, 2, 2); the top lattice down to b_S = 0.63m; a coarse loss grid
_D = 6
_SPEC_SMALL = bt.Spec(mass_steps=32, top_ratio=1.05, base_steps=8, bulk_fine=1.1, bulk_coarse=1.3, fine_lo=0.3,
                      fine_hi=0.7, b0=0.1, exact_positions=1, position_ratio=2.0, h=0.02, half_width=20.0)


@pytest.fixture(scope="module")
def built():
    bd = bt.Bound(1.0, 3.0, 3.0, _D, _SPEC_SMALL)
    graph = bd.states()
    assert bd.pos == [0, 1, 2, 4, 6]
    kinds = {x[0] for x in graph}
    assert kinds == {"T", "E", "F", "D"}, kinds  # every kind of state is exercised
    (pair, c), _ = bd.build(graph, log=lambda *a, **k: None)
    return bd, graph, pair, c


def _shapes():
    rest = ((1 - 0.8 ** 3) / (_D - 1)) ** (1 / 3)
    return [(k ** (-1 / 3),) * k for k in range(1, _D + 1)] + [(0.8,) + (rest,) * (_D - 1)]


def test_top_pair_dominates_one_coordinate_equal_spreads_and_a_thin_spread(built):
    bd, _, pair, c = built
    assert 0 <= c < 1e-6
    shrink = 1.0 - c
    env = _sym(pair, ALPHAS)
    for a in np.linspace(0.05, 1.0, 8):
        g = GGPair(float(a), 3.0)
        assert _le(shrink * g.h_pq(ALPHAS), env) and _le(shrink * g.h_qp(ALPHAS), env), a
    eps = np.linspace(0.0, 4.0, 9)
    top = _sym(pair, np.exp(eps))
    for shape in _shapes():
        h = 4e-3
        pmf = step_pmf(3.0, 1.0, 1.0, shape, "remove", h)  # q = 1; H_α(Q‖P) is the same by the reflection
        low = np.array([delta_lower(pmf, float(e), h) for e in eps])
        assert _le(shrink * low, top), (shape, low, top)


def test_l2_proxy_is_at_least_every_explicit_shapes_l2_mass(built):
    bd, graph, _, _ = built
    prox = bd.proxy(graph)
    assert prox >= max(sum(x * x for x in s) for s in _shapes()) * (1 - 1e-12)


# ---- the case split of the proof, followed on exact values ---------------------------------------------------------

def _frac(x) -> Fraction:
    return Fraction(float(x))


class _Walker:
    """Follows, for one sorted shape μ (‖μ‖_3 ≤ 1 exactly), the branch of the recursion that the proof (``PROOF``)
    assigns it, from the top to a power or to no coordinate left, and checks in exact rational arithmetic that the
    branch is in the state graph and that the rest of μ lies in the set of the state it reaches (its mass within the
    state's bound, its coordinates below the caps), and that every factor's shift is ≥ the coordinates it bounds."""

    def __init__(self, bd, graph) -> None:
        self.bd, self.g = bd, graph
        self.dr = Fraction(1, bd.n)  # m = 1
        self.b = [_frac(x) for x in bd.b]
        self.c = [_frac(x) for x in bd.c]

    def mass(self, v) -> Fraction:
        return sum((_frac(x) ** 3 for x in v), Fraction(0))

    def cover(self, factor, coords) -> None:
        if factor is None:
            assert not coords
            return
        if factor[0] == "g":
            assert len(coords) == 1 and _frac(factor[1]) >= _frac(coords[0]), (factor, coords)
        else:
            assert len(coords) <= factor[2] and all(_frac(x) <= _frac(self.bd.cap[factor[1]]) for x in coords)

    def branch(self, x, pick):
        got = [(f, y) for f, y in self.g[x] if pick(f, y)]
        assert got, (x, self.g[x])
        return got

    def tail(self, y, nu) -> None:
        """ν (positions s+1..d of a bulk state, or the tail of a top state) must lie in y's set; go on from y."""
        bd = self.bd
        if y is None:
            assert all(v == 0 for v in nu)
            return
        kind = y[0]
        if kind == "P":
            self.cover(y, [v for v in nu if v > 0])
            assert len(nu) == y[2]
            return
        if kind == "T":
            _, i, j = y
            assert self.mass(nu) <= i * self.dr
            assert not nu or _frac(nu[0]) ** 3 <= Fraction(bd.ks[j], bd.n)
            if j == 0:  # everything left ≤ b_S: the bulk's d positions, zeros padded
                ((f, z),) = self.g[y]
                return self.tail(z, list(nu) + [0.0] * (bd.d - len(nu)))
            if not nu or _frac(nu[0]) ** 3 <= Fraction(bd.ks[j - 1], bd.n):
                return self.tail(self.branch(y, lambda f, z: f is None)[0][1], nu)
            ((f, z),) = self.branch(y, lambda f, z: f is not None)
            self.cover(f, [nu[0]])
            return self.tail(z, nu[1:])
        if kind == "E":
            _, i, j, s = y
            assert len(nu) == bd.d - s and self.mass(nu) <= i * self.dr and _frac(nu[0]) <= self.b[j]
            if _frac(nu[0]) <= self.b[j - 1]:
                return self.tail(self.branch(y, lambda f, z: f is None)[0][1], nu)
            ((f, z),) = self.branch(y, lambda f, z: f is not None)
            g = bd.nxt[s] - s
            self.cover(f, [v for v in nu[:g] if v > 0])
            return self.chain(z, nu)
        raise AssertionError(y)

    def chain(self, y, nu) -> None:
        """y = F(λ, j, s) and ν = positions s+1..d with ν_1 in cell j."""
        bd = self.bd
        _, lam, j, s = y
        assert self.b[j - 1] < _frac(nu[0]) <= self.b[j]
        assert self.mass(nu) <= lam * self.dr - s * self.c[j - 1]
        sp_ = bd.nxt[s]
        g = sp_ - s
        rest = nu[g:]
        if sp_ == bd.d:
            assert self.g[y] == ((None, None),)
            return
        last = _frac(nu[g - 1])
        if last > self.b[j - 1]:  # (a) the step lies in cell j
            if _frac(rest[0]) <= self.b[j - 1]:
                cands = self.branch(y, lambda f, z: f is None and (z is None or z[0] in "PE"))
                assert any(self._in(z, rest, sp_) for _, z in cands), (y, cands)
                (z,) = [z for _, z in cands if self._in(z, rest, sp_)][:1]
                return self.tail(z, rest)
            ((f, z),) = self.branch(y, lambda f, z: z is not None and z[0] == "F")
            self.cover(f, [v for v in rest[:bd.nxt[sp_] - sp_] if v > 0])
            return self.chain(z, rest)
        # (b) the step's last is below the cell: the lag charge
        cands = self.branch(y, lambda f, z: f is None and z is not None and (z[0] == "D" or j == 1))
        for _, z in cands:
            if z[0] == "D" and self._in_d(z, rest, last):
                return self.lag(z, rest, last)
            if z[0] != "D" and self._in(z, rest, sp_):
                return self.tail(z, rest)
        raise AssertionError((y, cands))

    def _in(self, z, rest, s) -> bool:
        if z is None:
            return all(v == 0 for v in rest)
        if z[0] == "P":
            return z[2] == len(rest) and all(_frac(v) <= _frac(self.bd.cap[z[1]]) for v in rest)
        _, i, j, s_ = z
        return s_ == s and self.mass(rest) <= i * self.dr and _frac(rest[0]) <= self.b[j]

    def _in_d(self, z, rest, x) -> bool:
        _, mm, j, s = z
        g = s - self.bd.prv[s]
        return x <= self.b[j] and self.mass(rest) + (g - 1) * x ** 3 <= mm * self.dr

    def lag(self, y, rest, x) -> None:
        """y = D(M, j, s): rest = positions s+1..d, x = ν_s (the step's last)."""
        _, mm, j, s = y
        assert self._in_d(y, rest, x) and (not rest or _frac(rest[0]) <= x)
        if x <= self.b[j - 1]:
            (z,) = [z for _, z in self.g[y][:1]]
            if z is not None and z[0] == "D":
                return self.lag(z, rest, x)
            assert self._in(z, rest, s)
            return self.tail(z, rest)
        ((_, z),) = self.g[y][1:]
        assert self._in(z, rest, s), (y, z)
        return self.tail(z, rest)


def _exact_ball(v):
    """v sorted decreasingly and shrunk until Σv^3 ≤ 1 exactly."""
    v = sorted((float(x) for x in v), reverse=True)
    total = float(sum(Fraction(x) ** 3 for x in v))
    if total > 1:
        v = [x / total ** (1 / 3) for x in v]
    while sum(Fraction(x) ** 3 for x in v) > 1:  # a few ulps above after the division
        v = [x * (1 - 1e-12) for x in v]
    return v


def test_every_shape_follows_the_proofs_case_split_into_a_state_that_holds_it(built):
    bd, graph, _, _ = built
    w = _Walker(bd, graph)
    rng = np.random.default_rng(7)
    shapes = [list(s) + [0.0] * (_D - len(s)) for s in _shapes()]
    edges = bd.b + [(k / bd.n) ** (1 / 3) for k in bd.ks]  # coordinates on the cell edges themselves
    for _ in range(600):
        k = int(rng.integers(1, _D + 1))
        kind = rng.integers(3)
        if kind == 0:  # random on the sphere
            v = rng.random(k) ** 2
        elif kind == 1:  # a staircase of cell edges
            v = rng.choice(edges, size=k)
        else:  # one large coordinate and equal small ones
            v = [rng.uniform(0.3, 1.0)] + [rng.uniform(0.01, 0.6)] * (k - 1)
        v = np.asarray(v, dtype=float)
        if kind != 1:  # half of them on the sphere (the mass bounds are tight there)
            v = v / np.sum(v ** 3) ** (1 / 3) * (1.0 if rng.random() < 0.5 else rng.uniform(0.5, 1.0))
        shapes.append(list(v) + [0.0] * (_D - k))
    for s in shapes:
        w.tail(bd.top, _exact_ball(s))
