"""The accelerator path on each device of ``tests/devices.py``: the CPU with the accelerator branches forced (CI)
and CUDA where one is present (the real kernels). The sampler's law is exact in float32 and float64; an optimizer
step's noise is GG(β, σC) on the device; a training step of a float32 or bfloat16 model synchronises the host
once; a checkpoint taken on the device resumes on the CPU with the accountant's whole history."""

from __future__ import annotations

import warnings

import pytest
import torch
from devices import DEVICES, HostSyncs, accelerator
from scipy import stats
from test_accelerator_sync import _engine_setup, _tail_masses_ok
from test_distribution import _gennorm
from torch import nn

from opacus_gg import GGPrivacyEngine
from opacus_gg import distribution as D
from opacus_gg.optimizers import GGDPOptimizer

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.mark.parametrize("device", DEVICES)
def test_host_sync_counter_sees_one_sync_and_no_more(device):
    """The counter of the step test is not vacuous: one ``.item()`` is one synchronisation (on CUDA also by the
    runtime's own count), an element-wise op none."""
    t = torch.randn(100, device=device)
    with HostSyncs(device) as c:
        t.sum().item()
    assert c.count == 1 and c.runtime == (1 if device == "cuda" else 0)
    with HostSyncs(device) as c:
        t.mul_(2).add_(1)
    assert c.count == 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("beta", [1.0, 1.2, 1.5, 3.0, 8.0])
def test_sampler_law_on_device(device, dtype, beta):
    """``sample`` and ``sample_deferred`` (+ its finish) on the device, with the device's generator: the draws stay
    on the device in the asked dtype and follow GG(β, s) (KS against scipy's gennorm, and the tail masses)."""
    g = torch.Generator(device=device).manual_seed(int(10 * beta))
    with accelerator(device):
        x = D.sample(300_000, beta, 0.8, generator=g, device=device, dtype=dtype)
        y, fin = D.sample_deferred(300_000, beta, 0.8, generator=g, device=device, dtype=dtype)
        if bool(fin.pending):
            fin.finish()
    for z in (x, y):
        assert z.device.type == device and z.dtype == dtype and bool(torch.isfinite(z).all())
        assert stats.kstest(z.double().cpu().numpy(), _gennorm(beta, 0.8).cdf).pvalue > 1e-3
        _tail_masses_ok(z.double().cpu(), beta, 0.8)
    assert not torch.equal(x, y)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("beta", [1.0, 1.5, 2.0, 3.0])
def test_step_noise_is_gg_on_device(device, beta):
    """Zero per-sample gradients, loss_reduction="sum": after ``pre_step`` every p.grad entry is noise alone, on the
    device, i.i.d. GG(β, σC) across the parameters (KS), from the device's generator."""
    params = [nn.Parameter(torch.zeros(s, device=device)) for s in [(200, 300), (77,), (5, 3, 3, 3)]]
    for p in params:
        p.grad_sample = torch.zeros(1, *p.shape, device=device)
    sigma, c = 1.3, 0.7
    opt = GGDPOptimizer(torch.optim.SGD(params, lr=1.0), noise_multiplier=sigma, max_grad_norm=c,
                        expected_batch_size=1, loss_reduction="sum", beta=beta,
                        generator=torch.Generator(device=device).manual_seed(3))
    with accelerator(device):
        assert opt.pre_step()
    assert all(p.grad.device.type == device for p in params)
    z = torch.cat([p.grad.flatten() for p in params]).double().cpu().numpy()
    assert stats.kstest(z, _gennorm(beta, sigma * c).cdf).pvalue > 1e-3


def _private(device, dtype, beta, clipping, seed=0):
    """(engine, model, optimizer, loader): the accelerator-sync tests' classifier on ``device`` in ``dtype``."""
    pe = GGPrivacyEngine()
    return (pe, *_engine_setup(beta, clipping, seed=seed, device=device, dtype=dtype, engine=pe))


def _step(model, opt, xb, yb) -> None:
    opt.zero_grad()
    nn.functional.cross_entropy(model(xb).float(), yb).backward()
    opt.step()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("beta,clipping", [(1.0, "flat"), (1.5, "per_layer"), (2.0, "flat"), (3.0, "flat")])
def test_training_step_synchronises_once_on_device(device, dtype, beta, clipping):
    """Each step (forward, backward, clip, noise, accountant, update) synchronises the host exactly once: the
    step's checks, read together. Counted after a first step (which uploads the sampler's tables to the device),
    on the batches already on the device; the parameters stay finite, in their dtype, and move."""
    _, model, opt, dl = _private(device, dtype, beta, clipping)
    batches = [(xb.to(device=device, dtype=dtype), yb.to(device)) for xb, yb in dl]
    start = [p.detach().clone() for p in model.parameters()]
    counts = []
    with accelerator(device):
        _step(model, opt, *batches[0])
        for xb, yb in batches[1:]:
            with HostSyncs(device) as c:
                _step(model, opt, xb, yb)
            counts.append(c.count)
    assert counts == [1] * len(counts)
    for a, p in zip(start, model.parameters()):
        assert p.dtype == dtype and p.device.type == device
        assert bool(torch.isfinite(p).all()) and not torch.equal(a, p)


@pytest.mark.parametrize("device", DEVICES)
def test_checkpoint_from_device_resumes_on_cpu(device, tmp_path):
    """Train on the device, save; load into a CPU model (``map_location``): the parameters, the optimizer's
    momentum and the accountant's whole history come back, and ε is the same number."""
    pe, model, opt, dl = _private(device, torch.float32, 1.5, "flat")
    with accelerator(device):
        for xb, yb in dl:
            _step(model, opt, xb.to(device), yb.to(device))
    eps = pe.get_epsilon(1e-5)
    pe.save_checkpoint(path=tmp_path / "ckpt.pt", module=model, optimizer=opt)
    pe_b, model_b, opt_b, _ = _private("cpu", torch.float32, 1.5, "flat", seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pe_b.load_checkpoint(path=tmp_path / "ckpt.pt", module=model_b, optimizer=opt_b,
                             torch_load_kwargs={"map_location": "cpu"})
    for a, b in zip(model.parameters(), model_b.parameters()):
        assert b.device.type == "cpu" and torch.equal(a.detach().cpu(), b.detach())
    for k, st in opt.state_dict()["state"].items():
        assert torch.equal(st["momentum_buffer"].cpu(), opt_b.state_dict()["state"][k]["momentum_buffer"])
    assert pe_b.accountant.history == pe.accountant.history and len(pe.accountant.history) > 0
    assert pe_b.get_epsilon(1e-5) == eps
