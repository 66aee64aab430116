r"""GGNMax (the paper's Algorithm 2) and PATE label aggregation with certified accounting.

GGNMax answers one query (a vote histogram ``n ∈ R^K``) with

    argmax_k ( n_k + Y_k ),   Y_k i.i.d. GG(β, s),  s = noise_multiplier × 1 vote,

GG density ∝ exp(-|y|^β / (β s^β)) (β = 2: GNMax, β = 1: LNMax / Report-Noisy-Max with Laplace).

Privacy (data-independent; GGNMax is post-processing of the noisy histogram ``n + Y``):

* ``adjacency="add_remove"`` (add or remove one teacher): one count moves by 1, so the noisy histogram is
  the one-dimensional GG mechanism with sensitivity 1 (the other coordinates cancel in the privacy loss).
  This is the paper's Theorem 2 and the accountant call uses ``dim=1``.
* ``adjacency="replace"`` (one teacher changes its vote, Papernot et al. 2018; the default): two counts move,
  by (+1, -1). The paper's Theorem 2 ("sensitivity 1") is optimistic here; we certify the GG mechanism on the
  histogram with the shift (+1, -1) (at β = 2: the Gaussian with ℓ2 sensitivity √2, GNMax's RDP α/σ²).

With independent noise per coordinate the histogram's privacy loss is the sum of the per-coordinate losses, and
by symmetry of the noise a shift of -1 has the same loss distribution as +1. So the replace pair is *exactly*
two compositions of the 1-D GG mechanism with sensitivity 1 (the same PRV as the accountant's ``dim=2,
clip_norm_p=inf`` vertex case), and ``n`` answered queries (no subsampling) are ``k·n`` compositions of the
1-D mechanism, k = 2 (replace) or 1 (add_remove): accountant call ``sample_rate=1, steps=k·n, dim=1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np
import torch

from . import distribution
from .formatting import fmt_up
from .validation import (validate_beta, validate_delta, validate_epsilon, validate_noise_multiplier,
                         validate_positive_int)

__all__ = [
    "ADJACENCIES",
    "validate_votes",
    "votes_from_predictions",
    "gg_noisy_argmax",
    "pate_epsilon",
    "pate_noise_multiplier",
    "PATEResult",
    "aggregate_labels",
    "format_epsilon",
]

#: adjacency name -> k, the number of histogram counts a neighbouring ensemble moves (each by exactly 1 vote)
ADJACENCIES = {"replace": 2, "add_remove": 1}

TensorLike = Union[torch.Tensor, np.ndarray, list]


def format_epsilon(epsilon: float, digits: int = 4) -> str:
    """ε as text rounded *up* at ``digits`` decimals (a printed bound is never below the certified one)."""
    return fmt_up(epsilon, digits)


def _accountants():
    """Import the accountant lazily (it is an independent module of the package)."""
    from . import accountants  # noqa: WPS433

    return accountants


def validate_adjacency(adjacency: str) -> int:
    """Return the number of moved coordinates for ``adjacency`` ("replace" → 2, "add_remove" → 1)."""
    if adjacency not in ADJACENCIES:
        raise ValueError(f"adjacency must be one of {sorted(ADJACENCIES)}, got {adjacency!r}")
    return ADJACENCIES[adjacency]


def validate_votes(votes: TensorLike) -> torch.Tensor:
    """Return ``votes`` as a 2-D floating tensor ``[n_queries, n_classes]`` (1-D → one query).

    Raises ``ValueError`` unless the votes are finite, non-negative, with ≥ 1 query and ≥ 2 classes.
    """
    if not isinstance(votes, torch.Tensor):
        try:
            votes = torch.as_tensor(np.asarray(votes))
        except (TypeError, ValueError):
            raise ValueError("votes must be a numeric array of shape [n_queries, n_classes]") from None
    if votes.dtype == torch.bool or votes.is_complex():
        raise ValueError(f"votes must be real vote counts, got dtype {votes.dtype}")
    if votes.dim() == 1:
        votes = votes.unsqueeze(0)
    if votes.dim() != 2:
        raise ValueError(f"votes must have shape [n_queries, n_classes] (2-D), got shape {tuple(votes.shape)}")
    if votes.shape[0] < 1 or votes.shape[1] < 2:
        raise ValueError(f"votes needs ≥ 1 query and ≥ 2 classes, got shape {tuple(votes.shape)}")
    if not votes.is_floating_point():
        votes = votes.to(torch.float64 if votes.device.type != "mps" else torch.float32)
    if not bool(torch.isfinite(votes).all()):
        raise ValueError("votes must be finite (found NaN or inf)")
    if bool((votes < 0).any()):
        raise ValueError("votes must be non-negative counts (found a negative vote count)")
    return votes


def votes_from_predictions(predictions: TensorLike, n_classes: int) -> torch.Tensor:
    r"""Vote histograms from teacher predictions: ``votes[q, k] = #{t : predictions[t, q] = k}``.

    ``predictions`` is an integer array ``[n_teachers, n_queries]`` with labels in ``[0, n_classes)``.
    """
    n_classes = validate_positive_int(n_classes, "n_classes", minimum=2, allow_float=False)
    try:
        preds = predictions if isinstance(predictions, torch.Tensor) else torch.as_tensor(np.asarray(predictions))
    except (TypeError, ValueError):  # strings, objects, ragged lists
        raise ValueError("predictions must be an integer array of shape [n_teachers, n_queries]") from None
    if preds.dim() != 2 or preds.shape[0] < 1 or preds.shape[1] < 1:
        raise ValueError(f"predictions must have shape [n_teachers, n_queries] (2-D, ≥ 1 teacher and ≥ 1 query), "
                         f"got {tuple(preds.shape)}")
    if preds.is_floating_point():
        if not bool(torch.isfinite(preds).all()) or not bool((preds == preds.round()).all()):
            raise ValueError("predictions must be integer class labels")
        preds = preds.long()
    elif preds.dtype == torch.bool or preds.is_complex():
        raise ValueError(f"predictions must be integer class labels, got dtype {preds.dtype}")
    preds = preds.long()
    if preds.numel() and (int(preds.min()) < 0 or int(preds.max()) >= n_classes):
        raise ValueError(f"predictions must be class labels in [0, n_classes={n_classes})")
    one_hot = torch.nn.functional.one_hot(preds, n_classes)  # [T, Q, K]
    return one_hot.sum(dim=0).to(torch.float64)


def gg_noisy_argmax(
    votes: TensorLike,
    beta: float,
    noise_multiplier: float,
    generator: Optional[torch.Generator] = None,
) -> torch.Tensor:
    r"""GGNMax: ``argmax_k (votes[q, k] + Y[q, k])`` per query, Y i.i.d. GG(β, s = noise_multiplier).

    ``votes``: ``[n_queries, n_classes]`` on any device (1-D = one query → 0-d result). Returns int64 labels on
    the votes' device. The noise is :func:`opacus_gg.distribution.sample` with scale σ·Δ, Δ = 1 vote.
    """
    beta = validate_beta(beta)
    sigma = validate_noise_multiplier(noise_multiplier, allow_zero=False)
    single = (votes.dim() if isinstance(votes, torch.Tensor) else np.ndim(votes)) == 1
    v = validate_votes(votes)
    if generator is not None and generator.device.type != v.device.type:
        raise ValueError(f"generator is on {generator.device} but votes are on {v.device}")
    noise = distribution.sample(v.shape, beta, sigma, generator=generator, device=v.device, dtype=v.dtype)
    labels = torch.argmax(v + noise, dim=1)
    return labels[0] if single else labels


def _accounted_steps(n_queries: int, adjacency: str) -> int:
    """k·n one-dimensional GG releases for n answers: k = 1 (add_remove) or 2 (replace), see :func:`pate_epsilon`."""
    return validate_adjacency(adjacency) * validate_positive_int(n_queries, "n_queries", allow_float=False)


def pate_epsilon(
    *,
    noise_multiplier: float,
    n_queries: int,
    delta: float,
    beta: float = 2.0,
    adjacency: str = "replace",
    eps_error: float = 0.01,
):
    r"""Certified ε(δ) of ``n_queries`` GGNMax answers (data-independent), as the accountant's ``EpsilonReport``.

    Accountant call: ``compute_epsilon(noise_multiplier=σ, sample_rate=1, steps=k·n, delta=δ, beta=β, dim=1)``
    with k = 1 (add_remove) or 2 (replace: the shift (+1, -1) is two independent 1-D shifts of one vote);
    GGNMax is post-processing of the noisy histogram.
    """
    steps, beta = _accounted_steps(n_queries, adjacency), validate_beta(beta)
    sigma = validate_noise_multiplier(noise_multiplier, allow_zero=False)
    return _accountants().compute_epsilon(
        noise_multiplier=sigma, sample_rate=1.0, steps=steps, delta=validate_delta(delta), beta=beta, dim=1,
        eps_error=eps_error,
    )


def pate_noise_multiplier(
    *,
    target_epsilon: float,
    target_delta: float,
    n_queries: int,
    beta: float = 2.0,
    adjacency: str = "replace",
    epsilon_tolerance: float = 0.01,
) -> float:
    r"""Smallest σ (up to ``epsilon_tolerance``) whose certified ε(δ) for ``n_queries`` GGNMax answers is ≤ target.

    Same accountant setting as :func:`pate_epsilon`; the accountant never returns a σ above the target ε.
    """
    steps, beta = _accounted_steps(n_queries, adjacency), validate_beta(beta)
    return float(
        _accountants().get_noise_multiplier(
            target_epsilon=validate_epsilon(target_epsilon, "target_epsilon"),
            target_delta=validate_delta(target_delta, "target_delta"), sample_rate=1.0, steps=steps, beta=beta,
            dim=1, epsilon_tolerance=epsilon_tolerance,
        )
    )


@dataclass
class PATEResult:
    """Noisy labels of a PATE aggregation and their certified privacy (data-independent, over all queries)."""

    labels: torch.Tensor  # int64 [n_queries]
    epsilon: float  # certified upper bound on ε for ``delta`` after ``n_queries`` answers
    delta: float
    noise_multiplier: float
    beta: float
    n_queries: int
    adjacency: str
    report: Any = field(repr=False, default=None)  # the accountant's EpsilonReport

    def to_dict(self) -> dict:
        """JSON-friendly summary (without the labels)."""
        return {
            "epsilon": self.epsilon, "delta": self.delta, "noise_multiplier": self.noise_multiplier,
            "beta": self.beta, "n_queries": self.n_queries, "adjacency": self.adjacency, "certified": True,
        }


def aggregate_labels(
    votes: Optional[TensorLike] = None,
    *,
    predictions: Optional[TensorLike] = None,
    n_classes: Optional[int] = None,
    beta: float = 2.0,
    delta: float,
    noise_multiplier: Optional[float] = None,
    target_epsilon: Optional[float] = None,
    adjacency: str = "replace",
    generator: Optional[torch.Generator] = None,
) -> PATEResult:
    r"""PATE label aggregation: GGNMax labels for every query plus the certified ε(δ) of answering them all.

    Give ``votes [n_queries, n_classes]`` or teacher ``predictions [n_teachers, n_queries]`` (with
    ``n_classes``), and exactly one of ``noise_multiplier`` σ or ``target_epsilon`` (then σ is solved with
    :func:`pate_noise_multiplier` for n = n_queries). ε = ε_cert(σ, n, δ) from :func:`pate_epsilon`.
    """
    if (votes is None) == (predictions is None):
        raise ValueError("give exactly one of votes or predictions")
    if predictions is not None:
        if n_classes is None:
            raise ValueError("n_classes is required with predictions")
        votes = votes_from_predictions(predictions, n_classes)
    v = validate_votes(votes)
    if (noise_multiplier is None) == (target_epsilon is None):
        raise ValueError("give exactly one of noise_multiplier or target_epsilon")
    validate_adjacency(adjacency)
    beta = validate_beta(beta)
    delta = validate_delta(delta)
    n = int(v.shape[0])
    if noise_multiplier is None:
        sigma = pate_noise_multiplier(target_epsilon=target_epsilon, target_delta=delta, n_queries=n, beta=beta,
                                      adjacency=adjacency)
    else:
        sigma = validate_noise_multiplier(noise_multiplier, allow_zero=False)
    report = pate_epsilon(noise_multiplier=sigma, n_queries=n, delta=delta, beta=beta, adjacency=adjacency)
    labels = gg_noisy_argmax(v, beta, sigma, generator=generator)
    return PATEResult(labels=labels, epsilon=float(report.epsilon), delta=delta, noise_multiplier=sigma, beta=beta,
                      n_queries=n, adjacency=adjacency, report=report)
