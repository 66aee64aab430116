"""The float64 policy of ``opacus_gg._device`` for devices without float64 (MPS): float64 work runs on the host,
only float32 reaches the device. Exercised on CPU through ``_device.without_float64`` (with the accelerator
branches on, as on MPS), under the sampler's KS test and a full private step; the clipping bound under it is
in tests/test_stored_clipping.py (mode "no_float64")."""

from __future__ import annotations

import warnings

import pytest
import torch
from scipy import stats
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine, _device, clipping
from opacus_gg import _ziggurat as Z
from opacus_gg.distribution import gennorm_scale, sample_deferred


def test_policy_keeps_float64_off_mps_only():
    assert not _device.has_float64("mps") and _device.float64_device("mps") == torch.device("cpu")
    assert _device.has_float64("cuda") and _device.float64_device("cuda:1") == torch.device("cuda:1")
    assert _device.has_float64("cpu")
    with _device.without_float64():
        assert not _device.has_float64("cpu") and _device.has_float64("cuda")
    assert _device.has_float64("cpu")


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0])
def test_sampler_without_float64_is_the_host_path(beta):
    """The accelerator path on a device without float64: the host's CPU path (same draws as on CPU, bit for
    bit, from the same generator state), nothing deferred, and GG by KS."""
    with _device.accelerator_path(), _device.without_float64():
        x, fin = sample_deferred(200_000, beta, 0.8, generator=torch.Generator().manual_seed(2))
    assert not bool(fin.pending) and x.dtype == torch.float32
    ref = Z._sample_cpu(200_000, beta, 0.8, torch.Generator().manual_seed(2), torch.float32)
    assert torch.equal(x, ref)
    assert stats.kstest(x.double().numpy(), stats.gennorm(beta, scale=gennorm_scale(beta, 0.8)).cdf).pvalue > 1e-3


@pytest.mark.parametrize("p", [1.5, 3.0])
def test_norms_without_float64_equal_the_accelerator_branch(p):
    """The certified norms with their float32 block sums moved to the host equal the accelerator branch's
    (the same float32 kernels, the same float64 sum), rank-1 factors and rescaled path included."""
    g = torch.Generator().manual_seed(1)
    grads = [torch.randn(5, 3000, generator=g), torch.randn(5, 7, generator=g)]
    grads[0][1] *= 1e30  # Σ|g|^p overflows: the rescaled path
    with _device.accelerator_path():
        a = clipping.per_sample_norms(grads, p)
        with _device.without_float64():
            b = clipping.per_sample_norms(grads, p)
    assert torch.equal(a, b) and b.dtype == torch.float64


def test_private_step_without_float64_trains():
    """A full β = 1.5 step (per-sample clipping + GG noise) on the branches of a device without float64."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
    dl = DataLoader(TensorDataset(torch.randn(32, 10), torch.randint(0, 3, (32,))), batch_size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, dl = GGPrivacyEngine().make_private(
            module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), data_loader=dl,
            noise_multiplier=1.0, max_grad_norm=1.0, beta=1.5)
    before = [p.detach().clone() for p in model.parameters()]
    with _device.accelerator_path(), _device.without_float64():
        for x, y in dl:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    assert all(torch.isfinite(p).all() and not torch.equal(p, b) for p, b in zip(model.parameters(), before))
