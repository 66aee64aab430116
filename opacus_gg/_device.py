"""Private device helpers: the one internal switch that runs accelerator-only branches on CPU (so the tests
cover them without a GPU), and a one-thread scope for CPU loops of many small torch ops."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run the block's CPU ops on one intra-op thread, then restore ``torch.get_num_threads()``.

    A Python loop of small ops (the Ziggurat's chunks, the chunked |x|^p pass) opens one OpenMP
    parallel region per op; on a loaded machine each region waits at its barrier for a descheduled
    thread (measured on 2 busy cores: up to 60× slower than one thread), so such loops run serially."""
    n = torch.get_num_threads()
    if n > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if n > 1:
            torch.set_num_threads(n)


#: set by :func:`accelerator_path`: CPU code takes the accelerator-only branches (tests)
_FORCE_ACCELERATOR_PATH = False


@contextlib.contextmanager
def accelerator_path(enabled: bool = True) -> Iterator[None]:
    """Within the block, CPU work takes the accelerator-only branches: the sampler's one pass with an explicit
    random range and its static-shape finish (:mod:`opacus_gg._ziggurat`), the norms' one fused pass with no
    chunks (:mod:`opacus_gg.clipping`), and the optimizer's deferred checks, read once per step
    (:mod:`opacus_gg.optimizers.base`)."""
    global _FORCE_ACCELERATOR_PATH
    old, _FORCE_ACCELERATOR_PATH = _FORCE_ACCELERATOR_PATH, bool(enabled)
    try:
        yield
    finally:
        _FORCE_ACCELERATOR_PATH = old


def uses_accelerator_path(device: torch.device) -> bool:
    """True on non-CPU devices, and on CPU inside :func:`accelerator_path`."""
    return torch.device(device).type != "cpu" or _FORCE_ACCELERATOR_PATH
