"""β = p = 1: every shift in the ℓ1 ball is dominated by one coordinate shifted by the radius
(docs/accounting.md, "β = p = 1: the ℓ1 ball reduces to one coordinate", Lemmas L1–L4).

Units: Laplace noise of scale 1 (GG(1, 1), density e^{−|x|}/2); Lap_a = the pair (P_a, Q) with P_a = Lap(a),
Q = Lap(0). Every closed form of the docs is checked here against an independent quadrature that uses the
library's exact one-coordinate curves (:class:`GGPair`) or plain densities only; the inequality of Lemma L3 is
checked on a dense grid, both directions, with its margin.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from opacus_gg.accountants.api import compute_delta, compute_epsilon, proven_epsilon_history
from opacus_gg.accountants.gg_pair import GGPair
from opacus_gg.accountants.shapes import is_certified, shape_ks
from opacus_gg.accountants.spreads import spread_cover
from opacus_gg.validation import dim_matters

# closed forms vs quadrature: quad is asked for 1e-12 relative; the curves are O(1)
QUAD_TOL = 1e-10


def _lap_pdf(x, a=0.0):
    return 0.5 * np.exp(-np.abs(np.asarray(x, dtype=np.float64) - a))


def _lap_loss(x, a):
    """ℓ_a(x) = |x| − |x − a| (Laplace, scale 1)."""
    return np.abs(x) - np.abs(x - a)


def _delta_one(a, eps):
    r"""Lemma L1: H_{e^ε}(Lap(a)‖Lap(0)) = 1 − e^ε (ε ≤ −a), 1 − e^{(ε−a)/2} (|ε| < a), 0 (ε ≥ a)."""
    eps = np.asarray(eps, dtype=np.float64)
    return np.where(eps >= a, 0.0, np.where(eps <= -a, -np.expm1(eps), -np.expm1((eps - a) / 2.0)))


def _r(x, b, c):
    r"""Lemma L2: F_Z(x) − F_S(x) = e^{−x} r(x)/4 on [0, B), b ≤ c: r = 1 + x, b, B − 1 − x on [0, b), [b, c), [c, B)."""
    b, c = min(b, c), max(b, c)
    x = np.asarray(x, dtype=np.float64)
    return np.where(x < b, 1.0 + x, np.where(x < c, b, b + c - 1.0 - x))


def _int_exp_r(s, b, c):
    r"""∫_s^B e^x r(x) dx in closed form (antiderivatives x e^x, b e^x, (B − x) e^x on the three pieces)."""
    b, c = min(b, c), max(b, c)
    big = b + c
    s = np.asarray(s, dtype=np.float64)
    pieces = ((0.0, b, lambda x: x * np.exp(x)), (b, c, lambda x: b * np.exp(x)), (c, big, lambda x: (big - x) * np.exp(x)))
    total = np.zeros_like(s)
    for lo, hi, anti in pieces:
        low = np.clip(s, lo, hi)
        total = total + anti(hi) - anti(low)
    return total


def _delta_two(b, c, eps):
    r"""Lemma L3: H_{e^ε}(Lap(b)⊗Lap(c)‖Lap(0)⊗Lap(0)) = H_{e^ε}(Lap(B)‖Lap(0)) + ½e^{−B} ∫_s^B e^x r(x) dx,
    s = (ε + B)/2 clipped to [0, B] (B = b + c)."""
    big = b + c
    eps = np.asarray(eps, dtype=np.float64)
    s = np.clip((eps + big) / 2.0, 0.0, big)
    return _delta_one(big, eps) + 0.5 * math.exp(-big) * _int_exp_r(s, b, c)


def _quad_two(b, c, eps, direction):
    r"""Independent reference: H_α(P_b⊗P_c‖Q⊗Q) = ∫ p_b(x) H_{α e^{−ℓ_b(x)}}(P_c‖Q) dx and
    H_α(Q⊗Q‖P_b⊗P_c) = ∫ q(x) H_{α e^{ℓ_b(x)}}(Q‖P_c) dx, the inner curves from :class:`GGPair` (exact)."""
    inner = GGPair(c, 1.0)
    out = []
    for e in np.atleast_1d(eps):
        if direction == "pq":
            f = lambda x: _lap_pdf(x, b) * float(inner.h_pq(np.exp(e - _lap_loss(x, b)), upper=False))  # noqa: E731
        else:
            f = lambda x: _lap_pdf(x) * float(inner.h_qp(np.exp(e + _lap_loss(x, b)), upper=False))  # noqa: E731
        v, _ = integrate.quad(f, -60.0, 60.0 + b, points=[0.0, b], epsabs=1e-14, epsrel=1e-12, limit=400)
        out.append(v)
    return np.array(out)


# ---- Lemma L1: the one-coordinate curve ------------------------------------------------------------------


@pytest.mark.parametrize("a", [0.05, 0.7, 3.0])
def test_laplace_curve_closed_form_matches_quadrature_and_exact_pair(a):
    """δ_a(ε) of Lemma L1 = ∫(p_a − e^ε q)_+ by quadrature = GGPair(a, 1).h_pq = .h_qp (symmetric pair)."""
    eps = np.linspace(-a - 1.0, a + 1.0, 41)
    quad = [integrate.quad(lambda x: max(_lap_pdf(x, a) - math.exp(e) * _lap_pdf(x), 0.0), -60, 60 + a,
                           points=[0.0, a], epsabs=1e-14, epsrel=1e-12, limit=200)[0] for e in eps]
    closed = _delta_one(a, eps)
    pair = GGPair(a, 1.0)
    assert np.max(np.abs(closed - quad)) < QUAD_TOL
    assert np.max(np.abs(closed - pair.h_pq(np.exp(eps), upper=False))) < 1e-14
    assert np.max(np.abs(closed - pair.h_qp(np.exp(eps), upper=False))) < 1e-14
    # rounded up (Lemma R9): above the closed form, by at most its error bound (≤ ~2e-12·(1 + α) here)
    up = pair.h_pq(np.exp(eps))
    assert np.all(up >= closed) and np.all(up - closed <= 3e-12 * (1.0 + np.exp(eps)))


# ---- Lemma L2: sufficient statistic and its law -----------------------------------------------------------


def test_laplace_loss_is_an_affine_function_of_the_clipped_observation():
    """ℓ_a(x) = 2·clip(x, 0, a) − a, so the product's loss is 2(Z₁ + Z₂) − (b + c): S = Z₁ + Z₂ is sufficient."""
    x = np.linspace(-5.0, 5.0, 2001)
    for a in (0.1, 1.0, 2.5):
        assert np.max(np.abs(_lap_loss(x, a) - (2.0 * np.clip(x, 0.0, a) - a))) < 1e-15


@pytest.mark.parametrize("b,c", [(0.3, 0.3), (0.4, 1.7), (2.0, 0.6), (1.5, 2.5)])
def test_sum_statistic_cdf_closed_form_matches_convolution(b, c):
    """F_Z − F_S = e^{−x} r(x)/4 on [0, B) (Lemma L2), F_S by convolution of the clipped laws under Q:
    F_S(x) = ½G_c(x) + ∫_0^b ½e^{−z} G_c(x − z) dz + ½e^{−b} G_c(x − b), G_c(y) = 1 − ½e^{−y} on [0, c), 1 above."""
    def g(y, a):
        return 0.0 if y < 0 else (1.0 if y >= a else 1.0 - 0.5 * math.exp(-y))

    big = b + c
    for x in np.linspace(0.0, big, 57, endpoint=False):
        body, _ = integrate.quad(lambda z: 0.5 * math.exp(-z) * g(x - z, c), 0.0, b,
                                 points=[min(b, max(0.0, x - c))], epsabs=1e-15, epsrel=1e-13, limit=200)
        f_s = 0.5 * g(x, c) + body + 0.5 * math.exp(-b) * g(x - b, c)
        f_z = 1.0 - 0.5 * math.exp(-x)
        assert abs((f_z - f_s) - 0.25 * math.exp(-x) * float(_r(x, b, c))) < 1e-13


@pytest.mark.parametrize("b,c", [(0.1, 0.1), (0.3, 3.7), (1.0, 1.0), (2.0, 0.6), (0.5, 0.5)])
def test_cdf_difference_crosses_once_and_the_means_agree(b, c):
    """r > 0, then r ≤ 0 (one sign change), and ∫_0^B (F_Z − F_S) h' = 0 (E_Q h(S) = E_Q h(Z) = 1), h = e^{2x − B}."""
    big = b + c
    x = np.linspace(0.0, big, 20001, endpoint=False)
    sign = np.sign(_r(x, b, c))
    assert sign[0] > 0 and np.count_nonzero(np.diff(sign[sign != 0]) != 0) <= 1
    assert abs(0.5 * math.exp(-big) * float(_int_exp_r(0.0, b, c))) < 1e-14
    # and the integral from s never goes above 0 (the cut argument, Lemma L3)
    assert np.all(_int_exp_r(x, b, c) <= 1e-13 * np.exp(x))


# ---- Lemma L3: the two-coordinate curve and the inequality -----------------------------------------------


@pytest.mark.parametrize("b,c", [(0.3, 0.3), (0.2, 1.7), (2.5, 1.0)])
def test_product_hockey_stick_closed_form_matches_quadrature_both_directions(b, c):
    """Lemma L3's closed form = the quadrature reference, remove (P‖Q) and add (Q‖P) (the pair is symmetric)."""
    eps = np.linspace(-(b + c) - 0.5, b + c + 0.5, 17)
    closed = _delta_two(b, c, eps)
    assert np.max(np.abs(closed - _quad_two(b, c, eps, "pq"))) < QUAD_TOL
    assert np.max(np.abs(closed - _quad_two(b, c, eps, "qp"))) < QUAD_TOL


def test_laplace_product_dominated_by_summed_shift_dense_grid():
    r"""H_α(Lap_b ⊗ Lap_c) ≤ H_α(Lap_{b+c}) for 6 sums × 20 splits × 1201 values of ε, both directions (the
    add curve from the remove curve by H_α(Q‖P) = 1 − α + αH_{1/α}(P‖Q), compared up to the round-off
    1e-15·(1 + α) of that identity), subsampled too (Lemma D: the remove δ for q = 0.01 at t ∈ [−3, 6]).
    Margin: strictly positive inside (−B, B)."""
    eps = np.linspace(-10.0, 10.0, 1201)
    t = np.linspace(-3.0, 6.0, 301)
    q = 0.01
    for big in (0.1, 0.5, 1.0, 2.0, 4.0, 8.0):
        for w in np.linspace(0.025, 0.975, 20):  # the whole ℓ1 sphere of d = 2 (b ↔ c by symmetry of the sum)
            b, c = w * big, (1.0 - w) * big
            prod, one = _delta_two(b, c, eps), _delta_one(big, eps)
            assert np.all(prod <= one + 1e-15), (big, w, float(np.max(prod - one)))
            add_p = -np.expm1(eps) + np.exp(eps) * _delta_two(b, c, -eps)
            add_1 = -np.expm1(eps) + np.exp(eps) * _delta_one(big, -eps)
            assert np.all(add_p <= add_1 + 1e-15 * (1.0 + np.exp(eps)))  # round-off of 1 − α + α·H
            inside = np.abs(eps) < big * 0.9
            assert np.min((one - prod)[inside]) > 0.0  # the domination is strict inside: not a trivial identity
            # subsampled remove δ(t) = q·H_{1+(e^t−1)/q}(P‖Q) (arguments > 0 only)
            arg = 1.0 + np.expm1(t) / q
            ok = arg > 0
            le = np.log(arg[ok])
            assert np.all(q * _delta_two(b, c, le) <= q * _delta_one(big, le) + 1e-15)


def test_laplace_domination_agrees_with_quadrature_on_a_coarse_grid():
    """The inequality on the quadrature reference itself (no closed form of the product involved)."""
    eps = np.linspace(-3.0, 3.0, 13)
    for b, c in ((0.25, 0.75), (1.2, 0.8)):
        assert np.all(_quad_two(b, c, eps, "pq") <= _delta_one(b + c, eps) + QUAD_TOL)
        assert np.all(_quad_two(b, c, eps, "qp") <= _delta_one(b + c, eps) + QUAD_TOL)


# ---- Lemma L4: the whole ℓ1 ball, and the accountant ------------------------------------------------------


def test_three_coordinate_shifts_in_the_l1_ball_below_one_coordinate_at_the_radius():
    r"""Random μ ∈ ℝ³ with ‖μ‖₁ ≤ 1.5 (signs and zeros included): H_α(P_μ‖Q) = ∫ p_{|μ₁|}(x)·H^{(2)}_{αe^{−ℓ₁(x)}} dx
    (the inner two-coordinate curve from Lemma L3) ≤ H_α(Lap_{1.5}), both directions by symmetry."""
    rng = np.random.default_rng(7)
    eps = np.linspace(-2.0, 2.0, 9)
    radius = 1.5
    shapes = [np.array([0.5, -0.5, 0.5]), np.array([1.5, 0.0, 0.0])]
    shapes += [rng.dirichlet(np.ones(3)) * radius * rng.uniform(0.6, 1.0) * rng.choice([-1, 1], 3) for _ in range(4)]
    bound = _delta_one(radius, eps)
    for mu in shapes:
        a1, a2, a3 = np.abs(mu)
        if min(a2, a3) == 0.0:
            ref = _quad_two(a1, max(a2, a3), eps, "pq") if max(a2, a3) > 0 else _delta_one(a1, eps)
        else:
            ref = np.array([integrate.quad(lambda x: _lap_pdf(x, a1) * float(_delta_two(a2, a3, e - _lap_loss(x, a1))),
                                           -60.0, 60.0 + a1, points=[0.0, a1], epsabs=1e-14, epsrel=1e-12,
                                           limit=400)[0] for e in eps])
        assert np.all(ref <= bound + QUAD_TOL), (mu, float(np.max(ref - bound)))


def test_beta_p_one_any_dim_publishes_the_one_coordinate_prv():
    """β = p = 1: one exact pair for every d (label (1, d)), scope proven, method prv, ε(d) = ε(d = 1); so dim is
    not required there (validation.dim_matters)."""
    assert is_certified(1.0, 10**6, 1.0) and shape_ks(1.0, 10**6, 1.0) == [1]
    assert not dim_matters(1.0, None) and not dim_matters(1.0, 1.0) and dim_matters(1.0, 2.0)
    assert not is_certified(1.0, 10, 2.0)  # p ≠ β: no reduction
    assert [lab for lab, _ in spread_cover(1.0, 1.0, 1000, 1.0).pairs] == [(1, 1000)]
    kw = dict(noise_multiplier=2.0, sample_rate=0.02, steps=50, delta=1e-5, beta=1.0, clip_norm_p=1.0)
    one = compute_epsilon(dim=1, **kw)
    many = compute_epsilon(dim=10**6, **kw)
    assert many.scope == "proven" and many.method == "prv" and many.epsilon_equal_spreads is None
    assert many.epsilon == one.epsilon
    hist = [(2.0, 0.02, 50, 1.0, 10**6, 1.0)]
    assert proven_epsilon_history(hist, 1e-5) == one.epsilon
    d_kw = dict(epsilon=1.0, noise_multiplier=2.0, sample_rate=0.02, steps=50, beta=1.0, clip_norm_p=1.0)
    assert compute_delta(dim=10**6, **d_kw) == compute_delta(dim=1, **d_kw)
