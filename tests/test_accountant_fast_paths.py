"""Every speed-up of the proven accountant (issue 33) returns the same floats as the plain routine it replaces.

Each fast path is checked bit for bit against its plain counterpart: the routine it replaces where that stays in the
code (the max over every interval's value, one batch of quadratures per order: swapped in by monkeypatch), scipy's
own logsumexp, and the chord bound, the convex hull, the hull's chords and the chord envelope as first written
(copied here as oracles); the PRV path's tilted re-composition (Lemma R3(d)–(e)) against its code as first written
(copied here: the tilt, the Esscher search over every positive mass, and the plain composition without the flush of
subnormal masses).
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest

from scipy.special import gammaln, logsumexp

from opacus_gg.accountants import api
from opacus_gg.accountants import ball_rdp as br
from opacus_gg.accountants import composition as cp
from opacus_gg.accountants import discretization as dz
from opacus_gg.accountants import profile as pf
from opacus_gg.accountants.history import Segment, normalize_history
from opacus.accountants.analysis.prv import DiscretePRV, Domain, compose_heterogeneous


def _plain_interval_max(lam, G, Kq, U, A, s, rounded=False):
    """The plain routine: every interval's value (chord bounds included), then the max per row."""
    return np.max(br._interval_values(lam, G, Kq, U, A, s, rounded), axis=1)


def _chord_sup_oracle(lam, G, A, p, rounded=False):
    """The chord bound as first written (before issue 33, commit c74da77): value and slope evaluated at every one of
    the 24 bisection steps, new arrays each step, ``np.where`` for the bracket (the stationary point is found by
    Newton's method since item 12: a reference, no longer the same floats)."""
    lam = lam[:, None]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        E = np.expm1(np.maximum(G, 0.0))
        lo, hi, Ei, Ej = A[None, :-1], A[None, 1:], E[None, :-1], E[None, 1:]
        width = hi - lo
        slope = (Ej - Ei) / width

        def value_and_slope(b):
            t = (b - lo) / width
            C = (1.0 - t) * Ei + t * Ej
            return np.log1p(C) - lam * b ** p, slope / (1.0 + C) - lam * p * b ** (p - 1.0), C

        left = np.broadcast_to(lo, (lam.shape[0], lo.shape[1]))
        right = np.broadcast_to(hi, left.shape)
        for _ in range(24):
            b = 0.5 * (left + right)
            rising = value_and_slope(b)[1] > 0
            left, right = np.where(rising, b, left), np.where(rising, right, b)
        b = 0.5 * (left + right)
        b = np.clip(np.nan_to_num(b, nan=0.5, posinf=0.5), lo, hi)
        val, d1, C = value_and_slope(b)
        out = val + np.maximum(d1 * (lo - b), d1 * (hi - b))
        if rounded:
            out = out + 1e-14 * (1.0 + np.log1p(C) + lam * b ** p
                                 + width * (np.abs(slope) / (1.0 + C) + lam * p * b ** (p - 1.0)))
    return np.where(np.isnan(out), np.inf, out)


def _chord_dense_sup(lam, G, A, p):
    """max over 2001 points a of each interval of log(1 + chord of E) − λa^p (the function Lemma 4d bounds)."""
    E = np.expm1(np.maximum(G, 0.0))
    t = np.linspace(0.0, 1.0, 2001)
    a = A[:-1, None] + (A[1:] - A[:-1])[:, None] * t[None, :]  # intervals × points
    f = np.log1p((1.0 - t)[None, :] * E[:-1, None] + t[None, :] * E[1:, None])
    return np.max(f[None, :, :] - lam[:, None, None] * a[None, :, :] ** p, axis=2)


def _same_floats(a, b) -> bool:
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def _random_dual_grid(rng: np.random.Generator, p: float):
    """(n, A, G, K, U) of a random dual over the ball: n + 1 shifts from 0, non-decreasing moment bounds G (scale
    1e-6, 1 or 30), quadratic bounds K up to shift 0.1 (∞ above), U = A^p."""
    n = int(rng.integers(2, 60))
    A = np.concatenate([[0.0], np.sort(rng.uniform(1e-4, 2.0, n))])
    G = np.sort(rng.uniform(0.0, 5.0, n + 1)) * rng.choice([1e-6, 1.0, 30.0])
    G[0] = 0.0
    Kq = np.where(A <= 0.1, rng.uniform(0.5, 50.0, n + 1), np.inf)
    return n, A, G, Kq, A ** p


@pytest.mark.parametrize("p", [1.2, 1.5, 3.0])  # p = 2: the chord's closed form, and the plain max (no pruning)
@pytest.mark.parametrize("rounded", [False, True])
def test_interval_max_is_the_plain_routine_and_the_chord_bound_the_bisections_or_below(p, rounded):
    rng = np.random.default_rng(20261128)
    s = 2.0 / p
    for _ in range(30):
        n, A, G, Kq, U = _random_dual_grid(rng, p)
        lam = np.concatenate([[0.0], rng.uniform(0.0, 40.0, int(rng.integers(1, 40)))])
        with np.errstate(all="ignore"):  # an infinite K at u = 0 makes NaN bounds: both paths must keep them
            fast = br._interval_max(lam, G, Kq, U, A, s, rounded)
            plain = _plain_interval_max(lam, G, Kq, U, A, s, rounded)
            chord = br._chord_sup(lam, G, A, p, rounded)
            oracle = _chord_sup_oracle(lam, G, A, p, rounded)
            dense = _chord_dense_sup(lam, G, A, p)
            # one row (the dual's rounded value: every column in one request)
            ones = [br._interval_max(lam[k: k + 1], G, Kq, U, A, s, rounded) for k in range(lam.size)]
        assert _same_floats(fast, plain), (p, rounded, n)
        # the stationary point by Newton's method (issue 33, item 12), not the bisection: a bound of the same lemma
        # (Lemma 4d, any b), above the chord function's sup on a dense grid, and not looser than the bisection's
        assert np.array_equal(np.isfinite(chord), np.isfinite(oracle)), (p, rounded, n)
        fin = np.isfinite(oracle)
        assert np.all(chord[fin] <= oracle[fin] + 1e-9 * (1.0 + np.abs(oracle[fin]))), (p, rounded, n)
        assert np.all(dense[fin] <= chord[fin] + 1e-12 * (1.0 + np.abs(chord[fin]))), (p, rounded, n)
        assert _same_floats(np.concatenate(ones), plain), (p, rounded, n)


def _chord_sup_at_item12(lam, lo, hi, Ei, Ej, p, rounded=False):
    """ball_rdp._chord_sup_at as item 12 left it (new arrays for every operation, the chord and its slope as
    functions): the floats the in-place form must give."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        width = hi - lo
        slope = (Ej - Ei) / width

        def chord(b):
            t = (b - lo) / width
            return (1.0 - t) * Ei + t * Ej

        def derivative(b, C):
            return slope / (1.0 + C) - lam * p * b ** (p - 1.0)

        B = 1.0 + Ei - slope * lo
        if p == 2.0:
            disc = np.sqrt(B * B + 2.0 * slope * slope / np.where(lam > 0, lam, 1.0))
            b = np.where(B >= 0, slope / (np.where(lam > 0, lam, 1.0) * (B + disc)), (disc - B) / (2.0 * slope))
            b = np.where(lam > 0, b, hi)
        else:
            up = B >= 0
            c1, c2 = np.where(up, p - 1.0, 1.0), np.where(up, 1.0, p - 1.0)
            k1, k0 = np.where(up, slope, 1.0), np.where(up, B, -B)
            t = np.log(slope / (lam * p)) + np.where(up, 0.0, (p - 1.0) * np.log(slope))
            v_lo, v_hi = np.where(up, np.log(lo), np.log1p(Ei)), np.where(up, np.log(hi), np.log1p(Ej))
            v = v_hi
            for _ in range(br._NEWTON_STEPS):
                e = k1 * np.exp(v)
                inner = e + k0
                v = np.minimum(np.maximum(v - (c1 * v + c2 * np.log(inner) - t) / (c1 + c2 * e / inner), v_lo), v_hi)
            b = np.where(up, np.exp(v), (np.exp(v) - B) / slope)
            b = np.where(slope > 0, np.where(lam > 0, b, hi), lo)
        if not np.isfinite(b).all():
            b = np.nan_to_num(b, nan=0.5, posinf=0.5)
        b = np.minimum(np.maximum(b, lo), hi)
        C = chord(b)
        val, d1 = np.log1p(C) - lam * b ** p, derivative(b, C)
        out = val + np.maximum(d1 * (lo - b), d1 * (hi - b))
        if rounded:
            out = out + 1e-14 * (1.0 + np.log1p(C) + lam * b ** p
                                 + width * (np.abs(slope) / (1.0 + C) + lam * p * b ** (p - 1.0)))
    return np.where(np.isnan(out), np.inf, out)


@pytest.mark.parametrize("p", [1.2, 1.5, 2.0, 3.0])
def test_chord_bound_in_place_equals_its_item12_form_bit_for_bit(p):
    """ball_rdp._chord_sup_at (issue 33 item 13: its operations in place, λb^p and λp·b^{p−1} once, the finiteness
    test by one sum) gives the floats of its item-12 form, on grids (λ rows with λ = 0, interval columns: flat and
    decreasing chords, moment bounds from 10⁻⁶ to 30) and on gathered entries, rounded or not."""
    rng = np.random.default_rng(13)
    for t in range(25):
        n, A, G, Kq, U = _random_dual_grid(rng, p)
        if t % 3 == 0:
            G[1: n // 2] = G[1]  # flat chords (slope 0) and, below, a decreasing one (E from G clipped at 0)
            G[-1] = G[-2] - 1.0
        if t % 4 == 1:
            G[-1] = 800.0  # E = e^G − 1 beyond float range: an infinite chord slope (b not finite, then fixed)
        E = br._chord_excess(G)
        lam = np.concatenate([[0.0, 1e-310], rng.uniform(0.0, 40.0, int(rng.integers(1, 30)))])  # and a subnormal λ
        r, c = rng.integers(0, lam.size, 50), rng.integers(0, n, 50)
        for rounded in (False, True):
            asks = [br._chord_grid(lam, G, A, p, rounded),
                    br._Chords(lam[r], A[c], A[c + 1], E[c], E[c + 1], p, rounded)]
            for ask in asks:
                with np.errstate(all="ignore"):
                    assert _same_floats(br._chord_sup_at(*ask), _chord_sup_at_item12(*ask)), (p, t, rounded)


def _plain_min_row(lam, mp, dim, G, Kq, U, A, s):
    """The plain routine: every row's value λm^p + d·max (chord bounds included), then ``np.argmin``."""
    F = lam * mp + dim * _plain_interval_max(lam, G, Kq, U, A, s)
    i = int(np.argmin(F))
    return i, float(F[i])


@pytest.mark.parametrize("p", [1.2, 1.5, 2.0, 3.0])
def test_least_row_of_the_dual_is_the_plain_argmin_bit_for_bit(p):
    """ball_rdp._min_row (rows that cannot be the least skipped) gives np.argmin's index and value, also with ties
    (repeated rows), infinite K and NaN bounds."""
    rng = np.random.default_rng(33)
    s = 2.0 / p
    for t in range(40):
        n, A, G, Kq, U = _random_dual_grid(rng, p)
        if t % 5 == 0:
            Kq[1] = np.inf  # K = ∞ at the first interval: NaN power bounds at u = 0
        lam = rng.uniform(0.0, 40.0, int(rng.integers(1, 40)))
        if t % 3 == 0:
            lam = np.concatenate([lam, lam[::-1]])  # equal rows: the first one is the argmin
        if t % 4 == 0:
            lam = lam[0] * (1.0 + np.linspace(-0.02, 0.02, 81))  # the polish of _dual
        mp, dim = float(A[-1] ** p), int(rng.choice([1, 10, 2410, 10**6]))
        with np.errstate(all="ignore"):
            fast = br._min_row(lam, mp, dim, G, Kq, U, A, s)
            plain = _plain_min_row(lam, mp, dim, G, Kq, U, A, s)
            # seeded with one row's F (the plain float) and any column (its max's, or another)
            k = int(rng.integers(0, lam.size))
            F_k = float(lam[k] * mp + dim * _plain_interval_max(lam[k: k + 1], G, Kq, U, A, s)[0])
            seeded = br._run(br._min_row_steps(lam, mp, dim, G, Kq, U, A, s, (k, F_k, int(rng.integers(0, n)))))
        assert fast[0] == plain[0] and _same_floats(fast[1], plain[1]), (p, t)
        assert seeded[0] == plain[0] and _same_floats(seeded[1], plain[1]), (p, t)


@pytest.mark.parametrize("beta,p,dim,sigma", [(3.0, 3.0, 100, 1.0), (1.5, 1.5, 2410, 1.0), (1.8, 2.0, 2410, 1.0)])
def test_ball_moments_equal_the_plain_path(monkeypatch, beta, p, dim, sigma):
    """S_j of the ℓp ball (orders 2 … 4) through the fast paths, and through the plain routines (every order's
    quadratures in its own batches, every chord bound computed, each chord request answered alone)."""
    def moments():
        br.clear_caches()
        return br.ball_log_moments(4, sigma, beta, dim, p)

    def plain_interval_max_steps(lam, G, Kq, U, A, s, rounded=False):  # a step generator that asks for nothing
        return _plain_interval_max(lam, G, Kq, U, A, s, rounded)
        yield

    def plain_min_row_steps(lam, mp, dim, G, Kq, U, A, s, seed=None):
        return _plain_min_row(lam, mp, dim, G, Kq, U, A, s) + (-1,)
        yield

    fast = moments()
    with monkeypatch.context() as m:
        m.setattr(br, "_interval_max_steps", plain_interval_max_steps)
        m.setattr(br, "_min_row_steps", plain_min_row_steps)
        m.setattr(br, "_ball_log_moments_of", functools.partial(br._ball_log_moments_of, batched=False))
        plain = moments()
    br.clear_caches()
    assert np.all(np.isfinite(fast[2:]))
    assert _same_floats(fast, plain)


def test_chord_requests_answered_together_equal_each_answered_alone():
    """ball_rdp._chords_batched (the requests of several orders' duals in one call per (p, rounded), broadcast grids
    flattened) gives each request the floats _chord_sup_at gives it alone: p ≠ 2 (the bisection), p = 2 (closed
    form; its one-row requests batched), rounded or not, rows × columns grids and gathered entries, NaN and infinite
    excesses."""
    rng = np.random.default_rng(2033)
    asks = []
    for t in range(24):
        p = [1.2, 1.5, 2.0, 3.0][t % 4]
        n = int(rng.integers(2, 50))
        A = np.concatenate([[0.0], np.sort(rng.uniform(1e-4, 2.0, n))])
        G = np.sort(rng.uniform(0.0, 5.0, n + 1)) * rng.choice([1e-6, 1.0, 30.0, 800.0])
        lam = rng.uniform(0.0, 40.0, int(rng.integers(1, 30)))
        rounded = bool(t % 3 == 0)
        if t % 2:
            asks.append(br._chord_grid(lam, G, A, p, rounded))
        else:
            E = br._chord_excess(G)
            r, c = rng.integers(0, lam.size, 40), rng.integers(0, n, 40)
            asks.append(br._Chords(lam[r], A[c], A[c + 1], E[c], E[c + 1], p, rounded))
    for t in range(12):  # one-row grids at p = 2 (batched since issue 33 item 16), λ = 0 and NaN/∞ excesses among them
        n = int(rng.integers(2, 50))
        A = np.concatenate([[0.0], np.sort(rng.uniform(1e-4, 2.0, n))])
        G = np.sort(rng.uniform(0.0, 5.0, n + 1)) * rng.choice([1e-6, 1.0, 30.0, 800.0])
        if t % 4 == 3:
            G[-1] = np.inf if t % 8 == 3 else np.nan
        lam = np.array([0.0 if t % 5 == 0 else rng.uniform(0.0, 40.0)])
        asks.append(br._chord_grid(lam, G, A, 2.0, bool(t % 2)))
    with np.errstate(all="ignore"):
        together = br._chords_batched(asks)
        alone = [br._chord_sup_at(*ask) for ask in asks]
    assert sum(ask.p == 2.0 and ask.lam.size == 1 for ask in asks) >= 12
    for k, (x, y) in enumerate(zip(together, alone)):
        assert x.shape == y.shape and _same_floats(x, y), k


def _subinterval_bounds_oracle(xl, xr, prm, beta, signed=None):
    """renyi._subinterval_bounds as written before issue 33's item 11 (commit 2debcb7): every node of every row at
    once, the nodes from gauss_legendre_nodes (``signed``, the caller's j ≥ 1 on every row, not read: abs taken)."""
    from opacus_gg.accountants import renyi as ry
    a, x_star, g_star, slack, j = prm[:5]  # (the rows after these: 1 − j, |j|, |1 − j|, |g*|, computed below)
    c_a, c_0 = j, 1.0 - j
    n_a, n_0 = c_a[:, None], c_0[:, None]

    def g(x, a):
        return -(c_a * np.abs(x - a) ** beta + c_0 * np.abs(x) ** beta) / beta

    x, hw, ext_lo, ext_hi, V = ry.gauss_legendre_nodes(xl, xr)
    c = 0.5 * (xl + xr)
    h = (xr - xl) * (1.0 + 2 * ry._EPS)
    ac = a[:, None]
    t_a, t_0 = np.abs(x - ac), np.abs(x)
    pa, p0 = t_a ** beta, t_0 ** beta
    gx = -(n_a * pa + n_0 * p0) / beta
    g1 = abs(n_a) * t_a ** (beta - 1.0) + abs(n_0) * t_0 ** (beta - 1.0)
    err = 8 * ry._EPS * ((abs(n_a) * pa + abs(n_0) * p0) * (1.0 + 1.0 / beta) + np.abs(g_star)[:, None]
                         + np.abs(x) * g1)
    sup_real = g(np.clip(x_star, ext_lo, ext_hi), a) + slack

    def dist(z0):
        lo = np.where((ext_lo <= z0) & (z0 <= ext_hi), 0.0, np.minimum(np.abs(ext_lo - z0), np.abs(ext_hi - z0)))
        return lo, np.hypot(np.maximum(np.abs(ext_lo - z0), np.abs(ext_hi - z0)), V)

    (da_lo, da_hi), (d0_lo, d0_hi) = dist(a), dist(0.0)
    g2_c = (beta - 1.0) * np.abs(c_a * np.abs(c - a) ** (beta - 2.0) + c_0 * np.abs(c) ** (beta - 2.0))
    if beta >= 3.0:
        g3 = (beta - 1.0) * (beta - 2.0) * (abs(c_a) * da_hi ** (beta - 3.0) + abs(c_0) * d0_hi ** (beta - 3.0))
    else:
        g3 = (beta - 1.0) * abs(beta - 2.0) * (abs(c_a) * da_lo ** (beta - 3.0) + abs(c_0) * d0_lo ** (beta - 3.0))
    g2 = g2_c * (1.0 + 1e-12) + np.hypot(ry._A_RHO * hw, V) * g3
    sup_sub = g(np.clip(x_star, xl, xr), a) + slack
    crude = h * np.exp(sup_sub - g_star + 8 * ry._EPS * (np.abs(sup_sub) + np.abs(g_star)))
    return ry.gauss_legendre_bounds(hw, np.exp(gx - g_star[:, None] + err), sup_real + 0.5 * V * V * g2 - g_star,
                                    (da_lo > 0) & (d0_lo > 0), crude)


@pytest.mark.parametrize("beta", [1.2, 1.5, 2.5, 3.0])
def test_moment_subinterval_bounds_equal_their_plain_form_bit_for_bit(monkeypatch, beta):
    """renyi._subinterval_bounds (node values in cached blocks, only on the rows whose Gauss–Legendre sum is read)
    gives the (upper, lower) of its plain form on every call of real enclosures (orders 2 … 13 at shifts 10^{-4} … 4
    and one j < 1: the graded subintervals at 0 and a, where the ellipse reaches a branch point), and the same
    moment bounds."""
    js = np.repeat([0.5, 2.0, 3.0, 7.0, 13.0], 6)
    shifts = np.tile([1e-4, 3e-3, 0.05, 0.4, 1.0, 4.0], 5)
    _check_subinterval_bounds_against_their_plain_form(monkeypatch, js, shifts, beta)


def _check_subinterval_bounds_against_their_plain_form(monkeypatch, js, shifts, beta, integer_orders=False):
    """renyi.log_moments_upper with every _subinterval_bounds call recorded, then with the plain form: each call's
    (upper, lower) is the plain form's and the moment bounds are the same floats (``integer_orders``: every row
    has j ≥ 1, the path without abs)."""
    from opacus_gg.accountants import renyi as ry
    calls, signs = [], []
    fast_bounds = ry._subinterval_bounds

    def spy(xl, xr, prm, b, signed=None):
        out = fast_bounds(xl, xr, prm, b, signed)
        calls.append(((xl, xr, prm, b), out))
        signs.append(signed)
        return out

    ry.clear_moment_cache()
    monkeypatch.setattr(ry, "_subinterval_bounds", spy)
    with np.errstate(all="ignore"):
        fast = ry.log_moments_upper(js, shifts, beta, 1e-9)
        ry.clear_moment_cache()
        monkeypatch.setattr(ry, "_subinterval_bounds", _subinterval_bounds_oracle)
        plain = ry.log_moments_upper(js, shifts, beta, 1e-9)
        ry.clear_moment_cache()
        assert len(calls) > 3 and sum(args[0].size for args, _ in calls) > 2000
        # the batch's j ≥ 1 is passed down (read once per batch) exactly where every order is ≥ 1
        assert signs == [True if integer_orders else None] * len(calls)
        for args, (upper, lower) in calls:
            if integer_orders:
                assert np.all(args[2][4] >= 1.0)  # j ≥ 1 on every row: the path without abs
            oracle = _subinterval_bounds_oracle(*args)
            assert _same_floats(upper, oracle[0]) and _same_floats(lower, oracle[1])
    assert np.all(np.isfinite(fast)) and _same_floats(fast, plain)


def _k_log_parts_oracle(x, a, j, beta):
    """ball_rdp._k_log_parts as first written (both forms of log φ computed everywhere, then selected)."""
    w = (x + a) ** (beta - 1.0)
    z = a * w
    small = j * z <= 1.0
    zs = np.where(small, z, 0.0)
    log_phi = np.where(small, np.log(j * (j - 1.0) + j * j * np.expm1(j * zs) - j * np.expm1(-zs)),
                       j * z + np.log(j * j - j * np.exp(-(j + 1.0) * np.where(small, 1.0, z))))
    return (2.0 * beta - 2.0) * np.log(x + a) + log_phi, -(x ** beta) / beta


@pytest.mark.parametrize("beta", [1.2, 1.5, 2.5])
def test_k_log_terms_equal_both_forms_computed_everywhere(beta):
    """ball_rdp._k_log_terms (each form of log φ only where it is taken; log(x + a) and w returned for the round-off
    margin) gives _k_log_parts' floats as first written, on node grids where both forms occur (orders 2 … 40,
    shifts 10^{-4} … 0.1, x up to 40), for a scalar order too; and its log(x + a), w are those expressions."""
    rng = np.random.default_rng(33)
    x = np.sort(rng.uniform(0.0, 40.0, (300, 16)), axis=1)
    a = 10 ** rng.uniform(-4, -1, (300, 1))
    j = rng.integers(2, 41, (300, 1)).astype(np.float64)
    with np.errstate(all="ignore"):
        la, lb, lxa, w = br._k_log_terms(x, a, j, beta)
        la0, lb0 = _k_log_parts_oracle(x, a, j, beta)
        small = j * a * (x + a) ** (beta - 1.0) <= 1.0
        assert 0.05 < small.mean() < 0.95  # both forms
        assert _same_floats(la, la0) and _same_floats(lb, lb0)
        assert _same_floats(lxa, np.log(x + a)) and _same_floats(w, (x + a) ** (beta - 1.0))
        scalar = zip(br._k_log_parts(x, a, 7, beta), _k_log_parts_oracle(x, a, 7, beta))  # one order for every row
        assert all(_same_floats(u, v) for u, v in scalar)


def test_gauss_legendre_box_equals_its_plain_form():
    """renyi._gauss_legendre_box (the product ½(ρ + 1/ρ)·hw once for both ends) gives the centres, half-widths and
    ellipse boxes of its plain form, on subintervals from 10^{-300} to 10^{3} wide, negative ones included."""
    from opacus_gg.accountants import renyi as ry
    rng = np.random.default_rng(21)
    xl = rng.uniform(-50.0, 50.0, 4000)
    xr = xl + 10 ** rng.uniform(-300.0, 3.0, 4000)
    c, hw = 0.5 * (xl + xr), 0.5 * (xr - xl)
    plain = (c, hw, c - ry._A_RHO * hw, c + ry._A_RHO * hw, ry._B_RHO * hw)
    assert all(_same_floats(u, v) for u, v in zip(ry._gauss_legendre_box(xl, xr), plain))


def test_graded_pieces_equal_the_per_piece_subdivision():
    """renyi._graded_pieces (every piece of one kind at once, then back to the pieces' order) gives the initial
    subintervals of log_moments_upper as first written: p + (q − p)·fractions per piece, its last point q, in
    order."""
    from opacus_gg.accountants import renyi as ry
    rng = np.random.default_rng(11)
    pieces = []
    for i in range(60):
        a = float(rng.choice([1e-4, 0.3, 2.0]) * rng.uniform(0.5, 1.5))
        x_star = a / (1.0 - float(rng.uniform(0.05, 0.95)))
        edges = [-float(rng.uniform(2.0, 9.0))] + sorted({0.0, a, x_star, *([a] if i % 7 == 0 else [])}) \
            + [float(rng.uniform(10.0, 40.0))]
        pieces += [(p, q, (p in (0.0, a), q in (0.0, a)), i) for p, q in zip(edges[:-1], edges[1:]) if q > p]
    xl, xr, owner = ry._graded_pieces(pieces)
    XL, XR, own = [], [], []
    for p, q, kind, i in pieces:
        pts = p + (q - p) * ry._FRACTIONS[kind]
        pts[-1] = q
        XL.append(pts[:-1])
        XR.append(pts[1:])
        own.append(np.full(len(pts) - 1, i))
    assert len({kind for _, _, kind, _ in pieces}) == 4  # graded at p, at q, at both, at neither
    assert _same_floats(xl, np.concatenate(XL)) and _same_floats(xr, np.concatenate(XR))
    assert np.array_equal(owner, np.concatenate(own))


@pytest.mark.parametrize("n", [1, 7, 40001])
def test_log_mgf_equals_scipy_logsumexp_bit_for_bit(n):
    """K(λ) of the Chernoff half-width in cached blocks equals scipy's logsumexp, the 2-D call on every λ at once
    (the coarse grid's) and the 1-D call per λ (the fine grid's); ties at the maximum and a non-finite row too."""
    rng = np.random.default_rng(n)
    lp = np.log(rng.dirichlet(np.ones(n)))
    lp[rng.integers(0, n, 3)] = lp.max()  # several maxima: scipy takes each out of the sum
    t = np.linspace(-32.0, 32.0, n)
    lams = dz._LAMBDAS
    fast = dz.log_mgf(lp, t, lams)
    assert _same_floats(fast, logsumexp(lp[None, :] + lams[:, None] * t[None, :], axis=1))
    assert _same_floats(fast[::9], [logsumexp(lp + lam * t) for lam in lams[::9]])
    with np.errstate(over="ignore"):
        huge = dz.log_mgf(np.full(n, 700.0), np.full(n, 1e308), np.array([0.5, 1e10]))
    assert _same_floats(huge, [logsumexp(np.full(n, 700.0) + lam * 1e308) for lam in (0.5, 1e10)])


def test_a_repeated_query_is_the_recorded_number_and_a_warned_one_is_not_recorded(monkeypatch):
    """The same query again returns the float the first one computed, without composing anything; a query whose
    PRV failed (the warning names it) is not recorded: it warns, and computes, every time."""
    api.clear_query_cache()
    hist = [(1.0, 0.01, 100, 2.0, 1, 2.0)]
    first = api.proven_epsilon_history(hist, 1e-5)

    def failing(*args, **kwargs):
        raise api.AccountingError("total mass 1.5 is not within 1e-12 of [0, 1]")

    monkeypatch.setattr(api, "_compose_tight", failing)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert api.proven_epsilon_history(hist, 1e-5) == first  # recorded: nothing composed
    other = [(1.0, 0.01, 101, 2.0, 1, 2.0)]
    for _ in range(2):
        with pytest.warns(UserWarning, match="could not certify its own numerics"):
            eps = api.proven_epsilon_history(other, 1e-5)
        assert math.isfinite(eps) and eps >= first
    monkeypatch.undo()
    assert api.proven_epsilon_history(other, 1e-5) < eps  # the PRV's own number: the failure was not recorded
    api.clear_query_cache()


def _lower_hull_oracle(x, yd, yr, use_r):
    """``discretization.lower_hull`` as first written (before issue 33's item 2): every pass gathers its triples."""
    idx = np.arange(x.size)
    test = np.ones(x.size, dtype=bool)
    for _ in range(x.size):
        if idx.size < 3:
            return idx
        q = np.flatnonzero(test[1:-1]) + 1
        i0, i1, i2 = idx[q - 1], idx[q], idx[q + 1]
        rr = use_r[i0] & use_r[i1] & use_r[i2]
        y0 = np.where(rr, yr[i0], yd[i0])
        y1 = np.where(rr, yr[i1], yd[i1])
        y2 = np.where(rr, yr[i2], yd[i2])
        drop = (y1 - y0) * (x[i2] - x[i0]) >= (y2 - y0) * (x[i1] - x[i0])
        if not drop.any():
            return idx
        keep = np.ones(idx.size, dtype=bool)
        keep[q[drop]] = False
        near = np.zeros(idx.size, dtype=bool)
        near[:-1] |= ~keep[1:]
        near[1:] |= ~keep[:-1]
        idx, test = idx[keep], near[keep]
    return idx


def _chord_oracle(xq, xh, yh, j=None):
    """``discretization._chord`` in its plain form: a search per query, the slope per query (``j`` ignored), the
    local bound 8u(|y_0| + |p̃|) of Lemma R8(e)(i)."""
    ld = dz.WIDE_DTYPE
    u_ld = float(np.finfo(ld).eps) / 2.0
    j = np.clip(np.searchsorted(xh, xq, side="right") - 1, 0, xh.size - 2)
    x0, x1, y0, y1 = (np.asarray(v, dtype=ld) for v in (xh[j], xh[j + 1], yh[j], yh[j + 1]))
    p = (np.asarray(xq, dtype=ld) - x0) * ((y1 - y0) / (x1 - x0))
    y = (y0 + p) + 8.0 * u_ld * (np.abs(y0) + np.abs(p))
    out = y.astype(np.float64)
    out = np.where(out < y, np.nextafter(out, np.inf), out)
    return np.where(xq == xh[j], yh[j], out)


def _chord_envelope_oracle(pairs, q, s, direction, stride, exact_below=0.0):
    """``profile._chord_envelope`` as first written: each point's anchor by ``searchsorted``."""
    n = s.size
    if stride <= 1 or n < 4 * stride:
        return pf._envelope(pairs, q, s, direction)
    idx = np.arange(n)
    ia = np.flatnonzero((np.abs(s) <= exact_below) | (idx % stride == 0) | (idx == n - 1))
    env_a, ks, scores = pf._envelope(pairs, q, s[ia], direction)
    seg_idx = np.minimum(np.searchsorted(ia, idx, side="right") - 1, ia.size - 2)
    left, right = ia[seg_idx], ia[seg_idx + 1]
    w = np.expm1(s - s[left]) / np.expm1(s[right] - s[left])
    env = env_a[seg_idx] + np.clip(w, 0.0, 1.0) * (env_a[seg_idx + 1] - env_a[seg_idx])
    env[ia] = env_a
    return env, ks, scores * (n / ia.size)


#: one GG step per β (d = 1): the PRV path of β > 2 with d = 1, and β ≤ 2 and β = 2 that share its code
_STEPS = [Segment(1.0, 0.01, 1, 3.0, 1, 3.0), Segment(0.8, 0.004, 1, 2.5, 1, 2.5), Segment(1.0, 0.05, 1, 1.5, 1, 1.5),
          Segment(1.0, 0.01, 1, 2.0, 1, 2.0),
          # a loss far beyond the grid (test_accountant_far_loss.py): the hull is cut flat, its end vertex appended
          Segment(1000.0, 0.01, 1, 1.0, 10 ** 9, float("inf"))]


@pytest.mark.parametrize("seg", _STEPS, ids=lambda s: f"beta{s.beta:g}")
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_one_step_pmf_equals_the_plain_hull_chords_and_envelope_bit_for_bit(monkeypatch, seg, direction):
    """The one-step PMF of the PRV grid (one_step_delta → ctd_pmf: the chord envelope, the lower hull and its chords)
    through the fast paths and through the routines as first written: the same floats, and the hull drops points
    (the chords are read). A grid of 2^16 + 2 points, as ``step_dprv`` builds them (stride 8 where β ≠ 2)."""
    t = np.linspace(-12.0, 12.0, 2 ** 16 + 2)
    stride = 1 if seg.beta == 2.0 else pf.CHORD_STRIDE

    def pmf():
        dl, rr, _, _ = pf.one_step_delta(seg, t, direction, stride)
        return dz.ctd_pmf(t, dl, rr, dz.hull_tolerance(seg))

    fast = pmf()
    with monkeypatch.context() as m:
        m.setattr(dz, "lower_hull", _lower_hull_oracle)
        m.setattr(dz, "_chord", _chord_oracle)
        m.setattr(pf, "_chord_envelope", _chord_envelope_oracle)
        plain = pmf()
    assert _same_floats(fast[0], plain[0]) and fast[1:] == plain[1:]


def test_lower_hull_and_chords_equal_the_plain_routines_on_rough_input():
    """Non-convex input (noise on a convex curve, runs of collinear points, a jump): the same hull as the routine as
    first written, and the same chords, with the left vertices given by a running count and searched."""
    rng = np.random.default_rng(33)
    for n in (1, 2, 3, 50, 4000):
        x = np.concatenate([[0.0], np.cumsum(rng.uniform(0.01, 1.0, n - 1))]) if n > 1 else np.zeros(1)
        yd = np.exp(-x) + rng.choice([0.0, 1e-3], n) * rng.uniform(size=n)
        yd[n // 2:] += 1e-4 * (n > 10)  # a jump
        yd[: n // 4] = 1.0 - 0.3 * x[: n // 4]  # collinear
        use_r = np.arange(n) < n // 3
        yr = yd - 1.0 + x
        hull = dz.lower_hull(x, yd, yr, use_r)
        assert np.array_equal(hull, _lower_hull_oracle(x, yd, yr, use_r))
        if hull.size >= 2:
            on_hull = np.zeros(n, dtype=bool)
            on_hull[hull] = True
            j = np.clip(np.cumsum(on_hull) - 1, 0, hull.size - 2)
            oracle = _chord_oracle(x, x[hull], yd[hull])
            assert _same_floats(dz._chord(x, x[hull], yd[hull], j), oracle)
            assert _same_floats(dz._chord(x, x[hull], yd[hull]), oracle)


def _five_smooth(n: int) -> bool:
    for p in (2, 3, 5):
        while n % p == 0:
            n //= p
    return n == 1


@pytest.mark.parametrize("half_width,mesh", [(26.9, 8.631674575031098e-05), (4.0, 3.0517578125e-05),
                                             (1.0, 0.0625), (53.8, 3.0517578125e-05)])
def test_fft_friendly_grid_is_wider_on_the_same_mesh_and_composes_aligned(half_width, mesh):
    """The widened grid: a 5-smooth even size, the same mesh, the plain grid's points inside it, and Opacus's
    layout t_min = −(N/2 − 1)·h; an atom at a grid point t_k composed T times (odd and even T) lands at T·t_k."""
    plain = Domain.create_aligned(-half_width, half_width, mesh)
    wide = dz.fft_friendly(plain, mesh)
    assert wide.size % 2 == 0 and _five_smooth(wide.size // 2) and wide.size >= plain.size
    assert abs(wide.dt - mesh) < 1e-8 * mesh
    assert wide.t_min <= plain.t_min and wide.t_max >= plain.t_max
    assert round(-wide.t_min / mesh) == wide.size // 2 - 1
    assert dz.fft_friendly(wide, mesh) is wide  # already fast: unchanged
    if wide.size > 10 ** 5:
        return
    for steps in (3, 4):
        k = round(0.2 * half_width / mesh)  # the atom's grid index from 0
        pmf = np.zeros(wide.size)
        pmf[wide.size // 2 - 1 + k] = 1.0  # t = k·h
        out = compose_heterogeneous([DiscretePRV(pmf=pmf, domain=wide)], [steps])
        assert int(np.argmax(out.pmf)) == wide.size // 2 - 1 + steps * k
        assert abs(out.domain.ts[int(np.argmax(out.pmf))] - steps * k * mesh) < 1e-9


def test_epsilon_on_the_fft_friendly_grid_is_within_round_off_of_the_plain_grid(monkeypatch):
    """β = 3, d = 1 (σ = 1, q = 0.01, T = 300): the ε published on the widened grid and on the grid as sized before
    (``fft_friendly`` off) differ only by the round-off and the grid's ends (measured 1.7·10^{−8} relative at T = 1000):
    within 10^{−6} relative."""
    hist = [(1.0, 0.01, 300, 3.0, 1, 3.0)]
    api.clear_query_cache()
    dz.step_dprv.cache_clear()
    wide = api.proven_epsilon_history(hist, 1e-5)
    with monkeypatch.context() as m:
        m.setattr(dz, "fft_friendly", lambda domain, mesh: domain)
        api.clear_query_cache()
        dz.step_dprv.cache_clear()
        plain = api.proven_epsilon_history(hist, 1e-5)
    api.clear_query_cache()
    dz.step_dprv.cache_clear()
    assert math.isfinite(wide) and abs(wide - plain) <= 1e-6 * plain


def _tilt_pmf_oracle(pmf, t, lam):
    """composition.tilt_pmf as first written (before issue 33's second pass): scipy's logsumexp, exp at every entry."""
    with np.errstate(divide="ignore"):
        lw = np.log(pmf) + lam * t
    log_z = float(logsumexp(lw))
    tilted = np.exp(lw - log_z)
    low = (tilted < np.finfo(np.float64).tiny) & (pmf > 0)
    dropped = float(np.sum(pmf[low])) * (1.0 + 2.0 * pmf.size * cp._U) if low.any() else 0.0
    tilted = np.where(low, 0.0, tilted)
    pos = pmf > 0
    kappa = math.expm1(4.0 * cp._U * (float(np.max(np.abs(np.log(pmf[pos])), initial=0.0))
                                      + 2.0 * lam * float(np.max(np.abs(t))) + abs(log_z)) + 2.0 * cp._U)
    return tilted, log_z, kappa, dropped


def _esscher_tilt_oracle(steps, ts, epsilon, half_width):
    """composition._esscher_tilt as first written: the tilted means over every positive mass, subnormal ones too."""
    logs = [(np.log(pmf[pmf > 0]), ts[pmf > 0], count) for pmf, count in steps]
    if not any(t.size for _, t, _ in logs) or not math.isfinite(epsilon):
        return 0.0

    def tilted_mean(lam):
        total = 0.0
        for lp, t, count in logs:
            w = lp + lam * t
            w = np.exp(w - w.max())
            total += count * float(np.dot(w, t) / w.sum())
        return total

    lo, hi = 0.0, 300.0 / half_width
    if tilted_mean(lo) >= epsilon:
        return 0.0
    if tilted_mean(hi) <= epsilon:
        return hi
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if tilted_mean(mid) < epsilon else (lo, mid)
    return lo


def test_tilt_pmf_equals_its_plain_form_bit_for_bit():
    """The tilt (Lemma R9(d)) with one log per entry, log Z by logsumexp_rows and exp only above −709 returns the
    oracle's floats: PMFs with zeros, subnormal masses and tilts whose results fall on both sides of 2^{−1022}
    (the band −709 … −708.4 where exp is computed and the entry still dropped among them)."""
    rng = np.random.default_rng(33)
    band = 0
    for n in (2, 17, 4001):
        t = np.linspace(-40.0, 40.0, n)
        for lam in (0.0, 0.3, 7.5, 300.0 / 40.0):
            pmf = np.exp(-rng.uniform(0.0, 740.0, n)) * (rng.uniform(size=n) < 0.8)
            pmf[rng.integers(0, n, max(n // 5, 1))] = 10.0 ** -rng.uniform(308.0, 323.0, max(n // 5, 1))
            fast, plain = cp.tilt_pmf(pmf, t, lam), _tilt_pmf_oracle(pmf, t, lam)
            assert all(_same_floats(a, b) for a, b in zip(fast, plain)), (n, lam)
            pmf[n // 2] = np.nan  # a NaN mass stays NaN (never a 0 that passes check_finite)
            with np.errstate(invalid="ignore"):
                fast, plain = cp.tilt_pmf(pmf, t, lam), _tilt_pmf_oracle(pmf, t, lam)
            assert np.isnan(fast[0][n // 2]) and all(_same_floats(a, b) for a, b in zip(fast, plain)), (n, lam)
            pmf[n // 2] = 0.0
            fast = cp.tilt_pmf(pmf, t, lam)
            with np.errstate(divide="ignore"):
                x = np.log(pmf) + lam * t - fast[1]
            band += int(np.count_nonzero((x >= -709.0) & (x < -708.4)))
    assert band > 0  # the band near the threshold was exercised


def test_prv_tilted_recomposition_equals_its_plain_form_bit_for_bit(monkeypatch):
    """compose_history at β = 1, where the round-off bound makes every direction re-compose tilted (λ and 0.8λ): the
    fast path (the plain FFT's input flushed of subnormal masses, the Esscher search over normal masses, the tilt
    above) returns the same ε bounds, and the same composed PMFs and round-off bounds, as the code as first written.
    (Before Lemma R8(e) built the masses from the hull's vertices, one direction carried ~15,000–23,000 subnormal
    masses here; now a few: the flush itself is checked on a synthetic PMF below.)"""
    seen = []
    real = cp._certified_composition

    def recorded(steps, domain, lam):
        out = real(steps, domain, lam)
        seen.append((lam, out.ts, out.pmf, out.log_bound, out.shrink, out.dropped))
        return out

    def run():
        seen.clear()
        with monkeypatch.context() as m:
            m.setattr(cp, "_certified_composition", recorded)
            res = [cp.compose_history(normalize_history([(sigma, q, steps, 1.0, 1, 1.0)]), delta, direction,
                                      eps_error=0.01, delta_error=api.validate_delta_error(None, delta))
                   for sigma, q, steps, delta in ((1.0, 0.01, 1000, 1e-8), (0.8, 0.004, 1000, 1e-8))
                   for direction in ("add", "remove")]
        return [(r.epsilon_lower, r.epsilon_estimate, r.epsilon_upper) for r in res], list(seen)

    subnormal = []
    real_tilt = cp._esscher_tilt

    def counted(steps, ts, epsilon, half_width):
        subnormal.append(sum(int(np.count_nonzero((p > 0) & (p < cp._TINY))) for p, _ in steps))
        return real_tilt(steps, ts, epsilon, half_width)

    with monkeypatch.context() as m:
        m.setattr(cp, "_esscher_tilt", counted)
        fast, fast_runs = run()
    with monkeypatch.context() as m:
        m.setattr(cp, "tilt_pmf", _tilt_pmf_oracle)
        m.setattr(cp, "_esscher_tilt", _esscher_tilt_oracle)
        m.setattr(cp, "flush_subnormal", lambda pmf, steps: (pmf, 0.0))
        plain, plain_runs = run()
    assert len(subnormal) == 4  # every direction re-composed
    assert sum(1 for lam, *_ in fast_runs if lam > 0) == 8  # λ and 0.8λ in each of the 4 runs
    assert len(fast_runs) == len(plain_runs) == 12
    for a, b in zip(fast_runs, plain_runs):
        assert all(_same_floats(x, y) for x, y in zip(a, b)), a[0]
    assert fast == plain


def test_flush_subnormal_zeroes_only_subnormal_masses_and_bounds_their_effect():
    """Lemma R3(e): the flushed PMF equals the input except its masses in (0, 2^{−1022}), which are 0, and F ≥
    T·s·max(m, 1)^{T−1} (s their total, m the total mass); a PMF without them is returned as is, F = 0."""
    rng = np.random.default_rng(5)
    pmf = rng.dirichlet(np.ones(400))
    low = rng.choice(pmf.size, 120, replace=False)
    pmf[low] = rng.uniform(1e-320, 2e-308, low.size)  # subnormal (some denormal-range) masses
    flushed, bound = cp.flush_subnormal(pmf, 1000)
    tiny = (pmf > 0) & (pmf < np.finfo(float).tiny)
    assert tiny.sum() == low.size and not np.any((flushed > 0) & (flushed < np.finfo(float).tiny))
    assert np.array_equal(flushed[~tiny], pmf[~tiny]) and np.all(flushed[tiny] == 0.0)
    assert bound >= 1000 * pmf[tiny].sum() * max(pmf.sum(), 1.0) ** 999 > 0.0
    same, zero = cp.flush_subnormal(flushed, 1000)
    assert same is flushed and zero == 0.0


def _plain_tiers(segs, delta):
    """The tiers as first written (before the windows): every default order ≤ 16, then ≤ 64, then all, each tier's
    S_j at all of its computed orders, moving on where the best order is in the top quarter."""
    for cap in br.ORDER_TIERS:
        eps, order = br._rdp_ball_epsilon([o for o in br.DEFAULT_ORDERS if o <= cap], segs, delta)
        if not order >= 0.75 * cap:
            return eps, order
    return br._rdp_ball_epsilon(list(br.DEFAULT_ORDERS), segs, delta)


@pytest.mark.parametrize("segs,delta", [
    ([(1.0, 0.01, 1000, 3.0, 2410, 3.0)], 1e-5),  # ε ≈ 10^4 at α = 2: S_2, S_3 only
    ([(1.0, 0.01, 1000, 1.5, 10, 1.5)], 1e-5),  # the order-16 tier
    ([(0.6, 0.05, 3000, 1.2, 100, 2.0)], 1e-8),
    ([(2.0, 0.01, 1000, 1.5, 10, 1.5)], 1e-5),  # small ε: on to the order-64 tier
    ([(2.0, 1.0, 10, 1.05, 2410, 1.05)], 1e-5),  # q = 1, β ≈ 1: a flat, scalloped ε(α) (minima at 20, 26, 35)
    ([(2.0, 1.0, 10, 1.8, 10**9, 2.0)], 1e-5),  # q = 1, d = 10^9: S_j far from converged, ε(α) zigzags (3, then 6)
    ([(1.0, 0.01, 500, 1.8, 50, 1.8), (0.7, 0.02, 300, 1.8, 50, 1.8)], 1e-3),  # a schedule
    ([(0.0, 0.01, 10, 1.5, 10, 1.5)], 1e-5),  # σ = 0: (∞, nan)
])
def test_order_windows_publish_the_plain_tiers_epsilon(segs, delta):
    """rdp_ball_epsilon's windows of orders (S_j from below, stopping where the best order is settled) give the
    (ε, α) of the plain tiers, repr for repr (the published Rényi ε unchanged)."""
    br.clear_caches()
    fast = br.rdp_ball_epsilon(segs, delta)
    if segs[0][3] == 3.0:  # best order 2: the window {2, 3} settles it
        assert sorted({key[0] for key in br._ball_cache}) == [2, 3]
    assert repr(fast) == repr(_plain_tiers(segs, delta))


@pytest.mark.parametrize("beta,p,dim", [(1.8, 2.0, 2410), (1.5, 1.5, 100), (1.2, 2.0, 10**6), (1.5, math.inf, 100)])
def test_gaussian_first_is_the_default_reports_number(beta, p, dim):
    """api._gaussian_first publishes the dominating Gaussian's PRV only where the default report does, the same float
    (taken at β = 1.8, p = 2, d = 2410), from rdp_ball_epsilon_below, which is ≤ the Rényi bound's ε."""
    segs = api.normalize_history([(1.0, 0.01, 1000, beta, dim, p)])
    eps_error, delta_error = api._validate_errors(1e-5, 0.01, None)
    br.clear_caches()
    assert br.rdp_ball_epsilon_below(segs, 1e-5) <= br.rdp_ball_epsilon(segs, 1e-5)[0]
    quick, gauss_prv = api._gaussian_first(segs, 1e-5, eps_error, delta_error)
    report = api._ball_report(segs, 1e-5, eps_error, delta_error, "renyi")
    if quick is not None:
        assert report.method == "prv_gaussian" and repr(quick) == repr(report.epsilon)
    if gauss_prv is not None:  # the Gaussian's PRV composed for the test is what the report would compose again
        reused = api._ball_report(segs, 1e-5, eps_error, delta_error, "renyi", gauss_prv)
        assert repr(reused.epsilon) == repr(report.epsilon) and reused.method == report.method
        assert reused.details.get("epsilon_gaussian_domination") == report.details.get("epsilon_gaussian_domination")
    if (beta, p, dim) == (1.8, 2.0, 2410):
        assert quick is not None


@pytest.mark.parametrize("beta,p,dim", [(1.5, 2.0, 2410), (1.8, 2.0, 2410), (1.2, 1.2, 100)])
def test_gate_decided_from_below_publishes_the_plain_gates_epsilon(monkeypatch, beta, p, dim):
    """The Gaussian's Rényi ε is not computed where its closed-form lower end already fails the cost gate of Lemma N
    (api._gaussian_first, api._gaussian_domination_epsilon): the published ε and method are those of the plain
    gates (the lower end switched off), repr for repr; at β = 1.5, p = 2 the Gaussian's moments are never asked for."""
    history = [(1.0, 0.01, 1000, beta, dim, p)]
    segs = api.normalize_history(history)
    eps_error, delta_error = api._validate_errors(1e-5, 0.01, None)

    def query():
        api.clear_query_cache()
        br.clear_caches()
        return (api.proven_epsilon_history(history, 1e-5),
                api._ball_report(segs, 1e-5, eps_error, delta_error, "renyi"))

    fast, fast_report = query()
    asked_gaussian = any(key[3] == 1 for key in br._ball_cache)  # (j, σ, β, d, p): d = 1 only for the Gaussian
    with monkeypatch.context() as m:
        m.setattr(api, "gaussian_rdp_epsilon_below", lambda gauss, delta: -math.inf)  # the plain gates
        plain, plain_report = query()
    assert repr(fast) == repr(plain)
    assert repr(fast_report.epsilon) == repr(plain_report.epsilon) and fast_report.method == plain_report.method
    if (beta, p) == (1.5, 2.0):  # the gate fails (Gaussian Rényi ε 2.41 > 1.3 × 1.80): decided from below
        assert not asked_gaussian and fast_report.details["gaussian_domination"].startswith("skipped: its Rényi bound (≥")
    if beta == 1.8:  # the gate passes: the Gaussian's PRV is published as before
        assert fast_report.method == "prv_gaussian"


@pytest.mark.parametrize("sigma,q,steps,delta", [(1.0 / 1.06, 0.01, 1000, 1e-5), (0.8, 0.004, 10**4, 1e-5),
                                                 (3.0, 0.05, 200, 1e-8), (0.5, 1.0, 3, 1e-5), (20.0, 0.001, 10**5, 1e-5)])
def test_gaussian_renyi_epsilon_from_below_is_below_the_code_and_at_opacus_sampled_gaussian(sigma, q, steps, delta):
    """ball_rdp.gaussian_rdp_epsilon_below (closed-form moments j(j − 1)m²/2) is ≤ the ε rdp_ball_epsilon computes
    for the same Gaussian history (its enclosures of the moments), alone and as two segments, and within 1e-6 below
    Opacus's RDP of the sampled Gaussian mechanism at the same orders (its own formulas: integer orders, remove)."""
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    gauss = api.normalize_history([(sigma, q, steps, 2.0, 1, 2.0)])
    two = api.normalize_history([(sigma, q, steps, 2.0, 1, 2.0), (1.5 * sigma, q, steps, 2.0, 1, 2.0)])
    br.clear_caches()
    low, low_two = br.gaussian_rdp_epsilon_below(gauss, delta), br.gaussian_rdp_epsilon_below(two, delta)
    assert low <= br.rdp_ball_epsilon(gauss, delta)[0] and low_two <= br.rdp_ball_epsilon(two, delta)[0]
    orders = br.DEFAULT_ORDERS
    rdp = compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=orders)
    with warnings.catch_warnings():  # its notice where the best order is the first or last one
        warnings.simplefilter("ignore")
        opacus_eps = get_privacy_spent(orders=orders, rdp=rdp, delta=delta)[0]
    assert opacus_eps * (1.0 - 1e-6) - 1e-6 <= low <= opacus_eps * (1.0 + 1e-9) + 1e-9, (low, opacus_eps)


def _subsampled_rdp_all_oracle(orders, sample_rate, logm):
    """ball_rdp._subsampled_rdp_all as first written (its order tables built at every call)."""
    q = float(sample_rate)
    a = np.asarray(orders, dtype=np.float64)[:, None]
    j = np.arange(logm.size, dtype=np.float64)[None, :]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inside = j <= a
        log_binom = gammaln(a + 1) - gammaln(j + 1) - gammaln(np.where(inside, a - j, 0) + 1)
        terms = log_binom + j * math.log(q) + logm[None, :]
        terms = terms + (a - j) * math.log1p(-q) if q < 1.0 else np.where(j == a, terms, -np.inf)
        remove = logsumexp(np.where(inside, terms, -np.inf), axis=1) / (a[:, 0] - 1.0)
        lm2 = float(logm[2])
        log_chi2 = (-math.inf if lm2 <= 0.0 else math.log(math.expm1(lm2)) if lm2 < 700
                    else lm2 + math.log1p(-math.exp(-lm2)))
        alpha = a[:, 0]
        jensen = np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, math.log(q) + logm[alpha.astype(int)])
        if q < 1.0:
            taylor = np.logaddexp(0.0, np.log(alpha * (alpha - 1.0) / 2.0) - (alpha + 1.0) * math.log1p(-q)
                                  + 2.0 * math.log(q) + log_chi2)
            jensen = np.minimum(jensen, taylor)
    return {"remove": remove, "add": jensen / (alpha - 1.0)}


def test_order_tables_built_once_give_the_first_forms_floats():
    """ball_rdp._subsampled_rdp_all with its binomial tables built once per (orders, size) equals its first form
    (q = 1 and infinite moments included, default and other orders), and the dual's polishing factors are
    1 + linspace(−0.02, 0.02, 81) (its middle one exactly 1), read-only."""
    rng = np.random.default_rng(2911)
    for t in range(60):
        q = [1e-4, 0.01, 0.3, 1.0][t % 4]
        orders = br.DEFAULT_ORDERS if t % 3 else [2, 3, 5, 8, 13, 21]
        logm = np.concatenate([[0.0, 0.0], np.cumsum(rng.uniform(0.0, [1e-3, 1.0, 50.0][t % 3], max(orders) - 1))])
        if t % 7 == 0:
            logm[len(logm) // 2:] = np.inf
        fast, plain = br._subsampled_rdp_all(orders, q, logm), _subsampled_rdp_all_oracle(orders, q, logm)
        assert all(_same_floats(fast[k], plain[k]) for k in ("remove", "add")), t
    assert _same_floats(br._POLISH, 1.0 + np.linspace(-0.02, 0.02, 81)) and br._POLISH[40] == 1.0
    assert not br._POLISH.flags.writeable


def _refine_enclosure_oracle(xl, xr, owner, n, epsrel, bounds):
    """renyi.refine_enclosure as first written: every owner's subintervals in the arrays every round."""
    from opacus_gg.accountants import renyi as ry
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        upper, lower = bounds(xl, xr, owner)
        for _ in range(ry._MAX_ROUNDS):
            tot = np.bincount(owner, upper, minlength=n)
            gap = np.bincount(owner, upper - lower, minlength=n)
            cnt = np.bincount(owner, minlength=n)
            loose = ((gap > epsrel * tot) | (tot == np.inf)) & (cnt < ry._MAX_INTERVALS)
            split = loose[owner] & (((upper - lower) > 0.25 * (epsrel * tot)[owner] / cnt[owner]) | (upper == np.inf))
            if not split.any():
                break
            mid = 0.5 * (xl[split] + xr[split])
            nl, nr = np.concatenate([xl[split], mid]), np.concatenate([mid, xr[split]])
            no = np.concatenate([owner[split], owner[split]])
            nu, nlo = bounds(nl, nr, no)
            keep = ~split
            xl, xr = np.concatenate([xl[keep], nl]), np.concatenate([xr[keep], nr])
            owner = np.concatenate([owner[keep], no])
            upper, lower = np.concatenate([upper[keep], nu]), np.concatenate([lower[keep], nlo])
        return np.bincount(owner, upper, minlength=n), np.bincount(owner, minlength=n)


@pytest.mark.parametrize("beta", [1.2, 1.5, 3.0])
def test_refinement_without_settled_owners_equals_the_plain_refinement_bit_for_bit(monkeypatch, beta):
    """renyi.refine_enclosure (an owner with no split in a round leaves the arrays with its sums, final from then on)
    gives the sums and counts of the refinement as first written, and every bounds call the same subintervals, on
    real moment enclosures (orders 0.5 … 13, shifts 10^{-4} … 4, tolerances 10^{-13} … 10^{-7}: owners settle at
    different rounds; one shift 0, whose owner has no subinterval) and on K enclosures (orders 2 … 9)."""
    from opacus_gg.accountants import renyi as ry
    fast_refine = ry.refine_enclosure
    seen = {"fast": [], "plain": []}

    def recording(kind, refine):
        def run(xl, xr, owner, n, epsrel, bounds):
            def spy(l, r, o):
                seen[kind].append((l.copy(), r.copy(), o.copy()))
                return bounds(l, r, o)
            out = refine(xl, xr, owner, n, epsrel, spy)
            seen[kind].append(out)
            return out
        return run

    js = np.repeat([0.5, 2.0, 3.0, 7.0, 13.0], 7)
    shifts = np.tile([0.0, 1e-4, 3e-3, 0.05, 0.4, 1.0, 4.0], 5)
    eps = np.tile([1e-7, 1e-13, 1e-12, 1e-9, 1e-7, 1e-8, 1e-7], 5)
    with np.errstate(all="ignore"):
        for kind, refine in (("fast", fast_refine), ("plain", _refine_enclosure_oracle)):
            monkeypatch.setattr(ry, "refine_enclosure", recording(kind, refine))
            ry.clear_moment_cache()
            br._k_cache.clear()
            ry.log_moments_upper(js, shifts, beta, eps)
            br.quadratic_coefficients(np.repeat(np.arange(2, 10), 3), np.tile([1e-4, 0.01, 0.1], 8), beta)
    ry.clear_moment_cache()
    br._k_cache.clear()
    assert len(seen["fast"]) == len(seen["plain"]) > 6
    for x, y in zip(seen["fast"], seen["plain"]):
        assert len(x) == len(y) and all(_same_floats(u, v) and u.dtype == v.dtype for u, v in zip(x, y))


def _k_peak_oracle(ja, a, beta):
    """ball_rdp._k_peak as first written (new arrays by np.where each bisection step, the coefficient each call)."""
    if beta == 1.0:
        return np.zeros_like(a)
    lo, hi = np.zeros_like(a), np.ones_like(a)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        def rising(x):
            return ja * (beta - 1.0) * (x + a) ** (beta - 2.0) > x ** (beta - 1.0)
        for _ in range(2100):
            grow = rising(hi) & np.isfinite(hi)
            if not grow.any():
                break
            lo, hi = np.where(grow, hi, lo), np.where(grow, 2.0 * hi, hi)
        for _ in range(2100):
            mid = 0.5 * (lo + hi)
            inside = (lo < mid) & (mid < hi)
            if not inside.any():
                break
            r = rising(mid)
            lo, hi = np.where(inside & r, mid, lo), np.where(inside & ~r, mid, hi)
    return hi


@pytest.mark.parametrize("beta", [1.2, 1.5, 2.0, 3.0])
def test_k_peak_bisection_in_place_equals_its_first_form(beta):
    """ball_rdp._k_peak (bisection updated in place, the coefficient once, its convergence read every few steps)
    gives the peak of its first form, on orders 2 … 60 and shifts 10^{-6} … 10 (peaks far below and above the
    initial bracket [0, 1])."""
    rng = np.random.default_rng(7)
    a = 10 ** rng.uniform(-6.0, 1.0, 300)
    ja = rng.integers(2, 61, 300) * a
    assert _same_floats(br._k_peak(ja, a, beta), _k_peak_oracle(ja, a, beta))


@pytest.mark.parametrize("beta", [4.0, 6.0])
def test_k_peak_below_the_least_subnormal_equals_its_first_form(beta):
    """ball_rdp._k_peak (convergence read every few steps) where the peak is below the least subnormal (a^{β−2}
    underflows, so rising is false down to 0 and at 0 itself: the one entry a step after convergence moves, put back)
    and beside ordinary peaks: the first form's floats."""
    a = np.array([1e-200, 1e-170, 1e-300, 1e-5, 0.3])
    ja = np.array([2.0, 3.0, 60.0, 1e-250, 5.0]) * a
    with np.errstate(all="ignore"):
        fast, plain = br._k_peak(ja, a, beta), _k_peak_oracle(ja, a, beta)
    assert fast[0] == 5e-324 and fast[-1] > 1.0
    assert _same_floats(fast, plain)


def test_k_subintervals_equal_the_per_shift_edges():
    """ball_rdp._k_subintervals (every shift's edges in one array operation) gives the K enclosures' first
    subintervals as first written: per shift, 0, 3^{-L} … 3^{-1}, 1, the powers 2^k below X, then X."""
    rng = np.random.default_rng(5)
    X = np.concatenate([[1.0, 2.0, 4.0, 1.5, 2.0 ** 40], 10 ** rng.uniform(0.0, 3.0, 200)])
    grade = np.concatenate([[0.0], 3.0 ** -np.arange(br._K_GRADE_LEVELS, 0, -1.0), [1.0]])
    XL, XR, own = [], [], []
    for i in range(X.size):
        body = 2.0 ** np.arange(1, max(1, math.ceil(math.log2(X[i]))) + 1, dtype=np.float64)
        edges = np.concatenate([grade, body[body < X[i]], [X[i]]])
        XL.append(edges[:-1])
        XR.append(edges[1:])
        own.append(np.full(len(edges) - 1, i))
    xl, xr, owner = br._k_subintervals(X)
    assert _same_floats(xl, np.concatenate(XL)) and _same_floats(xr, np.concatenate(XR))
    assert np.array_equal(owner, np.concatenate(own))


@pytest.mark.parametrize("beta", [1.2, 1.5, 3.0])
def test_moment_bounds_of_integer_orders_equal_their_plain_form_bit_for_bit(monkeypatch, beta):
    """renyi._subinterval_bounds where every row's order is ≥ 1 (the ball's duals: n_a = j ≥ 0 and n_0 = 1 − j ≤ 0, so
    |n_a·t| and |n_0·t| are taken without abs) gives its plain form's (upper, lower) on every call of real enclosures
    (orders 2 … 13 at shifts 10^{-4} … 4), and the same moment bounds."""
    js = np.repeat([2.0, 3.0, 8.0, 13.0], 5)
    shifts = np.tile([1e-4, 3e-3, 0.05, 1.0, 4.0], 4)
    _check_subinterval_bounds_against_their_plain_form(monkeypatch, js, shifts, beta, integer_orders=True)


@pytest.mark.parametrize("beta", [1.2, 1.5, 2.5, 3.0])
def test_k_node_values_computed_transposed_equal_the_row_layout_bit_for_bit(monkeypatch, beta):
    """ball_rdp._k_bounds (the K integrand's node values computed transposed: a row's a, ref, j broadcast along the
    contiguous axis) hands the Gauss–Legendre sums the node values of the row layout, C-contiguous rows × nodes (the
    matrix–vector product reads the same matrix), on every bounds call of real K enclosures (orders 2 … 13, shifts
    10^{-4} … 0.1)."""
    from opacus_gg.accountants import renyi as ry
    calls, seen = [], []
    k_bounds, gl_bounds = br._k_bounds, ry.gauss_legendre_bounds

    def spy_k(xl, xr, prm, b):
        calls.append((xl, xr, prm))
        return k_bounds(xl, xr, prm, b)

    def spy_gl(hw, values, *rest):
        seen.append(values)
        return gl_bounds(hw, values, *rest)

    monkeypatch.setattr(br, "_k_bounds", spy_k)
    monkeypatch.setattr(ry, "gauss_legendre_bounds", spy_gl)
    br._k_cache.clear()
    with np.errstate(all="ignore"):
        br.quadratic_coefficients(np.repeat([2, 3, 7, 13], 4), np.tile([1e-4, 3e-3, 0.03, 0.1], 4), beta)
        assert len(calls) == len(seen) >= 1 and sum(c[0].size for c in calls) > 200
        for (xl, xr, prm), values in zip(calls, seen):  # the row layout, as before issue 33's item 14
            a, ref, _, j = prm
            x = ry.gauss_legendre_nodes(xl, xr)[0]
            ac, rc, jc = a[:, None], ref[:, None], j[:, None]
            la, lb, lxa, w = br._k_log_terms(x, ac, jc, beta)
            size = (np.abs(la) + np.abs(lb) + np.abs(rc) + 2.0 * beta * np.abs(lxa) + jc * ac * w)
            slope = ((2.0 * beta - 2.0) / (x + ac) + (jc + 3.0) * ac * (beta - 1.0) * (x + ac) ** (beta - 2.0)
                     + x ** (beta - 1.0))
            plain = np.exp(la + lb - rc + 8.0 * br._EPS * (size + x * slope))
            assert values.flags.c_contiguous and _same_floats(values, plain)
    br._k_cache.clear()


def test_refinement_with_infinite_bounds_equals_the_plain_refinement_bit_for_bit():
    """renyi.refine_enclosure's split rule (one gather of a threshold that is NaN where the owner is not loose; the
    infinite bounds read loose themselves) gives the sums and counts of the refinement as first written where bounds
    are +∞ (a crude bound that overflowed on a wide subinterval): on loose owners, on an owner settled from the start
    and on one at the subinterval cap (1500) whose infinite bound stays."""
    from opacus_gg.accountants import renyi as ry

    def bounds(l, r, o):
        h = r - l
        wide = h > 0.3
        upper = np.where(wide, np.inf, np.exp(r) * h * (1.0 + 1e-3 * o))
        lower = np.where(wide, 0.0, np.exp(l) * h)
        return upper, lower

    capped = np.linspace(5.0, 6.0, ry._MAX_INTERVALS)  # owner 3: 1500 subintervals, the last one wide
    xl = np.concatenate([[0.0, 0.5, 1.0, 0.0, 0.2, 2.0, 2.1], capped[:-1]])
    xr = np.concatenate([[0.5, 1.0, 2.0, 0.2, 0.4, 2.1, 2.2], capped[1:]])
    xl, xr = np.append(xl, 6.0), np.append(xr, 7.0)
    owner = np.concatenate([[0, 0, 0, 1, 1, 2, 2], np.full(ry._MAX_INTERVALS, 3)])
    epsrel = np.array([1e-6, 1e-3, 10.0, 1e-6])  # owner 2 settled at once
    with np.errstate(all="ignore"):
        fast = ry.refine_enclosure(xl, xr, owner, 4, epsrel, bounds)
        plain = _refine_enclosure_oracle(xl, xr, owner, 4, epsrel, bounds)
    assert fast[1][3] == ry._MAX_INTERVALS and fast[0][3] == np.inf  # the capped owner keeps its infinite bound
    assert np.all(np.isfinite(fast[0][:3])) and fast[1][0] > 3
    assert _same_floats(fast[0], plain[0]) and np.array_equal(fast[1], plain[1])



def test_refinement_in_growing_arrays_equals_the_plain_refinement_bit_for_bit():
    """renyi.refine_enclosure (arrays that only grow: split and settled subintervals left in place in bins no longer
    read, the dead dropped in order once half of the arrays, capacity doubled) gives the sums and counts of the
    refinement as first written, and every bounds call the same subintervals in the same order: 60 owners settling
    at different rounds (tolerances 10^{-2} … 10^{-15}) and one stopped by the round limit, the arrays growing to
    many times their first size and dropping their dead several times."""
    from opacus_gg.accountants import renyi as ry
    seen = {"fast": [], "plain": []}

    def bounds_of(kind):
        def bounds(l, r, o):
            seen[kind].append((l.copy(), r.copy(), o.copy()))
            h = r - l
            # a smooth integrand with an h^5 error bound whose size depends on the owner, and only a crude h·sup
            # next to the owner's left end (as next to a branch point: halved every round): owners refine unevenly
            mid = np.exp(-0.5 * (l + r)) * h
            err = np.where(l == 0.01 * o, h, np.where(o == 60, 0.0, (1.0 + o % 7) * h ** 5 * np.exp(-l)))
            return mid + err, np.maximum(mid - err, 0.0)
        return bounds

    n = 61  # owner 60: exact but next to its left end, one split a round up to the round limit
    xl = np.concatenate([np.linspace(0.0, 8.0, 5)[:-1] + 0.01 * i for i in range(n)])
    xr = np.concatenate([np.linspace(0.0, 8.0, 5)[1:] + 0.01 * i for i in range(n)])
    owner = np.repeat(np.arange(n), 4)
    epsrel = np.append(10.0 ** -np.linspace(2.0, 15.0, n - 1), 1e-300)
    with np.errstate(all="ignore"):
        fast = ry.refine_enclosure(xl, xr, owner, n, epsrel, bounds_of("fast"))
        plain = _refine_enclosure_oracle(xl, xr, owner, n, epsrel, bounds_of("plain"))
    assert _same_floats(fast[0], plain[0]) and np.array_equal(fast[1], plain[1]) and fast[1].dtype == plain[1].dtype
    assert len(seen["fast"]) == len(seen["plain"]) == ry._MAX_ROUNDS + 1  # the last owners stopped by the limit
    for x, y in zip(seen["fast"], seen["plain"]):
        assert all(_same_floats(u, v) and u.dtype == v.dtype for u, v in zip(x, y))
    rounds_per_owner = np.unique(fast[1]).size
    assert rounds_per_owner > 20 and fast[1].sum() > 8 * xl.size  # settled unevenly; grown past the first capacity

def _step_power_oracle(lam, G, Kq, U, s, rounded=False):
    """ball_rdp._step_power and _power_sup as written before issue 33's item 14 (λU_i computed twice, new arrays)."""
    U_lo, U_hi = (U * (1.0 - 4.0 * br._EPS), U * (1.0 + 4.0 * br._EPS)) if rounded else (U, U)
    step = G[None, 1:] - lam[:, None] * U_lo[None, :-1]
    lam_c, K, lo, hi = lam[:, None], Kq[None, 1:], U_lo[None, :-1], U_hi[None, 1:]
    unused = np.isposinf(K)
    K = np.where(unused, 0.0, K)
    power = np.maximum(K * lo ** s - lam_c * lo, K * hi ** s - lam_c * hi)
    if s < 1.0:
        ustar = np.where(lam_c > 0, (lam_c / (K * s)) ** (1.0 / (s - 1.0)), hi)
        ustar = np.clip(np.nan_to_num(ustar, nan=hi, posinf=hi), lo, hi)
        power = np.maximum(power, K * ustar ** s - lam_c * ustar)
    power = np.where(unused, np.inf, power)
    if rounded:
        step = step + 1e-15 * (np.abs(G[None, 1:]) + lam[:, None] * U_lo[None, :-1])
        power = power + 1e-15 * (Kq[None, 1:] * U_hi[None, 1:] ** s + lam[:, None] * U_hi[None, 1:])
        step = np.where(np.isnan(step), np.inf, step)
        power = np.where(np.isnan(power), np.inf, power)
    return np.minimum(step, power)


@pytest.mark.parametrize("p", [1.2, 1.5, 2.0, 3.0])
def test_step_and_power_bounds_in_place_equal_their_first_form_bit_for_bit(p):
    """ball_rdp._step_power (λU_i computed once for the step and the power bound, the power bound's operations in
    place) gives the floats of its first form, rounded or not, on random duals with λ = 0, unused power bounds
    (K = ∞) and NaN power bounds (K = ∞ at u = 0)."""
    rng = np.random.default_rng(14)
    s = 2.0 / p
    for t in range(30):
        n, A, G, Kq, U = _random_dual_grid(rng, p)
        if t % 5 == 0:
            Kq[1] = np.inf
        lam = np.concatenate([[0.0], rng.uniform(0.0, 40.0, int(rng.integers(1, 30)))])
        for rounded in (False, True):
            with np.errstate(all="ignore"):
                fast, plain = br._step_power(lam, G, Kq, U, s, rounded), _step_power_oracle(lam, G, Kq, U, s, rounded)
            assert _same_floats(fast, plain), (p, t, rounded)


def _pick_splits_oracle(loose, e, G, Kq, U, s, lam_low):
    """ball_rdp._pick_splits as written before issue 33's item 17 (np.nan_to_num, np.searchsorted, np.unique)."""
    by_value = loose[np.argsort(-e[loose])][: br._SPLITS_PER_ROUND // 2]
    lo, hi = U[loose], U[loose + 1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        step = np.where(lo > 0, G[loose + 1] / lo, np.inf)
        power = Kq[loose + 1] * np.maximum(np.where(lo > 0, lo ** (s - 1.0), np.inf if s < 1 else 0.0),
                                           hi ** (s - 1.0))
    crit = np.nan_to_num(np.minimum(step, power), nan=np.inf)
    steep = loose[crit > lam_low * (1.0 + br._REL_TOL)]
    steep = steep[np.argsort(-crit[np.searchsorted(loose, steep)])]
    taken = set(by_value.tolist())
    by_slope = [i for i in steep.tolist() if i not in taken][: br._SPLITS_PER_ROUND // 2]
    return np.unique(np.concatenate([by_value, np.array(by_slope, dtype=by_value.dtype)]))


@pytest.mark.parametrize("p", [1.2, 1.5, 2.0, 3.0])
def test_pick_splits_without_wrappers_equals_its_first_form(p):
    """ball_rdp._pick_splits (NaN → ∞ and ±∞ → ±the largest float as np.nan_to_num does, the steep intervals' slopes
    read by their mask, the union sorted in Python) picks the intervals of its first form, in the same order and
    dtype, on random duals with NaN, infinite (lo = 0, K = ∞) and tied slopes, many or few loose intervals."""
    rng = np.random.default_rng(17)
    s = 2.0 / p
    for t in range(60):
        n, A, G, Kq, U = _random_dual_grid(rng, p)
        if t % 3 == 0:
            G[int(rng.integers(1, n + 1))] = np.nan  # a NaN slope
        if t % 4 == 0:
            U[int(rng.integers(1, n + 1)):] = U[-1]  # zero-width intervals: tied slopes
        loose = np.flatnonzero(rng.random(n) < rng.choice([0.2, 0.6, 1.0]))
        if loose.size == 0:
            loose = np.array([n - 1])
        e = rng.uniform(0.0, 1.0, n) * rng.choice([1.0, 0.0])  # all e tied at 0 in some cases
        for lam_low in (0.0, float(rng.uniform(0.0, 50.0)), math.inf):
            with np.errstate(all="ignore"):
                fast = br._pick_splits(loose, e, G, Kq, U, s, lam_low)
                plain = _pick_splits_oracle(loose, e, G, Kq, U, s, lam_low)
            assert np.array_equal(fast, plain) and fast.dtype == plain.dtype, (p, t, lam_low)
    # twelve infinite slopes (G/U_i overflows, K = ∞) after nine NaN ones: np.nan_to_num ranks NaN (→ ∞) above ∞
    # (→ the largest float), so the eight steepest are NaN ones; with both ∞ they would tie
    n = 24
    U = np.concatenate([[0.0], np.full(12, 1e-310), np.linspace(1.0, 2.0, n - 12)])
    G = np.concatenate([[0.0], np.full(12, 1e300), np.full(n - 12, np.nan)])
    Kq = np.full(n + 1, np.inf)
    loose = np.arange(1, n)
    with np.errstate(all="ignore"):
        fast = br._pick_splits(loose, np.zeros(n), G, Kq, U, s, 1.0)
        plain = _pick_splits_oracle(loose, np.zeros(n), G, Kq, U, s, 1.0)
    assert np.array_equal(fast, plain) and set(plain.tolist()) >= set(range(12, 20))
