"""``opacus-gg demo-data``: write small stand-ins of CIFAR-10, SVHN, Adult and IMDB in their real formats."""

from __future__ import annotations

import argparse
from typing import Any

DATASETS = ("cifar10", "svhn", "adult", "imdb")


def cmd_demo_data(args: argparse.Namespace) -> int:
    """Write the stand-in files under ``--root`` and say how to use them."""
    from opacus_gg.experiments.demo_data import write_demo_data

    root = write_demo_data(args.root, args.datasets)
    print(f"wrote demo files for {', '.join(args.datasets)} under {root} (stand-ins in the real formats, not the "
          f"real data); try: opacus-gg train --config adult_fcn --data-root {root} --epochs 1")
    return 0


def register(subparsers: Any) -> None:
    """Add the ``demo-data`` subcommand."""
    p = subparsers.add_parser(
        "demo-data", help="write small stand-in data sets in their real on-disk formats",
        description="Write tiny generated CIFAR-10 (python pickles), SVHN (.mat), UCI Adult (CSV) and IMDB "
                    "(aclImdb tree) files, so every config can be tried without downloading the real data.")
    p.add_argument("--root", default="data", help="directory to write into (the configs' data.root)")
    p.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS), help="which data sets")
    p.set_defaults(func=cmd_demo_data)
