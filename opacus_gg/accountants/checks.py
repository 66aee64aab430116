"""Self-checks of the numerics under a proven ε, and the one error type they raise.

Every primitive on a proven path (root-finds, quadratures, PMFs, FFT compositions) checks its own result
here before returning it: a residual, a total mass, non-negativity, finiteness, a round-off budget. A failed
check raises :class:`AccountingError`, which names the setting and what the user can change; nothing on a
proven path turns a NaN into 0 or passes an unchecked number on.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["AccountingError", "LossBeyondGrid", "check_finite", "check_pmf", "mass_budget", "UNIT_ROUNDOFF",
           "LEAST_SUBNORMAL", "fft_eta", "fft_convolution_error"]


class AccountingError(ArithmeticError):
    """A numerical self-check under a proven ε failed: the library refuses to print a number it cannot prove.

    The message names the setting (β, σ, q, T, δ, d, p as known) and what the user can change.
    """


class LossBeyondGrid(AccountingError, ValueError):
    """The privacy loss lies (almost all) beyond the loss grid the PRV composition can hold: no check failed, the
    setting is out of the PRV's range (the proven Rényi bound is published instead, and the warning says why).
    A ValueError too, as the PRV's other out-of-range refusals."""


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
#: the least positive float64, 2⁻¹⁰⁷⁴ (a result below the normal range errs by up to this, absolutely)
LEAST_SUBNORMAL = float(np.finfo(np.float64).smallest_subnormal)
#: relative error of one complex product fl(z·w) in float64: √2·γ₂ (Higham, Lemma 3.5), γ₂ = 2u/(1 − 2u)
COMPLEX_PRODUCT_ROUNDOFF = math.sqrt(2.0) * 2.0 * UNIT_ROUNDOFF / (1.0 - 2.0 * UNIT_ROUNDOFF)


#: relative error assumed for one twiddle factor of scipy's FFT (pocketfft forms them as products of two table
#: entries: not correctly rounded, so 4u rather than Higham's μ = u)
TWIDDLE_ROUNDOFF = 4.0 * UNIT_ROUNDOFF


def fft_eta(n: int, unit_roundoff: float = UNIT_ROUNDOFF) -> float:
    r"""Relative ℓ2 error of one length-n (inverse) FFT, ‖fl(Fx) − Fx‖₂ ≤ η_n‖Fx‖₂: Higham's form (*Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., Thm 24.2) η_n = tη₁/(1 − tη₁), t = ⌈log₂ n⌉, η₁ = μ + γ₄(√2 + μ),
    with μ = :data:`TWIDDLE_ROUNDOFF` (4u; u = ``unit_roundoff``: float64's, or long double's for a transform
    computed in long double, Lemma R8). The theorem is for radix-2 Cooley–Tukey with twiddles of error μ; scipy's
    pocketfft mixes radices 2–5 and real passes, so for it this is an *assumption*, checked by measurement (the
    observed ℓ2 errors are 0.03–0.17·u·log₂n at n = 4050 … 131072, ≥ 50× below η_n; docs/accounting.md Lemma R3)."""
    t = max(math.ceil(math.log2(max(n, 2))), 1)
    u = unit_roundoff
    gamma4 = 4.0 * u / (1.0 - 4.0 * u)
    mu = TWIDDLE_ROUNDOFF * (u / UNIT_ROUNDOFF)
    eta1 = mu + gamma4 * (math.sqrt(2.0) + mu)
    return t * eta1 / (1.0 - t * eta1)


def fft_convolution_error(l2a, l1a, l2b, l1b, n_fft: int, unit_roundoff: float = UNIT_ROUNDOFF):
    r"""ℓ2 (hence ℓ∞) bound on the round-off of the linear convolution a * b computed as irfft(rfft(a)·rfft(b)) on
    N = n_fft points, from upper bounds on ‖a‖₂, ‖a‖₁, ‖b‖₂, ‖b‖₁ (docs/accounting.md, Lemma R3(b)), η = η_N
    (:func:`fft_eta`), g = √2γ₂ (one complex product):

        D = (1 + g)·(η(‖a‖₂‖b‖₁ + ‖a‖₁‖b‖₂) + η²√N‖a‖₂‖b‖₂) + g‖a‖₂‖b‖₁,
        E = ((1 + η + 2u)·D + (η + 2u)‖a‖₂‖b‖₁)·(1 + 8u).

    The transforms err by ‖ΔA‖₂ ≤ η√N‖a‖₂ (Parseval), |B_k| ≤ ‖b‖₁, ‖ΔB‖∞ ≤ ‖ΔB‖₂, so the product of the computed
    transforms errs by ≤ η√N(‖a‖₂‖b‖₁ + ‖a‖₁‖b‖₂) + η²N‖a‖₂‖b‖₂, and its rounding adds g times its modulus; the
    inverse divides ℓ2 norms by √N (D is the error of its input, so scaled) and adds (η + 2u) (the transform and the
    rounded 1/N) times the ℓ2 norm of its exact output, ≤ ‖a * b‖₂ + D ≤ ‖a‖₂‖b‖₁ + D (Young). 1 + 8u covers
    evaluating this formula (in float64, whatever ``unit_roundoff``, the u of the arithmetic of the transforms and
    products: float64's, or long double's, Lemma R8). Works on arrays of norms (one bound per row)."""
    u = unit_roundoff
    eta = fft_eta(n_fft, u)
    g = math.sqrt(2.0) * 2.0 * u / (1.0 - 2.0 * u)
    one = np.result_type(l2a, l1a, l2b, l1b, np.float64).type(1.0)  # 1 + g ≠ 1 where the norms are long double
    d = (one + g) * (eta * (l2a * l1b + l1a * l2b) + eta * eta * math.sqrt(n_fft) * l2a * l2b) + g * l2a * l1b
    return ((one + eta + 2.0 * u) * d + (eta + 2.0 * u) * l2a * l1b) * (1.0 + 8.0 * UNIT_ROUNDOFF)


def mass_budget(n: int) -> float:
    r"""Round-off allowed in the total mass of an n-point PMF built by differences or products of rounded
    numbers: 64·n·u + 10^{−12} (u = 2^{−53}); docs/accounting.md, Lemma R2."""
    return 64.0 * n * UNIT_ROUNDOFF + 1e-12
