r"""The ceiling of a PRV-level Base (issue 35 items 1 and 3): diagnostics, NOT bounds (``python benchmarks/base_ceiling.py``).

The ball table (docs/accounting.md, Lemmas T1–T4) bounds its Base (every coordinate ≤ a_0, p-mass ≤ R) by
min(U, V, G), G = H_α(N(κ_β·a_0^{1−p/2}·√R)) (Lemma N, β ≤ 2 only). Against many small coordinates the truth tends
to the Gaussian limit N(√(I_β)·‖μ‖_2), I_β = E|X|^{2β−2} = β^{(2β−2)/β}Γ(2 − 1/β)/Γ(1/β) the GG's Fisher
information (:func:`opacus_gg.accountants.fisher.fisher_information`). Subcommands:

``ceiling`` — the table with the Base's Gaussian rate κ_β replaced by √(I_β)·(1 + η) at any β (also β > 2; the
rate is patched into this process only, :func:`ideal_base`; the library has no such option). η = 0 is the
Gaussian limit: NOT a bound (one small coordinate is worse than the limit at some α), it is the ceiling of any
PRV-level Base; η > 0 is what a Base with relative remainder η would give. Printed beside: the Gaussian limit's
PRV ε (N(√I_β·m) composed; the worst equal spread as d → ∞ at β < 2, p = 2), the one-coordinate PRV (d = 1) and,
with ``--spread-k``, the exact equal spread at k (:func:`.spreads.exact_spread_pair`).

``remainder`` — the per-coordinate complex log-moment log φ(z; a) = log E_Q[e^{zℓ_a}] (ℓ_a the loss of one GG
coordinate shifted by a) against its Gaussian limit I_β a² z(z−1)/2 at z = c + iy: the relative deviation
|r|/(I_β a²|z(z−1)|/2) (r = log φ − limit) and the decay |φ(c + iy; a)|/φ(c; a), by scipy quadrature of
φ − 1 = ∫ f·expm1(zℓ_a) (double precision, quad's error estimate printed; the log taken in mpmath from φ − 1).
``contour`` — what that remainder implies for H_α of a Base of p-mass R (p = 2) made of coordinates ≤ a_0, by the
contour formula H_α = (1/2π)∫ M(c + iy) α^{1−c−iy} dy/(z(z−1)): |H_α − H_α^G| ≤ (1/2π)∫ |M − M_G| α^{1−c}/|z(z−1)| dy,
|M − M_G| ≤ min(|M_G|(e^{Rρ} − 1), e^{Rλ} + |M_G|) (ρ, λ: the largest |r(z; a)|/a² and Re log φ(z; a)/a² sampled over
a ≤ a_0; :func:`contour_eta`), as the implied η (the relative shift inflation of the Gaussian that covers the error).
Everything sampled on grids: not a bound, a size estimate for a proof plan.

``floor`` — the PRV ε of the envelope of the Gaussian limit, the one coordinate and one coordinate a beside the
limit of the rest (``--shape``: several coordinates beside it): every dominating one-step pair is above it, so no table
goes below it (the route's floor).
``shapes`` — the η that k equal coordinates of size a need against N(√I_β·a√k) (the remainder in η's units).
``fisher`` — I_β in closed form against quadrature of E[(d/dx log f)²].

Run one job at a time with ``OMP_NUM_THREADS=1`` (tables cost minutes); the commands that produced the numbers
of docs/accounting.md ("A PRV-level Base: the ceiling, measured") are listed there.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import sys
import time
import warnings
from typing import Dict, Iterator, List, Optional, Sequence, Tuple
from unittest import mock

import mpmath
import numpy as np
from scipy import integrate, special

from opacus_gg.accountants import ball_prv
from opacus_gg.accountants.api import _compose_tight, _validate_errors
from opacus_gg.accountants.ball_prv import ABOVE_TWO_SPEC, NEAR_TWO_SPEC, TableSpec
from opacus_gg.accountants.fisher import fisher_information
from opacus_gg.accountants.gg_pair import GGPair
from opacus_gg.accountants.history import PairSegment
from opacus_gg.accountants.spreads import exact_spread_pair
from opacus_gg.accountants.table_cache import CACHE_ENV
from opacus_gg.formatting import fmt_up

#: cell specs of the measurements (relative to m; the Base's Gaussian is replaced in all of them)
SPECS: Dict[str, TableSpec] = {
    # ABOVE_TWO_SPEC's cells until 2026-11-29 (a_0 = 0.1m, 1.05 up to 0.7m, 1.005 above, split 2, h 0.01, tail
    # grid, V in the Base)
    "above": dataclasses.replace(ABOVE_TWO_SPEC, ratio_low=1.05, ratio_high=1.005, mass_split=2),
    # the same, low ratio 1.02 (about twice the states)
    "above-fine": dataclasses.replace(ABOVE_TWO_SPEC, ratio_low=1.02, ratio_high=1.005, mass_split=2),
    # finer everywhere: low ratio 1.02, top ratio 1.002 from 0.7m, p-mass step a_0^p/4 (ABOVE_TWO_SPEC since then)
    "above-top": ABOVE_TWO_SPEC,
    # "above" with the Base cell a_0 = 0.3m (fewer cells; the Base then carries more)
    "above-a03": dataclasses.replace(ABOVE_TWO_SPEC, a0=0.3, ratio_low=1.05, ratio_high=1.005, mass_split=4),
    # β = 2.2 (issue 35 item 1 near β = 2): `above-top` with the low ratio 1.005 (mid-size coordinates finer)
    "b22-low": dataclasses.replace(ABOVE_TWO_SPEC, ratio_low=1.005),
    # `above-top` with the p-mass step a_0^p/16 (β = 2.2: the mass rounding of the coordinates above a_0 is the excess)
    "b22-split16": dataclasses.replace(ABOVE_TWO_SPEC, mass_split=16),
    # `above-top` with the p-mass step a_0^p/8
    "b22-split8": dataclasses.replace(ABOVE_TWO_SPEC, mass_split=8),
    # the Base cell a_0 = 0.2m, split 16 (ΔR < 0.0025m², `above-top`'s step), ratios 1.02 / 1.002 (C3 rows up to 0.2)
    "b22-a02": dataclasses.replace(ABOVE_TWO_SPEC, a0=0.2, mass_split=16),
    # the same with ratios 1.05 / 1.005
    "b22-a02-coarse": dataclasses.replace(ABOVE_TWO_SPEC, a0=0.2, ratio_low=1.05, ratio_high=1.005, mass_split=16),
    # `above-a03` with the p-mass step a_0^p/16
    "b22-a03-split16": dataclasses.replace(ABOVE_TWO_SPEC, a0=0.3, ratio_low=1.05, ratio_high=1.005, mass_split=16),
    # NEAR_TWO_SPEC's cells at β ≤ 2 (a_0 = 0.1m, 1.02 below 0.3m, 1.01 above, split 8, h 0.005)
    "near": NEAR_TWO_SPEC,
    # coarse cells for β ≤ 2: a_0 = 0.1m, 1.05 below 0.3m, 1.01 above, split 2, h 0.005
    "coarse": TableSpec(a0=0.1, ratio_low=1.05, ratio_high=1.01, mass_split=2),
    # a_0 = 0.3m: the cells above it at 1.01, split 4
    "a03": TableSpec(a0=0.3, ratio_low=1.01, ratio_high=1.01, mass_split=4),
    # a_0 = 0.5m: the cells above it at 1.01, split 4
    "a05": TableSpec(a0=0.5, ratio_low=1.01, ratio_high=1.01, mass_split=4),
    # a_0 = 0.5m, the cells at 1.005, split 16
    "a05-fine": TableSpec(a0=0.5, ratio_low=1.005, ratio_high=1.005, mass_split=16),
    # a_0 = 0.5m, the cells at 1.005, split 64
    "a05-finer": TableSpec(a0=0.5, ratio_low=1.005, ratio_high=1.005, mass_split=64),
    # a_0 = 0.5m, the cells at 1.005, split 256
    "a05-finest": TableSpec(a0=0.5, ratio_low=1.005, ratio_high=1.005, mass_split=256),
    # a_0 = 0.3m, the cells at 1.005, split 16
    "a03-fine": TableSpec(a0=0.3, ratio_low=1.005, ratio_high=1.005, mass_split=16),
    # a_0 = 0.7m: the cells above it at 1.005, split 8
    "a07": TableSpec(a0=0.7, ratio_low=1.005, ratio_high=1.005, mass_split=8),
}

QUICKSTART = (0.01, 1000, 2410)
LARGE = (0.001, 100_000, 1_000_000)


def ideal_rate(beta: float, eta: float) -> float:
    r"""√(I_β)·(1 + η): the Base's Gaussian shift per unit ‖μ‖_2 of the Gaussian limit, inflated by η (η = 0: the
    limit itself, NOT a bound)."""
    if not eta >= 0.0:
        raise ValueError(f"eta must be >= 0, got {eta!r}")
    return math.sqrt(fisher_information(beta)) * (1.0 + eta)


class _RaisedGaussian(GGPair):
    """GGPair whose curves at β = 2 (only the Base's Gaussian in a table at β ≠ 2) are raised by ``ABS`` (capped at
    1): a Base whose remainder is an absolute error on H_α instead of a shift inflation."""

    ABS = 0.0

    def h_pq(self, alpha, log_alpha=None, **kw):
        h = super().h_pq(alpha, log_alpha, **kw)
        return np.minimum(h + self.ABS, 1.0) if self.beta == 2.0 else h

    def h_qp(self, alpha, log_alpha=None, **kw):
        h = super().h_qp(alpha, log_alpha, **kw)
        return np.minimum(h + self.ABS, 1.0) if self.beta == 2.0 else h


@contextlib.contextmanager
def ideal_base(beta: float, eta: float, abs_err: float = 0.0, min_cells: float = 0.0) -> Iterator[None]:
    r"""Inside the block :func:`.ball_prv.build_table` reads the Base's Gaussian as N(√I_β(1 + η)·a_0^{1−p/2}·√R) at
    every β, its curves raised by ``abs_err`` (absolute, every α; needs β ≠ 2: the cells' GG factors must not be
    raised), for the Base states of p-mass R ≥ ``min_cells``·a_0^p only; below, the library's Base (Lemma T3: U,
    V where the spec asks, and Lemma N's Gaussian at β ≤ 2, none above). A diagnostic: the library's Base is
    unchanged outside the block, and the disk cache is off in this script, so no table built here is ever stored
    or read by the library."""
    rate = ideal_rate(beta, eta)
    if abs_err and beta == 2.0:
        raise ValueError("abs_err needs beta != 2 (the cells' factors would be raised too)")
    raised = type("_Raised", (_RaisedGaussian,), {"ABS": float(abs_err)})
    lib_rate, lib_pair = ball_prv.base_gaussian_rate, ball_prv.base_pair
    seen = {}

    def gauss_rate(a0: float, b: float, p: float) -> float:
        seen.update(a0=a0, p=p, lib=lib_rate(a0, b, p))
        return rate * a0 ** (1.0 - p / 2.0)

    def confined(lib_fn):
        """``lib_fn`` (base_pair, or base_values where the contour Base is on) with the ideal rate only in the
        states of p-mass ≥ min_cells·a_0^p, and the library's rate, unraised, below."""
        def fn(R, rates, orders, t, grid=None, gauss_rate=None, mean_variance=False):
            if R < min_cells * seen["a0"] ** seen["p"]:
                with mock.patch.object(ball_prv, "GGPair", GGPair):  # the library's Base, unraised
                    return lib_fn(R, rates, orders, t, grid, seen["lib"], mean_variance)
            return lib_fn(R, rates, orders, t, grid, gauss_rate, mean_variance)
        return fn

    with mock.patch.object(ball_prv, "base_gaussian_rate", gauss_rate), \
            mock.patch.object(ball_prv, "base_pair", confined(lib_pair)), \
            mock.patch.object(ball_prv, "base_values", confined(ball_prv.base_values)), \
            mock.patch.object(ball_prv, "GGPair", raised):
        yield


def _eps(pairs: Tuple, q: float, steps: int, delta: float, roundoff: float = 0.0) -> float:
    """The PRV ε (max over remove/add, upper end) of ``steps`` subsampled steps of the envelope of ``pairs``."""
    eps_error, delta_error = _validate_errors(delta, 0.01, None)
    seg = PairSegment(pairs, q, steps, roundoff)
    return max(_compose_tight([seg], delta, d, eps_error, delta_error).epsilon_upper for d in ("remove", "add"))


def ceiling_rows(beta: float, p: float, sigma: float, specs: Sequence[str], etas: Sequence[float],
                 settings: Sequence[Tuple[float, int, int]], delta: float, spread_k: Sequence[int],
                 abs_errs: Sequence[float] = (0.0,), min_cells: float = 0.0) -> None:
    """Print the references, then one row per (spec, η, absolute error, setting): the ideal-Base table's ε (NOT a
    bound)."""
    m = 1.0 / sigma
    print(f"beta {beta:g}, p {p:g}, sigma {sigma:g}, delta {delta:g}; sqrt(I_beta) = {math.sqrt(fisher_information(beta)):.6f}")
    print("references (PRV upper ends; the limit and the spreads are shifts in the ball as d grows, so lower bounds"
          " on the truth up to their brackets):")
    for q, steps, dim in settings:
        lim = _eps((("limit", GGPair(math.sqrt(fisher_information(beta)) * m, 2.0)),), q, steps, delta)
        one = _eps((("one", GGPair(m, beta)),), q, steps, delta)
        line = f"  q {q:g}, T {steps:g}: Gaussian limit {fmt_up(lim)}, one coordinate {fmt_up(one)}"
        for k in spread_k:
            sp = _eps(((f"k={k}", exact_spread_pair(sigma, beta, k, p)),), q, steps, delta)
            line += f", equal spread k={k} {fmt_up(sp)}"
        print(line)
        sys.stdout.flush()
    print(f"ideal Gaussian in the Base states of p-mass >= {min_cells:g}·a_0^p (below: the library's Base)")
    print("| spec | eta | abs. err | q | T | ideal-Base table eps (NOT a bound) | states | build s | C |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in specs:
        for eta in etas:
            for ae in abs_errs:
                with ideal_base(beta, eta, ae, min_cells):
                    # the Base states by base_pair (patched above): the library's contour Base off (ball_contour)
                    tab = ball_prv.build_table(m, beta, p, SPECS[name], contour_base=False)
                for q, steps, dim in settings:
                    e = _eps(tab.pairs, q, steps, delta, tab.roundoff)
                    print(f"| {name} | {eta:g} | {ae:g} | {q:g} | {steps:g} | {fmt_up(e)} | {tab.states} |"
                          f" {tab.seconds:.0f} | {tab.roundoff:.1e} |")
                    sys.stdout.flush()


def envelope_floor(beta: float, sigma: float, shifts: Sequence[float], settings: Sequence[Tuple[float, int, int]],
                   delta: float, h: float = 0.005, shapes: Sequence[Tuple[float, ...]] = ()) -> None:
    r"""The PRV ε of the envelope of the Gaussian limit N(√I_β·m), the one coordinate GG(m) and, for each a in
    ``shifts`` (units of m), one coordinate a beside the limit of the rest, GG(a) ⊗ N(√I_β·√(m² − a²)) (each a limit of
    shapes in the ball as d → ∞, p = 2), and for each (a_1, …, a_k) in ``shapes`` those coordinates beside the
    limit of the rest, GG(a_1) ⊗ … ⊗ GG(a_k) ⊗ N(√I_β·√(m² − Σa_i²)), composed by the accountant
    (:class:`.history.PairSegment` takes the envelope of explicit pairs). Any one-step pair that dominates every shape
    in every dimension dominates these (by continuity for the limits), so no table, with any Base and any cells, goes
    below this: the floor of the table route (up to the discretization of the products on a loss grid of step h·m,
    which rounds up; NOT a bound); each shape alone is printed beside (the envelope's excess over the worst one is
    what the crossing of the shapes' curves costs after composition)."""
    m = 1.0 / sigma
    si = math.sqrt(fisher_information(beta))
    # ±10m, or at β > 2 the one coordinate's tail as ABOVE_TWO_SPEC's grid (its loss grows like m·x^{β−1})
    half = ABOVE_TWO_SPEC.half_width_at(m, beta) if beta > 2.0 else 10.0 * m
    t = np.arange(-int(math.ceil(half / (h * m))), int(math.ceil(half / (h * m))) + 1) * h * m
    pairs = [("limit", GGPair(si * m, 2.0)), ("one", GGPair(m, beta))]
    for shape in [(a,) for a in shifts] + [tuple(sh) for sh in shapes]:
        mass = sum(a * a for a in shape)
        if not mass <= 1.0:
            raise ValueError(f"shape {shape}: sum of squares {mass} > 1 (units of m)")
        factors = [GGPair(a * m, beta) for a in shape] + ([GGPair(si * m * math.sqrt(1.0 - mass), 2.0)]
                                                         if mass < 1.0 else [])  # no rest: the shape alone
        pair = ball_prv.envelope_pair([factors[0]], t)[0]
        for f in factors[1:]:
            pair = pair.compose(ball_prv.envelope_pair([f], t)[0])
        pairs.append(("a=" + "+".join(f"{a:g}" for a in shape), pair))
    print(f"beta {beta:g}, sigma {sigma:g}: envelope of the limit, the one coordinate and a + limit for a/m in"
          f" {list(shifts)}" + (f", shapes {[tuple(sh) for sh in shapes]} + limit" if shapes else ""))
    for q, steps, _ in settings:
        row = [f"q {q:g}, T {steps:g}: envelope {fmt_up(_eps(tuple(pairs), q, steps, delta))}"]
        for lab, pr in pairs[2:]:
            row.append(f"{lab} alone {fmt_up(_eps(((lab, pr),), q, steps, delta))}")
        print("; ".join(row))
        sys.stdout.flush()


# --- the remainder: complex log-moments of one coordinate ------------------------------------------------------

def _log_norm(beta: float) -> float:
    """log Z, Z = ∫ e^{−|x|^β/β} dx = 2β^{1/β}Γ(1 + 1/β)."""
    return math.log(2.0) + math.log(beta) / beta + special.gammaln(1.0 + 1.0 / beta)


def fisher_by_quadrature(beta: float) -> float:
    """E[(d/dx log f)²] = ∫ |x|^{2β−2} f(x) dx by quadrature (an independent check of the closed form)."""
    lz = _log_norm(beta)
    val, _ = integrate.quad(lambda x: x ** (2 * beta - 2) * math.exp(-x ** beta / beta - lz), 0.0, math.inf,
                            epsabs=0.0, epsrel=1e-12, limit=200)
    return 2.0 * val


def _expm1_complex(w: np.ndarray) -> np.ndarray:
    """e^w − 1 for complex w without cancellation: expm1(u)cos v − 2sin²(v/2) + i e^u sin v."""
    u, v = w.real, w.imag
    return (np.expm1(u) * np.cos(v) - 2.0 * np.sin(v / 2.0) ** 2) + 1j * np.exp(u) * np.sin(v)


def phi_minus_one(z: complex, a: float, beta: float) -> Tuple[complex, float]:
    r"""(φ − 1, quad's error estimate): φ(z; a) = E_Q[e^{zℓ_a}] = ∫ f(x)·e^{z(|x|^β − |x − a|^β)/β} dx, f the
    GG(β, 1) density; integrated as ∫ f·expm1(zℓ) (∫ f = 1), split at the kinks 0 and a."""
    lz = _log_norm(beta)

    def part(x: float, im: bool) -> float:
        ell = (abs(x) ** beta - abs(x - a) ** beta) / beta
        v = _expm1_complex(np.array(z * ell))
        return math.exp(-abs(x) ** beta / beta - lz) * float(v.imag if im else v.real)

    out, err = 0j, 0.0
    # the integrand decays like e^{−|x|^β/β + c·a|x|^{β−1}}: 60^{1/β}·2 covers it far below double precision
    big = 2.0 * (60.0 * beta) ** (1.0 / beta) + 4.0 * a
    for lo, hi in ((-big, 0.0), (0.0, a), (a, big)):
        with warnings.catch_warnings():  # tolerances below what double reaches: quad says so; its estimate is kept
            warnings.simplefilter("ignore", integrate.IntegrationWarning)
            re, e1 = integrate.quad(part, lo, hi, args=(False,), epsabs=1e-17, epsrel=1e-12, limit=400)
            im, e2 = integrate.quad(part, lo, hi, args=(True,), epsabs=1e-17, epsrel=1e-12, limit=400)
        out += re + 1j * im
        err += e1 + e2
    return out, err


def log_phi(z: complex, a: float, beta: float) -> Tuple[complex, float]:
    """(log φ(z; a), |error| of φ − 1 from quad): the log taken at 30 digits from φ − 1 (no cancellation)."""
    w, err = phi_minus_one(z, a, beta)
    with mpmath.workdps(30):
        lp = complex(mpmath.log1p(mpmath.mpc(w.real, w.imag)))
    return lp, err


def remainder_table(betas: Sequence[float], cs: Sequence[float], ys: Sequence[float], shifts: Sequence[float],
                    m: float) -> Dict:
    """Print and return max over y of the relative deviation and the decay at each (β, c, a) (a in units of m)."""
    out = {}
    print("relative deviation |r|/(I a^2 |z(z-1)|/2), r = log phi(z; a) - I a^2 z(z-1)/2, z = c + iy")
    print("| beta | c | a/m | at y = 0 | max over |z| <= 5 | max over |y| <= Y | at y | |phi(c+iY)|/phi(c) |"
          " I a^2 Y^2/2 | max quad err/|limit| |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for beta in betas:
        fi = fisher_information(beta)
        for c in cs:
            for s in shifts:
                a = s * m
                dev, worst_y, qerr, dec = [], None, 0.0, None
                phi_c = None
                for y in ys:
                    z = complex(c, y)
                    lp, err = log_phi(z, a, beta)
                    lim = fi * a * a * z * (z - 1) / 2.0
                    r = lp - lim
                    dev.append(abs(r) / abs(lim))
                    qerr = max(qerr, err / abs(lim))
                    if y == 0.0:
                        phi_c = lp.real
                    if y == max(ys):
                        dec = math.exp(lp.real - phi_c) if phi_c is not None else None
                k = int(np.argmax(dev))
                near = max(d for d, y in zip(dev, ys) if abs(complex(c, y)) <= 5.0)
                out[(beta, c, s)] = (max(dev), ys[k], dev[0], dec, near)
                print(f"| {beta:g} | {c:g} | {s:g} | {dev[0]:.3e} | {near:.3e} | {max(dev):.3e} | {ys[k]:g} |"
                      f" {dec:.4g} | {fi * a * a * max(ys) ** 2 / 2:.4g} | {qerr:.1e} |")
                sys.stdout.flush()
    return out


def _rho(beta: float, a0: float, c: float, ys: np.ndarray, n_a: int) -> Tuple[np.ndarray, np.ndarray]:
    """(ρ, λ) on ys: ρ(y) = the largest |r(c + iy; a)|/a², λ(y) = the largest Re log φ(c + iy; a)/a² (log|φ| per
    unit 2-mass) over a ∈ a0·{1/n_a, …, 1} (sampled: NOT bounds)."""
    fi = fisher_information(beta)
    rho = np.zeros(ys.size)
    lam = np.full(ys.size, -np.inf)
    for k in range(1, n_a + 1):
        a = a0 * k / n_a
        for i, y in enumerate(ys):
            z = complex(c, y)
            lp, _ = log_phi(z, a, beta)
            rho[i] = max(rho[i], abs(lp - fi * a * a * z * (z - 1) / 2.0) / (a * a))
            lam[i] = max(lam[i], lp.real / (a * a))
    return rho, lam


def contour_eta(beta: float, a0: float, masses: Sequence[float], ts: Sequence[float], cs: Sequence[float],
                y_max: float, n_a: int = 4, n_y: int = 161) -> None:
    r"""The implied error of H_α for a Base of 2-mass R (coordinates ≤ a0, p = 2) and the η that covers it.

    For each c: ρ, λ (:func:`_rho`, y on a grid of [0, Y], trapezoid between; NOT bounds). log M = Σ_i log φ(z; μ_i)
    = log M_G + E with |E| ≤ R·ρ and |M| ≤ e^{R·λ}, so |M − M_G| ≤ min(|M_G|(e^{Rρ} − 1), e^{Rλ} + |M_G|); the error
    over |y| ≤ Y is (1/π)∫_0^Y that·α^{1−c}/|z(z−1)| dy, the tail |y| > Y at most (1/π)(e^{Rλ(Y)} + |M_G(c+iY)|)α^{1−c}/Y
    (|z(z−1)| ≥ y², and |M| taken as non-increasing beyond Y: NOT checked). The smallest error over the c given;
    η: the smallest with H_α(N(√I(1+η)√R)) − H_α(N(√I√R)) ≥ that error."""
    fi = fisher_information(beta)
    ys = np.linspace(0.0, y_max, n_y)
    per_c = {}
    for c in cs:
        rho, lam = _rho(beta, a0, c, ys, n_a)
        per_c[c] = (rho, lam)
        print(f"beta {beta:g}, a0 {a0:g}, c {c:g}: rho(c) {rho[0]:.3e}, max over |y| <= 5 {rho[ys <= 5].max():.3e},"
              f" over |y| <= {y_max:g} {rho.max():.3e}; lambda(c) {lam[0]:.4g}, lambda(c + i{y_max:g}) {lam[-1]:.4g}"
              f" (limit I(c^2 - c - Y^2)/2 = {fi * (c * c - c - y_max ** 2) / 2:.4g})")
    print("| R | t = log alpha | H_alpha (Gaussian limit) | best c | |y|<=Y error | tail | relative error | implied eta |")
    print("|---|---|---|---|---|---|---|---|")
    for R in masses:
        s = math.sqrt(fi * R)
        for t in ts:
            best = None
            for c, (rho, lam) in per_c.items():
                z = c + 1j * ys
                zz = np.abs(z * (z - 1))
                mg = np.exp(fi * R / 2.0 * (z * (z - 1)).real)
                x = R * rho  # mg·(e^x − 1), as e^{log mg + x} where x > 1 (no inf·0)
                near = mg * np.expm1(np.minimum(x, 1.0))
                far = np.exp(fi * R / 2.0 * (z * (z - 1)).real + np.maximum(x, 1.0))
                dif = np.minimum(np.where(x <= 1.0, near, far), np.exp(R * lam) + mg)
                inner = float(integrate.trapezoid(dif / zz, ys)) * math.exp((1.0 - c) * t) / math.pi
                tail = (math.exp(R * lam[-1]) + mg[-1]) * math.exp((1.0 - c) * t) / (math.pi * y_max)
                if best is None or inner + tail < best[1] + best[2]:
                    best = (c, inner, tail)
            c, inner, tail = best
            err = inner + tail
            h0 = float(GGPair(s, 2.0).h_pq(np.array([math.exp(t)]), upper=False)[0])
            eta = _eta_cover(s, t, h0 + err)
            print(f"| {R:g} | {t:g} | {h0:.4e} | {c:g} | {inner:.2e} | {tail:.2e} | {err / h0:.2e} | {eta} |")
            sys.stdout.flush()


def shape_eta(beta: float, shifts: Sequence[float], ks: Sequence[int], n_t: int = 60) -> None:
    r"""The η that k equal coordinates of size a need: the smallest η with H_α(N(√I(1+η)·a√k)) ≥ H_α(shape) at every
    sampled α = e^t ≥ 1 (the pairs are symmetric, so α < 1 needs the same), t on [0, t_max] where the Gaussian's
    H ≥ 10⁻¹² (also the maximum over the t where that H ≥ 10⁻⁶: the bulk, without the deep tail). k = 1: the exact
    :class:`.gg_pair.GGPair` (to nearest); k > 1: the spread's dominating discrete pair
    (:func:`.spreads.exact_spread_pair`, slightly above the shape: the η printed is then slightly too large). A
    sampled maximum: NOT a bound. This is the remainder in the units of the ceiling's η, for a Base state whose
    2-mass R = k·a² is held by k coordinates."""
    fi = fisher_information(beta)
    print(f"beta {beta:g}: kappa/sqrt(I) - 1 = "
          + (f"{math.sqrt(2 * math.pi) * math.exp(-_log_norm(beta)) / math.sqrt(fi) - 1:.4f}"))
    print("| a | k | R = k a^2 | eta needed (max over t) | at t | max where H_G >= 1e-6 | eta at t = 0 |")
    print("|---|---|---|---|---|---|---|")
    for a in shifts:
        for k in ks:
            s = math.sqrt(fi * k) * a
            pair = GGPair(a, beta) if k == 1 else exact_spread_pair(1.0 / (a * math.sqrt(k)), beta, k, 2.0)
            t_max = s * s / 2.0 + s * 7.0  # the Gaussian's loss N(s²/2, s²) under P: H ≈ 10⁻¹² beyond
            ts = np.linspace(0.0, t_max, n_t)
            hs = np.asarray(pair.h_pq(np.exp(ts)), dtype=float) if k > 1 else pair.h_pq(np.exp(ts), upper=False)
            etas = []
            for t, h in zip(ts, hs):
                e = _eta_cover(s, float(t), float(h))
                etas.append(11.0 if e == "> 10" else float(e))
            i = int(np.argmax(etas))
            hg = GGPair(s, 2.0).h_pq(np.exp(ts), upper=False)
            bulk = max(e for e, h in zip(etas, hg) if h >= 1e-6)
            print(f"| {a:g} | {k} | {k * a * a:.4g} | {etas[i]:.4f} | {ts[i]:.3g} | {bulk:.4f} | {etas[0]:.4f} |")
            sys.stdout.flush()


def _eta_cover(s: float, t: float, target: float) -> str:
    """The smallest η (bisection to 1e-4) with H_{e^t}(N(s(1 + η))) ≥ target, as text ('> 10' if none)."""
    alpha = np.array([math.exp(t)])

    def h(eta: float) -> float:
        return float(GGPair(s * (1.0 + eta), 2.0).h_pq(alpha, upper=False)[0])

    if h(0.0) >= target:
        return "0"
    if h(10.0) < target:
        return "> 10"
    lo, hi = 0.0, 10.0
    while hi - lo > 1e-4:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if h(mid) >= target else (mid, hi)
    return f"{hi:.4f}"


def _at(text: str) -> Tuple[float, int, int]:
    q, steps, dim = text.split(",")
    return float(q), int(float(steps)), int(float(dim))


def main(argv: Optional[List[str]] = None) -> None:
    os.environ[CACHE_ENV] = "off"  # diagnostic tables are never stored where the library could read them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("ceiling", help="the table with an ideal Base (NOT a bound at eta = 0)")
    c.add_argument("--beta", type=float, default=2.5)
    c.add_argument("--p", type=float, default=2.0)
    c.add_argument("--sigma", type=float, default=1.0)
    c.add_argument("--spec", nargs="+", default=["above-a03"], choices=sorted(SPECS),
                   help="cell specs (default above-a03: 1.8k states, ~10 s)")
    c.add_argument("--eta", type=float, nargs="+", default=[0.0])
    c.add_argument("--at", type=_at, nargs="+", default=[QUICKSTART], metavar="Q,T,D")
    c.add_argument("--delta", type=float, default=1e-5)
    c.add_argument("--spread-k", type=int, nargs="*", default=[], help="exact equal spreads to print beside")
    c.add_argument("--abs-err", type=float, nargs="+", default=[0.0],
                   help="absolute error added to the Base's Gaussian curves at every alpha (beta != 2)")
    c.add_argument("--min-cells", type=float, default=0.0,
                   help="the ideal Gaussian only in Base states of p-mass >= this times a_0^p (default 0: all)")
    fl = sub.add_parser("floor", help="the envelope of the limit and one-coordinate-plus-limit shapes (the table route's floor)")
    fl.add_argument("--beta", type=float, default=1.5)
    fl.add_argument("--sigma", type=float, default=1.0)
    fl.add_argument("--a", type=float, nargs="+", default=[0.3, 0.5, 0.7, 0.9])
    fl.add_argument("--at", type=_at, nargs="+", default=[QUICKSTART], metavar="Q,T,D")
    fl.add_argument("--delta", type=float, default=1e-5)
    fl.add_argument("--shape", type=lambda x: tuple(float(v) for v in x.split(",")), nargs="*", default=[],
                    metavar="A1,A2,...", help="coordinates (units of m) beside the limit of the rest, also enveloped")
    r = sub.add_parser("remainder", help="per-coordinate complex log-moment against its Gaussian limit")
    r.add_argument("--beta", type=float, nargs="+", default=[1.5])
    r.add_argument("--c", type=float, nargs="+", default=[2.0])
    r.add_argument("--y-max", type=float, default=20.0)
    r.add_argument("--n-y", type=int, default=11)
    r.add_argument("--a", type=float, nargs="+", default=[0.03, 0.1], help="shifts in units of m")
    r.add_argument("--sigma", type=float, default=1.0)
    k = sub.add_parser("contour", help="the implied error of a Base's H_alpha and the eta that covers it")
    k.add_argument("--beta", type=float, default=1.5)
    k.add_argument("--a0", type=float, default=0.1)
    k.add_argument("--c", type=float, nargs="+", default=[1.2, 2.0, 4.0], help="abscissae tried (the best used)")
    k.add_argument("--y-max", type=float, default=20.0)
    k.add_argument("--mass", type=float, nargs="+", default=[0.01, 0.1, 1.0], help="2-masses R (m = 1)")
    k.add_argument("--t", type=float, nargs="+", default=[0.0, 0.5], help="log alpha")
    e = sub.add_parser("shapes", help="the eta that k equal small coordinates need against the Gaussian limit")
    e.add_argument("--beta", type=float, nargs="+", default=[1.5])
    e.add_argument("--a", type=float, nargs="+", default=[0.03, 0.1])
    e.add_argument("--k", type=int, nargs="+", default=[1, 4, 16])
    f = sub.add_parser("fisher", help="I_beta: closed form against quadrature")
    f.add_argument("--beta", type=float, nargs="+", default=[1.2, 1.5, 1.8, 2.0, 2.5, 3.0])
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.cmd == "ceiling":
        ceiling_rows(args.beta, args.p, args.sigma, args.spec, args.eta, args.at, args.delta, args.spread_k,
                     args.abs_err, args.min_cells)
    elif args.cmd == "floor":
        envelope_floor(args.beta, args.sigma, args.a, args.at, args.delta, shapes=args.shape)
    elif args.cmd == "remainder":
        ys = list(np.linspace(0.0, args.y_max, args.n_y))
        remainder_table(args.beta, args.c, ys, args.a, 1.0 / args.sigma)
    elif args.cmd == "contour":
        contour_eta(args.beta, args.a0, args.mass, args.t, args.c, args.y_max)
    elif args.cmd == "shapes":
        for b in args.beta:
            shape_eta(b, args.a, args.k)
    else:
        for b in args.beta:
            closed, quad = fisher_information(b), fisher_by_quadrature(b)
            print(f"beta {b:g}: I_beta closed form {closed:.12f}, quadrature {quad:.12f}, rel. diff "
                  f"{abs(closed - quad) / closed:.1e}")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
