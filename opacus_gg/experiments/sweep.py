"""The paper's study: train over β × target ε × extra hyperparameters × seeds at fixed δ.

For each β, σ is solved so that every run meets the same (target ε, δ) (the paper's Appendix B.4
"equivalent mechanisms"), by the training run's calibration: the GG PRV accountant by default, or the paper's
one-hot accounting (``privacy.calibration: paper``, an estimate for β ≠ 2) — the accountant's ε and its scope
are recorded either way. A run that fails (e.g. a target the accountant cannot reach) is recorded
with its error and the sweep goes on.
"""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from .config import Config, apply_overrides, validate_config
from .train import run, say

__all__ = ["sweep_points", "run_point", "run_sweep", "SUMMARY_KEYS"]

SUMMARY_KEYS = ["run", "beta", "target_epsilon", "seed", "hyper", "noise_multiplier", "epsilon", "epsilon_scope",
                "epsilon_paper", "epsilon_paper_scope",
                "final_test_accuracy", "best_test_accuracy", "wall_time_per_epoch", "dim", "error"]


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def sweep_points(cfg: Config) -> List[Tuple[str, Dict[str, Any]]]:
    """All (run name, dotted overrides) of the grid β × target ε × ``sweep.grid`` × seeds."""
    sw = cfg["sweep"]
    grid_keys = sorted(sw.get("grid") or {})
    grid_vals = [list(sw["grid"][k]) for k in grid_keys]
    points = []
    for beta, eps, combo, seed in itertools.product(sw["betas"], sw["target_epsilons"],
                                                    itertools.product(*grid_vals), sw["seeds"]):
        ov = {"privacy.beta": float(beta), "privacy.target_epsilon": float(eps), "seed": int(seed),
              "privacy.noise_multiplier": None}
        ov.update(dict(zip(grid_keys, combo)))
        hyper = "_".join(f"{k.split('.')[-1]}={_fmt(v)}" for k, v in zip(grid_keys, combo))
        name = f"beta={_fmt(float(beta))}_eps={_fmt(float(eps))}" + (f"_{hyper}" if hyper else "") + f"_seed={seed}"
        points.append((name, ov))
    return points


def run_point(cfg: Config, out_dir: Path, name: str, overrides: Dict[str, Any], *, skip_existing: bool = True,
              log: Callable[[str], None] = say) -> Dict[str, Any]:
    """Train one grid point into ``out_dir/<name>/`` (or reuse its finished ``results.json``); the summary row
    (:data:`SUMMARY_KEYS`), with the error recorded instead of raised."""
    run_dir = Path(out_dir) / name
    ov = overrides
    hyper = {k: v for k, v in ov.items() if not k.startswith("privacy.beta") and k not in
             ("privacy.target_epsilon", "seed", "privacy.noise_multiplier")}
    row: Dict[str, Any] = {"run": name, "beta": ov["privacy.beta"], "target_epsilon": ov["privacy.target_epsilon"],
                           "seed": ov["seed"], "hyper": json.dumps(hyper, sort_keys=True), "error": None}
    res_file = run_dir / "results.json"
    try:
        if skip_existing and res_file.is_file() and json.loads(res_file.read_text()).get("epochs_done") \
                == cfg["train"]["epochs"]:
            res = json.loads(res_file.read_text())
        else:
            res = run(apply_overrides(cfg, {**ov, "output_dir": str(run_dir), "name": name, "resume": None,
                                       "overwrite": True}),  # the sweep owns its run directories
                      log=log)
        for k in ("noise_multiplier", "epsilon", "epsilon_scope", "epsilon_paper", "epsilon_paper_scope",
                  "final_test_accuracy", "best_test_accuracy", "wall_time_per_epoch", "dim"):
            row[k] = res.get(k)
    except (ValueError, RuntimeError) as e:  # record, go on
        row["error"] = f"{type(e).__name__}: {e}"
        log(f"  failed: {row['error']}")
    return row


def run_sweep(cfg: Config, out_dir: Path, *, skip_existing: bool = True,
              log: Callable[[str], None] = say) -> List[Dict[str, Any]]:
    """Run every grid point into ``out_dir/<run>/``; write ``sweep_summary.{csv,json}``; return the rows."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    validate_config(cfg)
    rows = []
    points = sweep_points(cfg)
    for i, (name, ov) in enumerate(points, 1):
        log(f"[{i}/{len(points)}] {name}")
        rows.append(run_point(cfg, out_dir, name, ov, skip_existing=skip_existing, log=log))
    with open(out_dir / "sweep_summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SUMMARY_KEYS)
        w.writeheader()
        w.writerows(rows)
    (out_dir / "sweep_summary.json").write_text(json.dumps({"delta": cfg["privacy"]["target_delta"],
                                                            "calibration": cfg["privacy"]["calibration"],
                                                            "rows": rows}, indent=2))
    return rows
