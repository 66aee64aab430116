"""The ``pate``, ``pate-experiment`` and ``outliers`` subcommands: small runs write their files; bad input → exit 2."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from opacus_gg.cli import main


@pytest.fixture
def votes_file(tmp_path):
    rng = np.random.default_rng(0)
    votes = rng.integers(0, 10, size=(30, 4))
    votes[:, 2] += 40  # a clear plurality for class 2
    path = tmp_path / "votes.npy"
    np.save(path, votes)
    return path


@pytest.mark.parametrize("array, message", [
    (np.zeros((2, 3, 4)), "2-D"),
    (np.array([[1.0, -1.0], [2.0, 3.0]]), "non-negative"),
])
def test_pate_bad_votes_exit_2(tmp_path, capsys, array, message):
    path = tmp_path / "bad.npy"
    np.save(path, array)
    rc = main(["pate", "--votes", str(path), "--beta", "2", "--noise-multiplier", "1", "--delta", "1e-5",
               "--out", str(tmp_path / "l.npy")])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "l.npy").exists()


def test_pate_bad_beta_and_missing_file_exit_2(tmp_path, votes_file, capsys):
    rc = main(["pate", "--votes", str(votes_file), "--beta", "0.5", "--noise-multiplier", "1", "--delta", "1e-5",
               "--out", str(tmp_path / "l.npy")])
    assert rc == 2 and "beta" in capsys.readouterr().err
    rc = main(["pate", "--votes", str(tmp_path / "nope.npy"), "--noise-multiplier", "1", "--delta", "1e-5"])
    assert rc == 2 and "not found" in capsys.readouterr().err
    rc = main(["pate", "--votes", str(votes_file), "--delta", "1e-5"])
    assert rc == 2 and "exactly one of --target-epsilon" in capsys.readouterr().err


def test_experiment_and_outliers_bad_input_exit_2(tmp_path, capsys):
    assert main(["pate-experiment", "--n-classes", "1", "--out-dir", str(tmp_path)]) == 2
    assert "n_classes" in capsys.readouterr().err
    assert main(["outliers", "--betas", "0.5", "--out-dir", str(tmp_path)]) == 2
    assert "beta" in capsys.readouterr().err


def test_pate_writes_labels_and_prints_epsilon(tmp_path, votes_file, capsys):
    out = tmp_path / "labels.npy"
    rc = main(["pate", "--votes", str(votes_file), "--beta", "1.5", "--noise-multiplier", "10", "--delta", "1e-5",
               "--seed", "0", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    labels = np.load(out)
    assert labels.shape == (30,) and labels.dtype == np.int64
    assert (labels == 2).mean() > 0.9
    eps = float(text.split("certified epsilon=")[1].split()[0])
    from opacus_gg.pate import pate_epsilon

    assert eps >= pate_epsilon(noise_multiplier=10.0, n_queries=30, delta=1e-5, beta=1.5).epsilon  # rounded up


def test_pate_experiment_on_a_votes_file(tmp_path, votes_file, capsys):
    rc = main(["pate-experiment", "--votes", str(votes_file), "--betas", "1", "--target-epsilon", "1",
               "--trials", "5", "--out-dir", str(tmp_path / "exp")])
    assert rc == 0, capsys.readouterr()
    rows = list(csv.DictReader(open(tmp_path / "exp" / "pate_experiment.csv")))
    assert [float(r["beta"]) for r in rows] == [1.0]
    assert all(0.0 <= float(r["accuracy"]) <= 1.0 for r in rows)
    assert (tmp_path / "exp" / "pate_experiment.png").stat().st_size > 1000


def test_pate_experiment_simulated(tmp_path, capsys):
    rc = main(["pate-experiment", "--n-histograms", "40", "--n-classes", "4", "--betas", "1", "--trials", "5",
               "--out-dir", str(tmp_path)])
    assert rc == 0, capsys.readouterr()
    assert (tmp_path / "pate_experiment.csv").exists() and (tmp_path / "pate_experiment.png").exists()


def test_outliers_writes_csv_and_png(tmp_path, capsys):
    rc = main(["outliers", "--betas", "1", "--thresholds", "1", "4", "--sample-rate", "0.01", "--steps",
               "10", "--out-dir", str(tmp_path)])
    assert rc == 0, capsys.readouterr()
    rows = list(csv.DictReader(open(tmp_path / "outliers.csv")))
    assert len(rows) == 2 * 2  # two panels (GG, SGG) × two τ
    assert {float(r["sample_rate"]) for r in rows} == {1.0, 0.01}
    assert (tmp_path / "outliers.png").stat().st_size > 1000
