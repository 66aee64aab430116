r"""C4 of the contour Base (issue 35 item 1): a decay bound on |M_μ(c + iy)| uniform over the Base set
(docs/accounting.md, "C4: a decay bound for the contour Base"; ``python benchmarks/contour_decay.py``).

Units: GG(β, 1) noise, f(x) = e^{−|x|^β/β}/Z, 2 < β ≤ 3, p = 2. One coordinate shifted by a ∈ (0, a_0] has the loss
ℓ_a(x) = (|x|^β − |x − a|^β)/β (strictly increasing in x, ℓ_a(a/2) = 0) and, for c > 1,

    φ(c + iy; a) = E_Q[e^{(c+iy)ℓ_a}] = φ(c; a)·ψ_{c,a}(y),   ψ_{c,a}(y) = E_{P_c}[e^{iyℓ_a(X)}],

P_c the tilted law of density g = f·e^{cℓ_a}/φ(c; a) (so ψ is a characteristic function). The Base set B(R, a_0):
every μ with 0 ≤ μ_i ≤ a_0, Σμ_i² = R' ≤ R, any number of coordinates; M_μ(z) = Π_i φ(z; μ_i).

* :func:`decay_constants` — the constants of the per-coordinate lemmas D2–D6 for (β, c, a_0): Λ_c (the library's
  enclosed log-moment rates), the Taylor rates (v, t, T_2), the staircase and monotone minorants of the density of
  ℓ_a/a and the integration-by-parts constants. :func:`psi_bound` — D(w) ≥ |ψ_{c,a}(y)| for every a ≤ a_0 at
  w = a|y|. :func:`kappa_lower` — κ with |M_μ(c + iy)| ≤ e^{R'(Λ_c − κ)} for every μ in the set and every |y| ≥ Y
  (Lemma D1). :func:`tail_bound` — (1/π)∫_Y^∞ |M_μ| α^{1−c}/|z(z − 1)| dy ≤ this, for every μ of 2-mass R'.
* :func:`psi_sampled` — ψ_{c,a}(y) by composite Gauss–Legendre quadrature (shares no code with the bounds): the
  check of every inequality on a grid (``check``), NOT a bound.

Every bound is computed in interval arithmetic (python-flint's ``arb`` balls, a test/dev dependency only; the
library does not import flint): the 1-D integrals of D3 and D6 (v, t, T_2, P, K) by ``acb.integral`` on pieces
where the integrand is analytic (cut at 0, a_0/2, a_0 + b), their tails beyond a cut by Lemma D0
(:func:`tail_integral`); the closed forms, the staircase and Riemann sums (D4, D5), the per-w bounds E(w), κ and
the tail sum likewise. A ball contains the exact value, so quadrature error and floating-point round-off are
inside it; each float handed on is the ball's end in the safe direction (:func:`_up`, :func:`_down`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from functools import lru_cache
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from flint import acb, arb
from scipy import special

from opacus_gg.accountants import ball_prv
from opacus_gg.accountants.fisher import fisher_information
from opacus_gg.accountants.gg_pair import GGPair

#: max_{v ≥ π}|sin v/v| = |sinc(4.49340945790906)| = 0.2172336282…, rounded up
SINC_LOBE = 0.21724
#: staircase steps Δ (units of the scaled loss ℓ_a/a) and monotone minorants' (u_0, cap) tried; any choice is valid
DELTAS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 3.0, 4.0)
CUTS = (0.0, 0.05, 0.1, 0.2, 0.4, 0.8)
CAPS = (0.1, 0.2, 0.3, 0.5, 1.0, math.inf)
#: spike half-widths b of the integration by parts (Lemma D6)
SPIKES = tuple(np.geomspace(0.01, 2.0, 30))
#: an integrand for acb.integral: F(x, analytic) → acb, analytic on the open piece it is integrated over
Integrand = Callable[[acb, bool], acb]


def _log_z(beta: float) -> float:
    """log Z, Z = ∫ e^{−|x|^β/β} dx = 2β^{1/β}Γ(1 + 1/β) (float: for the sampled ψ only)."""
    return math.log(2.0) + math.log(beta) / beta + float(special.gammaln(1.0 + 1.0 / beta))


def log_moment_rate(c: float, beta: float, a0: float) -> float:
    r"""Λ_c ≥ sup_{0<a≤a_0} log φ(c; a)/a² (Lemma D2): the library's enclosed Λ_j (Lemma T3) at integer orders, and
    between them the chord (a ↦ log φ(z; a) is convex in z and 0 at z = 1: for 1 < c < 2, (c − 1)Λ_2)."""
    if not c > 1.0:
        raise ValueError(f"c must be > 1, got {c!r}")
    lo = max(int(math.floor(c)), 1)
    orders = [j for j in (lo, lo + 1) if j >= 2]
    rates = dict(zip(orders, ball_prv.base_log_moment_rates(a0, beta, 2.0, orders)))
    rates[1] = 0.0
    if c == lo:
        return rates[lo]
    # the chord in balls, rounded up
    return _up((arb(lo + 1) - arb(c)) * arb(rates[lo]) + (arb(c) - lo) * arb(rates[lo + 1]))


@dataclasses.dataclass(frozen=True)
class DecayConstants:
    """The constants of Lemmas D2–D6 at (β, c, a_0) (docs: "C4: a decay bound for the contour Base")."""

    beta: float
    c: float
    a0: float
    lam: float  # Λ_c (D2)
    v: float  # Var_{P_c}(ℓ_a) ≥ v·a² (D3)
    t: float  # E_{P_c}|ℓ_a − E ℓ_a|³ ≤ t·a³ (D3)
    w_taylor: float  # D3 holds for a|y| ≤ w_taylor = min(√(2/T_2), 2v/t)
    stairs: Tuple[Tuple[float, float], ...]  # (Δ, H_0): staircase minorants (D4)
    monotone: Tuple[Tuple[float, float], ...]  # (H, TV): capped monotone minorants (D5)
    spikes: Tuple[Tuple[float, float], ...]  # (P, K): |ψ| ≤ P + K/w (D6)


# --- interval enclosures -----------------------------------------------------------------------------------

def _up(x: arb) -> float:
    """The least float ≥ every point of the ball x (raises on a non-finite ball)."""
    if not x.is_finite():
        raise ArithmeticError(f"contour_decay: enclosure is not finite: {x}")
    u = x.upper()
    f = float(u)
    return math.nextafter(f, math.inf) if arb(f) < u else f


def _down(x: arb) -> float:
    """The largest float ≤ every point of the ball x (raises on a non-finite ball)."""
    if not x.is_finite():
        raise ArithmeticError(f"contour_decay: enclosure is not finite: {x}")
    lo = x.lower()
    f = float(lo)
    return math.nextafter(f, -math.inf) if arb(f) > lo else f


def tail_integral(F: Integrand, B: float, beta: float, kappa: float, shift: float, power: float) -> arb:
    r"""Lemma D0: ∫_B^∞ F ∈ [0, F(B)/L] for F = e^{−x^β/β + κ(x + s)^{β−1}}·G(x) > 0 with (log G)' ≤ p/x on [B, ∞)
    (κ, s, p ≥ 0, β > 1), where L = B^{β−1} − κ(β − 1)(B + s)^{β−2} − p/B > 0. Proof: for x ≥ B,
    −(log F)'(x) ≥ x^{β−1}(1 − κ(β − 1)(x + s)^{β−2}/x^{β−1} − p/x^β) ≥ L, both ratios being non-increasing
    ((β − 2)/(x + s) < (β − 1)/x), so F(x) ≤ F(B)e^{−L(x − B)}."""
    b, bt = arb(B), arb(beta)
    L = b ** (bt - 1) - arb(kappa) * (bt - 1) * (b + arb(shift)) ** (bt - 2) - arb(power) / b
    if not L > 0:
        raise ArithmeticError(f"contour_decay: Lemma D0 needs L > 0 at B = {B} (kappa {kappa}, power {power})")
    top = F(acb(b), False).real / L
    if not (top.is_finite() and top >= 0):
        raise ArithmeticError(f"contour_decay: tail integrand not finite and positive at B = {B}")
    return arb(0).union(top)


def integral(F: Integrand, cuts: Sequence[float], tail: Optional[Tuple[float, float, float, float]] = None) -> arb:
    r"""A ball containing ∫_{cuts[0]}^{cuts[−1]} F, plus ∫_{cuts[−1]}^∞ F by Lemma D0 when ``tail`` = (β, κ, s, p):
    ``acb.integral`` on each (cuts[i], cuts[i+1]), where F must be analytic (F gets acb.integral's flag and passes
    it to every pow, so a branch point at an end is detected, not crossed)."""
    total = arb(0)
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        piece = acb.integral(F, lo, hi)
        if not piece.is_finite():
            raise ArithmeticError(f"contour_decay: acb.integral failed on ({lo}, {hi})")
        total += piece.real
    if tail is not None:
        total += tail_integral(F, cuts[-1], *tail)
    return total


class _Ball:
    """β, c, a_0 and log Z as balls; f(t) = e^{−t^β/β}/Z and the tilt bound at t on the positive axis."""

    def __init__(self, beta: float, c: float, a0: float) -> None:
        self.b, self.c, self.a0 = arb(beta), arb(c), arb(a0)
        self.b1 = self.b - 1
        self.lz = (2 * self.b ** (1 / self.b) * (1 + 1 / self.b).gamma()).log()  # log Z, Z = 2β^{1/β}Γ(1 + 1/β)

    def pw(self, t: acb, e: arb, an: bool) -> acb:
        """t^e on the principal branch (analytic for Re t > 0). Off the analytic flag, where t's ball holds 0 and e > 0,
        Arb's pow is finite only for half-integer e (it goes through a square root; otherwise exp(e·log t), and
        log 0 is not finite): there the disc |t^e| ≤ |t|_+^e (|exp(e log t)| = |t|^e for real e, and 0^e = 0), so
        β = 2.2 integrates to 0 as β = 2.5 does, and the half-integer results are unchanged."""
        out = t.pow(e, analytic=an)
        if an or out.is_finite() or not e > 0:
            return out
        r = _up(t.abs_upper() ** e)
        return acb(arb(0, r), arb(0, r))

    def f(self, t: acb, an: bool) -> acb:
        """The GG(β, 1) density at ±t."""
        return (-self.pw(t, self.b, an) / self.b - self.lz).exp()

    def tilt(self, t: acb, an: bool) -> acb:
        """e^{c a_0(t + a_0)^{β−1}} (≥ e^{cℓ_a} at x = t > 0, fact i; at x = −t its inverse is ω of D3)."""
        return (self.c * self.a0 * self.pw(t + self.a0, self.b1, an)).exp()


def _cut(beta: float) -> float:
    """Where the integrals of D3/D6 stop and Lemma D0 takes over (the tails beyond are ≲ e^{−180·3^β})."""
    return 3.0 * (60.0 * beta) ** (1.0 / beta) + 1.0


def taylor_integrals(beta: float, c: float, a0: float) -> Dict[str, arb]:
    r"""The integrals of Lemma D3 as balls: A, B, C = ∫fωs², ∫fωs, ∫fω, J = E_f(|X| + a_0)^{2β−4}, T_2, T_3 with
    T_k = ∫ f(|x| + a_0)^{k(β−1)}e^{c a_0(|x|+a_0)^{β−1}[x>0]}; ω(x) = 1 for x ≥ a_0/2, e^{−c a_0(|x| + a_0)^{β−1}}
    below, s(x) = sgn(x)|x|^{β−1}. Per side of 0 in t = |x|; the positive side cut at a_0/2 where ω jumps."""
    g, cut = _Ball(beta, c, a0), _cut(beta)
    b1 = beta - 1.0

    def omega_sides(weight: Integrand, p: float) -> Tuple[arb, arb]:
        """(∫_{x>0}, ∫_{x<0}) of f·ω·weight(|x|), weight's log-derivative ≤ p/t (ω ≤ 1 decreases: Lemma D0, κ = 0)."""
        def damped(t, an):
            return g.f(t, an) * weight(t, an) / g.tilt(t, an)

        pos = (integral(damped, (0.0, a0 / 2.0))
               + integral(lambda t, an: g.f(t, an) * weight(t, an), (a0 / 2.0, cut), (beta, 0.0, 0.0, p)))
        return pos, integral(damped, (0.0, cut), (beta, 0.0, 0.0, p))

    def both_sides(weight: Integrand, p: float, tilted: bool = False) -> arb:
        """∫ f·weight(|x|)·(tilt on x > 0 if ``tilted``) over ℝ (Lemma D0: κ = c a_0, s = a_0 on the tilted side)."""
        pos = integral(lambda t, an: g.f(t, an) * weight(t, an) * (g.tilt(t, an) if tilted else 1), (0.0, cut),
                       (beta, c * a0 if tilted else 0.0, a0, p))
        return pos + integral(lambda t, an: g.f(t, an) * weight(t, an), (0.0, cut), (beta, 0.0, 0.0, p))

    out: Dict[str, arb] = {}
    a_pos, a_neg = omega_sides(lambda t, an: g.pw(t, 2 * g.b1, an), 2.0 * b1)
    s_pos, s_neg = omega_sides(lambda t, an: g.pw(t, g.b1, an), b1)
    c_pos, c_neg = omega_sides(lambda t, an: acb(1), 0.0)
    out["A"], out["B"], out["C"] = a_pos + a_neg, s_pos - s_neg, c_pos + c_neg
    out["J"] = both_sides(lambda t, an: g.pw(t + g.a0, 2 * g.b - 4, an), 2.0 * beta - 4.0)
    for k in (2, 3):
        out[f"T{k}"] = both_sides(lambda t, an, k=k: g.pw(t + g.a0, k * g.b1, an), k * b1, tilted=True)
    return out


def _taylor_rates(beta: float, c: float, a0: float, lam: float, lam_next: float) -> Tuple[float, float, float]:
    r"""(v, t, T_2) of Lemma D3 from :func:`taylor_integrals`: v = e^{−Λ_c a_0²}(√(A − B²/C) − (β − 1)(a_0/2)√J)²
    (rounded down), T_2 (up) and t = (T_3^{1/3} + a_0Λ_{c+1})³ (up); E_{P_c}|ℓ_a|^k ≤ a^k T_k."""
    q = taylor_integrals(beta, c, a0)
    a, lam_b = arb(a0), arb(lam)
    root = (q["A"] - q["B"] ** 2 / q["C"]).sqrt() - (arb(beta) - 1) * a / 2 * q["J"].sqrt()
    if not root > 0:
        raise ArithmeticError(f"contour_decay: no variance bound at beta={beta}, c={c}, a0={a0}")
    v = (-lam_b * a * a).exp() * root * root
    t = (q["T3"] ** (arb(1) / 3) + a * arb(lam_next)) ** 3
    return _down(v), _up(t), _up(q["T2"])


def _staircase(beta: float, c: float, a0: float, lam: float, delta: float) -> float:
    r"""H_0 of Lemma D4 (rounded down): the mass of the staircase minorant of step Δ (pieces of x with equal Δ in the
    scaled loss), positive side x_k = a_0 + (kΔ)^{1/(β−1)}: h_k = f(x_{k+1})e^{−Λ_c a_0²}/((β − 1)x_{k+1}^{β−2});
    negative side t_k = (kΔ)^{1/(β−1)}: h_k = f(t_{k+1})e^{−c a_0(t_{k+1}+a_0)^{β−1} − Λ_c a_0²}/((β − 1)
    (t_{k+1} + a_0)^{β−2}); H_0 = ΣΔ·h_k (every term ≥ 0, so the sum may stop anywhere)."""
    g = _Ball(beta, c, a0)
    b1 = beta - 1.0
    n = int(math.ceil((2.0 * (40.0 * beta) ** (1.0 / beta) + 1.0) ** b1 / delta)) + 1
    d, damp = arb(delta), (-arb(lam) * g.a0 * g.a0).exp()
    total = arb(0)
    for k in range(1, n + 1):
        step = (k * d) ** (1 / g.b1)
        xp = acb(g.a0 + step)
        total += (g.f(xp, False) / (g.b1 * g.pw(xp, g.b - 2, False))).real
        tn = acb(step)
        total += (g.f(tn, False) / g.tilt(tn, False) / (g.b1 * g.pw(tn + g.a0, g.b - 2, False))).real
    return _down(d * damp * total)


def _monotone_minorants(beta: float, c: float, a0: float, lam: float, n: int = 4000) -> Tuple[Tuple[float, float], ...]:
    r"""(H, TV) of Lemma D5 for each (u_0, cap M): the density of ℓ_a/a is ≥ h_+(u) = f(r)e^{−Λ_c a_0²}/((β − 1)
    r^{β−2}), r = u^{1/(β−1)} + a_0, on u ≥ u_0 ∨ a_0^{β−1}, and ≥ h_−(u) = f(r)e^{−c a_0(r + a_0)^{β−1} − Λ_c a_0²}/
    ((β − 1)(r + a_0)^{β−2}), r = |u|^{1/(β−1)}, on u ≤ −(u_0 ∨ a_0^{β−1}/β); both decrease in |u|. h = min(M, h_±) on
    those sets: TV(h) = 2 min(M, h_+(u_0)) + 2 min(M, h_−(−u_0)) (up); H = Σ_k min(M, h(u_k))(u_k − u_{k−1}) on the
    float grid u_k, a lower Riemann sum (down)."""
    g = _Ball(beta, c, a0)
    b1 = beta - 1.0
    u_max = (2.0 * (40.0 * beta) ** (1.0 / beta) + 1.0) ** b1
    damp = (-arb(lam) * g.a0 * g.a0).exp()

    def h_plus(u: arb) -> arb:
        r = acb(u ** (1 / g.b1) + g.a0)
        return (g.f(r, False) / (g.b1 * g.pw(r, g.b - 2, False))).real * damp

    def h_minus(u: arb) -> arb:
        r = acb(u ** (1 / g.b1))
        return (g.f(r, False) / g.tilt(r, False) / (g.b1 * g.pw(r + g.a0, g.b - 2, False))).real * damp

    out = []
    start_plus, start_minus = _up(g.a0 ** g.b1), _up(g.a0 ** g.b1 / g.b)  # the minorants hold from these on
    for u0 in CUTS:
        sides = []
        for lo, h in ((max(u0, start_plus), h_plus), (max(u0, start_minus), h_minus)):
            u = [arb(x) for x in np.linspace(lo, u_max, n + 1)]  # floats, exact as balls
            sides.append((h(u[0]), [(h(u[k]), u[k] - u[k - 1]) for k in range(1, n + 1)]))
        for cap in CAPS:
            def capped(x: arb) -> arb:
                return x if math.isinf(cap) else x.min(arb(cap))
            mass = sum((capped(hk) * du for _, cells in sides for hk, du in cells), arb(0))
            tv = 2 * capped(sides[0][0]) + 2 * capped(sides[1][0])
            out.append((_down(mass), _up(tv)))
    return tuple(out)


def spike_integrals(beta: float, c: float, a0: float, b: float) -> Tuple[arb, arb]:
    r"""(P, K) of Lemma D6 at the spike half-width b, as balls: with ĝ(x) = f(x)e^{c a_0 x^{β−1}} (≥ g for x > 0),
    P = ∫_{−b}^{a_0+b} f(x)e^{c a_0 (x_+)^{β−1}} dx ≥ P_c(−b < X < a_0 + b),
    K = ĝ(a_0 + b)/((β − 1)b^{β−2})
      + ∫_{a_0+b}^∞ ĝ(x)[x^{β−1}/((β − 1)(x − a_0)^{β−2}) + (β − 2)/((β − 1)(x − a_0)^{β−1})]dx
      + f(b)/((β − 1)b^{β−2}) + ∫_b^∞ f(t)[t/(β − 1) + (β − 2)/((β − 1)t^{β−1})]dt + 2c·a_0
    (Lemma D0 for the tails: the brackets' log-derivatives are ≤ (β − 1)/x and ≤ 1/t, ĝ grows with κ = c a_0, s = 0)."""
    g, cut = _Ball(beta, c, a0), _cut(beta)
    bb, xp = arb(b), a0 + b  # xp: the float a_0 + b is the cut; the lemma holds for any cut ≥ a_0 + (its b)

    def gh(x, an):
        return g.f(x, an) * (g.c * g.a0 * g.pw(x, g.b1, an)).exp()

    def k_plus(x, an):
        s = x - g.a0
        return gh(x, an) * (g.pw(x, g.b1, an) / (g.b1 * g.pw(s, g.b - 2, an)) + (g.b - 2) / (g.b1 * g.pw(s, g.b1, an)))

    def k_minus(t, an):
        return g.f(t, an) * (t / g.b1 + (g.b - 2) / (g.b1 * g.pw(t, g.b1, an)))

    bx = arb(xp) - g.a0  # ≥ the b of the lemma up to the float rounding of a_0 + b: use the exact gap
    kp = ((gh(acb(arb(xp)), False).real / (g.b1 * bx ** (g.b - 2)))
          + integral(k_plus, (xp, cut), (beta, c * a0, 0.0, beta - 1.0)))
    km = ((g.f(acb(bb), False).real / (g.b1 * bb ** (g.b - 2)))
          + integral(k_minus, (b, cut), (beta, 0.0, 0.0, 1.0)))
    p = integral(lambda t, an: g.f(t, an), (0.0, b)) + integral(gh, (0.0, xp))
    return p, kp + km + 2 * g.c * g.a0


def _spike_constants(beta: float, c: float, a0: float) -> Tuple[Tuple[float, float], ...]:
    """(P, K) of Lemma D6 for each spike half-width b of :data:`SPIKES`, both rounded up."""
    return tuple((_up(p), _up(k)) for p, k in (spike_integrals(beta, c, a0, float(b)) for b in SPIKES))


def decay_constants(beta: float, c: float, a0: float) -> DecayConstants:
    """All constants of Lemmas D2–D6 at (β, c, a_0), 2 < β ≤ 3, c > 1."""
    if not 2.0 < beta <= 3.0:
        raise ValueError(f"the decay lemmas need 2 < beta <= 3, got {beta!r}")
    if not 0.0 < a0 <= 0.5:
        raise ValueError(f"a0 must be in (0, 0.5], got {a0!r}")
    lam = log_moment_rate(c, beta, a0)
    v, t, T2 = _taylor_rates(beta, c, a0, lam, log_moment_rate(c + 1.0, beta, a0))
    return DecayConstants(
        beta=beta, c=c, a0=a0, lam=lam, v=v, t=t, w_taylor=min(math.sqrt(2.0 / T2), 2.0 * v / t),
        stairs=tuple((d, _staircase(beta, c, a0, lam, d)) for d in DELTAS),
        monotone=_monotone_minorants(beta, c, a0, lam), spikes=_spike_constants(beta, c, a0))


def sinc_majorant(v: float) -> arb:
    """σ(v) ≥ |sin v/v| for v > 0, non-increasing: max(sinc v·[v ≤ π], min(SINC_LOBE, 1/v)), as a ball (where v's
    ball meets π the first term is kept: it is ≈ 0 there, and keeping it only raises the upper end)."""
    x = arb(v)
    lobe = (1 / x).min(arb(SINC_LOBE))
    return lobe if x > arb.pi() else x.sinc().max(arb(0)).max(lobe)


def _stair_quadratic(k: DecayConstants, w: arb) -> arb:
    """D4's quadratic form, the best Δ: max_Δ ½·(−log(1 − H_0²v²/(3 + v²))), v = wΔ/2 (over w², it decreases in w)."""
    best = arb(0)
    for d, h in k.stairs:
        v2 = (w * arb(d) / 2) ** 2
        best = best.max(-(-(arb(h) ** 2) * v2 / (3 + v2)).log1p() / 2)
    return best


def log_decay_lower(k: DecayConstants, w: float) -> float:
    r"""E(w) ≤ −log|ψ_{c,a}(y)| at w = a|y| > 0 for every a ≤ a_0 (rounded down); its exact value, the largest of D4
    (both forms), D5 (both forms), D6 (each a max over its parameter choices) and 0, is non-decreasing in w (Taylor,
    D3, is not monotone: see :func:`kappa_lower`)."""
    x = arb(w)
    best = _stair_quadratic(k, x)
    for d, h in k.stairs:
        best = best.max(-(-(arb(h)) * (1 - sinc_majorant(w * d / 2.0))).log1p())
    for mass, tv in k.monotone:
        r, m = arb(tv) / x, arb(mass)
        best = best.max(-(1 - m + r).log()).max(-(1 - m * m + r * r).log() / 2)
    for p, kk in k.spikes:
        best = best.max(-(arb(p) + arb(kk) / x).log())
    return _down(best)


def _taylor_modulus(k: DecayConstants, w: float) -> Optional[arb]:
    """D3: |ψ| ≤ 1 − w²(v/2 − wt/6) for w ≤ w_T (None beyond)."""
    if w > k.w_taylor:
        return None
    x = arb(w)
    return 1 - x * x * (arb(k.v) / 2 - x * arb(k.t) / 6)


def psi_bound(k: DecayConstants, w: Sequence[float]) -> np.ndarray:
    """D(w) ≥ |ψ_{c,a}(y)| for every a ∈ (0, a_0], w = a|y| (rounded up): min(exp(−E(w)), D3 for w ≤ w_T)."""
    out = []
    for x in np.atleast_1d(np.asarray(w, dtype=float)):
        d = (-arb(log_decay_lower(k, float(x)))).exp()
        tay = _taylor_modulus(k, float(x))
        out.append(_up(d if tay is None else d.min(tay)))
    return np.array(out)


@lru_cache(maxsize=None)
def _kappa_cells(k: DecayConstants, ratio: float, w_min: float, w_max: float) -> Tuple[np.ndarray, np.ndarray]:
    r"""The grid w_j = w_min·ratio^j (floats) up to ≥ w_max and the running minimum over j' < j of the cell lower
    bounds of inf_{w ∈ [w_{j'}, w_{j'+1}]} Ê(w)/w² (the first entry: the bound on (0, w_0]); see :func:`kappa_lower`."""
    n = int(math.ceil(math.log(w_max / w_min) / math.log(ratio))) + 1
    w = w_min * ratio ** np.arange(n + 1, dtype=float)
    E = [log_decay_lower(k, float(x)) for x in w]

    def others(x: float) -> arb:  # D4's quadratic form over w², and D3's v/2 − wt/6 where it holds
        b = arb(x)
        out = _stair_quadratic(k, b) / (b * b)
        return out if x > k.w_taylor else out.max(arb(k.v) / 2 - b * arb(k.t) / 6)

    rest = [_down(others(float(x))) for x in w]
    run = np.empty(n + 1)
    run[0] = rest[0]
    for j in range(n):
        cell = max(_down(arb(E[j]) / arb(float(w[j + 1])) ** 2), rest[j + 1])
        run[j + 1] = min(run[j], cell)
    return w, run


def kappa_lower(k: DecayConstants, Y: float, ratio: float = 1.002, w_min: float = 1e-4, y_end: float = 1e7) -> float:
    r"""κ ≤ inf_{0<a≤a_0} −log|ψ_{c,a}(y)|/a² for every |y| ≥ Y ≤ ``y_end`` (Lemma D7), rounded down:

        κ(y) ≥ min( Y²·inf_{0<w≤a_0Y} Ê(w)/w²,  E(a_0Y)/a_0² )

    (a = w/|y|: −log|ψ|/a² = y²Ê(w)/w² ≥ Y²Ê(w)/w² for w ≤ a_0Y; for a_0Y < w ≤ a_0|y|, ≥ y²E(a_0Y)/(a_0y)² as E
    is non-decreasing). The inf over w on the geometric cells [w_j, w_{j+1}] of :func:`_kappa_cells` that meet
    (0, a_0Y] (the last may reach beyond: an inf over more is smaller; a split point W other than the exact a_0Y
    (the float product) is as valid: both arguments hold for any W): Ê/w² ≥ the largest of E(w_j)/w_{j+1}², D4's
    quadratic form at w_{j+1} over w_{j+1}² (it decreases) and v/2 − w_{j+1}t/6 if w_{j+1} ≤ w_T (D3); on
    (0, w_0] the last two at w_0."""
    W = k.a0 * Y
    if W <= w_min or Y > y_end:
        raise ValueError(f"Y = {Y} outside (w_min/a0, y_end] for a0 = {k.a0}")
    w, run = _kappa_cells(k, ratio, w_min, k.a0 * y_end)
    J = int(np.searchsorted(w, W, side="left"))  # the first grid point ≥ W: cells j < J cover (w_0, W]
    inner = arb(float(run[J]))
    a0 = arb(k.a0)
    return _down((arb(Y) ** 2 * inner).min(arb(log_decay_lower(k, W)) / (a0 * a0)))


def tail_bound(k: DecayConstants, R: float, t: float, Y: float, ratio: float = 1.1, y_end: float = 1e7) -> float:
    r"""T ≥ (1/π)∫_Y^∞ |M_μ(c + iy)|·α^{1−c}/|z(z − 1)| dy (α = e^t) for every μ in the Base set of 2-mass R
    (Lemma D7), rounded up: |M_μ| ≤ e^{R(Λ_c − κ)} with κ = :func:`kappa_lower` on geometric pieces [y_i, y_{i+1}]
    of [Y, y_end] and at y_end beyond it, |z(z − 1)| ≥ y²."""
    ys = [float(Y)]
    while ys[-1] * ratio < y_end:
        ys.append(ys[-1] * ratio)
    ys.append(float(y_end))
    rb, lam = arb(R), arb(k.lam)
    kap = [arb(kappa_lower(k, y, y_end=y_end)) for y in ys]
    total = (rb * (lam - kap[-1])).exp() / arb(ys[-1])
    for i in range(len(ys) - 1):
        total += (rb * (lam - kap[i])).exp() * (1 / arb(ys[i]) - 1 / arb(ys[i + 1]))
    return _up(((1 - arb(k.c)) * arb(t)).exp() * total / arb.pi())


# --- the sampled truth (independent of the bounds) ----------------------------------------------------------

_GL_X, _GL_W = np.polynomial.legendre.leggauss(20)


def psi_sampled(c: float, a: float, beta: float, ys: Sequence[float]) -> np.ndarray:
    r"""ψ_{c,a}(y) = ∫ g e^{iyℓ_a} dx / ∫ g dx, g = f·e^{cℓ_a}, by composite 20-point Gauss–Legendre on (−B, 0),
    (0, a), (a, B) with panels of ≤ 0.7 rad of phase (ℓ_a increases, so a piece turns by y_max·(ℓ_a(hi) − ℓ_a(lo)))
    and B where the tilted log-density is 45 below its value at 0: a sample, NOT a bound (against
    :func:`base_ceiling.phi_minus_one` in tests/test_contour_decay.py)."""
    ys = np.atleast_1d(np.asarray(ys, dtype=float))
    B = 1.0
    while B ** beta / beta - c * a * (B + a) ** (beta - 1.0) < 45.0:
        B *= 1.05
    y_max = max(float(np.abs(ys).max()), 1.0)
    xs, ws = [], []
    def ell(x):
        return (np.abs(x) ** beta - np.abs(x - a) ** beta) / beta

    for lo, hi in ((-B, 0.0), (0.0, a), (a, B)):
        n = int(y_max * (ell(hi) - ell(lo)) / 0.7) + 8  # ℓ increases: the phase turns by y·(ℓ(hi) − ℓ(lo))
        e = np.linspace(lo, hi, n + 1)
        h, mid = (e[1:] - e[:-1]) / 2.0, (e[1:] + e[:-1]) / 2.0
        xs.append((mid[:, None] + h[:, None] * _GL_X[None, :]).ravel())
        ws.append((h[:, None] * _GL_W[None, :]).ravel())
    x, wt = np.concatenate(xs), np.concatenate(ws)
    loss = ell(x)
    g = wt * np.exp(-np.abs(x) ** beta / beta + c * loss - _log_z(beta))
    out = np.empty(ys.size, dtype=complex)
    for i in range(0, ys.size, 64):
        out[i:i + 64] = np.exp(1j * np.outer(ys[i:i + 64], loss)) @ g
    return out / g.sum()


def check_rows(betas: Sequence[float], cs: Sequence[float], a0: float, n_a: int, y_max: float, n_y: int) -> float:
    """Print, per (β, c), over a ∈ a_0·[1/64, 1] (geometric, n_a points) and y ∈ [0.1, y_max] (geometric, n_y
    points): the largest log|ψ_sampled|/log D(a|y|), i.e. the bound's decay −log D over the sampled −log|ψ| (≤ 1
    wherever the bound holds; near 1 where it is tight; it reads the bound even where both are ≈ 1), and the
    largest |ψ_sampled|/D; then the per-unit-mass decay at a = a_0, y ∈ {40, 1000}, sampled against κ of
    :func:`kappa_lower`. Return the largest log-ratio."""
    worst = 0.0
    ys = np.geomspace(0.1, y_max, n_y)
    print("| beta | c | a0 | max (-log D)/(-log|psi|) | at a | at y | max |psi|/D |"
          " sampled kappa(40) at a0 | bound kappa(40) | sampled kappa(1000) at a0 | bound kappa(1000) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for beta in betas:
        for c in cs:
            k = decay_constants(beta, c, a0)
            best, top = (0.0, 0.0, 0.0), 0.0
            for a in a0 * np.geomspace(1.0 / 64.0, 1.0, n_a):
                s = np.abs(psi_sampled(c, a, beta, ys))
                d = psi_bound(k, a * ys)
                r = np.log(d) / np.log(s)
                i = int(np.argmax(r))
                top = max(top, float(np.max(s / d)))
                if r[i] > best[0]:
                    best = (float(r[i]), a, float(ys[i]))
            s40, s1000 = -np.log(np.abs(psi_sampled(c, a0, beta, [40.0, 1000.0]))) / a0 ** 2
            worst = max(worst, best[0])
            print(f"| {beta:g} | {c:g} | {a0:g} | {best[0]:.4f} | {best[1]:.4g} | {best[2]:.4g} | {top:.4f} |"
                  f" {s40:.1f} | {kappa_lower(k, 40.0):.1f} | {s1000:.1f} | {kappa_lower(k, 1000.0):.1f} |")
            sys.stdout.flush()
    return worst


def tail_rows(betas: Sequence[float], cs: Sequence[float], a0: float, masses: Sequence[float], ts: Sequence[float],
              Ys: Sequence[float], rel: float) -> None:
    """Print, per (β, R, t), H_α of the Gaussian limit N(√(I_β R)), the tail bound at each Y (best c), and the
    least Y of the list whose tail bound is ≤ ``rel``·H_α."""
    for beta in betas:
        ks = [decay_constants(beta, c, a0) for c in cs]
        for k in ks:
            print(f"beta {beta:g}, c {k.c:g}, a0 {a0:g}: Lambda_c {k.lam:.4f}, v {k.v:.4f} (I_beta"
                  f" {fisher_information(beta):.4f}), t {k.t:.3f}, w_T {k.w_taylor:.3f},"
                  f" best H_0 {max(s[1] for s in k.stairs):.3f}; kappa(Y) for Y = "
                  + ", ".join(f"{y:g}: {kappa_lower(k, y):.1f}" for y in Ys))
        print("| beta | R | t | H_alpha (limit) | " + " | ".join(f"tail Y={y:g}" for y in Ys)
              + f" | least Y (<= {rel:g} H) | c |")
        print("|---|---|---|---|" + "---|" * len(Ys) + "---|---|")
        for R in masses:
            for t in ts:
                h = float(GGPair(math.sqrt(fisher_information(beta) * R), 2.0).h_pq(np.array([math.exp(t)]),
                                                                                   upper=False)[0])
                tails, least = [], None
                for y in Ys:
                    best = min((tail_bound(k, R, t, y), k.c) for k in ks)
                    tails.append(best[0])
                    if least is None and best[0] <= rel * h:
                        least = (y, best[1])
                cells = " | ".join(f"{x:.1e}" for x in tails)
                print(f"| {beta:g} | {R:g} | {t:g} | {h:.3e} | {cells} | {least[0] if least else '> max'} |"
                      f" {least[1] if least else '-'} |")
                sys.stdout.flush()


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ch = sub.add_parser("check", help="every per-coordinate bound against sampled |psi| on a grid (item 3)")
    ch.add_argument("--beta", type=float, nargs="+", default=[2.5, 3.0])
    ch.add_argument("--c", type=float, nargs="+", default=[1.2, 2.0, 4.0])
    ch.add_argument("--a0", type=float, default=0.1)
    ch.add_argument("--n-a", type=int, default=25)
    ch.add_argument("--y-max", type=float, default=1000.0)
    ch.add_argument("--n-y", type=int, default=200)
    tl = sub.add_parser("tail", help="the tail integral's bound beyond Y over the Base set (item 2)")
    tl.add_argument("--beta", type=float, nargs="+", default=[2.5, 3.0])
    tl.add_argument("--c", type=float, nargs="+", default=[1.2, 2.0, 4.0])
    tl.add_argument("--a0", type=float, default=0.1)
    tl.add_argument("--mass", type=float, nargs="+", default=[0.16, 1.0], help="2-masses R (m = 1)")
    tl.add_argument("--t", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0], help="log alpha")
    tl.add_argument("--Y", type=float, nargs="+", default=[10, 20, 40, 80, 160, 320, 640])
    tl.add_argument("--rel", type=float, default=1e-3)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.cmd == "check":
        w = check_rows(args.beta, args.c, args.a0, args.n_a, args.y_max, args.n_y)
        print(f"largest (-log D)/(-log|psi|) over the grid: {w:.4f} (<= 1: every bound held)")
    else:
        tail_rows(args.beta, args.c, args.a0, args.mass, args.t, args.Y, args.rel)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
