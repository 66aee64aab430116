r"""``opacus-gg tradeoff``: the proven trade-off curve (what ε means for membership inference).

For T steps of the Poisson-subsampled GG mechanism (the ``epsilon`` command's flags), one line per ``--fpr`` with the
proven upper bound on the TPR of any membership-inference attack at that FPR and its scope, the μ-GDP curve it lies
under where one holds, and the proven ε beside it (:mod:`opacus_gg.accountants.tradeoff`). ``--plot`` draws the
curve on log-FPR axes beside the Gaussian mechanism's at the same (ε, δ); ``--csv`` writes it; ``--json`` prints
``fpr``, ``tpr_upper`` (lists) and ``mu_gdp`` (a number or null) with the rest. Printed bounds are rounded up.
"""

from __future__ import annotations

import argparse
from typing import Any, List

from ..validation import BALL_BOUNDS
from . import CLIError, add_mechanism_args, dumps_json, needs_dim, noise_value, positive_float, writable_file
from .accounting import COUNT_HELP, _reword

__all__ = ["register", "cmd_tradeoff", "parse_fpr_list"]

FPR_HELP = "comma-separated FPRs in (0, 1) at which the proven TPR bound is printed"


def parse_fpr_list(text: str, name: str = "--fpr") -> List[float]:
    """"1e-3,1e-2,0.1" → [0.001, 0.01, 0.1]; CLIError naming ``name`` unless every value is a number in (0, 1)."""
    try:
        vals = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise CLIError(f"{name} must be a comma-separated list of numbers in (0, 1), got {text!r}") from None
    if not vals or not all(0.0 < v < 1.0 for v in vals):
        raise CLIError(f"{name} must be a comma-separated list of numbers in (0, 1), got {text!r}")
    return vals


def cmd_tradeoff(args: argparse.Namespace) -> int:
    """The proven TPR bound at each --fpr (one line each), μ-GDP, and the optional figure, CSV or JSON."""
    fprs = parse_fpr_list(args.fpr)
    for path, flag in ((args.csv, "--csv"), (args.plot, "--plot")):
        if path:
            writable_file(path, flag)  # refused before the accountant is imported and the curve computed
    needs_dim(args.beta, args.clip_norm_p, args.dim)
    from ..accountants.tradeoff import compute_tradeoff  # the accountant only now (fast --help and errors)
    from ..formatting import fmt_up, fmt_up_significant

    kw = dict(noise_multiplier=args.noise_multiplier, sample_rate=args.sample_rate, steps=args.steps,
              delta=args.delta, beta=args.beta, dim=int(args.dim or 1), clip_norm_p=args.clip_norm_p,
              count_noise_multiplier=args.count_noise_multiplier)
    try:
        rep = compute_tradeoff(eps_error=args.eps_error, ball_bound=args.ball_bound, **kw)
        tpr = rep.tpr_upper(fprs)
    except (ValueError, ArithmeticError) as e:  # bad input, or a setting the numerics cannot certify
        raise _reword(e) from None
    written = []
    if args.csv:
        from ..experiments.figures.tradeoff import write_tradeoff_csv

        written.append(write_tradeoff_csv(rep, args.csv, fprs))
    if args.plot:
        from ..experiments.figures.tradeoff import plot_tradeoff

        written.append(plot_tradeoff(rep, args.plot))
    if args.json:
        out = rep.to_dict(fprs)
        out.update(kw, clip_norm_p=args.clip_norm_p if args.clip_norm_p is not None else args.beta)
        print(dumps_json(out))
        return 0
    mu = rep.mu_gdp
    lo, hi = rep.mu_gdp_fpr_range
    print(f"proven trade-off curve at epsilon = {fmt_up(rep.epsilon)} (delta = {args.delta:g}), dim = {kw['dim']} "
          f"[{rep.sources_text}]")
    for a, t in zip(fprs, tpr):
        print(f"  FPR {a:g}: TPR <= {fmt_up_significant(t)} ({rep.scope_text})")
    if mu is None:
        print(f"  mu-GDP: none (the bound reaches TPR = 1 at an FPR above {lo:g})")
    elif rep.gaussian_mu is not None:
        print(f"  mu-GDP: mu = {fmt_up(mu)} (the curve is G_mu's itself, every FPR)")
    else:
        print(f"  mu-GDP: mu = {fmt_up(mu)} (the curve lies under G_mu at every FPR in [{lo:g}, {hi:.7g}], where "
              "both error rates are at least " f"{lo:g}; proven at every FPR there, not only on a grid)")
    for path in written:
        print(f"wrote {path}")
    return 0


def register(subparsers: Any) -> None:
    """Add the ``tradeoff`` subcommand."""
    p = subparsers.add_parser("tradeoff", help="proven TPR bound of any membership-inference attack at each FPR",
                              description="The proven trade-off curve (f-DP) of T steps of the Poisson-subsampled GG "
                                          "mechanism: for each FPR, an upper bound on the TPR of any membership-"
                                          "inference attack, from the same dominating pairs as the proven ε; the "
                                          "μ-GDP curve it lies under where one holds.")
    p.add_argument("--noise-multiplier", type=noise_value, required=True, help="σ > 0 (noise scale σ·C)")
    add_mechanism_args(p)
    p.add_argument("--count-noise-multiplier", type=noise_value, default=None, help=COUNT_HELP)
    p.add_argument("--eps-error", type=positive_float, default=0.01,
                   help="ε discretization error of the PRV accountant (the bound includes it)")
    p.add_argument("--ball-bound", choices=BALL_BOUNDS, default="renyi",
                   help="where the PRV covers equal spreads only: the curve from the Rényi bound and the dominating "
                        "Gaussian (renyi), or also from the ball table's pairs (table; slow, once per σ)")
    p.add_argument("--fpr", default="1e-3,1e-2,0.1", help=FPR_HELP)
    p.add_argument("--plot", default=None, help="PNG path: the curve on log-FPR axes beside the Gaussian's")
    p.add_argument("--csv", default=None, help="CSV path: fpr,tpr_upper on a log-spaced grid and at --fpr")
    p.add_argument("--json", action="store_true", help="print a JSON object (fpr, tpr_upper, mu_gdp, ...)")
    p.set_defaults(func=cmd_tradeoff)
