"""Shared fixtures: tiny, learnable datasets written in the real on-disk formats (never downloaded), by the
package's own demo-data writers (:mod:`opacus_gg.experiments.demo_data`, also ``opacus-gg demo-data``)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Tuple

import pytest

from opacus_gg.experiments.demo_data import write_adult, write_cifar10, write_demo_data, write_imdb, write_svhn

__all__ = ["write_adult", "write_cifar10", "write_imdb", "write_svhn"]

#: test files of the full command only (marked ``full``, deselected by the README's quick tier ``-m "not slow and
#: not full"``): they train models end to end, spawn processes (DDP, the CLI in a subprocess, the example script)
#: or run Opacus's own engine suite. Each still runs in the full command (``.ci/run``); the accountant's soundness
#: properties, the engine, clipping, noise and the CLI's answers keep their tests in the quick tier.
FULL_ONLY_FILES = frozenset({
    "test_opacus_suite.py", "test_ddp.py", "test_example_dp_sgd.py", "test_readme_snippets.py",
    "test_experiments_run.py", "test_experiments_sweep.py", "test_experiments_train.py",
    "test_experiments_train_more.py", "test_study.py", "test_cli_outputs.py", "test_pate_experiments.py",
    "test_accountant_tight.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """Mark the tests of :data:`FULL_ONLY_FILES` ``full``."""
    for item in items:
        if item.path.name in FULL_ONLY_FILES:
            item.add_marker(pytest.mark.full)


@pytest.fixture(scope="session", autouse=True)
def _ball_table_cache(tmp_path_factory: pytest.TempPathFactory):
    """Ball tables the tests build go to a fresh directory (subprocesses inherit it), never the user's disk cache
    (:mod:`opacus_gg.accountants.table_cache`)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPACUS_GG_CACHE", str(tmp_path_factory.mktemp("opacus_gg_cache")))
        yield


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory with all four generated datasets (CIFAR-10, SVHN, Adult, IMDB)."""
    return write_demo_data(tmp_path_factory.mktemp("data"))


@pytest.fixture
def cli(capsys: pytest.CaptureFixture) -> Callable[[List[str]], Tuple[int, str, str]]:
    """Run ``opacus-gg argv`` in-process → (exit code, stdout, stderr); argparse's SystemExit is its exit code."""
    from opacus_gg.cli import main

    def run(argv: List[str]) -> Tuple[int, str, str]:
        try:
            code = main(argv)
        except SystemExit as e:
            code = int(e.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
