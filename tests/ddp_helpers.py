"""Gloo process groups on CPU for the distributed tests: one set-up and teardown for every worker (:func:`spawn`).

Opacus and opacus_gg import ``torch.distributed.fsdp``, which imports ``torch.distributed.nn.functional``, whose
functions take ``group=group.WORLD`` as a default argument, read when that module is first imported. Imported after
``init_process_group`` (a worker that imports the library inside itself, or a ``TorchDispatchMode`` whose first
collective imports ``torch._dynamo``), those defaults hold the default process group: ``destroy_process_group`` cannot
free it, torch destroys it during interpreter finalization, and a rank then sometimes aborted at exit (SIGABRT,
"terminate called without an active exception"). So everything is imported here, before any group exists, and
:func:`spawn` checks that nothing else holds the group when it is destroyed."""

from __future__ import annotations

import datetime
import gc
import os
import socket
import sys
import warnings
from typing import Callable

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: see the module docstring)
import torch.multiprocessing as mp

import opacus_gg  # noqa: F401  (imports Opacus and torch.distributed.fsdp: before init_process_group)

WORLD = 2


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for MASTER_PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(fn: Callable[..., None], *args, world: int = WORLD, timeout_s: float = 60.0,
          check_freed: bool = True) -> None:
    """Run ``fn(rank, *args)`` (a module-level function) on ``world`` spawned processes, each in one gloo process
    group on 127.0.0.1 (collective timeout ``timeout_s``, one intra-op thread, warnings ignored); raises if a rank
    fails. Each rank destroys its group after ``fn``, having checked (``check_freed``), when ``fn`` returned, that no
    reference to the group outlives it (the cause of the aborts at exit, see the module docstring). FSDP2 cannot
    pass that check: DTensor keeps 2 references to the group (through its device mesh) after the model is gone,
    held where Python's gc does not see them (clearing its sharding-propagation caches does not free them)."""
    mp.start_processes(_rank, args=(fn, free_port(), world, timeout_s, check_freed, args), nprocs=world, join=True,
                       start_method="spawn")


def _rank(rank: int, fn: Callable[..., None], port: int, world: int, timeout_s: float, check_freed: bool,
          args: tuple) -> None:
    warnings.filterwarnings("ignore")
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
    group = dist.group.WORLD
    refs = sys.getrefcount(group)
    try:
        fn(rank, *args)
        gc.collect()
        extra = sys.getrefcount(group) - refs
        assert extra <= 0 or not check_freed, (
            f"{extra} references to the default process group outlive the worker: it would be destroyed at "
            "interpreter exit (SIGABRT); import what holds it before init_process_group")
    finally:
        del group
        dist.destroy_process_group()

