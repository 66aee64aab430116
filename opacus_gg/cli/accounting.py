r"""``opacus-gg epsilon | noise-multiplier | curve``: the accountant on the command line.

epsilon           ε(δ) after T steps of the Poisson-subsampled GG mechanism (certified upper bound, or the
                  paper's sampled one-hot PRV with ``--mode paper``, labelled NOT a guarantee).
noise-multiplier  the smallest σ (to the solver's tolerance) whose certified ε is ≤ the target.
curve             ε against σ for several β (the paper's Figure 2) → PNG + CSV.

Printed certified ε are rounded up and lower bounds down, so a printed bound is still a bound. Bad
arguments raise ValueError (→ one line on stderr, exit 2, via :mod:`opacus_gg.cli`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any, Dict, Optional

from ..distribution import validate_beta
from ..formatting import DIGITS, fmt_down, fmt_up

__all__ = ["register", "cmd_epsilon", "cmd_noise_multiplier", "cmd_curve"]


# ------------------------------------------------------------------------------------------- validation
def _clip_norm_p(text: Optional[str]) -> Optional[float]:
    if text is None:
        return None
    try:
        p = float(text)
    except ValueError:
        raise ValueError(f"--clip-norm-p must be a number >= 1 or 'inf', got {text!r}") from None
    if not (p >= 1.0):
        raise ValueError(f"--clip-norm-p must be >= 1 (or inf), got {text!r}")
    return p


def _validate_common(args: argparse.Namespace) -> Dict[str, Any]:
    """Check the shared options; ValueError names the option and its allowed range."""
    beta = validate_beta(args.beta, "--beta")
    if not (0.0 < args.delta < 1.0):
        raise ValueError(f"--delta must be in (0, 1), got {args.delta!r}")
    if not (0.0 < args.sample_rate <= 1.0):
        raise ValueError(f"--sample-rate must be in (0, 1], got {args.sample_rate!r}")
    if args.steps < 1:
        raise ValueError(f"--steps must be an integer >= 1, got {args.steps!r}")
    if args.dim < 1:
        raise ValueError(f"--dim must be an integer >= 1, got {args.dim!r}")
    if not (args.eps_error > 0 and math.isfinite(args.eps_error)):
        raise ValueError(f"--eps-error must be a finite number > 0, got {args.eps_error!r}")
    return dict(beta=beta, delta=float(args.delta), sample_rate=float(args.sample_rate), steps=int(args.steps),
                dim=int(args.dim), clip_norm_p=_clip_norm_p(args.clip_norm_p))


def _accountant():
    try:
        from .. import accountants
        return accountants
    except ImportError as e:  # pragma: no cover - only while the package is assembled
        raise ValueError(f"the accountant (opacus_gg.accountants) is not available: {e}") from None


def _json_default(x):
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return str(x)


def _dumps(obj: Dict[str, Any]) -> str:
    # json.dumps writes inf/nan as Infinity/NaN (not strict JSON): map non-finite floats to strings
    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        if isinstance(v, dict):
            return {k: clean(w) for k, w in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(w) for w in v]
        return v

    return json.dumps(clean(obj), default=_json_default)


# --------------------------------------------------------------------------------------------- commands
def cmd_epsilon(args: argparse.Namespace) -> int:
    """ε(δ) for T steps of the subsampled GG mechanism; human-readable line or JSON."""
    kw = _validate_common(args)
    sigma = float(args.noise_multiplier)
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"--noise-multiplier must be a finite number > 0, got {args.noise_multiplier!r}")
    paper = {}
    if args.mode == "paper":
        if args.n_samples < 1000:
            raise ValueError(f"--n-samples must be an integer >= 1000, got {args.n_samples!r}")
        paper = dict(n_samples=int(args.n_samples), seed=int(args.seed))
    rep = _accountant().compute_epsilon(noise_multiplier=sigma, mode=args.mode, eps_error=args.eps_error, **kw,
                                        **paper)
    if args.json:
        out = {"epsilon": rep.epsilon, "epsilon_lower": rep.epsilon_lower, "epsilon_upper": rep.epsilon_upper,
               "epsilon_estimate": rep.epsilon_estimate, "mode": rep.mode, "certified": rep.certified,
               "delta": rep.delta, "direction": rep.direction, "shape_k": rep.shape_k,
               "noise_multiplier": sigma, **kw}
        if out["clip_norm_p"] is None:
            out["clip_norm_p"] = kw["beta"]  # the default: clip in the ℓβ norm
        label = rep.details.get("label") if isinstance(rep.details, dict) else None
        if not rep.certified:
            out["label"] = label or "NOT a privacy guarantee"
        print(_dumps(out))
        return 0
    if rep.certified:
        print(f"epsilon = {fmt_up(rep.epsilon)} (certified upper bound; estimate {rep.epsilon_estimate:.{DIGITS}f}, "
              f"lower {fmt_down(rep.epsilon_lower)}) at delta = {kw['delta']:g}; worst case: {rep.direction} "
              f"direction, shift spread over {rep.shape_k} coordinate(s)")
    else:
        label = (rep.details or {}).get("label", "NOT a privacy guarantee")
        if "NOT" not in label:
            label += " (NOT a privacy guarantee)"
        print(f"epsilon = {rep.epsilon:.{DIGITS}f} [{label}; Monte Carlo error bars "
              f"{fmt_down(rep.epsilon_lower)} .. {fmt_up(rep.epsilon_upper)}] at delta = {kw['delta']:g}")
    return 0


def cmd_noise_multiplier(args: argparse.Namespace) -> int:
    """The noise multiplier σ whose ε(δ) after T steps is ≤ --target-epsilon (printed rounded up)."""
    kw = _validate_common(args)
    eps = float(args.target_epsilon)
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"--target-epsilon must be a finite number > 0, got {args.target_epsilon!r}")
    acc = _accountant()
    delta = kw.pop("delta")
    sigma = acc.get_noise_multiplier(target_epsilon=eps, target_delta=delta, mode=args.mode,
                                     eps_error=args.eps_error, **kw)
    certified = args.mode == "certified"
    if args.json:
        out = {"noise_multiplier": float(sigma), "target_epsilon": eps, "delta": delta, "mode": args.mode,
               "certified": certified, **kw}
        if out["clip_norm_p"] is None:
            out["clip_norm_p"] = kw["beta"]
        if not certified:
            out["label"] = "paper mode (one-hot, sampled PRV): NOT a privacy guarantee for beta != 2"
        print(_dumps(out))
        return 0
    tag = ("certified: epsilon <= target" if certified
           else "paper mode: NOT a privacy guarantee for beta != 2")
    print(f"noise_multiplier = {fmt_up(float(sigma))} ({tag} = {eps:g} at delta = {delta:g}, "
          f"beta = {kw['beta']:g}, q = {kw['sample_rate']:g}, steps = {kw['steps']}, dim = {kw['dim']})")
    return 0


def cmd_curve(args: argparse.Namespace) -> int:
    """ε against σ for several β → PNG (--plot) and CSV (--csv, default next to the PNG)."""
    from ..analysis.curves import parse_float_list, parse_sigma_range, plot_privacy_curve, privacy_curve, \
        write_curve_csv

    betas = [validate_beta(b, "--betas") for b in parse_float_list(args.betas, "--betas")]
    sigmas = parse_sigma_range(args.sigmas)
    args.beta = betas[0]
    kw = _validate_common(args)
    kw.pop("beta")
    rows = privacy_curve(betas, sigmas, mode=args.mode, eps_error=args.eps_error, **kw)
    png = args.plot
    csv_path = args.csv or os.path.splitext(png)[0] + ".csv"
    write_curve_csv(rows, csv_path)
    plot_privacy_curve(rows, png, epsilon_line=args.epsilon_line)
    head = ("certified upper bounds, rounded up" if args.mode == "certified"
            else "paper mode: NOT a privacy guarantee for beta != 2")
    print(f"epsilon at delta = {kw['delta']:g}, q = {kw['sample_rate']:g}, steps = {kw['steps']}, "
          f"dim = {kw['dim']} ({head})")
    print(f"{'beta':>6} {'sigma':>8} {'paper_sigma':>12} {'epsilon':>10}  note")
    for r in rows:
        e = r["epsilon"]
        shown = fmt_up(e) if r["certified"] else f"{e:.{DIGITS}f}"
        print(f"{r['beta']:>6g} {r['noise_multiplier']:>8.4g} {r['paper_sigma']:>12.4g} {shown:>10}  {r['error']}")
    print(f"wrote {png} and {csv_path}")
    return 0


# ------------------------------------------------------------------------------------------------- parser
def _add_common(p: argparse.ArgumentParser, *, beta: bool = True) -> None:
    if beta:
        p.add_argument("--beta", type=float, required=True, help="GG shape β ≥ 1 (1 Laplace, 2 Gaussian)")
    p.add_argument("--sample-rate", type=float, required=True, help="Poisson sampling rate q in (0, 1]")
    p.add_argument("--steps", type=int, required=True, help="number of steps T ≥ 1")
    p.add_argument("--delta", type=float, required=True, help="target δ in (0, 1)")
    p.add_argument("--dim", type=int, default=1, help="number of noised coordinates (trainable parameters)")
    p.add_argument("--clip-norm-p", default=None, help="ℓp norm of the per-sample clipping (default β; 'inf' ok)")
    p.add_argument("--eps-error", type=float, default=0.01, help="ε discretization error of the PRV accountant")
    p.add_argument("--mode", choices=["certified", "paper"], default="certified",
                   help="certified (default) or paper (one-hot sampled PRV, NOT a guarantee for β ≠ 2)")


def register(subparsers) -> None:
    """Add the ``epsilon``, ``noise-multiplier`` and ``curve`` subcommands."""
    p = subparsers.add_parser("epsilon", help="privacy budget ε after T steps",
                              description="ε(δ) of T steps of the Poisson-subsampled GG mechanism")
    p.add_argument("--noise-multiplier", type=float, required=True, help="σ > 0 (noise scale σ·C)")
    _add_common(p)
    p.add_argument("--n-samples", type=int, default=10**6, help="paper mode: Monte Carlo samples (default 1e6)")
    p.add_argument("--seed", type=int, default=0, help="paper mode: sampling seed (default 0)")
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.set_defaults(func=cmd_epsilon)

    p = subparsers.add_parser("noise-multiplier", help="σ for a target ε",
                              description="smallest σ whose ε(δ) after T steps is ≤ the target")
    p.add_argument("--target-epsilon", type=float, required=True, help="target ε > 0")
    _add_common(p)
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.set_defaults(func=cmd_noise_multiplier)

    p = subparsers.add_parser("curve", help="ε against σ for several β (Figure 2) → PNG + CSV",
                              description="privacy curves ε(σ) at fixed δ; defaults are the paper's Figure 2 "
                                          "(one step, q = 1, δ = 1e-5)")
    p.add_argument("--betas", default="1,1.5,2,3", help="comma-separated β values (default 1,1.5,2,3)")
    p.add_argument("--sigmas", default="0.5:4:6", help="'start:stop:num' or comma list of σ (default 0.5:4:6)")
    p.add_argument("--sample-rate", type=float, default=1.0, help="Poisson sampling rate q (default 1)")
    p.add_argument("--steps", type=int, default=1, help="number of steps T (default 1)")
    p.add_argument("--delta", type=float, default=1e-5, help="δ (default 1e-5)")
    p.add_argument("--dim", type=int, default=1, help="number of noised coordinates (default 1)")
    p.add_argument("--clip-norm-p", default=None, help="ℓp clipping norm (default β)")
    p.add_argument("--eps-error", type=float, default=0.01, help="ε discretization error")
    p.add_argument("--mode", choices=["certified", "paper"], default="certified")
    p.add_argument("--plot", default="privacy_curve.png", help="PNG path (default privacy_curve.png)")
    p.add_argument("--csv", default=None, help="CSV path (default: the PNG path with .csv)")
    p.add_argument("--epsilon-line", type=float, default=None, help="draw a horizontal line at this ε")
    p.set_defaults(func=cmd_curve)
