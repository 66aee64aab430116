"""Reuse across calls: a growing history reuses the per-step discretized PRVs and Chernoff
log-MGFs of earlier calls, and the cached result is bit-for-bit the cold one."""

from __future__ import annotations

import warnings

from opacus_gg.accountants import GGPRVAccountant, discretization, spreads


def _clear():
    discretization.step_dprv.cache_clear()
    discretization._step_log_mgf.cache_clear()
    spreads.spread_pairs.cache_clear()


def _eps(steps):
    acc = GGPRVAccountant(beta=1.5, dim=8)
    for _ in range(2):
        acc.history.append((1.0, 0.02, steps // 2, 1.5, 8, 1.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # β ≤ 2: certified, no warning
        return acc.get_epsilon(1e-5)


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
