r"""The one history type: segments of identical steps, parsed, validated and merged in one place.

A history is a list of entries ``(noise_multiplier, sample_rate, steps[, beta, dim, clip_norm_p])``;
3-tuples ``(σ, q, steps)`` (as Opacus's ``get_noise_multiplier`` writes them) take the defaults
(β, d, p) of the caller (β = 2, d = 1, p = β unless given). Consecutive entries with the same
(σ, q, β, d, p) are one segment of ``steps`` identical steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..validation import (
    validate_beta,
    validate_clip_norm_p,
    validate_noise_multiplier,
    validate_positive_int,
    validate_sample_rate,
)

__all__ = ["Segment", "PairSegment", "parse_segment", "normalize_history", "append_step", "DEFAULTS"]

#: (beta, dim, clip_norm_p) for entries that do not give them (p = None means p = β)
DEFAULTS: Tuple[float, int, Optional[float]] = (2.0, 1, None)


@dataclass(frozen=True)
class Segment:
    """``steps`` identical steps: (noise_multiplier, sample_rate, beta, dim, clip_norm_p)."""

    noise_multiplier: float
    sample_rate: float
    steps: int
    beta: float
    dim: int
    clip_norm_p: float

    @property
    def noiseless(self) -> bool:
        """σ = 0: no noise, the privacy loss is +∞ whenever the example is sampled."""
        return self.noise_multiplier == 0.0

    @property
    def mechanism_key(self) -> Tuple[float, float, int, float]:
        """What defines the non-subsampled pair: (σ, β, d, p)."""
        return (self.noise_multiplier, self.beta, self.dim, self.clip_norm_p)

    def as_tuple(self) -> Tuple[float, float, int, float, int, float]:
        """The history entry (σ, q, steps, β, d, p)."""
        return (self.noise_multiplier, self.sample_rate, self.steps, self.beta, self.dim, self.clip_norm_p)

    def same_step(self, other: "Segment") -> bool:
        """Whether one step of ``self`` and of ``other`` are the same mechanism (σ, q, β, d, p)."""
        return self.mechanism_key == other.mechanism_key and self.sample_rate == other.sample_rate


@dataclass(frozen=True)
class PairSegment:
    """``steps`` steps whose non-subsampled pair is the envelope of explicit ``pairs`` ((label, pair), ...)."""

    pairs: Tuple
    sample_rate: float
    steps: int


def parse_segment(entry: Sequence, defaults: Tuple[float, int, Optional[float]] = DEFAULTS) -> Segment:
    """Validate one history entry (σ, q, steps[, β, d, p]) into a :class:`Segment` (None fields take ``defaults``)."""
    if len(entry) not in (3, 4, 5, 6):
        raise ValueError(
            "history entries must be (noise_multiplier, sample_rate, steps[, beta, dim, clip_norm_p]), "
            f"got {entry!r}"
        )
    entry = list(entry) + [None] * (6 - len(entry))
    sigma, q, steps, beta, dim, p = entry
    beta = validate_beta(defaults[0] if beta is None else beta)
    dim = validate_positive_int(defaults[1] if dim is None else dim, "dim")
    p = validate_clip_norm_p(defaults[2] if p is None else p, beta)
    sigma = validate_noise_multiplier(sigma)  # σ = 0 (no noise) is a valid step, with ε = ∞
    q = validate_sample_rate(q)
    steps = validate_positive_int(steps, "steps")
    return Segment(float(sigma), float(q), steps, float(beta), dim, float(p))


def normalize_history(history: Sequence[Sequence],
                      defaults: Tuple[float, int, Optional[float]] = DEFAULTS) -> List[Segment]:
    """Validate entries and merge consecutive identical segments."""
    segs: List[Segment] = []
    for entry in history:
        s = parse_segment(entry, defaults)
        if segs and segs[-1].same_step(s):
            last = segs.pop()
            s = Segment(s.noise_multiplier, s.sample_rate, last.steps + s.steps, s.beta, s.dim, s.clip_norm_p)
        segs.append(s)
    return segs


def append_step(history: list, seg: Segment) -> None:
    """Append ``seg`` to a list of history tuples, merging it into the last entry when it is the same step."""
    if history:
        last = tuple(history[-1])
        if len(last) == 6 and Segment(last[0], last[1], last[2], last[3], last[4], last[5]).same_step(seg):
            history[-1] = (last[0], last[1], last[2] + seg.steps, last[3], last[4], last[5])
            return
    history.append(seg.as_tuple())
