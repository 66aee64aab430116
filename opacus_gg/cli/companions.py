"""``opacus-gg compare`` (certified vs paper vs CLT vs RDP ε) and ``opacus-gg counts`` (GG counting queries)."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any, Dict

from . import positive_int


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "tolist"):
        return _jsonable(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def _accountants():
    try:
        from opacus_gg import accountants
    except ImportError as e:  # pragma: no cover - only while the package is assembled
        raise ValueError(f"the certified accountant (opacus_gg.accountants) is not available: {e}") from None
    return accountants


def compare_epsilons(
    *, beta: float, noise_multiplier: float, sample_rate: float, steps: int, delta: float, dim: int = 1,
    clip_norm_p: float | None = None,
) -> Dict[str, Dict[str, Any]]:
    """ε from the certified accountant, paper mode, the CLT estimate and the RDP bound, side by side."""
    from opacus_gg.gdp import clt_epsilon
    from opacus_gg.rdp import compute_rdp_epsilon

    common = dict(noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps, delta=delta, beta=beta,
                  dim=dim, clip_norm_p=clip_norm_p)
    clt = clt_epsilon(**common)  # validates every argument (ValueError naming it) before the slow parts
    rdp = compute_rdp_epsilon(**common)
    acc = _accountants()
    cert = acc.compute_epsilon(mode="certified", **common)
    paper = acc.compute_epsilon(mode="paper", **common)
    return {
        "certified": {"epsilon": float(cert.epsilon), "certified": bool(cert.certified),
                      "label": "certified PRV upper bound (a guarantee)" if cert.certified else
                      "PRV upper bound — NOT certified: " + str(cert.details.get("not_certified_reason", "")),
                      "shape_k": cert.shape_k, "direction": cert.direction},
        "paper": {"epsilon": float(paper.epsilon), "certified": bool(paper.certified),
                  "label": "paper mode (one-hot shift, GG paper)"
                  + ("" if paper.certified else " — NOT a guarantee")},
        "clt": {"epsilon": clt.epsilon, "mu": clt.mu, "certified": False, "label": clt.label,
                "shape_k": clt.shape_k},
        "rdp": {"epsilon": rdp.epsilon, "certified": rdp.certified, "order": rdp.order, "shape_k": rdp.shape_k,
                "direction": rdp.direction,
                "label": rdp.label + ("" if rdp.certified else " — NOT a guarantee over all shapes")},
    }


def _cmd_compare(args: argparse.Namespace) -> int:
    res = compare_epsilons(beta=args.beta, noise_multiplier=args.noise_multiplier, sample_rate=args.sample_rate,
                           steps=args.steps, delta=args.delta, dim=args.dim, clip_norm_p=args.clip_norm_p)
    if args.json:
        print(json.dumps(_jsonable({k: v["epsilon"] for k, v in res.items()} | {"details": res})))
        return 0
    print(f"beta={args.beta} noise_multiplier={args.noise_multiplier} sample_rate={args.sample_rate} "
          f"steps={args.steps} delta={args.delta} dim={args.dim}")
    for key in ("certified", "paper", "clt", "rdp"):
        r = res[key]
        tag = "GUARANTEE" if r["certified"] else "estimate"
        print(f"  {key:<9} eps = {r['epsilon']:.4g}   [{tag}] {r['label']}")
    return 0


def _cmd_counts(args: argparse.Namespace) -> int:
    from opacus_gg.counting import counting_report

    rep = counting_report(args.k, args.beta, args.epsilon, args.delta)
    if args.json:
        print(json.dumps(_jsonable(rep.to_dict())))
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
    p = subparsers.add_parser("compare", help="certified vs paper-mode vs CLT vs RDP epsilon, side by side")
    p.add_argument("--beta", type=float, required=True)
    p.add_argument("--noise-multiplier", type=float, required=True)
    p.add_argument("--sample-rate", type=float, required=True)
    p.add_argument("--steps", type=positive_int, required=True)
    p.add_argument("--delta", type=float, required=True)
    p.add_argument("--dim", type=positive_int, default=1)
    p.add_argument("--clip-norm-p", type=float, default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_compare)

    c = subparsers.add_parser("counts", help="calibrate GG noise for k counting queries; l_inf error")
    c.add_argument("--k", type=positive_int, required=True)
    c.add_argument("--beta", type=float, required=True)
    c.add_argument("--epsilon", type=float, required=True)
    c.add_argument("--delta", type=float, required=True)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=_cmd_counts)
