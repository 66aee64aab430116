"""Small stand-ins for each data set, written in its real on-disk format (never downloaded).

CIFAR-10 python pickles, SVHN ``.mat`` files, UCI Adult CSVs (``adult.test`` with its junk first line and
trailing '.' labels) and an ``aclImdb`` tree: :func:`write_demo_data` writes them all under one root so
every config runs without the real data (``opacus-gg demo-data --root data``). The class signal is strong, so
one short DP epoch lowers the loss; the numbers say nothing about the real data sets.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Callable, Dict, Iterable

import numpy as np

__all__ = ["write_cifar10", "write_svhn", "write_adult", "write_imdb", "WRITERS", "write_demo_data"]


def _images(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """uint8 N×3×32×32: a class-specific coarse ±pattern plus noise."""
    patterns = np.random.default_rng(7).choice([-1.0, 1.0], size=(10, 3, 4, 4))
    base = np.kron(patterns[labels], np.ones((1, 1, 8, 8)))
    x = 0.5 + 0.3 * base + 0.1 * rng.standard_normal(base.shape)
    return (np.clip(x, 0, 1) * 255).astype(np.uint8)


def write_cifar10(root: Path, n_per_batch: int = 40, seed: int = 0) -> Path:
    """``root/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}`` as python pickles."""
    rng = np.random.default_rng(seed)
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        y = rng.integers(0, 10, n_per_batch)
        entry = {"batch_label": name, "labels": y.tolist(), "data": _images(rng, y).reshape(n_per_batch, -1),
                 "filenames": [f"{i}.png" for i in range(n_per_batch)]}
        with open(d / name, "wb") as f:
            pickle.dump(entry, f)
    with open(d / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [f"class{i}" for i in range(10)], "num_cases_per_batch": n_per_batch}, f)
    return root


def write_svhn(root: Path, n_train: int = 200, n_test: int = 60, seed: int = 1) -> Path:
    """``root/{train,test}_32x32.mat`` with X [32,32,3,N] uint8 and y [N,1] (label 10 for digit 0)."""
    import scipy.io

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("test", n_test)):
        digits = rng.integers(0, 10, n)
        x = _images(rng, digits).transpose(2, 3, 1, 0)  # N×3×32×32 → 32×32×3×N
        y = np.where(digits == 0, 10, digits).reshape(-1, 1).astype(np.uint8)
        scipy.io.savemat(str(root / f"{split}_32x32.mat"), {"X": x, "y": y})
    return root


_WORK = ["Private", "Self-emp-not-inc", "Local-gov", "?"]
_EDU = [("HS-grad", 9), ("Bachelors", 13), ("Masters", 14), ("11th", 7)]


def _adult_line(rng: np.random.Generator, test: bool) -> str:
    age = int(rng.integers(18, 80))
    edu, edu_num = _EDU[int(rng.integers(0, 4))]
    hours = int(rng.integers(10, 70))
    rich = (edu_num >= 13) + (hours > 45) + (age > 40) >= 2
    label = (">50K" if rich else "<=50K") + ("." if test else "")
    fields = [age, _WORK[int(rng.integers(0, 4))], int(rng.integers(20000, 400000)), edu, edu_num,
              "Married-civ-spouse" if rich else "Never-married", "Exec-managerial" if rich else "Sales",
              "Husband", "White", "Male" if rng.random() < 0.6 else "Female", 0, 0, hours, "United-States", label]
    return ", ".join(str(v) for v in fields)


def write_adult(root: Path, n_train: int = 300, n_test: int = 100, seed: int = 2) -> Path:
    """``root/adult/adult.{data,test}`` in the UCI format."""
    rng = np.random.default_rng(seed)
    d = root / "adult"
    d.mkdir(parents=True, exist_ok=True)
    (d / "adult.data").write_text("\n".join(_adult_line(rng, False) for _ in range(n_train)) + "\n\n")
    (d / "adult.test").write_text("|1x3 Cross validator\n" + "\n".join(_adult_line(rng, True) for _ in range(n_test))
                                  + "\n")
    return root


_POS = ["great", "wonderful", "loved", "excellent", "best"]
_NEG = ["awful", "terrible", "boring", "worst", "bad"]
_FILLER = ["the", "movie", "a", "film", "was", "and", "plot", "actors", "it", "of"]


def write_imdb(root: Path, n_per_class: int = 60, seed: int = 3) -> Path:
    """``root/aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt``."""
    rng = np.random.default_rng(seed)
    for split in ("train", "test"):
        for label, words in (("pos", _POS), ("neg", _NEG)):
            d = root / "aclImdb" / split / label
            d.mkdir(parents=True, exist_ok=True)
            for i in range(n_per_class if split == "train" else n_per_class // 2):
                toks = [str(rng.choice(words)) if rng.random() < 0.3 else str(rng.choice(_FILLER)) for _ in range(20)]
                (d / f"{i}_{8 if label == 'pos' else 2}.txt").write_text(" ".join(toks[:10]) + "<br /><br />"
                                                                         + " ".join(toks[10:]).capitalize() + ".")
    return root


#: data set name (as in ``data.name``) → writer
WRITERS: Dict[str, Callable[[Path], Path]] = {"cifar10": write_cifar10, "svhn": write_svhn, "adult": write_adult,
                                              "imdb": write_imdb}


def write_demo_data(root: Path, datasets: Iterable[str] = tuple(WRITERS)) -> Path:
    """Write the stand-in files of ``datasets`` under ``root`` (the layout ``data.root`` expects)."""
    root = Path(root).expanduser()
    names = list(datasets)
    unknown = [n for n in names if n not in WRITERS]
    if unknown:
        raise ValueError(f"datasets must be among {', '.join(WRITERS)}; got {', '.join(unknown)}")
    for name in names:
        WRITERS[name](root)
    return root
