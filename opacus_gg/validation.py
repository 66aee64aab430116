"""Shared input validators: each returns the cleaned value or raises ``ValueError`` naming the
parameter and its allowed range. Import these rather than re-checking by hand.

Upper bounds where the numerics need them (every accepted value gives a finite proven ε, ``inf`` with its
reason, or one clear error): β ≤ :data:`BETA_MAX`, d ≤ :data:`DIM_MAX`, T ≤ :data:`STEPS_MAX`,
σ = 0 or :data:`NOISE_MULTIPLIER_MIN` ≤ σ ≤ :data:`NOISE_MULTIPLIER_MAX`, rectify bound ≤ :data:`RECTIFY_MAX`.

Every noise parameter (the gradient noise's ``noise_multiplier``, the count's ``count_noise_multiplier`` and
``unclipped_num_std``, the companions' σ, PATE's noise) passes :func:`validate_noise_multiplier`, one rule: its
noise in units of its sensitivity lies in [NOISE_MULTIPLIER_MIN, NOISE_MULTIPLIER_MAX] (docs/accounting.md,
"Validated ranges")."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import List, Optional, Sequence, Union

__all__ = [
    "validate_beta",
    "validate_scale",
    "validate_positive",
    "validate_nonnegative",
    "validate_order",
    "validate_noise_multiplier",
    "shift_radius",
    "validate_max_grad_norm",
    "validate_clip_norm_p",
    "validate_sample_rate",
    "validate_delta",
    "validate_epsilon",
    "validate_positive_int",
    "validate_steps",
    "validate_rectify_bound",
    "validate_clipping",
    "validate_noise_scale",
    "validate_dim",
    "dim_matters",
    "CLIPPING_MODES",
    "BETA_MAX",
    "DIM_MAX",
    "STEPS_MAX",
    "NOISE_MULTIPLIER_MIN",
    "NOISE_MULTIPLIER_MAX",
    "RECTIFY_MAX",
    "COUNT_SENSITIVITY",
    "ADAPTIVE_KEYWORDS",
    "validate_adaptive_keywords",
]

CLIPPING_MODES = ("flat", "per_layer", "adaptive", "ghost")

#: largest GG shape β: beyond it GG(β) is the uniform law on [−1, 1] to within 1e-3 in total variation
#: (|x|^β/β < 1e-3 on |x| ≤ 1 − 7e-2 at β = 100), and the accountant's exponents |x|^β stay in float range
BETA_MAX = 100.0
#: largest number of noised coordinates d: exact in float64 (< 2^53), and 10^3 × the largest models trained
DIM_MAX = 10**15
#: largest number of steps T (and of PATE answers × 2): the composed losses stay on the accountant's grids
STEPS_MAX = 10**9
#: noise multipliers σ > 0 (noise std over sensitivity: the gradient noise's, the count's, ...) lie in
#: [NOISE_MULTIPLIER_MIN, NOISE_MULTIPLIER_MAX] (σ = 0, no noise, is also valid where a caller allows it): below,
#: the shift 1/σ > 10^6 noise scales (ε is beyond every grid: the accountant publishes ∞ or a proven large number,
#: and far below, near σ = 1e-154, the shift's square overflows float64); above, 1/σ² underflows nothing but the
#: mechanism is indistinguishable from pure noise at float64 resolution
NOISE_MULTIPLIER_MIN = 1e-6
NOISE_MULTIPLIER_MAX = 1e6
#: largest rectify (clamp) bound a: |a| beyond it is no clamp in float32 gradients anyway
RECTIFY_MAX = 1e30


def _real(x, name: str, what: str) -> float:
    if isinstance(x, bool):
        raise ValueError(f"{name} must be {what}, got {x!r}")
    try:
        return float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {what}, got {x!r}") from None


def validate_beta(beta: float, name: str = "beta") -> float:
    """The GG shape β: a finite number ≥ 1 (1 = Laplace, 2 = Gaussian)."""
    what = f"a number in [1, {BETA_MAX:g}] (1 = Laplace, 2 = Gaussian)"
    b = _real(beta, name, what)
    if not (1.0 <= b <= BETA_MAX):
        raise ValueError(f"{name} must be {what}, got {beta!r}")
    return b


def validate_scale(scale: float, name: str = "scale") -> float:
    """A scale s of the GG law (density ∝ exp(-|x|^β/(β s^β))): a finite number > 0."""
    return validate_positive(scale, name)


def validate_positive(x: float, name: str) -> float:
    """A finite number > 0."""
    v = _real(x, name, "a finite number > 0")
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {x!r}")
    return v


def validate_nonnegative(x: float, name: str) -> float:
    """A finite number ≥ 0."""
    v = _real(x, name, "a finite number ≥ 0")
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number ≥ 0, got {x!r}")
    return v


def validate_probability(x: float, name: str) -> float:
    """A number in [0, 1]."""
    v = _real(x, name, "a number in [0, 1]")
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}")
    return v


def validate_order(alpha: float, name: str = "alpha") -> float:
    """A Rényi order: a finite number > 1."""
    v = _real(alpha, name, "a finite number > 1")
    if not math.isfinite(v) or v <= 1:
        raise ValueError(f"{name} must be a finite number > 1, got {alpha!r}")
    return v


def validate_noise_multiplier(noise_multiplier: float, name: str = "noise_multiplier", *, allow_zero: bool = True,
                              sensitivity: float = 1.0) -> float:
    """The one rule for noise parameters: σ/``sensitivity`` (the noise in units of its sensitivity) in
    [NOISE_MULTIPLIER_MIN, NOISE_MULTIPLIER_MAX], the range where the accountant's numerics are proven
    (docs/accounting.md, "Validated ranges"), or σ = 0 (no noise: ε = ∞) where ``allow_zero``. ``sensitivity``:
    that of the released quantity per noise unit (adaptive clipping's ``unclipped_num_std`` has sensitivity ½)."""
    lo, hi = NOISE_MULTIPLIER_MIN * sensitivity, NOISE_MULTIPLIER_MAX * sensitivity
    what = ("0 (no noise) or " if allow_zero else "") + f"a number in [{lo:g}, {hi:g}]"
    what += " (the range where the accountant's numerics are proven"
    what += ")" if sensitivity == 1.0 else f": noise std / sensitivity {sensitivity:g} in " \
                                          f"[{NOISE_MULTIPLIER_MIN:g}, {NOISE_MULTIPLIER_MAX:g}])"
    v = _real(noise_multiplier, name, what)
    if not ((allow_zero and v == 0.0) or lo <= v <= hi):
        raise ValueError(f"{name} must be {what}, got {noise_multiplier!r}")
    return v


def shift_radius(noise_multiplier: float) -> float:
    r"""The sensitivity in noise units, m = 1/σ, rounded UP: the least float ≥ 1/σ, σ > 0 read as the exact real its
    float denotes (the accountant's units, docs/accounting.md, "What is computed"; every certified site reads m here).

    Why up: every bound of the accountant is non-decreasing in the shift (Lemma A), so a bound at m ≥ 1/σ bounds
    the stated mechanism; the nearest float ``1.0 / σ`` is below 1/σ for about half of all σ (σ = 3: by 1.9e-17).
    Proof that this is the least float ≥ 1/σ: IEEE division is correctly rounded, so m₀ = fl(1/σ) is a float
    nearest 1/σ. If m₀ < 1/σ (decided exactly in rationals: m₀·σ < 1), 1/σ lies strictly between m₀ and its
    successor, which is therefore the least float ≥ 1/σ. If m₀ ≥ 1/σ, its predecessor is < 1/σ (else it would lie
    strictly nearer 1/σ than m₀), so m₀ is. For validated σ (:data:`NOISE_MULTIPLIER_MIN` ≤ σ ≤
    :data:`NOISE_MULTIPLIER_MAX`) 1/σ is a normal float far from overflow."""
    m = 1.0 / noise_multiplier
    if Fraction(m) * Fraction(noise_multiplier) < 1:
        m = math.nextafter(m, math.inf)
    return m


def validate_max_grad_norm(
    max_grad_norm: Union[float, Sequence[float]], name: str = "max_grad_norm"
) -> Union[float, List[float]]:
    """C must be finite and > 0; a list (per-layer clipping) must be non-empty with every C_l > 0."""
    if isinstance(max_grad_norm, (list, tuple)):
        if len(max_grad_norm) == 0:
            raise ValueError(f"{name} must be a number > 0 or a non-empty list of numbers > 0, got []")
        return [validate_max_grad_norm(c, f"{name}[{i}]") for i, c in enumerate(max_grad_norm)]
    c = _real(max_grad_norm, name, "a finite number > 0")
    if not math.isfinite(c) or c <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {max_grad_norm!r}")
    return c


def validate_clip_norm_p(clip_norm_p: Optional[float], beta: float, name: str = "clip_norm_p") -> float:
    """p of the ℓp clipping norm: 1 ≤ p ≤ ∞; ``None`` means p = β."""
    if clip_norm_p is None:
        return validate_beta(beta)
    p = _real(clip_norm_p, name, "a number in [1, inf] (None = beta)")
    if math.isnan(p) or p < 1:
        raise ValueError(f"{name} must be a number in [1, inf] (None = beta), got {clip_norm_p!r}")
    return p


def validate_sample_rate(sample_rate: float, name: str = "sample_rate") -> float:
    """Poisson sampling rate q ∈ (0, 1]."""
    q = _real(sample_rate, name, "a number in (0, 1]")
    if not (0.0 < q <= 1.0):
        raise ValueError(f"{name} must be a number in (0, 1], got {sample_rate!r}")
    return q


def validate_delta(delta: float, name: str = "delta") -> float:
    """δ ∈ (0, 1)."""
    d = _real(delta, name, "a number in (0, 1)")
    if not (0.0 < d < 1.0):
        raise ValueError(f"{name} must be a number in (0, 1), got {delta!r}")
    return d


def validate_delta_error(delta_error: Optional[float], delta: float, name: str = "delta_error") -> float:
    """The PRV accountant's δ slack: a number in (0, δ); ``None`` gives δ/1000."""
    if delta_error is None:
        return delta / 1000.0
    v = _real(delta_error, name, f"a number in (0, delta={delta})")
    if not (0 < v < delta):
        raise ValueError(f"{name} must be a number in (0, delta={delta}), got {delta_error!r}")
    return v


def validate_epsilon(epsilon: float, name: str = "target_epsilon") -> float:
    """ε ∈ (0, ∞)."""
    return validate_positive(epsilon, name)


def validate_positive_int(n: int, name: str, *, minimum: int = 1, maximum: Optional[int] = None,
                          allow_float: bool = True) -> int:
    """An integer in [``minimum``, ``maximum``] (default ≥ 1, no maximum); integer-valued floats pass only when
    ``allow_float``."""
    integral = isinstance(n, numbers.Integral) or (allow_float and isinstance(n, float) and n.is_integer())
    if isinstance(n, bool) or not integral or int(n) < minimum or (maximum is not None and int(n) > maximum):
        what = f"an integer ≥ {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum:.3g}]"
        raise ValueError(f"{name} must be {what}, got {n!r}")
    return int(n)


def validate_steps(steps: int, name: str = "steps") -> int:
    """The number of steps T: an integer in [1, STEPS_MAX]."""
    return validate_positive_int(steps, name, maximum=STEPS_MAX)


def dim_matters(beta: float, clip_norm_p: Optional[float]) -> bool:
    """Whether ε depends on the number d of noised coordinates: everywhere except β = 2 with p ≤ 2 and β = p = 1.

    At β = 2 the privacy loss depends on the shift only through its ℓ2 norm, and ‖Δ‖₂ ≤ ‖Δ‖_p ≤ C for p ≤ 2,
    so the one-coordinate shift is the worst case whatever d is; at β = p = 1 one coordinate shifted by C
    dominates the whole ℓ1 ball (docs/accounting.md, Lemma L4). Otherwise a shift spread over many coordinates
    can be worse (p = ∞: every coordinate moves by C; β ≠ 2: the loss is not a function of ‖Δ‖₂), and ε grows
    with d, so a default d = 1 would under-report ε.
    """
    p = beta if clip_norm_p is None else clip_norm_p
    return not ((beta == 2 and p <= 2) or (beta == 1 and p == 1))


def validate_dim(dim: Optional[int], beta: float, clip_norm_p: Optional[float] = None, name: str = "dim") -> int:
    """The number d of noised coordinates: an integer in [1, DIM_MAX]; ``None`` means 1 only where ε does not
    depend on d (:func:`dim_matters`), and is refused, saying why, everywhere else."""
    if dim is None:
        if dim_matters(beta, clip_norm_p):
            p = beta if clip_norm_p is None else clip_norm_p
            raise ValueError(
                f"{name} is required for beta={beta:g} with clipping norm p={p:g}: epsilon grows with the number "
                f"of noised coordinates (only beta=2 with p<=2 and beta=p=1 do not depend on it); pass {name}=<number of "
                "trainable parameters>")
        return 1
    return validate_positive_int(dim, name, maximum=DIM_MAX)


def validate_rectify_bound(rectify_bound: Optional[float], name: str = "rectify_bound") -> Optional[float]:
    """``None`` (no clamping) or a bound a ∈ (0, ∞) for clamping noisy coordinates to [−a, a]."""
    if rectify_bound is None:
        return None
    what = f"None or a number in (0, {RECTIFY_MAX:g}]"
    a = _real(rectify_bound, name, what)
    if not (0 < a <= RECTIFY_MAX):
        raise ValueError(f"{name} must be {what}, got {rectify_bound!r}")
    return a


#: how the proven ε over the ℓp ball is computed where the PRV covers equal spreads only (β ∉ {1, 2}, d > 1,
#: p < ∞): "renyi" (the Rényi bound, :mod:`.accountants.ball_rdp`, or for β ≤ 2 the dominating Gaussian's PRV
#: where smaller; fast) or "table" (the smallest of those and the PRV of the ball table's pair,
#: :mod:`.accountants.ball_prv`, for p ≤ 1.8, and p ≤ 2 above β = 2; one table per (β, p, σ), 35–95 s each at
#: σ ≥ 1 and p ≤ 1.6, about 5 min at p = 1.8, 2–10 min at σ = 0.5 and p ≤ 1.6 and about 30 min at σ = 0.5,
#: p = 1.8 (loaded machine), 2.5–3.7 min at β > 2, p = 2, σ = 1 (idle core); for p > 2 at d ≤ 32 the count table
#: of :mod:`.accountants.ball_count`, one per (β, p, σ, d), 1–2 min at d = 10–16 (CPU, loaded machine); kept per process
#: and on disk, :mod:`.accountants.table_cache`)
BALL_BOUNDS = ("renyi", "table")


def validate_ball_bound(ball_bound: str, name: str = "ball_bound") -> str:
    """``ball_bound`` must be one of :data:`BALL_BOUNDS`."""
    if ball_bound not in BALL_BOUNDS:
        raise ValueError(f"{name} must be one of {BALL_BOUNDS}, got {ball_bound!r}")
    return ball_bound


def validate_clipping(clipping: str, beta: float, clip_norm_p: float, name: str = "clipping") -> str:
    """``clipping`` ∈ {flat, per_layer, adaptive, ghost}; ghost clipping needs p = 2 (its norms are ℓ2; any β:
    the GG noise is added after clipping), adaptive takes every β and p."""
    if clipping not in CLIPPING_MODES:
        raise ValueError(f"{name} must be one of {CLIPPING_MODES}, got {clipping!r}")
    if clipping == "ghost" and clip_norm_p != 2.0:
        raise ValueError(
            f"{name}={clipping!r} computes ℓ2 per-sample norms (Opacus's ghost norms), so it needs "
            f"clip_norm_p=2 (got clip_norm_p={clip_norm_p}; the default is beta): pass clip_norm_p=2 (any beta: "
            "the GG noise is added after clipping), or use clipping='flat'/'per_layer' for ℓp clipping"
        )
    return clipping


#: tail probability below which a noise coordinate beyond the dtype's range is accepted as never happening
NOISE_RANGE_TAIL = 1e-12


def validate_noise_scale(scale: float, beta: float, dim: int, dtype_max: float, dtype_name: str,
                         name: str = "noise_multiplier·max_grad_norm", min_scale: float = 0.0) -> float:
    r"""s = σ·C for GG(β, s) noise written into ``dim`` coordinates of a dtype whose largest finite value is
    ``dtype_max``: refused unless the largest of the ``dim`` draws stays finite except with probability
    ≤ NOISE_RANGE_TAIL, i.e. unless t = s·(β·ln(dim/NOISE_RANGE_TAIL))^{1/β} < dtype_max (P(|X| > t) ≤
    exp(−(t/s)^β/β) per coordinate for t ≥ s, union bound over the coordinates); and refused when
    0 < s < ``min_scale``, the smallest scale the sampler represents (:func:`opacus_gg.distribution.min_scale`)."""
    if not math.isfinite(scale):
        raise ValueError(f"{name} = {scale!r} is not finite")
    if 0 < scale < min_scale:
        raise ValueError(
            f"{name} = {scale:g} is below the smallest GG(beta={beta:g}) noise scale the sampler represents in "
            f"{dtype_name} ({min_scale:.3g}): the noise would be distorted or flushed to ≈ 0; use a larger "
            f"noise_multiplier or max_grad_norm (rescale the loss), or a wider dtype"
        )
    t = scale * (beta * math.log(max(int(dim), 1) / NOISE_RANGE_TAIL)) ** (1.0 / beta)
    if not t < dtype_max:
        raise ValueError(
            f"{name} = {scale:g} makes GG(beta={beta:g}) noise overflow {dtype_name} (largest of {dim} draws "
            f"≈ {t:.3g} > {dtype_max:.3g}): inf would be written into the parameters; use a smaller "
            f"noise_multiplier or max_grad_norm, or a wider dtype"
        )
    return scale


#: add/remove sensitivity of the centred count Σ_i (b_i − ½)
COUNT_SENSITIVITY = 0.5
#: the keywords adaptive clipping needs (Opacus's ``AdaClipDPOptimizer``'s)
ADAPTIVE_KEYWORDS = ("target_unclipped_quantile", "clipbound_learning_rate", "max_clipbound", "min_clipbound",
                     "unclipped_num_std")


def validate_adaptive_keywords(kwargs) -> dict:
    """The adaptive-clipping keywords of ``kwargs``, checked (ValueError naming the first missing or bad one):
    γ ∈ [0, 1], η ≥ 0, 0 < min_clipbound < max_clipbound finite, and ``unclipped_num_std`` σ_b by the one rule for
    noise parameters (:func:`opacus_gg.validation.validate_noise_multiplier`: σ_c = σ_b/½ in the proven range)."""
    missing = [k for k in ADAPTIVE_KEYWORDS if kwargs.get(k) is None]
    if missing:
        raise ValueError(f"clipping='adaptive' needs {', '.join(missing)} (Opacus's AdaClipDPOptimizer keywords)")
    out = {"target_unclipped_quantile": validate_probability(kwargs["target_unclipped_quantile"],
                                                             "target_unclipped_quantile"),
           "clipbound_learning_rate": validate_nonnegative(kwargs["clipbound_learning_rate"],
                                                           "clipbound_learning_rate"),
           "max_clipbound": validate_positive(kwargs["max_clipbound"], "max_clipbound"),
           "min_clipbound": validate_positive(kwargs["min_clipbound"], "min_clipbound"),
           "unclipped_num_std": validate_noise_multiplier(kwargs["unclipped_num_std"], "unclipped_num_std",
                                                          allow_zero=False, sensitivity=COUNT_SENSITIVITY)}
    if not out["min_clipbound"] < out["max_clipbound"]:
        raise ValueError(f"min_clipbound must be < max_clipbound, got min_clipbound={kwargs['min_clipbound']!r}, "
                         f"max_clipbound={kwargs['max_clipbound']!r}")
    return out
