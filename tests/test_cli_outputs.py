"""What a run writes: every output format of an uncertified run (β = 3, ℓ3 clipping, d > 1) carries the scope
label and never says "certified" or "proven"; a second run into the same directory keeps the first; resuming
past the calibrated budget is refused."""

from __future__ import annotations

import csv
import json
from pathlib import Path


from opacus_gg.accountants.report import SCOPE_TEXT
from opacus_gg.experiments.config import apply_overrides, load_config
from opacus_gg.experiments.report import write_report
from opacus_gg.experiments.sweep import run_sweep

TINY = ["--set", "data.name=synthetic", "--set", "data.n_train=200", "--set", "data.n_test=100",
        "--set", "compare_opacus=false", "--batch-size", "50", "--quiet"]


def _train(cli, out: Path, *extra: str):
    return cli(["train", "--config", "quickstart", "--output-dir", str(out), *TINY, *extra])


def test_beta3_run_is_labelled_in_every_format(tmp_path: Path, cli) -> None:
    """β = 3, d > 1: the published ε is the proven ℓp-ball bound; the equal-spread ε travels with its own label."""
    code, out, err = _train(cli, tmp_path / "run", "--beta", "3", "--noise-multiplier", "2", "--epochs", "1",
                            "--set", "privacy.paper_epsilon=final")
    assert code == 0, err
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    scope = res["epsilon_scope"]
    assert scope == "proven" and res["certified"] is True and res["epsilon_method"] == "rdp" and res["dim"] > 1
    assert res["epsilon_equal_spreads"] is None or res["epsilon_equal_spreads_scope"] == "equal_spreads"
    assert res["epsilon_scope_text"] == SCOPE_TEXT[scope]
    assert all(r["epsilon_scope"] == scope for r in res["rows"][1:])
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows[-1]["epsilon_scope"] == scope and rows[-1]["epsilon_paper_scope"] == "estimate"
    epoch_lines = [line for line in out.splitlines() if line.startswith("epoch ")]
    assert epoch_lines and all(SCOPE_TEXT[scope] in line and f"d = {res['dim']}" in line for line in epoch_lines)
    assert SCOPE_TEXT["estimate"] in epoch_lines[-1]  # the paper-mode ε
    done = next(line for line in out.splitlines() if line.startswith("done:"))
    assert SCOPE_TEXT[scope] in done
    assert out.splitlines()[-1].startswith("membership inference: TPR") and SCOPE_TEXT[scope] in out.splitlines()[-1]
    for text in (out, err, json.dumps(res), (tmp_path / "run" / "metrics.csv").read_text()):
        assert "certified upper bound" not in text and "(certified" not in text


def test_beta3_sweep_table_is_labelled(tmp_path: Path) -> None:
    cfg = apply_overrides(load_config("quickstart"), {
        "data.name": "synthetic", "data.n_train": 200, "data.n_test": 100, "compare_opacus": False, "quiet": True,
        "train.batch_size": 50, "train.epochs": 1, "privacy.paper_epsilon": False, "output_dir": str(tmp_path),
        "sweep.betas": [3.0], "sweep.target_epsilons": [8.0], "sweep.seeds": [0], "privacy.epsilon_tolerance": 0.5})
    rows = run_sweep(cfg, tmp_path, log=lambda s: None)
    assert rows[0]["error"] is None and rows[0]["epsilon_scope"] == "proven"
    table = write_report(tmp_path)["table"].read_text()
    row = next(line for line in table.splitlines() if line.startswith("| 8 | 3 |"))
    assert SCOPE_TEXT["proven"] in row
    assert "certified" not in table.lower()


def test_second_train_into_the_same_directory_keeps_the_first(tmp_path: Path, cli) -> None:
    out = tmp_path / "run"
    code, _, err = _train(cli, out, "--noise-multiplier", "1", "--epochs", "1", "--seed", "1")
    assert code == 0, err
    first = (out / "results.json").read_text()
    code, text, err = _train(cli, out, "--noise-multiplier", "1", "--epochs", "1", "--seed", "2")
    assert code == 0, err
    assert (out / "results.json").read_text() == first  # untouched
    second = json.loads((tmp_path / "run-2" / "results.json").read_text())
    assert second["seed"] == 2 and f"writing to {tmp_path / 'run-2'}" in text
    code, _, err = _train(cli, out, "--noise-multiplier", "1", "--epochs", "1", "--seed", "3", "--overwrite")
    assert code == 0, err
    assert json.loads((out / "results.json").read_text())["seed"] == 3  # replaced only when asked
    assert not (tmp_path / "run-3").exists()


def test_resume_past_the_calibrated_budget_is_refused(tmp_path: Path, cli) -> None:
    out = tmp_path / "run"
    code, _, err = _train(cli, out, "--beta", "2", "--target-epsilon", "4", "--epochs", "1",
                          "--set", "privacy.epsilon_tolerance=0.5")
    assert code == 0, err
    code, _, err = _train(cli, out, "--beta", "2", "--target-epsilon", "4", "--epochs", "3", "--resume")
    assert code == 2 and "--resume" in err and "target ε = 4" in err and "--epochs 1" in err
    assert err.count("\n") == 1


def test_epoch_lines_stream_through_a_pipe(tmp_path: Path) -> None:
    # stdout is a pipe here (not a terminal): each epoch line must arrive while the run is still going
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "opacus_gg", "train", "--config", "quickstart", "--output-dir", str(tmp_path / "r"),
           *TINY, "--noise-multiplier", "1", "--epochs", "4", "--set", "privacy.paper_epsilon=false"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=str(tmp_path),
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])})
    try:
        running_at_first_epoch = None
        for line in proc.stdout:
            if line.startswith("epoch 1/4"):
                running_at_first_epoch = proc.poll() is None
        assert proc.wait(timeout=600) == 0
    finally:
        proc.kill()
    assert running_at_first_epoch is True
