"""PATE label aggregation with GGNMax: noisy labels and the certified ε for all answered queries.

Simulates an ensemble of teachers that are right 70% of the time, aggregates their predictions on public
queries with GGNMax at a target (ε, δ), and compares β = 1 (LNMax), 1.5 and 2 (GNMax).

    python examples/pate_label_aggregation.py --n-teachers 250 --n-queries 200 --target-epsilon 8
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from opacus_gg.pate import aggregate_labels, format_epsilon


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-teachers", type=int, default=250)
    p.add_argument("--n-queries", type=int, default=200)
    p.add_argument("--n-classes", type=int, default=10)
    p.add_argument("--teacher-accuracy", type=float, default=0.7)
    p.add_argument("--target-epsilon", type=float, default=8.0)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--adjacency", choices=["replace", "add_remove"], default="replace")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    rng = np.random.default_rng(args.seed)
    truth = rng.integers(0, args.n_classes, args.n_queries)
    wrong = rng.integers(0, args.n_classes, (args.n_teachers, args.n_queries))
    preds = np.where(rng.random((args.n_teachers, args.n_queries)) < args.teacher_accuracy, truth, wrong)
    for beta in (1.0, 1.5, 2.0):
        res = aggregate_labels(predictions=preds, n_classes=args.n_classes, beta=beta, delta=args.delta,
                               target_epsilon=args.target_epsilon, adjacency=args.adjacency,
                               generator=torch.Generator().manual_seed(args.seed))
        acc = float((res.labels.numpy() == truth).mean())
        print(f"beta={beta:<4g} sigma={res.noise_multiplier:7.3f} label accuracy={acc:.3f} "
              f"certified eps={format_epsilon(res.epsilon, 3)} (delta={res.delta:g}, {res.n_queries} queries, "
              f"{res.adjacency})")


if __name__ == "__main__":
    main()
