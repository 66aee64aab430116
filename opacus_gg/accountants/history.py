r"""The one history type: segments of identical steps, parsed, validated and merged in one place.

A history is a list of entries ``(noise_multiplier, sample_rate, steps[, beta, dim, clip_norm_p[,
count_noise_multiplier]])``; 3-tuples ``(σ, q, steps)`` (as Opacus's ``get_noise_multiplier`` writes them)
take the defaults (β, d, p) of the caller (β = 2, p = β unless given; d must be given wherever ε depends on
it, :func:`opacus_gg.validation.validate_dim`, and is 1 elsewhere). Consecutive entries with the
same (σ, q, β, d, p, σ_c) are one segment of ``steps`` identical steps.

``count_noise_multiplier`` σ_c (optional, None: no count): the step also releases a count of sensitivity Δ
with Gaussian noise of std σ_c·Δ from the same Poisson batch (adaptive clipping's noisy unclipped count,
:mod:`opacus_gg.optimizers.adaptive`). In noise units that is one more coordinate, a Gaussian pair with
shift 1/σ_c, in product with the GG pair of the shift (docs/accounting.md, "Adaptive clipping: the count
query inside the accountant"). Entries without it (6-tuples, older checkpoints) have no count.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from ..validation import (
    shift_radius,
    validate_beta,
    validate_clip_norm_p,
    validate_dim,
    validate_noise_multiplier,
    validate_sample_rate,
    validate_steps,
)

__all__ = ["Segment", "PairSegment", "parse_segment", "normalize_history", "validate_history",
           "validate_accountant_state", "append_step", "DEFAULTS"]

#: (beta, dim, clip_norm_p) for entries that do not give them (p = None means p = β; d = None means "required
#: where ε depends on d, else 1")
DEFAULTS: Tuple[float, Optional[int], Optional[float]] = (2.0, None, None)


@dataclass(frozen=True)
class Segment:
    """``steps`` identical steps: (noise_multiplier, sample_rate, beta, dim, clip_norm_p)."""

    noise_multiplier: float
    sample_rate: float
    steps: int
    beta: float
    dim: int
    clip_norm_p: float
    count_noise_multiplier: Optional[float] = None

    @property
    def count_shift(self) -> Optional[float]:
        """Shift 1/σ_c of the count coordinate in its noise units, rounded up (:func:`.validation.shift_radius`;
        None: no count query)."""
        c = self.count_noise_multiplier
        return None if c is None else shift_radius(c)

    @property
    def noiseless(self) -> bool:
        """σ = 0: no noise, the privacy loss is +∞ whenever the example is sampled."""
        return self.noise_multiplier == 0.0

    @property
    def mechanism_key(self) -> Tuple[float, float, int, float]:
        """What defines the non-subsampled pair: (σ, β, d, p)."""
        return (self.noise_multiplier, self.beta, self.dim, self.clip_norm_p)

    def as_tuple(self) -> Tuple:
        """The history entry (σ, q, steps, β, d, p), with σ_c appended when there is a count query."""
        base = (self.noise_multiplier, self.sample_rate, self.steps, self.beta, self.dim, self.clip_norm_p)
        return base if self.count_noise_multiplier is None else base + (self.count_noise_multiplier,)

    @property
    def step_key(self) -> Tuple:
        """Hashable key of one step (the entry with steps = 1); ``Segment(*step_key)`` rebuilds it."""
        return (self.noise_multiplier, self.sample_rate, 1, self.beta, self.dim, self.clip_norm_p,
                self.count_noise_multiplier)

    def same_step(self, other: "Segment") -> bool:
        """Whether one step of ``self`` and of ``other`` are the same mechanism (σ, q, β, d, p, σ_c)."""
        return (self.mechanism_key == other.mechanism_key and self.sample_rate == other.sample_rate
                and self.count_noise_multiplier == other.count_noise_multiplier)

    def with_steps(self, steps: int) -> "Segment":
        """The same step, ``steps`` times."""
        return Segment(*self.step_key[:2], steps, *self.step_key[3:])


@dataclass(frozen=True)
class PairSegment:
    """``steps`` steps whose non-subsampled pair is the envelope of explicit ``pairs`` ((label, pair), ...).

    ``roundoff`` C: the pairs' curves are ≥ (1 − C)·those of an exact dominating pair at every α (computed pairs,
    e.g. a ball table's, :mod:`.ball_prv`); it enters δ as the one-step PMFs' round-off does (Lemma R5)."""

    pairs: Tuple
    sample_rate: float
    steps: int
    roundoff: float = 0.0
    #: a dominating family ((pairs, C), ...) whose members together cover what ``pairs`` covers (a ball table's,
    #: :attr:`.ball_prv.BallTable.member_pairs`), for :mod:`.family_composition`; () where there is none
    members: Tuple = ()


def parse_segment(entry: Sequence, defaults: Tuple[float, int, Optional[float]] = DEFAULTS) -> Segment:
    """Validate one history entry (σ, q, steps[, β, d, p[, σ_c]]) into a :class:`Segment` (None fields take
    ``defaults``; σ_c None: no count query)."""
    if len(entry) not in (3, 4, 5, 6, 7):
        raise ValueError(
            "history entries must be (noise_multiplier, sample_rate, steps[, beta, dim, clip_norm_p"
            f"[, count_noise_multiplier]]), got {entry!r}"
        )
    entry = list(entry) + [None] * (7 - len(entry))
    sigma, q, steps, beta, dim, p, count = entry
    beta = validate_beta(defaults[0] if beta is None else beta)
    p = validate_clip_norm_p(defaults[2] if p is None else p, beta)
    dim = validate_dim(defaults[1] if dim is None else dim, beta, p)
    sigma = validate_noise_multiplier(sigma)  # σ = 0 (no noise) is a valid step, with ε = ∞
    q = validate_sample_rate(q)
    steps = validate_steps(steps)
    count = None if count is None else validate_noise_multiplier(count, "count_noise_multiplier", allow_zero=False)
    return Segment(float(sigma), float(q), steps, float(beta), dim, float(p), count)


def normalize_history(history: Sequence[Sequence],
                      defaults: Tuple[float, int, Optional[float]] = DEFAULTS) -> List[Segment]:
    """Validate entries and merge consecutive identical segments."""
    segs: List[Segment] = []
    for entry in history:
        s = parse_segment(entry, defaults)
        if segs and segs[-1].same_step(s):
            s = s.with_steps(segs.pop().steps + s.steps)
        segs.append(s)
    return segs


def validate_history(history, defaults: Tuple[float, int, Optional[float]] = DEFAULTS, *, name: str = "history",
                     lengths: Tuple[int, ...] = (3, 4, 5, 6, 7)) -> None:
    """A history read from outside (a checkpoint): a list of entries of ``lengths`` real numbers (no strings,
    booleans or None except a trailing default), each accepted by :func:`parse_segment` (σ finite ≥ 0,
    q ∈ (0, 1], steps and dim integers ≥ 1, β ≥ 1, p ≥ 1). ``ValueError`` naming the first bad entry."""
    if not isinstance(history, (list, tuple)):
        raise ValueError(f"{name} must be a list of (noise_multiplier, sample_rate, steps, ...) entries, "
                         f"got {type(history).__name__}")
    for i, entry in enumerate(history):
        ok = isinstance(entry, (list, tuple)) and len(entry) in lengths and all(
            (isinstance(x, numbers.Real) and not isinstance(x, bool)) or (x is None and k >= 3)
            for k, x in enumerate(entry))
        if not ok:
            raise ValueError(f"{name}[{i}] must be a tuple of {' or '.join(map(str, lengths))} numbers "
                             f"(noise_multiplier, sample_rate, steps[, beta, dim, clip_norm_p[, count_noise_multiplier]]), "
                             f"got {entry!r}")
        try:
            parse_segment(entry, defaults)
        except ValueError as e:
            raise ValueError(f"{name}[{i}] = {tuple(entry)!r}: {e}") from None


def append_step(history: list, seg: Segment) -> None:
    """Append ``seg`` to a list of history tuples, merging it into the last entry when it is the same step."""
    if history:
        last = tuple(history[-1])
        if len(last) in (6, 7) and Segment(*last).same_step(seg):
            history[-1] = seg.with_steps(last[2] + seg.steps).as_tuple()
            return
    history.append(seg.as_tuple())


#: Opacus's accountants whose history is Gaussian steps ``(σ, q, steps)`` (β = 2, ℓ2 clipping): ``gg_prv`` accounts
#: them exactly (docs/engine.md, "Checkpoints"), so their state loads into it
OPACUS_GAUSSIAN_MECHANISMS = ("prv", "rdp", "gdp")


def validate_accountant_state(state: Any, mechanism: str) -> None:
    """A privacy accountant's ``state_dict`` as read from a file: a mapping with ``mechanism`` equal to the
    accountant's and a ``history`` of valid entries (:func:`~opacus_gg.accountants.history.validate_history`;
    ``gg_prv`` entries take the ``defaults`` stored beside them); ``gg_prv`` also takes the state of Opacus's
    Gaussian accountants (:data:`OPACUS_GAUSSIAN_MECHANISMS`: ``(σ, q, steps)`` entries at β = 2).
    ``ValueError`` naming what is wrong."""
    if not isinstance(state, Mapping) or "history" not in state or "mechanism" not in state:
        raise ValueError("privacy_accountant_state_dict must be a dict with 'history' and 'mechanism'")
    if mechanism == "gg_prv" and state["mechanism"] in OPACUS_GAUSSIAN_MECHANISMS:
        mechanism = state["mechanism"]  # Opacus's Gaussian steps: validated as such below
    if state["mechanism"] != mechanism:
        raise ValueError(
            f"privacy_accountant_state_dict is of accountant {state['mechanism']!r} and cannot be loaded into "
            f"accountant {mechanism!r} (create the engine with accountant={state['mechanism']!r})"
        )
    if mechanism != "gg_prv":  # Opacus's accountants: (σ, q, steps) at β = 2
        validate_history(state["history"], DEFAULTS, name="privacy_accountant_state_dict['history']", lengths=(3,))
        return
    defaults = DEFAULTS
    if state.get("defaults") is not None:
        d = state["defaults"]
        if not isinstance(d, Mapping):
            raise ValueError("privacy_accountant_state_dict['defaults'] must be a dict of beta, dim, clip_norm_p")
        defaults = (d.get("beta", DEFAULTS[0]), d.get("dim", DEFAULTS[1]), d.get("clip_norm_p", DEFAULTS[2]))
    validate_history(state["history"], defaults, name="privacy_accountant_state_dict['history']")
