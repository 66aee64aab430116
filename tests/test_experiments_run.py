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


#: one epoch of the quickstart on 256 digits (4 steps), no Opacus baseline, the proven ε alone
TINY_QUICKSTART = ["train", "--config", "quickstart", "--epochs", "1", "--quiet", "--set", "data.limit_train=256",
                   "--set", "compare_opacus=false", "--set", "privacy.equal_spreads_epsilon=false"]


def test_quickstart_with_adaptive_clipping_via_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """--set privacy.clipping=adaptive on the quickstart (β = 1.5, p = 2, fixed σ): the run records its clipping, the
    count's σ_c = 2·batch_size/20 and the bound C_t per row; the accountant's history holds σ_c; the
    checkpoint holds C_t."""
    rc = main(TINY_QUICKSTART + ["--set", "privacy.clipping=adaptive", "--noise-multiplier", "1.2",
                                 "--output-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["clipping"] == "adaptive" and res["count_noise_multiplier"] == 2 * 64 / 20
    assert res["adaptive"]["unclipped_num_std"] == 64 / 20 and res["adaptive"]["target_unclipped_quantile"] == 0.1
    rows = res["rows"]
    assert rows[0]["max_grad_norm"] == 1.0 != rows[1]["max_grad_norm"]  # the bound moved
    assert "(adaptive: γ = 0.1, σ_c = 6.4)" in out and f"C {rows[1]['max_grad_norm']:.4g}" in out
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert ckpt["adaptive_max_grad_norm"] == rows[1]["max_grad_norm"]
    # the accountant saw the count (its ε with σ_c: tests/test_adaptive_accounting.py)
    hist = ckpt["privacy_accountant_state_dict"]["history"]
    assert [tuple(h) for h in hist] == [(1.2, res["sample_rate"], 4, 1.5, res["dim"], 2.0, 6.4)]


def test_a_run_with_the_ball_table_publishes_the_tables_proven_epsilon(tmp_path: Path, monkeypatch,
                                                                      capsys: pytest.CaptureFixture) -> None:
    """--set privacy.ball_bound=table (β = p = 1.5, fixed σ; a coarse table, no disk cache): the engine accounts
    with the ball table, and the run's ε is compute_epsilon's with ball_bound="table" on the same history: the
    smallest proven bound, ≤ the default's."""
    from opacus_gg.accountants import api, compute_epsilon
    from opacus_gg.accountants.ball_prv import TableSpec

    monkeypatch.setenv("OPACUS_GG_CACHE", "off")
    monkeypatch.setattr(api, "TABLE_SPEC", TableSpec(a0=0.2, ratio_low=1.2, ratio_high=1.1, high_from=0.5, h=0.02,
                                                     half_width=8.0))
    rc = main(TINY_QUICKSTART + ["--noise-multiplier", "1.0", "--set", "privacy.clip_norm_p=1.5", "--set",
                                 "privacy.ball_bound=table", "--set", "privacy.paper_epsilon=false",
                                 "--output-dir", str(tmp_path)])
    assert rc == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["ball_bound"] == "table" and res["epsilon_scope"] == "proven"
    kw = dict(noise_multiplier=1.0, sample_rate=res["sample_rate"], steps=res["rows"][-1]["steps"], delta=1e-5,
              beta=1.5, dim=res["dim"], clip_norm_p=1.5)
    table = compute_epsilon(**kw, ball_bound="table")
    assert "epsilon_ball_table" in table.details
    assert res["epsilon"] == pytest.approx(table.epsilon, rel=1e-12)
    assert res["epsilon"] <= compute_epsilon(**kw).epsilon


def test_adaptive_run_solves_sigma_with_the_count(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """privacy.clipping: adaptive with σ calibrated (β = 2): make_private_with_epsilon solves σ with the count, so
    the ε the accountant reports with the count meets the target (target − tolerance ≤ ε ≤ target)."""
    from opacus_gg.accountants import compute_epsilon

    rc = main(TINY_QUICKSTART + ["--beta", "2", "--clipping", "adaptive", "--output-dir", str(tmp_path),
                                 "--set", "privacy.epsilon_tolerance=0.05"])
    assert rc == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["calibration"] == "certified" and res["count_noise_multiplier"] == 6.4
    eps = compute_epsilon(noise_multiplier=res["noise_multiplier"], sample_rate=res["sample_rate"],
                          steps=res["rows"][1]["steps"], delta=1e-5, count_noise_multiplier=6.4).epsilon
    assert 3.0 - 0.05 <= eps <= 3.0 and res["epsilon"] == pytest.approx(eps, rel=1e-9)


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
    ckpt = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
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
    """A data root that does not exist is refused naming --data-root; one that exists but lacks the files is refused
    naming the missing file (both before torch's import: test_cli_errors.py)."""
    argv = ["train", "--config", str(CONFIGS / "adult_fcn.yaml"), "--output-dir", str(tmp_path / "o"), "--quiet"]
    assert main([*argv, "--data-root", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert "--data-root: no directory" in err and str(tmp_path / "no") in err
    (tmp_path / "empty").mkdir()
    assert main([*argv, "--data-root", str(tmp_path / "empty")]) == 2
    assert str(tmp_path / "empty" / "adult" / "adult.data") in capsys.readouterr().err
