"""Configs: every shipped YAML validates; overrides and CLI flags reach the right keys; bad input → ValueError."""

from __future__ import annotations

from pathlib import Path

import pytest

from opacus_gg.cli import build_parser
from opacus_gg.cli.train import build_config
from opacus_gg.experiments.config import apply_overrides, load_config, parse_override, validate_config

from opacus_gg.experiments.config import CONFIG_DIR as CONFIGS
NAMES = ["quickstart", "cifar10_scatternet", "svhn_scatternet", "adult_fcn", "imdb_lstm"]


@pytest.mark.parametrize("name", NAMES)
def test_shipped_configs_validate(name: str) -> None:
    cfg = validate_config(load_config(CONFIGS / f"{name}.yaml"))
    assert cfg["name"] == name
    if name != "quickstart":  # the paper's grid (Appendix E.1): δ = 1e-6, β ∈ [1, 4]
        assert cfg["privacy"]["target_delta"] == 1e-6
        assert min(cfg["sweep"]["betas"]) == 1.0 and max(cfg["sweep"]["betas"]) == 4.0
        assert cfg["sweep"]["grid"]["privacy.max_grad_norm"] == [0.05, 0.1, 0.25, 0.5]


def test_quickstart_is_gg_with_target_epsilon() -> None:
    cfg = load_config(CONFIGS / "quickstart.yaml")
    assert cfg["data"]["name"] == "digits" and cfg["privacy"]["beta"] != 2 and cfg["compare_opacus"] is True
    assert cfg["privacy"]["noise_multiplier"] is None and cfg["privacy"]["target_epsilon"] > 0


def test_set_overrides_parse_yaml_values() -> None:
    cfg = apply_overrides(load_config(), ["privacy.target_delta=1e-6", "sweep.betas=[1, 2.5]", "model.hidden=null"])
    assert cfg["privacy"]["target_delta"] == 1e-6
    assert cfg["sweep"]["betas"] == [1, 2.5]
    assert cfg["model"]["hidden"] is None
    assert parse_override("train.lr = 0.25") == ("train.lr", 0.25)


def test_unknown_keys_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="train.lrr"):
        apply_overrides(load_config(), ["train.lrr=1"])
    with pytest.raises(ValueError, match="key=value"):
        apply_overrides(load_config(), ["train.lr"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("privacy:\n  betta: 2\n")
    with pytest.raises(ValueError, match="privacy.betta"):
        load_config(bad)
    with pytest.raises(ValueError, match="no file"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize("key,value,match", [
    ("privacy.beta", 0.5, "privacy.beta"), ("privacy.target_delta", 1.5, "privacy.target_delta"),
    ("privacy.max_grad_norm", -1, "privacy.max_grad_norm"), ("train.epochs", 0, "train.epochs"),
    ("train.batch_size", 2.5, "train.batch_size"), ("train.lr", float("nan"), "train.lr"),
    ("privacy.target_epsilon", 0, "privacy.target_epsilon"), ("data.name", "mnist", "data.name"),
    ("privacy.calibration", "rdp", "privacy.calibration"), ("privacy.clip_norm_p", 0.5, "clip_norm_p"),
    ("privacy.clipping", "ghost", "privacy.clipping"),
    ("privacy.ball_bound", "tables", r"privacy.ball_bound must be one of \('renyi', 'table'\)"),
    ("privacy.target_unclipped_quantile", 1.5, "privacy.target_unclipped_quantile"),
    ("privacy.clipbound_learning_rate", -0.1, "privacy.clipbound_learning_rate"),
    ("privacy.unclipped_num_std", 0, "privacy.unclipped_num_std"),
    ("privacy.min_clipbound", 200.0, "privacy.max_clipbound must be larger than privacy.min_clipbound"),
    ("privacy.max_clipbound", "big", "privacy.max_clipbound"),
])
def test_bad_values_name_the_key(key: str, value, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        validate_config(apply_overrides(load_config(CONFIGS / "quickstart.yaml"), {key: value}))


def test_model_dataset_mismatch_is_rejected() -> None:
    with pytest.raises(ValueError, match="scatternet_cnn"):
        validate_config(apply_overrides(load_config(CONFIGS / "cifar10_scatternet.yaml"), {"data.features": "raw"}))
    with pytest.raises(ValueError, match="lstm"):
        validate_config(apply_overrides(load_config(CONFIGS / "adult_fcn.yaml"), {"model.name": "lstm"}))


def test_cli_flags_map_to_config_keys() -> None:
    args = build_parser().parse_args([
        "train", "--config", str(CONFIGS / "adult_fcn.yaml"), "--beta", "1.5", "--target-epsilon", "2",
        "--delta", "1e-7", "--epochs", "3", "--batch-size", "64", "--lr", "0.1", "--max-grad-norm", "0.25",
        "--device", "cpu", "--seed", "4", "--data-root", "/d", "--output-dir", "/o", "--download",
        "--resume", "--set", "train.momentum=0.9", "--quiet", "--clipping", "adaptive"])
    cfg = build_config(args)
    p, t = cfg["privacy"], cfg["train"]
    assert (p["beta"], p["target_epsilon"], p["target_delta"], p["max_grad_norm"]) == (1.5, 2.0, 1e-7, 0.25)
    assert (t["epochs"], t["batch_size"], t["lr"], t["momentum"]) == (3, 64, 0.1, 0.9)
    assert (cfg["seed"], cfg["data"]["root"], cfg["output_dir"], cfg["data"]["download"]) == (4, "/d", "/o", True)
    assert cfg["resume"] == "auto" and cfg["quiet"] is True and p["clipping"] == "adaptive"


def test_adaptive_clipping_refuses_the_paper_calibration() -> None:
    with pytest.raises(ValueError, match="privacy.calibration='paper' cannot go with privacy.clipping='adaptive'"):
        validate_config(apply_overrides(load_config("quickstart"), {"privacy.clipping": "adaptive",
                                                                     "privacy.calibration": "paper"}))


def test_cli_bad_flag_value_exits_2(capsys: pytest.CaptureFixture) -> None:
    from opacus_gg.cli import main

    with pytest.raises(SystemExit) as e:
        main(["train", "--config", str(CONFIGS / "quickstart.yaml"), "--beta", "0.3"])
    assert e.value.code == 2 and "--beta" in capsys.readouterr().err
