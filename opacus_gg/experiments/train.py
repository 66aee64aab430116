"""One β-DP-SGD training run from a config: data → model → GGPrivacyEngine → epochs → CSV/JSON/checkpoint.

Privacy: σ is calibrated so that after ``train.epochs`` epochs the accountant's ε (GG PRV accountant, model
dimension d = #trainable parameters, ℓ_p clipping with p = ``clip_norm_p`` or β) is ≤ ``privacy.target_epsilon``
at δ = ``privacy.target_delta`` (the engine's ``make_private_with_epsilon``). With ``privacy.calibration:
paper`` σ instead solves the paper's one-hot accounting (an estimate for β ≠ 2) and the accountant's ε is still
reported. Every ε carries the scope of the accountant's report (``epsilon_scope``: proven / equal_spreads /
estimate, :mod:`opacus_gg.accountants.report`), in the log, ``metrics.csv`` and ``results.json``.
``privacy.clipping`` (flat, per_layer, adaptive) goes to the engine; with ``adaptive`` the adaptive keys go too
(:func:`adaptive_arguments`), σ is solved with the noisy count included, results.json records ``clipping``,
``adaptive`` and ``count_noise_multiplier``, and each row's ``max_grad_norm`` is the bound C_t after the epoch.
Every epoch row holds :data:`ROW_KEYS`. Row 0 evaluates the initial model (its train_loss is a full pass over
the training set without an update).

Runs are not lost: an ``output_dir`` that already holds a run is kept and the new run goes to ``<dir>-2``
(``-3``, …) unless ``overwrite: true`` or ``resume`` is set.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg.checkpoint import load_checkpoint_file
from opacus_gg.formatting import fmt_up, solver_progress
from opacus_gg.steps import steps_for_epochs

from .config import DEFAULTS, Config, validate_config
from .data import DataBundle, load_dataset
from .features import cached_features, make_extractor, normalize_images
from .models import build_model, count_parameters

__all__ = ["run", "prepare_data", "make_privacy_engine", "epsilon_text", "tradeoff_text", "free_output_dir",
           "adaptive_arguments", "ROW_KEYS"]

ROW_KEYS = ["epoch", "train_loss", "test_loss", "test_accuracy", "epsilon", "epsilon_scope", "epsilon_paper",
            "epsilon_paper_scope", "noise_multiplier", "max_grad_norm", "beta", "dim", "steps", "wall_time"]
#: the adaptive-clipping keys of the ``privacy`` section, passed to ``make_private`` as Opacus names them
ADAPTIVE_KEYS = ("target_unclipped_quantile", "clipbound_learning_rate", "max_clipbound", "min_clipbound",
                 "unclipped_num_std")
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)
RUN_FILES = ("results.json", "metrics.csv", "checkpoint.pt", "model_final.pt")


def say(text: str) -> None:
    """Print one line and flush it (log lines appear as they happen when stdout is a file or a pipe)."""
    print(text, flush=True)


def epsilon_text(epsilon: Optional[float], scope: Optional[str]) -> str:
    """A stored ε with its scope label (:func:`opacus_gg.accountants.report.format_epsilon`); '–' if absent."""
    from opacus_gg.accountants.report import format_epsilon

    return "–" if epsilon is None or scope is None else format_epsilon(epsilon, scope)


def free_output_dir(out: Path) -> Path:
    """``out`` if it holds no run; else the first of ``out-2``, ``out-3``, … that holds none."""
    def used(p: Path) -> bool:
        return any((p / f).exists() for f in RUN_FILES)

    if not used(out):
        return out
    i = 2
    while used(out.with_name(f"{out.name}-{i}")):
        i += 1
    return out.with_name(f"{out.name}-{i}")


def _progress(quiet: bool) -> Callable:
    from tqdm.auto import tqdm

    disable = quiet or not sys.stderr.isatty()
    return lambda it, **kw: tqdm(it, disable=disable, leave=False, **kw)


def prepare_data(cfg: Config, progress: Optional[Callable] = None) -> DataBundle:
    """Load the dataset; for image models apply the input transform (scattering features, cached, or
    per-channel normalization for the raw CNN)."""
    d = cfg["data"]
    bundle = load_dataset(d)
    if d["name"] in ("cifar10", "svhn"):
        if d["features"] in ("scatter", "stub"):
            extractor = make_extractor(d["features"], cfg["device"])
            cache_dir = Path(d["cache_dir"] or Path(d["root"]) / "feature_cache")
            feats = {}
            for split, ds in (("train", bundle.train), ("test", bundle.test)):
                x, y = ds.tensors
                feats[split] = TensorDataset(cached_features(x, extractor, cache_dir=cache_dir, dataset=d["name"],
                                                             split=split, progress=progress), y)
            bundle.train, bundle.test = feats["train"], feats["test"]
            bundle.input_shape = tuple(bundle.train.tensors[0].shape[1:])
            bundle.info["features"] = getattr(extractor, "name", d["features"])
        else:
            bundle.train = TensorDataset(normalize_images(bundle.train.tensors[0], CIFAR_MEAN, CIFAR_STD),
                                         bundle.train.tensors[1])
            bundle.test = TensorDataset(normalize_images(bundle.test.tensors[0], CIFAR_MEAN, CIFAR_STD),
                                        bundle.test.tensors[1])
    return bundle


def make_privacy_engine(ball_bound: str = "renyi") -> Any:
    """``opacus_gg.GGPrivacyEngine(accountant="gg_prv", ball_bound=ball_bound)``: β-DP-SGD with the GG PRV
    accountant (``ball_bound``: config ``privacy.ball_bound``)."""
    from opacus_gg.engine import GGPrivacyEngine

    return GGPrivacyEngine(accountant="gg_prv", ball_bound=ball_bound)


def _paper_epsilon(accountant: Any, delta: float, eps_error: float) -> Any:
    """Report of the paper's one-hot accounting for the accountant's history (scope: an estimate for β ≠ 2)."""
    import warnings

    from opacus_gg.accountants import compute_epsilon_history

    with warnings.catch_warnings():  # its scope label is printed and stored with it
        warnings.simplefilter("ignore", UserWarning)
        return compute_epsilon_history(list(accountant.history), delta, mode="paper", eps_error=eps_error)


def _epsilon_report(engine: Any, delta: float, eps_error: float, diagnostics: bool) -> Any:
    """The accountant's :class:`~opacus_gg.accountants.EpsilonReport` for the steps taken so far: the proven ε
    (``get_epsilon``'s number), and with ``diagnostics`` (``privacy.equal_spreads_epsilon``) the equal-spread PRV
    beside it."""
    return engine.accountant.get_epsilon_report(delta, eps_error=eps_error, diagnostics=diagnostics)


def _proven_epsilon(engine: Any, delta: float, eps_error: float) -> Tuple[float, str]:
    """(ε, scope): the accountant's published ε (``get_epsilon``'s number, computed alone, without the equal-spread
    PRV) and its scope ("proven", or "shuffled" for a run on shuffled fixed-size batches): every row's ε."""
    rep = _epsilon_report(engine, delta, eps_error, diagnostics=False)
    return rep.epsilon, rep.scope


def _tradeoff_record(engine: Any, delta: float, eps_error: float, log: Callable[[str], None]) -> Dict[str, Any]:
    """The run's proven trade-off curve (``engine.get_tradeoff``, :mod:`opacus_gg.accountants.tradeoff`): ``fpr`` and
    ``tpr_upper`` at :data:`~opacus_gg.accountants.tradeoff.FPR_DEFAULT`, ``mu_gdp``, the scope and the curve on 100
    FPRs; where its numerics refuse, ``{"error": why}`` and a logged warning (the model and ε are already saved)."""
    from opacus_gg.accountants.tradeoff import FPR_DEFAULT

    try:
        return engine.get_tradeoff(delta, eps_error=eps_error).to_dict(FPR_DEFAULT, n=100)
    except (ValueError, ArithmeticError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        log(f"warning: no trade-off curve for this run: {why}")
        return {"error": why}


def tradeoff_text(record: Optional[Dict[str, Any]]) -> Optional[str]:
    """One line for the final summary: the proven TPR bounds at the recorded FPRs and μ-GDP; None without a curve."""
    from opacus_gg.formatting import fmt_up, fmt_up_significant

    if not record or "error" in record:
        return None
    pts = ", ".join(f"≤ {fmt_up_significant(t)} at FPR {a:g}" for a, t in zip(record["fpr"], record["tpr_upper"]))
    mu = record["mu_gdp"]
    lo, hi = record.get("mu_gdp_fpr_range") or (None, None)
    where = "" if lo is None else f" at every FPR in [{lo:g}, {hi:.7g}]"
    return (f"membership inference: TPR {pts} ({record['scope_text']})"
            + ("" if mu is None else f"; mu-GDP with mu = {fmt_up(mu)}{where}"))


def _check_device(device: str) -> None:
    """ValueError (one line) if the configured accelerator is not there."""
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: PyTorch sees no CUDA GPU here (torch {torch.__version__}, "
                             f"CUDA build {torch.version.cuda}); use --device cpu")
        idx = int(device.split(":")[1]) if ":" in device else 0
        if idx >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) visible; "
                             f"use cuda:0 … cuda:{torch.cuda.device_count() - 1}")
    if device == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ValueError("device 'mps': PyTorch sees no Apple GPU here; use --device cpu")


@torch.no_grad()
def evaluate(model: nn.Module, dataset: TensorDataset, batch_size: int, device: str) -> Tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` on ``dataset``."""
    model.eval()
    loss_sum, correct, n = 0.0, 0, 0
    for x, y in DataLoader(dataset, batch_size=batch_size):
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss_sum += nn.functional.cross_entropy(out, y, reduction="sum").item()
        correct += (out.argmax(1) == y).sum().item()
        n += len(y)
    return loss_sum / max(n, 1), correct / max(n, 1)


def _write_outputs(out: Path, rows: List[Dict[str, Any]], summary: Dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "metrics.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=ROW_KEYS)
        w.writeheader()
        w.writerows(rows)
    with open(out / "results.json", "w") as f:
        json.dump({**summary, "rows": rows}, f, indent=2)


def adaptive_arguments(cfg: Config) -> Dict[str, float]:
    """``make_private``'s adaptive-clipping keywords from ``privacy`` (unclipped_num_std None → batch_size / 20,
    Andrew et al.'s σ_b = m/20); empty unless ``privacy.clipping`` is "adaptive"."""
    p = cfg["privacy"]
    if p["clipping"] != "adaptive":
        return {}
    out = {k: float(p[k]) for k in ADAPTIVE_KEYS if p[k] is not None}
    out.setdefault("unclipped_num_std", float(cfg["train"]["batch_size"]) / 20.0)
    return out


def _format_row(r: Dict[str, Any], epochs: int, delta: float, show_c: bool = False) -> str:
    s = (f"epoch {r['epoch']}/{epochs}  train_loss {r['train_loss']:.4f}  test_loss {r['test_loss']:.4f}  "
         f"test_acc {r['test_accuracy']:.4f}  " + (f"C {r['max_grad_norm']:.4g}  " if show_c else "")
         + f"ε = {epsilon_text(r['epsilon'], r['epsilon_scope'])} at δ = {delta:g}, d = {r['dim']}")
    if r.get("epsilon_paper") is not None:
        s += f"; paper-mode ε = {epsilon_text(r['epsilon_paper'], r['epsilon_paper_scope'])}"
    return s


def _train_epoch(model: nn.Module, optimizer: Any, loader: DataLoader, device: str, max_physical_batch_size: Any,
                 progress: Callable, desc: str, steps: int) -> float:
    """One pass of private SGD over ``loader``; returns the mean training loss over non-empty batches."""
    model.train()
    criterion = nn.CrossEntropyLoss()
    losses: List[float] = []
    if max_physical_batch_size:
        from opacus.utils.batch_memory_manager import BatchMemoryManager

        ctx = BatchMemoryManager(data_loader=loader, max_physical_batch_size=int(max_physical_batch_size),
                                 optimizer=optimizer)
    else:
        ctx = contextlib.nullcontext(loader)
    with ctx as batches:
        for x, y in progress(batches, desc=desc, total=None if max_physical_batch_size else steps):
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()  # an empty Poisson batch still takes a (pure-noise) step
            if len(y):
                losses.append(loss.item())
    return sum(losses) / max(len(losses), 1)


def _load_resume(cfg: Config, out: Path) -> Tuple[Path, Dict[str, Any]]:
    """The checkpoint to resume from, after checking it matches the config and stays within the budget."""
    p, t = cfg["privacy"], cfg["train"]
    path = out / "checkpoint.pt" if cfg["resume"] in (True, "auto") else Path(cfg["resume"])
    if not path.is_file():
        raise ValueError(f"--resume: no checkpoint at {path}")
    ckpt = load_checkpoint_file(path)  # weights_only=True; a bad file: one-line ValueError
    old = ckpt.get("config", {})
    for key in ("beta", "clip_norm_p", "max_grad_norm", "target_delta", "clipping", "unclipped_num_std"):
        was = old.get("privacy", {}).get(key, DEFAULTS["privacy"][key])  # an older checkpoint: the default
        if was != p[key]:
            raise ValueError(f"--resume: privacy.{key} differs from the checkpoint's ({p[key]!r} vs {was!r})")
    if old.get("train", {}).get("batch_size") != t["batch_size"]:
        raise ValueError("--resume: train.batch_size differs from the checkpoint's")
    old_epochs = int(old.get("train", {}).get("epochs", t["epochs"]))
    calibrated = old.get("privacy", {}).get("noise_multiplier") is None
    if calibrated and int(t["epochs"]) > old_epochs and p["noise_multiplier"] is None:
        raise ValueError(f"--resume: σ = {ckpt['noise_multiplier']:.4f} was calibrated for target ε = "
                         f"{old['privacy']['target_epsilon']:g} after {old_epochs} epochs; {t['epochs']} epochs "
                         f"would spend more than that budget. Resume with --epochs {old_epochs}, or pass "
                         f"--noise-multiplier {ckpt['noise_multiplier']:.6g} to continue past the target knowingly")
    return path, ckpt


def run(cfg: Config, log: Callable[[str], None] = say) -> Dict[str, Any]:
    """Train one model with β-DP-SGD as configured; return the summary written to ``results.json``."""
    cfg = validate_config(copy.deepcopy(cfg))
    d, p, t = cfg["data"], cfg["privacy"], cfg["train"]
    device, beta, delta = cfg["device"], float(p["beta"]), float(p["target_delta"])
    _check_device(device)
    out = Path(cfg["output_dir"])
    resume_path, ckpt = _load_resume(cfg, out) if cfg.get("resume") else (None, None)
    if ckpt is None and not cfg["overwrite"]:
        free = free_output_dir(out)
        if free != out:
            log(f"{out} already holds a run: writing to {free} (use --overwrite to replace it)")
            out = free
            cfg["output_dir"] = str(out)
    progress = _progress(bool(cfg.get("quiet")))
    torch.manual_seed(int(cfg["seed"]))

    bundle = prepare_data(cfg, progress)
    model = build_model(cfg["model"], bundle.num_classes, bundle.input_shape, d["vocab_size"]).to(device)
    dim = count_parameters(model)
    opt_cls = torch.optim.SGD if t["optimizer"] == "sgd" else torch.optim.Adam
    kw = {"momentum": t["momentum"]} if t["optimizer"] == "sgd" else {}
    optimizer = opt_cls(model.parameters(), lr=t["lr"], weight_decay=t["weight_decay"], **kw)
    loader = DataLoader(bundle.train, batch_size=int(t["batch_size"]), shuffle=True, num_workers=t["num_workers"])
    steps_per_epoch = len(loader)
    sample_rate = 1.0 / steps_per_epoch  # what Opacus's DPDataLoader uses for expected batch size B: ≈ B/n

    engine = make_privacy_engine(p["ball_bound"])
    adaptive = adaptive_arguments(cfg)
    common = dict(module=model, optimizer=optimizer, data_loader=loader, max_grad_norm=float(p["max_grad_norm"]),
                  poisson_sampling=bool(p["poisson_sampling"]), beta=beta, clip_norm_p=p["clip_norm_p"],
                  clipping=p["clipping"], **adaptive)
    sigma = ckpt["noise_multiplier"] if ckpt else p["noise_multiplier"]
    calibration = "fixed" if sigma is not None else p["calibration"]
    t0 = time.perf_counter()
    if sigma is None:
        log(f"solving σ so that ε ≤ {float(p['target_epsilon']):g} at δ = {delta:g} after {t['epochs']} epoch(s) "
            f"({p['calibration']} accounting, d = {dim}; each try is one accountant run)...")
    target = float(p.get("target_epsilon") or float("inf"))
    if sigma is None and p["calibration"] == "paper":
        from opacus_gg.accountants import get_noise_multiplier

        sigma = get_noise_multiplier(target_epsilon=float(p["target_epsilon"]), target_delta=delta,
                                     sample_rate=sample_rate, epochs=int(t["epochs"]), beta=beta, dim=dim,
                                     clip_norm_p=p["clip_norm_p"], mode="paper",
                                     epsilon_tolerance=float(p["epsilon_tolerance"]))
    if sigma is None:
        model, optimizer, loader = engine.make_private_with_epsilon(
            target_epsilon=float(p["target_epsilon"]), target_delta=delta, epochs=int(t["epochs"]),
            epsilon_tolerance=float(p["epsilon_tolerance"]),
            progress=lambda s, e: log(f"  {solver_progress(s, e, target)}"),
            **common)
    else:
        model, optimizer, loader = engine.make_private(noise_multiplier=float(sigma), **common)
    sigma = float(optimizer.noise_multiplier)
    if calibration != "fixed":
        log(f"σ = {sigma:.4f} (solved in {time.perf_counter() - t0:.1f} s)")

    rows: List[Dict[str, Any]] = []
    start_epoch, elapsed = 1, 0.0
    if ckpt is not None:
        ckpt = engine.load_checkpoint(path=resume_path, module=model, optimizer=optimizer)
        rows, start_epoch, elapsed = ckpt["rows"], int(ckpt["epoch"]) + 1, float(ckpt.get("wall_time", 0.0))
        if "torch_rng_state" in ckpt:
            torch.set_rng_state(ckpt["torch_rng_state"])
        log(f"resumed from {resume_path} at epoch {start_epoch - 1}")

    summary: Dict[str, Any] = {
        "name": cfg["name"], "config": cfg, "dataset": d["name"], "model": cfg["model"]["name"],
        "beta": beta, "clip_norm_p": p["clip_norm_p"] if p["clip_norm_p"] is not None else beta,
        "dim": dim, "sample_rate": sample_rate, "steps_per_epoch": steps_per_epoch,
        "noise_multiplier": sigma, "max_grad_norm": float(p["max_grad_norm"]), "clipping": p["clipping"],
        "adaptive": adaptive or None, "count_noise_multiplier": getattr(optimizer, "count_noise_multiplier", None),
        "target_delta": delta,
        "target_epsilon": p["target_epsilon"] if calibration != "fixed" else None, "calibration": calibration,
        "ball_bound": p["ball_bound"], "engine": type(engine).__name__, "seed": cfg["seed"],
        "epsilon_note": "epsilon: the GG PRV accountant's epsilon for this run (dim = #params), with the scope in "
                        "epsilon_scope; epsilon_paper: the paper's one-hot accounting, scope in epsilon_paper_scope",
    }
    clip = "" if p["clipping"] == "flat" else (f" ({p['clipping']}" + (
        f": γ = {adaptive['target_unclipped_quantile']:g}, σ_c = {summary['count_noise_multiplier']:g}"
        if adaptive else "") + ")")
    log(f"{cfg['name']}: {d['name']} / {cfg['model']['name']} (d = {dim} parameters), β={beta:g}, σ={sigma:.4f}, "
        f"C={p['max_grad_norm']:g}{clip}, q={sample_rate:.5f}, {steps_per_epoch} steps/epoch, engine {type(engine).__name__}"
        f"; outputs in {out}")

    if not rows:
        tr_loss, _ = evaluate(model, bundle.train, t["eval_batch_size"], device)
        te_loss, te_acc = evaluate(model, bundle.test, t["eval_batch_size"], device)
        rows.append({"epoch": 0, "train_loss": tr_loss, "test_loss": te_loss, "test_accuracy": te_acc,
                     "epsilon": 0.0, "epsilon_scope": "proven", "epsilon_paper": 0.0, "epsilon_paper_scope": "proven",
                     "noise_multiplier": sigma, "max_grad_norm": float(p["max_grad_norm"]), "beta": beta, "dim": dim,
                     "steps": 0, "wall_time": 0.0})
    for epoch in range(start_epoch, int(t["epochs"]) + 1):
        t0 = time.perf_counter()
        train_loss = _train_epoch(model, optimizer, loader, device, t["max_physical_batch_size"], progress,
                                  f"epoch {epoch}", steps_per_epoch)
        elapsed += time.perf_counter() - t0
        te_loss, te_acc = evaluate(model, bundle.test, t["eval_batch_size"], device)
        eps, scope = _proven_epsilon(engine, delta, p["eps_error"])
        want_paper = p["paper_epsilon"] is True or (p["paper_epsilon"] == "final" and epoch == int(t["epochs"]))
        if want_paper and adaptive:  # the paper's one-hot accounting has no count query
            log("paper-mode ε skipped: the paper's accounting has no count query (privacy.clipping: adaptive)")
            want_paper = False
        paper = _paper_epsilon(engine.accountant, delta, p["eps_error"]) if want_paper else None
        row = {"epoch": epoch, "train_loss": train_loss, "test_loss": te_loss, "test_accuracy": te_acc,
               "epsilon": eps, "epsilon_scope": scope,
               "epsilon_paper": None if paper is None else paper.epsilon,
               "epsilon_paper_scope": None if paper is None else paper.scope,
               "noise_multiplier": sigma, "max_grad_norm": float(optimizer.max_grad_norm), "beta": beta, "dim": dim,
               "steps": steps_for_epochs(epoch, data_loader=loader),
               "wall_time": elapsed}
        rows.append(row)
        log(_format_row(row, int(t["epochs"]), delta, show_c=bool(adaptive)))
        if summary["target_epsilon"] is not None and eps > float(summary["target_epsilon"]):
            log(f"warning: ε = {epsilon_text(eps, scope)} exceeds the target "
                f"{float(summary['target_epsilon']):g}")
        _write_outputs(out, rows, summary)
        engine.save_checkpoint(path=out / "checkpoint.pt", module=model, optimizer=optimizer,
                               checkpoint_dict={"epoch": epoch, "rows": rows, "config": cfg, "noise_multiplier": sigma,
                                                "wall_time": elapsed, "torch_rng_state": torch.get_rng_state()})

    last = rows[-1]
    from opacus_gg.accountants.report import scope_fields

    # the proven ε with its method; the equal-spread ε beside it only where the config asks for it
    eps_fields = scope_fields(_epsilon_report(engine, delta, p["eps_error"], bool(p["equal_spreads_epsilon"])))

    summary.update({"epochs_done": last["epoch"], "final_test_accuracy": last["test_accuracy"],
                    "best_test_accuracy": max(r["test_accuracy"] for r in rows[1:]) if len(rows) > 1 else None,
                    **eps_fields, "epsilon_paper": last["epsilon_paper"],
                    "epsilon_paper_scope": last["epsilon_paper_scope"],
                    "wall_time_per_epoch": elapsed / max(last["epoch"], 1)})
    inner = getattr(model, "_module", model)
    torch.save(inner.state_dict(), out / "model_final.pt")
    summary["tradeoff"] = _tradeoff_record(engine, delta, p["eps_error"], log)
    if cfg["compare_opacus"]:
        summary["opacus_baseline"] = opacus_baseline(cfg, bundle, float(eps_fields["epsilon"]), progress, log)
    _write_outputs(out, rows, summary)
    return {**summary, "rows": rows}


def opacus_baseline(cfg: Config, bundle: DataBundle, target_epsilon: float, progress: Callable,
                    log: Callable[[str], None] = say) -> Dict[str, Any]:
    """The same model and schedule trained with ``opacus.PrivacyEngine`` (Gaussian noise, ℓ2 clipping, Opacus's
    PRV accountant) calibrated to ``target_epsilon`` (the β-DP-SGD run's ε); ε re-checked by the GG accountant
    at β = 2 so it carries a scope like every other printed ε."""
    from opacus import PrivacyEngine

    from opacus_gg.accountants import compute_epsilon

    d, p, t = cfg["data"], cfg["privacy"], cfg["train"]
    device, delta = cfg["device"], float(p["target_delta"])
    torch.manual_seed(int(cfg["seed"]))
    model = build_model(cfg["model"], bundle.num_classes, bundle.input_shape, d["vocab_size"]).to(device)
    opt_cls = torch.optim.SGD if t["optimizer"] == "sgd" else torch.optim.Adam
    kw = {"momentum": t["momentum"]} if t["optimizer"] == "sgd" else {}
    optimizer = opt_cls(model.parameters(), lr=t["lr"], weight_decay=t["weight_decay"], **kw)
    loader = DataLoader(bundle.train, batch_size=int(t["batch_size"]), shuffle=True, num_workers=t["num_workers"])
    steps_per_epoch = len(loader)
    engine = PrivacyEngine(accountant="prv")
    model, optimizer, loader = engine.make_private_with_epsilon(
        module=model, optimizer=optimizer, data_loader=loader, target_epsilon=target_epsilon, target_delta=delta,
        epochs=int(t["epochs"]), max_grad_norm=float(p["max_grad_norm"]),
        poisson_sampling=bool(p["poisson_sampling"]))
    sigma = float(optimizer.noise_multiplier)
    log(f"Opacus baseline (opacus.PrivacyEngine, Gaussian noise, ℓ2 clipping) at the same ε: σ = {sigma:.4f}")
    for epoch in range(1, int(t["epochs"]) + 1):
        _train_epoch(model, optimizer, loader, device, t["max_physical_batch_size"], progress,
                     f"opacus epoch {epoch}", steps_per_epoch)
    _, acc = evaluate(model, bundle.test, t["eval_batch_size"], device)
    steps = sum(n for _, _, n in engine.accountant.history)
    rep = compute_epsilon(noise_multiplier=sigma, sample_rate=1.0 / steps_per_epoch, steps=steps, delta=delta,
                          beta=2.0, eps_error=float(p["eps_error"]))
    opacus_prv = float(engine.get_epsilon(delta))  # one PRV composition for the log line and the record
    log(f"Opacus baseline: test_acc {acc:.4f}  ε = {epsilon_text(rep.epsilon, rep.scope)} at δ = {delta:g} "
        f"(Opacus's own PRV accountant: {fmt_up(opacus_prv)})")
    return {"test_accuracy": acc, "noise_multiplier": sigma, "epsilon": rep.epsilon, "epsilon_scope": rep.scope,
            "epsilon_opacus_prv": opacus_prv, "engine": "opacus.PrivacyEngine(accountant='prv')"}
