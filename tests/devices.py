"""The devices the accelerator-path tests run on: the CPU with the accelerator-only branches forced on
(``_device.accelerator_path``; what CI runs, with no GPU) and CUDA wherever one is present (the same tests on the
real kernels: ``torch.cuda`` tensors, the device's own generator, its own 16-bit arithmetic)."""

from __future__ import annotations

import contextlib
import warnings
from typing import Iterator

import pytest
import torch
from sync_counter import SyncCounter

from opacus_gg import _device

#: "cpu" runs the accelerator branches through the internal switch; "cuda" is skipped where there is no GPU
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="no CUDA device on this machine: the same test runs on CPU with the accelerator branches forced")),
]


@contextlib.contextmanager
def accelerator(device: str) -> Iterator[None]:
    """The accelerator path on ``device``: forced on the CPU, the device's own elsewhere."""
    with _device.accelerator_path(device == "cpu"):
        yield


class HostSyncs:
    """Counts host synchronisations in a block: :class:`SyncCounter` (the ops that synchronise, seen by the
    dispatcher) on every device and, on CUDA, also those the CUDA runtime itself reports
    (``torch.cuda.set_sync_debug_mode("warn")``: one warning per synchronising call, copies included).
    ``count`` is the larger of the two."""

    def __init__(self, device: str):
        self.device = device

    def __enter__(self) -> "HostSyncs":
        self._ops = SyncCounter().__enter__()
        self.runtime = 0
        if self.device == "cuda":
            self._warnings = warnings.catch_warnings(record=True)
            self._seen = self._warnings.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc) -> None:
        if self.device == "cuda":
            torch.cuda.set_sync_debug_mode("default")
            self.runtime = sum("synchronizing CUDA operation" in str(w.message) for w in self._seen)
            self._warnings.__exit__(*exc)
        self._ops.__exit__(*exc)

    @property
    def count(self) -> int:
        return max(self._ops.count, self.runtime)
