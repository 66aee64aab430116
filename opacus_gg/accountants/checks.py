"""Self-checks of the numerics under a proven ε, and the one error type they raise.

Every primitive on a proven path (root-finds, quadratures, PMFs, FFT compositions) checks its own result
here before returning it: a residual, a total mass, non-negativity, finiteness, a round-off budget. A failed
check raises :class:`AccountingError`, which names the setting and what the user can change; nothing on a
proven path turns a NaN into 0 or passes an unchecked number on.
"""

from __future__ import annotations

__all__ = ["AccountingError"]


class AccountingError(ArithmeticError):
    """A numerical self-check under a proven ε failed: the library refuses to print a number it cannot prove.

    The message names the setting (β, σ, q, T, δ, d, p as known) and what the user can change.
    """
