"""Where each file dataset lives under ``data.root``, and the check that its files are there.

Torch-free on purpose: ``opacus-gg train`` runs :func:`require_files` before it imports torch (a missing file is
answered in a second), and the loaders of :mod:`opacus_gg.experiments.data` run the same check, so the layouts are
stated once, here.

- ``cifar10``: ``<root>/cifar-10-batches-py/{data_batch_1..5,test_batch}``;
- ``svhn``: ``<root>/{train,test}_32x32.mat``;
- ``adult``: ``<root>/adult/adult.{data,test}`` or ``<root>/adult.{data,test}``;
- ``imdb``: ``<root>/aclImdb/{train,test}/{pos,neg}/*.txt`` (each folder non-empty).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Sequence

__all__ = ["DatasetNotFoundError", "FILE_DATASETS", "CIFAR_DIR", "CIFAR_TRAIN", "CIFAR_TEST", "SVHN_FILES",
           "adult_dir", "imdb_folder", "require_files"]

CIFAR_DIR = "cifar-10-batches-py"
CIFAR_TRAIN = [f"data_batch_{i}" for i in range(1, 6)]
CIFAR_TEST = ["test_batch"]
SVHN_FILES = ["train_32x32.mat", "test_32x32.mat"]
ADULT_FILES = ["adult.data", "adult.test"]
IMDB_DIR = "aclImdb"

#: datasets read from files under ``data.root`` → what they read there, in words
FILE_DATASETS: Dict[str, str] = {"cifar10": f"{CIFAR_DIR}/", "svhn": " and ".join(SVHN_FILES),
                                 "adult": " and ".join(ADULT_FILES), "imdb": f"the {IMDB_DIR}/ tree"}
_DOWNLOAD_HINT = " (pass --download to fetch it with torchvision)"


class DatasetNotFoundError(FileNotFoundError):
    """A dataset's files are missing or malformed; the message says where they were expected."""


def missing(what: str, expected: Sequence[Path], hint: str = "") -> DatasetNotFoundError:
    """The error naming every expected path of ``what`` that is not there."""
    lst = ", ".join(str(p) for p in expected)
    return DatasetNotFoundError(f"{what} not found: expected {lst}{hint}")


def adult_dir(root: Path) -> Path:
    """The folder holding adult.data and adult.test: ``root/adult`` or ``root`` itself."""
    for base in (root / "adult", root):
        if all((base / n).is_file() for n in ADULT_FILES):
            return base
    raise missing("Adult", [root / "adult" / n for n in ADULT_FILES],
                  f" (or the same files directly in {root}; get them from https://archive.ics.uci.edu/dataset/2/adult)")


def imdb_folder(root: Path, split: str, sub: str) -> Path:
    """``root/aclImdb/<split>/<sub>``, which must hold at least one ``*.txt`` review."""
    d = root / IMDB_DIR / split / sub
    if not (d.is_dir() and any(d.glob("*.txt"))):
        raise missing("IMDB", [d / "*.txt"], f" (the {IMDB_DIR} layout: {IMDB_DIR}/{{train,test}}/{{pos,neg}}/*.txt; "
                      "get it from https://ai.stanford.edu/~amaas/data/sentiment/)")
    return d


def require_files(name: str, root: Path) -> None:
    """Raise :class:`DatasetNotFoundError` unless every file dataset ``name`` reads is under ``root`` (other names:
    nothing to check)."""
    if name == "cifar10":
        files = [root / CIFAR_DIR / n for n in CIFAR_TRAIN + CIFAR_TEST]
        absent = [p for p in files if not p.is_file()]
        if absent:
            raise missing("CIFAR-10", absent, _DOWNLOAD_HINT)
    elif name == "svhn":
        absent = [root / n for n in SVHN_FILES if not (root / n).is_file()]
        if absent:
            raise missing("SVHN", absent, _DOWNLOAD_HINT)
    elif name == "adult":
        adult_dir(root)
    elif name == "imdb":
        for split in ("train", "test"):
            for sub in ("pos", "neg"):
                imdb_folder(root, split, sub)
