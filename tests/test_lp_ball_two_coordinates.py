r"""At p = β = 1.5 two coordinates are NOT dominated by one coordinate at the same ℓβ radius.

GG_a ⊗ GG_b ≼ GG_{(a^β + b^β)^{1/β}} would make the d = 1 PRV exact over the ℓβ ball (as Lemmas L3–L4 do at
β = p = 1). It is false at β = 1.5 (docs/accounting.md, "The worst shape against the worst equal spread"):
with a = b = 2^{−1/β}·c the product's hockey-stick δ(ε) exceeds the single coordinate's.

The product's δ is bounded from BELOW: for any test set A, H_α(P‖Q) ≥ P(A) − αQ(A); A = {ℓ_a(x₁) + ℓ_b(x₂) > ε}
with the inner threshold x₂*(x₁) found by bisection (an inexact x₂* still gives a test set, hence still a lower
bound), P(A) − αQ(A) = ∫ [p_a(x₁)F̄(x₂* − b) − α q(x₁)F̄(x₂*)] dx₁ by 20-digit mpmath quadrature. The single
coordinate's δ is computed the same way (its Neyman–Pearson set is a half-line) and checked against the
library's float64 GGPair. Shares no code with the accountant.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from opacus_gg.accountants.gg_pair import GGPair

DPS = 20


def _gg(beta):
    beta = mp.mpf(beta)
    z = 2 * beta ** (1 / beta) * mp.gamma(1 + 1 / beta)
    g = mp.gamma(1 / beta)

    def sf(x):
        return mp.gammainc(1 / beta, x ** beta / beta, mp.inf) / (2 * g) if x >= 0 else 1 - sf(-x)

    def pdf(x):
        return mp.exp(-abs(x) ** beta / beta) / z

    def loss(x, a):
        return (abs(x) ** beta - abs(x - a) ** beta) / beta

    def inv(s, a):  # ℓ_a is increasing: bisection to 1e-18 relative
        lo, hi = mp.mpf(-1), mp.mpf(1)
        while loss(lo, a) > s:
            lo *= 2
        while loss(hi, a) < s:
            hi *= 2
        while hi - lo > mp.mpf(10) ** (-18) * max(1, abs(lo), abs(hi)):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if loss(mid, a) > s else (mid, hi)
        return (lo + hi) / 2

    return sf, pdf, loss, inv


def _single(beta, c, eps):
    sf, _, _, inv = _gg(beta)
    x = inv(mp.mpf(eps), mp.mpf(c))
    return sf(x - c) - mp.e ** eps * sf(x)


def _product_lower(beta, a, b, eps):
    sf, pdf, loss, inv = _gg(beta)
    alpha = mp.e ** mp.mpf(eps)

    def g(x1):
        x2 = inv(eps - loss(x1, a), b)
        return pdf(x1 - a) * sf(x2 - b) - alpha * pdf(x1) * sf(x2)

    val, err = mp.quad(g, [-mp.inf, -4, 0, a, 4, mp.inf], error=True)
    return val - abs(err)


@pytest.mark.parametrize("c, eps, margin", [(1.0, 1.5, 5.9e-4)])
def test_two_coordinates_beat_one_coordinate_at_the_same_l_beta_radius(c, eps, margin):
    beta = 1.5
    with mp.workdps(DPS):
        a = mp.mpf(c) * mp.mpf(2) ** (-1 / mp.mpf(beta))
        single = _single(beta, mp.mpf(c), eps)
        product = _product_lower(beta, a, a, eps)
        # the single coordinate's δ agrees with the library's exact pair (float64)
        lib = float(GGPair(c, beta).h_pq(np.array([math.exp(eps)]))[0])
        assert abs(lib - float(single)) <= 1e-12
        # measured: 0.0096970574 − 0.0090938545 = 6.03e-4
        assert product - single >= margin, (float(product), float(single))


@pytest.mark.slow
@pytest.mark.parametrize("beta, c, eps, margin", [(1.5, 2.0, 3.0, 1.3e-3), (1.2, 1.0, 1.5, 7.8e-7)])
def test_two_coordinates_beat_one_coordinate_more_cases(beta, c, eps, margin):
    with mp.workdps(DPS):
        a = mp.mpf(c) * mp.mpf(2) ** (-1 / mp.mpf(beta))
        assert _product_lower(beta, a, a, eps) - _single(beta, mp.mpf(c), eps) >= margin
