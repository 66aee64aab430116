"""Companion analyses of the GG mechanism, beside the certified accountant (see docs/companions.md).

:mod:`.clt` (CLT / Gaussian-DP estimates, not guarantees), :mod:`.rdp` (a Rényi-DP upper bound over the evaluated
shift shapes), :mod:`.bounded` (bounded-support GG mechanisms, rectification), :mod:`.counting` (GG counting
queries: ℓ∞ error and calibration).
"""
