"""The one formatter for printed privacy numbers: exact decimal rounding in the safe direction.

A printed upper bound (ε, δ, σ's ε) is rounded **up** and a printed lower bound **down**, exactly
(``Decimal(x)`` is the binary float's exact value, then ``ROUND_CEILING`` / ``ROUND_FLOOR``), so the
text is never on the wrong side of the computed number: ``fmt_up(2.960000000000004, 2) == "2.97"``.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

__all__ = ["DIGITS", "fmt_up", "fmt_down", "fmt_up_significant", "solver_progress"]

#: decimals printed by default
DIGITS = 4


def _fmt(x: float, digits: int, rounding: str) -> str:
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=rounding))


def fmt_up(x: float, digits: int = DIGITS) -> str:
    """x rounded *up* to ``digits`` decimals, exactly: ⌈x·10^digits⌉/10^digits (for upper bounds)."""
    return _fmt(x, digits, ROUND_CEILING)


def fmt_down(x: float, digits: int = DIGITS) -> str:
    """x rounded *down* to ``digits`` decimals, exactly: ⌊x·10^digits⌋/10^digits (for lower bounds)."""
    return _fmt(x, digits, ROUND_FLOOR)


def fmt_up_significant(x: float, significant: int = 5) -> str:
    """x > 0 rounded *up* to ``significant`` significant digits (at least 4 decimals), exactly, for bounds that
    span decades (a TPR bound at FPR 1e-5 and at 0.1): ``fmt_up_significant(0.00414071) == "0.0041408"``."""
    x = float(x)
    if not (math.isfinite(x) and x > 0):
        return fmt_up(x)
    return fmt_up(x, max(DIGITS, significant - 1 - math.floor(math.log10(x))))


def solver_progress(sigma: float, epsilon: float, target: float) -> str:
    """One line of the σ solve's progress: the σ tried and its ε (rounded up), marked when above the target."""
    return f"try sigma = {sigma:.4f}: epsilon = {fmt_up(epsilon)}" + (" (above target)" if epsilon > target else "")
