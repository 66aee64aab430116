"""Lemma S of docs/accounting.md: for a symmetric pair (P, Q) (a bijection swaps them) and P' = (1−q)Q + qP,
D_λ(Q‖P') ≤ D_λ(P'‖Q) for every λ ≥ 1 (Poisson subsampling: add ≤ remove in Rényi divergence). Each step of the
proof is checked on a grid, the conclusion by direct quadrature of GG pairs, and its use in ball_rdp.step_rdp."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special

from opacus_gg.accountants import ball_rdp

QS = [1e-4, 1e-3, 0.01, 0.1, 0.3, 0.5, 0.9, 0.999]
LAMBDAS = [1.0, 1.5, 2.0, 3.0, 7.5, 32.0, 256.0]
LS = np.exp(np.linspace(-40.0, 40.0, 4001))


def _log_k_terms(t, lam):
    """(log t^λ, log t^{1−λ}): k(t) = t^λ − t^{1−λ}."""
    return lam * np.log(t), (1.0 - lam) * np.log(t)


def test_identities_of_the_proof():
    """u − 1 = L − v and u·v − L = q(1−q)(L−1)² (u = 1 − q + qL, v = q + (1−q)L), so u ≥ L/v ≥ 1 for L ≥ 1."""
    for q in QS:
        u, v = 1 - q + q * LS, q + (1 - q) * LS
        assert np.allclose(u - 1, LS - v, rtol=1e-12, atol=1e-12 * np.maximum(1, LS))
        assert np.allclose(u * v - LS, q * (1 - q) * (LS - 1) ** 2, rtol=1e-9, atol=1e-12)
        big = LS >= 1
        assert np.all(u[big] >= (LS / v)[big] * (1 - 1e-15)) and np.all((LS / v)[big] >= 1 - 1e-15)


@pytest.mark.parametrize("lam", LAMBDAS)
def test_k_is_convex_above_one_so_its_chord_slope_from_one_grows(lam):
    """k(t) = t^λ − t^{1−λ}: k(1) = 0, k'' = λ(λ−1)(t^{λ−2} − t^{−λ−1}) ≥ 0 on t ≥ 1, so k(t)/(t − 1) is
    non-decreasing on (1, ∞) (checked on a grid up to t = e^4)."""
    t = 1.0 + np.expm1(np.linspace(1e-6, min(4.0, 300.0 / lam), 4000))
    kk = t**lam - t ** (1.0 - lam)
    slope = kk / (t - 1.0)
    assert np.all(np.diff(slope) >= -1e-12 * slope[1:])
    assert np.all(lam * (lam - 1) * (t ** (lam - 2) - t ** (-lam - 1)) >= 0)


@pytest.mark.parametrize("lam", LAMBDAS)
def test_symmetrized_integrand_is_nonnegative(lam):
    r"""k(u) + L·k(y) ≥ 0 for every L > 0 (y = 1 − q + q/L), the pointwise inequality behind A ≤ R; in logs:
    log(u^λ + L y^λ) ≥ log(u^{1−λ} + L y^{1−λ}), L ∈ [e^{−40}, e^{40}]."""
    for q in QS:
        u, y = 1 - q + q * LS, 1 - q + q / LS
        a1, b1 = _log_k_terms(u, lam)
        a2, b2 = _log_k_terms(y, lam)
        pos = np.logaddexp(a1, np.log(LS) + a2)
        neg = np.logaddexp(b1, np.log(LS) + b2)
        assert np.all(pos - neg >= -1e-12), (q, lam, float(np.min(pos - neg)))


def _gg_logpdf(x, beta):
    return -np.abs(x) ** beta / beta - (math.log(2.0) + math.log(beta) / beta + special.gammaln(1 + 1 / beta))


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0])
def test_add_renyi_below_remove_renyi_for_gg_pairs_by_quadrature(beta):
    """∫ Q^λ P'^{1−λ} ≤ ∫ P'^λ Q^{1−λ} by direct quadrature (P = GG shifted by a, Q = GG at 0; integrands scaled
    by their maximum on a grid), and strictly below somewhere (the add direction is not the same number)."""
    strict = False
    for a in ((0.3, 1.0) if beta > 2 else (0.3, 1.0, 3.0)):
        for q in (0.01, 0.3, 0.9):
            for lam in (2, 5, 20):
                def log_p1(x):
                    return np.logaddexp(math.log1p(-q) + _gg_logpdf(x, beta), math.log(q) + _gg_logpdf(x - a, beta))

                def log_rem(x):
                    return lam * log_p1(x) + (1 - lam) * _gg_logpdf(x, beta)

                def log_add(x):
                    return lam * _gg_logpdf(x, beta) + (1 - lam) * log_p1(x)

                w = max((60.0 * beta + lam * a ** beta) ** (1 / beta), 3.0 * lam * a) + 2 * a + 5.0
                grid = np.linspace(-w, w, 20001)
                vals = []
                for g in (log_rem, log_add):
                    top = float(np.max(g(grid)))
                    v = integrate.quad(lambda x: math.exp(float(g(x)) - top), -w, w, points=[0.0, a], limit=400,
                                       epsabs=0.0, epsrel=1e-11)[0]
                    vals.append(math.log(v) + top)
                log_r, log_a = vals
                assert log_a <= log_r + 1e-9, (beta, a, q, lam, log_a, log_r)
                strict |= log_a < log_r - 1e-6
    assert strict


def test_step_rdp_add_is_capped_by_remove_and_lowers_the_bound():
    """ball_rdp.step_rdp: add ≤ remove at every order; at β = 1.5, d = 10, q = 0.1 the uncapped add bound
    (subsampled_rdp_upper on the same moments) is above remove at some order, so the cap is used."""
    orders = tuple(range(2, 17))
    one = ball_rdp.step_rdp(1.0, 0.1, 1.5, 10, 1.5, orders)
    assert np.all(one["add"] <= one["remove"])
    raw = ball_rdp.subsampled_rdp_upper(orders, 0.1, ball_rdp.ball_log_moments(16, 1.0, 1.5, 10, 1.5))
    assert np.array_equal(one["remove"], raw["remove"]) and np.max(raw["add"] / raw["remove"]) > 1.0
