"""Companion analyses of the GG mechanism, beside the certified accountant (see docs/companions.md).

:mod:`.clt` (CLT / Gaussian-DP estimates, not guarantees), :mod:`.rdp` (a Rényi-DP upper bound over the evaluated
shift shapes), :mod:`.bounded` (bounded-support GG mechanisms, rectification), :mod:`.counting` (GG counting
queries: ℓ∞ error and calibration).
"""

# The certified accountant (accountants/ball_rdp.py, accountants/prv_variable.py) still reads the per-coordinate
# Rényi moments from .rdp, and .rdp reads the shift shapes from the accountants: importing the accountants
# first resolves that cycle whichever module a user imports first.
from .. import accountants  # noqa: F401
