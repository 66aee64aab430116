"""The main job (quickstart, calibrated to a certified target ε), resuming, the scattering-feature cache in the
pipeline, and clear errors for missing data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from opacus_gg.cli import main
from opacus_gg.experiments.config import apply_overrides
from opacus_gg.experiments.train import prepare_data, run
from opacus_gg.formatting import fmt_up
from test_experiments_train import CONFIGS, tiny_config


def test_quickstart_main_job_via_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # the README's main job, shortened: digits, β = 1.5, σ solved for the target, then Opacus at the same ε
    rc = main(["train", "--config", "quickstart", "--epochs", "2", "--output-dir", str(tmp_path), "--quiet",
               "--set", "privacy.epsilon_tolerance=0.1", "--set", "privacy.paper_epsilon=final"])
    out = capsys.readouterr().out
    assert rc == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["dataset"] == "digits" and res["beta"] == 1.5 and res["calibration"] == "certified"
    assert 3.0 - 0.1 - 0.02 <= res["epsilon"] <= 3.0  # solved for the target, never above it
    assert res["epsilon_scope"] == "proven"  # β ≤ 2 with p = β
    assert f"ε = {fmt_up(res['epsilon'])} (proven upper bound for every shift) at δ = 1e-05, d = {res['dim']}" in out
    assert "paper-mode ε = " in out and "(estimate, NOT a guarantee)" in out  # labelled for β ≠ 2
    rows = res["rows"]
    assert rows[-1]["test_loss"] < rows[0]["test_loss"] and res["final_test_accuracy"] > 0.3  # 10 classes
    assert rows[1]["epsilon_paper"] is None and rows[2]["epsilon_paper"] > 0  # paper_epsilon: final
    base = res["opacus_baseline"]  # Opacus's Gaussian DP-SGD at the same ε, checked by an independent accountant
    assert base["epsilon_opacus_prv"] <= res["epsilon"] + 0.02 and base["test_accuracy"] > 0.3
    assert "Opacus (Gaussian) at the same ε" in out


def test_resume_continues_accounting(data_root: Path, tmp_path: Path) -> None:
    cfg = tiny_config("adult_fcn", data_root, tmp_path)
    first = run(cfg, log=lambda s: None)
    msgs: list = []
    second = run(apply_overrides(cfg, {"train.epochs": 2, "resume": "auto"}), log=msgs.append)
    assert any("resumed" in m for m in msgs)
    rows = second["rows"]
    assert [r["epoch"] for r in rows] == [0, 1, 2]
    assert rows[1] == first["rows"][1]  # history kept
    assert second["noise_multiplier"] == first["noise_multiplier"]
    assert rows[2]["epsilon"] > rows[1]["epsilon"]  # the accountant continued from the checkpoint
    assert rows[2]["steps"] == 2 * first["steps_per_epoch"]
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    hist = ckpt["privacy_accountant_state_dict"]["history"]
    assert sum(h[2] for h in hist) == 2 * first["steps_per_epoch"]
    with pytest.raises(ValueError, match="privacy.max_grad_norm"):
        run(apply_overrides(cfg, {"train.epochs": 3, "resume": "auto", "privacy.max_grad_norm": 0.05}))
    with pytest.raises(ValueError, match="no checkpoint"):
        run(apply_overrides(cfg, {"resume": str(tmp_path / "missing.pt")}))


def test_scatter_features_cached_by_the_pipeline(data_root: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cfg = tiny_config("cifar10_scatternet", data_root, tmp_path, **{"data.cache_dir": str(cache)})
    a = prepare_data(cfg)
    assert a.input_shape == (243, 8, 8) and a.train.tensors[0].shape[0] == 200
    files = sorted(cache.glob("*.pt"))
    assert [f.name.split("_")[1] for f in files] == ["test", "train"]
    mtimes = [f.stat().st_mtime_ns for f in files]
    b = prepare_data(cfg)
    assert [f.stat().st_mtime_ns for f in sorted(cache.glob("*.pt"))] == mtimes  # reused, not rewritten
    assert torch.equal(a.train.tensors[0], b.train.tensors[0])


def test_missing_dataset_cli_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = main(["train", "--config", str(CONFIGS / "adult_fcn.yaml"), "--data-root", str(tmp_path / "no"),
               "--output-dir", str(tmp_path / "o"), "--quiet"])
    assert rc == 2
    assert str(tmp_path / "no" / "adult" / "adult.data") in capsys.readouterr().err
