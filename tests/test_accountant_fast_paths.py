"""Every speed-up of the proven accountant (issue 33) returns the same floats as the plain routine it replaces.

Each fast path is checked bit for bit against its plain counterpart: the routine it replaces where that stays in the
code (the max over every interval's value, one batch of quadratures per order: swapped in by monkeypatch), scipy's
own logsumexp, and the chord bound as first written (copied here as the oracle).
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pytest

from scipy.special import logsumexp

from opacus_gg.accountants import api
from opacus_gg.accountants import ball_rdp as br
from opacus_gg.accountants import discretization as dz


def _plain_interval_max(lam, G, Kq, U, A, s, rounded=False):
    """The plain routine: every interval's value (chord bounds included), then the max per row."""
    return np.max(br._interval_values(lam, G, Kq, U, A, s, rounded), axis=1)


def _chord_sup_oracle(lam, G, A, p, rounded=False):
    """The chord bound as first written (before issue 33, commit c74da77): value and slope evaluated at every one of
    the 24 bisection steps, new arrays each step, ``np.where`` for the bracket."""
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


def _same_floats(a, b) -> bool:
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


@pytest.mark.parametrize("p", [1.2, 1.5, 3.0])  # p = 2: the chord's closed form, and the plain max (no pruning)
@pytest.mark.parametrize("rounded", [False, True])
def test_interval_max_and_chord_bound_equal_the_plain_routines_bit_for_bit(p, rounded):
    rng = np.random.default_rng(20261128)
    s = 2.0 / p
    for _ in range(30):
        n = int(rng.integers(2, 60))
        A = np.concatenate([[0.0], np.sort(rng.uniform(1e-4, 2.0, n))])
        G = np.sort(rng.uniform(0.0, 5.0, n + 1)) * rng.choice([1e-6, 1.0, 30.0])
        G[0] = 0.0
        Kq = np.where(A <= 0.1, rng.uniform(0.5, 50.0, n + 1), np.inf)
        U = A ** p
        lam = np.concatenate([[0.0], rng.uniform(0.0, 40.0, int(rng.integers(1, 40)))])
        with np.errstate(all="ignore"):  # an infinite K at u = 0 makes NaN bounds: both paths must keep them
            fast = br._interval_max(lam, G, Kq, U, A, s, rounded)
            plain = _plain_interval_max(lam, G, Kq, U, A, s, rounded)
            chord = br._chord_sup(lam, G, A, p, rounded)
            oracle = _chord_sup_oracle(lam, G, A, p, rounded)
        assert _same_floats(fast, plain), (p, rounded, n)
        assert _same_floats(chord, oracle), (p, rounded, n)


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
        n = int(rng.integers(2, 60))
        A = np.concatenate([[0.0], np.sort(rng.uniform(1e-4, 2.0, n))])
        G = np.sort(rng.uniform(0.0, 5.0, n + 1)) * rng.choice([1e-6, 1.0, 30.0])
        G[0] = 0.0
        Kq = np.where(A <= 0.1, rng.uniform(0.5, 50.0, n + 1), np.inf)
        if t % 5 == 0:
            Kq[1] = np.inf  # K = ∞ at the first interval: NaN power bounds at u = 0
        U = A ** p
        lam = rng.uniform(0.0, 40.0, int(rng.integers(1, 40)))
        if t % 3 == 0:
            lam = np.concatenate([lam, lam[::-1]])  # equal rows: the first one is the argmin
        if t % 4 == 0:
            lam = lam[0] * (1.0 + np.linspace(-0.02, 0.02, 81))  # the polish of _dual
        mp, dim = float(A[-1] ** p), int(rng.choice([1, 10, 2410, 10**6]))
        with np.errstate(all="ignore"):
            fast = br._min_row(lam, mp, dim, G, Kq, U, A, s)
            plain = _plain_min_row(lam, mp, dim, G, Kq, U, A, s)
        assert fast[0] == plain[0] and _same_floats(fast[1], plain[1]), (p, t)


@pytest.mark.parametrize("beta,p,dim,sigma", [(3.0, 3.0, 100, 1.0), (1.5, 1.5, 2410, 1.0), (1.8, 2.0, 2410, 1.0)])
def test_ball_moments_equal_the_plain_path(monkeypatch, beta, p, dim, sigma):
    """S_j of the ℓp ball (orders 2 … 4) through the fast paths, and through the plain routines (every order's
    quadratures in its own batches, every chord bound computed)."""
    def moments():
        br.clear_caches()
        return br.ball_log_moments(4, sigma, beta, dim, p)

    fast = moments()
    with monkeypatch.context() as m:
        m.setattr(br, "_interval_max", _plain_interval_max)
        m.setattr(br, "_min_row", _plain_min_row)
        m.setattr(br, "_ball_log_moments_of", functools.partial(br._ball_log_moments_of, batched=False))
        plain = moments()
    br.clear_caches()
    assert np.all(np.isfinite(fast[2:]))
    assert _same_floats(fast, plain)


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
    quick = api._gaussian_first(segs, 1e-5, eps_error, delta_error)
    report = api._ball_report(segs, 1e-5, eps_error, delta_error, "renyi")
    if quick is not None:
        assert report.method == "prv_gaussian" and repr(quick) == repr(report.epsilon)
    if (beta, p, dim) == (1.8, 2.0, 2410):
        assert quick is not None
