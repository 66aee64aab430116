"""Rounding steps closed under the proven ε (docs/accounting.md): Lemma R7(d) (a discrete pair's curves read from its
stored masses, rounded up for ν's tie to ω e^{−t} and the sums' round-off), Lemma R9(d) (the rounding of the Esscher
tilt's and of the untilting's inputs, put into the certified δ), Lemma T3 (the ball table Base's moment bound U(α),
rounded up) and Lemma R10(a) (the one-coordinate factor of the powering chains from the rounded-up curve). Each
against 40-digit mpmath at settings where the rounding shows, and where a value to nearest was used before, a check
that it falls below the exact one somewhere (the step was needed).
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from opacus_gg.accountants.ball_prv import moment_curve_bound
from opacus_gg.accountants.composition import tilt_pmf, untilt_pmf
from opacus_gg.accountants.checks import AccountingError
from opacus_gg.accountants.discrete import (CURVE_SPLIT_MAX_LOSS, CURVE_SPLIT_MAX_ROUNDOFF, _curve_split, first_above,
                                            split_to_grid)
from opacus_gg.accountants.gg_pair import GGPair
from test_gg_pair_roundoff import _h_exact

DPS = 40


def _exact_curves(pair, alphas):
    """H_α(P‖Q) and H_α(Q‖P) of the pair a product bounds (Lemma R7(d)): ω_j at the claimed losses t_0 + j·h (exact,
    in mpmath), ν_j = ω_j e^{−t_j} where ω_j > 0, the stored ν_j as Q-mass at −∞ where ω_j = 0, and the atoms at ±∞."""
    with mp.workdps(DPS):
        t = [mp.mpf(pair.t0) + mp.mpf(pair.h) * j for j in range(pair.omega.size)]
        om = [mp.mpf(float(w)) for w in pair.omega]
        q_only = mp.fsum(mp.mpf(float(v)) for v, w in zip(pair.nu, pair.omega) if w == 0)
        out_pq, out_qp = [], []
        for a in alphas:
            am = mp.mpf(float(a))
            la = mp.log(am)
            out_pq.append(mp.mpf(pair.p_inf) + mp.fsum(w * (1 - am * mp.exp(-tj)) for w, tj in zip(om, t)
                                                      if tj > la and w > 0))
            out_qp.append(mp.mpf(pair.q_ninf) + q_only + mp.fsum(w * (mp.exp(-tj) - am) for w, tj in zip(om, t)
                                                                 if tj < -la and w > 0))
        return out_pq, out_qp


def test_discrete_pair_curves_are_rounded_up_for_the_tie_and_the_sums():
    """Lemma R7(d): h_pq / h_qp of a split pair (ω rounded up, ν down from long double: not tied to ω e^{−t}) and of a
    product (ν from the log) are ≥ the exact curves of the pair the products bound, in mpmath, at α between the grid
    points over the whole loss range and beyond it (where p_∞, q_{−∞} alone remain), and within 1e-9 of them relative
    to the mass read. Read to nearest (Σω − αΣν as before), the split pair falls below somewhere: the bound is needed."""
    base = split_to_grid(GGPair(0.05, 1.5), 1 << 8)
    for pair in (base, base.compose(base)):
        t = pair.ts
        alphas = np.exp(np.concatenate([0.5 * (t[:-1] + t[1:])[::5], [t[0] - 1.0, t[-1] + 1.0]]))
        exact_pq, exact_qp = _exact_curves(pair, alphas)
        got_pq, got_qp = pair.h_pq(alphas), pair.h_qp(alphas)
        for got, exact in ((got_pq, exact_pq), (got_qp, exact_qp)):
            for g, e in zip(got, exact):
                assert mp.mpf(float(g)) >= e, (float(g), float(e))
                assert float(g) - float(e) <= 1e-9 * (float(e) + 1e-300) + 1e-15
    # to nearest, without the bound: below the exact curve somewhere (the tie of ν_lo, the sums' rounding)
    sw = np.concatenate([np.cumsum(base.omega[::-1])[::-1], [0.0]])
    sn = np.concatenate([np.cumsum(base.nu[::-1])[::-1], [0.0]])
    alphas = np.exp(0.5 * (base.ts[:-1] + base.ts[1:]))
    j = first_above(base.t0, base.h, base.omega.size, np.log(alphas))
    near = np.maximum(base.p_inf + sw[j] - alphas * sn[j], 0.0)
    exact_pq, _ = _exact_curves(base, alphas)
    assert any(mp.mpf(float(g)) < e for g, e in zip(near, exact_pq))


def test_tilted_and_untilted_entries_are_within_their_bound():
    """Lemma R9(d): every tilted entry p_j e^{λt_j − log Z} as computed is within κ of its exact value (mpmath, the same
    log Z), on a PMF spanning 1e-300 … 1 with a tilt λ·t up to ±300, and the untilted entries likewise with their κ;
    both κ are not vacuous (below 1e-11) and the rounding is real (some entry is off by more than u)."""
    rng = np.random.default_rng(3)
    n = 801
    t = np.linspace(-30.0, 30.0, n)
    pmf = np.exp(-rng.uniform(0.0, 690.0, n))
    lam = 10.0
    tilted, log_z, kappa, dropped = tilt_pmf(pmf, t, lam)
    assert 0.0 < kappa < 1e-11
    worst, lost = 0.0, mp.mpf(0)
    with mp.workdps(DPS):
        for p, tj, got in zip(pmf, t, tilted):
            exact = mp.mpf(float(p)) * mp.exp(lam * mp.mpf(float(tj)) - mp.mpf(log_z))
            if got == 0.0:  # below the normal range: dropped, its untilted mass counted
                lost += mp.mpf(float(p))
                continue
            rel = abs(mp.mpf(float(got)) - exact) / exact
            assert rel <= kappa
            worst = max(worst, float(rel))
        assert 0 < lost <= mp.mpf(dropped)
    assert worst > 2.0 ** -53
    log_scale = 3.0 * log_z
    log_r = log_scale - lam * t
    signs = np.where(rng.uniform(size=n) < 0.05, -1.0, 1.0)
    scale_slack = 2.0 * 2.0 ** -53 * 4 * abs(log_scale)
    out, kappa_out = untilt_pmf(signs * tilted, log_r, lam * float(np.max(np.abs(t))), scale_slack)
    assert 0.0 < kappa_out < 1e-11
    worst = 0.0
    with mp.workdps(DPS):
        for p, tj, got in zip(signs * tilted, t, out):
            if p == 0.0:
                continue
            exact = mp.mpf(float(p)) * mp.exp(3 * mp.mpf(log_z) - lam * mp.mpf(float(tj)))
            rel = abs(mp.mpf(float(got)) - exact) / abs(exact)
            assert rel <= kappa_out
            worst = max(worst, float(rel))
    assert worst > 2.0 ** -53


def test_ball_table_base_moment_bound_is_rounded_up():
    """Lemma T3: U(α) = min_j e^{RΛ_j}(j−1)^{j−1}/(j^j α^{j−1}) as computed (moment_curve_bound) is ≥ its exact
    value (mpmath, the same double inputs) at 600 log α over the table's range, and within 1e-12 relative of it;
    the exponential to nearest falls below it at some of them (the rounding up is needed)."""
    orders = [2, 3, 4, 6, 8, 12, 16, 24, 32]
    rates = np.array([0.31, 0.74, 1.37, 3.4, 6.6, 17.2, 33.1, 80.5, 150.3])
    R = 0.37
    log_alpha = np.linspace(-0.5, 40.0, 600)
    got = moment_curve_bound(R, rates, orders, log_alpha)
    j = np.asarray(orders, dtype=np.float64)[:, None]
    near = np.minimum(np.exp(np.min(R * rates[:, None] + (j - 1) * np.log(j - 1) - j * np.log(j)
                                    - (j - 1) * log_alpha[None, :], axis=0)), 1.0)
    below = 0
    with mp.workdps(DPS):
        for g, nr, la in zip(got, near, log_alpha):
            exact = min(mp.mpf(1), min(mp.exp(mp.mpf(R) * mp.mpf(float(r)) + (k - 1) * mp.log(k - 1) - k * mp.log(k)
                                              - (k - 1) * mp.mpf(float(la))) for k, r in zip(orders, rates)))
            assert mp.mpf(float(g)) >= exact
            assert float(g) <= float(exact) * (1 + 1e-12) + 1e-323
            below += mp.mpf(float(nr)) < exact
    assert below > 0


def test_ball_table_base_moment_bound_past_float_range_is_capped_at_one_without_a_warning():
    """Lemma T3's U where an exponent R·Λ_j exceeds float range (high orders, large Base mass): e^{arg} is +inf, a
    valid upper bound, and the cap at 1 replaces it; numpy's overflow warning does not reach the user."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = moment_curve_bound(50.0, np.array([0.5, 40.0]), [2, 64], np.array([0.0, 2.0, 500.0]))
    assert np.array_equal(got[:2], np.ones(2))  # order 2: e^{25}/4 > 1 at log α ≤ 2; order 64 overflows
    assert 0.0 < got[2] < 1.0  # at log α = 500 order 2 is finite and small


def test_ball_table_base_moment_bound_overflow_hides_no_finite_order_and_keeps_a_nan():
    """The overflow made quiet (main 11cd587) is +∞ only in the orders whose exponent is past float range: where
    another order is finite the bound is that order's rounded-up value (≥ the 40-digit exact minimum, within 1e-12),
    not 1; a NaN rate (no bound) stays NaN, never 1 or a finite number, and raises no warning on the way."""
    import warnings

    rates, orders = np.array([0.1, 40.0]), [2, 64]
    log_alpha = np.array([5.0, 10.0, 20.0])  # order 64's exponent 2000 − 5.2 − 63·log α > 710: +∞ at each
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = moment_curve_bound(50.0, rates, orders, log_alpha)
        nan = moment_curve_bound(50.0, np.array([np.nan, 40.0]), orders, log_alpha)
    with mp.workdps(40):
        for g, la in zip(got, log_alpha):
            exact = min(mp.mpf(1), min(mp.exp(50 * mp.mpf(float(r)) + (k - 1) * mp.log(k - 1) - k * mp.log(k)
                                              - (k - 1) * mp.mpf(float(la))) for k, r in zip(orders, rates)))
            assert mp.mpf(float(g)) >= exact and float(g) <= float(exact) * (1 + 1e-12), (la, g)
    assert np.all(got < 1.0) and np.all(np.isnan(nan))


def test_curve_split_dominates_the_exact_pair_in_both_orientations():
    """Lemma R10(a): the connect-the-dots pair of the rounded-up curve (what split_to_grid returns where C ≤
    CURVE_SPLIT_MAX_ROUNDOFF) has both curves ≥ the exact GG curve (40-digit mpmath: exact threshold and tails) at
    α between its atoms and at them, over both sides of the loss range, for a small shift near β = 1, β = 1 (atoms),
    β = 2 and β = 4; its grid is symmetric with every loss a double, its Q-law the mirror of its P-law, C is tiny."""
    n = 1 << 10
    for a, beta in ((1e-4, 1.2), (0.05, 1.0), (1.0, 2.0), (1.0 / 6.0, 4.0)):
        pair = _curve_split(GGPair(a, beta), n)
        assert pair is not None and 0.0 < pair.roundoff <= CURVE_SPLIT_MAX_ROUNDOFF
        t = pair.ts
        assert np.array_equal(t, -t[::-1])
        mids = 0.5 * (t[:-1] + t[1:])
        picks = np.unique(np.concatenate([mids[:: n // 24], t[n // 2 - 3: n // 2 + 3], t[:: n // 16]]))
        alphas = np.exp(picks)
        got_pq, got_qp = pair.h_pq(alphas), pair.h_qp(alphas)
        assert np.array_equal(pair.omega, pair.nu[::-1])  # symmetric: Q-law = the mirror of the P-law
        with mp.workdps(DPS):
            for al, g_pq, g_qp in zip(alphas, got_pq, got_qp):
                exact = _h_exact(a, beta, float(al))  # H_α(P‖Q) = H_α(Q‖P): the reflection x ↦ a − x
                assert mp.mpf(float(g_pq)) >= exact and mp.mpf(float(g_qp)) >= exact, (a, beta, float(al))


def test_split_to_grid_dominates_where_the_finest_grid_is_ill_conditioned():
    """Lemma R10(b): where the split on all n = 8192 points is ill-conditioned (the former bin-split region: small
    shifts near β = 1, windows beyond ±600), split_to_grid returns the same construction on a coarser grid, or on the
    window cut at ±CURVE_SPLIT_MAX_LOSS (the P-mass above at +∞): C tiny, both curves ≥ the exact GG curve (40-digit
    mpmath) at α between the atoms, at them and beyond the grid. Where no grid is well conditioned (a tiny shift at
    β = 2; β = 4 at a = 10, H = 1 to double precision) it raises AccountingError, never a pair."""
    n = 1 << 13
    for a, beta in ((1e-4, 1.0), (1e-6, 1.001), (1e-6, 1.1), (1e-8, 1.5), (1.0, 8.0)):
        pair = split_to_grid(GGPair(a, beta), n)
        assert 0.0 < pair.roundoff <= CURVE_SPLIT_MAX_ROUNDOFF
        t = pair.ts
        assert np.array_equal(t, -t[::-1]) and np.array_equal(pair.omega, pair.nu[::-1])
        lo, hi = GGPair(a, beta).loss_window()
        if hi > CURVE_SPLIT_MAX_LOSS:  # the cut window: its top within a spacing of the cut, mass at +∞
            assert pair.omega.size == n and t[-1] <= CURVE_SPLIT_MAX_LOSS + pair.h and pair.p_inf > 0.0
        else:  # the finest grid is ill-conditioned here: a coarser one
            assert _curve_split(GGPair(a, beta), n) is None and pair.omega.size < n
        if beta == 1.0:  # the top point read above the atom at a: not the curve's rounding-up slack ~2e-12 at +∞
            assert pair.p_inf < 1e-14
        m = t.size
        mids = 0.5 * (t[:-1] + t[1:])
        step = max(m // 16, 1)
        picks = np.unique(np.concatenate([mids[::step], t[::step], t[m // 2 - 2: m // 2 + 2], t[-2:], mids[-2:],
                                          [t[-1] + pair.h]]))
        alphas = np.exp(picks)
        got_pq, got_qp = pair.h_pq(alphas), pair.h_qp(alphas)
        with mp.workdps(DPS):
            for al, g_pq, g_qp in zip(alphas, got_pq, got_qp):
                exact = _h_exact(a, beta, float(al))
                assert mp.mpf(float(g_pq)) >= exact and mp.mpf(float(g_qp)) >= exact, (a, beta, float(al))
    for a, beta in ((1e-10, 2.0), (10.0, 4.0)):
        with pytest.raises(AccountingError, match=r"shift a=.*cannot be discretized with a certified round-off"):
            split_to_grid(GGPair(a, beta), n)
