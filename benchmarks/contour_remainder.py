r"""C3 of the contour Base (issue 35 item 1): the per-coordinate remainder at |y| ≤ Y, enclosed in interval arithmetic
(docs/accounting.md, "C3: the remainder at |y| ≤ Y, enclosed"; ``python benchmarks/contour_remainder.py``).

Units: GG(β, 1) noise, f(x) = e^{−|x|^β/β}/Z, 2 < β ≤ 3 (the lemmas' setting; run at β = 2.5), p = 2. One coordinate
shifted by a has the loss ℓ_a(x) = (|x|^β − |x − a|^β)/β and, at z = c + iy (c > 1),

    φ(z; a) = ∫ f(x)e^{zℓ_a(x)} dx,   r(z; a) = log φ(z; a) − I_β a² z(z − 1)/2   (principal log),

I_β = β^{(2β−2)/β}Γ(2 − 1/β)/Γ(1/β). For a cell [a_lo, a_hi] × [y_lo, y_hi] (a_lo > 0, y ≥ 0: φ(c − iy) is the
conjugate of φ(c + iy)) :func:`cell_bound` returns ρ ≥ sup |r|/a² and λ ≥ sup log|φ|/a² over the cell:

* :func:`enclose`: φ and its derivatives in z and a up to second order, in the symmetric form x = a/2 ± v (Lemma Z1,
  where every integrand's sensitivity to a and y is O(a): the plain form's O(1) terms cancel only after
  integration, and ball arithmetic would carry them), by ``acb.integral`` with a and y as balls: the integrand,
  evaluated on balls, contains its value at every point of the cell, and so does Arb's quadrature bound, so the
  result contains the integral at every (a, y) of the cell; on the analytic pieces v = (a/2)u, u ∈ (0, 1), and
  v = a/2 + s, s ∈ (0, S), the tail beyond by Lemma D0 (:func:`contour_decay.tail_integral`) on a majorant;
* the second-order form about the centre (Lemma Z2, :func:`cell_bound`): the terms evaluated on balls are second
  or third order in the cell's size, so the bound tends to |r|/a² at the centre as the cell shrinks;
* :func:`row_bound`: branch and bound over a-cells for one y-row (the cell of the largest bound is split until it
  is within a tolerance of the largest value seen, or a budget is spent); the final cells cover the row;
* :func:`small_bound`: a ∈ (0, a_min] by Taylor in a (Lemma Z3: φ is even in a and C⁴, ∂_a⁴φ enclosed by
  :func:`enclose_phi4` over [0, a_min] × the row), so |r| ≤ a⁴·(constants), the true order.

Everything is an arb/acb ball (python-flint, a dev dependency; the library does not import it), so quadrature error
and round-off are inside. The command prints ρ and λ per (c, y-row), the sup over a ∈ [a_min, a_0] (cells) and over
a ∈ (0, a_min] (Lemma Z3); ``--out FILE`` writes the rows as JSON with ρ, λ the sup over a ∈ (0, a_0]
(:func:`write_rows`, read back by :func:`load_rows`); ``--compare`` checks the rows against
:func:`base_ceiling._rho`'s sampled values (table 5's grid): every enclosure must be ≥ the sample.
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import sys
import time
from typing import List, Optional, Sequence, Tuple

import numpy as np
from flint import acb, arb

sys.path.insert(0, os.path.dirname(__file__))
from contour_decay import _Ball, _down, _up, tail_integral  # noqa: E402

#: acb.integral's goal (relative and absolute): the balls stay rigorous at any goal, a looser one stops sooner
QUAD_TOL = 1e-8


def _cut(beta: float) -> float:
    """S with S^β/β ≥ 70 (the tails beyond are ≲ e^{−70}·(polynomial) by Lemma D0)."""
    return (70.0 * beta) ** (1.0 / beta)


def fisher(beta: float) -> arb:
    """I_β = β^{(2β−2)/β}Γ(2 − 1/β)/Γ(1/β) as a ball (the closed form of :func:`opacus_gg.accountants.fisher`)."""
    b = arb(beta)
    return b ** ((2 * b - 2) / b) * (2 - 1 / b).gamma() / (1 / b).gamma()


def _disc(radius: arb) -> acb:
    """A complex ball (a rectangle) containing the disc of centre 0 and the given radius's upper end."""
    r = _up(radius)
    return acb(arb(0, r), arb(0, r))


def enclose(beta: float, c: float, a: arb, y: arb, kinds: Sequence[str] = ("phi", "z", "a")) -> List[acb]:
    r"""[φ, φ_z, φ_a, φ_zz, φ_za, φ_aa] (those of ``kinds``: "phi", "z", "a", "zz", "za", "aa") at z = c + iy as balls
    containing their values at every (a, y) of the balls a, y (a > 0).

    The symmetric form (x = a/2 ± v; Lemma Z1 in the docs): with P = v + a/2, N = |v − a/2|, σ = sgn(v − a/2),
    M = (P^β + N^β)/(2β), ℓ = (P^β − N^β)/β (the loss at x = a/2 + v; −ℓ at a/2 − v) and w = z − ½,

        φ = (2/Z)∫_0^∞ e^{−M}cosh(wℓ) dv,   φ_z = (2/Z)∫_0^∞ e^{−M}ℓ sinh(wℓ) dv,
        φ_a = (2/Z)∫_0^∞ e^{−M}(w sinh(wℓ)·∂_aℓ − cosh(wℓ)·∂_aM) dv,
        φ_zz = (2/Z)∫_0^∞ e^{−M}ℓ² cosh(wℓ) dv,
        φ_za = (2/Z)∫_0^∞ e^{−M}((sinh(wℓ) + wℓ cosh(wℓ))·∂_aℓ − ℓ sinh(wℓ)·∂_aM) dv,
        φ_aa = (2/Z)∫_0^∞ e^{−M}(cosh(wℓ)(w²(∂_aℓ)² + (∂_aM)² − ∂_a²M) + w sinh(wℓ)(∂_a²ℓ − 2∂_aℓ∂_aM)) dv,
        ∂_aℓ = (P^{β−1} + σN^{β−1})/2,  ∂_aM = (P^{β−1} − σN^{β−1})/4,
        ∂_a²ℓ = (β − 1)(P^{β−2} − N^{β−2})/4,  ∂_a²M = (β − 1)(P^{β−2} + N^{β−2})/8,

    in which every integrand's sensitivity to a and y is O(a), so the balls' widths do not carry the O(1) terms that
    cancel in the plain form. Pieces: v = (a/2)u, u ∈ (0, 1) (dv = (a/2)du) and v = a/2 + s, s ∈ (0, S), analytic
    inside; the tail v > a/2 + S by Lemma D0 on ∫_S^∞ of the majorants (a_+ = a's upper end, w_+ = |w|'s):
    |cosh(wℓ)|, |sinh(wℓ)| ≤ e^{(c−½)|ℓ|}, |ℓ| ≤ a_+(v + a_+)^{β−1}, M ≥ v^β/β (convexity), |∂_aℓ|, 2|∂_aM| ≤
    (v + a_+)^{β−1}: each ≤ (2/Z)K(v + a_+)^{p}e^{−v^β/β + (c−½)a_+(v+a_+)^{β−1}} with (K, p) = (1, β − 1), (a_+, β − 1),
    (w_+ + ½, β − 1), (a_+², 2β − 2), (1 + a_+/2 + w_+a_+, 2β − 2), (w_+² + w_+ + ¼ + (β − 1)(w_+ + 1)/4, 2β − 2)
    (|∂_a²ℓ|, |∂_a²M| ≤ (β − 1)(v + a_+)^{β−2}/4; v + a_+ ≥ 1: lower powers are below higher ones)."""
    g = _Ball(beta, c, 0.0)  # β, log Z and the principal-branch power; its a_0 (the tilt's) is not used here
    b, b1 = g.b, g.b1
    S = _cut(beta)
    w = acb(arb(c) - arb(0.5), y)
    two_z = 2 / g.lz.exp()

    def pw(x, e, an):
        return g.pw(x, e, an)

    def integrand(kind: str, P: acb, N: acb, sigma: int, an: bool) -> acb:
        pb, nb = pw(P, b, an), pw(N, b, an)
        M, ell = (pb + nb) / (2 * b), (pb - nb) / b
        e = (-M).exp()
        if kind == "phi":
            return e * (w * ell).cosh()
        if kind == "z":
            return e * ell * (w * ell).sinh()
        if kind == "zz":
            return e * ell * ell * (w * ell).cosh()
        p1, n1 = pw(P, b1, an), sigma * pw(N, b1, an)
        d_ell, d_m = (p1 + n1) / 2, (p1 - n1) / 4
        sh, ch = (w * ell).sinh(), (w * ell).cosh()
        if kind == "a":
            return e * (w * sh * d_ell - ch * d_m)
        if kind == "za":
            return e * ((sh + w * ell * ch) * d_ell - ell * sh * d_m)
        p2, n2 = pw(P, b - 2, an), pw(N, b - 2, an)  # "aa"
        dd_ell, dd_m = b1 * (p2 - n2) / 4, b1 * (p2 + n2) / 8
        return e * (ch * (w * w * d_ell * d_ell + d_m * d_m - dd_m) + w * sh * (dd_ell - 2 * d_ell * d_m))

    a_up = arb(_up(a))
    kappa = _up((arb(c) - arb(0.5)) * a_up)
    w_up = arb(_up(w.abs_upper()))
    out = []
    sizes = {"phi": (arb(1), b1), "z": (a_up, b1), "a": (w_up + arb(0.5), b1), "zz": (a_up * a_up, 2 * b1),
             "za": (1 + a_up / 2 + w_up * a_up, 2 * b1),
             "aa": (w_up * w_up + w_up + arb(0.25) + b1 * (w_up + 1) / 4, 2 * b1)}
    for kind in kinds:
        K, power = sizes[kind]
        inner = acb.integral(lambda u, an: (a / 2) * integrand(kind, (a / 2) * (1 + u), (a / 2) * (1 - u), -1, an),
                             0.0, 1.0, rel_tol=QUAD_TOL, abs_tol=QUAD_TOL)
        outer = acb.integral(lambda t, an: integrand(kind, a + t, t, 1, an), 0.0, S, rel_tol=QUAD_TOL, abs_tol=QUAD_TOL)
        if not (inner.is_finite() and outer.is_finite()):
            raise ArithmeticError(f"contour_remainder: acb.integral failed ({kind}, a {a}, y {y})")

        def major(t, an):
            return K * (-pw(t, b, an) / b + arb(kappa) * pw(t + a_up, b1, an)).exp() * pw(t + a_up, power, an)

        tail = tail_integral(major, S, beta, kappa, _up(a_up), _up(power)).upper()
        out.append(two_z * (inner + outer + _disc(tail)))
    return out


def cell_bound(beta: float, c: float, a_lo: float, a_hi: float, y_lo: float, y_hi: float) -> Tuple[float, float, float]:
    r"""(ρ, λ, ρ_m): ρ ≥ sup |r(c + iy; a)|/a² and λ ≥ sup log|φ(c + iy; a)|/a² over a ∈ [a_lo, a_hi], y ∈ [y_lo, y_hi]
    (0 < a_lo), rounded up (Lemma Z2); ρ_m = |r|/a² at the centre (a_m, y_m) rounded down (a value, so a lower bound
    of the sup). With δa, δy the half-widths, A the a-ball, C the cell:

        |r(a, y)| ≤ |r(a_m, y_m)| + δa·|r_a(a_m, y_m)| + ½δa²·sup_{A×{y_m}}|r_aa| + δy·|r_y(a_m, y_m)|
                    + δaδy·sup_C|r_ya| + ½δy²·sup_C|r_yy|

    (r(a, y_m) − r(a_m, y_m) and r(a, y) − r(a, y_m) by Taylor to second order in a and in y, r_y(a, y_m) −
    r_y(a_m, y_m) by the mean value theorem in a), over a_lo²; r_a = φ_a/φ − I a z(z − 1),
    r_aa = φ_aa/φ − (φ_a/φ)² − I z(z − 1),
    r_y = i(φ_z/φ − I a²(2z − 1)/2), r_ya = i(φ_za/φ − φ_zφ_a/φ² − I a(2z − 1)), r_yy = −(φ_zz/φ − (φ_z/φ)² − I a²).
    The terms that are evaluated on balls are second or third order in the cell's size. ρ = inf where φ's ball over
    the cell meets (−∞, 0] (the principal log is not analytic there: use λ)."""
    if not 0.0 < a_lo <= a_hi or not 0.0 <= y_lo <= y_hi:
        raise ValueError(f"contour_remainder: bad cell a [{a_lo}, {a_hi}], y [{y_lo}, {y_hi}]")
    I = fisher(beta)
    ab, yb = arb(a_lo).union(arb(a_hi)), arb(y_lo).union(arb(y_hi))
    am, ym = arb((a_lo + a_hi) / 2.0), arb((y_lo + y_hi) / 2.0)
    da = arb(max(_up(am - arb(a_lo)), _up(arb(a_hi) - am)))
    dy = arb(max(_up(ym - arb(y_lo)), _up(arb(y_hi) - ym)))
    phi, phi_z, phi_a, phi_zz, phi_za = enclose(beta, c, ab, yb, kinds=("phi", "z", "a", "zz", "za"))
    phi_m, phi_zm, phi_am = enclose(beta, c, am, ym, kinds=("phi", "z", "a"))
    phi_l, phi_al, phi_aal = enclose(beta, c, ab, ym, kinds=("phi", "a", "aa"))
    z, zm = acb(arb(c), yb), acb(arb(c), ym)
    a2 = arb(a_lo) ** 2  # the smallest a² of the cell
    mod = phi_m.abs_upper() + da * phi_a.abs_upper() + dy * phi_z.abs_upper()
    top = _up(mod.log())  # log|φ| ≤ top on the cell: over a², at most top/a_lo² if top ≥ 0, top/a_hi² if not
    lam = arb(top) / (a2 if top >= 0.0 else arb(a_hi) ** 2)
    if not all(p.real > 0 or p.imag > 0 or p.imag < 0 for p in (phi, phi_m, phi_l)):
        return math.inf, _up(lam), 0.0
    i = acb(0, 1)
    r_m = phi_m.log() - I * am * am * zm * (zm - 1) / 2
    r_a = phi_am / phi_m - I * am * zm * (zm - 1)  # at the centre
    g_a = phi_al / phi_l
    r_aa = phi_aal / phi_l - g_a * g_a - I * zm * (zm - 1)  # on A × {y_m}
    r_y = i * (phi_zm / phi_m - I * am * am * (2 * zm - 1) / 2)  # at the centre
    g_z = phi_z / phi
    r_ya = i * (phi_za / phi - g_z * phi_a / phi - I * ab * (2 * z - 1))
    r_yy = -(phi_zz / phi - g_z * g_z - I * ab * ab)
    rho = (r_m.abs_upper() + da * r_a.abs_upper() + da * da * r_aa.abs_upper() / 2 + dy * r_y.abs_upper()
           + da * dy * r_ya.abs_upper() + dy * dy * r_yy.abs_upper() / 2) / a2
    return _up(rho), _up(lam), _down(r_m.abs_lower() / (am * am))


def enclose_phi4(beta: float, c: float, a: arb, y: arb) -> acb:
    r"""A ball containing ∂_a⁴φ(c + iy; a) at every (a, y) of the balls a ⊂ [0, ∞), y (Lemma Z3; a may contain 0).

    With h(x) = |x|^β/β, F = e^{(z−1)h}, G = e^{−zh}: φ(z; a) = (1/Z)∫F(x)G(x − a)dx, and F, G are C² (β ≥ 2), so
    moving two derivatives onto each factor, ∂_a⁴φ = (1/Z)∫F''(x)G''(x − a)dx with F'' = 𝒜(|x|)F, G'' = ℬ(|x|)G,

        𝒜(t) = (z − 1)((β − 1)t^{β−2} + (z − 1)t^{2β−2}),   ℬ(t) = z(z t^{2β−2} − (β − 1)t^{β−2}).

    In the symmetric form of :func:`enclose` (x = a/2 ± v; P = v + a/2, N = |v − a/2|, M, ℓ, w = z − ½ as there):

        ∂_a⁴φ = (1/Z)∫_0^∞ e^{−M}(𝒜(P)ℬ(N)e^{wℓ} + 𝒜(N)ℬ(P)e^{−wℓ}) dv,

    bounded integrands (t^{β−2} only; the fourth derivative under the integral would carry N^{β−4}, not integrable).
    Pieces as :func:`enclose` (v = (a/2)u, with (a/2)^e a ball factor, and v = a/2 + s, s ∈ (0, S)); the tail
    v > a/2 + S by Lemma D0 on the majorant 2K(v + a_+)^{4β−4}e^{−v^β/β + (c−½)a_+(v+a_+)^{β−1}},
    K = |z − 1|(β − 1 + |z − 1|)·|z|(|z| + β − 1) (there P, N ∈ [1, v + a_+]: lower powers below higher ones)."""
    g = _Ball(beta, c, 0.0)
    b, b1, b2 = g.b, g.b1, g.b - 2
    S = _cut(beta)
    z = acb(arb(c), y)
    w = z - arb(0.5)
    zm1 = z - 1
    half = acb(a / 2)
    # (a/2)^e: constants in u (a may hold 0)
    ha = {"b": g.pw(half, b, False), "b2": g.pw(half, b2, False), "bb": g.pw(half, 2 * b1, False)}

    def ab(pb2: acb, pbb: acb) -> Tuple[acb, acb]:
        """(𝒜(t), ℬ(t)) from t^{β−2}, t^{2β−2}."""
        return zm1 * (b1 * pb2 + zm1 * pbb), z * (z * pbb - b1 * pb2)

    def integrand(pbeta: acb, nbeta: acb, p2: acb, pb: acb, n2: acb, nb: acb) -> acb:
        M, ell = (pbeta + nbeta) / (2 * b), (pbeta - nbeta) / b
        (ap, bp), (an_, bn) = ab(p2, pb), ab(n2, nb)
        return (-M).exp() * (ap * bn * (w * ell).exp() + an_ * bp * (-w * ell).exp())

    def inner(u, an):
        up, um = 1 + u, 1 - u
        return (a / 2) * integrand(ha["b"] * g.pw(up, b, an), ha["b"] * g.pw(um, b, an), ha["b2"] * g.pw(up, b2, an),
                                   ha["bb"] * g.pw(up, 2 * b1, an), ha["b2"] * g.pw(um, b2, an),
                                   ha["bb"] * g.pw(um, 2 * b1, an))

    def outer(s, an):
        P = s + a
        return integrand(g.pw(P, b, an), g.pw(s, b, an), g.pw(P, b2, an), g.pw(P, 2 * b1, an), g.pw(s, b2, an),
                         g.pw(s, 2 * b1, an))

    a_up = arb(_up(a))
    kappa = _up((arb(c) - arb(0.5)) * a_up)
    K = 2 * arb(_up(zm1.abs_upper() * (b1 + zm1.abs_upper()) * z.abs_upper() * (z.abs_upper() + b1)))
    parts = acb.integral(inner, 0.0, 1.0, rel_tol=QUAD_TOL, abs_tol=QUAD_TOL)
    parts += acb.integral(outer, 0.0, S, rel_tol=QUAD_TOL, abs_tol=QUAD_TOL)
    if not parts.is_finite():
        raise ArithmeticError(f"contour_remainder: acb.integral failed (phi_aaaa, a {a}, y {y})")

    def major(t, an):
        return K * (-g.pw(t, b, an) / b + arb(kappa) * g.pw(t + a_up, b1, an)).exp() * g.pw(t + a_up, 4 * b1, an)

    tail = tail_integral(major, S, beta, kappa, _up(a_up), _up(4 * b1)).upper()
    return (parts + _disc(tail)) / g.lz.exp()


def small_bound(beta: float, c: float, a_min: float, y_lo: float, y_hi: float, n_a: int = 4,
                n_y: int = 4) -> Tuple[float, float]:
    r"""(ρ_s, λ_s) with |r(c + iy; a)| ≤ a²ρ_s and log|φ(c + iy; a)| ≤ a²λ_s for every a ∈ (0, a_min] and
    y ∈ [y_lo, y_hi], rounded up (Lemma Z3). φ is even in a and C⁴ with φ(0) = 1, ∂_a²φ(0) = I z(z − 1) = 2A, so

        φ = 1 + u,  u = Aa² + R_4,  R_4 = ∫_0^a (a − t)³/6·∂_a⁴φ(t) dt,  |R_4| ≤ D a⁴/24,
        R_4 − A²a⁴/2 = ∫_0^a (a − t)³/6·(∂_a⁴φ(t) − 12A²) dt,  |·| ≤ D' a⁴/24,

    D ≥ sup|∂_a⁴φ|, D' ≥ sup|∂_a⁴φ − 12A²| over [0, a_min] × the row (:func:`enclose_phi4` on ``n_a`` × ``n_y``
    sub-balls). With U = |A|a² + Da⁴/24 ≥ |u| < 1 (principal log = the series), r = log(1 + u) − Aa² is bounded
    both ways, and the smaller is taken:

        |r| ≤ Da⁴/24 + U²/(2(1 − U))                                     (|log(1 + u) − u| ≤ |u|²/(2(1 − |u|)))
        |r| ≤ D'a⁴/24 + |A|a²·Da⁴/24 + (Da⁴/24)²/2 + U³/(3(1 − U))      (u² − A²a⁴ = 2Aa²R_4 + R_4²)

    Each right side over a² increases in a, so a = a_min gives ρ_s (for every sub-ball; the largest is kept).
    λ_s = sup_row Re(A) + ρ_s = I(c² − c − y_lo²)/2 + ρ_s (log|φ| = Re(Aa²) + Re r). Raises where U ≥ 1."""
    if not 0.0 < a_min and 0.0 <= y_lo <= y_hi:
        raise ValueError(f"contour_remainder: bad small-shift row a_min {a_min}, y [{y_lo}, {y_hi}]")
    I = fisher(beta)
    am = arb(a_min)
    a2, a4 = am * am, am ** 4
    a_edges = [a_min * k / n_a for k in range(n_a + 1)]
    y_edges = [y_lo + (y_hi - y_lo) * k / n_y for k in range(n_y)] + [y_hi]
    rho = 0.0
    for y0, y1 in zip(y_edges[:-1], y_edges[1:]):
        yb = arb(y0).union(arb(y1))
        z = acb(arb(c), yb)
        A = I * z * (z - 1) / 2
        if not A.abs_upper() * a2 < 1:
            raise ArithmeticError(f"contour_remainder: Lemma Z3 needs |u| < 1 (c {c}, y [{y0}, {y1}], a_min {a_min})")
        d = dc = arb(0)
        for a0, a1 in zip(a_edges[:-1], a_edges[1:]):
            phi4 = enclose_phi4(beta, c, arb(a0).union(arb(a1)), yb)
            d, dc = d.max(phi4.abs_upper()), dc.max((phi4 - 12 * A * A).abs_upper())
        r4 = d * a4 / 24
        U = A.abs_upper() * a2 + r4
        if not U < 1:
            raise ArithmeticError(f"contour_remainder: Lemma Z3 needs |u| < 1 (c {c}, y [{y0}, {y1}], a_min {a_min})")
        plain = r4 + U * U / (2 * (1 - U))
        cancel = dc * a4 / 24 + A.abs_upper() * a2 * r4 + r4 * r4 / 2 + U ** 3 / (3 * (1 - U))
        rho = max(rho, _up(plain.min(cancel) / a2))
    lam = I * (arb(c) * arb(c) - arb(c) - arb(y_lo) * arb(y_lo)) / 2 + arb(rho)
    return rho, _up(lam)


def a_cells(a0: float, a_min: float, ratio: float) -> List[Tuple[float, float]]:
    """Geometric cells covering [a_min, a0] (ratio ≥ the cells' hi/lo; the ends exact)."""
    n = max(int(math.ceil(math.log(a0 / a_min) / math.log(ratio))), 1)
    e = [a_min * (a0 / a_min) ** (k / n) for k in range(n + 1)]
    e[0], e[-1] = a_min, a0
    return list(zip(e[:-1], e[1:]))


def y_cells(y_max: float, c: float, rel: float, first: float) -> List[Tuple[float, float]]:
    """Rows covering [0, y_max]: width max(``first``, ``rel``·|z|) (r grows like |z|², and so do the mean value
    form's terms)."""
    out, y = [], 0.0
    while y < y_max:
        w = max(first, rel * math.hypot(c, y))
        out.append((y, min(y + w, y_max)))
        y = out[-1][1]
    return out


def row_bound(beta: float, c: float, y_lo: float, y_hi: float, cells: Sequence[Tuple[float, float]],
              tol: float, max_cells: int) -> Tuple[float, float, float, int]:
    """(ρ, λ, ρ_low, cells) over the a-range the a-cells ``cells`` cover, y ∈ [y_lo, y_hi]: branch and bound on the
    cells of :func:`cell_bound` (start: ``cells`` × the row; the cell of the largest ρ is split in four (a at its
    geometric middle, y at its middle; each part keeps the smaller of its own and its parent's bounds, so ρ never
    rises) until that ρ is ≤ (1 + tol)·ρ_low, ρ_low the largest centre value seen (a lower bound of the sup), or
    ``max_cells`` are spent). ρ and λ: the largest over the final cells, which cover the row, so bounds whatever the
    stop."""
    heap, low, n = [], 0.0, 0

    def push(a_lo, a_hi, y0, y1, cap=(math.inf, math.inf)):
        """Bound a cell; a part of a split cell keeps its parent's bounds where they are smaller (they cover it)."""
        nonlocal low, n
        rho, lam, mid = cell_bound(beta, c, a_lo, a_hi, y0, y1)
        low, n = max(low, mid), n + 1
        heapq.heappush(heap, (-min(rho, cap[0]), min(lam, cap[1]), a_lo, a_hi, y0, y1))

    for a_lo, a_hi in cells:
        push(a_lo, a_hi, y_lo, y_hi)
    while n + 4 <= max_cells and -heap[0][0] > (1.0 + tol) * low:
        rho, lam, a_lo, a_hi, y0, y1 = heapq.heappop(heap)
        a_mid, y_mid = math.sqrt(a_lo * a_hi), (y0 + y1) / 2.0
        for a_pair in ((a_lo, a_mid), (a_mid, a_hi)):
            for y_pair in ((y0, y_mid), (y_mid, y1)):
                push(*a_pair, *y_pair, cap=(-rho, lam))
    return -heap[0][0], max(h[1] for h in heap), low, n


def remainder_table(beta: float, cs: Sequence[float], a0: float, a_min: float, ratio: float, fine_ratio: float,
                    fine_below: float, y_max: float, y_rel: float, y_first: float, tol: float, extra: int,
                    small_split: int = 1) -> dict:
    """ρ(c, row) and λ(c, row) over a ∈ [a_min, a0] (:func:`row_bound`; geometric start cells of ``ratio``, of
    ``fine_ratio`` in the rows with |z| ≤ ``fine_below`` (there r is small and the cells must be too; above, the
    integrals oscillate and cost more), ``extra`` cells of splitting per row) and over a ∈ (0, a_min]
    (:func:`small_bound`, ``small_split`` sub-balls in a and in y), printed per row, returned as
    {c: [(y_lo, y_hi, ρ, λ, ρ_low, cells, ρ_small, λ_small), ...]} (ρ, λ: the cells'), with the seconds per c in
    {"seconds": {c: s}}."""
    out, seconds = {}, {}
    coarse, fine = a_cells(a0, a_min, ratio), a_cells(a0, a_min, fine_ratio)
    for c in cs:
        rows, t0 = [], time.perf_counter()
        print(f"beta {beta:g}, c {c:g}, a in [{a_min:g}, {a0:g}] (start cells: ratio {fine_ratio:g} where |z| <="
              f" {fine_below:g}, {ratio:g} above; tol {tol:g}, {extra} more cells per row); a in (0, {a_min:g}]:"
              f" Lemma Z3")
        print("| y-row | rho (enclosed) | rho_low (centres) | lambda (enclosed) | cells | rho_small (Z3) | lambda_small |")
        print("|---|---|---|---|---|---|---|")
        for y_lo, y_hi in y_cells(y_max, c, y_rel, y_first):
            cells = fine if math.hypot(c, y_hi) <= fine_below else coarse
            rho, lam, low, n = row_bound(beta, c, y_lo, y_hi, cells, tol, len(cells) + extra)
            rho_s, lam_s = small_bound(beta, c, a_min, y_lo, y_hi, small_split, small_split)
            rows.append((y_lo, y_hi, rho, lam, low, n, rho_s, lam_s))
            print(f"| [{y_lo:.4g}, {y_hi:.4g}] | {rho:.4g} | {low:.4g} | {lam:.4g} | {n} | {rho_s:.3g} | {lam_s:.4g} |")
            sys.stdout.flush()
        out[c], seconds[c] = rows, time.perf_counter() - t0
        print(f"c {c:g}: {len(rows)} rows, {sum(r[5] for r in rows)} cells, {seconds[c]:.0f} s;"
              f" largest rho/rho_low {max(r[2] / r[4] for r in rows if r[4] > 0):.3g};"
              f" largest rho_small/rho {max(r[6] / r[2] for r in rows):.3g}")
    out["seconds"] = seconds
    return out


def write_rows(path: str, table: dict, meta: dict) -> None:
    r"""Write the rows as JSON: ``meta`` (the run's parameters) and per c a list of rows
    {y_lo, y_hi, rho, lam, rho_low, cells, rho_cells, lam_cells, rho_small, lam_small}, where rho ≥ |r(c + iy; a)|/a²
    and lam ≥ log|φ(c + iy; a)|/a² for every a ∈ (0, a_0] and y ∈ [y_lo, y_hi] (and −y: conjugates): the larger of
    the cells' (a ∈ [a_min, a_0], Lemma Z2) and Lemma Z3's (a ∈ (0, a_min]); floats rounded up, ``Infinity`` where a
    cell's φ met the log's cut (ρ only). rho_low: the largest centre value |r|/a² (a lower bound of the sup)."""
    import json

    tables = []
    for c, rows in table.items():
        if c == "seconds":
            continue
        tables.append({"c": c, "seconds": round(table["seconds"][c], 1), "rows": [
            {"y_lo": y_lo, "y_hi": y_hi, "rho": max(rho, rho_s), "lam": max(lam, lam_s), "rho_low": low, "cells": n,
             "rho_cells": rho, "lam_cells": lam, "rho_small": rho_s, "lam_small": lam_s}
            for y_lo, y_hi, rho, lam, low, n, rho_s, lam_s in rows]})
    with open(path, "w") as fh:
        json.dump({**meta, "tables": tables}, fh, indent=1)
        fh.write("\n")


def load_rows(path: str) -> Tuple[dict, dict]:
    """(meta, {c: rows}) from :func:`write_rows`'s file, checked: the rows of each c cover [0, y_max] in order with
    no gap, and rho, lam are the larger of their parts (raises otherwise)."""
    import json

    with open(path) as fh:
        data = json.load(fh)
    out = {}
    for t in data.pop("tables"):
        rows = t["rows"]
        ok = rows[0]["y_lo"] == 0.0 and rows[-1]["y_hi"] == data["y_max"]
        ok = ok and all(p["y_hi"] == q["y_lo"] for p, q in zip(rows, rows[1:]))
        ok = ok and all(r["rho"] >= max(r["rho_cells"], r["rho_small"]) and r["lam"] >= max(r["lam_cells"],
                        r["lam_small"]) for r in rows)
        if not ok:
            raise ValueError(f"contour_remainder: rows of c {t['c']} in {path} do not cover [0, y_max] as written")
        out[t["c"]] = rows
    return data, out


def compare(beta: float, table: dict, a0: float, n_a: int, n_y: int) -> float:
    """The smallest enclosed/sampled ρ over the table (≥ 1 wherever the enclosure holds; raises otherwise), against
    :func:`base_ceiling._rho` (table 5's sampled ρ, λ at a ∈ a0·{1/n_a, …, 1}, y on a grid): NOT a bound, a check."""
    import base_ceiling

    worst = math.inf
    for c, rows in table.items():
        if c == "seconds":
            continue
        ys = np.linspace(0.0, rows[-1][1], n_y)
        rho_s, lam_s = base_ceiling._rho(beta, a0, c, ys, n_a)
        for y, r, lm in zip(ys, rho_s, lam_s):
            for y_lo, y_hi, rho, lam, *_ in rows:
                if y_lo <= y <= y_hi:
                    if not (rho >= r and lam >= lm):
                        raise AssertionError(f"enclosure below the sample at c {c}, y {y}: {rho} < {r} or {lam} < {lm}")
                    worst = min(worst, rho / r if r > 0 else math.inf)
        print(f"c {c:g}: sampled rho max {rho_s.max():.4g}, enclosed max {max(r[2] for r in rows):.4g}")
    print(f"smallest enclosed/sampled rho: {worst:.4g}")
    return worst


def measure_order(beta: float, zs: Sequence[complex], shifts: Sequence[float]) -> None:
    r"""Print |r(z; a)|/a⁴ at each z and a (mpmath, 35 digits, the symmetric form φ = (2/Z)∫_0^∞ e^{−M}cosh(wℓ)dv)
    beside the a → 0 limit ∂_a⁴φ(0)/24 − A²/2 (Lemma Z3; A = I_β z(z − 1)/2 and, with m_p = E|X|^p,
    ∂_a⁴φ(0) = (z(z − 1))²m_{4β−4} + z(z − 1)((β − 1)m_{3β−4} − (β − 1)²m_{2β−4})): the true order in a, a
    measurement, NOT a bound."""
    import mpmath as mp

    with mp.workdps(35):
        b = mp.mpf(beta)
        Z = 2 * b ** (1 / b) * mp.gamma(1 + 1 / b)
        fi = b ** ((2 * b - 2) / b) * mp.gamma(2 - 1 / b) / mp.gamma(1 / b)

        def mom(p):
            return b ** (p / b) * mp.gamma((p + 1) / b) / mp.gamma(1 / b)

        def phi(z, a):
            w = z - mp.mpf(1) / 2

            def F(v):
                P, N = v + a / 2, abs(v - a / 2)
                return mp.exp(-(P ** b + N ** b) / (2 * b)) * mp.cosh(w * (P ** b - N ** b) / b)

            return 2 / Z * mp.quad(F, [0, a / 2, a / 2 + 1, a / 2 + 3, a / 2 + 6, mp.inf])

        print("| z | |r|/a^4 at a = " + ", ".join(f"{a:g}" for a in shifts) + " | limit |")
        print("|---|---|---|")
        for z in zs:
            z = mp.mpc(z)
            zz = z * (z - 1)
            lim = (zz ** 2 * mom(4 * b - 4) + zz * ((b - 1) * mom(3 * b - 4) - (b - 1) ** 2 * mom(2 * b - 4))) / 24
            lim -= (fi * zz / 2) ** 2 / 2
            vals = [abs(mp.log(phi(z, mp.mpf(a))) - fi * mp.mpf(a) ** 2 * zz / 2) / mp.mpf(a) ** 4 for a in shifts]
            print(f"| {complex(z)} | " + ", ".join(mp.nstr(v, 5) for v in vals) + f" | {mp.nstr(abs(lim), 5)} |")


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beta", type=float, default=2.5)
    ap.add_argument("--c", type=float, nargs="+", default=[1.2, 2.0, 4.0])
    ap.add_argument("--a0", type=float, default=0.1)
    ap.add_argument("--a-min", type=float, default=0.1 / 16)
    ap.add_argument("--a-ratio", type=float, default=1.25, help="start cells' ratio")
    ap.add_argument("--fine-ratio", type=float, default=1.05, help="start cells' ratio in the rows of |z| <= fine-below")
    ap.add_argument("--fine-below", type=float, default=4.0)
    ap.add_argument("--y-max", type=float, default=40.0)
    ap.add_argument("--y-rel", type=float, default=0.1, help="row width over |z|")
    ap.add_argument("--y-first", type=float, default=0.2)
    ap.add_argument("--tol", type=float, default=0.15, help="stop splitting at rho <= (1 + tol) rho_low")
    ap.add_argument("--extra", type=int, default=16, help="cells of splitting per row")
    ap.add_argument("--small-split", type=int, default=1, help="Lemma Z3's sub-balls in a and in y per row")
    ap.add_argument("--compare", action="store_true", help="check against base_ceiling's sampled rho, lambda")
    ap.add_argument("--out", help="write the rows (a in (0, a0]) to this JSON file")
    ap.add_argument("--order", action="store_true", help="measure |r|/a^4 as a -> 0 (mpmath; Lemma Z3's order) only")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.order:
        measure_order(args.beta, (1.2, 2.0, 4.0, 2 + 5j, 2 + 20j, 1.2 + 40j), (1e-3, 3e-3, 1e-2, 3e-2, 1e-1))
        print(f"({time.perf_counter() - t0:.0f} s)")
        return
    table = remainder_table(args.beta, args.c, args.a0, args.a_min, args.a_ratio, args.fine_ratio, args.fine_below,
                            args.y_max, args.y_rel, args.y_first, args.tol, args.extra, args.small_split)
    if args.compare:
        compare(args.beta, table, args.a0, 4, 161)
    if args.out:
        meta = {k: getattr(args, k) for k in ("beta", "a0", "a_min", "y_max", "a_ratio", "fine_ratio", "fine_below",
                                              "y_rel", "y_first", "tol", "extra", "small_split")}
        write_rows(args.out, table, {"command": "python3 benchmarks/contour_remainder.py " + " ".join(
            sys.argv[1:] if argv is None else argv), **meta})
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
