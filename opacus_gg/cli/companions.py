"""``opacus-gg compare`` (the GG PRV accountant vs paper mode vs CLT vs RDP ε, each with its scope) and
``opacus-gg counts`` (GG counting queries)."""

from __future__ import annotations

import argparse
from typing import Any, Dict

from . import (add_mechanism_args, beta_value, dumps_json, needs_dim, noise_value, positive_float, positive_int,
               probability)


def compare_epsilons(
    *, beta: float, noise_multiplier: float, sample_rate: float, steps: int, delta: float, dim: int = 1,
    clip_norm_p: float | None = None,
) -> Dict[str, Dict[str, Any]]:
    """ε from the GG PRV accountant, paper mode, the CLT estimate and the RDP bound, side by side, each with
    ``scope`` (proven / equal_spreads / estimate)."""
    from opacus_gg.accountants import compute_epsilon
    from opacus_gg.companions.clt import clt_epsilon
    from opacus_gg.companions.rdp import compute_rdp_epsilon

    common = dict(noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps, delta=delta, beta=beta,
                  dim=dim, clip_norm_p=clip_norm_p)
    clt = clt_epsilon(**common)  # validates every argument (ValueError naming it) before the slow parts
    rdp = compute_rdp_epsilon(**common)
    cert = compute_epsilon(mode="certified", **common)
    paper = compute_epsilon(mode="paper", **common)
    return {
        "accountant": {"epsilon": float(cert.epsilon), "certified": bool(cert.certified), "scope": cert.scope,
                      "label": cert.method_text, "shape_k": cert.shape_k, "direction": cert.direction,
                      "epsilon_equal_spreads": cert.epsilon_equal_spreads},
        "paper": {"epsilon": float(paper.epsilon), "certified": bool(paper.certified), "scope": paper.scope,
                  "label": "paper mode (one-hot shift, GG paper)"},
        "clt": {"epsilon": clt.epsilon, "mu": clt.mu, "certified": False, "scope": "estimate", "label": clt.label,
                "shape_k": clt.shape_k},
        # the RDP bound is proven when its module certifies it, else it covers the shapes it searched
        "rdp": {"epsilon": rdp.epsilon, "certified": rdp.certified, "order": rdp.order, "shape_k": rdp.shape_k,
                "direction": rdp.direction, "scope": "proven" if rdp.certified else "equal_spreads",
                "label": rdp.label},
    }


def _cmd_compare(args: argparse.Namespace) -> int:
    needs_dim(args.beta, args.clip_norm_p, args.dim)  # before the accountant's (slow) import
    from opacus_gg.accountants.report import format_epsilon

    args.dim = args.dim or 1
    res = compare_epsilons(beta=args.beta, noise_multiplier=args.noise_multiplier, sample_rate=args.sample_rate,
                           steps=args.steps, delta=args.delta, dim=args.dim, clip_norm_p=args.clip_norm_p)
    if args.json:
        print(dumps_json({k: v["epsilon"] for k, v in res.items()} | {"details": res}))
        return 0
    print(f"beta={args.beta} noise_multiplier={args.noise_multiplier} sample_rate={args.sample_rate} "
          f"steps={args.steps} delta={args.delta} dim={args.dim}")
    for key in ("accountant", "paper", "clt", "rdp"):
        r = res[key]
        print(f"  {key:<10} epsilon = {format_epsilon(r['epsilon'], r['scope'])}  [{r['label']}]")
    return 0


def _cmd_counts(args: argparse.Namespace) -> int:
    from opacus_gg.companions.counting import counting_report

    rep = counting_report(args.k, args.beta, args.epsilon, args.delta)
    if args.json:
        print(dumps_json(rep.to_dict()))
        return 0
    print(f"{rep.k} counting queries, beta={rep.beta}, ({rep.epsilon}, {rep.delta})-DP [certified calibration]")
    print(f"  GG scale s            = {rep.scale:.6g}   (noise std {rep.noise_std:.6g})")
    print(f"  E||error||_inf        = {rep.linf_error_mean:.6g}   (95% quantile {rep.linf_error_q95:.6g})")
    print(f"  Gaussian (analytic, sensitivity sqrt(k)): sigma = {rep.gaussian_sigma:.6g}, "
          f"E||error||_inf = {rep.gaussian_linf_error_mean:.6g}")
    p = rep.paper
    print(f"  Ganesh-Zhao closed form: s = {p['scale']:.6g}, E||error||_inf = {p['linf_error_mean']:.6g}"
          f" (paper's conditions {'met' if p['conditions_met'] else 'NOT met'})")
    return 0


def register(subparsers: Any) -> None:
    """Add the ``compare`` and ``counts`` subcommands."""
    p = subparsers.add_parser("compare", help="accountant vs paper-mode vs CLT vs RDP epsilon, side by side",
                              description="ε of the same subsampled GG mechanism from four analyses, each printed "
                                          "with its scope (proven / over equal spreads / estimate).")
    p.add_argument("--noise-multiplier", type=noise_value, required=True, help="σ > 0")
    add_mechanism_args(p)
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.set_defaults(func=_cmd_compare)

    c = subparsers.add_parser("counts", help="calibrate GG noise for k counting queries; l_inf error",
                              description="GG noise calibrated exactly for k counting queries at (ε, δ), its ℓ∞ "
                                          "error, next to the Gaussian and the Ganesh–Zhao closed form.")
    c.add_argument("--k", type=positive_int, required=True, help="number of counting queries")
    c.add_argument("--beta", type=beta_value, required=True, help="GG shape β ≥ 1")
    c.add_argument("--epsilon", type=positive_float, required=True, help="ε > 0")
    c.add_argument("--delta", type=probability, required=True, help="δ in (0, 1)")
    c.add_argument("--json", action="store_true", help="print a JSON object")
    c.set_defaults(func=_cmd_counts)
