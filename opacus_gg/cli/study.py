"""``opacus-gg study``: the β study (accuracy against β at equal proven ε, ℓβ and ℓ2 clipping, C from a grid) on a
dataset, in one command (:mod:`opacus_gg.experiments.study`). torch is imported inside the command."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import positive_int, writable_dir


def cmd_study(args: argparse.Namespace) -> int:
    """Run the study, print its tables, write the figure."""
    import torch

    from opacus_gg.experiments.figures.curves import parse_float_list
    from opacus_gg.experiments.study import (BETAS, C_GRID, SEEDS, TARGET_EPSILONS, run_study, study_config,
                                             write_outputs)
    from opacus_gg.validation import validate_beta, validate_positive, validate_positive_int

    overrides = list(args.overrides)
    for flag, key in (("data_root", "data.root"), ("device", "device"), ("epochs", "train.epochs")):
        if getattr(args, flag) is not None:
            overrides.append(f"{key}={getattr(args, flag)}")
    cfg = study_config(args.data, args.config, overrides)
    betas = [validate_beta(b, "--betas") for b in parse_float_list(args.betas, "--betas")] if args.betas else BETAS
    epsilons = ([validate_positive(e, "--target-epsilons") for e in parse_float_list(args.target_epsilons,
                                                                                     "--target-epsilons")]
                if args.target_epsilons else TARGET_EPSILONS)
    c_grid = [validate_positive(c, "--c-grid") for c in parse_float_list(args.c_grid, "--c-grid")] \
        if args.c_grid else C_GRID
    seeds = [validate_positive_int(s, "--seeds", minimum=0) for s in parse_float_list(args.seeds, "--seeds")] \
        if args.seeds else SEEDS
    torch.set_num_threads(args.threads)
    out = Path(writable_dir(args.output_dir or f"runs/study_{args.data}", "--output-dir"))
    result = run_study(cfg, out, betas=betas, epsilons=epsilons, seeds=seeds, c_grid=c_grid,
                       skip_existing=not args.rerun, workers=args.workers)
    paths = write_outputs(result, out, args.data)
    print(paths["table"].read_text())
    failed = sum(r["error"] is not None for r in result["rows"])
    threads = args.threads if args.workers == 1 else 1
    print(f"study: {len(result['rows']) - failed}/{len(result['rows'])} runs finished in {result['wall_time']:.0f} s "
          f"({args.workers} process(es), {threads} torch thread(s) each); wrote {paths['table']}, "
          f"{paths['figure']}, {out / 'study.csv'}")
    return 0 if failed == 0 else 1


def register(subparsers: Any) -> None:
    """Add the ``study`` subcommand."""
    p = subparsers.add_parser(
        "study", help="accuracy vs β at equal proven ε, ℓβ and ℓ2 clipping, C from a grid (one command)",
        description="The β study: for each target ε, β and clipping norm p ∈ {β, 2}, σ is solved so that the proven "
                    "ε is ≤ the target (d = the model's parameters), C is taken from a small grid of ℓ2 bounds "
                    "(mapped to ℓp by the median ‖g‖_p/‖g‖_2 of the initial model's per-sample gradients), and "
                    "every point is trained with several seeds. Prints the tables (mean ± sd accuracy, proven ε, σ, "
                    "C) and writes the accuracy-vs-β figure. The choice of C on test accuracy is not accounted "
                    "(standard practice). digits and breast_cancer ship with scikit-learn; cifar10, svhn, adult "
                    "and imdb use their bundled configs and need the data under --data-root.")
    p.add_argument("--data", required=True, choices=["digits", "breast_cancer", "cifar10", "svhn", "adult", "imdb"],
                   help="dataset (its bundled config: digits→quickstart, breast_cancer→breast_cancer_fcn, "
                        "cifar10→cifar10_scatternet, svhn→svhn_scatternet, adult→adult_fcn, imdb→imdb_lstm)")
    p.add_argument("--config", "-c", metavar="FILE_OR_NAME", help="another config file or bundled name")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config key (repeatable), e.g. --set train.lr=0.5")
    p.add_argument("--betas", help="comma-separated β values (default: 1,1.25,1.5,1.75,2,2.5,3)")
    p.add_argument("--target-epsilons", help="comma-separated target ε values (default: 1,3)")
    p.add_argument("--seeds", help="comma-separated seeds ≥ 0 (default: 0,1,2)")
    p.add_argument("--c-grid", help="comma-separated ℓ2 clipping bounds C₂ (default: 0.1,0.3,1,3)")
    p.add_argument("--epochs", type=positive_int, help="training epochs (default: the config's)")
    p.add_argument("--data-root", help="directory holding the dataset files (cifar10, svhn, adult, imdb)")
    p.add_argument("--device", help="cpu, cuda, cuda:N or mps")
    p.add_argument("--threads", type=positive_int, default=1,
                   help="torch threads (torch.set_num_threads) with --workers 1")
    p.add_argument("--workers", type=positive_int, default=2,
                   help="processes training (ε, β, p) groups side by side, one torch thread each; 1 = in this "
                        "process with --threads torch threads")
    p.add_argument("--output-dir", help="where runs, tables and the figure go (default: runs/study_<data>)")
    p.add_argument("--rerun", action="store_true", help="rerun finished runs instead of reusing them")
    p.set_defaults(func=cmd_study)
