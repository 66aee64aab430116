r"""Full-batch Gaussian runs in closed form: every segment at q = 1 and β = 2 is one Gaussian pair.

At β = 2 one step with sampling rate q = 1 is the Gaussian pair (N(μ_s, I), N(0, I)) in noise units, where
‖μ_s‖₂ is the largest ℓ2 shift the clipping allows (:func:`.shapes.shape_ks`: 1/σ for p ≤ 2, dimension
free; (1/σ)·d^{1/2 − 1/p} for p > 2), with the noisy count of adaptive clipping one more coordinate of shift 1/σ_c.
The T_s-fold composition over the segments is, up to rotation, the single pair (N(μ, 1), N(0, 1)) with

    μ = sqrt(Σ_s T_s ‖μ_s‖₂²)

(independent coordinates; rotation invariance). Its privacy profile is symmetric in add/remove and has the closed
form of Balle & Wang (2018, Thm 8)

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2),

decreasing in ε. :func:`gaussian_delta` evaluates it in 50-digit arithmetic (mpmath) and
:func:`gaussian_epsilon` returns the smallest double ε with δ(ε) ≤ δ by bisection, rounded up, with its residual
checked (docs/accounting.md, Lemma G). No grid: any T and any δ the API accepts.
"""

from __future__ import annotations

import math
from typing import Sequence

import mpmath

from .checks import AccountingError
from .history import Segment
from .shapes import shape_ks

__all__ = ["is_full_batch_gaussian", "full_batch_shift", "gaussian_delta", "gaussian_delta_upper", "gaussian_epsilon"]

#: working precision (decimal digits) of μ; δ(ε) is evaluated with _DPS + log10(1/δ) digits (:func:`_dps`)
_DPS = 50


def _dps(delta: float) -> int:
    """Digits for δ(ε) near ``delta``: the two terms of the closed form are ≤ 1 and their difference ≈ δ, so at most
    log10(1/δ) digits cancel; _DPS more remain."""
    return _DPS + max(0, math.ceil(-math.log10(delta)))


def is_full_batch_gaussian(segs: Sequence[Segment]) -> bool:
    """Whether every segment is a β = 2, q = 1 step with noise (its composition is one Gaussian pair)."""
    return bool(segs) and all(isinstance(s, Segment) and s.beta == 2.0 and s.sample_rate == 1.0 and not s.noiseless
                              for s in segs)


def full_batch_shift(segs: Sequence[Segment]) -> mpmath.mpf:
    r"""μ = sqrt(Σ_s T_s ‖μ_s‖₂²) of the composed Gaussian pair (module docstring), in ``_DPS`` digits.

    ‖μ_s‖₂² = k^{1 − 2/p}/σ² with k the spread of :func:`.shapes.shape_ks` (1 for p ≤ 2, d for p > 2), computed
    in ``_DPS`` digits from the user's doubles (the float shift of :func:`.shapes.candidate_shapes` can be rounded
    down), plus 1/σ_c² for a count query."""
    with mpmath.workdps(_DPS):
        total = mpmath.mpf(0)
        for s in segs:
            (k,) = shape_ks(2.0, s.dim, s.clip_norm_p)
            expo = 1 if math.isinf(s.clip_norm_p) else 1 - 2 / mpmath.mpf(s.clip_norm_p)
            sq = mpmath.mpf(k) ** expo / mpmath.mpf(s.noise_multiplier) ** 2
            if s.count_noise_multiplier is not None:
                sq += 1 / mpmath.mpf(s.count_noise_multiplier) ** 2
            total += s.steps * sq
        return mpmath.sqrt(total)


def gaussian_delta(mu: mpmath.mpf, epsilon: float, dps: int = _DPS) -> mpmath.mpf:
    r"""δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) of (N(μ, 1), N(0, 1)), in ``dps`` digits."""
    with mpmath.workdps(dps):
        e = mpmath.mpf(epsilon)
        return mpmath.ncdf(-e / mu + mu / 2) - mpmath.exp(e) * mpmath.ncdf(-e / mu - mu / 2)


def gaussian_delta_upper(mu: mpmath.mpf, epsilon: float) -> float:
    r"""δ(ε) of (N(μ, 1), N(0, 1)) rounded up to a double: evaluated with digits added until at least _DPS − 10 of
    them survive the cancellation of its two terms (each ≤ 1), then the next double up."""
    dps = _DPS
    while True:
        d = gaussian_delta(mu, epsilon, dps)
        if d > mpmath.mpf(10) ** (10 - dps) or dps > 4000:
            break
        dps *= 2
    if d <= mpmath.mpf(10) ** (10 - dps):  # below 10^{-3990}: 0 up to the last double
        return 5e-324
    return float(min(math.nextafter(float(d), math.inf), 1.0))


def gaussian_epsilon(mu: mpmath.mpf, delta: float) -> float:
    r"""The smallest double ε ≥ 0 with δ(ε) ≤ ``delta`` for the pair (N(μ, 1), N(0, 1)), rounded up.

    Bisection on [0, hi] in :func:`_dps` digits (δ(ε) is decreasing; hi doubled from μ²/2 + 4μ until
    δ(hi) ≤ δ) to a bracket of 10^{-30} relative, then the upper end is rounded up to a double and checked:
    δ(ε) ≤ δ·(1 − 10^{-30}) (the evaluation error, ≤ 10^{-_DPS} relative after cancellation, is far below that
    margin; AccountingError otherwise), and lowered while the double below passes too, so ε is the exact root
    rounded up to a double (∞ where that exceeds the largest double).
    """
    delta = float(delta)
    dps = _dps(delta)

    def d(e):
        return gaussian_delta(mu, e, dps)

    with mpmath.workdps(dps):
        target = mpmath.mpf(delta) * (1 - mpmath.mpf(10) ** -30)
        if d(0.0) <= target:
            return 0.0
        hi = mu * mu / 2 + 4 * mu + 1
        for _ in range(200):
            if d(hi) <= target:
                break
            hi *= 2
        else:
            raise AccountingError(f"full-batch Gaussian (mu={float(mu):.6g}): no epsilon with delta(epsilon) <= "
                                  f"{delta:g} below {float(hi):.3g}")
        lo = mpmath.mpf(0)
        while hi - lo > mpmath.mpf(10) ** -30 * hi:
            mid = (lo + hi) / 2
            if d(mid) <= target:
                hi = mid
            else:
                lo = mid
        eps = float(hi)
        if math.isinf(eps):
            return math.inf
        if mpmath.mpf(eps) < hi:  # round up to the next double
            eps = math.nextafter(eps, math.inf)
        if not (math.isfinite(eps) and d(eps) <= target):
            raise AccountingError(f"full-batch Gaussian (mu={float(mu):.6g}): the rounded-up epsilon {eps!r} "
                                  f"fails its residual check at delta={delta:g}")
        while eps > 0.0 and d(math.nextafter(eps, 0.0)) <= target:  # a double inside the bracket
            eps = math.nextafter(eps, 0.0)
        return eps
