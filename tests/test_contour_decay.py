"""benchmarks/contour_decay.py (C4 of the contour Base, issue 35 item 1): each lemma's inequality against
quadrature that shares no code with the bound (docs/accounting.md, "C4: a decay bound for the contour Base")."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate

from benchmark_modules import load_benchmark

cd = load_benchmark("contour_decay")
bc = load_benchmark("base_ceiling")

A0 = 0.1
#: (a, y) points of the per-lemma checks: small, middle and large w = a·y, coordinates at and below the cap
POINTS = [(a, y) for a in (0.1, 0.05, 0.0125) for y in (2.0, 8.0, 30.0, 120.0, 400.0)]



@pytest.fixture(scope="module", params=[(2.5, 1.2), (3.0, 4.0), (3.0, 2.0), (2.2, 2.0)],
                ids=lambda p: f"beta{p[0]}-c{p[1]}")
def consts(request):
    beta, c = request.param
    return cd.decay_constants(beta, c, A0)


def _tilted(beta, c, a, moments=True):
    """φ(c; a) and, with ``moments``, E_{P_c}ℓ, Var, E|ℓ − m|³, Eℓ² under the tilted law, by scipy quad split at the
    kinks (independent of both the bounds and :func:`contour_decay.psi_sampled`)."""
    lz = cd._log_z(beta)

    def ell(x):
        return (abs(x) ** beta - abs(x - a) ** beta) / beta

    def g(x):
        return math.exp(-abs(x) ** beta / beta - lz + c * ell(x))

    pieces = ((-12.0, 0.0), (0.0, a), (a, 12.0))

    def q(fun):
        return sum(integrate.quad(fun, lo, hi, epsabs=1e-14, epsrel=1e-12, limit=200)[0] for lo, hi in pieces)

    phi = q(g)
    if not moments:
        return phi
    m = q(lambda x: g(x) * ell(x)) / phi
    var = q(lambda x: g(x) * (ell(x) - m) ** 2) / phi
    third = q(lambda x: g(x) * abs(ell(x) - m) ** 3) / phi
    second = q(lambda x: g(x) * ell(x) ** 2) / phi
    return phi, m, var, third, second


def test_sampled_characteristic_function_is_base_ceilings_complex_moment():
    # ψ·φ(c) (composite Gauss–Legendre) against base_ceiling.phi_minus_one (scipy quad of f·expm1(zℓ)): no shared code
    for beta, c, a, y in ((2.5, 1.2, 0.1, 5.0), (3.0, 4.0, 0.05, 40.0), (3.0, 2.0, 0.01, 200.0)):
        psi = cd.psi_sampled(c, a, beta, [0.0, y])
        phi_c = 1.0 + bc.phi_minus_one(complex(c, 0.0), a, beta)[0].real
        w, err = bc.phi_minus_one(complex(c, y), a, beta)
        assert psi[0] == pytest.approx(1.0, abs=1e-13)
        assert abs(psi[1] * phi_c - (1.0 + w)) <= 1e-9 + 10 * err


def test_sinc_lemma_and_the_non_increasing_majorant():
    v = np.concatenate([np.linspace(1e-4, 30.0, 300001), np.geomspace(30.0, 1e6, 20001)])
    sinc = np.sin(v) / v
    # Lemma D4's sinc lemma: 1 − sinc² v ≥ v²/(3 + v²) (at small v in the form sinc² ≤ 3/(3 + v²))
    assert np.all(sinc ** 2 * (3.0 + v * v) <= 3.0 * (1.0 + 1e-12))
    # ... and its proof for v² = u ≤ 11/2: (3 + u)(1 − u/6 + u²/120)² = 3 + u²p(u), p increasing, p(11/2) < 0 (exact)
    u = [Fraction(k, 8) for k in range(45)]
    p = [Fraction(-1, 5) + Fraction(13, 360) * x - Fraction(37, 14400) * x ** 2 + x ** 3 / 14400 for x in u]
    assert all((3 + x) * (1 - x / 6 + x ** 2 / 120) ** 2 == 3 + x * x * px for x, px in zip(u, p))
    assert 74 ** 2 - 12 * 520 < 0 and p[44] < 0 and u[44] == Fraction(11, 2)
    # σ as balls: its upper end is above |sinc|, its lower end never rises (σ is non-increasing), on a subgrid
    sub = v[::10]
    balls = [cd.sinc_majorant(float(x)) for x in sub]
    assert np.all(np.array([cd._up(b) for b in balls]) >= np.abs(sinc[::10]))
    lows = np.array([cd._down(b) for b in balls])
    ups = np.array([cd._up(b) for b in balls])
    assert np.all(lows[1:] <= ups[:-1])
    # SINC_LOBE is above the first side lobe's maximum (tan v = v at 4.4934…)
    assert cd.SINC_LOBE >= np.abs(sinc[v >= math.pi]).max()


def test_log_moment_rate_is_above_the_real_order_moments(consts):
    k = consts
    for a in (0.1, 0.06, 0.02):
        phi = _tilted(k.beta, k.c, a, moments=False)
        assert math.log(phi) <= k.lam * a * a
    assert cd.log_moment_rate(1.5, 3.0, A0) == pytest.approx(0.5 * cd.log_moment_rate(2.0, 3.0, A0))


def test_taylor_rates_bound_the_tilted_moments(consts):
    # Lemma D3: Var ≥ v·a², E|ℓ − m|³ ≤ t·a³, E ℓ² ≤ T_2·a² (so y²Var/2 ≤ 1 for a|y| ≤ w_T), every a ≤ a_0
    k = consts
    assert 0.0 < k.v < cd.fisher_information(k.beta)
    for a in (0.1, 0.07, 0.03, 0.005):
        _, m, var, third, second = _tilted(k.beta, k.c, a)
        assert var >= k.v * a * a
        assert third <= k.t * a ** 3
        assert second * k.w_taylor ** 2 / 2.0 <= a * a * (1.0 + 1e-12)
        assert 0.0 <= m <= cd.log_moment_rate(k.c + 1.0, k.beta, A0) * a * a


def test_every_minorant_and_spike_bound_is_above_the_sampled_modulus(consts):
    # Lemmas D4–D6 one by one, each parameter choice, against |ψ| by quadrature (not only their minimum)
    k = consts
    for a, y in POINTS:
        s = abs(cd.psi_sampled(k.c, a, k.beta, [y])[0])
        w = a * y
        for delta, h0 in k.stairs:
            v = w * delta / 2.0
            assert s <= 1.0 - h0 * (1.0 - cd._up(cd.sinc_majorant(v))) + 1e-12
            assert s * s <= 1.0 - h0 * h0 * v * v / (3.0 + v * v) + 1e-12
        for mass, tv in k.monotone:
            assert s <= 1.0 - mass + tv / w + 1e-12
            assert s * s <= 1.0 - mass * mass + (tv / w) ** 2 + 1e-12
        for p, kk in k.spikes:
            assert s <= p + kk / w + 1e-12
        if w <= k.w_taylor:
            assert s <= 1.0 - w * w * (k.v / 2.0 - w * k.t / 6.0) + 1e-12


def test_monotone_minorant_is_below_the_density_of_the_scaled_loss():
    # Lemma D5's pointwise claim: the density a·g(x)/ℓ'(x) of ℓ_a/a at u = ℓ_a(x)/a is ≥ h_±(u) for a ≤ a_0
    beta, c = 3.0, 4.0
    lam = cd.log_moment_rate(c, beta, A0)
    lz, b1 = cd._log_z(beta), beta - 1.0
    for a in (0.1, 0.03, 0.002):
        phi = _tilted(beta, c, a, moments=False)
        for x in np.concatenate([np.linspace(-4.0, -0.01, 80), np.linspace(A0 + 0.01, 4.0, 80)]):
            ell = (abs(x) ** beta - abs(x - a) ** beta) / beta
            dell = np.sign(x) * abs(x) ** b1 - np.sign(x - a) * abs(x - a) ** b1
            dens = a * math.exp(-abs(x) ** beta / beta - lz + c * ell) / phi / dell
            u = ell / a
            if u >= A0 ** b1:
                r = u ** (1.0 / b1) + A0
                h = math.exp(-r ** beta / beta - lz - lam * A0 * A0) / (b1 * r ** (beta - 2.0))
                assert dens >= h
            elif u <= -A0 ** b1 / beta:
                r = abs(u) ** (1.0 / b1)
                h = (math.exp(-r ** beta / beta - lz - c * A0 * (r + A0) ** b1 - lam * A0 * A0)
                     / (b1 * (r + A0) ** (beta - 2.0)))
                assert dens >= h


def test_decay_bound_holds_for_shapes_in_the_base_set_and_kappa_below_the_sampled_infimum(consts):
    # Lemma D1: |M_μ(c + iy)| ≤ exp(R'(Λ_c − κ(Y))) for |y| ≥ Y, shapes of the set (R' ≤ 16·a_0²)
    k = consts
    sizes = np.concatenate([A0 * np.geomspace(1 / 32, 1, 7), np.random.default_rng(35).uniform(0.0, A0, 5)])
    for Y in (20.0, 80.0):
        ys = np.array([Y, 1.7 * Y, 5.0 * Y])
        # log|φ(c + iy; a)| per size, sampled once
        logphi = {a: np.log(np.abs(cd.psi_sampled(k.c, a, k.beta, ys))) + math.log(_tilted(k.beta, k.c, a, False))
                  for a in sizes}
        kap = cd.kappa_lower(k, Y)
        inf_sampled = min(float(np.min(-np.log(np.abs(cd.psi_sampled(k.c, a, k.beta, ys))) / (a * a)))
                          for a in sizes[:7])
        assert kap <= inf_sampled
        shapes = [(sizes[6], 16), (sizes[4], 64), (sizes[0], 500)] + [(a, 3) for a in sizes[7:]]
        for a, n in shapes:  # n equal coordinates (the per-unit-mass bound is attained by these)
            assert np.all(n * logphi[a] <= n * a * a * (k.lam - kap))
        mixed = sum(logphi[a] for a in sizes)  # one coordinate of each size
        assert np.all(mixed <= float(np.sum(sizes ** 2)) * (k.lam - kap))


def test_tail_bound_is_above_the_integrated_tail_of_the_worst_shape():
    # 16 coordinates at a_0 (the adversary's shape at large |y|): the tail integral over [Y, 4Y] by quadrature of
    # the sampled |M|, against the bound over [Y, ∞)
    beta, c, t, Y = 3.0, 2.0, 0.5, 40.0
    k = cd.decay_constants(beta, c, A0)
    ys = np.linspace(Y, 4 * Y, 1201)
    m = np.abs(cd.psi_sampled(c, A0, beta, ys)) ** 16 * _tilted(beta, c, A0, False) ** 16
    integrand = m * math.exp((1 - c) * t) / np.abs((c + 1j * ys) * (c - 1 + 1j * ys))
    sampled = integrate.trapezoid(integrand, ys) / math.pi
    assert sampled <= cd.tail_bound(k, 16 * A0 * A0, t, Y)
    assert cd.tail_bound(k, 16 * A0 * A0, t, Y) < 1e-5  # small: the docs' Y = 40 at R = 16·a_0²


def test_decay_constants_refuse_settings_outside_the_lemmas():
    with pytest.raises(ValueError):
        cd.decay_constants(2.0, 2.0, A0)
    with pytest.raises(ValueError):
        cd.decay_constants(3.5, 2.0, A0)
    with pytest.raises(ValueError):
        cd.log_moment_rate(1.0, 3.0, A0)


def _scipy(fun, lo, hi):
    """(∫_lo^hi fun, quad's error estimate) by scipy quad: the reference the interval enclosures must contain."""
    val, err = integrate.quad(fun, lo, hi, epsabs=1e-15, epsrel=1e-13, limit=400)
    return val, err


def _contains(ball, value, err):
    """The ball, widened by the reference's own error (its estimate + 10⁻¹² relative), contains the reference."""
    lo, hi = cd._down(ball), cd._up(ball)
    tol = err + 1e-12 * abs(value)
    return lo - tol <= value <= hi + tol


@pytest.mark.parametrize("beta,c", [(2.5, 1.2), (3.0, 4.0), (2.2, 2.0)])  # 2.2: powers at 0 by _Ball.pw's disc
def test_every_interval_enclosure_contains_the_quadrature_value_and_is_narrow(beta, c):
    # Lemmas D3 and D6's integrals by acb.integral + Lemma D0, against scipy quad of the same integrals written
    # from their definitions over ℝ (abs and sign, no split by side); width ≤ 10⁻⁸ relative
    lz, b1, inf = cd._log_z(beta), beta - 1.0, 30.0  # e^{−30^β/β}: the references' tails are far below 10⁻³⁰⁰

    def f(x):
        return math.exp(-abs(x) ** beta / beta - lz)

    def om(x):
        return 1.0 if x >= A0 / 2 else math.exp(-c * A0 * (abs(x) + A0) ** b1)

    def tilt(x):
        return math.exp(c * A0 * (abs(x) + A0) ** b1) if x > 0 else 1.0

    cuts = (-inf, 0.0, A0 / 2, inf)
    ref = {
        "A": lambda x: f(x) * om(x) * abs(x) ** (2 * b1),
        "B": lambda x: f(x) * om(x) * math.copysign(abs(x) ** b1, x),
        "C": lambda x: f(x) * om(x),
        "J": lambda x: f(x) * (abs(x) + A0) ** (2 * beta - 4),
        "T2": lambda x: f(x) * (abs(x) + A0) ** (2 * b1) * tilt(x),
        "T3": lambda x: f(x) * (abs(x) + A0) ** (3 * b1) * tilt(x),
    }
    got = cd.taylor_integrals(beta, c, A0)
    for name, fun in ref.items():
        parts = [_scipy(fun, lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:])]
        val, err = sum(p[0] for p in parts), sum(p[1] for p in parts)
        assert _contains(got[name], val, err), (name, got[name], val)
        assert float(got[name].rad()) <= 1e-8 * abs(val), (name, got[name])

    def gh(x):
        return f(x) * math.exp(c * A0 * max(x, 0.0) ** b1)

    for b in (0.01, 0.2, 2.0):
        p, k = cd.spike_integrals(beta, c, A0, b)
        xp = A0 + b
        pv, pe = map(sum, zip(_scipy(gh, -b, 0.0), _scipy(gh, 0.0, xp)))
        k1 = _scipy(lambda x: gh(x) * (x ** b1 / (b1 * (x - A0) ** (beta - 2)) + (beta - 2) / (b1 * (x - A0) ** b1)),
                    xp, inf)
        k2 = _scipy(lambda t: f(t) * (t / b1 + (beta - 2) / (b1 * t ** b1)), b, inf)
        kv = (gh(xp) / (b1 * b ** (beta - 2)) + k1[0] + f(b) / (b1 * b ** (beta - 2)) + k2[0] + 2 * c * A0)
        assert _contains(p, pv, pe) and float(p.rad()) <= 1e-8 * pv
        assert _contains(k, kv, k1[1] + k2[1]) and float(k.rad()) <= 1e-8 * kv


def test_tail_lemma_encloses_the_tail_and_a_wrong_tail_bound_is_caught(monkeypatch):
    # Lemma D0 with the cut inside the mass (B = 2.5, 3: tails of 10⁻³–10⁻⁶ of the integral): the enclosure
    # with Lemma D0's tail contains scipy's ∫_0^∞; halving the tail bound (a wrong lemma) makes it miss
    beta, c = 3.0, 2.0
    g = cd._Ball(beta, c, A0)
    lz, b1 = cd._log_z(beta), beta - 1.0

    def F(t, an):  # T_3's tilted side: κ = c a_0, s = a_0, p = 3(β − 1)
        return g.f(t, an) * g.pw(t + g.a0, 3 * g.b1, an) * g.tilt(t, an)

    def ref(t):
        return math.exp(-t ** beta / beta - lz + c * A0 * (t + A0) ** b1) * (t + A0) ** (3 * b1)

    val, err = _scipy(ref, 0.0, 30.0)
    tails = {}
    for B in (2.5, 3.0):
        ball = cd.integral(F, (0.0, B), (beta, c * A0, A0, 3 * b1))
        assert _contains(ball, val, err)
        tail, _ = _scipy(ref, B, 30.0)
        tails[B] = tail
        bound = cd._up(cd.tail_integral(F, B, beta, c * A0, A0, 3 * b1))
        assert tail <= bound <= 3.0 * tail  # above the tail, and not uselessly so
    real_tail = cd.tail_integral

    def half(*args):
        return real_tail(*args) / 2

    monkeypatch.setattr(cd, "tail_integral", half)
    for B in (2.5, 3.0):
        assert not _contains(cd.integral(F, (0.0, B), (beta, c * A0, A0, 3 * b1)), val, err)
    # Lemma D0 refuses a cut where its rate L is not positive
    monkeypatch.setattr(cd, "tail_integral", real_tail)
    with pytest.raises(ArithmeticError):
        cd.tail_integral(F, 0.3, beta, c * A0, A0, 3 * b1)


def test_the_library_does_not_import_flint():
    # python-flint is a dev dependency of these research tools only: no module of opacus_gg/ imports it (sympy, under
    # torch, may load it on its own where it is installed, so sys.modules cannot tell)
    import ast

    for path in (Path(__file__).resolve().parents[1] / "opacus_gg").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "flint" or n.startswith("flint.") for n in names), path
