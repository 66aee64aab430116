r"""Label accuracy of GGNMax against β at equal certified (ε, δ) (paper Section 4.2, Figure 3, Appendix D.1).

Accuracy of one query with true label y: P(argmax_k(n_k + Y_k) = y), estimated by Monte Carlo over ``trials``
noise draws per histogram. Mechanisms are compared at equal privacy by solving, per β, the certified σ_β with
:func:`opacus_gg.pate.pate_noise_multiplier` (ε for ``n_queries`` answers, default 1 = privacy per query).
Without ground-truth labels the noiseless argmax is the target (the paper's "Hardmax utility").

Simulated histograms follow Appendix D.1: V votes in total, x0 = v, x1 = v(1 - r) (runner-up gap r·v),
and for N ≥ 3 classes x2 = 0.95·x1, classes 3..N-2 uniform on the integers of [0, x2], the last class the
remainder (redrawn when negative or above x1). With N = 2, x0 + x1 = V. The paper normalizes by
(N - 3)·x2/2 + x1 + x0 = V, which leaves the remainder x_{N-1} = -x2/2 on average (always negative at N = 4,
almost always at N = 5); we normalize by x0 + x1 + x2 + (N - 3)·x2/2 = V, so the remainder averages x2/2 like
the uniform classes. See docs/pate.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ...validation import validate_beta, validate_positive, validate_positive_int
from ...pate import gg_noisy_argmax, pate_noise_multiplier, validate_adjacency, validate_votes
from . import pyplot, save_figure

__all__ = [
    "SimulatedHistograms",
    "simulate_histograms",
    "load_votes",
    "label_accuracy",
    "accuracy_vs_beta",
    "plot_accuracy_vs_beta",
]


@dataclass
class SimulatedHistograms:
    """Appendix D.1 histograms: ``votes [n, N]`` (float), true ``labels`` (class 0) and runner-up ``gaps`` r."""

    votes: np.ndarray
    labels: np.ndarray
    gaps: np.ndarray


def simulate_histograms(
    n_histograms: int = 500,
    n_classes: int = 2,
    *,
    total_votes: float = 1000.0,
    gap_range: Tuple[float, float] = (0.001, 0.2),
    seed: int = 0,
) -> SimulatedHistograms:
    r"""Simulate vote histograms as in the paper's Appendix D.1 (r evenly spaced over ``gap_range``).

    N = 2: x0 = V/(2 - r), x1 = x0(1 - r). N ≥ 3: x0 = V / (1 + (1 - r)(1 + 0.95 + 0.95(N - 3)/2)),
    x1 = x0(1 - r), x2 = 0.95·x1, x3..x_{N-2} ~ U{0..⌊x2⌋}, x_{N-1} = V - Σ_{i<N-1} x_i (N ≥ 4), redrawn unless
    0 ≤ x_{N-1} ≤ x1 (N = 3: x0 + x1 + x2 = V, deterministic). Class 0 holds the plurality (label 0).
    """
    validate_positive_int(n_histograms, "n_histograms", allow_float=False)
    validate_positive_int(n_classes, "n_classes", minimum=2, allow_float=False)
    lo, hi = (float(g) for g in gap_range)
    if not (0.0 < lo <= hi < 1.0):
        raise ValueError(f"gap_range must satisfy 0 < low ≤ high < 1, got {gap_range!r}")
    validate_positive(total_votes, "total_votes")
    rng = np.random.default_rng(seed)
    r = np.linspace(lo, hi, n_histograms)
    n, k, V = int(n_histograms), int(n_classes), float(total_votes)
    votes = np.zeros((n, k))
    if k == 2:
        votes[:, 0] = V / (2.0 - r)
        votes[:, 1] = votes[:, 0] * (1.0 - r)
    else:
        x0 = V / (1.0 + (1.0 - r) * (1.95 + 0.95 * (k - 3) / 2.0))
        x1 = x0 * (1.0 - r)
        x2 = 0.95 * x1
        votes[:, 0], votes[:, 1], votes[:, 2] = x0, x1, x2
        todo = np.arange(n if k >= 4 else 0)
        for _ in range(10_000):
            if todo.size == 0:
                break
            mid = rng.integers(0, np.floor(x2[todo]).astype(np.int64)[:, None] + 1, size=(todo.size, k - 4))
            last = V - x0[todo] - x1[todo] - x2[todo] - mid.sum(axis=1)
            ok = (last >= 0) & (last <= x1[todo])
            votes[todo[ok], 3:k - 1] = mid[ok]
            votes[todo[ok], k - 1] = last[ok]
            todo = todo[~ok]
        if todo.size:  # pragma: no cover - acceptance is far above 1e-4 for the paper's settings
            raise RuntimeError(f"could not simulate {todo.size} histograms (rejection sampling did not accept)")
    return SimulatedHistograms(votes=votes, labels=np.zeros(n, dtype=np.int64), gaps=r)


def load_votes(path: str, labels_path: Optional[str] = None) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """Load vote histograms ``[n_queries, n_classes]`` from a ``.npy`` file, and optional labels ``[n_queries]``."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"votes file not found: {path}")
    votes = np.load(path, allow_pickle=False)
    validate_votes(votes)
    labels = None
    if labels_path is not None:
        if not os.path.exists(labels_path):
            raise FileNotFoundError(f"labels file not found: {labels_path}")
        labels = np.load(labels_path, allow_pickle=False)
    return votes, labels


def _validate_labels(labels, votes: torch.Tensor) -> torch.Tensor:
    y = torch.as_tensor(np.asarray(labels)).reshape(-1)
    if y.numel() != votes.shape[0]:
        raise ValueError(f"labels must have one entry per query ({votes.shape[0]}), got {y.numel()}")
    if y.is_floating_point() and not bool((y == y.round()).all()):
        raise ValueError("labels must be integer class indices")
    y = y.long()
    if int(y.min()) < 0 or int(y.max()) >= votes.shape[1]:
        raise ValueError(f"labels must be class indices in [0, n_classes={votes.shape[1]})")
    return y.to(votes.device)


def label_accuracy(
    votes,
    labels=None,
    *,
    beta: float,
    noise_multiplier: float,
    trials: int = 25,
    generator: Optional[torch.Generator] = None,
) -> Tuple[float, float, np.ndarray]:
    r"""Monte Carlo label accuracy of GGNMax: mean over queries q and trials of 1{GGNMax(n_q) = y_q}.

    Returns (accuracy, standard error over queries, per-query accuracy). ``labels=None`` → noiseless argmax.
    """
    v = validate_votes(votes)
    y = torch.argmax(v, dim=1) if labels is None else _validate_labels(labels, v)
    validate_positive_int(trials, "trials", allow_float=False)
    pred = gg_noisy_argmax(v.repeat(int(trials), 1), beta, noise_multiplier, generator=generator)
    per_query = (pred.view(int(trials), -1) == y).double().mean(dim=0).cpu().numpy()
    se = float(per_query.std(ddof=1) / np.sqrt(per_query.size)) if per_query.size > 1 else 0.0
    return float(per_query.mean()), se, per_query


def accuracy_vs_beta(
    votes,
    labels=None,
    *,
    betas: Sequence[float],
    target_epsilon: float,
    target_delta: float,
    n_queries: int = 1,
    adjacency: str = "replace",
    trials: int = 25,
    seed: int = 0,
) -> Tuple[List[Dict], Dict[float, np.ndarray]]:
    r"""Label accuracy of GGNMax for each β at equal certified (ε, δ) over ``n_queries`` answers.

    σ_β = pate_noise_multiplier(target_epsilon, target_delta, n_queries, β, adjacency); accuracy from
    :func:`label_accuracy` with a generator seeded by ``seed``. Returns (rows, per-query accuracy by β).
    """
    validate_adjacency(adjacency)
    betas = [validate_beta(b) for b in betas]
    if not betas:
        raise ValueError("betas must contain at least one value ≥ 1")
    rows, per_query = [], {}
    for b in betas:
        sigma = pate_noise_multiplier(target_epsilon=target_epsilon, target_delta=target_delta,
                                      n_queries=n_queries, beta=b, adjacency=adjacency)
        gen = torch.Generator().manual_seed(int(seed))
        acc, se, pq = label_accuracy(votes, labels, beta=b, noise_multiplier=sigma, trials=trials, generator=gen)
        rows.append({"beta": b, "noise_multiplier": sigma, "target_epsilon": float(target_epsilon),
                     "target_delta": float(target_delta), "n_queries": int(n_queries), "adjacency": adjacency,
                     "accuracy": acc, "stderr": se})
        per_query[b] = pq
    return rows, per_query


def plot_accuracy_vs_beta(
    rows: List[Dict], path: str, *, per_query: Optional[Dict[float, np.ndarray]] = None,
    gaps: Optional[np.ndarray] = None, title: str = "",
) -> None:
    """PNG: accuracy ± 2 s.e. against β (Figure 3); with ``gaps`` also accuracy against runner-up gap (Fig. 7)."""
    plt = pyplot()

    two = per_query is not None and gaps is not None
    fig, axes = plt.subplots(1, 2 if two else 1, figsize=(11 if two else 5.5, 4), squeeze=False)
    ax = axes[0][0]
    b = [r["beta"] for r in rows]
    a = np.array([r["accuracy"] for r in rows])
    se = np.array([r["stderr"] for r in rows])
    ax.errorbar(b, a, yerr=2 * se, marker="o", capsize=3)
    ax.set_xlabel("β")
    ax.set_ylabel("label accuracy")
    r0 = rows[0]
    ax.set_title(title or f"GGNMax at certified ({r0['target_epsilon']:g}, {r0['target_delta']:g})-DP, "
                 f"{r0['n_queries']} quer{'y' if r0['n_queries'] == 1 else 'ies'}, {r0['adjacency']}", fontsize=9)
    ax.grid(True, alpha=0.3)
    if two:
        ax2 = axes[0][1]
        order = np.argsort(gaps)
        bins = np.array_split(order, min(25, len(order)))  # average neighbouring gaps: less Monte Carlo noise
        g_mid = [float(np.mean(np.asarray(gaps)[b])) for b in bins]
        for beta, pq in per_query.items():
            ax2.plot(g_mid, [float(pq[b].mean()) for b in bins], marker=".", label=f"β = {beta:g}", lw=1)
        ax2.set_xlabel("runner-up gap r")
        ax2.set_ylabel("accuracy (Hardmax utility)")
        ax2.grid(True, alpha=0.3)
        ax2.legend(fontsize=8)
    save_figure(fig, path)
