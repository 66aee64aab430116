"""GG noise in the optimizer: one flat draw per step (views per parameter), σ = 0 adds nothing (as Opacus)."""

from __future__ import annotations

import pytest
import torch
from opacus.optimizers import DPOptimizer
from scipy import stats

from opacus_gg import distribution
from opacus_gg.optimizers import GGDPOptimizer, GGDPPerLayerOptimizer

SHAPES = [(40, 30), (30,), (5, 3, 3, 3), (7,)]


def _params_with_grad_samples(seed: int, batch: int = 6):
    g = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.zeros(s)) for s in SHAPES]
    for p in params:
        p.grad_sample = torch.randn(batch, *p.shape, generator=g)
    return params


def _step_grads(opt_cls, params, **kw):
    """Run clip + noise (pre_step) and return p.grad for each parameter (loss_reduction='sum')."""
    opt = opt_cls(torch.optim.SGD(params, lr=0.1), expected_batch_size=6, loss_reduction="sum", **kw)
    opt.pre_step()
    return opt, [p.grad.clone() for p in params]


def test_noise_drawn_once_per_step_into_one_buffer(monkeypatch):
    calls = []
    orig = distribution.sample

    def spy(shape, *args, **kwargs):
        calls.append(shape)
        return orig(shape, *args, **kwargs)

    monkeypatch.setattr(distribution, "sample", spy)
    params = _params_with_grad_samples(0)
    opt = GGDPOptimizer(torch.optim.SGD(params, lr=0.1), noise_multiplier=1.0, max_grad_norm=1.0,
                        expected_batch_size=6, beta=1.5, noise_generator=torch.Generator().manual_seed(1))
    opt.pre_step()
    assert calls == [sum(p.numel() for p in params)]
    ptrs = {p.grad.untyped_storage().data_ptr() for p in params}
    assert len(ptrs) == 1  # all grads are views of the one flat buffer
    assert all(p.grad.shape == p.shape for p in params)


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0])
def test_flat_noise_is_gg_across_parameters(beta):
    """p.grad − clipped sum, concatenated over the parameters, is GG(β, σC) (KS vs scipy.stats.gennorm)."""
    params = _params_with_grad_samples(2, batch=1)
    for p in params:
        p.grad_sample.zero_()
    sigma, c = 1.3, 0.7
    _, grads = _step_grads(GGDPOptimizer, params, noise_multiplier=sigma, max_grad_norm=c, beta=beta,
                           noise_generator=torch.Generator().manual_seed(3))
    z = torch.cat([g.flatten() for g in grads]).double().numpy()
    s = sigma * c
    assert stats.kstest(z, stats.gennorm(beta, scale=s * beta ** (1 / beta)).cdf).pvalue > 1e-3


@pytest.mark.parametrize("beta", [1.0, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("opt_cls", [GGDPOptimizer, GGDPPerLayerOptimizer])
def test_sigma_zero_adds_no_noise(beta, opt_cls):
    """noise_multiplier = 0 trains as Opacus: p.grad is exactly the clipped sum, no error."""
    params = _params_with_grad_samples(4)
    mgn = 1.0 if opt_cls is GGDPOptimizer else [1.0] * len(params)
    opt, grads = _step_grads(opt_cls, params, noise_multiplier=0.0, max_grad_norm=mgn, beta=beta,
                             noise_generator=torch.Generator().manual_seed(5))
    for p, g in zip(params, grads):
        assert torch.equal(g, p.summed_grad.view_as(p))
    if beta == 2.0 and opt_cls is GGDPOptimizer:  # bit-identical to Opacus's σ = 0 step
        ref = _params_with_grad_samples(4)
        _, ref_grads = _step_grads(DPOptimizer, ref, noise_multiplier=0.0, max_grad_norm=1.0)
        assert all(torch.equal(a, b) for a, b in zip(grads, ref_grads))


def test_sigma_zero_full_step_updates_parameters():
    params = _params_with_grad_samples(6)
    opt = GGDPOptimizer(torch.optim.SGD(params, lr=0.1), noise_multiplier=0.0, max_grad_norm=1.0,
                        expected_batch_size=6, beta=1.5)
    for p in params:
        p.grad = torch.zeros_like(p)
    opt.step()
    assert all(torch.isfinite(p).all() and p.abs().sum() > 0 for p in params)
