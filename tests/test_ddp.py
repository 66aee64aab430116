"""Distributed data parallel (gloo, 2 CPU processes): GG noise is added once per step (rank 0, as in
Opacus) and the parameters stay identical across ranks."""

from __future__ import annotations

import json
import os
import socket
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

WORLD = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, port: int, out_dir: str, clipping: str) -> None:
    warnings.filterwarnings("ignore")
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP

        from opacus_gg import GGPrivacyEngine
        from opacus_gg.distribution import variance

        res = {}
        # (1) training: parameters identical across ranks
        torch.manual_seed(100 + rank)  # different data order and init on purpose; DPDDP broadcasts rank 0's init
        data = TensorDataset(torch.randn(64, 6), torch.randint(0, 2, (64,)))
        model = DPDDP(nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2)))
        mgn = [1.0, 1.0, 1.0, 1.0] if clipping == "per_layer" else 1.0
        pe = GGPrivacyEngine()
        model, opt, dl = pe.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                         data_loader=DataLoader(data, batch_size=16), noise_multiplier=1.0,
                                         max_grad_norm=mgn, beta=1.5, clipping=clipping,
                                         noise_generator=torch.Generator().manual_seed(7 + rank))
        res["optimizer"] = type(opt).__name__
        for xb, yb in dl:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        gathered = [torch.empty_like(flat) for _ in range(WORLD)]
        dist.all_gather(gathered, flat)
        res["params_equal"] = bool(torch.equal(gathered[0], gathered[1]))
        res["steps"] = len(pe.accountant)

        # (2) zero-gradient step, loss_reduction="sum": the update is exactly the noise of one step
        torch.manual_seed(0)
        lin = DPDDP(nn.Linear(200, 200))
        w0 = torch.cat([p.detach().flatten().clone() for p in lin.parameters()])
        pe2 = GGPrivacyEngine()
        lin, opt2, dl2 = pe2.make_private(module=lin, optimizer=torch.optim.SGD(lin.parameters(), lr=1.0),
                                          data_loader=DataLoader(TensorDataset(torch.randn(16, 200)), batch_size=8),
                                          noise_multiplier=1.0, max_grad_norm=1.0, beta=3.0, loss_reduction="sum",
                                          poisson_sampling=False,
                                          noise_generator=torch.Generator().manual_seed(20 + rank))
        (xb,) = next(iter(dl2))
        opt2.zero_grad()
        (lin(xb) * 0).sum().backward()
        opt2.step()
        upd = w0 - torch.cat([p.detach().flatten() for p in lin.parameters()])
        res["noise_var_ratio"] = float(upd.double().var() / variance(3.0, 1.0))
        res["zero_noise_on_rank"] = bool((upd == 0).all())
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(res, f)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("clipping,cls", [
    ("flat", "GGDistributedDPOptimizer"),
    pytest.param("per_layer", "GGSimpleDistributedPerLayerOptimizer", marks=[pytest.mark.slow, pytest.mark.ci_slow]),
])
def test_ddp_two_processes(tmp_path, clipping, cls):
    mp.spawn(_worker, args=(_free_port(), str(tmp_path), clipping), nprocs=WORLD, join=True)
    r = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in range(WORLD)]
    for x in r:
        assert x["optimizer"] == cls
        assert x["params_equal"]
        assert x["steps"] > 0
        assert not x["zero_noise_on_rank"]
        # noise added once (rank 0 only): variance of GG(3, 1), not twice that
        assert abs(x["noise_var_ratio"] - 1.0) < 0.1, x
    assert r[0]["noise_var_ratio"] == r[1]["noise_var_ratio"]


def test_rectify_bound_refused_in_ddp():
    from opacus_gg.optimizers import GGDistributedDPOptimizer

    with pytest.raises(ValueError, match="rectify_bound"):  # the check the distributed classes run at init
        GGDistributedDPOptimizer._no_rectify(type("X", (), {"rectify_bound": 1.0})())
    GGDistributedDPOptimizer._no_rectify(type("X", (), {"rectify_bound": None})())
