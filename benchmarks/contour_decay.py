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

The 1-D integrals in the constants (v, t, T_2 and the integration-by-parts K, P) are scipy ``quad`` results moved
in the safe direction by 10× quad's error estimate plus 10⁻⁹ relative: enclosed numerically, not by interval
arithmetic. Everything else is closed form or a lower Riemann sum of a monotone function.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
from scipy import integrate, special

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
_REL = 1e-9  # relative margin on every quadrature, beside 10× its error estimate


def _log_z(beta: float) -> float:
    """log Z, Z = ∫ e^{−|x|^β/β} dx = 2β^{1/β}Γ(1 + 1/β)."""
    return math.log(2.0) + math.log(beta) / beta + float(special.gammaln(1.0 + 1.0 / beta))


def _quad(fun: Callable[[float], float], pieces: Sequence[Tuple[float, float]], upper: bool) -> float:
    """∫ fun over the pieces (fun ≥ 0), moved up (``upper``) or down by 10× quad's error estimate + 10⁻⁹ relative."""
    val, err = 0.0, 0.0
    for lo, hi in pieces:
        v, e = integrate.quad(fun, lo, hi, epsabs=1e-15, epsrel=1e-12, limit=400)
        val, err = val + v, err + e
    if not (math.isfinite(val) and val >= 0.0):
        raise ArithmeticError(f"contour_decay: quadrature returned {val!r}")
    pad = 10.0 * err + _REL * val
    return val + pad if upper else max(val - pad, 0.0)


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
    return (lo + 1 - c) * rates[lo] + (c - lo) * rates[lo + 1]


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


def _taylor_rates(beta: float, c: float, a0: float, lam: float, lam_next: float) -> Tuple[float, float, float]:
    r"""(v, t, T_2) of Lemma D3. With ω(x) = 1 for x ≥ a_0/2, e^{−c a_0(|x| + a_0)^{β−1}} below (≤ e^{cℓ_a}, a ≤ a_0),
    s(x) = sgn(x)|x|^{β−1}, A, B, C = ∫fωs², ∫fωs, ∫fω and J = E_f(|X| + a_0)^{2β−4}:
    v = e^{−Λ_c a_0²}(√(A − B²/C) − (β − 1)(a_0/2)√J)²; T_k = ∫ f(|x| + a_0)^{k(β−1)}e^{c a_0(|x|+a_0)^{β−1}[x>0]}
    (E_{P_c}|ℓ_a|^k ≤ a^k T_k); t = (T_3^{1/3} + a_0Λ_{c+1})³."""
    lz, b1 = _log_z(beta), beta - 1.0
    big = 3.0 * (60.0 * beta) ** (1.0 / beta) + 1.0
    pieces = ((-big, 0.0), (0.0, a0 / 2.0), (a0 / 2.0, big))

    def f(x: float) -> float:
        return math.exp(-abs(x) ** beta / beta - lz)

    def om(x: float) -> float:
        return 1.0 if x >= a0 / 2.0 else math.exp(-c * a0 * (abs(x) + a0) ** b1)

    def tilt(x: float) -> float:
        return math.exp(c * a0 * (abs(x) + a0) ** b1) if x > 0.0 else 1.0

    A_lo = _quad(lambda x: f(x) * om(x) * abs(x) ** (2.0 * b1), pieces, upper=False)
    B_pos = _quad(lambda x: f(x) * om(x) * x ** b1 if x > 0 else 0.0, pieces, upper=True)
    B_neg = _quad(lambda x: f(x) * om(x) * abs(x) ** b1 if x < 0 else 0.0, pieces, upper=True)
    C_lo = _quad(lambda x: f(x) * om(x), pieces, upper=False)
    # B = B_pos − B_neg: |B| ≤ max of the two enclosures' spread (both enclosed up; the other end down)
    B_pos_lo = _quad(lambda x: f(x) * om(x) * x ** b1 if x > 0 else 0.0, pieces, upper=False)
    B_neg_lo = _quad(lambda x: f(x) * om(x) * abs(x) ** b1 if x < 0 else 0.0, pieces, upper=False)
    B_abs = max(abs(B_pos - B_neg_lo), abs(B_pos_lo - B_neg))
    J = _quad(lambda x: f(x) * (abs(x) + a0) ** (2.0 * beta - 4.0), pieces, upper=True)
    root = math.sqrt(max(A_lo - B_abs * B_abs / C_lo, 0.0)) - b1 * a0 / 2.0 * math.sqrt(J)
    if not root > 0.0:
        raise ArithmeticError(f"contour_decay: no variance bound at beta={beta}, c={c}, a0={a0}")
    v = math.exp(-lam * a0 * a0) * root * root
    T3 = _quad(lambda x: f(x) * (abs(x) + a0) ** (3.0 * b1) * tilt(x), pieces, upper=True)
    T2 = _quad(lambda x: f(x) * (abs(x) + a0) ** (2.0 * b1) * tilt(x), pieces, upper=True)
    t = (T3 ** (1.0 / 3.0) + a0 * lam_next) ** 3
    return v, t, T2


def _staircase(beta: float, c: float, a0: float, lam: float, delta: float) -> float:
    r"""H_0 of Lemma D4: the mass of the staircase minorant of step Δ (pieces of x with equal Δ in the scaled loss),
    positive side x_k = a_0 + (kΔ)^{1/(β−1)}: h_k = f(x_{k+1})e^{−Λ_c a_0²}/((β − 1)x_{k+1}^{β−2}); negative side
    t_k = (kΔ)^{1/(β−1)}: h_k = f(t_{k+1})e^{−c a_0(t_{k+1}+a_0)^{β−1} − Λ_c a_0²}/((β − 1)(t_{k+1} + a_0)^{β−2});
    H_0 = ΣΔ·h_k, rounded down by 10⁻¹²."""
    lz, b1 = _log_z(beta), beta - 1.0
    n = int(math.ceil((2.0 * (40.0 * beta) ** (1.0 / beta) + 1.0) ** b1 / delta)) + 1
    k = np.arange(1, n + 1, dtype=float)
    xp = a0 + (k * delta) ** (1.0 / b1)
    hp = np.exp(-xp ** beta / beta - lz - lam * a0 * a0) / (b1 * xp ** (beta - 2.0))
    tn = (k * delta) ** (1.0 / b1)
    hn = np.exp(-tn ** beta / beta - lz - c * a0 * (tn + a0) ** b1 - lam * a0 * a0) / (b1 * (tn + a0) ** (beta - 2.0))
    return float(delta * (hp.sum() + hn.sum())) * (1.0 - 1e-12)


def _monotone_minorants(beta: float, c: float, a0: float, lam: float, n: int = 4000) -> Tuple[Tuple[float, float], ...]:
    r"""(H, TV) of Lemma D5 for each (u_0, cap M): the density of ℓ_a/a is ≥ h_+(u) = f(r)e^{−Λ_c a_0²}/((β − 1)
    r^{β−2}), r = u^{1/(β−1)} + a_0, on u ≥ u_0 ∨ a_0^{β−1}, and ≥ h_−(u) = f(r)e^{−c a_0(r + a_0)^{β−1} − Λ_c a_0²}/
    ((β − 1)(r + a_0)^{β−2}), r = |u|^{1/(β−1)}, on u ≤ −(u_0 ∨ a_0^{β−1}/β); both decrease in |u|. h = min(M, h_±) on
    those sets: TV(h) = 2 min(M, h_+(u_0)) + 2 min(M, h_−(−u_0)); H = a lower Riemann sum of its mass."""
    lz, b1 = _log_z(beta), beta - 1.0
    u_max = (2.0 * (40.0 * beta) ** (1.0 / beta) + 1.0) ** b1
    out = []
    for u0 in CUTS:
        up = np.linspace(max(u0, a0 ** b1), u_max, n + 1)
        r = up ** (1.0 / b1) + a0
        hp = np.exp(-r ** beta / beta - lz - lam * a0 * a0) / (b1 * r ** (beta - 2.0))
        um = np.linspace(max(u0, a0 ** b1 / beta), u_max, n + 1)
        r = um ** (1.0 / b1)
        hm = np.exp(-r ** beta / beta - lz - c * a0 * (r + a0) ** b1 - lam * a0 * a0) / (b1 * (r + a0) ** (beta - 2.0))
        for cap in CAPS:
            mass = (np.minimum(hp[1:], cap).sum() * (up[1] - up[0]) + np.minimum(hm[1:], cap).sum() * (um[1] - um[0]))
            tv = 2.0 * min(cap, hp[0]) + 2.0 * min(cap, hm[0])
            out.append((float(mass) * (1.0 - 1e-12), tv * (1.0 + 1e-12)))
    return tuple(out)


def _spike_constants(beta: float, c: float, a0: float) -> Tuple[Tuple[float, float], ...]:
    r"""(P, K) of Lemma D6 for each spike half-width b: with ĝ(x) = f(x)e^{c a_0 x^{β−1}} (≥ g for x > 0),
    P = ∫_{−b}^{a_0+b} f(x)e^{c a_0 (x_+)^{β−1}} dx ≥ P_c(−b < X < a_0 + b),
    K = ĝ(a_0 + b)/((β − 1)b^{β−2})
      + ∫_{a_0+b}^∞ ĝ(x)[x^{β−1}/((β − 1)(x − a_0)^{β−2}) + (β − 2)/((β − 1)(x − a_0)^{β−1})]dx
      + f(b)/((β − 1)b^{β−2}) + ∫_b^∞ f(t)[t/(β − 1) + (β − 2)/((β − 1)t^{β−1})]dt + 2c·a_0."""
    lz, b1 = _log_z(beta), beta - 1.0
    big = 3.0 * (60.0 * beta) ** (1.0 / beta) + 1.0

    def f(x: float) -> float:
        return math.exp(-abs(x) ** beta / beta - lz)

    def gh(x: float) -> float:
        return f(x) * math.exp(c * a0 * max(x, 0.0) ** b1)

    out = []
    for b in SPIKES:
        xp = a0 + b
        kp = gh(xp) / (b1 * b ** (beta - 2.0)) + _quad(
            lambda x: gh(x) * (x ** b1 / (b1 * (x - a0) ** (beta - 2.0)) + (beta - 2.0) / (b1 * (x - a0) ** b1)),
            ((xp, big),), upper=True)
        km = f(b) / (b1 * b ** (beta - 2.0)) + _quad(
            lambda s: f(s) * (s / b1 + (beta - 2.0) / (b1 * s ** b1)), ((b, big),), upper=True)
        p = _quad(gh, ((-b, 0.0), (0.0, xp)), upper=True)
        out.append((p, (kp + km + 2.0 * c * a0) * (1.0 + 1e-12)))
    return tuple(out)


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


def sinc_majorant(v: np.ndarray) -> np.ndarray:
    """σ(v) ≥ |sin v/v|, non-increasing in v ≥ 0: max(sinc v·[v ≤ π], min(SINC_LOBE, 1/v))."""
    v = np.asarray(v, dtype=float)
    s = np.where(v > 0.0, np.sin(v) / np.where(v > 0.0, v, 1.0), 1.0)
    main = np.where(v <= math.pi, np.maximum(s, 0.0), 0.0)
    return np.maximum(main, np.minimum(SINC_LOBE, 1.0 / np.maximum(v, 1e-300)))


def _stair_ac(k: DecayConstants, w: np.ndarray) -> np.ndarray:
    """−log of D4's quadratic bound, per Δ: ½·(−log(1 − H_0²v²/(3 + v²))), v = wΔ/2 (columns: Δ); over w², it
    decreases in w."""
    d = np.array([s[0] for s in k.stairs])
    h = np.array([s[1] for s in k.stairs])
    v = w[:, None] * d[None, :] / 2.0
    return -0.5 * np.log1p(-h * h * v * v / (3.0 + v * v))


def log_decay_monotone(k: DecayConstants, w: np.ndarray) -> np.ndarray:
    r"""E(w) ≤ −log|ψ_{c,a}(y)| at w = a|y| for every a ≤ a_0, non-decreasing in w: the largest of D4 (both forms),
    D5 (both forms) and D6, each a min over its parameter choices (Taylor, D3, is not monotone: see
    :func:`kappa_lower`)."""
    w = np.atleast_1d(np.asarray(w, dtype=float))
    out = _stair_ac(k, w).max(axis=1)
    d = np.array([s[0] for s in k.stairs])
    h = np.array([s[1] for s in k.stairs])
    mix = -np.log1p(-h[None, :] * (1.0 - sinc_majorant(w[:, None] * d[None, :] / 2.0)))
    out = np.maximum(out, mix.max(axis=1))
    for mass, tv in k.monotone:
        r = tv / np.maximum(w, 1e-300)
        out = np.maximum(out, -np.log(np.clip(1.0 - mass + r, 1e-300, 1.0)))
        out = np.maximum(out, -0.5 * np.log(np.clip(1.0 - mass * mass + r * r, 1e-300, 1.0)))
    for p, kk in k.spikes:
        out = np.maximum(out, -np.log(np.clip(p + kk / np.maximum(w, 1e-300), 1e-300, 1.0)))
    return out


def psi_bound(k: DecayConstants, w: np.ndarray) -> np.ndarray:
    """D(w) ≥ |ψ_{c,a}(y)| for every a ∈ (0, a_0], w = a|y|: exp(−E(w)), and D3's 1 − w²(v/2 − wt/6) for w ≤ w_T."""
    w = np.atleast_1d(np.asarray(w, dtype=float))
    out = np.exp(-log_decay_monotone(k, w))
    tay = 1.0 - w * w * (k.v / 2.0 - w * k.t / 6.0)
    return np.where(w <= k.w_taylor, np.minimum(out, tay), out)


def kappa_lower(k: DecayConstants, Y: float, ratio: float = 1.005, w_min: float = 1e-4) -> float:
    r"""κ ≤ inf_{0<a≤a_0} −log|ψ_{c,a}(y)|/a² for every |y| ≥ Y (Lemma D1's per-unit-mass decay), from

        κ(y) ≥ min( Y²·inf_{0<w≤a_0Y} Ê(w)/w²,  E(a_0Y)/a_0² )

    (a = w/|y|: −log|ψ|/a² = y²Ê(w)/w² ≥ Y²Ê(w)/w² for w ≤ a_0Y; for a_0Y < w ≤ a_0|y|, ≥ y²E(a_0Y)/(a_0y)² as E
    is non-decreasing). The inf over w on geometric cells [w_j, w_{j+1}]: Ê/w² ≥ the largest of E(w_j)/w_{j+1}²,
    D4's quadratic form at w_{j+1} over w_{j+1}² (it decreases), and v/2 − w_{j+1}t/6 if w_{j+1} ≤ w_T (D3); on
    (0, w_min] the last two at w_min."""
    W = k.a0 * Y
    if W <= w_min:
        raise ValueError(f"Y = {Y} too small for a0 = {k.a0}")
    n = int(math.ceil(math.log(W / w_min) / math.log(ratio)))
    w = W * ratio ** (-np.arange(n, -1, -1, dtype=float))
    w[0] = min(w[0], w_min)
    E = log_decay_monotone(k, w)
    ac = _stair_ac(k, w).max(axis=1) / (w * w)
    cell = np.maximum(E[:-1] / w[1:] ** 2, ac[1:])
    cell = np.maximum(cell, np.where(w[1:] <= k.w_taylor, k.v / 2.0 - w[1:] * k.t / 6.0, 0.0))
    first = max(ac[0], k.v / 2.0 - w[0] * k.t / 6.0 if w[0] <= k.w_taylor else 0.0)
    inner = min(float(cell.min()), first)
    return min(Y * Y * inner, float(E[-1]) / k.a0 ** 2)


def tail_bound(k: DecayConstants, R: float, t: float, Y: float, ratio: float = 1.1, y_end: float = 1e7) -> float:
    r"""T ≥ (1/π)∫_Y^∞ |M_μ(c + iy)|·α^{1−c}/|z(z − 1)| dy (α = e^t) for every μ in the Base set of 2-mass R
    (Lemma D7): |M_μ| ≤ e^{R(Λ_c − κ)} with κ = :func:`kappa_lower` on geometric pieces [y_i, y_{i+1}] of [Y, y_end]
    and at y_end beyond it, |z(z − 1)| ≥ y²."""
    ys = [float(Y)]
    while ys[-1] < y_end:
        ys.append(ys[-1] * ratio)
    ys = np.array(ys)
    kap = np.array([kappa_lower(k, y) for y in ys])
    piece = np.exp(R * (k.lam - kap[:-1])) * (1.0 / ys[:-1] - 1.0 / ys[1:])
    total = float(piece.sum()) + math.exp(R * (k.lam - kap[-1])) / ys[-1]
    return math.exp((1.0 - k.c) * t) * total / math.pi * (1.0 + 1e-12)


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
