"""Every bad input the CLI can get → one line on stderr naming the file/key/flag, exit code 2, no traceback."""

from __future__ import annotations

import urllib.error
from pathlib import Path

import pytest

from opacus_gg.experiments.config import load_config


def _one_line_error(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in err, (f, err)


def test_tab_indented_yaml_names_the_file_and_the_tab(tmp_path: Path, cli) -> None:
    bad = tmp_path / "tabs.yaml"
    bad.write_text("name: x\nprivacy:\n\tbeta: 1.5\n")
    _one_line_error(*cli(["train", "--config", str(bad)]), str(bad), "line 3", "tab")


def test_malformed_yaml_names_the_file(tmp_path: Path, cli) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("privacy: {beta: 1.5\ntrain:\n  epochs: 2\n")
    _one_line_error(*cli(["train", "--config", str(bad)]), str(bad), "not valid YAML")


def test_yaml_that_is_not_a_mapping(tmp_path: Path, cli) -> None:
    bad = tmp_path / "list.yaml"
    bad.write_text("- 1\n- 2\n")
    _one_line_error(*cli(["train", "--config", str(bad)]), str(bad), "mapping")


def test_missing_config_lists_the_bundled_names(cli) -> None:
    _one_line_error(*cli(["train", "--config", "no_such_config"]), "--config", "quickstart")


def test_bad_set_value_names_the_override(cli) -> None:
    _one_line_error(*cli(["train", "--config", "quickstart", "--set", "train.lr=[1,"]), "--set train.lr=[1,")


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "tpu"])
def test_unknown_device(device: str, tmp_path: Path, cli) -> None:
    _one_line_error(*cli(["train", "--config", "quickstart", "--device", device, "--output-dir", str(tmp_path)]),
                    "device", repr(device), "--device")


def test_cuda_without_a_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cli) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _one_line_error(*cli(["train", "--config", "quickstart", "--device", "cuda", "--output-dir", str(tmp_path)]),
                    "'cuda'", "no CUDA GPU", "--device cpu")


def test_download_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cli) -> None:
    import torchvision

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", offline)
    _one_line_error(*cli(["train", "--config", "cifar10_scatternet", "--download", "--data-root", str(tmp_path),
                          "--output-dir", str(tmp_path / "out")]), "--download", "CIFAR-10", str(tmp_path))


def test_missing_data_says_where_and_how(tmp_path: Path, cli) -> None:
    _one_line_error(*cli(["train", "--config", "adult_fcn", "--data-root", str(tmp_path),
                          "--output-dir", str(tmp_path / "out")]), "adult.data")


def test_bad_list_flags_of_sweep(cli) -> None:
    _one_line_error(*cli(["sweep", "--config", "quickstart", "--betas", "1,x"]), "--betas")


@pytest.mark.parametrize("argv", [
    ["train", "--epochs", "0"], ["train", "--lr", "-1"], ["train", "--delta", "2"], ["train", "--beta", "inf"],
    ["demo-data", "--datasets", "mnist"], ["nonsense"], ["epsilon", "--help-me"],
])
def test_argparse_level_errors(argv: list, cli) -> None:
    code, out, err = cli(argv)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


EPSILON_ARGS = ["--beta", "2", "--sample-rate", "0.01", "--steps", "10", "--delta", "1e-5"]


@pytest.mark.parametrize("argv, said", [
    (["epsilon", "--noise-multiplir", "1", *EPSILON_ARGS], "unrecognized argument --noise-multiplir (did you mean "
                                                           "--noise-multiplier?)"),
    (["epsilon", "--noise-multiplier", "1", *EPSILON_ARGS, "--jsn"], "opacus-gg epsilon: error: unrecognized "
                                                                      "argument --jsn (did you mean --json?)"),
    (["epsilon", "--noise-multiplier=1", *EPSILON_ARGS, "--zzz=3"], "unrecognized argument --zzz\n"),
])
def test_a_misspelt_flag_is_named_before_the_required_flag_it_seems_to_lack(argv: list, said: str, cli) -> None:
    code, out, err = cli(argv)
    _one_line_error(code, out, err, said)
    assert "required" not in err


def test_abbreviated_flags_are_not_called_misspelt(cli) -> None:
    code, out, err = cli(["epsilon", "--noise", "1", "--beta", "2", "--sample-rate", "0.01", "--steps", "10"])
    _one_line_error(code, out, err, "the following arguments are required: --delta")


def test_integer_flags_say_the_value_must_be_an_integer(cli) -> None:
    code, out, err = cli(["epsilon", "--noise-multiplier", "1", *EPSILON_ARGS[:4], "--steps", "1.5",
                          "--delta", "1e-5"])
    _one_line_error(code, out, err, "argument --steps: the value must be an integer ≥ 1, got '1.5'")


def test_a_failed_train_leaves_no_empty_run_directory(tmp_path: Path, cli) -> None:
    out = tmp_path / "runs" / "out"
    _one_line_error(*cli(["train", "--config", "adult_fcn", "--data-root", str(tmp_path / "nodata"),
                          "--output-dir", str(out)]), "adult.data")
    assert not out.exists() and not (tmp_path / "runs").exists()


def test_configs_load_by_name_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # examples/quickstart.py and old commands use "configs/<name>.yaml": outside the repository it is the
    # bundled config; a real file of that path still wins
    monkeypatch.chdir(tmp_path)
    assert load_config("configs/quickstart.yaml")["name"] == "quickstart"
    assert load_config("adult_fcn")["name"] == "adult_fcn"
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "quickstart.yaml").write_text("name: mine\n")
    assert load_config("configs/quickstart.yaml")["name"] == "mine"


def test_every_option_has_help_and_every_command_a_description() -> None:
    from opacus_gg.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert len(sub.choices) >= 12
    missing = [name for name in sub.choices if name not in parser.description]  # the top-level --help names all
    assert not missing, missing
    for name, p in sub.choices.items():
        assert p.description, name
        for action in p._actions:
            assert action.help, (name, action.dest)


def test_version(cli) -> None:
    code, out, _ = cli(["--version"])
    assert code == 0 and out.startswith("opacus-gg ")


def test_help_and_argument_errors_do_not_import_torch() -> None:
    # the CLI's start-up stays well under a second (benchmarks/cli_startup.py) because parsing loads neither
    # torch nor opacus; checked in a fresh interpreter
    import subprocess
    import sys

    code = ("import sys\nfrom opacus_gg.cli import main\n"
            "try:\n    main(['epsilon', '--beta', '1.5', '--noise-multiplier', '1', '--sample-rate', '0.1',"
            " '--steps', '3', '--delta', '1e-5'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'opacus', 'scipy') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=str(Path(__file__).resolve().parents[1]))
    assert r.stdout.strip() == "[]", r.stdout + r.stderr
    assert "--dim is required" in r.stderr


def test_demo_data_command_writes_loadable_files(tmp_path: Path, cli) -> None:
    from opacus_gg.experiments.data import load_dataset

    code, out, err = cli(["demo-data", "--root", str(tmp_path), "--datasets", "adult", "svhn"])
    assert code == 0, err
    assert (tmp_path / "adult" / "adult.data").is_file() and (tmp_path / "train_32x32.mat").is_file()
    assert not (tmp_path / "cifar-10-batches-py").exists()  # only what was asked for
    cfg = load_config("adult_fcn")["data"]
    bundle = load_dataset({**cfg, "root": str(tmp_path)})
    assert bundle.num_classes == 2 and len(bundle.train) == 300 and len(bundle.test) == 100
    assert "--data-root" in out


def test_library_warnings_are_one_line_once_and_notices_dropped(capsys: pytest.CaptureFixture) -> None:
    from opacus_gg.cli import _one_line_warnings

    show = _one_line_warnings()
    for _ in range(24):  # e.g. the same dimension warning from every σ tried in `compare --beta 3`
        show(UserWarning("beta=3.0 > 2 with clip_norm_p=3.0: epsilon grows with dim\nsecond line"), UserWarning,
             "x.py", 1)
    show(UserWarning("Secure RNG turned off. This is perfectly fine for experimentation"), UserWarning, "x.py", 2)
    show(UserWarning("Full backward hook is firing when gradients are computed"), UserWarning, "x.py", 3)
    err = capsys.readouterr().err
    assert err == "opacus-gg: warning: beta=3.0 > 2 with clip_norm_p=3.0: epsilon grows with dim\n"


@pytest.mark.parametrize("argv, fragment", [
    (["train", "--config", "nosuch"], "no bundled config"),
    (["train", "--config", "quickstart", "--resume", "/nonexistent/ckpt.pt"], "--resume: no checkpoint"),
    (["train", "--config", "adult_fcn", "--data-root", "/nonexistent/data"], "adult.data"),
    (["sweep", "--config", "adult_fcn", "--data-root", "/nonexistent/data"], "--data-root: no directory"),
])
def test_train_answers_a_bad_config_or_path_before_importing_torch(argv, fragment) -> None:
    """The one-line error comes before torch (seconds of imports) is loaded: a fresh interpreter that runs the
    command has no torch in sys.modules afterwards."""
    import subprocess
    import sys

    code = ("import sys; from opacus_gg.cli import main; rc = main(%r); "
            "print(rc, 'torch' in sys.modules, 'opacus' in sys.modules)" % (argv,))
    root = str(Path(__file__).resolve().parents[1])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root)
    assert r.stdout.split() == ["2", "False", "False"], (r.stdout, r.stderr)
    assert fragment in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.parametrize("config, fragment", [
    ("cifar10_scatternet", "cifar-10-batches-py/data_batch_1"), ("svhn_scatternet", "train_32x32.mat"),
    ("adult_fcn", "adult/adult.data"), ("imdb_lstm", "aclImdb/train/pos/*.txt"),
])
def test_train_answers_a_data_root_without_the_files_before_importing_torch(config, fragment, tmp_path) -> None:
    """A data root that exists but lacks the dataset's files is answered before torch too, naming the first missing
    file (the layouts of :mod:`opacus_gg.experiments.data_files`, which the loaders check as well)."""
    test_train_answers_a_bad_config_or_path_before_importing_torch(
        ["train", "--config", config, "--data-root", str(tmp_path), "--output-dir", str(tmp_path / "out")],
        str(tmp_path / fragment))
