"""Fuzz of every ``opacus-gg`` command: NaN, ±inf, negative, zero, huge, tiny and non-numeric values for every numeric
flag, broken YAML/.npy files and unwritable paths. Every case ends in exit 0 with a number an independent check
accepts, or in exit 2 with one line on stderr naming the flag: never a traceback (issue 32, item 3).

The CLI runs in-process (:func:`opacus_gg.cli.main`). The heavy commands (train, sweep, study, pate-experiment,
outliers) are fuzzed for their argument checks only: their work function is replaced by one that raises
:class:`_Reached`, so an accepted value costs nothing and a refused one must be refused before any work.
hypothesis runs derandomized; the fast part (~30 s) runs in CI, the wider sweep under ``-m slow``.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Tuple

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opacus_gg.cli import main

#: values every numeric flag is tried with (one at a time, the others valid)
BAD_NUMBERS = ["nan", "NaN", "inf", "-inf", "-1", "-0.0", "0", "1e309", "1e300", "1e-320", "1e-155", "1e-7",
               "abc", "", "1,2", "0x10", "True", "None", "1e9", "7"]
#: any float as text, any short text: hypothesis's share of the values
NUMBER_TEXT = st.one_of(st.sampled_from(BAD_NUMBERS), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                        st.integers(min_value=-10**20, max_value=10**20).map(str),
                        st.text(alphabet="0123456789.eE+-xnaif ", max_size=8))
FAST = settings(max_examples=6, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))
WIDE = settings(max_examples=60, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


class _Reached(Exception):
    """Raised by the stand-in for a heavy command's work: the arguments were accepted."""


def _run(argv: List[str]) -> Tuple[int, str, str]:
    """``opacus-gg argv`` in-process → (exit code, stdout, stderr); ``_Reached`` → exit code -1."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = int(e.code or 0)
        except _Reached:
            code = -1
    return code, out.getvalue(), err.getvalue()


def _names(flag: str) -> Tuple[str, ...]:
    """How an error may name ``--some-flag``: the flag or its alias (``--target-delta``/``--delta``), or the API
    parameter it feeds."""
    names = [flag]
    for action in _all_actions():
        if flag in action.option_strings:
            names += list(action.option_strings) + [action.dest]
    bare = flag.lstrip("-")
    return tuple(names) + (bare.replace("-", "_"), bare)


def _all_actions():
    import argparse

    from opacus_gg.cli import build_parser

    sub = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)][0]
    return [a for p in sub.choices.values() for a in p._actions]


def _refused_or_ok(code: int, err: str, flag: str) -> None:
    """Exit 0 (or reached the work), or exit 2 with one line on stderr naming ``flag``; never a traceback."""
    assert "Traceback" not in err, err
    if code in (0, -1):
        return
    assert code == 2, (code, err)
    lines = [ln for ln in err.splitlines() if not ln.startswith("opacus-gg: warning:")]
    assert len(lines) == 1, err
    # names the flag (or the API parameter it feeds), or the other flag the value makes necessary (--dim for p > 2)
    assert any(n in lines[0] for n in _names(flag)) or re.search(r"--[a-z]", lines[0]), (flag, err)


def _gauss_delta(eps: float, mu: float) -> float:
    r"""Exact δ(ε) of the Gaussian pair with shift μ, Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), in 50-digit mpmath (an oracle
    that shares no code with the package; float64 loses the difference at μ ~ 10^6)."""
    if math.isinf(eps):
        return 0.0
    with mpmath.workdps(50):
        e, m = mpmath.mpf(eps), mpmath.mpf(mu)
        return float(mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2))


def _gauss_mu(sigma: float, steps: int, count: Optional[float] = None) -> float:
    """μ of T full-batch Gaussian steps at noise σ with a count at σ_c (None: no count): √(T(σ⁻² + σ_c⁻²))."""
    return math.sqrt(steps * (sigma ** -2 + (0.0 if count is None else count ** -2)))


def _closed_form_mu(rec: dict, argv: List[str]) -> Optional[float]:
    """μ where the printed record's setting is T full-batch Gaussian steps (β = 2, q = 1, p ≤ 2: G_μ exactly),
    else None."""
    args = dict(zip(argv[1::2], argv[2::2]))
    if rec["beta"] == 2 and rec["sample_rate"] == 1 and float(args.get("--clip-norm-p", 2)) <= 2:
        return _gauss_mu(rec["noise_multiplier"], rec["steps"], rec["count_noise_multiplier"])
    return None


# ------------------------------------------------------------------------------------------------ accounting
#: q = 1, β = 2: every accepted value has a closed form (T Gaussian steps) to check the printed ε against
EPSILON_BASE = {"--noise-multiplier": "1", "--beta": "2", "--sample-rate": "1", "--steps": "10", "--delta": "1e-5"}
EPSILON_FLAGS = ["--noise-multiplier", "--beta", "--sample-rate", "--steps", "--delta", "--dim", "--clip-norm-p",
                 "--count-noise-multiplier", "--eps-error"]


def _argv(command: str, base: dict, flag: str, value: str, extra=()) -> List[str]:
    args = dict(base, **{flag: value})
    return [command] + [x for k, v in args.items() for x in (k, v)] + list(extra)


def _check_epsilon_json(out: str, argv: List[str]) -> None:
    """The printed ε is a float ≥ 0 or inf, and where the setting is the closed-form one (β = 2, q = 1, p ≤ 2),
    its exact δ(ε) is ≤ the target δ (the printed ε is an upper bound)."""
    rec = json.loads(out)
    eps = float(rec["epsilon"])
    assert eps >= 0 and not math.isnan(eps), rec
    mu = _closed_form_mu(rec, argv)
    if mu is not None:
        assert _gauss_delta(eps, mu) <= rec["delta"] * (1 + 1e-9) + 1e-300, (rec, mu)


def _fuzz_epsilon(flag: str, value: str) -> None:
    argv = _argv("epsilon", EPSILON_BASE, flag, value, ["--json"])
    code, out, err = _run(argv)
    _refused_or_ok(code, err, flag)
    if code == 0:
        _check_epsilon_json(out, argv)


@pytest.mark.parametrize("flag", EPSILON_FLAGS)
@FAST
@given(value=NUMBER_TEXT)
def test_epsilon_flags_are_a_checked_number_or_one_line(flag, value):
    _fuzz_epsilon(flag, value)


@pytest.mark.slow
@pytest.mark.parametrize("flag", EPSILON_FLAGS)
@WIDE
@given(value=NUMBER_TEXT)
def test_epsilon_flags_wide(flag, value):
    _fuzz_epsilon(flag, value)


@pytest.mark.parametrize("argv", [
    # issue 32, item 1: a "proven" 0 where the truth is effectively infinite
    ["epsilon", "--noise-multiplier", "1", "--beta", "2", "--sample-rate", "0.01", "--steps", "10", "--delta",
     "1e-5", "--count-noise-multiplier", "1e-155"],
    # item 2: the same at β = 1.5, d = 10 (an OverflowError's text) and at q = 1
    ["epsilon", "--noise-multiplier", "1", "--beta", "1.5", "--dim", "10", "--sample-rate", "0.01", "--steps", "10",
     "--delta", "1e-5", "--count-noise-multiplier", "1e-155"],
    ["epsilon", "--noise-multiplier", "1", "--beta", "2", "--sample-rate", "1", "--steps", "10", "--delta", "1e-5",
     "--count-noise-multiplier", "1e-155"],
    ["noise-multiplier", "--target-epsilon", "1", "--beta", "2", "--sample-rate", "0.01", "--steps", "10",
     "--delta", "1e-5", "--count-noise-multiplier", "1e-160"],
    ["compare", "--noise-multiplier", "1e-155", "--beta", "2", "--sample-rate", "0.01", "--steps", "10",
     "--delta", "1e-5"],
])
def test_the_issues_tiny_count_noise_is_refused_naming_it_and_its_range(argv):
    code, out, err = _run(argv)
    flag = "--count-noise-multiplier" if "--count-noise-multiplier" in argv else "--noise-multiplier"
    assert code == 2 and out == "", (code, out, err)
    _refused_or_ok(code, err, flag)
    assert "1e-06" in err and "1e+06" in err, err  # the proven range is stated


NOISE_MULTIPLIER_BASE = {"--target-epsilon": "1", "--beta": "2", "--sample-rate": "1", "--steps": "10",
                         "--delta": "1e-5"}


@pytest.mark.parametrize("flag", ["--target-epsilon", "--steps", "--count-noise-multiplier", "--eps-error"])
@settings(FAST, max_examples=4)
@given(value=NUMBER_TEXT)
def test_noise_multiplier_flags(flag, value):
    code, out, err = _run(_argv("noise-multiplier", NOISE_MULTIPLIER_BASE, flag, value, ["--json"]))
    _refused_or_ok(code, err, flag)
    if code == 0:
        rec = json.loads(out)
        sigma = float(rec["noise_multiplier"])
        count = rec.get("count_noise_multiplier")
        eps = float(rec["epsilon"])
        assert eps <= float(rec["target_epsilon"]) and sigma > 0, rec
        mu = _gauss_mu(sigma, rec["steps"], count)
        assert _gauss_delta(eps, mu) <= rec["delta"] * (1 + 1e-9), rec


CURVE_BASE = {"--betas": "2", "--sigmas": "1", "--steps": "2", "--sample-rate": "1"}


@pytest.mark.parametrize("flag", ["--betas", "--sigmas", "--sample-rate", "--steps", "--delta", "--dim",
                                  "--clip-norm-p", "--eps-error", "--epsilon-line"])
@settings(FAST, max_examples=4)
@given(value=NUMBER_TEXT)
def test_curve_flags(flag, value, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("curve")
    code, out, err = _run(_argv("curve", CURVE_BASE, flag, value, ["--plot", str(out_dir / "c.png")]))
    _refused_or_ok(code, err, flag)


def _unwritable_paths(tmp: Path, suffix: str = ".png") -> List[Tuple[str, str]]:
    """(kind, path): a path whose parent is a file, a directory, and a file under a read-only directory."""
    a_file = tmp / "a_file"
    a_file.write_text("x")
    a_dir = tmp / f"a_dir{suffix}"
    a_dir.mkdir()
    ro = tmp / "read_only"
    ro.mkdir()
    ro.chmod(0o500)
    paths = [("parent is a file", str(a_file / f"x{suffix}")), ("a directory", str(a_dir))]
    if os.geteuid() != 0:  # root writes anywhere
        paths.append(("read-only directory", str(ro / "sub" / f"x{suffix}")))
    return paths


def test_curve_plot_into_unwritable_paths_is_one_line(tmp_path):
    """Issue 32, item 3: ``--plot out/x.png`` where ``out`` is a file was a FileExistsError traceback."""
    for kind, path in _unwritable_paths(tmp_path):
        for flag in ("--plot", "--csv"):
            argv = _argv("curve", CURVE_BASE, flag, path, ["--plot", str(tmp_path / "ok.png")] if flag == "--csv"
                         else [])
            code, out, err = _run(argv)
            assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (kind, flag, err)


# --------------------------------------------------------------------------------------------------- tradeoff
#: β = 2, q = 1: T Gaussian steps are G_μ, μ = √(T(σ⁻² + σ_c⁻²)), the exact curve every printed bound must lie above
TRADEOFF_BASE = dict(EPSILON_BASE, **{"--fpr": "1e-3,0.1"})
TRADEOFF_FLAGS = EPSILON_FLAGS + ["--fpr"]
#: --fpr lists: a bad member anywhere, empty members, the ends of (0, 1)
FPR_LISTS = st.sampled_from(["1e-3,nan", "0.1,inf", "0,0.5", "0.5,1", "-0.1", ",", "0.1,,0.2", "1e-300,0.999999",
                             "0.5;0.6", "0.1, 0.2", "1e-320"])


def _check_tradeoff_json(out: str, argv: List[str]) -> None:
    """Every printed TPR bound is in [FPR, 1], and where the setting is G_μ's (β = 2, q = 1, p ≤ 2) it is ≥ the
    exact Gaussian TPR Φ(Φ⁻¹(α) + μ) (50-digit mpmath, no code shared with the package)."""
    rec = json.loads(out)
    fpr, tpr = [float(a) for a in rec["fpr"]], [float(t) for t in rec["tpr_upper"]]
    assert len(fpr) == len(tpr) > 0, rec
    for a, t in zip(fpr, tpr):
        assert a <= t <= 1.0, rec
    mu = _closed_form_mu(rec, argv)
    if mu is not None:
        with mpmath.workdps(50):
            for a, t in zip(fpr, tpr):
                exact = float(mpmath.ncdf(-mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * mpmath.mpf(a)) + mu))
                assert t >= exact * (1 - 1e-12), (a, t, exact, mu)


def _fuzz_tradeoff(flag: str, value: str) -> None:
    argv = _argv("tradeoff", TRADEOFF_BASE, flag, value, ["--json"])
    code, out, err = _run(argv)
    _refused_or_ok(code, err, flag)
    if code == 0:
        _check_tradeoff_json(out, argv)


@pytest.mark.parametrize("flag", TRADEOFF_FLAGS)
@settings(FAST, max_examples=3)
@given(value=NUMBER_TEXT)
def test_tradeoff_flags_are_a_checked_bound_or_one_line(flag, value):
    _fuzz_tradeoff(flag, value)


@settings(FAST, max_examples=8)
@given(value=FPR_LISTS)
def test_tradeoff_fpr_lists(value):
    _fuzz_tradeoff("--fpr", value)


@pytest.mark.slow
@pytest.mark.parametrize("flag", TRADEOFF_FLAGS)
@WIDE
@given(value=st.one_of(NUMBER_TEXT, FPR_LISTS))
def test_tradeoff_flags_wide(flag, value):
    _fuzz_tradeoff(flag, value)


def test_tradeoff_noise_below_the_proven_range_is_refused_naming_it():
    for flag in ("--noise-multiplier", "--count-noise-multiplier"):
        code, out, err = _run(_argv("tradeoff", TRADEOFF_BASE, flag, "1e-7"))
        assert code == 2 and out == "", (flag, code, out, err)
        _refused_or_ok(code, err, flag)
        assert "1e-06" in err and "1e+06" in err, err


def test_tradeoff_plot_and_csv_into_unwritable_paths_are_refused_before_any_work(tmp_path, monkeypatch):
    """The paths are checked before the curve is computed: the accountant is never called."""
    from opacus_gg.accountants import tradeoff

    def reached(*args, **kwargs):
        raise _Reached

    monkeypatch.setattr(tradeoff, "compute_tradeoff", reached)
    for kind, path in _unwritable_paths(tmp_path):
        for flag in ("--plot", "--csv"):
            code, out, err = _run(_argv("tradeoff", TRADEOFF_BASE, flag, path))
            assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (kind, flag, err)
            assert flag in err, (kind, flag, err)
    code, out, err = _run(_argv("tradeoff", TRADEOFF_BASE, "--csv", str(tmp_path / "ok.csv")))
    assert code == -1, (code, err)  # a writable path reaches the computation


COMPARE_BASE = {"--noise-multiplier": "1", "--beta": "2", "--sample-rate": "1", "--steps": "4", "--delta": "1e-5"}


@pytest.mark.parametrize("flag", ["--noise-multiplier", "--beta", "--sample-rate", "--steps", "--delta", "--dim",
                                  "--clip-norm-p"])
@settings(FAST, max_examples=2)  # compare runs paper mode's Monte Carlo too: ~2 s a call
@given(value=NUMBER_TEXT)
def test_compare_flags(flag, value):
    code, out, err = _run(_argv("compare", COMPARE_BASE, flag, value, ["--json"]))
    _refused_or_ok(code, err, flag)


COUNTS_BASE = {"--k": "3", "--beta": "2", "--epsilon": "1", "--delta": "1e-5"}


@pytest.mark.parametrize("flag", ["--k", "--beta", "--epsilon", "--delta"])
@FAST
@given(value=NUMBER_TEXT)
def test_counts_flags(flag, value):
    code, out, err = _run(_argv("counts", COUNTS_BASE, flag, value))
    _refused_or_ok(code, err, flag)


# ------------------------------------------------------------------------------------------------------- PATE
@pytest.fixture(scope="module")
def votes_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("votes") / "votes.npy"
    np.save(path, np.array([[8, 1, 1], [2, 7, 1], [3, 3, 4]], dtype=np.float64))
    return path


@pytest.mark.parametrize("flag", ["--beta", "--noise-multiplier", "--target-epsilon", "--target-delta",
                                  "--n-classes", "--seed"])
@settings(FAST, max_examples=4)
@given(value=NUMBER_TEXT)
def test_pate_flags(flag, value, votes_file, tmp_path_factory):
    base = {"--votes": str(votes_file), "--noise-multiplier": "2", "--target-delta": "1e-5",
            "--out": str(tmp_path_factory.mktemp("pate") / "labels.npy"), "--seed": "0"}
    if flag == "--target-epsilon":
        del base["--noise-multiplier"]
    code, out, err = _run(_argv("pate", base, flag, value))
    _refused_or_ok(code, err, flag)


def _broken_npy(tmp: Path) -> List[Path]:
    """Files that are not plain .npy arrays of votes."""
    garbage = tmp / "garbage.npy"
    garbage.write_bytes(b"\x93NUMPY\x01\x00garbage")
    text = tmp / "text.npy"
    text.write_text("1,2,3\n")
    pickled = tmp / "object.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    nan = tmp / "nan.npy"
    np.save(nan, np.array([[np.nan, 1.0], [1.0, 2.0]]))
    neg = tmp / "negative.npy"
    np.save(neg, np.array([[-1.0, 2.0]]))
    strings = tmp / "strings.npy"
    np.save(strings, np.array([["a", "b"]]))
    empty = tmp / "empty.npy"
    np.save(empty, np.zeros((0, 3)))
    return [garbage, text, pickled, nan, neg, strings, empty, tmp / "missing.npy", tmp]


def test_pate_with_broken_npy_files_is_one_line(tmp_path):
    for path in _broken_npy(tmp_path):
        for src in ("--votes", "--predictions"):
            argv = ["pate", src, str(path), "--noise-multiplier", "2", "--target-delta", "1e-5", "--n-classes", "3",
                    "--out", str(tmp_path / "o.npy")]
            code, out, err = _run(argv)
            assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (path, err)


def test_pate_out_into_unwritable_paths_is_one_line(tmp_path, votes_file):
    for kind, path in _unwritable_paths(tmp_path, ".npy"):  # np.save appends .npy to any other name
        code, out, err = _run(["pate", "--votes", str(votes_file), "--noise-multiplier", "2", "--target-delta",
                               "1e-5", "--out", path])
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (kind, err)


# ------------------------------------------------------------------------------------------- heavy commands
@pytest.fixture
def no_work(monkeypatch):
    """Replace the heavy commands' work by :class:`_Reached`: only their argument checks run."""
    from opacus_gg import audit
    from opacus_gg.experiments import study, sweep, train
    from opacus_gg.experiments.figures import outliers, pate_experiments

    def reached(*args, **kwargs):
        raise _Reached

    monkeypatch.setattr(train, "run", reached)
    monkeypatch.setattr(sweep, "run_sweep", reached)
    monkeypatch.setattr(study, "run_study", reached)
    monkeypatch.setattr(pate_experiments, "accuracy_vs_beta", reached)
    monkeypatch.setattr(outliers, "default_panels", reached)
    monkeypatch.setattr(audit, "audit", reached)


TRAIN_FLAGS = ["--beta", "--clip-norm-p", "--target-epsilon", "--delta", "--noise-multiplier", "--max-grad-norm",
               "--epochs", "--batch-size", "--lr", "--seed"]


@pytest.mark.parametrize("command", ["train", "sweep"])
@pytest.mark.parametrize("flag", TRAIN_FLAGS)
@settings(FAST, max_examples=3)
@given(value=NUMBER_TEXT)
def test_train_and_sweep_flags_are_checked_before_any_work(command, flag, value, no_work, tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp("run"))
    code, out, err = _run([command, "--config", "quickstart", "--output-dir", out_dir, flag, value])
    _refused_or_ok(code, err, flag)


@pytest.mark.parametrize("key", ["privacy.noise_multiplier", "privacy.unclipped_num_std", "privacy.beta",
                                 "privacy.max_grad_norm", "train.lr", "train.epochs", "privacy.target_delta"])
@settings(FAST, max_examples=3)
@given(value=NUMBER_TEXT)
def test_train_set_overrides_are_checked_before_any_work(key, value, no_work, tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp("run"))
    code, out, err = _run(["train", "--config", "quickstart", "--output-dir", out_dir, "--set", f"{key}={value}"])
    assert "Traceback" not in err, err
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and key in err, err


@pytest.mark.parametrize("flag", ["--betas", "--target-epsilons", "--seeds"])
@settings(FAST, max_examples=3)
@given(value=NUMBER_TEXT)
def test_sweep_list_flags(flag, value, no_work, tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp("run"))
    code, out, err = _run(["sweep", "--config", "quickstart", "--output-dir", out_dir, flag, value])
    _refused_or_ok(code, err, flag)


@pytest.mark.parametrize("flag", ["--betas", "--target-epsilons", "--seeds", "--c-grid", "--epochs", "--threads",
                                  "--workers"])
@settings(FAST, max_examples=3)
@given(value=NUMBER_TEXT)
def test_study_flags(flag, value, no_work, tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp("study"))
    code, out, err = _run(["study", "--data", "digits", "--output-dir", out_dir, flag, value])
    _refused_or_ok(code, err, flag)


@pytest.mark.parametrize("flag", ["--n-histograms", "--n-classes", "--total-votes", "--betas", "--target-epsilon",
                                  "--target-delta", "--n-queries", "--trials", "--seed"])
@settings(FAST, max_examples=3)
@given(value=NUMBER_TEXT)
def test_pate_experiment_flags(flag, value, no_work, tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp("pe"))
    code, out, err = _run(["pate-experiment", "--n-histograms", "5", "--out-dir", out_dir, flag, value])
    _refused_or_ok(code, err, flag)


@pytest.mark.parametrize("flag", ["--betas", "--thresholds", "--target-epsilon", "--target-delta", "--sample-rate",
                                  "--steps", "--dim"])
@settings(FAST, max_examples=3)
@given(value=NUMBER_TEXT)
def test_outliers_flags(flag, value, no_work, tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp("ol"))
    code, out, err = _run(["outliers", "--out-dir", out_dir, flag, value])
    _refused_or_ok(code, err, flag)


AUDIT_FLAGS = ["--beta", "--clip-norm-p", "--noise-multiplier", "--sample-rate", "--steps", "--delta", "--canaries",
               "--canary-width", "--canary-scale", "--dim", "--seed", "--confidence"]


@pytest.mark.parametrize("flag", AUDIT_FLAGS)
@settings(FAST, max_examples=3)
@given(value=NUMBER_TEXT)
def test_audit_flags_are_checked_before_any_work(flag, value, no_work):
    code, out, err = _run(["audit", flag, value])
    _refused_or_ok(code, err, flag)


@pytest.mark.slow
@pytest.mark.parametrize("flag", AUDIT_FLAGS)
@settings(WIDE, max_examples=30)
@given(value=NUMBER_TEXT)
def test_audit_flags_wide(flag, value, no_work):
    code, out, err = _run(["audit", "--canary-kind", "input", flag, value])
    _refused_or_ok(code, err, flag)


@pytest.mark.parametrize("argv", [["audit", "--noise-multiplier", "1e-7"], ["audit", "--noise-multiplier", "0"],
                                  ["audit", "--noise-multiplier", "2e6"]])
def test_audit_noise_outside_the_proven_range_is_refused_naming_it(argv, no_work):
    code, out, err = _run(argv)
    assert code == 2 and out == "", (code, out, err)
    _refused_or_ok(code, err, "--noise-multiplier")
    assert "1e-06" in err and "1e+06" in err, err


def test_audit_plot_into_unwritable_paths_is_refused_before_any_work(tmp_path, no_work):
    for kind, path in _unwritable_paths(tmp_path):
        code, out, err = _run(["audit", "--plot", path])
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (kind, err)
        assert "--plot" in err, (kind, err)
    assert _run(["audit", "--plot", str(tmp_path / "ok.png")])[0] == -1  # a writable path reaches the audit


def test_broken_yaml_and_unwritable_dirs_of_the_heavy_commands(tmp_path, no_work, votes_file):
    """Broken YAML (each heavy command that reads one) and output directories that cannot be made: one line."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("privacy: {beta: [1.5\n")
    not_mapping = tmp_path / "list.yaml"
    not_mapping.write_text("- 1\n")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    cases = [[c, "--config", str(y)] for c in ("train", "sweep") for y in (broken, not_mapping, binary, tmp_path)]
    cases += [["study", "--data", "digits", "--config", str(broken)]]
    for kind, path in _unwritable_paths(tmp_path):
        if kind == "a directory":  # a valid directory argument
            continue
        cases += [["pate-experiment", "--n-histograms", "5", "--out-dir", path], ["outliers", "--out-dir", path],
                  ["demo-data", "--root", path], ["report", path], ["train", "--config", "quickstart",
                                                                    "--output-dir", path]]
    for argv in cases:
        code, out, err = _run(argv)
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (argv, code, err)


def test_a_subprocess_run_of_the_issues_example_is_one_line_exit_2():
    """The console entry point end to end (python -m opacus_gg), once."""
    argv = [sys.executable, "-m", "opacus_gg", "epsilon", "--noise-multiplier", "1", "--beta", "2", "--sample-rate",
            "0.01", "--steps", "10", "--delta", "1e-5", "--count-noise-multiplier", "1e-155"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1])
    assert res.returncode == 2 and res.stdout == "", res
    assert len(res.stderr.strip().splitlines()) == 1 and "--count-noise-multiplier" in res.stderr, res.stderr
