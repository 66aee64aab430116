"""Every speed-up of the proven accountant (issue 33) returns the same floats as the plain routine it replaces.

Each fast path is checked bit for bit against its plain counterpart: the routine it replaces where that stays in the
code (the max over every interval's value, one batch of quadratures per order: swapped in by monkeypatch), scipy's
own logsumexp, and the chord bound as first written (copied here as the oracle); the PRV path's tilted re-composition
(Lemma R3(d)–(e)) against its code as first written (copied here: the tilt, the Esscher search over every positive mass,
and the plain composition without the flush of subnormal masses).
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
from opacus_gg.accountants import composition as cp
from opacus_gg.accountants import discretization as dz
from opacus_gg.accountants.history import normalize_history


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
    """compose_history at β = 1, where the one-step PMF of one direction carries ~15,000–23,000 subnormal masses and the
    round-off bound makes it re-compose tilted (λ and 0.8λ): the fast path (the plain FFT's input flushed of them,
    the Esscher search over normal masses, the tilt above) returns the same ε bounds, and the same composed PMFs and
    round-off bounds, as the code as first written."""
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
    assert max(subnormal) > 10_000 and len(subnormal) == 4  # every direction re-composed; subnormal masses met
    assert sum(1 for lam, *_ in fast_runs if lam > 0) == 8  # λ and 0.8λ in each of the 4 runs
    assert len(fast_runs) == len(plain_runs) == 12
    for a, b in zip(fast_runs, plain_runs):
        assert all(_same_floats(x, y) for x, y in zip(a, b)), a[0]
    assert fast == plain
