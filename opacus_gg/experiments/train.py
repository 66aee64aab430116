"""One β-DP-SGD training run from a config: data → model → GGPrivacyEngine → epochs → CSV/JSON/checkpoint.

Privacy: σ is calibrated so that after ``train.epochs`` epochs the **certified** ε (GG PRV accountant, worst case
over shift directions in the model's real dimension d = #trainable parameters, ℓ_p clipping with p =
``clip_norm_p`` or β) equals ``privacy.target_epsilon`` at δ = ``privacy.target_delta`` (engine's
``make_private_with_epsilon``). With ``privacy.calibration: paper`` σ instead solves the paper's one-hot
accounting (NOT a guarantee for β ≠ 2) and the certified ε is still reported each epoch.
Every epoch row holds: epoch, train_loss, test_loss, test_accuracy, epsilon (certified), epsilon_paper
(NOT a guarantee for β ≠ 2), noise_multiplier, beta, steps, wall_time. Row 0 evaluates the initial model
(its train_loss is a full pass over the training set without an update).
"""

from __future__ import annotations

import contextlib
import copy
import csv
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from .config import Config, validate_config
from .data import DataBundle, load_dataset
from .features import cached_features, make_extractor, normalize_images
from .models import build_model, count_parameters

__all__ = ["run", "prepare_data", "make_privacy_engine", "ceil_eps", "ROW_KEYS"]

ROW_KEYS = ["epoch", "train_loss", "test_loss", "test_accuracy", "epsilon", "epsilon_paper",
            "noise_multiplier", "beta", "steps", "wall_time"]
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


def ceil_eps(eps: Optional[float], digits: int = 2) -> Optional[float]:
    """Round ε **up** to ``digits`` decimals (a printed ε must stay an upper bound): ⌈ε·10^k⌉/10^k."""
    if eps is None or not math.isfinite(eps):
        return eps
    f = 10 ** digits
    return math.ceil(eps * f - 1e-12) / f


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


def make_privacy_engine(beta: float) -> Tuple[Any, bool]:
    """Return ``(engine, is_gg)``: ``opacus_gg.engine.GGPrivacyEngine(accountant="gg_prv")``.

    Only if the ``gg_prv`` accountant (or the engine) is unavailable and β = 2, fall back with a warning to
    GGPrivacyEngine with Opacus's Gaussian ``prv`` accountant (or ``opacus.PrivacyEngine``): at β = 2
    β-DP-SGD is DP-SGD and that ε is Opacus's PRV bound. For β ≠ 2 there is no fallback.
    """
    try:
        from opacus_gg.engine import GGPrivacyEngine
    except ImportError as e:
        if beta != 2:
            raise RuntimeError(f"privacy.beta={beta} needs opacus_gg.engine.GGPrivacyEngine ({e})") from e
        from opacus import PrivacyEngine

        warnings.warn(f"opacus_gg.engine unavailable ({e}): using opacus.PrivacyEngine (β = 2, PRV accountant)")
        return PrivacyEngine(accountant="prv"), False
    try:
        return GGPrivacyEngine(accountant="gg_prv"), True
    except ValueError as e:  # the "gg_prv" accountant is not registered
        if beta != 2:
            raise RuntimeError(f"privacy.beta={beta} needs the 'gg_prv' accountant, which is unavailable ({e})") from e
        warnings.warn(f"'gg_prv' accountant unavailable ({e}): using Opacus's Gaussian PRV accountant (β = 2)")
        return GGPrivacyEngine(accountant="prv"), True


def _paper_epsilon(accountant: Any, delta: float, eps_error: float) -> Optional[float]:
    """ε of the paper's one-hot accounting for the accountant's history (NOT a guarantee for β ≠ 2)."""
    try:
        from opacus_gg.accountants import compute_epsilon_history
    except ImportError:
        return None
    history = getattr(accountant, "history", None)
    if not history or len(history[0]) < 6:
        return None
    with warnings.catch_warnings():  # labelled "NOT a guarantee" wherever we print or store it
        warnings.simplefilter("ignore", UserWarning)
        return float(compute_epsilon_history(list(history), delta, mode="paper", eps_error=eps_error).epsilon)


def _certified_epsilon(engine: Any, delta: float, eps_error: float) -> float:
    acc = engine.accountant
    if not acc.history:
        return 0.0
    if hasattr(acc, "get_epsilon_report"):
        return float(acc.get_epsilon_report(delta, eps_error=eps_error).epsilon)
    return float(engine.get_epsilon(delta))


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


def _format_row(r: Dict[str, Any], epochs: int, delta: float, beta: float) -> str:
    s = (f"epoch {r['epoch']}/{epochs}  train_loss {r['train_loss']:.4f}  test_loss {r['test_loss']:.4f}  "
         f"test_acc {r['test_accuracy']:.4f}  ε = {ceil_eps(r['epsilon']):.2f} (certified, δ={delta:g})")
    if r.get("epsilon_paper") is not None:
        s += f"  paper-mode ε = {ceil_eps(r['epsilon_paper']):.2f}" + ("" if beta == 2 else " (NOT a guarantee)")
    return s


def run(cfg: Config, log: Callable[[str], None] = print) -> Dict[str, Any]:
    """Train one model with β-DP-SGD as configured; return the summary written to ``results.json``."""
    cfg = validate_config(copy.deepcopy(cfg))
    d, p, t = cfg["data"], cfg["privacy"], cfg["train"]
    out = Path(cfg["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    device, beta, delta = cfg["device"], float(p["beta"]), float(p["target_delta"])
    progress = _progress(bool(cfg.get("quiet")))
    torch.manual_seed(int(cfg["seed"]))

    resume_path, ckpt = None, None
    if cfg.get("resume"):
        resume_path = out / "checkpoint.pt" if cfg["resume"] in (True, "auto") else Path(cfg["resume"])
        if not resume_path.is_file():
            raise ValueError(f"--resume: no checkpoint at {resume_path}")
        ckpt = torch.load(resume_path, weights_only=False)
        old = ckpt.get("config", {})
        for key in ("beta", "clip_norm_p", "max_grad_norm", "target_delta"):
            if old.get("privacy", {}).get(key) != p[key]:
                raise ValueError(f"--resume: privacy.{key} differs from the checkpoint's "
                                 f"({p[key]!r} vs {old.get('privacy', {}).get(key)!r})")
        if old.get("train", {}).get("batch_size") != t["batch_size"]:
            raise ValueError("--resume: train.batch_size differs from the checkpoint's")

    bundle = prepare_data(cfg, progress)
    model = build_model(cfg["model"], bundle.num_classes, bundle.input_shape, d["vocab_size"]).to(device)
    dim = count_parameters(model)
    opt_cls = torch.optim.SGD if t["optimizer"] == "sgd" else torch.optim.Adam
    kw = {"momentum": t["momentum"]} if t["optimizer"] == "sgd" else {}
    optimizer = opt_cls(model.parameters(), lr=t["lr"], weight_decay=t["weight_decay"], **kw)
    loader = DataLoader(bundle.train, batch_size=int(t["batch_size"]), shuffle=True, num_workers=t["num_workers"])
    steps_per_epoch = len(loader)
    sample_rate = 1.0 / steps_per_epoch  # what Opacus's DPDataLoader uses for expected batch size B: ≈ B/n

    engine, is_gg = make_privacy_engine(beta)
    gg_kwargs = {"beta": beta, "clip_norm_p": p["clip_norm_p"]} if is_gg else {}
    common = dict(module=model, optimizer=optimizer, data_loader=loader, max_grad_norm=float(p["max_grad_norm"]),
                  poisson_sampling=bool(p["poisson_sampling"]), **gg_kwargs)
    sigma = ckpt["noise_multiplier"] if ckpt else p["noise_multiplier"]
    calibration = "fixed" if sigma is not None else p["calibration"]
    if sigma is None and p["calibration"] == "paper" and is_gg:
        from opacus_gg.accountants import get_noise_multiplier

        sigma = get_noise_multiplier(target_epsilon=float(p["target_epsilon"]), target_delta=delta,
                                     sample_rate=sample_rate, epochs=int(t["epochs"]), beta=beta, dim=dim,
                                     clip_norm_p=p["clip_norm_p"], mode="paper",
                                     epsilon_tolerance=float(p["epsilon_tolerance"]))
    if sigma is None:
        model, optimizer, loader = engine.make_private_with_epsilon(
            target_epsilon=float(p["target_epsilon"]), target_delta=delta, epochs=int(t["epochs"]), **common,
            **({"epsilon_tolerance": float(p["epsilon_tolerance"])} if is_gg else {}))
    else:
        model, optimizer, loader = engine.make_private(noise_multiplier=float(sigma), **common)
    sigma = float(optimizer.noise_multiplier)

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
        "noise_multiplier": sigma, "max_grad_norm": float(p["max_grad_norm"]), "target_delta": delta,
        "target_epsilon": p["target_epsilon"] if calibration != "fixed" else None, "calibration": calibration,
        "engine": type(engine).__name__, "seed": cfg["seed"],
        "epsilon_note": "epsilon is a certified upper bound (worst case over shift directions, dim = #params); "
                        "epsilon_paper is the paper's one-hot accounting, NOT a guarantee for beta != 2",
    }
    log(f"{cfg['name']}: {d['name']} / {cfg['model']['name']} ({dim} parameters), β={beta:g}, σ={sigma:.4f}, "
        f"C={p['max_grad_norm']:g}, q={sample_rate:.5f}, {steps_per_epoch} steps/epoch, engine {type(engine).__name__}")

    if not rows:
        tr_loss, _ = evaluate(model, bundle.train, t["eval_batch_size"], device)
        te_loss, te_acc = evaluate(model, bundle.test, t["eval_batch_size"], device)
        rows.append({"epoch": 0, "train_loss": tr_loss, "test_loss": te_loss, "test_accuracy": te_acc,
                     "epsilon": 0.0, "epsilon_paper": 0.0, "noise_multiplier": sigma, "beta": beta, "steps": 0,
                     "wall_time": 0.0})
    criterion = nn.CrossEntropyLoss()
    for epoch in range(start_epoch, int(t["epochs"]) + 1):
        t0 = time.perf_counter()
        model.train()
        losses: List[float] = []
        mpb = t["max_physical_batch_size"]
        if mpb:
            from opacus.utils.batch_memory_manager import BatchMemoryManager

            ctx = BatchMemoryManager(data_loader=loader, max_physical_batch_size=int(mpb), optimizer=optimizer)
        else:
            ctx = contextlib.nullcontext(loader)
        with ctx as batches:
            for x, y in progress(batches, desc=f"epoch {epoch}", total=steps_per_epoch if not mpb else None):
                x, y = x.to(device), y.to(device)
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()  # an empty Poisson batch still takes a (pure-noise) step
                if len(y):
                    losses.append(loss.item())
        elapsed += time.perf_counter() - t0
        te_loss, te_acc = evaluate(model, bundle.test, t["eval_batch_size"], device)
        row = {"epoch": epoch, "train_loss": sum(losses) / max(len(losses), 1), "test_loss": te_loss,
               "test_accuracy": te_acc, "epsilon": _certified_epsilon(engine, delta, p["eps_error"]),
               "epsilon_paper": (_paper_epsilon(engine.accountant, delta, p["eps_error"])
                                 if p["paper_epsilon"] is True or (p["paper_epsilon"] == "final"
                                                                   and epoch == int(t["epochs"])) else None),
               "noise_multiplier": sigma, "beta": beta, "steps": epoch * steps_per_epoch, "wall_time": elapsed}
        rows.append(row)
        log(_format_row(row, int(t["epochs"]), delta, beta))
        _write_outputs(out, rows, summary)
        engine.save_checkpoint(path=out / "checkpoint.pt", module=model, optimizer=optimizer,
                               checkpoint_dict={"epoch": epoch, "rows": rows, "config": cfg, "noise_multiplier": sigma,
                                                "wall_time": elapsed, "torch_rng_state": torch.get_rng_state()})

    last = rows[-1]
    summary.update({"epochs_done": last["epoch"], "final_test_accuracy": last["test_accuracy"],
                    "best_test_accuracy": max(r["test_accuracy"] for r in rows[1:]) if len(rows) > 1 else None,
                    "epsilon": last["epsilon"], "epsilon_paper": last["epsilon_paper"],
                    "wall_time_per_epoch": elapsed / max(last["epoch"], 1)})
    inner = getattr(model, "_module", model)
    torch.save(inner.state_dict(), out / "model_final.pt")
    _write_outputs(out, rows, summary)
    return {**summary, "rows": rows}
