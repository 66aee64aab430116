r"""``opacus-gg epsilon | noise-multiplier | curve``: the accountant on the command line.

epsilon           ε(δ) after T steps of the Poisson-subsampled GG mechanism (the accountant's bound, or the
                  paper's sampled one-hot PRV with ``--mode paper``, an estimate).
noise-multiplier  the smallest σ (to the solver's tolerance) whose ε is ≤ the target.
curve             ε against σ for several β (the paper's Figure 2) → PNG + CSV.

Every printed ε carries its scope label from :func:`opacus_gg.accountants.report.format_epsilon` (JSON:
:func:`~opacus_gg.accountants.report.scope_fields`): bounds are rounded up, lower bounds down. ``--dim`` is
required whenever ε depends on it (everywhere except β = 2 with p ≤ 2) and is shown in every result.
Bad arguments → one line on stderr, exit 2 (:mod:`opacus_gg.cli`). The accountant is imported only
inside the commands (fast ``--help``).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any, Dict

from ..validation import BALL_BOUNDS
from . import (
    DIM_HELP,
    CLIError,
    add_mechanism_args,
    dim_value,
    dumps_json,
    needs_dim,
    noise_value,
    norm_p,
    positive_float,
    probability,
    rate,
    steps_value,
    writable_file,
)

__all__ = ["register", "cmd_epsilon", "cmd_noise_multiplier", "cmd_curve"]


def _common_kwargs(args: argparse.Namespace) -> Dict[str, Any]:
    """The accountant's keyword arguments from the parsed options; ``--dim`` checked by :func:`needs_dim`."""
    needs_dim(args.beta, args.clip_norm_p, args.dim)
    if args.count_noise_multiplier is not None and args.mode == "paper":
        raise CLIError("--count-noise-multiplier needs --mode certified (the paper's sampled PRV has no count "
                       "query)")
    if args.ball_bound != "renyi" and args.mode == "paper":
        raise CLIError("--ball-bound table needs --mode certified (paper mode prints the paper's estimate)")
    steps = args.steps
    if steps is None:  # noise-multiplier --epochs: the steps training runs (opacus_gg.steps, as the API counts them)
        from ..steps import steps_for_epochs

        steps = steps_for_epochs(args.epochs, sample_rate=float(args.sample_rate))
    return dict(beta=float(args.beta), delta=float(args.delta), sample_rate=float(args.sample_rate),
                steps=int(steps), dim=int(args.dim or 1), clip_norm_p=args.clip_norm_p,
                count_noise_multiplier=args.count_noise_multiplier)


def _reword(e: Exception) -> CLIError:
    """The accountant's numerical refusals in words a user can act on."""
    text = str(e)
    if "truncated mass" in text or "too large" in text and "mass" in text:
        return CLIError("epsilon is too large to bound at these settings (the privacy loss leaves the accountant's "
                        "numerical range): raise --noise-multiplier, or lower --sample-rate or --steps")
    return CLIError(text.splitlines()[0])


# --------------------------------------------------------------------------------------------- commands
def cmd_epsilon(args: argparse.Namespace) -> int:
    """ε(δ) for T steps of the subsampled GG mechanism; one labelled line, or JSON with the scope fields."""
    kw = _common_kwargs(args)  # argument checks first: errors come before the accountant's (slow) import
    if args.mode == "paper" and args.n_samples < 1000:
        raise CLIError(f"--n-samples must be an integer >= 1000, got {args.n_samples!r}")
    from ..accountants import compute_epsilon
    from ..accountants.report import scope_fields

    paper = dict(n_samples=int(args.n_samples), seed=int(args.seed)) if args.mode == "paper" else {}
    # the equal-spread PRV beside the published ε, or paper mode's error bars: only when asked
    diagnostics = bool(args.verbose or args.diagnostics)
    t0 = time.perf_counter()
    try:
        rep = compute_epsilon(noise_multiplier=args.noise_multiplier, mode=args.mode, eps_error=args.eps_error,
                              ball_bound=args.ball_bound, diagnostics=diagnostics,
                              progress=_computing if diagnostics else None, **kw, **paper)
    except (ValueError, ArithmeticError) as e:  # bad input, or a setting the numerics cannot certify
        raise _reword(e) from None
    if diagnostics and (rep.mode == "paper" or rep.prv_bracket()["scope"] == "equal_spreads"):  # the slow part ran
        _stderr_line(f"diagnostics done in {time.perf_counter() - t0:.1f} s")
    if args.json:
        out = {**scope_fields(rep), "prv_bracket": rep.prv_bracket(), "mode": rep.mode,
               "worst_direction": rep.direction, "worst_shape_k": rep.shape_k,
               "noise_multiplier": args.noise_multiplier, **kw}
        out.update(rep.proven_bounds())  # several proven bounds over the ball (table, Gaussian, Rényi): the least is ε
        if out["clip_norm_p"] is None:
            out["clip_norm_p"] = kw["beta"]  # the default: clip in the ℓβ norm
        print(dumps_json(out))
        return 0
    print(rep.summary(dim=kw["dim"]))
    if args.verbose:
        print("\n".join(rep.verbose_lines()))
        if kw["count_noise_multiplier"] is not None:
            print(f"  count query included: count_noise_multiplier = {kw['count_noise_multiplier']:g} (adaptive "
                  "clipping's noisy count, composed with every step: docs/accounting.md, Lemma 8)")
    return 0


def _stderr_line(text: str) -> None:
    """One progress line on stderr (the slow diagnostics say what they compute before they start)."""
    sys.stderr.write(f"  {text}\n")
    sys.stderr.flush()


def _computing(what: str) -> None:
    """The accountant's ``progress`` callback: ``computing <what>...`` on stderr."""
    _stderr_line(f"computing the {what}...")


def _progress_line(target: float):
    """Solver callback: one stderr line per accountant run (σ tried, its ε, above or below the target)."""
    from ..formatting import solver_progress

    def line(sigma: float, eps: float) -> None:
        sys.stderr.write(f"  {solver_progress(sigma, eps, target)}\n")
        sys.stderr.flush()

    return line


def cmd_noise_multiplier(args: argparse.Namespace) -> int:
    """The noise multiplier σ whose ε(δ) after T steps is ≤ --target-epsilon (printed rounded up), with the
    ε at that σ and its scope."""
    kw = _common_kwargs(args)  # argument checks before the accountant's (slow) import
    from ..accountants import compute_epsilon, get_noise_multiplier
    from ..accountants.report import scope_fields
    from ..formatting import fmt_up

    delta = kw.pop("delta")
    sys.stderr.write(f"solving for sigma (target epsilon {args.target_epsilon:g}, {args.mode} accounting; "
                     "each try is one accountant run)...\n")
    sys.stderr.flush()
    t0 = time.perf_counter()
    try:
        sigma = float(get_noise_multiplier(target_epsilon=args.target_epsilon, target_delta=delta, mode=args.mode,
                                           eps_error=args.eps_error, progress=_progress_line(args.target_epsilon),
                                           ball_bound=args.ball_bound, **kw))
        rep = compute_epsilon(noise_multiplier=sigma, delta=delta, mode=args.mode, eps_error=args.eps_error,
                              ball_bound=args.ball_bound, **kw)
    except (ValueError, ArithmeticError) as e:  # bad input, or a setting the numerics cannot certify
        raise _reword(e) from None
    sys.stderr.write(f"solved in {time.perf_counter() - t0:.1f} s\n")
    if args.json:
        out = {"noise_multiplier": sigma, "target_epsilon": args.target_epsilon, "delta": delta, "mode": args.mode,
               **scope_fields(rep), **kw}
        if out["clip_norm_p"] is None:
            out["clip_norm_p"] = kw["beta"]
        print(dumps_json(out))
        return 0
    count = kw["count_noise_multiplier"]
    print(f"noise_multiplier = {fmt_up(sigma)} (target epsilon {args.target_epsilon:g}; beta = {kw['beta']:g}, "
          f"q = {kw['sample_rate']:g}, steps = {kw['steps']}"
          + ("" if count is None else f", count_noise_multiplier = {count:g}") + ")")
    print(f"at this sigma: {rep.summary(dim=kw['dim'])}")
    return 0


def cmd_curve(args: argparse.Namespace) -> int:
    """ε against σ for several β → PNG (--plot) and CSV (--csv, default next to the PNG)."""
    from ..accountants.report import format_epsilon
    from ..validation import validate_beta
    from ..experiments.figures.curves import parse_float_list, parse_sigma_range, plot_privacy_curve, privacy_curve, \
        write_curve_csv

    png = writable_file(args.plot, "--plot")  # refused before the curve is computed
    csv_path = writable_file(args.csv or os.path.splitext(png)[0] + ".csv", "--csv")
    betas = [validate_beta(b, "--betas") for b in parse_float_list(args.betas, "--betas")]
    sigmas = parse_sigma_range(args.sigmas)
    for b in betas:
        needs_dim(b, args.clip_norm_p, args.dim)
    dim = int(args.dim or 1)
    rows = privacy_curve(betas, sigmas, mode=args.mode, eps_error=args.eps_error, delta=args.delta,
                         sample_rate=args.sample_rate, steps=args.steps, dim=dim, clip_norm_p=args.clip_norm_p,
                         diagnostics=args.diagnostics)
    write_curve_csv(rows, csv_path)
    plot_privacy_curve(rows, png, epsilon_line=args.epsilon_line)
    print(f"epsilon at delta = {args.delta:g}, q = {args.sample_rate:g}, steps = {args.steps}, dim = {dim} "
          f"({args.mode} accounting)")
    print(f"{'beta':>6} {'sigma':>8} {'paper_sigma':>12}  epsilon (scope)")
    for r in rows:
        shown = (format_epsilon(r["epsilon"], r["epsilon_scope"]) if math.isfinite(r["epsilon"])
                 else f"inf ({r['error']})")
        print(f"{r['beta']:>6g} {r['noise_multiplier']:>8.4g} {r['paper_sigma']:>12.4g}  {shown}")
    print(f"wrote {png} and {csv_path}")
    return 0


# ------------------------------------------------------------------------------------------------- parser

#: --count-noise-multiplier's help: what σ_c is and how it relates to Opacus's unclipped_num_std
COUNT_HELP = ("σ_c > 0 of adaptive clipping's noisy unclipped count, released each step from the same Poisson "
              "batch (the accountant's count_noise_multiplier: the count's noise std over its sensitivity). "
              "GGPrivacyEngine's clipping='adaptive' noises the centred count Σ(b_i − ½), sensitivity ½, with std "
              "unclipped_num_std, so σ_c = 2·unclipped_num_std. Omit it for flat or per-layer clipping; "
              "ε with it is larger")


def _add_common(p: argparse.ArgumentParser, epochs: bool = False) -> None:
    add_mechanism_args(p, epochs=epochs)
    p.add_argument("--count-noise-multiplier", type=noise_value, default=None, help=COUNT_HELP)
    p.add_argument("--eps-error", type=positive_float, default=0.01,
                   help="ε discretization error of the PRV accountant (the bound includes it)")
    p.add_argument("--ball-bound", choices=BALL_BOUNDS, default="renyi",
                   help="proven bound over the ℓp ball where the PRV covers equal spreads only (β ≠ 1, 2, d > 1): "
                        "renyi (fast: the Rényi bound, or the dominating Gaussian's PRV where smaller) or table (the "
                        "smallest of those and the PRV of the ball table, p ≤ 1.8, or p ≤ 2 above β = 2: tighter, "
                        "35 s–30 min per σ, once: "
                        "kept on disk, see OPACUS_GG_CACHE)")
    p.add_argument("--mode", choices=["certified", "paper"], default="certified",
                   help="certified: the accountant's bound (scope printed with it); paper: the GG paper's "
                        "one-hot sampled PRV, an estimate")


def register(subparsers: Any) -> None:
    """Add the ``epsilon``, ``noise-multiplier`` and ``curve`` subcommands."""
    p = subparsers.add_parser("epsilon", help="privacy budget ε after T steps",
                              description="ε(δ) of T steps of the Poisson-subsampled GG mechanism, printed with "
                                          "its scope (proven / over equal spreads / estimate) and d.")
    p.add_argument("--noise-multiplier", type=noise_value, required=True, help="σ > 0 (noise scale σ·C)")
    _add_common(p)
    p.add_argument("--n-samples", type=int, default=10**6, help="paper mode: Monte Carlo samples (≥ 1000)")
    p.add_argument("--seed", type=int, default=0, help="paper mode: sampling seed")
    p.add_argument("--json", action="store_true", help="print a JSON object (with epsilon_scope)")
    p.add_argument("--verbose", action="store_true",
                   help="also compute and print the equal-spread ε, the PRV computation's bracket and the worst case "
                        "found (for β ≠ 1, 2 with d > 1: the equal-spread PRV, seconds to a minute, progress on "
                        "stderr; the printed ε is the same); with --mode paper the Monte Carlo error bars and DKW "
                        "bracket (up to 12 more compositions)")
    p.add_argument("--diagnostics", action="store_true",
                   help="compute those diagnostics for --json too (prv_bracket, worst_direction, worst_shape_k, "
                        "epsilon_equal_spreads; paper mode's error bars in prv_bracket); without it they are null "
                        "and prv_bracket says 'not computed'")
    p.set_defaults(func=cmd_epsilon)

    p = subparsers.add_parser("noise-multiplier", help="σ for a target ε",
                              description="The smallest σ (to the solver's tolerance) whose ε(δ) after T steps is "
                                          "≤ the target; prints σ rounded up and the ε at that σ with its scope.")
    p.add_argument("--target-epsilon", type=positive_float, required=True, help="target ε > 0")
    _add_common(p, epochs=True)
    p.add_argument("--json", action="store_true", help="print a JSON object (with epsilon_scope)")
    p.set_defaults(func=cmd_noise_multiplier)

    p = subparsers.add_parser("curve", help="ε against σ for several β (Figure 2) → PNG + CSV",
                              description="Privacy curves ε(σ) at fixed δ; the defaults are the paper's Figure 2 "
                                          "(one step, q = 1, δ = 1e-5).")
    p.add_argument("--betas", default="1,1.5,2,3", help="comma-separated β values")
    p.add_argument("--sigmas", default="0.5:4:6", help="'start:stop:num' or a comma list of σ")
    p.add_argument("--sample-rate", type=rate, default=1.0, help="Poisson sampling rate q in (0, 1]")
    p.add_argument("--steps", type=steps_value, default=1, help="number of steps T")
    p.add_argument("--delta", type=probability, default=1e-5, help="δ in (0, 1)")
    p.add_argument("--dim", type=dim_value, default=None, help=DIM_HELP)
    p.add_argument("--clip-norm-p", type=norm_p, default=None, help="ℓp clipping norm (default: β)")
    p.add_argument("--eps-error", type=positive_float, default=0.01, help="ε discretization error")
    p.add_argument("--mode", choices=["certified", "paper"], default="certified",
                   help="certified accountant or the paper's sampled PRV (an estimate)")
    p.add_argument("--plot", default="privacy_curve.png", help="PNG path")
    p.add_argument("--csv", default=None, help="CSV path (default: the PNG path with .csv)")
    p.add_argument("--epsilon-line", type=positive_float, default=None, help="draw a horizontal line at this ε")
    p.add_argument("--diagnostics", action="store_true",
                   help="also fill the CSV's epsilon_lower/epsilon_upper where they are diagnostics (the "
                        "equal-spread PRV's bracket, 2 more compositions per point; paper mode's Monte Carlo error "
                        "bars, up to 12)")
    p.set_defaults(func=cmd_curve)
