"""Data loaders read the real on-disk formats (generated here) and fail clearly on missing/malformed files."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest
import torch

from opacus_gg.experiments.config import DEFAULTS
from opacus_gg.experiments.data import DatasetNotFoundError, load_dataset, tokenize


def _cfg(name: str, root: Path, **kw) -> dict:
    d = copy.deepcopy(DEFAULTS["data"])
    d.update(name=name, root=str(root), **kw)
    return d


def test_cifar10_pickles(data_root: Path) -> None:
    b = load_dataset(_cfg("cifar10", data_root))
    x, y = b.train.tensors
    assert x.shape == (200, 3, 32, 32) and b.test.tensors[0].shape == (40, 3, 32, 32)
    assert x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1
    with open(data_root / "cifar-10-batches-py" / "data_batch_1", "rb") as f:
        raw = pickle.load(f)
    assert y[:40].tolist() == raw["labels"]  # batches concatenated in order
    assert torch.equal((x[0] * 255).round().to(torch.uint8).flatten(), torch.as_tensor(raw["data"][0]))
    assert b.num_classes == 10


def test_svhn_mat_label_10_is_digit_0(data_root: Path) -> None:
    import scipy.io

    b = load_dataset(_cfg("svhn", data_root))
    mat = scipy.io.loadmat(str(data_root / "train_32x32.mat"))
    y_raw = mat["y"].reshape(-1)
    assert (y_raw == 10).any()
    assert b.train.tensors[1].tolist() == [0 if v == 10 else int(v) for v in y_raw]
    x = b.train.tensors[0]
    assert x.shape == (200, 3, 32, 32)
    assert torch.allclose(x[3, 1] * 255, torch.as_tensor(mat["X"][:, :, 1, 3], dtype=torch.float32))


def test_adult_csvs(data_root: Path) -> None:
    b = load_dataset(_cfg("adult", data_root))
    xtr, ytr = b.train.tensors
    xte, yte = b.test.tensors
    assert len(xtr) == 300 and len(xte) == 100  # blank line and "|1x3 Cross validator" skipped
    assert set(yte.tolist()) == {0, 1}  # "<=50K." / ">50K." parsed
    num = xtr[:, :6]  # standardized numericals
    # float32 standardization: mean 0 up to float32 round-off
    assert torch.allclose(num.mean(0), torch.zeros(6), atol=1e-5)
    nonconst = num.std(0) > 0
    # float32 standardization: std 1 up to float32 round-off
    assert torch.allclose(num.std(0, unbiased=False)[nonconst], torch.ones(int(nonconst.sum())), atol=1e-4)
    onehot = xtr[:, 6:]
    assert set(onehot.unique().tolist()) == {0.0, 1.0}
    assert torch.all(onehot.sum(1) == 8)  # one hot per categorical column (8 columns)


def test_imdb_tree(data_root: Path) -> None:
    b = load_dataset(_cfg("imdb", data_root, vocab_size=8, max_len=16))
    x, y = b.train.tensors
    assert x.shape == (120, 16) and y.sum() == 60
    assert x.max() < 8  # ids of the 6 most frequent tokens (2..7), 1 = unknown, 0 = padding
    assert (x == 1).any()
    assert tokenize("Great<br /><br />MOVIE, it's fine.") == ["great", "movie", "it's", "fine"]


def test_imdb_left_pads_short_reviews(tmp_path: Path) -> None:
    for split in ("train", "test"):
        for lab in ("pos", "neg"):
            d = tmp_path / "aclImdb" / split / lab
            d.mkdir(parents=True)
            (d / "0_1.txt").write_text("good film" if lab == "pos" else "bad")
    b = load_dataset(_cfg("imdb", tmp_path, max_len=5))
    x = b.train.tensors[0]
    assert x[0, :3].tolist() == [0, 0, 0] and (x[0, 3:] > 1).all()


@pytest.mark.parametrize("name,expected", [
    ("cifar10", "cifar-10-batches-py/data_batch_1"), ("svhn", "train_32x32.mat"),
    ("adult", "adult/adult.data"), ("imdb", "aclImdb/train/pos"),
])
def test_missing_dataset_says_where(tmp_path: Path, name: str, expected: str) -> None:
    with pytest.raises(DatasetNotFoundError) as e:
        load_dataset(_cfg(name, tmp_path / "nowhere"))
    assert str(tmp_path / "nowhere" / expected) in str(e.value)
    assert isinstance(e.value, FileNotFoundError)


def test_malformed_files_name_the_file(data_root: Path, tmp_path: Path) -> None:
    import shutil

    bad = tmp_path / "cifar"
    shutil.copytree(data_root / "cifar-10-batches-py", bad / "cifar-10-batches-py")
    (bad / "cifar-10-batches-py" / "test_batch").write_bytes(b"not a pickle")
    with pytest.raises(DatasetNotFoundError, match="malformed CIFAR-10 file .*test_batch"):
        load_dataset(_cfg("cifar10", bad))

    (tmp_path / "svhn").mkdir()
    for split in ("train", "test"):
        (tmp_path / "svhn" / f"{split}_32x32.mat").write_bytes(b"junk")
    with pytest.raises(DatasetNotFoundError, match="malformed SVHN file .*train_32x32.mat"):
        load_dataset(_cfg("svhn", tmp_path / "svhn"))

    a = tmp_path / "adult"
    a.mkdir()
    (a / "adult.data").write_text("39, State-gov, 77516\n")
    (a / "adult.test").write_text("")
    with pytest.raises(DatasetNotFoundError, match="adult.data, line 1: expected 15"):
        load_dataset(_cfg("adult", tmp_path))


def test_limit_and_synthetic_are_deterministic() -> None:
    d = _cfg("synthetic", Path("."), n_train=50, n_test=20, limit_train=30)
    a, b = load_dataset(d), load_dataset(d)
    assert len(a.train) == 30 and len(a.test) == 20
    assert torch.equal(a.train.tensors[0], b.train.tensors[0])
