"""One-thread scope for CPU loops of many small torch ops (private helper)."""

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
