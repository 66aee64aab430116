"""ℓ∞ error of k counting queries answered with GG noise, against k, for several β (Ganesh & Zhao 2021).

For each k and β the GG scale is calibrated *exactly* by the certified accountant (k-fold composition of
the one-coordinate GG pair: the worst neighbour moves every answer by 1), then E‖error‖_∞ is computed by
quadrature. Series: fixed β ∈ {1, 2, 4}, β growing with log k (β = max(2, ln k)), the analytic Gaussian
mechanism (sensitivity √k) as reference, and Ganesh & Zhao's closed-form scale for β = 4.

    python examples/counting_queries.py --epsilon 1 --delta 1e-6 --ks 10 100 1000 10000 --out counting.png
"""

from __future__ import annotations

import argparse
import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tqdm import tqdm  # noqa: E402

from opacus_gg.companions.counting import analytic_gaussian_sigma, calibrate_scale, linf_error_mean, paper_scale  # noqa: E402


def run(ks, betas, epsilon, delta):
    """Return {series name: [(k, scale, E||error||_inf), ...]}."""
    series = {f"GG beta={b:g}": [] for b in betas}
    series["GG beta=max(2, ln k)"] = []
    series["Gaussian (analytic, sens. sqrt k)"] = []
    series["Ganesh-Zhao closed form, beta=4"] = []
    for k in tqdm(ks, desc="k"):
        for b in betas:
            s = calibrate_scale(k, b, epsilon, delta)
            series[f"GG beta={b:g}"].append((k, s, linf_error_mean(k, b, s)))
        b = max(2.0, math.log(k))
        s = calibrate_scale(k, b, epsilon, delta)
        series["GG beta=max(2, ln k)"].append((k, s, linf_error_mean(k, b, s)))
        g = analytic_gaussian_sigma(epsilon, delta, math.sqrt(k))
        series["Gaussian (analytic, sens. sqrt k)"].append((k, g, linf_error_mean(k, 2.0, g)))
        p = paper_scale(k, 4.0, epsilon, delta)["scale"]
        series["Ganesh-Zhao closed form, beta=4"].append((k, p, linf_error_mean(k, 4.0, p)))
    return series


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[10, 100, 1000, 10000])
    ap.add_argument("--betas", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--out", default="counting_queries.png")
    ap.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    args = ap.parse_args()
    series = run(args.ks, args.betas, args.epsilon, args.delta)
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for name, rows in series.items():
        ax.plot([r[0] for r in rows], [r[2] / math.sqrt(r[0]) for r in rows], marker="o",
                ls="--" if "closed form" in name else "-", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of counting queries k")
    ax.set_ylabel("E ||error||_inf / sqrt(k)")
    ax.set_title(f"GG counting queries, ({args.epsilon:g}, {args.delta:g})-DP (certified calibration)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=150)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(series, f, indent=1)
    for name, rows in series.items():
        print(name, [(k, round(s, 4), round(e, 4)) for k, s, e in rows])


if __name__ == "__main__":
    main()
