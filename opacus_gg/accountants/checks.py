"""Self-checks of the numerics under a proven ε, and the one error type they raise.

Every primitive on a proven path (root-finds, quadratures, PMFs, FFT compositions) checks its own result
here before returning it: a residual, a total mass, non-negativity, finiteness, a round-off budget. A failed
check raises :class:`AccountingError`, which names the setting and what the user can change; nothing on a
proven path turns a NaN into 0 or passes an unchecked number on.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["AccountingError", "check_finite", "check_pmf", "mass_budget", "UNIT_ROUNDOFF", "fft_eta",
           "fft_convolution_error"]


class AccountingError(ArithmeticError):
    """A numerical self-check under a proven ε failed: the library refuses to print a number it cannot prove.

    The message names the setting (β, σ, q, T, δ, d, p as known) and what the user can change.
    """


def check_finite(values, what: str) -> None:
    """AccountingError unless every entry of ``values`` is finite (no NaN, no ±∞)."""
    arr = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise AccountingError(f"{what}: {bad} of {arr.size} values are NaN or infinite")


def check_pmf(pmf: np.ndarray, what: str, *, mass_budget: float, inf_mass: float = 0.0,
              probability: bool = False) -> float:
    r"""Check a (sub-)probability mass function and return its finite mass m = Σ pmf.

    Finite, non-negative, and m + ``inf_mass`` ≤ 1 + ``mass_budget``; with ``probability`` also
    m + ``inf_mass`` ≥ 1 − ``mass_budget`` (a law that should be a probability). AccountingError otherwise.
    """
    check_finite(pmf, what)
    if np.size(pmf) and float(np.min(pmf)) < 0.0:
        raise AccountingError(f"{what}: negative mass {float(np.min(pmf)):.3g}")
    m = float(np.sum(pmf))
    total = m + float(inf_mass)
    if not (total <= 1.0 + mass_budget) or (probability and not total >= 1.0 - mass_budget):
        raise AccountingError(f"{what}: total mass {total!r} is not within {mass_budget:.3g} of "
                              f"{'1' if probability else '[0, 1]'}")
    return m


#: unit round-off of float64
UNIT_ROUNDOFF = float(np.finfo(np.float64).eps) / 2.0
#: relative error of one complex product fl(z·w) in float64: √2·γ₂ (Higham, Lemma 3.5), γ₂ = 2u/(1 − 2u)
COMPLEX_PRODUCT_ROUNDOFF = math.sqrt(2.0) * 2.0 * UNIT_ROUNDOFF / (1.0 - 2.0 * UNIT_ROUNDOFF)


def fft_eta(n: int) -> float:
    r"""Relative ℓ2 error of one length-n (inverse) FFT: ‖fl(Fx) − Fx‖₂ ≤ 6·u·⌈log₂ n⌉·‖Fx‖₂ (Higham, *Accuracy
    and Stability of Numerical Algorithms*, Thm 24.2, twiddle factors correctly rounded)."""
    return 6.0 * UNIT_ROUNDOFF * max(math.ceil(math.log2(max(n, 2))), 1)


def fft_convolution_error(l2a, l1a, l2b, l1b, n_fft: int):
    r"""ℓ2 (hence ℓ∞) bound on the round-off of the linear convolution a * b computed as irfft(rfft(a)·rfft(b)) on
    n_fft points, from upper bounds on ‖a‖₂, ‖a‖₁, ‖b‖₂, ‖b‖₁ (docs/accounting.md, Lemma R3(b)):
    η(‖a‖₂‖b‖₁ + ‖a‖₁‖b‖₂) + (√2γ₂ + η)(1 + η)‖a‖₂‖b‖₁, η = :func:`fft_eta`(n_fft).

    The transforms err by ≤ η√N‖a‖₂ and |B_k| ≤ ‖b‖₁ (so the product of transforms by ≤ η√N(‖a‖₂‖b‖₁ +
    ‖a‖₁‖b‖₂) to first order, the second-order term η²… is inside the factor 1 + η), the complex products by
    √2γ₂|A_kB_k| (ℓ2: √2γ₂√N‖a‖₂‖b‖₁), the inverse divides ℓ2 norms by √N and adds η times its output's norm
    (≤ (1 + η)‖a‖₂‖b‖₁, Young: ‖a * b‖₂ ≤ ‖a‖₂‖b‖₁). Works on arrays of norms (one bound per row)."""
    eta = fft_eta(n_fft)
    return (eta * (l2a * l1b + l1a * l2b) + (COMPLEX_PRODUCT_ROUNDOFF + eta) * l2a * l1b) * (1.0 + eta) ** 2


def mass_budget(n: int) -> float:
    r"""Round-off allowed in the total mass of an n-point PMF built by differences or products of rounded
    numbers: 64·n·u + 10^{−12} (u = 2^{−53}); docs/accounting.md, Lemma R2."""
    return 64.0 * n * UNIT_ROUNDOFF + 1e-12
