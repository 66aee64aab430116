"""The proven Rényi bound over the ℓp ball (opacus_gg.accountants.ball_rdp): each step of the proof checked."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

from opacus_gg.accountants.shapes import is_certified
from opacus_gg.accountants import compute_epsilon
from opacus_gg.accountants import ball_rdp as br
from opacus_gg.accountants.report import EpsilonReport
from opacus_gg.accountants import renyi
from opacus_gg.accountants.renyi import DEFAULT_ORDERS, log_moment, subsampled_rdp
from opacus_gg.validation import shift_radius


def _laplace_log_moment(j: int, a: float) -> float:
    """log M(j) for Laplace(scale 1) (GG β = 1): log(j/(2j-1) e^{(j-1)a} + (j-1)/(2j-1) e^{-ja}) (Mironov 2017),
    in 50-digit arithmetic (the double-precision formula loses ~1e-16 absolute to cancellation)."""
    with mpmath.workdps(50):
        a = mpmath.mpf(a)
        return float(mpmath.log(mpmath.mpf(j) / (2 * j - 1) * mpmath.exp((j - 1) * a)
                                + mpmath.mpf(j - 1) / (2 * j - 1) * mpmath.exp(-j * a)))


@pytest.mark.parametrize("j", [2, 3, 7, 20])
@pytest.mark.parametrize("a", [1e-6, 1e-3, 0.3, 2.0])
def test_per_coordinate_moment_matches_closed_forms_and_rounds_up(j, a):
    exact = {1.0: _laplace_log_moment(j, a), 2.0: j * (j - 1) * a * a / 2}
    for beta, ref in exact.items():
        up = br.log_moment_upper(j, a, beta)
        assert up >= ref
        # tight: 1e-6 relative, and an absolute floor of (1 + j/5)·1e-13 on log M (the enclosure's round-off at M ≈ 1;
        # the old QUADPACK path's floor was 1e-10, its small-shift path estimated, not enclosed)
        assert up <= ref * (1 + 1e-6) + (1 + j / 5) * 1e-13


@pytest.mark.parametrize("beta", [1.0, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("j", [2, 9])
def test_quadratic_coefficient_bounds_small_shifts_and_tends_to_fisher(beta, j):
    a_s = 0.05
    K = br.quadratic_coefficient(j, a_s, beta)
    for a in np.linspace(a_s / 50, a_s, 12):
        assert log_moment(j, a, beta) <= K * a * a
    # K(a_s) → j(j-1)·E|X|^{2β-2}/2 (Fisher information of GG(β,1): β^{(2β-2)/β} Γ(2-1/β)/Γ(1/β))
    fisher = beta ** ((2 * beta - 2) / beta) * math.gamma(2 - 1 / beta) / math.gamma(1 / beta)
    k0 = br.quadratic_coefficient(j, 1e-7, beta)
    # K is an enclosure and non-decreasing in a_s (so ≥ its a_s → 0 limit); at a = 1e-7 the next term is O(a)
    assert j * (j - 1) * fisher / 2 <= k0 <= (1 + 1e-5) * j * (j - 1) * fisher / 2
    assert k0 <= K


def _random_ball_points(rng, d: int, p: float, m: float, n: int):
    """Random and structured μ in the ℓp ball of radius m: one-hot, every equal spread, two-level, random."""
    pts = []
    for k in range(1, d + 1):
        v = np.zeros(d)
        v[:k] = 1.0
        pts.append(v)
    for t in (0.2, 0.5, 0.8):
        v = np.full(d, t)
        v[0] = 1.0
        pts.append(v)
    for _ in range(n):
        v = np.abs(rng.standard_normal(d)) * (rng.random(d) < rng.uniform(0.3, 1.0))
        if rng.random() < 0.5:
            v = v ** 4  # peaky shapes
        pts.append(v if v.any() else np.eye(d)[0])
    out = []
    for v in pts:
        v = m * v / np.linalg.norm(v, ord=p)
        out.append(v * (rng.uniform(0.5, 1.0) if rng.random() < 0.2 else 1.0))
    return out


@pytest.mark.parametrize("beta", [1.0, 1.5, 2.5, 3.0])
@pytest.mark.parametrize("d", [2, 5, 8])
def test_dual_bound_dominates_every_sampled_shift(beta, d):
    """Σ_i L_j(|μ_i|) ≤ S_j bound for random and structured μ with ‖μ‖_p ≤ m (p ∈ {β, 2})."""
    rng = np.random.default_rng(int(10 * beta) + d)
    sigma = 0.8
    for p in sorted({beta, 2.0}):
        for j in (2, 5):
            bound = br.ball_log_moment(j, sigma, beta, d, p)
            worst = 0.0
            for mu in _random_ball_points(rng, d, p, 1 / sigma, 40):
                worst = max(worst, sum(log_moment(j, float(x), beta) for x in mu))
            assert worst <= bound


def test_exact_cases_d1_and_p_inf():
    """d = 1: L_j at m; p = ∞: d·L_j(m); m = 1/σ rounded up (1/0.7 as a float is below 1/0.7, the radius above)."""
    m = shift_radius(0.7)
    assert m > 1 / 0.7
    for beta in (1.5, 3.0):
        assert br.ball_log_moment(4, 0.7, beta, 1, beta) == br.log_moment_upper(4, m, beta)
        assert br.ball_log_moment(4, 0.7, beta, 6, math.inf) >= 6 * br.log_moment_upper(4, m, beta)


@pytest.mark.parametrize("beta", [1.2, 1.5])
def test_p_equal_beta_below_2_order_2_is_dimension_free(beta):
    """Remark in the doc: at order 2 with p = β < 2, g_2(u) = L_2(u^{1/β}) is convex on [0, m^β] (measured),
    so the bound is the one-hot value up to the refinement tolerance, whatever d."""
    one_hot = br.log_moment_upper(2, 1.0, beta)
    for d in (10, 10**6):
        assert one_hot <= br.ball_log_moment(2, 1.0, beta, d, beta) <= one_hot * 1.005


def test_high_orders_are_not_one_hot_and_the_bound_covers_the_spread():
    """β = p = 1.5, order 20: an equal spread over k > 1 coordinates beats the one-hot shift (so the one-hot
    'dimension independence' fails even for β < 2 at high orders), and the dual bound covers it."""
    one_hot = log_moment(20, 1.0, 1.5)
    spreads = [k * log_moment(20, k ** (-1 / 1.5), 1.5) for k in range(1, 11)]
    assert max(spreads) > 1.02 * one_hot
    assert br.ball_log_moment(20, 1.0, 1.5, 10, 1.5) >= max(spreads)


def test_p_above_2_grows_with_dim_for_beta_3():
    vals = [br.ball_log_moment(2, 1.0, 3.0, d, 3.0) for d in (1, 10, 1000)]
    assert vals[0] < vals[1] < vals[2]


def test_chords_in_order_bound_the_directly_computed_orders():
    """S_j is convex in j: the chord interpolation never falls below a direct computation."""
    arr = br.ball_log_moments(40, 0.9, 1.5, 50, 2.0)
    assert arr[0] == 0 and arr[1] == 0
    for j in (9, 13, 30):  # not among the computed orders
        assert j not in br._computed_orders(40)
        assert arr[j] >= br.ball_log_moment(j, 0.9, 1.5, 50, 2.0)


def test_subsampled_rdp_matches_rdp_module_and_is_monotone_in_moments():
    orders = [2, 3, 8, 20]
    logm = np.array([log_moment(j, 1.2, 1.5) for j in range(21)])
    mine = br.subsampled_rdp_upper(orders, 0.05, logm)
    ref = subsampled_rdp(orders, noise_multiplier=1 / 1.2, sample_rate=0.05, beta=1.5)
    for k in ("remove", "add"):
        # same moments, same formula (renyi.subsampled_rdp_from_log_moments), plus the 1e-12 round-up
        np.testing.assert_allclose(mine[k], ref[k], rtol=1e-9)
    for j in (2, 5, 20):
        bumped = logm.copy()
        bumped[j] += 0.1
        more = br.subsampled_rdp_upper(orders, 0.05, bumped)
        for k in ("remove", "add"):
            assert np.all(more[k] >= mine[k])


@pytest.mark.parametrize("sigma,q,steps", [(1.0, 0.01, 1000), (0.8, 0.1, 50), (2.0, 0.001, 10000)])
def test_gaussian_pipeline_is_above_opacus_rdp_and_prv(sigma, q, steps):
    """β = 2: ε(rdp-ball) ≥ Opacus's RDP accountant (exact Gaussian RDP, same orders) ≥ ... and ≥ the PRV ε."""
    eps, _ = br.rdp_ball_epsilon([(sigma, q, steps, 2.0, 1, 2.0)], 1e-5)
    rdp = compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=DEFAULT_ORDERS)
    opacus_eps, _ = get_privacy_spent(orders=DEFAULT_ORDERS, rdp=rdp, delta=1e-5)
    assert eps >= opacus_eps
    assert eps <= opacus_eps * 1.01  # the add-direction bounds cost at most 1 % here
    assert eps >= compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=1e-5).epsilon
    eps_d, _ = br.rdp_ball_epsilon([(sigma, q, steps, 2.0, 100, 2.0)], 1e-5)
    assert eps_d >= eps


@pytest.mark.parametrize("beta,d", [(1.5, 4), (3.0, 8)])
def test_proven_bound_is_above_the_equal_spread_prv(beta, d):
    report = compute_epsilon(noise_multiplier=1.0, sample_rate=0.02, steps=200, delta=1e-5, beta=beta, dim=d,
                             diagnostics=True)
    assert report.certified and report.method == "rdp"
    assert report.epsilon == report.details["epsilon_rdp"]
    assert report.epsilon >= report.epsilon_upper  # the PRV upper bound over equal spreads


def test_monotone_in_steps_and_dim_and_sigma_zero():
    orders = list(range(2, 17))
    base = (1.0, 0.01, 100, 1.5, 10, 2.0)
    e = br.rdp_ball_epsilon([base], 1e-5, orders)[0]
    assert br.rdp_ball_epsilon([base[:2] + (200,) + base[3:]], 1e-5, orders)[0] > e
    assert br.rdp_ball_epsilon([base[:4] + (1000,) + base[5:]], 1e-5, orders)[0] > e
    two = br.rdp_ball_epsilon([base, (2.0, 0.05, 30, 3.0, 4, 3.0)], 1e-5, orders)[0]
    assert two > e
    assert br.rdp_ball_epsilon([(0.0, 0.01, 10, 1.5, 10, 2.0), base], 1e-5)[0] == math.inf


def test_bad_input_raises_naming_the_parameter():
    with pytest.raises(ValueError, match="delta"):
        br.rdp_ball_epsilon([(1.0, 0.01, 10)], 1.5)
    with pytest.raises(ValueError, match="orders"):
        br.rdp_ball_epsilon([(1.0, 0.01, 10)], 1e-5, orders=[1, 2])
    with pytest.raises(ValueError, match="history entries"):
        br.rdp_ball_epsilon([(1.0, 0.01)], 1e-5)
    with pytest.raises(ValueError, match="noise_multiplier"):
        br.rdp_ball_epsilon([(-1.0, 0.01, 10)], 1e-5)
    with pytest.raises(ValueError, match="dim"):
        br.rdp_ball_epsilon([(1.0, 0.01, 10, 1.5, 0, 2.0)], 1e-5)
    with pytest.raises(ValueError, match="rdp_epsilon"):
        br.combine(_prv_report("equal_spreads", 1.0), float("nan"))


def _prv_report(scope: str, eps: float) -> EpsilonReport:
    return EpsilonReport(epsilon=eps, epsilon_lower=eps * 0.99, epsilon_estimate=eps, epsilon_upper=eps,
                         delta=1e-5, scope=scope)


def test_combine_fields():
    proven = _prv_report("proven", 1.0)
    assert br.combine(proven, 2.0) is proven
    out = br.combine(_prv_report("equal_spreads", 1.0), 1.25, 12.0)
    assert (out.epsilon, out.scope, out.method, out.epsilon_equal_spreads) == (1.25, "proven", "rdp", 1.0)
    assert out.details["rdp_order"] == 12.0 and "1.2500 (proven" in out.summary() and "1.0000 (over equal" in str(out)
    out = br.combine(_prv_report("equal_spreads", 1.5), 1.25)
    assert out.epsilon == 1.25 and out.epsilon_equal_spreads is None
    assert is_certified(2.0, 10, 1.5) and is_certified(1.5, 1, 1.5) and is_certified(3.0, 9, math.inf)
    assert not is_certified(1.5, 2, 1.5) and not is_certified(3.0, 2, 3.0)


@pytest.mark.slow
@pytest.mark.parametrize("d", [10**6, 10**9])
def test_large_dimensions_are_finite_and_ordered(d):
    e = [br.rdp_ball_epsilon([(1.0, 0.001, 1000, 1.5, dd, 2.0)], 1e-5)[0] for dd in (10, d)]
    assert math.isfinite(e[1]) and e[1] >= e[0]


def test_compute_delta_publishes_the_proven_rdp_delta():
    """Where the PRV covers equal spreads only (β = 1.5, d = 16, p = 1.5), compute_delta is the ball-RDP δ: ≥ the
    equal-spread PRV δ (computed independently by the composition core), non-increasing in ε, non-decreasing in
    steps, and consistent with rdp_ball_epsilon in both directions of the conversion."""
    from opacus_gg.accountants import compute_delta
    from opacus_gg.accountants.composition import compose_delta
    from opacus_gg.accountants.history import normalize_history

    kw = dict(noise_multiplier=1.0, sample_rate=0.02, beta=1.5, dim=16, clip_norm_p=1.5)
    deltas = [compute_delta(epsilon=e, steps=200, **kw) for e in (0.5, 1.0, 2.0, 4.0)]
    assert all(a >= b for a, b in zip(deltas, deltas[1:])) and deltas[0] > deltas[-1]
    assert compute_delta(epsilon=1.0, steps=400, **kw) >= deltas[1]
    segs = normalize_history([(1.0, 0.02, 200, 1.5, 16, 1.5)])
    compared = 0
    for eps, d in zip((0.5, 1.0, 2.0, 4.0), deltas):
        assert d == br.rdp_ball_delta(segs, eps)
        prv = max(compose_delta(segs, eps, direction) for direction in ("remove", "add"))
        if prv > 1e-9:  # the PRV δ carries an additive δ_error/4 = 2.5e-13: compare where δ is far above it
            assert d >= prv
            compared += 1
    assert compared >= 2
    eps_rdp, order = br.rdp_ball_epsilon(segs, 1e-5)
    assert order < 48  # the low orders decided it (what the reverse check below relies on)
    assert compute_delta(epsilon=eps_rdp, steps=200, **kw) <= 1e-5 * (1 + 1e-9)
    assert br.rdp_ball_epsilon(segs, deltas[1])[0] <= 1.0 * (1 + 1e-9)


@pytest.mark.parametrize("beta, j", [(1.5, 4), (1.8, 32)])
def test_p2_many_coordinates_is_within_1_percent_of_the_fisher_limit(beta, j):
    """β ∈ {1.5, 1.8}, p = 2, d = 10^6 (the worst shift spreads over all coordinates): S_j lies between the best
    equal spread and 1.01 × the Fisher limit c·m², c = j(j−1)E|X|^{2β−2}/2 (closed form, Gamma functions), which is
    where L_j(a)/a² tends as a → 0 (1.0028 with the chord bound of Lemma 4d; it was 1.07 at j = 4 without it, and
    1.35 with the value-ranked splits alone)."""
    d = 10**6
    r = 2 * beta - 2
    c = j * (j - 1) / 2 * beta ** (r / beta) * math.gamma((r + 1) / beta) / math.gamma(1 / beta)
    bound = br.ball_log_moment(j, 1.0, beta, d, 2.0)
    spread = max(k * br.log_moment_upper(j, k ** -0.5, beta) for k in (1, 10, 10**3, 10**5, d))
    assert spread <= bound <= 1.01 * c
    assert spread >= 0.999 * c  # the limit is approached by spreading (so the 1 % is the bound's slack)


def _mp_moment(j: int, a, beta: float):
    """M_j(a) = ∫ f(y)^j f(y + a)^{1−j} dy... in the form Z^{-1}∫ e^{−jV(y) + (j−1)V(y+a)} dy, at 30 digits."""
    import mpmath as mpm

    with mpm.workdps(30):
        b, a = mpm.mpf(beta), mpm.mpf(a)
        z = 2 * b ** (1 / b) * mpm.gamma(1 + 1 / b)
        return mpm.quad(lambda y: mpm.exp(-j * abs(y) ** b / b + (j - 1) * abs(y + a) ** b / b),
                        [-mpm.inf, -a - 3, -a, 0, 3, mpm.inf]) / z


@pytest.mark.parametrize("beta, j", [(1.2, 2), (1.5, 8), (3.0, 3)])
def test_moment_is_convex_in_the_shift(beta, j):
    """Lemma 4d's premise: a ↦ M_j(a) = Z^{−1}∫ e^{−jV(y) + (j−1)V(y+a)} dy is convex (each integrand is exp of a
    convex function of a); second differences of 30-digit values on a ∈ [0, 0.6] are ≥ 0."""
    import mpmath as mpm

    vals = [_mp_moment(j, a, beta) for a in np.linspace(0.0, 0.6, 7)]
    assert all(vals[i - 1] - 2 * vals[i] + vals[i + 1] > 0 for i in range(1, len(vals) - 1))
    assert vals[0] == pytest.approx(1.0, abs=1e-25) and mpm.mpf(1) > 0


@pytest.mark.parametrize("beta, j, lo, hi", [(1.2, 2, 0.01, 0.0125), (1.8, 16, 0.1, 0.14), (1.5, 8, 0.5, 1.0),
                                             (3.0, 4, 0.2, 0.3)])
def test_chord_bound_is_above_the_30_digit_moment_curve(beta, j, lo, hi):
    """Lemma 4d: sup_{a ∈ [lo, hi]} (L_j(a) − λa^p) ≤ the chord bound (rounded, from the library's enclosures at
    lo and hi), for p ∈ {1.5, 2} and λ ∈ {0, c_j, 3c_j}, against 30-digit L_j at 7 points of the interval (and a
    denser float scan); and it is below the step bound G(hi) − λ lo^p wherever λ > 0."""
    import mpmath as mpm

    r = 2 * beta - 2
    c = j * (j - 1) / 2 * beta ** (r / beta) * math.gamma((r + 1) / beta) / math.gamma(1 / beta)
    A = np.array([lo, hi])
    G = np.array([br.log_moment_upper(j, lo, beta), br.log_moment_upper(j, hi, beta)])
    pts = np.linspace(lo, hi, 7)
    exact = [float(mpm.log(_mp_moment(j, a, beta))) for a in pts]
    dense = np.linspace(lo, hi, 41)
    upper = br.log_moment_uppers(j, dense, beta)
    for p in (1.5, 2.0):
        lams = np.array([0.0, c, 3 * c])
        chord = br._chord_sup(lams, G, A, p, rounded=True)[:, 0]
        for lam, bound in zip(lams, chord):
            assert max(e - lam * a ** p for e, a in zip(exact, pts)) <= bound
            assert np.max(upper - lam * dense ** p) <= bound + 1e-6 * abs(bound) + 1e-9  # enclosures: ≥ L_j
            if lam > 0:
                assert bound < G[1] - lam * lo ** p


def test_lattice_grid_shares_moments_across_sigma():
    """The shift grid is σ-independent: a second, nearby σ computes few new per-coordinate moments."""
    br.clear_caches()
    br.ball_log_moment(5, 1.0, 1.5, 1000, 1.5)
    first = len(renyi._moment_cache)
    br.ball_log_moment(5, 1.0 / 1.05, 1.5, 1000, 1.5)
    assert len(renyi._moment_cache) - first < 0.5 * first


@pytest.mark.parametrize("sigma, q, steps", [(1.0, 0.02, 300), (3.0, 0.001, 1000)])
def test_order_tiers_match_the_full_order_set(sigma, q, steps):
    """The default call tries orders ≤ 16, then ≤ 64, then all: it returns the full-order ε where the best order
    is inside the tier it stopped at (both settings: moderate ε at a low order, tiny ε at a high order)."""
    segs = [(sigma, q, steps, 1.5, 10, 1.5)]
    tiered, order = br.rdp_ball_epsilon(segs, 1e-5)
    full, full_order = br.rdp_ball_epsilon(segs, 1e-5, orders=DEFAULT_ORDERS)
    # both are upper bounds; they may differ by ~1e-8 relative because the orders where S_j is computed (chords in
    # between, Lemma 5) depend on the largest order asked for
    assert order == full_order and tiered == pytest.approx(full, rel=1e-7)


def test_lemma6_add_bound_needs_the_reverse_moment_and_holds_for_gg_pairs():
    """Lemma 6 (add): E_Q[(1−q+qe^ℓ)^{1−α}] ≤ (1−q) + q·M̄(α) with the REVERSE moment M̄(α) = ∫Q^αP^{1−α}.
    With M(α) = ∫P^αQ^{1−α} instead it is false for a general pair (issue 19's counterexample); for GG pairs
    M̄ = M (reflection symmetry, Lemma 1), which is what every call site passes."""
    from scipy import integrate

    from opacus_gg.accountants.renyi import subsampled_rdp_from_log_moments

    q, alpha = 0.9, 3
    Q, P = np.array([0.5, 0.5]), np.array([0.999, 0.001])
    true_add = float(np.sum(Q * (1 - q + q * P / Q) ** (1 - alpha)))
    assert true_add == pytest.approx(48.39, abs=0.01)
    forward = np.log([np.sum(P ** j * Q ** (1 - j)) for j in range(alpha + 1)])
    reverse_alpha = math.log(np.sum(Q ** alpha * P ** (1 - alpha)))
    wrong = subsampled_rdp_from_log_moments([alpha], q, forward)["add"][0]
    assert math.exp((alpha - 1) * wrong) == pytest.approx(3.69, abs=0.01) and math.exp((alpha - 1) * wrong) < true_add
    fixed = forward.copy()
    fixed[alpha] = reverse_alpha  # Jensen's term with M̄(α); the Taylor term keeps χ² = M(2) − 1 (any pair)
    assert math.exp((alpha - 1) * subsampled_rdp_from_log_moments([alpha], q, fixed)["add"][0]) >= true_add
    # GG pairs: M̄(j) = M(j) by quadrature, and the add bound built from M is ≥ the add moment by quadrature
    for beta, a in ((1.0, 0.8), (1.5, 1.2), (3.0, 0.7)):
        logf = lambda x: -abs(x) ** beta / beta  # noqa: E731 (unnormalised; Z cancels in every ratio below)
        z = 2 * beta ** (1 / beta) * math.gamma(1 + 1 / beta)
        pts = [-8.0, 0.0, a, 8.0 + a]
        for j in (2, 4):
            fwd = integrate.quad(lambda x: math.exp(j * logf(x - a) + (1 - j) * logf(x)) / z, pts[0], pts[-1],
                                 points=pts[1:-1], limit=200)[0]
            rev = integrate.quad(lambda x: math.exp(j * logf(x) + (1 - j) * logf(x - a)) / z, pts[0], pts[-1],
                                 points=pts[1:-1], limit=200)[0]
            assert rev == pytest.approx(fwd, rel=1e-8)
        for qq in (0.05, 0.5, 0.95):
            add = integrate.quad(lambda x: math.exp(logf(x)) / z * (1 - qq + qq * math.exp(logf(x - a) - logf(x)))
                                 ** (1 - alpha), pts[0], pts[-1], points=pts[1:-1], limit=200)[0]
            logm = np.array([br.log_moment_upper(j, a, beta) if j >= 2 else 0.0 for j in range(alpha + 1)])
            bound = math.exp((alpha - 1) * subsampled_rdp_from_log_moments([alpha], qq, logm)["add"][0])
            assert bound >= add * (1 - 1e-9)


def test_beta_three_rdp_sup_is_attained_by_one_hot_at_p2_and_by_a_mixed_shape_at_p3():
    """β = 3, m = 1 (docs/accounting.md, issue 21 item 4): at p = 2 the proven per-order sup S_8 over the ball is
    within 0.5 % of the one-hot moment at d = 1000 (and never below it); at p = β = 3, d = 1000 a shape with one
    coordinate carrying 82 % of the p-mass and the rest spread equally is ≤ S_8 (the bound holds), within 1 % of
    it, and > 1.05 × every equal spread k ∈ {1, 10, 100, 1000} (the equal-spread conjecture fails above β = 2)."""
    beta, j, d = 3.0, 8, 1000
    one_hot = br.log_moment_upper(j, 1.0, beta)
    s_p2 = br.ball_log_moment(j, 1.0, beta, d, 2.0)
    assert one_hot <= s_p2 <= 1.005 * one_hot
    s_p3 = br.ball_log_moment(j, 1.0, beta, d, 3.0)
    r = 0.18
    mixed = (br.log_moment_upper(j, (1 - r) ** (1 / 3), beta)
             + (d - 1) * br.log_moment_upper(j, (r / (d - 1)) ** (1 / 3), beta))
    assert mixed <= s_p3 <= 1.01 * mixed
    spreads = [k * br.log_moment_upper(j, k ** (-1 / 3), beta) for k in (1, 10, 100, 1000)]
    assert mixed > 1.05 * max(spreads)
