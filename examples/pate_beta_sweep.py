"""GGNMax label accuracy against β at equal certified (ε, δ), and outlier probabilities (paper Fig. 3, 5, 7).

    python examples/pate_beta_sweep.py --out-dir pate_sweep          # simulated histograms (Appendix D.1)
    python examples/pate_beta_sweep.py --votes mnist_votes.npy --labels mnist_labels.npy

The same runs are available as ``opacus-gg pate-experiment`` and ``opacus-gg outliers``.
"""

from __future__ import annotations

import argparse
import os

from opacus_gg.experiments.figures.outliers import default_panels, plot_outlier_curves, write_csv
from opacus_gg.experiments.figures.pate_experiments import accuracy_vs_beta, load_votes, plot_accuracy_vs_beta, simulate_histograms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--votes")
    p.add_argument("--labels")
    p.add_argument("--betas", type=float, nargs="+", default=[1.0, 1.5, 2.0, 2.5, 3.0])
    p.add_argument("--target-epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--out-dir", default="pate_sweep")
    args = p.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)

    gaps = None
    if args.votes:
        votes, labels = load_votes(args.votes, args.labels)
    else:
        sim = simulate_histograms(500, 2, seed=0)
        votes, labels, gaps = sim.votes, sim.labels, sim.gaps
    rows, per_query = accuracy_vs_beta(votes, labels, betas=args.betas, target_epsilon=args.target_epsilon,
                                       target_delta=args.delta, trials=50)
    write_csv(rows, os.path.join(args.out_dir, "accuracy.csv"))
    plot_accuracy_vs_beta(rows, os.path.join(args.out_dir, "accuracy.png"), per_query=per_query, gaps=gaps)
    for r in rows:
        print(f"beta={r['beta']:<4g} sigma={r['noise_multiplier']:.3f} accuracy={r['accuracy']:.4f}")

    panels = default_panels(betas=args.betas, thresholds=[1.0, 2.0, 4.0], target_epsilon=1.5, target_delta=1e-5)
    write_csv([r for rows_ in panels.values() for r in rows_], os.path.join(args.out_dir, "outliers.csv"))
    plot_outlier_curves(panels, os.path.join(args.out_dir, "outliers.png"))
    print(f"wrote {args.out_dir}/accuracy.{{csv,png}} and {args.out_dir}/outliers.{{csv,png}}")


if __name__ == "__main__":
    main()
