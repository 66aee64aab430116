"""``opacus-gg compare`` and ``opacus-gg counts`` (opacus_gg.cli.companions)."""

import json

import pytest

from opacus_gg.cli import main
from opacus_gg.companions.clt import clt_epsilon
from opacus_gg.companions.rdp import compute_rdp_epsilon


COMPARE = ["compare", "--beta", "2", "--noise-multiplier", "1.1", "--sample-rate", "0.01", "--steps", "500",
           "--delta", "1e-5"]


@pytest.mark.parametrize("argv,fragment", [
    (["compare", "--beta", "2", "--noise-multiplier", "-1", "--sample-rate", "0.01", "--steps", "5", "--delta",
      "1e-5"], "--noise-multiplier"),
    (["compare", "--beta", "0.5", "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps", "5", "--delta",
      "1e-5"], "--beta"),
    (["compare", "--beta", "2", "--noise-multiplier", "1", "--sample-rate", "2", "--steps", "5", "--delta",
      "1e-5"], "--sample-rate"),
    (["counts", "--k", "10", "--beta", "2", "--epsilon", "1", "--delta", "1.5"], "--delta"),
    (["counts", "--k", "10", "--beta", "2", "--epsilon", "0", "--delta", "1e-5"], "--epsilon"),
])
def test_bad_arguments_exit_2_with_one_line(argv, fragment, cli):
    code, _, err = cli(argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and fragment in err


def test_argparse_rejects_nonpositive_k(capsys):
    with pytest.raises(SystemExit) as e:
        main(["counts", "--k", "0", "--beta", "2", "--epsilon", "1", "--delta", "1e-5"])
    assert e.value.code == 2


def test_compare_json(capsys):
    assert main(COMPARE + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("accountant", "paper", "clt", "rdp"):
        assert isinstance(out[key], float)
    kw = dict(noise_multiplier=1.1, sample_rate=0.01, steps=500, delta=1e-5)
    assert out["clt"] == pytest.approx(clt_epsilon(**kw).epsilon)
    assert out["rdp"] == pytest.approx(compute_rdp_epsilon(**kw).epsilon)
    assert out["rdp"] >= out["accountant"] * 0.99  # RDP is a looser upper bound than the PRV accountant
    assert out["paper"] == pytest.approx(out["accountant"], rel=0.05)  # β = 2: paper mode = Gaussian
    assert out["details"]["clt"]["certified"] is False


def test_compare_human_output_labels_estimates(capsys):
    assert main(COMPARE) == 0
    out = capsys.readouterr().out
    assert "(estimate, NOT a guarantee)" in out  # the CLT line
    assert "(proven upper bound for every shift)" in out  # β = 2: the accountant's bound is proven
    assert "dim=1" in out


def test_compare_needs_dim_when_epsilon_depends_on_it(cli):
    code, _, err = cli(["compare", "--beta", "3", "--noise-multiplier", "1", "--sample-rate", "0.01", "--steps",
                        "5", "--delta", "1e-5"])
    assert code == 2 and "--dim is required" in err and len(err.splitlines()) == 1


def test_counts_json(capsys):
    assert main(["counts", "--k", "10", "--beta", "2", "--epsilon", "1", "--delta", "1e-5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("scale", "noise_std", "linf_error_mean"):
        assert out[key] > 0
    assert out["noise_std"] == pytest.approx(out["scale"])  # β = 2: std = scale
    # β = 2 calibration by the accountant (eps_error 0.01) vs the analytic Gaussian σ
    assert out["scale"] == pytest.approx(out["gaussian_sigma"], rel=0.01)
