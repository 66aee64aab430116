"""Rényi orders in (1, 2) for the bound over the ℓp ball (:mod:`opacus_gg.accountants.low_orders`, docs/accounting.md
"Orders below 2", Lemma F).

What is checked: Lemma F's inequality (and that it fails above α = 2, so the range matters); the per-coordinate
moment enclosure at real orders against a 30-digit integral; the ball's S_α above Σ L_α(μ_i) of sampled shapes,
with L_α by scipy quadrature (no opacus-gg code); the one-step bound above the exact subsampled Rényi divergence
of one coordinate in both directions (quadrature); the published ε above the rigorous lower-bound oracle for
one-coordinate, mixed and equal-spread shapes where the low orders set it; where they are tried at all;
compute_delta's δ(ε) from the same orders: the inverse of the published ε, below the integer orders' δ, above the
oracle's δ for explicit shapes, monotone in ε, and unchanged at β ≤ 2.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import integrate, special

from lower_bound_oracle import compose, delta_lower, epsilon_lower, step_pmf
from opacus_gg.accountants import low_orders, renyi
from opacus_gg.accountants.api import compute_delta, compute_epsilon, proven_epsilon_history
from opacus_gg.accountants.ball_rdp import rdp_ball_delta, rdp_deltas
from opacus_gg.accountants.history import normalize_history
from opacus_gg.accountants.low_orders import (LOW_ORDERS, applies, ball_log_moment_real, low_order_deltas,
                                              low_order_epsilon, low_order_rdp)

#: a setting where the low orders set the published ε at β = p = 3 (integer orders: 116.75 at α = 2; orders
#: below 2: 30.82 at α ≈ 1.5), cheap enough for the oracle (20 steps, 16 coordinates)
WIN = dict(noise_multiplier=0.7, sample_rate=0.05, steps=20, delta=1e-5, beta=3.0, dim=16, clip_norm_p=3.0)


def _log_z(beta: float) -> float:
    return math.log(2.0) + math.log(beta) / beta + special.gammaln(1.0 + 1.0 / beta)


def _quad_log_moment(alpha: float, a: float, beta: float) -> float:
    """L_α(a) = log ∫ f(x − a)^α f(x)^{1−α} dx by scipy (breakpoints at 0, a and the peak)."""
    g = lambda x: math.exp(-(alpha * abs(x - a) ** beta + (1.0 - alpha) * abs(x) ** beta) / beta - _log_z(beta))
    r = ((alpha - 1.0) / alpha) ** (1.0 / (beta - 1.0))
    peak = a / (1.0 - r)
    pts = sorted({0.0, a, peak})
    edges = [-np.inf] + pts + [np.inf]
    total = sum(integrate.quad(g, lo, hi, epsabs=0.0, epsrel=1e-12, limit=400)[0] for lo, hi in zip(edges, edges[1:]))
    return math.log(total)


def _tangent_gap(alpha, q, x):
    """(1 − q + qx)^α − [1 − q^α + α(q − q^α)(x − 1) + q^α x^α]: Lemma F's pointwise inequality says ≤ 0."""
    return (1 - q + q * x) ** alpha - (1 - q ** alpha + alpha * (q - q ** alpha) * (x - 1) + q ** alpha * x ** alpha)


@pytest.mark.parametrize("alpha", [1.0, 1.01, 1.2, 1.5, 1.9, 2.0])
@pytest.mark.parametrize("q", [1e-4, 0.01, 0.3, 0.9, 1.0])
def test_lemma_f_inequality_holds_for_orders_up_to_two(alpha, q):
    x = np.concatenate([np.linspace(0.0, 10.0, 100_001), np.geomspace(10.0, 1e12, 2_000)])
    scale = 1.0 + q ** alpha * x ** alpha + alpha * q * x  # the terms' size (float64 round-off)
    assert np.all(_tangent_gap(alpha, q, x) <= 1e-14 * scale)  # equality at α = 2: a few ulps either way
    with mpmath.workdps(30):  # 30 digits at a few points (equality at α = 2, up to the 30 digits)
        for xx in ("0", "0.3", "1", "7", "1e6"):
            X = mpmath.mpf(xx)
            assert _tangent_gap(mpmath.mpf(alpha), mpmath.mpf(q), X) <= mpmath.mpf("1e-27") * (1 + X * X)


def test_lemma_f_inequality_fails_above_order_two():
    # ψ is convex above α = 2: the tangent at x = 1 is below it (α = 3, q = 0.5, x = 10: 30.4 too low)
    assert _tangent_gap(3.0, 0.5, 10.0) > 30.0


@pytest.mark.parametrize("beta", [2.5, 3.0])
@pytest.mark.parametrize("alpha", [1.05, 1.5, 1.9])
def test_real_order_moment_encloses_the_30_digit_value(beta, alpha):
    a = np.array([0.05, 0.5, 2.0])
    got = renyi.log_moments_upper(alpha, a, beta, 1e-9)
    with mpmath.workdps(30):
        b, al = mpmath.mpf(beta), mpmath.mpf(alpha)
        z = 2 * b ** (1 / b) * mpmath.gamma(1 + 1 / b)
        for ai, gi in zip(a, got):
            A = mpmath.mpf(float(ai))
            f = lambda x: mpmath.exp(-(al * abs(x - A) ** b + (1 - al) * abs(x) ** b) / b)
            r = ((al - 1) / al) ** (1 / (b - 1))
            pts = [-mpmath.inf, 0, A, A / (1 - r), mpmath.inf]
            exact = float(mpmath.log(mpmath.quad(f, pts) / z))
            assert gi >= exact
            assert gi <= exact + 1e-6 * max(abs(exact), 1e-3)


def _shapes(d: int, p: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    out = [np.eye(d)[0]] + [np.r_[np.ones(k), np.zeros(d - k)] for k in range(2, d + 1)]
    out += [np.r_[c, np.full(d - 1, 0.1)] for c in (0.3, 0.8, 1.0)]
    out += [rng.random(d) ** 3 for _ in range(20)]
    return [s / np.sum(s ** p) ** (1.0 / p) for s in out]  # on the sphere ‖μ‖_p = 1


@pytest.mark.parametrize("beta,p", [(3.0, 3.0), (2.5, 2.5), (3.0, 2.0)])
@pytest.mark.parametrize("alpha", [1.1, 1.6])
def test_ball_moment_at_real_orders_dominates_sampled_shifts(beta, p, alpha):
    d, sigma = 8, 0.8
    bound = ball_log_moment_real(alpha, sigma, beta, d, p)
    worst = 0.0
    for s in _shapes(d, p):
        worst = max(worst, sum(_quad_log_moment(alpha, float(x) / sigma, beta) for x in s if x > 0))
    assert worst <= bound
    assert bound <= 1.1 * worst  # the dual is tight for these d (a bound far above the shapes would fail here)


@pytest.mark.parametrize("beta", [2.5, 3.0])
@pytest.mark.parametrize("q", [0.01, 0.3, 1.0])
@pytest.mark.parametrize("alpha", [1.05, 1.5, 1.95])
def test_low_order_rdp_is_above_the_exact_subsampled_divergence_of_one_coordinate(beta, q, alpha):
    a = 1.2
    head = math.log1p(-q) if q < 1.0 else -math.inf

    def log_mix(x):  # log f_0(x), log((1 − q) + q·e^{ℓ(x)}) (P'/Q), without overflow
        ell = (abs(x) ** beta - abs(x - a) ** beta) / beta
        return -abs(x) ** beta / beta - _log_z(beta), float(np.logaddexp(head, math.log(q) + ell))

    rem = lambda x: math.exp(log_mix(x)[0] + alpha * log_mix(x)[1])  # E_Q[(P'/Q)^α]: D_α(P'‖Q)
    add = lambda x: math.exp(log_mix(x)[0] + (1.0 - alpha) * log_mix(x)[1])  # E_{P'}[(Q/P')^α]: D_α(Q‖P')
    pts = [-20.0, 0.0, a, 20.0]  # beyond ±20 both integrands are below e^{−20^β/(2β)}: nothing
    exact = [math.log(sum(integrate.quad(g, lo, hi, epsabs=0.0, epsrel=1e-11, limit=400)[0]
                          for lo, hi in zip(pts, pts[1:]))) / (alpha - 1.0) for g in (rem, add)]
    ours = low_order_rdp(alpha, q, _quad_log_moment(alpha, a, beta) * (1.0 + 1e-9))
    assert max(exact) <= ours
    if q == 1.0:  # no subsampling: Lemma F is exact
        assert ours == pytest.approx(exact[0], rel=1e-7)


def test_published_epsilon_uses_the_low_orders_and_is_above_the_oracle_for_explicit_shapes():
    r = compute_epsilon(**WIN)
    assert r.method == "rdp" and 1.0 < r.details["rdp_order"] < 2.0
    assert r.epsilon < 0.5 * r.details["epsilon_rdp_integer_orders"]
    assert proven_epsilon_history([(0.7, 0.05, 20, 3.0, 16, 3.0)], 1e-5) == r.epsilon
    d, p = 16, 3.0
    shapes = {"one": [1.0], "equal 16": [d ** (-1 / p)] * d, "equal 4": [4 ** (-1 / p)] * 4}
    for c in (0.5, 0.8):
        shapes[f"{c} + thin"] = [c] + [((1 - c ** p) / (d - 1)) ** (1 / p)] * (d - 1)
    lows = {k: epsilon_lower([(0.7, 0.05, 20, 3.0)], 1e-5, shift=v) for k, v in shapes.items()}
    assert max(lows.values()) <= r.epsilon, lows
    assert r.epsilon <= 3.0 * max(lows.values()), lows  # what is left: the RDP → (ε, δ) conversion


def test_low_orders_are_tried_only_above_beta_two_and_published_only_where_smaller():
    segs = lambda *e: normalize_history([e])
    assert applies(segs(1.0, 0.01, 10, 3.0, 10, 3.0)) and applies(segs(1.0, 0.01, 10, 3.0, 10, 2.0))
    assert not applies(segs(1.0, 0.01, 10, 1.5, 10, 1.5))  # β ≤ 2: the dominating Gaussian's cheap test decides
    # d = 1 and p = ∞: the Rényi bound runs only where the PRV composition refuses, and then with these orders too
    assert applies(segs(1.0, 0.01, 10, 3.0, 10, math.inf)) and applies(segs(1.0, 0.01, 10, 3.0, 1, 2.0))
    assert not applies(normalize_history([(1.0, 0.01, 10, 3.0, 10, 2.0, 5.0)]))  # a count query: not tried
    r = compute_epsilon(noise_multiplier=1.0, sample_rate=0.01, steps=1000, delta=1e-5, beta=1.5, dim=2410,
                        clip_norm_p=1.5)
    assert "epsilon_rdp_integer_orders" not in r.details
    kw = dict(noise_multiplier=1.0, sample_rate=0.01, steps=1000, delta=1e-5, dim=10)
    r = compute_epsilon(beta=2.5, clip_norm_p=2.5, **kw)  # tried, and the integer orders stay (6.3077 at α = 3)
    assert r.epsilon == r.details["epsilon_rdp_integer_orders"] and r.details["rdp_order"] == 3.0
    r = compute_epsilon(beta=3.0, clip_norm_p=3.0, **kw)  # just below α = 2 (15.1406 against 15.1484 at α = 2)
    assert r.epsilon < r.details["epsilon_rdp_integer_orders"] < 1.001 * r.epsilon and r.details["rdp_order"] < 2.0


def test_low_order_rdp_is_non_decreasing_in_the_sample_rate():
    q = np.concatenate([np.geomspace(1e-4, 0.5, 40), 1.0 - np.geomspace(0.5, 1e-9, 40), [1.0]])
    for alpha in (1.01, 1.1, 1.5, 1.99):
        for S in (1e-4, 0.1, 3.0, 50.0):
            v = np.array([low_order_rdp(alpha, x, S) for x in q])
            assert np.all(np.diff(v) >= 0.0), (alpha, S)
            assert v[-1] == pytest.approx(S / (alpha - 1.0), rel=1e-7)  # exact at q = 1, up to its slack


def test_published_epsilon_is_monotone_in_the_sample_rate_where_lemma_f_alone_was_not():
    # found by test_accountant_properties's sweep with a first, looser Lemma F (u^α + αu^{α−1}v + v^α, whose head
    # term falls towards q = 1): 1135.47 at q = 0.974 against 711.96 at q = 1
    kw = dict(noise_multiplier=1.3432209438522866, steps=496, delta=0.0025615404154996435, beta=3.934655652766544,
              dim=4)
    lo = compute_epsilon(sample_rate=0.9736533501808158, **kw).epsilon
    hi = compute_epsilon(sample_rate=1.0, **kw).epsilon
    assert lo <= hi < 1000.0


def test_low_order_epsilon_is_monotone_in_steps_and_dimension():
    e = [low_order_epsilon([(0.7, 0.05, t, 3.0, d, 3.0)], 1e-5)[0] for t, d in ((10, 16), (20, 16), (20, 32))]
    assert e[0] < e[1] < e[2]


def _kw(setting: dict) -> dict:
    return {k: v for k, v in setting.items() if k != "delta"}


@pytest.mark.parametrize("setting", [
    WIN,
    dict(noise_multiplier=1.0, sample_rate=0.01, steps=1000, delta=1e-5, beta=3.0, dim=2410, clip_norm_p=3.0),
])
def test_compute_delta_inverts_the_published_epsilon_where_the_low_orders_set_it(setting):
    """compute_delta(compute_epsilon(δ)) is δ up to the round-off slacks, where the integer orders alone give a δ
    far above it (the same orders and conversion both ways: docs/accounting.md, "Orders below 2")."""
    r = compute_epsilon(**setting)
    assert 1.0 < r.details["rdp_order"] < 2.0
    d = compute_delta(epsilon=r.epsilon, **_kw(setting))
    assert setting["delta"] * (1 - 1e-9) <= d <= setting["delta"] * (1 + 1e-9)
    segs = normalize_history([tuple(setting[k] for k in ("noise_multiplier", "sample_rate", "steps", "beta", "dim",
                                                         "clip_norm_p"))])
    assert rdp_ball_delta(segs, r.epsilon) > 1e3 * d


def test_compute_delta_at_beta_at_most_two_does_not_read_the_low_orders(monkeypatch):
    """β = 1.5 (low_orders.applies is False): the δ is the integer orders' / the dominating Gaussian's as before."""
    kw = dict(noise_multiplier=1.0, sample_rate=0.01, steps=100, beta=1.5, dim=10, clip_norm_p=1.5)

    def refuse(*args, **kwargs):
        raise AssertionError("the low orders were read at beta <= 2")

    monkeypatch.setattr(low_orders, "low_order_deltas", refuse)
    monkeypatch.setattr(low_orders, "low_order_epsilon", refuse)
    r = compute_epsilon(delta=1e-5, **kw)
    # 4e-7: the integer orders' ε is composed on its tier's grid, compute_delta's on all the default orders'
    assert compute_delta(epsilon=r.epsilon, **kw) <= 1e-5 * (1 + 1e-6)


def _delta_lower(shift, epsilons) -> np.ndarray:
    """The oracle's δ(ε) lower bound for WIN's history with one fixed shift, the larger direction (no library code)."""
    sigma, q, steps, beta = (WIN[k] for k in ("noise_multiplier", "sample_rate", "steps", "beta"))
    tail = 1e-6 * WIN["delta"] / (2 * steps * (len(shift) + 2))
    out = np.zeros(len(epsilons))
    for direction in ("remove", "add"):
        h = max(len(step_pmf(beta, sigma, q, shift, direction, 0.01, tail)[1]) * 0.01 / 1500, 1e-5)
        pmf = compose([step_pmf(beta, sigma, q, shift, direction, h, tail)] * steps, tail)
        out = np.maximum(out, [delta_lower(pmf, e, h) for e in epsilons])
    return out


def test_low_order_delta_is_below_the_integer_orders_above_the_oracle_and_monotone():
    segs = normalize_history([(0.7, 0.05, 20, 3.0, 16, 3.0)])
    eps = np.array([5.0, 10.0, 20.0, 30.0, 40.0, 60.0, 100.0])
    integer = np.array([rdp_ball_delta(segs, e) for e in eps])
    ours = np.array([compute_delta(epsilon=e, **_kw(WIN)) for e in eps])
    assert np.all(ours <= integer) and ours[3] < 1e-3 * integer[3]  # 30 is between the two published ε
    # the branch and bound is exact: the min over every order of LOW_ORDERS, composed and converted one by one
    every = np.min([rdp_deltas(low_orders._composed(segs, [a]), [a], eps) for a in LOW_ORDERS], axis=0)
    assert np.array_equal(low_order_deltas(segs, eps), every)
    assert np.array_equal(ours, np.minimum(integer, every))
    d, p = 16, 3.0
    for shift in ([1.0], [d ** (-1 / p)] * d, [0.8] + [((1 - 0.8 ** p) / (d - 1)) ** (1 / p)] * (d - 1)):
        low = _delta_lower(shift, eps)
        assert np.all(low <= ours) and np.all(low[:5] > 0.0), (shift[:2], low, ours)
    fine = np.geomspace(1.0, 200.0, 60)
    curve = low_order_deltas(segs, fine)
    assert np.all(np.diff(curve) <= 0.0) and curve[0] > curve[-1]
