"""``opacus-gg tradeoff``: one line per FPR (rounded up, with the scope), JSON keys, CSV, the figure with extra
points, and bad arguments (one line, exit 2)."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

from opacus_gg.accountants.report import SCOPE_TEXT
from opacus_gg.accountants.tradeoff import compute_tradeoff
from opacus_gg.cli import main

ARGS = ["tradeoff", "--beta", "2", "--noise-multiplier", "1.0", "--sample-rate", "0.1", "--steps", "20",
        "--delta", "1e-5"]
SETTING = dict(noise_multiplier=1.0, sample_rate=0.1, steps=20, delta=1e-5)


def test_one_line_per_fpr_rounded_up_with_its_scope(capsys):
    assert main(ARGS + ["--fpr", "1e-3,0.01,0.1,0.5"]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [ln for ln in out if "FPR" in ln and "TPR <=" in ln]
    assert len(lines) == 4 and all(SCOPE_TEXT["proven"] in ln for ln in lines)
    ref = compute_tradeoff(**SETTING).tpr_upper([1e-3, 0.01, 0.1, 0.5])
    printed = [float(re.search(r"TPR <= ([0-9.e-]+)", ln).group(1)) for ln in lines]
    assert all(p >= r for p, r in zip(printed, ref)) and np.allclose(printed, ref, rtol=1e-3)
    assert any(ln.strip().startswith("mu-GDP: mu = ") for ln in out)


def test_json_has_fpr_tpr_upper_and_mu_gdp(capsys):
    assert main(ARGS + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rep = compute_tradeoff(**SETTING)
    assert out["fpr"] == [1e-3, 1e-2, 0.1]
    assert out["tpr_upper"] == rep.tpr_upper(out["fpr"]).tolist()
    assert out["mu_gdp"] == rep.mu_gdp and isinstance(out["mu_gdp"], float)
    assert out["scope"] == "proven" and out["sources"] == ["prv"] and out["epsilon"] == rep.epsilon


def test_json_mu_gdp_is_null_where_the_bound_reaches_one(capsys):
    # Laplace with ε₀ = 1/0.03: TPR_up(1e-6) = 1 − e^{−ε₀}/(4·1e-6) > 1 − 1e-6, so no μ holds on the claimed range
    argv = ["tradeoff", "--beta", "1", "--dim", "1", "--noise-multiplier", "0.03", "--sample-rate", "1", "--steps",
            "1", "--delta", "1e-5", "--json"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert '"mu_gdp": null' in text and json.loads(text)["mu_gdp"] is None


def test_csv_and_plot_are_written(tmp_path, capsys):
    png, path = tmp_path / "t.png", tmp_path / "t.csv"
    assert main(ARGS + ["--plot", str(png), "--csv", str(path), "--fpr", "0.02"]) == 0
    assert png.stat().st_size > 10_000
    with open(path) as f:
        rows = list(csv.DictReader(f))
    fpr = np.array([float(r["fpr"]) for r in rows])
    tpr = np.array([float(r["tpr_upper"]) for r in rows])
    assert 0.02 in fpr and np.all(np.diff(fpr) > 0) and np.all(np.diff(tpr) >= 0) and np.all(tpr >= fpr)
    assert f"wrote {png}" in capsys.readouterr().out


def test_plot_accepts_extra_points(tmp_path):
    from opacus_gg.experiments.figures.tradeoff import plot_tradeoff

    rep = compute_tradeoff(**SETTING)
    out = plot_tradeoff(rep, str(tmp_path / "a.png"), extra_points=[([1e-3, 1e-2], [2e-3, 2e-2], "audit")])
    assert (tmp_path / "a.png").stat().st_size > 10_000 and out == str(tmp_path / "a.png")


@pytest.mark.parametrize("extra, option", [
    (["--fpr", "0,0.1"], "--fpr"), (["--fpr", "x"], "--fpr"), (["--fpr", "1"], "--fpr"),
    (["--noise-multiplier", "0"], "--noise-multiplier"),
])
def test_bad_arguments_are_one_line_and_exit_2(extra, option, capsys):
    with pytest.raises(SystemExit) as e:
        rc = main(ARGS + extra)
        raise SystemExit(rc)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option in err[0]


def test_missing_dim_is_refused(capsys):
    argv = ["tradeoff", "--beta", "1.5", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "5",
            "--delta", "1e-5"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--dim" in err[0]
