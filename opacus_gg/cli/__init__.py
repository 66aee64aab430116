"""The ``opacus-gg`` command line: one dispatcher, subcommands registered by small modules.

Each module in :data:`SUBCOMMAND_MODULES` defines ``register(subparsers)`` which adds its subcommands with
``set_defaults(func=...)``; ``func(args)`` returns an exit code. The modules import torch, opacus and the
accountant only inside the commands, so ``--help`` and argument errors answer at once.

Every user error (bad option, bad config file, missing data, an unwritable path, no GPU, no network) is one line on
stderr and exit code 2; library warnings are printed once each, as one line.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import math
import os
import sys
import warnings
from typing import Any, Callable, List, Optional, Sequence

from opacus_gg.validation import (
    DIM_MAX,
    STEPS_MAX,
    dim_matters,
    validate_beta,
    validate_clip_norm_p,
    validate_delta,
    validate_dim,
    validate_noise_multiplier,
    validate_positive,
    validate_positive_int,
    validate_sample_rate,
)

SUBCOMMAND_MODULES = [
    "opacus_gg.cli.accounting",  # epsilon, noise-multiplier, curve
    "opacus_gg.cli.tradeoff",  # tradeoff (the proven TPR bound of membership inference at each FPR)
    "opacus_gg.cli.train",  # train, sweep, report (the main job)
    "opacus_gg.cli.study",  # study (accuracy vs β at equal proven ε)
    "opacus_gg.cli.demo_data",  # demo-data
    "opacus_gg.cli.pate",  # pate, and the GGNMax/outlier analyses
    "opacus_gg.cli.companions",  # compare, counts
    "opacus_gg.cli.audit",  # audit (one-run empirical ε lower bound beside the proven ε)
]

#: warnings that are not the user's business: Opacus's secure-RNG notice (we never claim secure mode unless
#: asked) and PyTorch's notice on Opacus's full backward hooks when an input needs no gradient
QUIET_WARNINGS = (
    "Secure RNG turned off",
    "Full backward hook is firing",
    "Using a non-full backward hook",
    "Optimal order is the",  # Opacus's RDP order search (largest/smallest alpha): not actionable by the user
)


class CLIError(Exception):
    """A user error raised by a subcommand: printed as one line, exit code 2."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default; keeps descriptions as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, [], argparse.SUPPRESS) or action.required or "%(default)" in text:
            return text
        return text + " (default: %(default)s)"


def _checked(validator: Callable[..., Any], what: str) -> Callable[[str], Any]:
    """An argparse ``type=`` from a validator of :mod:`opacus_gg.validation` (argparse names the option)."""

    def convert(text: str) -> Any:
        try:
            return validator(text, what)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = validator.__name__.replace("validate_", "")
    return convert


#: argparse ``type=`` converters, one per range, each backed by :mod:`opacus_gg.validation`
positive_int = _checked(lambda text, what: validate_positive_int(_int(text, what), what), "the value")
steps_value = _checked(lambda text, what: validate_positive_int(_int(text, what), what, maximum=STEPS_MAX),
                       "the value")  # T ∈ [1, STEPS_MAX]
dim_value = _checked(lambda text, what: validate_positive_int(_int(text, what), what, maximum=DIM_MAX),
                     "the value")  # d ∈ [1, DIM_MAX]
positive_float = _checked(validate_positive, "the value")  # a finite number > 0
#: a noise multiplier σ > 0 in the proven range [NOISE_MULTIPLIER_MIN, NOISE_MULTIPLIER_MAX] (the API's one rule)
noise_value = _checked(lambda text, what: validate_noise_multiplier(text, what, allow_zero=False),
                      "the value")
beta_value = _checked(validate_beta, "β")  # the GG shape β: a finite number ≥ 1
probability = _checked(validate_delta, "δ")  # δ ∈ (0, 1)
rate = _checked(validate_sample_rate, "the sampling rate")  # q ∈ (0, 1]
norm_p = _checked(lambda text, what: validate_clip_norm_p(text, 2.0, what), "p")  # ℓp exponent: p ≥ 1 or inf


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{what} must be an integer ≥ 1, got {text!r}") from None


def needs_dim(beta: float, clip_norm_p: Optional[float], dim: Optional[int], flag: str = "--dim") -> None:
    """Refuse a missing ``--dim`` when ε depends on it (:func:`opacus_gg.validation.dim_matters`, the API's rule);
    CLIError says why."""
    try:
        validate_dim(dim, beta, clip_norm_p, flag)
    except ValueError as e:
        raise CLIError(str(e).replace(f"pass {flag}=", f"pass {flag} ")) from None


def writable_dir(path: str, flag: str) -> str:
    """Refuse (CLIError) an output directory that cannot be made or written, before any work: its nearest existing
    ancestor must be a writable directory (nothing is created here). Returns ``path``."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if os.path.exists(path) and not os.path.isdir(path):
        raise CLIError(f"{flag} {path} is a file, not a directory")
    if not os.path.isdir(probe):
        raise CLIError(f"{flag} {path} cannot be made: {probe} is a file, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise CLIError(f"{flag} {path} cannot be written: {probe} is not writable")
    return path


def writable_file(path: str, flag: str) -> str:
    """Refuse (CLIError) an output file that cannot be written, before any work: not a directory, and its directory
    can be made and written (:func:`writable_dir`). Returns ``path``."""
    if os.path.isdir(path):
        raise CLIError(f"{flag} {path} is a directory, not a file")
    writable_dir(os.path.dirname(os.path.abspath(path)), flag)
    return path


def dumps_json(obj: Any) -> str:
    """Strict JSON for ``--json``: non-finite floats become strings ("inf"), arrays lists, keys strings."""

    def clean(v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): clean(w) for k, w in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(w) for w in v]
        if hasattr(v, "tolist"):
            return clean(v.tolist())
        if isinstance(v, float) and not math.isfinite(v):
            return str(v)
        return v

    return json.dumps(clean(obj), default=str)


DIM_HELP = ("number of noised coordinates d (the model's trainable parameters); required unless β = 2 with "
            "p ≤ 2, since ε grows with d everywhere else")


def add_mechanism_args(p: argparse.ArgumentParser, epochs: bool = False) -> None:
    """The options that define the subsampled GG mechanism's history: β, q, T, δ, d, p (``epochs``: T given as
    ``--steps`` or as ``--epochs``, exactly one, as the API's ``get_noise_multiplier`` takes them)."""
    p.add_argument("--beta", type=beta_value, required=True, help="GG shape β ≥ 1 (1 Laplace, 2 Gaussian)")
    p.add_argument("--sample-rate", type=rate, required=True, help="Poisson sampling rate q in (0, 1]")
    steps = p.add_mutually_exclusive_group(required=True) if epochs else p
    steps.add_argument("--steps", type=steps_value, required=not epochs,
                       help=f"number of steps T in [1, {STEPS_MAX:.0e}]")
    if epochs:
        steps.add_argument("--epochs", type=positive_float, default=None,
                           help="number of epochs: T = ⌈epochs · ⌈1/q⌉⌉ steps, as the API's epochs= "
                                "(opacus_gg.steps.steps_for_epochs: never fewer than training runs)")
    p.add_argument("--delta", type=probability, required=True, help="target δ in (0, 1)")
    p.add_argument("--dim", type=dim_value, default=None, help=DIM_HELP)
    p.add_argument("--clip-norm-p", type=norm_p, default=None,
                   help="ℓp norm of the per-sample clipping, p ≥ 1 or 'inf' (default: β)")


#: flags of Opacus's example scripts (examples/mnist.py, cifar10.py) → ours, for the "unrecognized argument" hint
OPACUS_EXAMPLE_FLAGS = {"--sigma": "--noise-multiplier", "--max-per-sample-grad_norm": "--max-grad-norm",
                        "--max-per-sample-grad-norm": "--max-grad-norm", "--sample_rate": "--sample-rate"}


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._arg_strings: List[str] = []

    def parse_known_args(self, args: Optional[Sequence[str]] = None, namespace: Any = None) -> Any:
        self._arg_strings = list(sys.argv[1:] if args is None else args)  # kept for error()
        return super().parse_known_args(args, namespace)

    def _unknown_option(self) -> Optional[str]:
        """``"<prog>: error: unrecognized argument --x (did you mean --y?)"`` for the first ``--option`` given that
        this parser (or the subcommand's) does not know: a misspelt flag is named before the required flag it
        then seems to lack."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for text in self._arg_strings:
                    if text in action.choices:
                        return action.choices[text]._unknown_option()
        known = [s for s in self._option_string_actions if s.startswith("--")]
        for text in self._arg_strings:
            name = text.split("=", 1)[0]
            if not name.startswith("--") or name == "--" or any(k.startswith(name) for k in known):
                continue  # a value, or an option (or an abbreviation of one) that argparse accepts
            alias = OPACUS_EXAMPLE_FLAGS.get(name)
            if alias in known:  # Opacus's examples' name for one of ours: that one, not the closest spelling
                return (f"{self.prog}: error: unrecognized argument {name} (Opacus's examples' name for {alias}: "
                        f"use {alias})")
            close = difflib.get_close_matches(name, known, n=1)
            return (f"{self.prog}: error: unrecognized argument {name}"
                    + (f" (did you mean {close[0]}?)" if close else ""))
        return None

    def error(self, message: str) -> None:  # one line, exit 2
        unknown = None
        if message.startswith(("the following arguments are required", "unrecognized arguments")):
            unknown = self._unknown_option()
        sys.stderr.write((unknown or f"{self.prog}: error: {message}") + "\n")
        raise SystemExit(2)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("opacus-gg")
    except PackageNotFoundError:  # running from a source tree that was never installed
        from opacus_gg import __version__

        return __version__


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked (importlib.metadata costs ~0.1 s of start-up
    that ``--help`` and every command would otherwise pay)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show the program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: Any = None):
        sys.stdout.write(f"{parser.prog} {_version()}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every subcommand."""
    parser = _Parser(prog="opacus-gg",
                     description="Generalized Gaussian differential privacy for Opacus: privacy accounting "
                                 "(epsilon, noise-multiplier, curve, compare, counts), what ε means (tradeoff: the "
                                 "proven TPR bound of membership inference; audit: an empirical ε lower bound "
                                 "beside the proven ε), β-DP-SGD training (train, sweep, report, study, demo-data) "
                                 "and GGNMax/PATE (pate, pate-experiment, outliers). "
                                 "Run 'opacus-gg <command> --help' for a command's options.")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="<command>")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _one_line_warnings() -> Callable:
    """A ``warnings.showwarning`` that prints each distinct message once, as one line, and drops
    :data:`QUIET_WARNINGS`."""
    seen = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        text = str(message).strip().splitlines()[0] if str(message).strip() else category.__name__
        if any(q in str(message) for q in QUIET_WARNINGS) or text in seen:
            return
        seen.add(text)
        sys.stderr.write(f"opacus-gg: warning: {text}\n")
        sys.stderr.flush()

    return show


#: modules of the ``experiments`` extra (pyproject.toml) → the message for a missing one
EXTRA_MODULES = {"yaml": "pyyaml", "tqdm": "tqdm", "matplotlib": "matplotlib", "sklearn": "scikit-learn",
                 "torchvision": "torchvision", "kymatio": "kymatio"}


def _user_error(e: BaseException) -> Optional[str]:
    """The one-line message for exceptions that mean bad input (or a missing resource); None for bugs."""
    if isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] in EXTRA_MODULES:
        pkg = EXTRA_MODULES[e.name.split(".")[0]]
        extra = "scatter" if pkg == "kymatio" else "experiments"
        return f"this command needs {pkg}: pip install 'opacus-gg[{extra}]'"
    if isinstance(e, MemoryError):  # a setting too large for this machine: say so, not a traceback
        return f"out of memory ({str(e).splitlines()[0] if str(e) else 'MemoryError'}): lower the sizes asked for"
    # OSError: a path that cannot be read or written (missing, a directory, under a file, read-only, disk full)
    if isinstance(e, (CLIError, ValueError, OSError)):
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    return None


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``opacus-gg`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        sys.stdout.reconfigure(line_buffering=True)  # lines appear as they happen in files and pipes too
    except (AttributeError, ValueError):  # a replaced stdout (e.g. under pytest's capture)
        pass
    with warnings.catch_warnings():  # restores the caller's warning handler afterwards
        warnings.showwarning = _one_line_warnings()
        try:
            return int(args.func(args) or 0)
        except KeyboardInterrupt:
            sys.stderr.write(f"opacus-gg {args.command}: interrupted\n")
            return 130
        except Exception as e:  # noqa: BLE001 - user errors become one line; anything else is a bug: re-raise
            msg = _user_error(e)
            if msg is None:
                raise
            sys.stderr.write(f"opacus-gg {args.command}: error: {msg}\n")
            return 2

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
