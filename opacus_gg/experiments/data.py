"""Datasets from local files in their original on-disk formats (never downloaded unless asked).

- ``digits``: scikit-learn's bundled 8×8 handwritten digits (1797 images, 10 classes; shipped inside the
  scikit-learn package, no download): pixels scaled to [0, 1], a fixed 80/20 train/test split (the quickstart).
- ``breast_cancer``: scikit-learn's bundled Wisconsin breast-cancer table (569 rows, 30 numeric features,
  2 classes; no download), a small tabular stand-in for Adult: a fixed 80/20 split, features standardized with
  the training split's mean and std.
- ``synthetic``: a Gaussian-mixture classification task generated in code.
- ``cifar10``: ``<root>/cifar-10-batches-py/{data_batch_1..5,test_batch}`` (python pickles).
- ``svhn``: ``<root>/{train,test}_32x32.mat`` (keys ``X`` [32,32,3,N], ``y`` [N,1], label 10 = digit 0).
- ``adult``: ``<root>/adult/adult.{data,test}`` or ``<root>/adult.{data,test}`` (UCI CSVs);
  categoricals one-hot (categories of the training split, ``?`` is its own category),
  numericals standardized with the training split's mean and std.
- ``imdb``: ``<root>/aclImdb/{train,test}/{pos,neg}/*.txt``; lowercase word tokenizer, vocabulary of the
  ``vocab_size − 2`` most frequent training tokens (0 = padding, 1 = unknown), first ``max_len`` tokens,
  left-padded.

Note: preprocessing statistics (Adult's mean/std and categories, IMDB's vocabulary) come from the
training data and, as in the paper and in Opacus's examples, are not charged to the privacy budget.
"""

from __future__ import annotations

import collections
import csv
import math
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch.utils.data import TensorDataset

from .data_files import (CIFAR_DIR, CIFAR_TEST, CIFAR_TRAIN, IMDB_DIR, SVHN_FILES, DatasetNotFoundError, adult_dir,
                         imdb_folder, require_files)

__all__ = ["DataBundle", "DatasetNotFoundError", "load_dataset", "ADULT_COLUMNS", "tokenize"]


@dataclass
class DataBundle:
    """Train/test tensors plus what the model needs to know (classes, input shape, vocabulary)."""

    train: TensorDataset
    test: TensorDataset
    num_classes: int
    input_shape: Tuple[int, ...]
    info: Dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------------- synthetic
def make_synthetic(n_train: int, n_test: int, n_features: int, n_classes: int, class_sep: float,
                   seed: int = 1234) -> DataBundle:
    """Gaussian mixture: x = m_y + N(0, I_d), class means m_k ~ class_sep · N(0, I_d)/√d, y uniform."""
    g = torch.Generator().manual_seed(seed)
    means = class_sep * torch.randn(n_classes, n_features, generator=g) / math.sqrt(n_features) * math.sqrt(2)

    def draw(n: int) -> TensorDataset:
        y = torch.randint(0, n_classes, (n,), generator=g)
        x = means[y] + torch.randn(n, n_features, generator=g)
        return TensorDataset(x, y)

    return DataBundle(draw(n_train), draw(n_test), n_classes, (n_features,), {"source": "synthetic"})


# ------------------------------------------------------------------------------------ digits
def _sklearn(name: str) -> Any:
    """``sklearn.datasets.<name>``; a missing scikit-learn is one ValueError naming the extra."""
    try:
        import sklearn.datasets
    except ModuleNotFoundError:
        raise ValueError(f"data.name={name.replace('load_', '')} needs scikit-learn: "
                         "pip install 'opacus-gg[experiments]'") from None
    return getattr(sklearn.datasets, name)()


def _split(n: int, test_fraction: float, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(train, test) indices of a fixed random split of range(n)."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_test = int(round(test_fraction * n))
    return perm[n_test:], perm[:n_test]


def load_digits(test_fraction: float = 0.2, seed: int = 0) -> DataBundle:
    """scikit-learn's bundled 8×8 digits: x = pixels / 16 ∈ [0, 1]^64, a fixed random 80/20 split."""
    d = _sklearn("load_digits")
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target, dtype=torch.long)
    train, test = _split(len(y), test_fraction, seed)
    return DataBundle(TensorDataset(x[train], y[train]), TensorDataset(x[test], y[test]), 10, (64,),
                      {"source": "sklearn.datasets.load_digits"})


def load_breast_cancer(test_fraction: float = 0.2, seed: int = 0) -> DataBundle:
    """scikit-learn's bundled breast-cancer table: 30 features standardized with the training split's mean and
    std (not charged to the budget, as Adult's), a fixed random 80/20 split, 2 classes."""
    d = _sklearn("load_breast_cancer")
    x = torch.tensor(d.data, dtype=torch.float32)
    y = torch.tensor(d.target, dtype=torch.long)
    train, test = _split(len(y), test_fraction, seed)
    mean, std = x[train].mean(0), x[train].std(0).clamp_min(1e-12)
    x = (x - mean) / std
    return DataBundle(TensorDataset(x[train], y[train]), TensorDataset(x[test], y[test]), 2, (x.shape[1],),
                      {"source": "sklearn.datasets.load_breast_cancer"})


def _download(fetch, what: str, root: Path) -> None:
    """Run a torchvision download; a network failure becomes one actionable ValueError."""
    import urllib.error

    try:
        fetch()
    except (urllib.error.URLError, OSError, RuntimeError) as e:
        raise ValueError(f"--download: could not download {what} into {root} ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else 'no detail'}); check the network, or put the "
                         f"files there yourself (opacus-gg demo-data writes small stand-ins)") from None


# ------------------------------------------------------------------------------------ CIFAR-10
def _load_cifar_file(path: Path) -> Tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as f:
            entry = pickle.load(f, encoding="latin1")
        data = np.asarray(entry["data"], dtype=np.uint8)
        labels = np.asarray(entry["labels"] if "labels" in entry else entry["fine_labels"], dtype=np.int64)
        data = data.reshape(-1, 3, 32, 32)
    except Exception as e:  # noqa: BLE001 - any failure here means a malformed file
        raise DatasetNotFoundError(
            f"malformed CIFAR-10 file {path}: expected a python pickle with 'data' (N×3072 uint8) and "
            f"'labels' ({type(e).__name__}: {e})") from None
    if len(labels) != len(data):
        raise DatasetNotFoundError(f"malformed CIFAR-10 file {path}: {len(data)} images but {len(labels)} labels")
    return data, labels


def load_cifar10(root: Path, download: bool = False) -> DataBundle:
    """CIFAR-10 from the python pickles; images as float32 in [0, 1], shape N×3×32×32."""
    base = root / CIFAR_DIR
    if download:
        import torchvision

        for train in (True, False):
            _download(lambda: torchvision.datasets.CIFAR10(str(root), train=train, download=True), "CIFAR-10", root)
    require_files("cifar10", root)

    def load(names: List[str]) -> TensorDataset:
        parts = [_load_cifar_file(base / n) for n in names]
        x = torch.from_numpy(np.concatenate([p[0] for p in parts])).float().div_(255.0)
        y = torch.from_numpy(np.concatenate([p[1] for p in parts]))
        return TensorDataset(x, y)

    return DataBundle(load(CIFAR_TRAIN), load(CIFAR_TEST), 10, (3, 32, 32), {"source": str(base)})


# ---------------------------------------------------------------------------------------- SVHN
def _load_svhn_file(path: Path) -> TensorDataset:
    import scipy.io

    try:
        mat = scipy.io.loadmat(str(path))
        x = np.asarray(mat["X"], dtype=np.uint8)
        y = np.asarray(mat["y"], dtype=np.int64).reshape(-1)
        if x.ndim != 4 or x.shape[:3] != (32, 32, 3) or x.shape[3] != len(y):
            raise ValueError(f"X has shape {x.shape}, y has {len(y)} labels")
    except Exception as e:  # noqa: BLE001
        raise DatasetNotFoundError(
            f"malformed SVHN file {path}: expected a .mat with X [32,32,3,N] uint8 and y [N,1] "
            f"({type(e).__name__}: {e})") from None
    y = np.where(y == 10, 0, y)
    if y.min() < 0 or y.max() > 9:
        raise DatasetNotFoundError(f"malformed SVHN file {path}: labels must be in 1..10")
    xt = torch.from_numpy(np.ascontiguousarray(x.transpose(3, 2, 0, 1))).float().div_(255.0)
    return TensorDataset(xt, torch.from_numpy(y))


def load_svhn(root: Path, download: bool = False) -> DataBundle:
    """SVHN cropped digits (train/test .mat files); images float32 in [0, 1], N×3×32×32, label 10 → 0."""
    if download:
        import torchvision

        for split in ("train", "test"):
            _download(lambda: torchvision.datasets.SVHN(str(root), split=split, download=True), "SVHN", root)
    require_files("svhn", root)
    files = [root / n for n in SVHN_FILES]
    return DataBundle(_load_svhn_file(files[0]), _load_svhn_file(files[1]), 10, (3, 32, 32),
                      {"source": str(root)})


# --------------------------------------------------------------------------------------- Adult
ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
                 "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
                 "hours-per-week", "native-country", "income"]
ADULT_NUMERIC = [0, 2, 4, 10, 11, 12]
ADULT_CATEGORICAL = [1, 3, 5, 6, 7, 8, 9, 13]


def _read_adult(path: Path) -> Tuple[List[List[str]], np.ndarray]:
    rows, labels = [], []
    with open(path, newline="", encoding="utf-8") as f:
        for lineno, rec in enumerate(csv.reader(f, skipinitialspace=True), 1):
            if not rec or (len(rec) == 1 and (not rec[0].strip() or rec[0].startswith("|"))):
                continue  # blank lines and adult.test's "|1x3 Cross validator" header
            if len(rec) != 15:
                raise DatasetNotFoundError(
                    f"malformed Adult file {path}, line {lineno}: expected 15 comma-separated fields, got {len(rec)}")
            label = rec[14].strip().rstrip(".")
            if label not in (">50K", "<=50K"):
                raise DatasetNotFoundError(f"malformed Adult file {path}, line {lineno}: label {rec[14]!r}")
            try:
                [float(rec[i]) for i in ADULT_NUMERIC]
            except ValueError:
                raise DatasetNotFoundError(f"malformed Adult file {path}, line {lineno}: non-numeric value") from None
            rows.append([v.strip() for v in rec[:14]])
            labels.append(1 if label == ">50K" else 0)
    if not rows:
        raise DatasetNotFoundError(f"malformed Adult file {path}: no records")
    return rows, np.asarray(labels, dtype=np.int64)


def load_adult(root: Path) -> DataBundle:
    """UCI Adult: one-hot categoricals (train categories), numericals standardized (train mean/std)."""
    base = adult_dir(root)
    train_rows, ytr = _read_adult(base / "adult.data")
    test_rows, yte = _read_adult(base / "adult.test")
    cats = {i: sorted({r[i] for r in train_rows}) for i in ADULT_CATEGORICAL}
    num_tr = np.array([[float(r[i]) for i in ADULT_NUMERIC] for r in train_rows])
    mean, std = num_tr.mean(0), num_tr.std(0)
    std[std == 0] = 1.0

    def encode(rows: List[List[str]]) -> torch.Tensor:
        num = (np.array([[float(r[i]) for i in ADULT_NUMERIC] for r in rows]) - mean) / std
        blocks = [num]
        for i in ADULT_CATEGORICAL:
            index = {c: j for j, c in enumerate(cats[i])}
            onehot = np.zeros((len(rows), len(cats[i])))
            for k, r in enumerate(rows):
                j = index.get(r[i])
                if j is not None:  # a category unseen in training stays all-zero
                    onehot[k, j] = 1.0
            blocks.append(onehot)
        return torch.from_numpy(np.concatenate(blocks, axis=1)).float()

    xtr, xte = encode(train_rows), encode(test_rows)
    return DataBundle(TensorDataset(xtr, torch.from_numpy(ytr)), TensorDataset(xte, torch.from_numpy(yte)), 2,
                      (xtr.shape[1],), {"source": str(base), "n_features": int(xtr.shape[1])})


# ---------------------------------------------------------------------------------------- IMDB
_TOKEN = re.compile(r"[a-z0-9']+")


def tokenize(text: str) -> List[str]:
    """Lowercase word tokens (``[a-z0-9']+``), HTML line breaks removed."""
    return _TOKEN.findall(text.lower().replace("<br />", " "))


def _read_imdb_split(root: Path, split: str) -> Tuple[List[List[str]], List[int]]:
    docs, labels = [], []
    for label, sub in ((1, "pos"), (0, "neg")):
        for p in sorted(imdb_folder(root, split, sub).glob("*.txt")):
            docs.append(tokenize(p.read_text(encoding="utf-8", errors="replace")))
            labels.append(label)
    return docs, labels


def load_imdb(root: Path, vocab_size: int, max_len: int) -> DataBundle:
    """IMDB reviews → token ids (vocabulary from the training split), fixed length ``max_len``."""
    train_docs, ytr = _read_imdb_split(root, "train")
    test_docs, yte = _read_imdb_split(root, "test")
    counts = collections.Counter(t for d in train_docs for t in d)
    vocab = {w: i + 2 for i, (w, _) in enumerate(counts.most_common(max(vocab_size - 2, 0)))}

    def encode(docs: List[List[str]]) -> torch.Tensor:
        out = torch.zeros(len(docs), max_len, dtype=torch.long)
        for k, d in enumerate(docs):
            ids = [vocab.get(t, 1) for t in d[:max_len]]
            if ids:
                out[k, max_len - len(ids):] = torch.tensor(ids)
        return out

    return DataBundle(TensorDataset(encode(train_docs), torch.tensor(ytr)),
                      TensorDataset(encode(test_docs), torch.tensor(yte)), 2, (max_len,),
                      {"source": str(root / IMDB_DIR), "vocab_size": vocab_size, "vocab_used": len(vocab) + 2})


# ------------------------------------------------------------------------------------ dispatch
def _limit(ds: TensorDataset, n: Optional[int]) -> TensorDataset:
    return ds if n is None else TensorDataset(*(t[:n] for t in ds.tensors))


def load_dataset(data_cfg: Dict[str, Any]) -> DataBundle:
    """Load the dataset named by ``data_cfg["name"]`` from ``data_cfg["root"]`` (see module doc)."""
    name, root = data_cfg["name"], Path(data_cfg.get("root") or ".").expanduser()
    download = bool(data_cfg.get("download", False))
    if name == "digits":
        b = load_digits()
    elif name == "breast_cancer":
        b = load_breast_cancer()
    elif name == "synthetic":
        b = make_synthetic(data_cfg["n_train"], data_cfg["n_test"], data_cfg["n_features"],
                           data_cfg["n_classes"], data_cfg["class_sep"])
    elif name == "cifar10":
        b = load_cifar10(root, download)
    elif name == "svhn":
        b = load_svhn(root, download)
    elif name == "adult":
        b = load_adult(root)
    elif name == "imdb":
        b = load_imdb(root, data_cfg["vocab_size"], data_cfg["max_len"])
    else:
        raise ValueError(f"data.name must be one of digits, breast_cancer, synthetic, cifar10, svhn, adult, imdb; "
                         f"got {name!r}")
    b.train = _limit(b.train, data_cfg.get("limit_train"))
    b.test = _limit(b.test, data_cfg.get("limit_test"))
    return b
