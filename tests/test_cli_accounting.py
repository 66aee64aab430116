"""``opacus-gg epsilon | noise-multiplier | curve``: output, JSON keys, bad arguments (exit 2)."""

from __future__ import annotations

import csv
import json
import math
import shutil
import subprocess
import sys

import pytest

from opacus_gg.cli import main
from opacus_gg.accountants.report import SCOPE_TEXT
from opacus_gg.formatting import fmt_down, fmt_up, solver_progress

EPS = ["epsilon", "--beta", "2", "--noise-multiplier", "1.0", "--sample-rate", "0.01", "--steps", "100",
       "--delta", "1e-5"]


def test_rounding_never_lowers_an_upper_bound():
    for x in (1.23441, 0.30000000000000004, 2.0, 7.99999, 1e-7):
        assert float(fmt_up(x)) >= x
        assert float(fmt_down(x)) <= x
    assert fmt_up(1.23441) == "1.2345" and fmt_down(1.23449) == "1.2344"
    assert fmt_up(math.inf) == "inf"


@pytest.mark.parametrize("argv, option", [
    (["epsilon", "--beta", "0.5", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "5",
      "--delta", "1e-5"], "--beta"),
    (["epsilon", "--beta", "2", "--noise-multiplier", "0", "--sample-rate", "0.1", "--steps", "5",
      "--delta", "1e-5"], "--noise-multiplier"),
    (["epsilon", "--beta", "2", "--noise-multiplier", "1", "--sample-rate", "1.5", "--steps", "5",
      "--delta", "1e-5"], "--sample-rate"),
    (["epsilon", "--beta", "2", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "0",
      "--delta", "1e-5"], "--steps"),
    (["epsilon", "--beta", "2", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "5",
      "--delta", "1"], "--delta"),
    (["epsilon", "--beta", "2", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "5",
      "--delta", "1e-5", "--clip-norm-p", "0.5"], "--clip-norm-p"),
    (["epsilon", "--beta", "2", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "5",
      "--delta", "1e-5", "--dim", "0"], "--dim"),
    (["noise-multiplier", "--beta", "2", "--target-epsilon", "-1", "--sample-rate", "0.1", "--steps", "5",
      "--delta", "1e-5"], "--target-epsilon"),
    (["curve", "--betas", "1,x,2"], "--betas"),
    (["curve", "--betas", "0.5,2"], "--betas"),
    (["epsilon", "--beta", "1.5", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "5",
      "--delta", "1e-5"], "--dim"),  # β ≠ 2 with finite p: ε depends on d, so d must be given
    (["noise-multiplier", "--beta", "3", "--target-epsilon", "1", "--sample-rate", "0.1", "--steps", "5",
      "--delta", "1e-5", "--clip-norm-p", "2"], "--dim"),
    (["curve", "--betas", "1.5,2"], "--dim"),  # (β = 1 with p = β = 1 and β = 2 alone need no --dim)
    (["epsilon", "--beta", "2", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "5",
      "--delta", "1e-5", "--clip-norm-p", "inf"], "--dim"),  # p = ∞: every coordinate may move by C
    (["epsilon", "--beta", "2", "--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "5",
      "--delta", "1e-5", "--clip-norm-p", "3"], "--dim"),
    (["curve", "--sigmas", "1:2"], "sigmas"),
    (["curve", "--delta", "0"], "--delta"),
    (EPS + ["--mode", "paper", "--n-samples", "10"], "--n-samples"),
    (EPS + ["--count-noise-multiplier", "0"], "--count-noise-multiplier"),
    (EPS + ["--count-noise-multiplier", "nan"], "--count-noise-multiplier"),
    (EPS + ["--count-noise-multiplier", "2", "--mode", "paper"], "--count-noise-multiplier"),
])
def test_bad_arguments_one_line_exit_2(argv, option, cli):
    code, out, err = cli(argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and option in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [
    EPS + ["--mode", "exact"],
    EPS + ["--dim", "many"],
    ["epsilon", "--beta", "2"],  # missing required options
    ["noise-multiplier", "--beta", "2", "--target-epsilon", "x", "--sample-rate", "0.1", "--steps", "5",
     "--delta", "1e-5"],
])
def test_argparse_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


# ----------------------------------------------------------------------------- with the accountant landed
def test_epsilon_json_certified_beta2_matches_opacus(capsys):
    from opacus.accountants import PRVAccountant

    assert main(EPS + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("epsilon", "prv_bracket", "mode", "certified", "delta", "worst_direction", "worst_shape_k"):
        assert key in out
    assert out["mode"] == "certified" and out["certified"] is True
    assert out["prv_bracket"]["scope"] == "proven"  # at β = 2 the PRV bound is the published ε
    assert out["epsilon"] == out["prv_bracket"]["upper"] >= out["prv_bracket"]["lower"]
    acc = PRVAccountant()
    acc.history = [(1.0, 0.01, 100)]
    assert abs(out["epsilon"] - acc.get_epsilon(1e-5)) < 0.05


def test_epsilon_json_clip_norm_default_and_inf(capsys):
    assert main(EPS + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["clip_norm_p"] == 2.0  # default p = beta
    assert main(EPS + ["--clip-norm-p", "inf", "--dim", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["clip_norm_p"] == "inf"


def test_json_keys_explain_themselves_and_no_upper_end_is_below_what_it_bounds(capsys):
    # β = 1.5, d > 1: the published ε is the proven Rényi bound; the PRV runs over equal spreads beside it and its
    # upper end is below ε, so it is named for what it brackets (scope "equal_spreads"), not "epsilon_upper"
    # (computed with --diagnostics; without it the JSON says it was not computed, and ε is the same number)
    argv = ["epsilon", "--beta", "1.5", "--dim", "2410", "--noise-multiplier", "1", "--sample-rate", "0.01",
            "--steps", "100", "--delta", "1e-5", "--json"]
    assert main(argv + ["--diagnostics"]) == 0
    err = capsys.readouterr()
    out = json.loads(err.out)
    assert "computing the equal-spread PRV" in err.err and "diagnostics done in" in err.err  # progress, on stderr
    assert not {"epsilon_lower", "epsilon_upper", "epsilon_estimate"} & set(out)
    assert out["epsilon_method"] == "rdp" and "Rényi" in out["epsilon_method_text"]
    b = out["prv_bracket"]
    assert b["scope"] == "equal_spreads" and b["lower"] <= b["estimate"] <= b["upper"] <= out["epsilon"]
    assert out["worst_direction"] in ("add", "remove") and out["worst_shape_k"] >= 1
    assert main(argv) == 0
    err = capsys.readouterr()
    fast = json.loads(err.out)
    assert fast["epsilon"] == out["epsilon"] and err.err == ""
    assert fast["prv_bracket"]["upper"] is None and fast["prv_bracket"]["not_computed"].startswith("not computed")
    assert fast["worst_direction"] is None and fast["worst_shape_k"] is None


def test_default_line_is_short_and_verbose_has_the_rest(capsys):
    argv = ["epsilon", "--beta", "1.5", "--dim", "2410", "--noise-multiplier", "1", "--sample-rate", "0.01",
            "--steps", "100", "--delta", "1e-5"]
    assert main(argv) == 0
    line = capsys.readouterr().out.rstrip("\n")
    assert "\n" not in line and len(line) <= 160 and "(proven upper bound for every shift)" in line
    assert "[GG accountant: Rényi bound over the ℓp ball]" in line and "equal spreads" not in line
    assert main(argv + ["--verbose"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == line and all(len(x) <= 160 for x in lines)
    assert any("over equal spreads" in x for x in lines[1:]) and any("worst case" in x for x in lines[1:])
    assert not any("not computed" in x for x in lines)


def test_epsilon_human_readable_rounds_up(capsys):
    assert main(EPS) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("epsilon = ") and "(proven upper bound for every shift)" in line and "dim = 1" in line
    printed = float(line.split()[2])
    assert main(EPS + ["--json"]) == 0
    assert printed >= json.loads(capsys.readouterr().out)["epsilon"]


def test_epsilon_paper_mode_labelled(capsys):
    argv = ["epsilon", "--beta", "1.5", "--noise-multiplier", "1.0", "--sample-rate", "0.05", "--steps", "20",
            "--delta", "1e-5", "--mode", "paper", "--n-samples", "100000", "--dim", "1"]
    assert main(argv) == 0
    assert "(estimate, NOT a guarantee)" in capsys.readouterr().out
    assert main(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mode"] == "paper" and out["certified"] is False and out["epsilon_scope"] == "estimate"
    # the error bars only when asked (--json --diagnostics, --verbose), around the same ε
    b = out["prv_bracket"]
    assert b["lower"] is None and b["upper"] is None and b["not_computed"].startswith("not computed")
    assert main(argv + ["--json", "--diagnostics"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert full["epsilon"] == out["epsilon"] and full["prv_bracket"]["estimate"] == b["estimate"]
    assert full["prv_bracket"]["lower"] <= b["estimate"] <= out["epsilon"] <= full["prv_bracket"]["upper"]
    assert main(argv + ["--verbose"]) == 0
    printed = capsys.readouterr()
    assert "Monte Carlo sd" in printed.out and "computing the Monte Carlo replicates" in printed.err


def test_noise_multiplier_round_trip(capsys):
    from opacus_gg.accountants import compute_epsilon

    argv = ["noise-multiplier", "--beta", "2", "--target-epsilon", "3", "--sample-rate", "1", "--steps", "1",
            "--delta", "1e-5", "--json"]
    assert main(argv) == 0
    sigma = json.loads(capsys.readouterr().out)["noise_multiplier"]
    eps = compute_epsilon(noise_multiplier=sigma, sample_rate=1.0, steps=1, delta=1e-5, beta=2.0).epsilon
    assert eps <= 3.0 and eps > 2.8


def test_curve_writes_png_and_csv_next_to_each_other(tmp_path, capsys):
    png = tmp_path / "fig2.png"
    assert main(["curve", "--betas", "1,2", "--sigmas", "1,2", "--dim", "1", "--plot", str(png)]) == 0
    csv_path = tmp_path / "fig2.csv"
    assert png.read_bytes()[:4] == b"\x89PNG" and csv_path.exists()
    rows = list(csv.DictReader(open(csv_path)))
    assert len(rows) == 4 and {r["beta"] for r in rows} == {"1.0", "2.0"}
    assert "wrote" in capsys.readouterr().out


def test_curve_fills_the_diagnostic_columns_only_with_diagnostics(tmp_path):
    """β = 1.5 with ℓ2 clipping, d = 10: the published ε is a ball bound, the equal-spread PRV's bracket beside it a
    diagnostic: its CSV cells are empty by default and filled with --diagnostics, the ε column the same."""
    base = ["curve", "--betas", "1.5", "--sigmas", "2", "--dim", "10", "--clip-norm-p", "2"]
    rows = {}
    for extra in ([], ["--diagnostics"]):
        png = tmp_path / f"c{len(extra)}.png"
        assert main(base + ["--plot", str(png)] + extra) == 0
        rows[bool(extra)] = next(csv.DictReader(open(png.with_suffix(".csv"))))
    assert rows[False]["epsilon"] == rows[True]["epsilon"]
    assert rows[False]["epsilon_upper"] == "" and float(rows[True]["epsilon_upper"]) > 0


def test_console_script_runs():
    # the one subprocess test: the installed console script (bad-argument exits are tested in-process)
    exe = shutil.which("opacus-gg")
    cmd = [exe] if exe else [sys.executable, "-m", "opacus_gg"]
    r = subprocess.run(cmd + EPS[:] + ["--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["epsilon"] > 0


def test_beta3_prints_the_proven_bound_and_labels_the_equal_spread_one(capsys):
    # β = 3 with ℓ3 clipping and d > 1: the PRV covers equal spreads only, so the published ε is the proven
    # Rényi bound over the ℓp ball and the (smaller) equal-spread ε is printed beside it with its own label
    argv = ["epsilon", "--beta", "3", "--noise-multiplier", "2", "--sample-rate", "0.1", "--steps", "3",
            "--delta", "1e-5", "--dim", "50"]
    assert main(argv + ["--json", "--diagnostics"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["epsilon_scope"] == "proven" and js["certified"] is True and js["epsilon_method"] == "rdp"
    assert js["epsilon_equal_spreads"] < js["epsilon"] and js["epsilon_equal_spreads_scope"] == "equal_spreads"
    assert main(argv + ["--verbose"]) == 0
    text = capsys.readouterr().out
    assert "Monte Carlo" not in text and "dim = 50" in text
    assert f"{fmt_up(js['epsilon'])} ({SCOPE_TEXT['proven']})" in text
    assert f"{fmt_up(js['epsilon_equal_spreads'])} ({SCOPE_TEXT['equal_spreads']})" in text


def test_noise_multiplier_prints_epsilon_with_scope_and_dim(capsys):
    argv = ["noise-multiplier", "--beta", "1.5", "--target-epsilon", "3", "--sample-rate", "1", "--steps", "1",
            "--delta", "1e-5", "--dim", "10"]
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert "solving for sigma" in cap.err
    assert "dim = 10" in cap.out and "epsilon = " in cap.out and "(certified" not in cap.out


@pytest.mark.parametrize("beta, p", [(2.0, 1.0), (2.0, 2.0), (2.0, math.inf), (2.0, 3.0), (1.5, 2.0), (1.0, 1.0)])
def test_dim_is_required_exactly_where_epsilon_depends_on_it(beta, p):
    import warnings

    from opacus_gg.accountants import compute_epsilon
    from opacus_gg.cli import dim_matters

    kw = dict(noise_multiplier=2.0, sample_rate=0.1, steps=10, delta=1e-5, beta=beta, clip_norm_p=p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e1, e50 = (compute_epsilon(dim=d, **kw).epsilon for d in (1, 50))
    if dim_matters(beta, p):
        assert e50 > e1 * 1.01  # a default d = 1 would under-report
    else:
        assert e50 == pytest.approx(e1, rel=1e-9)  # dimension-free case: the same computation for both d


def test_solver_progress_rounds_epsilon_up_and_marks_the_target():
    assert solver_progress(1.23456, 2.00001, 3.0) == "try sigma = 1.2346: epsilon = 2.0001"
    assert solver_progress(0.5, 3.00000001, 3.0) == "try sigma = 0.5000: epsilon = 3.0001 (above target)"


def test_count_noise_multiplier_raises_epsilon_and_matches_compute_epsilon(capsys):
    """--count-noise-multiplier σ_c is the accountant's history field: the JSON ε equals compute_epsilon's with the
    same σ_c, is larger than without the count, and --verbose says the count is included."""
    from opacus_gg.accountants import compute_epsilon

    argv = ["epsilon", "--beta", "1.5", "--dim", "10", "--noise-multiplier", "1", "--sample-rate", "0.05",
            "--steps", "50", "--delta", "1e-5"]
    assert main(argv + ["--json"]) == 0
    without = json.loads(capsys.readouterr().out)
    assert main(argv + ["--count-noise-multiplier", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert without["count_noise_multiplier"] is None and out["count_noise_multiplier"] == 2.0
    ref = compute_epsilon(noise_multiplier=1.0, sample_rate=0.05, steps=50, delta=1e-5, beta=1.5, dim=10,
                          count_noise_multiplier=2.0)
    assert out["epsilon"] == ref.epsilon > without["epsilon"]
    assert main(argv + ["--count-noise-multiplier", "2", "--verbose"]) == 0
    assert "count query included: count_noise_multiplier = 2" in capsys.readouterr().out


def test_noise_multiplier_with_the_count_solves_a_larger_sigma_that_meets_the_target(capsys):
    from opacus_gg.accountants import compute_epsilon

    argv = ["noise-multiplier", "--beta", "2", "--target-epsilon", "2", "--sample-rate", "0.125", "--steps", "16",
            "--delta", "1e-5", "--json"]
    sig = {}
    for count in (None, 4.0):
        assert main(argv + ([] if count is None else ["--count-noise-multiplier", str(count)])) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["count_noise_multiplier"] == count
        sig[count] = out["noise_multiplier"]
    assert sig[4.0] > sig[None]
    eps = compute_epsilon(noise_multiplier=sig[4.0], sample_rate=0.125, steps=16, delta=1e-5,
                          count_noise_multiplier=4.0).epsilon
    assert 1.99 <= eps <= 2.0
    # a target below the count's own share: one line naming the count
    assert main(argv[:4] + ["1"] + argv[5:] + ["--count-noise-multiplier", "1"]) == 2
    last = capsys.readouterr().err.splitlines()[-1]  # after the solver's progress lines
    assert last.startswith("opacus-gg noise-multiplier: error:") and "raise count_noise_multiplier" in last


def test_verbose_says_when_the_spread_cover_is_looser_than_the_proven_bound():
    """At ℓ2 clipping and large d the proven Rényi bound (1.5779 at β = 1.5, d = 10⁶, σ = 1, q = 0.001, T = 10⁵)
    is below the equal-spread PRV cover (lower 1.6513, upper 1.6616): the bracket printed is the cover's, and the
    verbose line must not present it as a bracket of ε; where the cover is below the proven bound, no such note."""
    from opacus_gg.accountants.report import EpsilonReport

    def lines(upper: float) -> list:
        r = EpsilonReport(epsilon=1.5779, epsilon_lower=upper - 0.01, epsilon_estimate=upper, epsilon_upper=upper,
                          delta=1e-5, method="rdp", details={"dim": 10 ** 6})
        return r.verbose_lines()

    loose = [x for x in lines(1.6616) if "PRV over every equal spread" in x]
    assert len(loose) == 1 and "not a bracket of epsilon" in loose[0] and len(loose[0]) <= 160
    assert not any("not a bracket" in x for x in lines(1.2799))


def test_verbose_names_the_cover_pair_behind_the_equal_spread_bracket():
    """Where the pair that sets the equal-spread PRV is an interval pair B[k₀, k₁] (k₀ < k₁: k₁ coordinates at the
    shift of k₀, above every spread it covers), the verbose lines name the range and say that the bracket's lower end
    is not a lower bound on any spread's ε (β = 1.5, p = 2, d = 2410: B[35, 37] gives 1.6680, the spread over 35
    coordinates alone 1.5870); so does a single spread k > 1 (a discrete pair that dominates it); only the exact
    one-coordinate pair's bracket is a bracket of that spread's ε."""
    from opacus_gg.accountants.report import EpsilonReport

    def lines(k0: int, k1: int) -> list:
        r = EpsilonReport(epsilon=1.7987, epsilon_lower=1.6577, epsilon_estimate=1.6678, epsilon_upper=1.6680,
                          delta=1e-5, method="rdp", shape_k=k0, details={"dim": 2410, "shape_range": [k0, k1]})
        return r.verbose_lines()

    cover = lines(35, 37)
    assert any("PRV over every equal spread" in x and "not a lower bound" in x for x in cover)
    assert any(x.strip() == "worst case: remove direction, the pair covering the spreads over 35–37 coordinates"
               for x in cover)
    one = lines(35, 35)  # a discrete pair that dominates the spread over 35 coordinates: its bracket, not ε's
    assert any("not a lower bound" in x for x in one)
    assert any(x.strip() == "worst case: remove direction, shift spread over 35 coordinate(s)" for x in one)
    exact = lines(1, 1)  # the exact one-coordinate pair: a bracket of that spread's ε
    assert not any("not a lower bound" in x for x in exact)
    assert any(x.strip() == "worst case: remove direction, shift spread over 1 coordinate(s)" for x in exact)


def test_opacus_example_flag_names_point_at_ours(capsys):
    """``--sigma`` (Opacus's examples' σ) is answered with --noise-multiplier, not the closest spelling (--dim)."""
    argv = ["epsilon", "--sigma", "1", "--beta", "2", "--sample-rate", "0.01", "--steps", "10", "--delta", "1e-5"]
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--sigma" in err and "use --noise-multiplier" in err and "--dim" not in err


def test_noise_multiplier_takes_epochs_as_the_api_does(capsys):
    """``--epochs E`` solves on the steps training runs (opacus_gg.steps.steps_for_epochs), as the API's epochs=;
    exactly one of --steps and --epochs."""
    from opacus_gg.accountants import get_noise_multiplier

    common = ["noise-multiplier", "--target-epsilon", "3", "--beta", "2", "--sample-rate", "0.1", "--delta", "1e-5",
              "--json"]
    assert main(common + ["--epochs", "2.5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == 25
    assert out["noise_multiplier"] == get_noise_multiplier(target_epsilon=3, target_delta=1e-5, sample_rate=0.1,
                                                           epochs=2.5)
    for bad in (["--epochs", "2", "--steps", "20"], []):
        with pytest.raises(SystemExit) as e:
            main(common + bad)
        assert e.value.code == 2 and "--epochs" in capsys.readouterr().err
