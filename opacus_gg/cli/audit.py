"""``opacus-gg audit``: a one-run privacy audit (white-box gradient canaries) beside the proven ε.

Prints the empirical lower bound ε_L at the chosen confidence (rounded down) and the proven ε of the same setting
(rounded up), or with ``--json`` the record of :meth:`opacus_gg.audit.AuditResult.to_dict` (keys
``epsilon_audit_lower``, ``epsilon_proven``, the guesses and the attack's operating points); ``--plot FILE`` draws
the operating points under the proven trade-off curve of the same setting (the ``tradeoff`` command's figure).
torch and the accountant are imported inside the command.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..validation import validate_delta
from . import CLIError, _checked, beta_value, dim_value, dumps_json, noise_value, norm_p, positive_float, \
    positive_int, probability, rate, steps_value, writable_file

__all__ = ["register", "cmd_audit"]


#: argparse ``type=``: a confidence level in (0, 1) (the API's rule, :func:`opacus_gg.validation.validate_delta`)
_confidence = _checked(validate_delta, "the confidence")


def _seed(text: str) -> int:
    """argparse ``type=``: an integer ≥ 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"the seed must be an integer ≥ 0, got {text!r}")
    return value


def cmd_audit(args: argparse.Namespace) -> int:
    """Run the audit; one summary (or JSON) on stdout, the figure if asked."""
    if args.plot:
        writable_file(args.plot, "--plot")  # refused before torch is imported and the audit runs
    from ..audit import AuditConfig, audit
    from ..formatting import fmt_down, fmt_up

    try:
        cfg = AuditConfig.checked(beta=args.beta, clip_norm_p=args.clip_norm_p, noise_multiplier=args.noise_multiplier,
                                  sample_rate=args.sample_rate, steps=args.steps, delta=args.delta,
                                  canaries=args.canaries, canary_width=args.canary_width, dim=args.dim,
                                  canary_scale=args.canary_scale, seed=args.seed, confidence=args.confidence,
                                  score=args.score, kind=args.canaries_kind)
    except ValueError as e:  # the library names its parameters; the CLI names its flags
        text = str(e)
        for name in ("canaries", "canary_width", "dim", "canary_scale", "noise_multiplier"):
            text = text.replace(name, "--" + name.replace("_", "-"), 1) if text.startswith(name) else text
        raise CLIError(text) from None
    result = audit(cfg)
    if args.plot:
        from ..experiments.figures.audit import plot_audit

        plot_audit(result, args.plot)
    if args.json:
        out = result.to_dict()
        if args.plot:
            out["plot"] = args.plot
        print(dumps_json(out))
        return 0
    b = result.bound
    print(f"audited epsilon >= {fmt_down(b.epsilon)} (one-run lower bound at {cfg.confidence:.0%} confidence: "
          f"{b.correct} of {b.guesses} guesses correct, {cfg.canaries} {cfg.kind} canaries, {cfg.score} score, "
          f"delta = {cfg.delta:g})")
    print(f"proven epsilon  <= {fmt_up(result.epsilon_proven)} (the accountant's bound for the same setting: "
          f"beta = {cfg.beta:g}, p = {cfg.clip_norm_p:g}, sigma = {cfg.noise_multiplier:g}, q = {cfg.sample_rate:g}, "
          f"T = {cfg.steps}, d = {cfg.dim})")
    if b.epsilon > result.epsilon_proven:
        print("VIOLATION: the audited lower bound exceeds the proven epsilon: the engine or its accounting is wrong "
              "(or a 1 - confidence chance event)")
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def register(subparsers: Any) -> None:
    """Add the ``audit`` subcommand."""
    p = subparsers.add_parser(
        "audit", help="one-run privacy audit (white-box gradient canaries): empirical ε lower bound vs proven ε",
        description="Trains one run of β-DP-SGD whose only examples are m canaries (gradients written into the "
                    "optimizer, or inputs through GGPrivacyEngine.make_private), each included with probability 1/2 "
                    "and Poisson-sampled at rate q per step, scores each canary from the model's updates (inner "
                    "product or GG likelihood ratio), and turns the guesses into an ε lower bound at the "
                    "given confidence (Steinke, Nasr & Jagielski 2023, Theorem 5.2). The proven ε of the same "
                    "setting is printed beside it: the audited bound above the proven one means a broken engine "
                    "or accountant. docs/audit.md explains the numbers.")
    p.add_argument("--beta", type=beta_value, default=2.0, help="GG shape β ≥ 1 (1 Laplace, 2 Gaussian)")
    p.add_argument("--clip-norm-p", type=norm_p, default=None,
                   help="ℓp norm of the per-sample clipping, p ≥ 1 or 'inf' (default: β)")
    p.add_argument("--noise-multiplier", type=noise_value, default=2.0, help="noise multiplier σ > 0")
    p.add_argument("--sample-rate", type=rate, default=0.05, help="Poisson sampling rate q in (0, 1]")
    p.add_argument("--steps", type=steps_value, default=100, help="number of steps T")
    p.add_argument("--delta", type=probability, default=1e-5, help="δ in (0, 1) of the audited and proven ε")
    p.add_argument("--canaries", type=positive_int, default=1000, help="number of canaries m ≥ 10")
    p.add_argument("--canary-width", type=positive_int, default=1,
                   help="coordinates k each canary spreads over (1: Dirac canaries; k > 1 audits harder for β > 2)")
    p.add_argument("--canary-scale", type=positive_float, default=10.0,
                   help="raw ℓp norm of a canary gradient in units of C (≥ 1; clipping brings it to C)")
    p.add_argument("--dim", type=dim_value, default=None,
                   help="number of noised coordinates d ≥ m·k (default m·k): the dimension of the proven ε")
    p.add_argument("--canary-kind", dest="canaries_kind", choices=["gradient", "input"], default="gradient",
                   help="gradient: written into the optimizer's per-sample gradients; input: training examples "
                        "through GGPrivacyEngine.make_private (Poisson data loader, per-sample gradients; q = 1/L)")
    p.add_argument("--score", choices=["inner", "likelihood"], default="inner",
                   help="canary score: inner product with the summed updates, or the per-step GG likelihood ratio "
                        "(stronger)")
    p.add_argument("--seed", type=_seed, default=0, help="seed of the inclusions, the sampling and the noise")
    p.add_argument("--confidence", type=_confidence, default=0.95, help="confidence of the lower bound, in (0, 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--plot", metavar="FILE",
                   help="PNG path: the attack's operating points under the proven trade-off curve of the same setting")
    p.set_defaults(func=cmd_audit)
