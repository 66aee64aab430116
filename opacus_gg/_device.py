"""Private device helpers: the one internal switch that runs accelerator-only branches on CPU (so the tests
cover them without a GPU), the float64 policy for devices without float64 (MPS) with its switch, a one-thread
scope for CPU loops of many small torch ops, and the split of such a loop over Python threads
(:func:`run_split`)."""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Optional

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


_POOL: Optional[ThreadPoolExecutor] = None


def _drop_pool() -> None:
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_drop_pool)  # a forked child (DataLoader worker) must not reuse the threads


def _on_one_thread(fn: Callable[[int, int], None], lo: int, hi: int) -> None:
    # OpenMP's thread count is per OS thread: a pool thread would otherwise open teams of all cores
    torch.set_num_threads(1)
    fn(lo, hi)


def run_split(fn: Callable[[int, int], None], n: int, workers: int) -> None:
    """Call ``fn(lo, hi)`` on ``workers`` contiguous ranges covering [0, n): the first range on this thread, the
    others on a shared thread pool (torch releases the GIL in its ops), then wait for all; their errors are
    re-raised here. For chunk loops of small CPU ops that ran serially under :func:`one_thread`: each worker
    keeps one intra-op thread, and with ``workers`` = ``torch.get_num_threads()`` the loop uses as many cores
    as a torch op would."""
    global _POOL
    workers = max(1, min(workers, n))
    if workers == 1:
        fn(0, n)
        return
    if _POOL is None or _POOL._max_workers < workers - 1:
        size = max(workers - 1, (os.cpu_count() or 2) - 1)
        _POOL = ThreadPoolExecutor(max_workers=size, thread_name_prefix="opacus_gg")
    bounds = [n * w // workers for w in range(workers + 1)]
    futures = [_POOL.submit(_on_one_thread, fn, bounds[w], bounds[w + 1]) for w in range(1, workers)]
    try:
        fn(bounds[0], bounds[1])
    finally:
        for f in futures:
            f.result()


def generator_restorer(generator: Optional[torch.Generator], device) -> Callable[[], None]:
    """A callable that puts back the present state of the generator a draw on ``device`` with ``generator`` uses
    (``None``: torch's default generator of ``device``). Reading the state does not synchronise a device."""
    if generator is not None:
        state = generator.get_state()
        return lambda: generator.set_state(state)
    dev = torch.device(device)
    if dev.type == "cpu":
        state = torch.get_rng_state()
        return lambda: torch.set_rng_state(state)
    module = torch.get_device_module(dev.type)
    state = module.get_rng_state(dev)
    return lambda: module.set_rng_state(state, dev)


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


#: device types with no float64 (MPS): their float64 work runs on the host (:func:`float64_device`)
NO_FLOAT64 = ("mps",)

#: set by :func:`without_float64`: CPU is treated as a device without float64 (tests)
_FORCE_NO_FLOAT64 = False


@contextlib.contextmanager
def without_float64(enabled: bool = True) -> Iterator[None]:
    """Within the block, CPU tensors take the branches of devices without float64 (see :func:`has_float64`):
    the sampler draws on the host and moves its float32 result, the norms move their float32 block sums to the
    host before the float64 sum and root, factors are converted on the host before they go to the device."""
    global _FORCE_NO_FLOAT64
    old, _FORCE_NO_FLOAT64 = _FORCE_NO_FLOAT64, bool(enabled)
    try:
        yield
    finally:
        _FORCE_NO_FLOAT64 = old


def has_float64(device) -> bool:
    """False on device types without float64 (``NO_FLOAT64``: MPS), and on CPU inside :func:`without_float64`."""
    kind = torch.device(device).type
    return kind not in NO_FLOAT64 and not (kind == "cpu" and _FORCE_NO_FLOAT64)


def float64_device(device) -> torch.device:
    """Where the float64 work for tensors on ``device`` runs: ``device`` itself, or the CPU (host) when it has
    no float64. Everything float64 (certified sums and roots, clip factors, the sampler's exact finish) is
    created there; only float32 or narrower tensors live on such a device."""
    return torch.device(device) if has_float64(device) else torch.device("cpu")


def to_device(t: torch.Tensor, device, dtype: torch.dtype) -> torch.Tensor:
    """``t`` as ``dtype`` on ``device``, the dtype converted first where ``t`` is (a float64 tensor never
    reaches a device without float64, even for a moment)."""
    return t.to(dtype=dtype).to(device=device)


def peak_bytes(fn: Callable[[], object], device) -> int:
    """Peak of the bytes allocated on ``device`` while ``fn()`` runs and not yet freed (frees of older blocks do not
    count).

    CUDA: ``max_memory_allocated`` minus the bytes allocated at the start. CPU: from the profiler's record of
    every allocation and free (address, size, time), replayed in time order; counting each record, not the per-op
    net amounts of the profiler's events, which hide an op's internal temporaries (e.g. the int64 copy ``sum``
    makes of a bool tensor), and matching frees to this call's allocations by address (the CPU allocator's size
    table keeps stale entries between profiled calls). Only allocations on this Python thread (and threads
    torch propagates the profiler to) are seen: call it with ``torch.get_num_threads() == 1`` for the CPU
    sampler's split over Python threads to stay on this one."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - start)
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    records, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        stack.extend(e.children)
        if e.tag == _EventType.Allocation and e.extra_fields.device.type == "cpu":
            records.append((e.start_time_ns, e.extra_fields.ptr, e.extra_fields.alloc_size))
    mine: dict = {}
    live = peak = 0
    for _, ptr, size in sorted(records):
        if size > 0:
            mine[ptr] = size
            live += size
            peak = max(peak, live)
        elif ptr in mine:
            live -= mine.pop(ptr)
    return peak
