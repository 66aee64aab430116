"""The ``opacus-gg`` command line: one dispatcher, subcommands registered by small modules.

Each module in :data:`SUBCOMMAND_MODULES` defines ``register(subparsers)`` which adds its
subcommands with ``set_defaults(func=...)``; ``func(args)`` returns an exit code.
Bad arguments give a one-line error on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

SUBCOMMAND_MODULES = [
    "opacus_gg.cli.accounting",  # epsilon, noise-multiplier, curve
    "opacus_gg.cli.train",  # train (the main job)
    "opacus_gg.cli.pate",  # pate, and the GGNMax/outlier analyses
    "opacus_gg.cli.companions",  # compare, counts
]


class CLIError(Exception):
    """A user error: printed as one line, exit code 2."""


def positive_int(text: str) -> int:
    """argparse ``type=``: an integer ≥ 1 (argparse names the option in its one-line error)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer ≥ 1, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected an integer ≥ 1, got {text!r}")
    return v


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every available subcommand."""
    parser = _Parser(prog="opacus-gg", description="Generalized Gaussian DP tools for Opacus")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:  # the module itself is not there (yet)
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``opacus-gg`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except (CLIError, ValueError, FileNotFoundError) as e:
        msg = str(e).splitlines()[0] if str(e) else e.__class__.__name__
        sys.stderr.write(f"opacus-gg {args.command}: error: {msg}\n")
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
