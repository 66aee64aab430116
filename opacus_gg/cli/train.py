"""``opacus-gg train | sweep | report``: β-DP-SGD runs from ``configs/*.yaml`` with command-line overrides."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Dict, List

# flag → dotted config key
FLAG_KEYS = {
    "beta": "privacy.beta", "clip_norm_p": "privacy.clip_norm_p", "target_epsilon": "privacy.target_epsilon",
    "delta": "privacy.target_delta", "noise_multiplier": "privacy.noise_multiplier",
    "max_grad_norm": "privacy.max_grad_norm", "calibration": "privacy.calibration", "epochs": "train.epochs",
    "batch_size": "train.batch_size", "lr": "train.lr", "device": "device", "seed": "seed",
    "data_root": "data.root", "output_dir": "output_dir",
}


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", help="YAML config (configs/*.yaml); defaults if omitted")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config key, e.g. --set train.momentum=0.9 (repeatable; value parsed as YAML)")
    p.add_argument("--beta", type=float, help="GG shape β ≥ 1 (1 Laplace, 2 Gaussian)")
    p.add_argument("--clip-norm-p", type=float, help="ℓp norm for per-sample clipping (default β)")
    p.add_argument("--target-epsilon", type=float, help="certified ε to calibrate σ to")
    p.add_argument("--delta", type=float, help="target δ")
    p.add_argument("--noise-multiplier", type=float, help="fixed σ (skips calibration)")
    p.add_argument("--calibration", choices=["certified", "paper"], help="which ε the σ solver targets")
    p.add_argument("--max-grad-norm", type=float, help="clipping norm C")
    p.add_argument("--epochs", type=int)
    p.add_argument("--batch-size", type=int, help="expected (Poisson) batch size")
    p.add_argument("--lr", type=float)
    p.add_argument("--device", help="cpu, cuda, cuda:1, ...")
    p.add_argument("--seed", type=int)
    p.add_argument("--data-root", help="directory holding the dataset files")
    p.add_argument("--output-dir", help="where metrics, checkpoints and reports go")
    p.add_argument("--download", action="store_true", help="download CIFAR-10/SVHN with torchvision if missing")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars")


def build_config(args: argparse.Namespace) -> Dict[str, Any]:
    """Config file (or defaults) + ``--set`` overrides + first-class flags, validated."""
    from opacus_gg.experiments.config import apply_overrides, load_config, validate_config

    cfg = load_config(args.config)
    cfg = apply_overrides(cfg, args.overrides)
    flags = {key: getattr(args, attr) for attr, key in FLAG_KEYS.items() if getattr(args, attr, None) is not None}
    if args.download:
        flags["data.download"] = True
    if args.quiet:
        flags["quiet"] = True
    if getattr(args, "resume", None):
        flags["resume"] = args.resume
    if args.noise_multiplier is None and args.target_epsilon is not None:
        flags["privacy.noise_multiplier"] = None
    return validate_config(apply_overrides(cfg, flags))


def cmd_train(args: argparse.Namespace) -> int:
    """Train one model; print per-epoch loss, accuracy and certified ε."""
    import warnings

    from opacus_gg.experiments.train import ceil_eps, run

    # harmless PyTorch notice on Opacus's hooks when inputs need no gradient; keeps the main job's output readable
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    res = run(build_config(args))
    print(f"done: test accuracy {res['final_test_accuracy']:.4f}, certified ε = {ceil_eps(res['epsilon']):.2f} "
          f"at δ = {res['target_delta']:g}; outputs in {res['config']['output_dir']}")
    return 0


def _floats(text: str) -> List[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run the β × target ε × seeds grid, then write the table and plot."""
    from opacus_gg.experiments.config import apply_overrides
    from opacus_gg.experiments.report import write_report
    from opacus_gg.experiments.sweep import run_sweep

    cfg = build_config(args)
    ov: Dict[str, Any] = {}
    if args.betas:
        ov["sweep.betas"] = _floats(args.betas)
    if args.target_epsilons:
        ov["sweep.target_epsilons"] = _floats(args.target_epsilons)
    if args.seeds:
        ov["sweep.seeds"] = [int(v) for v in _floats(args.seeds)]
    if args.no_grid:
        ov["sweep.grid"] = {}
    cfg = apply_overrides(cfg, ov)
    out = Path(cfg["output_dir"])
    rows = run_sweep(cfg, out, skip_existing=not args.rerun)
    failed = sum(r["error"] is not None for r in rows)
    print(f"sweep: {len(rows) - failed}/{len(rows)} runs finished; summary in {out / 'sweep_summary.csv'}")
    if not args.no_report and failed < len(rows):
        paths = write_report(out)
        print(f"report: {paths['table']}, {paths['plot']}")
    return 0 if failed == 0 else 1


def cmd_report(args: argparse.Namespace) -> int:
    """Figure-4-style plot and Table-1-style markdown from a sweep directory."""
    from opacus_gg.experiments.report import write_report

    paths = write_report(Path(args.sweep_dir), Path(args.output_dir) if args.output_dir else None, args.metric)
    print(paths["table"].read_text())
    print(f"wrote {paths['table']}, {paths['plot']}, {paths['json']}")
    return 0


def register(subparsers: Any) -> None:
    """Add the ``train``, ``sweep`` and ``report`` subcommands."""
    p = subparsers.add_parser("train", help="train with β-DP-SGD from a config (the main job)")
    _common(p)
    p.add_argument("--resume", nargs="?", const="auto", default=None, metavar="CHECKPOINT",
                   help="continue from a checkpoint (default: <output-dir>/checkpoint.pt)")
    p.set_defaults(func=cmd_train)

    p = subparsers.add_parser("sweep", help="the paper's study: train over β × target ε × seeds")
    _common(p)
    p.add_argument("--betas", help="comma-separated β values (default: the config's sweep.betas)")
    p.add_argument("--target-epsilons", help="comma-separated target ε values")
    p.add_argument("--seeds", help="comma-separated seeds")
    p.add_argument("--no-grid", action="store_true", help="ignore sweep.grid (only β × ε × seeds)")
    p.add_argument("--rerun", action="store_true", help="rerun finished runs instead of reusing them")
    p.add_argument("--no-report", action="store_true", help="skip the table/plot at the end")
    p.set_defaults(func=cmd_sweep)

    p = subparsers.add_parser("report", help="accuracy-vs-β plot and markdown table from a sweep directory")
    p.add_argument("sweep_dir")
    p.add_argument("--output-dir", help="default: the sweep directory")
    p.add_argument("--metric", default="best_test_accuracy", choices=["best_test_accuracy", "final_test_accuracy"])
    p.set_defaults(func=cmd_report)
