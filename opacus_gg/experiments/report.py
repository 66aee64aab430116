"""Figure 4 (test accuracy vs β, one curve per target ε, error bars = std over seeds) and a Table-1-style
markdown table (mean ± std over seeds, the accountant's ε next to the paper-mode ε, each with its scope
label from :func:`opacus_gg.accountants.report.format_epsilon`) from a sweep's outputs.

Accuracy per run is the best test accuracy over epochs, as in the paper's Appendix E.1 ("maximum utility before
the budget is exceeded"; every epoch is within budget because σ is calibrated for the last one) — note that
choosing the epoch on test data is the paper's protocol, not a clean held-out estimate. For each (β, target ε)
the hyperparameter combination with the best mean is shown. ε columns take the maximum over seeds, rounded up,
with the weakest scope among those seeds (proven > equal_spreads > estimate).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional

from .figures import pyplot, save_figure
from .train import epsilon_text

#: scopes from strongest to weakest; a group of runs carries the weakest scope among them
_SCOPE_ORDER = ("proven", "equal_spreads", "estimate")


def _weakest(scopes: List[Optional[str]]) -> Optional[str]:
    """The weakest scope of a group (a run without a stored scope — written before scopes existed — is an
    estimate: nothing says more)."""
    return max((s if s in _SCOPE_ORDER else "estimate" for s in scopes), key=_SCOPE_ORDER.index, default=None)

__all__ = ["collect_runs", "aggregate", "markdown_table", "plot_accuracy_vs_beta", "write_report"]


def collect_runs(sweep_dir: Path) -> List[Dict[str, Any]]:
    """Read every ``<sweep_dir>/*/results.json`` with at least one finished epoch."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise ValueError(f"report: sweep directory not found: {sweep_dir}")
    runs = []
    for f in sorted(sweep_dir.glob("*/results.json")):
        res = json.loads(f.read_text())
        if res.get("epochs_done"):
            runs.append(res)
    if not runs:
        raise ValueError(f"report: no finished runs (*/results.json) under {sweep_dir}")
    return runs


def _hyper(res: Dict[str, Any]) -> str:
    c = res["config"]
    return (f"B={c['train']['batch_size']}, lr={c['train']['lr']:g}, C={c['privacy']['max_grad_norm']:g}")


def aggregate(runs: List[Dict[str, Any]], metric: str = "best_test_accuracy") -> List[Dict[str, Any]]:
    """Group runs by (target ε, β, hyperparameters); mean ± std of ``metric`` over seeds; keep the best combo."""
    groups: Dict[tuple, List[Dict[str, Any]]] = defaultdict(list)
    for r in runs:
        groups[(r.get("target_epsilon"), r["beta"], _hyper(r))].append(r)
    best: Dict[tuple, Dict[str, Any]] = {}
    for (eps, beta, hyper), rs in groups.items():
        accs = [r[metric] for r in rs if r.get(metric) is not None]
        if not accs:
            continue
        row = {"target_epsilon": eps, "beta": beta, "hyper": hyper, "n": len(accs),
               "accuracy_mean": statistics.fmean(accs), "accuracy_std": statistics.stdev(accs) if len(accs) > 1 else 0.0,
               "noise_multiplier": max(r["noise_multiplier"] for r in rs),
               "epsilon": max(r["epsilon"] for r in rs),
               "epsilon_scope": _weakest([r.get("epsilon_scope") for r in rs]),
               "epsilon_paper": (max(r["epsilon_paper"] for r in rs)
                                 if all(r.get("epsilon_paper") is not None for r in rs) else None),
               "epsilon_paper_scope": _weakest([r.get("epsilon_paper_scope") for r in rs]),
               "dim": rs[0].get("dim"), "delta": rs[0].get("target_delta")}
        key = (eps, beta)
        if key not in best or row["accuracy_mean"] > best[key]["accuracy_mean"]:
            best[key] = row
    return sorted(best.values(), key=lambda r: (r["target_epsilon"] or math.inf, r["beta"]))


def _e(v: Optional[float], scope: Optional[str]) -> str:
    return "–" if v is None else epsilon_text(v, scope)


def markdown_table(agg: List[Dict[str, Any]]) -> str:
    """Table-1-style markdown: target ε | β | σ | ε (scope) | paper-mode ε (scope) | accuracy | seeds | hyper."""
    delta = next((r["delta"] for r in agg if r.get("delta")), None)
    lines = [f"Test accuracy of β-DP-SGD (best epoch, mean ± std over seeds), δ = {delta:g}." if delta else "",
             "ε: the GG PRV accountant's ε (d = #parameters), max over seeds, with its scope: 'proven' holds for "
             "every shift, 'over equal spreads' only for the shifts searched, 'estimate' is NOT a guarantee. "
             "Paper-mode ε: the paper's one-hot accounting.", "",
             "| target ε | β | σ | ε (scope) | paper-mode ε (scope) | test accuracy (%) | seeds "
             "| hyperparameters |",
             "|---|---|---|---|---|---|---|---|"]
    for r in agg:
        te = "–" if r["target_epsilon"] is None else f"{r['target_epsilon']:g}"
        lines.append(f"| {te} | {r['beta']:g} | {r['noise_multiplier']:.3f} | {_e(r['epsilon'], r['epsilon_scope'])} | "
                     f"{_e(r['epsilon_paper'], r['epsilon_paper_scope'])} | "
                     f"{100 * r['accuracy_mean']:.2f} ± {100 * r['accuracy_std']:.2f} | "
                     f"{r['n']} | {r['hyper']} |")
    return "\n".join(lines) + "\n"


def plot_accuracy_vs_beta(agg: List[Dict[str, Any]], path: Path, title: str = "β-DP-SGD") -> Path:
    """Figure-4-style plot: test accuracy (%) vs β, one line per target ε, error bars = std over seeds."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5, 3.5))
    by_eps: Dict[Any, List[Dict[str, Any]]] = defaultdict(list)
    for r in agg:
        by_eps[r["target_epsilon"]].append(r)
    for eps, rs in sorted(by_eps.items(), key=lambda kv: kv[0] or math.inf):
        rs = sorted(rs, key=lambda r: r["beta"])
        ax.errorbar([r["beta"] for r in rs], [100 * r["accuracy_mean"] for r in rs],
                    yerr=[100 * r["accuracy_std"] for r in rs], marker="o", capsize=3,
                    label=f"target ε = {eps:g}" if eps is not None else "fixed σ")
    ax.set_xlabel("β")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return Path(save_figure(fig, path))


def write_report(sweep_dir: Path, out_dir: Optional[Path] = None, metric: str = "best_test_accuracy",
                 title: Optional[str] = None) -> Dict[str, Path]:
    """Write ``accuracy_vs_beta.png``, ``table.md`` and ``aggregate.json`` for a sweep directory."""
    sweep_dir = Path(sweep_dir)
    agg = aggregate(collect_runs(sweep_dir), metric)
    out = Path(out_dir) if out_dir else sweep_dir
    out.mkdir(parents=True, exist_ok=True)
    paths = {"table": out / "table.md", "plot": out / "accuracy_vs_beta.png", "json": out / "aggregate.json"}
    paths["table"].write_text(markdown_table(agg))
    plot_accuracy_vs_beta(agg, paths["plot"], title or sweep_dir.name)
    paths["json"].write_text(json.dumps(agg, indent=2))
    return paths
