"""Peak memory of one optimizer step (clip + noise + update) on the accelerator path, forced on CPU through
``_device.accelerator_path``, against Opacus's step on the same model: ≤ 1.1× (issue 20). Measured from the
CPU profiler's allocation events, as ``benchmarks/step_overhead.py`` does."""

from __future__ import annotations

import warnings

import pytest
import torch
from opacus import PrivacyEngine
from torch import nn
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine, _device
from opacus_gg import _ziggurat as Z


def _private(engine, **kw):
    torch.manual_seed(0)
    model = nn.Linear(1000, 1000)
    dl = DataLoader(TensorDataset(torch.randn(4, 1000), torch.zeros(4)), batch_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return engine.make_private(module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                   data_loader=dl, noise_multiplier=1.0, max_grad_norm=1.0,
                                   poisson_sampling=False, **kw)[:2]


def step_peak_bytes(model, opt) -> int:
    """Peak of the bytes allocated and not yet freed inside ``opt.step()``."""
    opt.zero_grad()
    model(torch.randn(2, 1000, generator=torch.Generator().manual_seed(1))).square().sum().backward()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        opt.step()
    live = peak = 0
    for e in sorted((e for e in prof.events() if e.self_cpu_memory_usage), key=lambda e: e.time_range.start):
        live += e.self_cpu_memory_usage
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("beta,p", [(1.5, None), (3.0, 2.0)])
def test_accelerator_step_peak_memory_within_1_1_of_opacus(beta, p):
    """1M parameters in one Linear layer (Opacus: summed gradient, noise and result, 3 copies)."""
    assert Z._accel_chunk(10**6) < 10**6 // 4  # drawn in chunks, as a big model's noise is
    base = step_peak_bytes(*_private(PrivacyEngine(accountant="prv")))
    with _device.accelerator_path():
        ours = step_peak_bytes(*_private(GGPrivacyEngine(), beta=beta, clip_norm_p=p))
    assert base > 2 * 4 * 10**6  # Opacus's step holds ≥ 2 float32 copies of the 1M parameters
    assert ours <= 1.1 * base, ours / base
