"""The sweep runs β × target ε × seeds (σ solved per β for equal (ε, δ)); the report script turns two tiny
runs into a Figure-4-style PNG and a Table-1-style markdown table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opacus_gg.formatting import fmt_up

from opacus_gg.experiments.config import apply_overrides, load_config
from opacus_gg.experiments.report import aggregate, markdown_table, write_report
from opacus_gg.experiments.sweep import run_sweep, sweep_points

from opacus_gg.experiments.config import CONFIG_DIR as CONFIGS


def _tiny_sweep_cfg(out: Path) -> dict:
    return apply_overrides(load_config(CONFIGS / "quickstart.yaml"), {
        "data.name": "synthetic", "data.n_train": 400, "data.n_test": 200, "compare_opacus": False,
        "train.batch_size": 40, "train.epochs": 1, "quiet": True,
        "output_dir": str(out), "sweep.betas": [1.5, 2.0], "sweep.target_epsilons": [4.0], "sweep.seeds": [0],
        "privacy.epsilon_tolerance": 0.2, "privacy.paper_epsilon": False,
        "sweep.grid": {}})


def test_sweep_points_cover_the_grid() -> None:
    cfg = apply_overrides(load_config(CONFIGS / "adult_fcn.yaml"),
                          {"sweep.betas": [1, 2], "sweep.target_epsilons": [1, 3], "sweep.seeds": [0, 1]})
    pts = sweep_points(cfg)
    assert len(pts) == 2 * 2 * 2 * (2 * 2 * 4)  # β × ε × seeds × (batch × lr × C)
    assert len({name for name, _ in pts}) == len(pts)
    assert all(ov["privacy.noise_multiplier"] is None for _, ov in pts)  # σ is always solved per β


def test_sweep_and_report_on_two_tiny_runs(tmp_path: Path) -> None:
    rows = run_sweep(_tiny_sweep_cfg(tmp_path), tmp_path, log=lambda s: None)
    assert [r["error"] for r in rows] == [None, None]
    by_beta = {r["beta"]: r for r in rows}
    assert set(by_beta) == {1.5, 2.0}
    for r in rows:  # equal certified (ε, δ) for each β, by a β-specific σ
        assert 4.0 - 0.2 - 0.02 <= r["epsilon"] <= 4.0
    assert by_beta[1.5]["noise_multiplier"] != by_beta[2.0]["noise_multiplier"]
    assert (tmp_path / "sweep_summary.csv").is_file()

    paths = write_report(tmp_path)
    png = paths["plot"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    table = paths["table"].read_text()
    assert "| target ε | β | σ | ε (scope) | paper-mode ε (scope) |" in table
    assert "certified" not in table.lower()
    for r in rows:  # β ≤ 2 with p = β: the accountant's bound is proven, and the table says so
        assert r["epsilon_scope"] == "proven"
        assert f"{fmt_up(r['epsilon'])} (proven upper bound for every shift)" in table
    for beta, r in by_beta.items():
        acc = json.loads((tmp_path / r["run"] / "results.json").read_text())["best_test_accuracy"]
        assert f"| 4 | {beta:g} | {r['noise_multiplier']:.3f} |" in table
        assert f"{100 * acc:.2f} ± 0.00 | 1 |" in table

    from opacus_gg.cli import main

    assert main(["report", str(tmp_path), "--output-dir", str(tmp_path / "rep")]) == 0  # the CLI subcommand
    assert (tmp_path / "rep" / "table.md").read_text() == table

    rerun = run_sweep(_tiny_sweep_cfg(tmp_path), tmp_path, log=lambda s: None)  # finished runs are reused
    assert [r["epsilon"] for r in rerun] == [r["epsilon"] for r in rows]


def _fake_result(beta: float, eps: float, seed: int, lr: float, acc: float) -> dict:
    return {"beta": beta, "target_epsilon": eps, "seed": seed, "best_test_accuracy": acc, "noise_multiplier": 1.0,
            "epsilon": eps - 0.001, "epsilon_scope": "proven", "epsilon_paper": eps - 0.1,
            "epsilon_paper_scope": "estimate", "dim": 10, "target_delta": 1e-6,
            "config": {"train": {"batch_size": 128, "lr": lr}, "privacy": {"max_grad_norm": 0.1}}}


def test_aggregate_mean_std_and_best_hyperparameters() -> None:
    runs = [_fake_result(2.0, 1.0, s, 0.5, a) for s, a in enumerate([0.60, 0.62, 0.64])]
    runs += [_fake_result(2.0, 1.0, s, 1.0, a) for s, a in enumerate([0.70, 0.70, 0.76])]
    runs += [_fake_result(1.0, 1.0, 0, 1.0, 0.5)]
    agg = aggregate(runs)
    assert [(r["beta"], r["n"]) for r in agg] == [(1.0, 1), (2.0, 3)]
    best = agg[1]
    # sample std (ddof=1) of (0.70, 0.70, 0.76) = √0.0012 = 0.0346410…, written to 6 digits
    assert best["accuracy_mean"] == pytest.approx(0.72) and best["accuracy_std"] == pytest.approx(0.034641, abs=1e-5)
    assert "lr=1" in best["hyper"]
    assert ("| 1 | 2 | 1.000 | 0.9990 (proven upper bound for every shift) | 0.9000 (estimate, NOT a guarantee) | "
            "72.00 ± 3.46 | 3 |") in markdown_table(agg)  # ε rounded up, each with its scope


def test_aggregate_carries_the_weakest_scope_of_its_seeds() -> None:
    runs = [_fake_result(3.0, 1.0, s, 1.0, 0.7) for s in range(3)]
    runs[1]["epsilon_scope"] = "equal_spreads"
    agg = aggregate(runs)
    assert agg[0]["epsilon_scope"] == "equal_spreads"
    table = markdown_table(agg)
    assert "over equal spreads" in table and "proven upper bound" not in table


def test_report_errors_clearly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not found"):
        write_report(tmp_path / "nope")
    with pytest.raises(ValueError, match="no finished runs"):
        write_report(tmp_path)
