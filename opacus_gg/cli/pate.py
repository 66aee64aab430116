"""Subcommands ``pate`` (GGNMax label aggregation), ``pate-experiment`` (accuracy vs β) and ``outliers``."""

from __future__ import annotations

import argparse
import json
import os
import sys

from typing import Any

from . import positive_int, writable_file

__all__ = ["register", "run_pate", "run_pate_experiment", "run_outliers"]


def _out_dir(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    return path


def _load_npy(path: str, what: str) -> Any:
    import numpy as np

    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} file not found: {path}")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as e:
        raise ValueError(f"{what} file {path} is not a plain .npy array: {e}") from None


def run_pate(args: argparse.Namespace) -> int:
    """Noisy GGNMax labels for every histogram in --votes (or --predictions); prints the certified ε."""
    import numpy as np
    import torch

    from ..accountants.report import format_epsilon
    from ..pate import aggregate_labels

    if (args.votes is None) == (args.predictions is None):
        raise ValueError("give exactly one of --votes or --predictions")
    writable_file(args.out if args.out.endswith(".npy") else args.out + ".npy", "--out")  # np.save adds .npy
    if (args.target_epsilon is None) == (args.noise_multiplier is None):
        raise ValueError("give exactly one of --target-epsilon or --noise-multiplier")
    gen = torch.Generator().manual_seed(args.seed) if args.seed is not None else None
    kwargs = dict(beta=args.beta, delta=args.delta, noise_multiplier=args.noise_multiplier,
                  target_epsilon=args.target_epsilon, adjacency=args.adjacency, generator=gen)
    if args.votes is not None:
        res = aggregate_labels(_load_npy(args.votes, "votes"), **kwargs)
    else:
        if args.n_classes is None:
            raise ValueError("--n-classes is required with --predictions")
        res = aggregate_labels(predictions=_load_npy(args.predictions, "predictions"), n_classes=args.n_classes,
                               **kwargs)
    out = args.out
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    np.save(out, res.labels.cpu().numpy())
    info = res.to_dict()
    info["labels_file"] = out
    print(f"GGNMax: {res.n_queries} labels written to {out}")
    print(f"beta={res.beta:g} noise_multiplier={res.noise_multiplier:.6g} adjacency={res.adjacency}")
    # GGNMax is a one-dimensional GG mechanism per query: its data-independent ε is proven (res.to_dict() says
    # certified=True); the label comes from the shared scope formatter
    print(f"certified epsilon={format_epsilon(res.epsilon, 'proven')} for delta={res.delta:g} after "
          f"{res.n_queries} queries (data-independent)")
    if args.json:
        print(json.dumps(info))
    return 0


def run_pate_experiment(args: argparse.Namespace) -> int:
    """Label accuracy against β at equal certified (ε, δ); writes pate_experiment.csv and .png."""
    from ..experiments.figures.outliers import write_csv
    from ..experiments.figures.pate_experiments import accuracy_vs_beta, load_votes, plot_accuracy_vs_beta, simulate_histograms

    out = _out_dir(args.out_dir)  # an output directory that cannot be made is refused before the work
    gaps = None
    if args.votes is not None:
        votes, labels = load_votes(args.votes, args.labels)
        source = os.path.basename(args.votes)
    else:
        sim = simulate_histograms(args.n_histograms, args.n_classes, total_votes=args.total_votes, seed=args.seed)
        votes, labels, gaps = sim.votes, sim.labels, sim.gaps
        source = f"simulated ({args.n_histograms} histograms, {args.n_classes} classes)"
    rows, per_query = accuracy_vs_beta(votes, labels, betas=args.betas, target_epsilon=args.target_epsilon,
                                       target_delta=args.delta, n_queries=args.n_queries, adjacency=args.adjacency,
                                       trials=args.trials, seed=args.seed)
    csv_path, png_path = os.path.join(out, "pate_experiment.csv"), os.path.join(out, "pate_experiment.png")
    write_csv(rows, csv_path)
    plot_accuracy_vs_beta(rows, png_path, per_query=per_query, gaps=gaps)
    print(f"source: {source}")
    for r in rows:
        print(f"beta={r['beta']:<5g} sigma={r['noise_multiplier']:.4g} accuracy={r['accuracy']:.4f} "
              f"± {2 * r['stderr']:.4f}")
    print(f"wrote {csv_path} and {png_path}")
    return 0


def run_outliers(args: argparse.Namespace) -> int:
    """P(|noise| > τ) against β for GG mechanisms of equal certified (ε, δ); writes outliers.csv and .png."""
    from ..experiments.figures.outliers import default_panels, plot_outlier_curves, write_csv

    out = _out_dir(args.out_dir)  # refused before the work
    panels = default_panels(betas=args.betas, thresholds=args.thresholds, target_epsilon=args.target_epsilon,
                            target_delta=args.delta, sample_rate=args.sample_rate, steps=args.steps, dim=args.dim)
    csv_path, png_path = os.path.join(out, "outliers.csv"), os.path.join(out, "outliers.png")
    write_csv([r for rows in panels.values() for r in rows], csv_path)
    plot_outlier_curves(panels, png_path)
    for title, rows in panels.items():
        print(title)
        for r in rows:
            print(f"  beta={r.beta:<5g} sigma={r.noise_multiplier:.4g} tau={r.threshold:<4g} "
                  f"P(outlier)={r.p_any:.4e}")
    print(f"wrote {csv_path} and {png_path}")
    return 0


def register(subparsers) -> None:
    """Add the ``pate``, ``pate-experiment`` and ``outliers`` subcommands."""
    p = subparsers.add_parser("pate", help="GGNMax PATE label aggregation with certified ε",
                              description="Noisy-argmax labels (GGNMax) for teacher vote histograms; prints the "
                                          "data-independent ε over all queries (one-dimensional: proven).")
    src = p.add_argument_group("input (one of)")
    src.add_argument("--votes", help=".npy vote histograms [n_queries, n_classes]")
    src.add_argument("--predictions", help=".npy teacher labels [n_teachers, n_queries] (with --n-classes)")
    p.add_argument("--n-classes", type=positive_int, help="number of classes (with --predictions)")
    p.add_argument("--beta", type=float, default=2.0, help="GG shape β ≥ 1 (2 = GNMax, 1 = LNMax)")
    p.add_argument("--target-epsilon", type=float, help="solve σ for this ε over all queries")
    p.add_argument("--noise-multiplier", type=float, help="σ in votes (instead of --target-epsilon)")
    p.add_argument("--delta", "--target-delta", dest="delta", type=float, required=True, help="δ in (0, 1)")
    p.add_argument("--adjacency", choices=["replace", "add_remove"], default="replace",
                   help="neighbouring teacher sets: one teacher changes its vote, or is added/removed")
    p.add_argument("--seed", type=int, default=None, help="noise seed (default: fresh randomness)")
    p.add_argument("--out", default="labels.npy", help="output .npy of int64 labels")
    p.add_argument("--json", action="store_true", help="also print a JSON summary")
    p.set_defaults(func=run_pate)

    e = subparsers.add_parser("pate-experiment", help="GGNMax label accuracy against β at equal certified (ε, δ)",
                              description="Label accuracy of GGNMax against β, σ solved per β for the same (ε, δ) "
                                          "(the paper's Figure 3); writes pate_experiment.csv and .png.")
    e.add_argument("--votes", help=".npy vote histograms (default: simulate as in Appendix D.1)")
    e.add_argument("--labels", help=".npy true labels (default: the noiseless argmax)")
    e.add_argument("--n-histograms", type=positive_int, default=200, help="simulated histograms")
    e.add_argument("--n-classes", type=positive_int, default=2, help="classes of the simulated histograms")
    e.add_argument("--total-votes", type=float, default=1000.0, help="teachers per simulated histogram")
    e.add_argument("--betas", type=float, nargs="+", default=[1.0, 1.5, 2.0, 2.5, 3.0], help="β values")
    e.add_argument("--target-epsilon", type=float, default=1.0, help="ε every β is calibrated to")
    e.add_argument("--delta", "--target-delta", dest="delta", type=float, default=1e-5, help="δ in (0, 1)")
    e.add_argument("--n-queries", type=positive_int, default=1, help="queries the ε covers (1 = per query)")
    e.add_argument("--adjacency", choices=["replace", "add_remove"], default="replace",
                   help="neighbouring teacher sets: one vote changes, or one teacher is added/removed")
    e.add_argument("--trials", type=positive_int, default=25, help="noise draws per histogram")
    e.add_argument("--seed", type=int, default=0, help="random seed")
    e.add_argument("--out-dir", default="pate_experiment_out", help="output directory")
    e.set_defaults(func=run_pate_experiment)

    o = subparsers.add_parser("outliers", help="outlier probability vs β at equal certified (ε, δ) (Figure 5)",
                              description="P(|noise| > τ) against β for GG mechanisms calibrated to the same "
                                          "(ε, δ) (the paper's Figure 5); writes outliers.csv and .png.")
    o.add_argument("--betas", type=float, nargs="+", default=[1.0, 1.5, 2.0, 2.5, 3.0], help="β values")
    o.add_argument("--thresholds", type=float, nargs="+", default=[1.0, 2.0, 4.0], help="thresholds τ")
    o.add_argument("--target-epsilon", type=float, default=1.5, help="ε every β is calibrated to")
    o.add_argument("--delta", "--target-delta", dest="delta", type=float, default=1e-5, help="δ in (0, 1)")
    o.add_argument("--sample-rate", type=float, default=0.01, help="SGG panel's Poisson rate (1 = no panel)")
    o.add_argument("--steps", type=positive_int, default=100, help="steps of the subsampled panel")
    o.add_argument("--dim", type=positive_int, default=1, help="coordinates: P(any of dim beyond τ)")
    o.add_argument("--out-dir", default="outliers_out", help="output directory")
    o.set_defaults(func=run_outliers)


if __name__ == "__main__":  # pragma: no cover
    from . import main

    sys.exit(main())
