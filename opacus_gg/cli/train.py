"""``opacus-gg train | sweep | report``: β-DP-SGD runs from a config (a YAML file or a bundled name such as
``quickstart``) with command-line overrides. torch and opacus are imported inside the commands."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Dict, List

from ..experiments.data_files import FILE_DATASETS, DatasetNotFoundError, require_files
from ..validation import validate_beta, validate_positive, validate_positive_int
from . import CLIError, beta_value, noise_value, norm_p, positive_float, positive_int, probability, writable_dir

# flag → dotted config key
FLAG_KEYS = {
    "beta": "privacy.beta", "clip_norm_p": "privacy.clip_norm_p", "target_epsilon": "privacy.target_epsilon",
    "delta": "privacy.target_delta", "noise_multiplier": "privacy.noise_multiplier",
    "max_grad_norm": "privacy.max_grad_norm", "clipping": "privacy.clipping", "calibration": "privacy.calibration",
    "epochs": "train.epochs",
    "batch_size": "train.batch_size", "lr": "train.lr", "device": "device", "seed": "seed",
    "data_root": "data.root", "output_dir": "output_dir",
}
# the boolean switches → dotted config key
SWITCH_KEYS = {"download": "data.download", "quiet": "quiet", "overwrite": "overwrite",
               "compare_opacus": "compare_opacus"}


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", metavar="FILE_OR_NAME",
                   help="YAML config file, or a bundled config's name (quickstart, adult_fcn, cifar10_scatternet, "
                        "svhn_scatternet, imdb_lstm); the built-in defaults if omitted")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config key, e.g. --set train.momentum=0.9 (repeatable; value parsed as YAML)")
    p.add_argument("--beta", type=beta_value, help="GG shape β ≥ 1 (1 Laplace, 2 Gaussian); config: privacy.beta")
    p.add_argument("--clip-norm-p", type=norm_p, help="ℓp norm for per-sample clipping (default: β)")
    p.add_argument("--target-epsilon", type=positive_float,
                   help="ε to calibrate σ to (config: privacy.target_epsilon)")
    p.add_argument("--delta", type=probability, help="target δ (config: privacy.target_delta)")
    p.add_argument("--noise-multiplier", type=noise_value, help="fixed σ (skips calibration)")
    p.add_argument("--calibration", choices=["certified", "paper"],
                   help="which ε the σ solver targets: the accountant's (certified) or the paper's estimate")
    p.add_argument("--max-grad-norm", type=positive_float, help="clipping norm C")
    p.add_argument("--clipping", choices=["flat", "per_layer", "adaptive"],
                   help="per-sample clipping (config: privacy.clipping); adaptive: C starts at --max-grad-norm and "
                        "tracks privacy.target_unclipped_quantile, its noisy count accounted")
    p.add_argument("--epochs", type=positive_int, help="training epochs (config: train.epochs)")
    p.add_argument("--batch-size", type=positive_int, help="expected (Poisson) batch size")
    p.add_argument("--lr", type=positive_float, help="learning rate (config: train.lr)")
    p.add_argument("--device", help="cpu, cuda, cuda:N or mps (config: device)")
    p.add_argument("--seed", type=int, help="random seed (config: seed)")
    p.add_argument("--data-root", help="directory holding the dataset files (config: data.root)")
    p.add_argument("--output-dir", help="where metrics, checkpoints and reports go (config: output_dir)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a run already in the output directory (default: write to <dir>-2, -3, …)")
    p.add_argument("--download", action="store_true", help="download CIFAR-10/SVHN with torchvision if missing")
    p.add_argument("--compare-opacus", action="store_true",
                   help="also train with opacus.PrivacyEngine (Gaussian, ℓ2) at the same ε and report both")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars")


def build_config(args: argparse.Namespace) -> Dict[str, Any]:
    """Config file or bundled name (or defaults) + ``--set`` overrides + first-class flags, validated."""
    from opacus_gg.experiments.config import apply_overrides, load_config, validate_config

    cfg = load_config(args.config)
    cfg = apply_overrides(cfg, args.overrides)
    flags = {key: getattr(args, attr) for attr, key in FLAG_KEYS.items() if getattr(args, attr, None) is not None}
    flags.update({key: True for attr, key in SWITCH_KEYS.items() if getattr(args, attr, False)})
    if getattr(args, "resume", None):
        flags["resume"] = args.resume
    if args.noise_multiplier is None and args.target_epsilon is not None:
        flags["privacy.noise_multiplier"] = None
    return validate_config(apply_overrides(cfg, flags))


def check_paths(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """The paths a run reads, checked before torch is imported (a slip is answered in a second, not after the
    imports): ``--resume``'s checkpoint, and ``data.root`` and the files under it for the file datasets unless
    ``data.download`` (:mod:`opacus_gg.experiments.data_files`, the check the loaders run too)."""
    resume = cfg.get("resume")
    if resume:
        path = Path(cfg["output_dir"]) / "checkpoint.pt" if resume in (True, "auto") else Path(resume)
        if not path.is_file():
            raise CLIError(f"--resume: no checkpoint at {path}")
    d = cfg["data"]
    root = Path(d.get("root") or ".").expanduser()
    if d["name"] in FILE_DATASETS and not d.get("download") and not root.is_dir():
        raise CLIError(f"--data-root: no directory {root} (data.name = {d['name']} reads {FILE_DATASETS[d['name']]} "
                       "there; pass --download for CIFAR-10/SVHN, or write small stand-ins with opacus-gg demo-data)")
    if d["name"] in FILE_DATASETS and not d.get("download"):
        try:
            require_files(d["name"], root)
        except DatasetNotFoundError as e:
            raise CLIError(str(e)) from None
    return cfg


def cmd_train(args: argparse.Namespace) -> int:
    """Train one model; print per-epoch loss, accuracy and ε with its scope label."""
    cfg = check_paths(build_config(args))  # a bad config, flag or path is answered before torch's import
    writable_dir(cfg["output_dir"], "--output-dir")
    from opacus_gg.experiments.train import epsilon_text, run, tradeoff_text

    res = run(cfg)
    text = (f"done: test accuracy {res['final_test_accuracy']:.4f}, "
            f"ε = {epsilon_text(res['epsilon'], res['epsilon_scope'])} at δ = {res['target_delta']:g}, d = {res['dim']}")
    base = res.get("opacus_baseline")
    if base:
        text += (f"; Opacus (Gaussian) at the same ε: test accuracy {base['test_accuracy']:.4f}, "
                 f"ε = {epsilon_text(base['epsilon'], base['epsilon_scope'])}")
    print(f"{text}; outputs in {res['config']['output_dir']}", flush=True)
    line = tradeoff_text(res.get("tradeoff"))
    if line:
        print(line, flush=True)
    return 0


def _floats(text: str, flag: str) -> List[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{flag} expects comma-separated numbers, got {text!r}") from None


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run the β × target ε × seeds grid, then write the table and plot."""
    from opacus_gg.experiments.config import apply_overrides

    cfg = check_paths(build_config(args))  # a bad config, flag or path is answered before torch's import
    ov: Dict[str, Any] = {}
    if args.betas:
        ov["sweep.betas"] = [validate_beta(b, "--betas") for b in _floats(args.betas, "--betas")]
    if args.target_epsilons:
        ov["sweep.target_epsilons"] = [validate_positive(e, "--target-epsilons")
                                       for e in _floats(args.target_epsilons, "--target-epsilons")]
    if args.seeds:
        ov["sweep.seeds"] = [validate_positive_int(v, "--seeds", minimum=0) for v in _floats(args.seeds, "--seeds")]
    if args.no_grid:
        ov["sweep.grid"] = {}
    cfg = apply_overrides(cfg, ov)
    from opacus_gg.experiments.report import write_report
    from opacus_gg.experiments.sweep import run_sweep

    out = Path(writable_dir(cfg["output_dir"], "--output-dir"))
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
    p = subparsers.add_parser(
        "train", help="train with β-DP-SGD from a config (the main job)",
        description="Train one model with β-DP-SGD (GGPrivacyEngine): σ is solved for --target-epsilon, every epoch "
                    "prints loss, accuracy and ε with its scope, and metrics.csv, results.json and a checkpoint go "
                    "to the output directory (an existing run there is kept: see --overwrite).")
    _common(p)
    p.add_argument("--resume", nargs="?", const="auto", default=None, metavar="CHECKPOINT",
                   help="continue from a checkpoint (without a path: <output-dir>/checkpoint.pt); refused when the "
                        "extra epochs would exceed the target ε σ was calibrated for")
    p.set_defaults(func=cmd_train)

    p = subparsers.add_parser(
        "sweep", help="the paper's study: train over β × target ε × seeds",
        description="Train the grid β × target ε × sweep.grid × seeds (σ solved per run), write "
                    "sweep_summary.csv and, unless --no-report, the accuracy-vs-β plot and table.")
    _common(p)
    p.add_argument("--betas", help="comma-separated β values (default: the config's sweep.betas)")
    p.add_argument("--target-epsilons", help="comma-separated target ε values (default: sweep.target_epsilons)")
    p.add_argument("--seeds", help="comma-separated seeds (default: sweep.seeds)")
    p.add_argument("--no-grid", action="store_true", help="ignore sweep.grid (only β × ε × seeds)")
    p.add_argument("--rerun", action="store_true", help="rerun finished runs instead of reusing them")
    p.add_argument("--no-report", action="store_true", help="skip the table/plot at the end")
    p.set_defaults(func=cmd_sweep)

    p = subparsers.add_parser(
        "report", help="accuracy-vs-β plot and markdown table from a sweep directory",
        description="Figure-4-style plot and Table-1-style markdown (ε with its scope) from a sweep directory.")
    p.add_argument("sweep_dir", help="a directory written by 'opacus-gg sweep'")
    p.add_argument("--output-dir", help="where to write table.md, accuracy_vs_beta.png (default: the sweep directory)")
    p.add_argument("--metric", default="best_test_accuracy", choices=["best_test_accuracy", "final_test_accuracy"],
                   help="accuracy per run")
    p.set_defaults(func=cmd_report)
