"""Reuse across calls: a growing history reuses the per-step discretized PRVs and Chernoff
log-MGFs of earlier calls, and the cached result is bit-for-bit the cold one."""

from __future__ import annotations

import warnings

from opacus_gg.accountants import GGPRVAccountant, api, discretization, spreads


def _clear():
    api.clear_query_cache()
    discretization.step_dprv.cache_clear()
    discretization._step_log_mgf.cache_clear()
    spreads.spread_pairs.cache_clear()


def _eps(steps):
    acc = GGPRVAccountant(beta=1.5, dim=8)
    for _ in range(2):
        acc.history.append((1.0, 0.02, steps // 2, 1.5, 8, 1.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # β ≤ 2: proven, no warning
        return acc.get_epsilon_report(1e-5, diagnostics=True).epsilon_upper  # the equal-spread PRV ε


def test_growing_history_reuses_step_prvs_and_matches_cold_call():
    _clear()
    first = _eps(400)
    misses = discretization.step_dprv.cache_info().misses
    second = _eps(402)  # two more steps: same quantized grid
    info = discretization.step_dprv.cache_info()
    assert info.misses == misses and info.hits >= 2  # nothing recomputed, both directions reused
    assert discretization._step_log_mgf.cache_info().hits >= 2
    _clear()
    assert _eps(402) == second  # cold = warm, bit for bit
    assert second >= first


def test_get_epsilon_is_the_report_epsilon_and_skips_the_equal_spread_prv():
    """β ≠ 2, d > 1, p < ∞: get_epsilon is the proven RDP bound alone (no spread cover, no PRV grid: at β = 1.5 the
    dominating Gaussian's gate skips its PRV, docs/accounting.md Lemma N), and it is exactly the ε the full report
    publishes; β = 2 keeps the PRV."""
    from opacus_gg.accountants import ball_rdp

    _clear()
    ball_rdp.step_rdp.cache_clear()
    acc = GGPRVAccountant(beta=1.5, dim=64)
    acc.history = [(1.0, 0.02, 300, 1.5, 64, 1.5), (1.2, 0.02, 200, 1.5, 64, 1.5)]
    fast = acc.get_epsilon(1e-5)
    assert spreads.spread_pairs.cache_info().misses == 0
    assert discretization.step_dprv.cache_info().misses == 0
    # the two segments' one-step RDP (each window of orders: ball_rdp._tier_epsilon), their Gaussians' for the gate
    computed = ball_rdp.step_rdp.cache_info().misses
    assert computed > 0
    assert acc.get_epsilon_report(1e-5).epsilon == fast  # the default report: the same number, the same path
    assert ball_rdp.step_rdp.cache_info().misses == computed  # ... from the same cached one-step RDPs
    assert spreads.spread_pairs.cache_info().misses == 0 and discretization.step_dprv.cache_info().misses == 0
    report = acc.get_epsilon_report(1e-5, diagnostics=True)
    assert report.certified and report.method == "rdp" and report.details["gaussian_domination"].startswith("skip")
    assert report.epsilon == fast
    assert report.epsilon_equal_spreads is not None and report.epsilon_equal_spreads < fast
    acc.history[-1] = (1.2, 0.02, 201, 1.5, 64, 1.5)
    misses = ball_rdp.step_rdp.cache_info().misses
    assert acc.get_epsilon(1e-5) > fast  # one more step: the cached one-step RDPs are reused
    assert ball_rdp.step_rdp.cache_info().misses == misses
    gauss = GGPRVAccountant()
    gauss.history = [(1.0, 0.02, 300)]
    assert gauss.get_epsilon(1e-5) == gauss.get_epsilon_report(1e-5).epsilon
