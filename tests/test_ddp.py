"""Distributed data parallel (gloo, 2 CPU processes): GG noise is added once per step (rank 0, as in
Opacus) and the parameters stay identical across ranks; on the accelerator path each rank synchronises
once per step, and a rank without noise settles its clipping check before its sum becomes p.grad."""

from __future__ import annotations

import json
import os

import pytest
import torch
import torch.distributed as dist
from ddp_helpers import WORLD, spawn
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def _worker(rank: int, out_dir: str, clipping: str, accel: bool = False) -> None:
    from opacus_gg import _device

    with _device.accelerator_path(accel):
        res = _run(rank, clipping)
    if accel:
        res["sigma0_overflow_equal"] = _sigma0_overflow_paths_agree(rank)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)


def _sigma0_overflow_paths_agree(rank: int) -> bool:
    """σ = 0, rank 1 holds a sample whose Σ|g|^1.5 overflows (the rescaled path): CPU and accelerator paths
    train to the same parameters (the rank without noise must settle before its sum becomes p.grad)."""
    from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP

    from opacus_gg import GGPrivacyEngine, _device

    out = []
    for accel in (False, True):
        torch.manual_seed(3)
        x = torch.randn(32, 6)
        if rank == 1:
            x[5] = 1e30
        model = DPDDP(nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2)))
        model, opt, dl = GGPrivacyEngine().make_private(
            module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), noise_multiplier=0.0,
            data_loader=DataLoader(TensorDataset(x, torch.randint(0, 2, (32,))), batch_size=16),
            max_grad_norm=1.0, beta=1.5, poisson_sampling=False)
        with _device.accelerator_path(accel):
            for xb, yb in dl:
                opt.zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
        out.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    return bool(torch.allclose(out[0], out[1], rtol=1e-5, atol=1e-7)) and bool(torch.isfinite(out[1]).all())


def _run(rank: int, clipping: str) -> dict:
    from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP
    from sync_counter import SyncCounter

    from opacus_gg import GGPrivacyEngine
    from opacus_gg.distribution import variance

    res = {"syncs": []}
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
        with SyncCounter() as c:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        res["syncs"].append(c.count)
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
    return res


@pytest.mark.parametrize("clipping,cls,accel", [
    ("flat", "GGDistributedDPOptimizer", False),
    ("flat", "GGDistributedDPOptimizer", True),
    pytest.param("per_layer", "GGSimpleDistributedPerLayerOptimizer", False, marks=[pytest.mark.slow, pytest.mark.ci_slow]),
])
def test_ddp_two_processes(tmp_path, clipping, cls, accel):
    spawn(_worker, str(tmp_path), clipping, accel)
    r = [json.loads((tmp_path / f"rank{i}.json").read_text()) for i in range(WORLD)]
    for x in r:
        assert x["optimizer"] == cls
        if accel:  # rank 0 reads its clipping and noise flags together, rank 1 (no noise) its clipping flag
            assert x["syncs"] == [1] * len(x["syncs"]) and x["sigma0_overflow_equal"]
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


def _nan_run(rank: int, accel: bool, with_refused_batch: bool) -> dict:
    """4 batches of 16 (no shuffling), rank 1's 2nd batch holds a NaN; without ``with_refused_batch`` the 2nd batch
    is left out of the data on every rank (the reference: the same steps, none refused). Every rank catches
    FloatingPointError and carries on."""
    from opacus.distributed import DifferentiallyPrivateDistributedDataParallel as DPDDP
    from sync_counter import SyncCounter

    from opacus_gg import GGPrivacyEngine, _device

    torch.manual_seed(5 + rank)
    x = torch.randn(64, 6)
    if rank == 1:
        x[20] = float("nan")  # batch 2 (batch_size 16, no shuffling)
    model = DPDDP(nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2)))
    y = torch.randint(0, 2, (64,))
    keep = torch.arange(64) if with_refused_batch else torch.cat([torch.arange(16), torch.arange(32, 64)])
    pe = GGPrivacyEngine()
    gen = torch.Generator().manual_seed(3)
    model, opt, dl = pe.make_private(
        module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), noise_multiplier=1.0,
        data_loader=DataLoader(TensorDataset(x[keep], y[keep]), batch_size=16), max_grad_norm=1.0, beta=1.5,
        poisson_sampling=False, noise_generator=gen)
    refused, syncs = [], []
    with _device.accelerator_path(accel):
        for i, (xb, yb) in enumerate(dl):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            try:
                with SyncCounter() as c:
                    opt.step()
                syncs.append(c.count)
            except FloatingPointError:
                refused.append(i)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(WORLD)]
    dist.all_gather(gathered, flat)
    return {"refused": refused, "steps": sum(e[2] for e in pe.accountant.history), "syncs": syncs,
            "params_equal": bool(torch.equal(gathered[0], gathered[1])), "finite": bool(torch.isfinite(flat).all()),
            "params": flat.tolist(), "generator": gen.get_state().tolist()}


def _nan_worker(rank: int, out_dir: str) -> None:
    out = {}
    for accel in (False, True):
        res = _nan_run(rank, accel, with_refused_batch=True)
        ref = _nan_run(rank, accel, with_refused_batch=False)
        res["as_if_never_happened"] = res["params"] == ref["params"] and res["generator"] == ref["generator"]
        out["accelerator" if accel else "cpu"] = res
    with open(os.path.join(out_dir, f"nan{rank}.json"), "w") as f:
        json.dump(out, f)


def test_nan_on_one_rank_is_refused_on_every_rank(tmp_path):
    """A NaN per-sample gradient on rank 1 only, on the CPU and the accelerator path: every rank refuses that step
    (FloatingPointError), nothing is noised, accounted or applied anywhere, the ranks stay in step (the next steps
    pair their collectives with the same step) and end with identical, finite parameters; the accelerator path still
    synchronises once per step. The refused step leaves no trace: parameters and noise generators (rank 0 draws its
    noise before the refusal is agreed) end bit for bit as in a run whose data lacks the refused batch."""
    spawn(_nan_worker, str(tmp_path))
    r = [json.loads((tmp_path / f"nan{i}.json").read_text()) for i in range(WORLD)]
    for x in r:
        for path, y in x.items():
            assert y["refused"] == [1] and y["steps"] == 3 and y["params_equal"] and y["finite"], (path, y)
            assert y["as_if_never_happened"], (path, y)
        assert x["accelerator"]["syncs"] == [1, 1, 1], x["accelerator"]
