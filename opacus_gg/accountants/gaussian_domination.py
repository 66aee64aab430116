r"""One Generalized Gaussian coordinate is dominated by a Gaussian one (1 ≤ β ≤ 2): Lemma N of docs/accounting.md.

Units: noise GG(β, 1) per coordinate, density f(x) = e^{−|x|^β/β}/(2β^{1/β}Γ(1 + 1/β)), CDF F; shift a ≥ 0; Φ, φ
the standard normal CDF and density. For 1 ≤ β ≤ 2 and every a ≥ 0

    (GG(β, 1) + a, GG(β, 1)) ≼ (N(κ_β·a, 1), N(0, 1)),   κ_β = f(0)·√(2π) = √(2π) / (2β^{1/β}Γ(1 + 1/β)),

and by tensorization and the Gaussian's rotation invariance every shift μ ∈ ℝ^d is dominated by one Gaussian
coordinate shifted by κ_β·‖μ‖_2. Why: the loss ℓ_a(x) = (|x|^β − |x − a|^β)/β is non-decreasing in x, so the
threshold tests are optimal and the two trade-off curves are F(F^{−1}(u) − a) and Φ(Φ^{−1}(u) − κa); with
g = Φ^{−1}∘F (odd, increasing) the claim is g(x) − g(x − a) ≤ κa, which holds because g' = f/φ(g) ≤ g'(0) = κ_β:
for x ≥ 0 that is g(x)² ≤ 2x^β/β, i.e. Q(1/β, y) ≥ Q(1/2, y) at y = x^β/β (Q the regularized upper incomplete
gamma function: |X|^β/β ~ Gamma(1/β), Z²/2 ~ Gamma(1/2), and the gamma law increases stochastically with its
shape). κ_β is the least such constant (as a → 0 the total variation is f(0)·a against κa/√(2π)); it is 1 at
β = 2 and √(π/2) at β = 1. Against the Gaussian limit of many small coordinates (variance I_β, :mod:`.fisher`):
κ_β/√I_β = 1.140 at β = 1.5, 1.053 at 1.8, 1.026 at 1.9. For β > 2 the shape order reverses and the lemma fails.
"""

from __future__ import annotations

import functools
import math

from scipy import special

from .shapes import exact_up

__all__ = ["gaussian_domination_applies", "gaussian_domination_constant"]

#: relative round-up of κ_β (its few floating-point operations err by a few ulps)
_FP_SLACK = 1e-12


def gaussian_domination_applies(beta: float) -> bool:
    """Whether Lemma N holds: 1 ≤ β ≤ 2."""
    return 1.0 <= beta <= 2.0


def gaussian_domination_constant(beta: float) -> float:
    r"""κ_β = √(2π)/(2β^{1/β}Γ(1 + 1/β)) = f(0)·√(2π), rounded up: GG(β, 1) shifted by a is dominated by
    N(κ_β·a, 1) against N(0, 1), for every a ≥ 0 (1 ≤ β ≤ 2; ValueError outside)."""
    if not gaussian_domination_applies(beta):
        raise ValueError(f"the Gaussian domination of a GG coordinate needs 1 <= beta <= 2, got {beta}")
    return _constant_up(float(beta))


@functools.lru_cache(maxsize=256)
def _constant_up(beta: float) -> float:
    """κ_β as before in floats (scipy's gammaln, raised by 10⁻¹²), and never below the least float ≥ the exact κ_β
    decided in interval arithmetic (:func:`.shapes.exact_up`: mpmath's interval Γ): the margin rested on
    gammaln's measured accuracy; now the max makes the float provably ≥ κ_β, and where the margin holds (every β
    tested) it is the same float as before."""
    log_k = 0.5 * math.log(2.0 * math.pi) - math.log(2.0) - math.log(beta) / beta - special.gammaln(1.0 + 1.0 / beta)
    return max(math.exp(log_k) * (1.0 + _FP_SLACK),
               exact_up(lambda c: c.sqrt(2 * c.pi) / (2 * c.mpf(beta) ** (1 / c.mpf(beta)) * c.gamma(1 + 1 / c.mpf(beta)))))
