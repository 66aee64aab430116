"""Numerical evidence for Conjecture F2 of docs/accounting.md (NOT a proof; nothing here feeds a printed ε).

``python3 benchmarks/fisher_conjecture.py [--betas 1.2,1.5] [--mp] [--epsilon]``:
  scan   the ratio L_j(a) / (c_j a²), c_j = j(j−1)·I_β/2, by float64 quadrature of M − 1 = E_Q[e^{jℓ} − 1 − j(e^ℓ − 1)]
         (no cancellation against 1) over j ≤ 256 and 49 shifts a ∈ [1e-5, 10]: its maximum and whether it is
         non-increasing in a;
  --mp   the ratio − 1 at small a in 40-digit arithmetic (float64 cannot resolve it below ~1e-11);
  --epsilon  the ε that S_j ≤ c_j m² would give (σ = 1, q = 0.001, T = 1e5, δ = 1e-5, p ≤ 2, any d).
"""

from __future__ import annotations

import argparse
import math
import warnings

import mpmath
import numpy as np
from opacus.accountants.analysis.rdp import get_privacy_spent
from scipy import integrate, special

from opacus_gg.accountants.ball_rdp import subsampled_rdp_upper
from opacus_gg.accountants.fisher import fisher_information
from opacus_gg.accountants.renyi import DEFAULT_ORDERS
from opacus_gg.formatting import fmt_up

JS = [2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256]


def _log_moment(j: int, a: float, beta: float) -> float:
    """L_j(a) = log(1 + ∫ q·φ_j(ℓ)) by float64 quadrature (pieces split at 0, a and the integrand's peak)."""
    log_z = math.log(2.0) + math.log(beta) / beta + special.gammaln(1.0 + 1.0 / beta)

    def f(x):
        ax = abs(x) ** beta / beta
        ell = ax - abs(x - a) ** beta / beta
        if j * ell > 30.0:  # no cancellation here; keep the exponents together (β > 2: ℓ is unbounded)
            return math.exp(j * ell - ax - log_z) - j * math.exp(ell - ax - log_z) + (j - 1) * math.exp(-ax - log_z)
        return (math.expm1(j * ell) - j * math.expm1(ell)) * math.exp(-ax - log_z)

    pts = [0.0, a]
    if beta > 1:
        r = ((j - 1.0) / j) ** (1 / (beta - 1))
        if r < 1 and a / (1 - r) < 1e6:
            pts.append(a / (1 - r))
    pts = sorted(set(pts))
    total = 0.0
    for lo, hi in [(-math.inf, pts[0])] + list(zip(pts[:-1], pts[1:])) + [(pts[-1], math.inf)]:
        total += integrate.quad(f, lo, hi, limit=400, epsabs=0.0, epsrel=1e-12)[0]
    return math.log1p(total)


def scan(beta: float) -> None:
    c0 = fisher_information(beta) / 2
    worst, increasing = (-math.inf, 0, 0.0), 0
    for j in JS:
        prev = math.inf
        for a in np.logspace(-5, 1, 49):
            try:
                lm = _log_moment(j, float(a), beta)
            except OverflowError:
                break
            if not math.isfinite(lm) or lm > 600:
                break
            r = lm / (j * (j - 1) * c0 * a * a)
            worst = max(worst, (r, j, float(a)))
            increasing += r > prev * (1 + 1e-9)
            prev = r
    print(f"beta={beta}: max ratio - 1 = {worst[0] - 1:.3e} at j={worst[1]}, a={worst[2]:.2e}; "
          f"steps where the ratio increases in a: {increasing}", flush=True)


def mp_ratio(j: int, a: str, beta: float) -> mpmath.mpf:
    with mpmath.workdps(40):
        b, a = mpmath.mpf(beta), mpmath.mpf(a)
        i_b = b ** ((2 * b - 2) / b) * mpmath.gamma(2 - 1 / b) / mpmath.gamma(1 / b)
        log_z = mpmath.log(2) + mpmath.log(b) / b + mpmath.loggamma(1 + 1 / b)

        def phi(x):
            ax = abs(x) ** b / b
            ell = ax - abs(x - a) ** b / b
            return (mpmath.expm1(j * ell) - j * mpmath.expm1(ell)) * mpmath.exp(-ax - log_z)

        peak = a / (1 - ((mpmath.mpf(j) - 1) / j) ** (1 / (b - 1)))
        pts = sorted({-mpmath.inf, -1, 0, a, 2 * a, 1, peak, mpmath.inf})
        return mpmath.log1p(mpmath.quad(phi, pts, maxdegree=10)) / (j * (j - 1) * i_b * a * a / 2) - 1


def fisher_epsilon(beta: float, sigma=1.0, q=0.001, steps=10**5, delta=1e-5) -> float:
    j = np.arange(max(DEFAULT_ORDERS) + 1, dtype=np.float64)
    logm = j * (j - 1) * fisher_information(beta) / (2 * sigma**2)
    eps = 0.0
    for rdp in subsampled_rdp_upper(DEFAULT_ORDERS, q, logm).values():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eps = max(eps, get_privacy_spent(orders=DEFAULT_ORDERS, rdp=steps * rdp, delta=delta)[0])
    return eps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--betas", default="1,1.1,1.2,1.3,1.4,1.5,1.6,1.7,1.8,1.9,1.95,1.99,2,2.5,3")
    ap.add_argument("--mp", action="store_true")
    ap.add_argument("--epsilon", action="store_true")
    args = ap.parse_args()
    warnings.simplefilter("ignore", integrate.IntegrationWarning)
    for beta in (float(b) for b in args.betas.split(",")):
        scan(beta)
    if args.mp:
        for beta in (1.5, 1.9, 1.99):
            for j in (2, 16):
                print(beta, j, [mpmath.nstr(mp_ratio(j, a, beta), 6) for a in ("1e-6", "1e-5", "1e-4", "1e-3", "1e-2")])
    if args.epsilon:
        for beta in (1.2, 1.5, 1.8):
            print(f"beta={beta}: eps {fmt_up(fisher_epsilon(beta))} (q=0.001, T=1e5); "
                  f"{fmt_up(fisher_epsilon(beta, q=0.01, steps=1000))} (q=0.01, T=1000)")


if __name__ == "__main__":
    main()
