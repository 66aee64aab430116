r"""The β study in one command (``opacus-gg study --data digits``): test accuracy against β at equal proven ε,
with ℓβ clipping (p = β) and with ℓ2 clipping (p = 2), C from a small grid, several seeds.

Protocol (every run is one :func:`opacus_gg.experiments.train.run` of the dataset's bundled config, through
:func:`opacus_gg.experiments.sweep.run_point`):

* groups (target ε, β, p) with p ∈ {β, 2} (one group at β = 2). The group's first run solves σ with the
  training run's own calibration (``make_private_with_epsilon``: the GG PRV accountant's proven ε, d = the
  model's parameter count, q = 1/len(loader), T = epochs·len(loader)); its other runs (C, seeds) reuse that σ,
  so every run of a group has the same (σ, q, T, β, d, p) and the same proven ε ≤ target. Each run records the
  proven ε of its own history (``GGPRVAccountant.get_epsilon``).
* C: a grid of ℓ2 bounds C₂ (``c_grid``). With p = 2 the run clips at C₂; with p ≠ 2 at
  C_p = C₂ · median ‖g‖_p/‖g‖₂ (:func:`opacus_gg.tuning.lp_max_grad_norm`), the median over the per-sample
  gradients of the initial model (seed 0) on the first :data:`RATIO_EXAMPLES` training examples, so that the
  grids of both clipping norms clip about the same examples.
* accuracy: the final test accuracy (no epoch chosen on test data); mean ± sd over seeds; per group the C with
  the best mean is shown.
* privacy of the tuning: the choice of C (on test accuracy) and the ratio calibration (on training examples) are
  not accounted: each run's ε covers that run's training only, as in the GG paper and most DP-SGD papers.

Groups run side by side in ``workers`` processes (one torch thread each). Cost of the default digits study
(26 groups × 4 C × 3 seeds = 312 runs of 10 epochs): docs/beta_study.md.

Outputs in ``out_dir``: every run's folder, ``study.csv``/``study.json`` (one row per run), ``study.md`` (the
tables of :func:`markdown_tables`) and ``beta_study_<data>.png`` (:mod:`.figures.beta_study`).
"""

from __future__ import annotations

import csv
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..formatting import fmt_up
from .config import Config, apply_overrides, load_config, validate_config
from .sweep import run_point
from .train import say

__all__ = ["STUDY_CONFIGS", "BETAS", "TARGET_EPSILONS", "SEEDS", "C_GRID", "RATIO_EXAMPLES", "study_config",
           "clip_ratios", "run_study", "aggregate", "drop_in", "markdown_tables"]

#: dataset → the bundled config the study trains with (model, epochs, batch size, learning rate, δ)
STUDY_CONFIGS = {"digits": "quickstart", "breast_cancer": "breast_cancer_fcn", "cifar10": "cifar10_scatternet",
                 "svhn": "svhn_scatternet", "adult": "adult_fcn", "imdb": "imdb_lstm"}
BETAS = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0)
TARGET_EPSILONS = (1.0, 3.0)
SEEDS = (0, 1, 2)
#: ℓ2 clipping bounds C₂ (mapped to ℓp by the median norm ratio for p ≠ 2)
C_GRID = (0.1, 0.3, 1.0, 3.0)
#: training examples whose per-sample gradients (initial model) calibrate ‖g‖_p/‖g‖₂
RATIO_EXAMPLES = 256
#: what every study run sets: no Opacus baseline, no paper-mode or equal-spread ε (the study reports the proven ε)
RUN_OVERRIDES = {"compare_opacus": False, "privacy.paper_epsilon": False, "privacy.equal_spreads_epsilon": False,
                 "quiet": True}
RUN_KEYS = ["run", "target_epsilon", "beta", "clip_norm_p", "c2", "max_grad_norm", "seed", "noise_multiplier",
            "epsilon", "epsilon_scope", "final_test_accuracy", "dim", "wall_time_per_epoch", "error"]


def study_config(data: str, config: Optional[str] = None, overrides: Sequence[str] = ()) -> Config:
    """The config the study trains with: ``config`` (a file or bundled name; default :data:`STUDY_CONFIGS`
    [data]) with ``data.name = data``, :data:`RUN_OVERRIDES` and the ``key=value`` overrides, validated."""
    if config is None and data not in STUDY_CONFIGS:
        raise ValueError(f"--data must be one of {', '.join(STUDY_CONFIGS)} (or pass --config), got {data!r}")
    cfg = load_config(config or STUDY_CONFIGS[data])
    cfg = apply_overrides(cfg, {"data.name": data, **RUN_OVERRIDES})
    return validate_config(apply_overrides(cfg, list(overrides)))


def clip_ratios(cfg: Config, ps: Sequence[float]) -> Dict[float, float]:
    r"""{p: median_i ‖g_i‖_p/‖g_i‖₂} over the per-sample gradients of the config's initial model (its seed) on
    the first :data:`RATIO_EXAMPLES` training examples (Opacus's ``GradSampleModule``; training data, not
    accounted, see the module docstring)."""
    import torch
    from opacus import GradSampleModule

    from ..tuning import grad_norm_ratio
    from .models import build_model
    from .train import prepare_data

    bundle = prepare_data(cfg)
    torch.manual_seed(int(cfg["seed"]))
    model = build_model(cfg["model"], bundle.num_classes, bundle.input_shape, cfg["data"]["vocab_size"])
    gsm = GradSampleModule(model)
    x, y = (t[:RATIO_EXAMPLES] for t in bundle.train.tensors)
    torch.nn.functional.cross_entropy(gsm(x), y).backward()
    grads = [q.grad_sample for q in gsm.parameters() if q.requires_grad]
    return {float(p): grad_norm_ratio(grads, p) for p in ps}


def _group_points(betas: Sequence[float], epsilons: Sequence[float]) -> List[Tuple[float, float, float]]:
    """(target ε, β, p) with p ∈ {β, 2}, one group where β = 2."""
    return [(float(e), float(b), p) for e in epsilons for b in betas for p in dict.fromkeys((float(b), 2.0))]


def _run_group(cfg: Config, out_dir: Path, group: Tuple[float, float, float], c_grid: Sequence[float],
               seeds: Sequence[int], ratio: float, skip_existing: bool, threads: Optional[int],
               tag: str = "", log: Callable[[str], None] = say) -> List[Dict[str, Any]]:
    """The runs of one (target ε, β, p) group: the first solves σ, the others reuse it (module docstring)."""
    if threads is not None:  # a worker process: its own torch thread count, and not the CLI's warning printer
        import warnings

        import torch

        from ..engine import ClippingAdvice

        torch.set_num_threads(threads)
        warnings.filterwarnings("ignore", category=ClippingAdvice)  # the study clips in ℓβ on purpose
        for notice in ("Secure RNG turned off", "Full backward hook is firing"):  # as the CLI drops them
            warnings.filterwarnings("ignore", message=notice)
    eps, beta, p = group
    sigma = None
    rows = []
    for c2 in c_grid:
        for seed in seeds:
            c = float(c2) * ratio
            name = f"eps={eps:g}_beta={beta:g}_p={p:g}_C2={float(c2):g}_seed={int(seed)}"
            ov = {"privacy.beta": beta, "privacy.clip_norm_p": p, "privacy.target_epsilon": eps,
                  "privacy.noise_multiplier": sigma, "privacy.max_grad_norm": c, "seed": int(seed)}
            log(f"{tag}{name}" + ("" if sigma is None else f" (σ = {sigma:.4f})"))
            row = run_point(cfg, out_dir, name, ov, skip_existing=skip_existing, log=lambda s: None)
            if row["error"] is None and sigma is None:
                sigma = float(row["noise_multiplier"])
            row.update(clip_norm_p=p, c2=float(c2), max_grad_norm=c)
            rows.append({k: row.get(k) for k in RUN_KEYS})
    return rows


def run_study(cfg: Config, out_dir: Path, *, betas: Sequence[float] = BETAS,
              epsilons: Sequence[float] = TARGET_EPSILONS, seeds: Sequence[int] = SEEDS,
              c_grid: Sequence[float] = C_GRID, skip_existing: bool = True, workers: int = 2,
              log: Callable[[str], None] = say) -> Dict[str, Any]:
    """Run every (target ε, β, p, C₂, seed) of the study (module docstring), the groups over ``workers``
    processes (one torch thread each; 1 = in this process, with its torch threads); write ``study.csv``/``study.json``; return
    ``{"rows", "ratios", "config", "wall_time"}``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    groups = _group_points(betas, epsilons)
    ratios = clip_ratios(cfg, sorted({p for _, _, p in groups if p != 2.0}))
    ratios = dict(sorted({**ratios, 2.0: 1.0}.items()))
    log("median ‖g‖_p/‖g‖_2 of the initial model's per-sample gradients (C_p = C_2 · ratio): "
        + ", ".join(f"p={p:g}: {r:.3f}" for p, r in sorted(ratios.items())))
    args = [(cfg, out_dir, g, list(c_grid), list(seeds), ratios[g[2]], skip_existing, None if workers == 1 else 1,
             f"[group {i}/{len(groups)}] ") for i, g in enumerate(groups, 1)]
    if workers == 1:
        per_group = [_run_group(*a, log=log) for a in args]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            per_group = list(pool.map(_run_group, *zip(*args)))
    rows = [r for group_rows in per_group for r in group_rows]
    wall = time.perf_counter() - t0
    with open(out_dir / "study.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RUN_KEYS)
        w.writeheader()
        w.writerows(rows)
    result = {"rows": rows, "ratios": {f"{p:g}": r for p, r in ratios.items()}, "config": cfg, "wall_time": wall,
              "workers": workers}
    (out_dir / "study.json").write_text(json.dumps(result, indent=2))
    return result


def aggregate(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One entry per (target ε, β, p, C₂) with finished runs: accuracy mean and sd over seeds, the largest σ and
    proven ε of its runs (equal by construction), the weakest scope, C."""
    groups: Dict[tuple, List[Dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("error") is None and r.get("final_test_accuracy") is not None:
            groups[(r["target_epsilon"], r["beta"], r["clip_norm_p"], r["c2"])].append(r)
    out = []
    for (eps, beta, p, c2), rs in sorted(groups.items()):
        accs = [r["final_test_accuracy"] for r in rs]
        scopes = {r["epsilon_scope"] for r in rs}
        out.append({"target_epsilon": eps, "beta": beta, "clip_norm_p": p, "c2": c2,
                    "max_grad_norm": rs[0]["max_grad_norm"], "n": len(accs), "accuracy_mean": statistics.fmean(accs),
                    "accuracy_sd": statistics.stdev(accs) if len(accs) > 1 else 0.0,
                    "noise_multiplier": max(r["noise_multiplier"] for r in rs),
                    "epsilon": max(r["epsilon"] for r in rs),
                    "epsilon_scope": "proven" if scopes == {"proven"} else "not proven", "dim": rs[0]["dim"]})
    return out


def best_c(agg: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per (target ε, β, p) the C₂ with the best mean accuracy (ties: the smaller C₂)."""
    best: Dict[tuple, Dict[str, Any]] = {}
    for a in agg:
        key = (a["target_epsilon"], a["beta"], a["clip_norm_p"])
        if key not in best or a["accuracy_mean"] > best[key]["accuracy_mean"]:
            best[key] = a
    return [best[k] for k in sorted(best)]


def drop_in(agg: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    r"""Per (target ε, β ≠ 2): the drop-in ``beta=β, clip_norm_p=2`` at the Gaussian's best C₂ (β = 2's), the
    ℓβ clipping at that C₂ mapped by the norm ratio, and the best (p, C) of the grid for that β, with the gaps."""
    cell = {(a["target_epsilon"], a["beta"], a["clip_norm_p"], a["c2"]): a for a in agg}
    bests = best_c(agg)
    out = []
    for eps in sorted({a["target_epsilon"] for a in agg}):
        gauss = next((b for b in bests if b["target_epsilon"] == eps and b["beta"] == 2.0), None)
        if gauss is None:
            continue
        for beta in sorted({a["beta"] for a in agg if a["target_epsilon"] == eps and a["beta"] != 2.0}):
            top = max((b for b in bests if b["target_epsilon"] == eps and b["beta"] == beta),
                      key=lambda b: b["accuracy_mean"])
            l2 = cell.get((eps, beta, 2.0, gauss["c2"]))
            lb = cell.get((eps, beta, beta, gauss["c2"]))
            out.append({"target_epsilon": eps, "beta": beta, "gaussian": gauss, "drop_in_l2": l2,
                        "lbeta_mapped": lb, "best": top,
                        "gap_l2": None if l2 is None else top["accuracy_mean"] - l2["accuracy_mean"],
                        "gap_lbeta": None if lb is None else top["accuracy_mean"] - lb["accuracy_mean"]})
    return out


def _acc(a: Optional[Dict[str, Any]]) -> str:
    return "–" if a is None else f"{100 * a['accuracy_mean']:.1f} ± {100 * a['accuracy_sd']:.1f}"


def _norm(p: float, beta: float) -> str:
    return "ℓ2 (p = 2)" if p == 2.0 else f"ℓβ (p = {p:g})"


def markdown_tables(agg: Sequence[Dict[str, Any]], *, dataset: str, delta: float,
                    ratios: Optional[Dict[str, float]] = None, ball_bound: str = "renyi") -> str:
    """The study's tables: best C per (ε, β, clipping norm), every C, and the drop-in against the grid's best
    (``ball_bound``: the config's ``privacy.ball_bound``, named in the caption)."""
    bests = best_c(agg)
    dim = next((a["dim"] for a in agg), None)
    table = ", the ball table's PRV where it applies" if ball_bound == "table" else ""
    lines = [f"Test accuracy (%) on {dataset} after the last epoch, mean ± sd over seeds; δ = {delta:g}, "
             f"d = {dim} parameters. σ solved per (target ε, β, p) so that the proven ε (GG PRV accountant, "
             f"every shift of the ℓp ball{table}) is ≤ the target; 'proven ε' is the largest over the group's runs, "
             "rounded up. C is in the clipping norm's own units (C = C₂ · median ‖g‖_p/‖g‖₂ for p ≠ 2). The "
             "choice of C on test accuracy is not accounted (standard practice).", ""]
    if ratios:
        lines += ["Median ‖g‖_p/‖g‖₂ (initial model, per-sample gradients): "
                  + ", ".join(f"p = {p}: {r:.3f}" for p, r in ratios.items()) + ".", ""]
    lines += ["| target ε | β | clipping | σ | proven ε | best C (C₂) | accuracy (%) | seeds |",
              "|---|---|---|---|---|---|---|---|"]
    for b in bests:
        lines.append(f"| {b['target_epsilon']:g} | {b['beta']:g} | {_norm(b['clip_norm_p'], b['beta'])} | "
                     f"{b['noise_multiplier']:.4f} | {fmt_up(b['epsilon'])} ({b['epsilon_scope']}) | "
                     f"{b['max_grad_norm']:.3g} ({b['c2']:g}) | {_acc(b)} | {b['n']} |")
    lines += ["", "Every C₂ of the grid (accuracy %, mean ± sd):", ""]
    c2s = sorted({a["c2"] for a in agg})
    lines += ["| target ε | β | clipping | " + " | ".join(f"C₂ = {c:g}" for c in c2s) + " |",
              "|---|---|---|" + "---|" * len(c2s)]
    cell = {(a["target_epsilon"], a["beta"], a["clip_norm_p"], a["c2"]): a for a in agg}
    for b in bests:
        k = (b["target_epsilon"], b["beta"], b["clip_norm_p"])
        lines.append(f"| {k[0]:g} | {k[1]:g} | {_norm(k[2], k[1])} | "
                     + " | ".join(_acc(cell.get((*k, c))) for c in c2s) + " |")
    rows = drop_in(agg)
    if rows:
        lines += ["", "The drop-in (`beta=β, clip_norm_p=2` at the Gaussian's best C₂) and ℓβ clipping at that C₂ "
                  "mapped by the norm ratio, against the best (clipping norm, C) of the grid for that β "
                  "(gap in accuracy points):", "",
                  "| target ε | β | Gaussian (β = 2, best C₂) | drop-in ℓ2 | ℓβ, mapped C | best of grid | gap "
                  "drop-in | gap ℓβ |", "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            b = r["best"]
            gl2 = "–" if r["gap_l2"] is None else f"{100 * r['gap_l2']:.1f}"
            glb = "–" if r["gap_lbeta"] is None else f"{100 * r['gap_lbeta']:.1f}"
            lines.append(f"| {r['target_epsilon']:g} | {r['beta']:g} | {_acc(r['gaussian'])} (C₂ = "
                         f"{r['gaussian']['c2']:g}) | {_acc(r['drop_in_l2'])} | {_acc(r['lbeta_mapped'])} | "
                         f"{_acc(b)} ({_norm(b['clip_norm_p'], b['beta'])}, C₂ = {b['c2']:g}) | {gl2} | {glb} |")
    return "\n".join(lines) + "\n"


def write_outputs(result: Dict[str, Any], out_dir: Path, dataset: str) -> Dict[str, Path]:
    """``study.md`` (tables) and ``beta_study_<dataset>.png`` (figure) from :func:`run_study`'s result."""
    from .figures.beta_study import plot_beta_study

    out_dir = Path(out_dir)
    agg = aggregate(result["rows"])
    if not agg:
        raise ValueError(f"study: no run finished (see {out_dir / 'study.csv'} for the errors)")
    cfg = result["config"]
    paths = {"table": out_dir / "study.md", "figure": out_dir / f"beta_study_{dataset}.png"}
    paths["table"].write_text(markdown_tables(agg, dataset=dataset, delta=float(cfg["privacy"]["target_delta"]),
                                              ratios=result.get("ratios"),
                                              ball_bound=cfg["privacy"].get("ball_bound", "renyi")))
    n_seeds = max(a["n"] for a in agg)
    plot_beta_study(best_c(agg), paths["figure"],
                    title=f"{dataset} ({cfg['model']['name']}, d = {agg[0]['dim']}), δ = "
                          f"{float(cfg['privacy']['target_delta']):g}: best C per point, mean ± sd over "
                          f"{n_seeds} seeds")
    return paths
