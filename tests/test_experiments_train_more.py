"""One short epoch of the SVHN (β = 1.5) and IMDB configs on generated data (see test_experiments_train.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_experiments_train import check_one_epoch


@pytest.mark.parametrize("name", ["svhn_scatternet", "imdb_lstm"])
def test_config_trains_one_epoch(name: str, data_root: Path, tmp_path: Path) -> None:
    check_one_epoch(name, data_root, tmp_path)
