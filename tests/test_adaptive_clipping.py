"""clipping="adaptive" at every β and p: the clip bound tracks the target unclipped quantile (Andrew et al. 2021),
the gradient noise is flat clipping's at the current bound, and the engine accounts the noisy count."""

from __future__ import annotations

import math

import pytest
import torch
from opacus import GradSampleModule
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine, _device
from opacus_gg.accountants import compute_epsilon
from opacus_gg.optimizers import GGAdaClipDPOptimizer, GGDPOptimizer

ADA = dict(target_unclipped_quantile=0.5, clipbound_learning_rate=0.2, max_clipbound=10.0, min_clipbound=0.01,
           unclipped_num_std=4.0)


def _norms_quantile(gamma: float) -> float:
    """γ-quantile of ‖s·u‖_p = s, s log-uniform on [0.1, 10], u a unit-ℓp direction."""
    return 0.1 * 100.0 ** gamma


@pytest.mark.parametrize("beta,p,gamma", [(1.5, 1.5, 0.7), (3.0, 2.0, 0.3)])
def test_clip_bound_tracks_the_target_unclipped_quantile(beta, p, gamma):
    """Per-sample gradients x_i = s_i·u (a linear model, loss = output): ‖g_i‖_p = s_i, log-uniform on [0.1, 10],
    so the γ-quantile is 0.1·100^γ. Started 30× off, after 300 steps (batch 64, η = 0.2, σ_b = 3.2) the bound's
    average over the last 100 steps leaves a fraction within γ ± 0.06 unclipped (count noise σ_b/64 = 0.05 per
    step, averaged by the geometric update)."""
    torch.manual_seed(0)
    d, batch = 6, 64
    u = torch.ones(d) / d ** (1.0 / p)  # ‖u‖_p = 1
    model = GradSampleModule(nn.Linear(d, 1, bias=False), loss_reduction="sum")
    opt = GGAdaClipDPOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), noise_multiplier=1.0, loss_reduction="sum",
                               max_grad_norm=30.0 * _norms_quantile(gamma), expected_batch_size=batch, beta=beta,
                               clip_norm_p=p, target_unclipped_quantile=gamma, clipbound_learning_rate=0.2,
                               max_clipbound=1e3, min_clipbound=1e-3, unclipped_num_std=batch / 20,
                               generator=torch.Generator().manual_seed(1))
    bounds = []
    for _ in range(300):
        s = 0.1 * 100.0 ** torch.rand(batch)
        opt.zero_grad()
        model(s[:, None] * u[None, :]).sum().backward()
        opt.step()
        bounds.append(opt.max_grad_norm)
    c = sum(bounds[-100:]) / 100
    frac = math.log(c / 0.1) / math.log(100.0)  # P(s ≤ c) for s log-uniform on [0.1, 10]
    assert abs(frac - gamma) <= 0.06, (c, frac)
    assert opt.count_noise_multiplier == 2 * (batch / 20)


@pytest.mark.parametrize("accel", [False, True])
@pytest.mark.parametrize("beta", [2.0, 1.5])
def test_gradient_noise_is_flat_clippings_at_the_current_bound(beta, accel):
    """The noisy gradient of an adaptive step equals flat clipping's at the same bound and noise seed, bit for bit
    (at β = 2 as well: no σ adjustment as in Opacus's AdaClipDPOptimizer); the count noise is drawn after it.
    Also on the accelerator path (deferred clipping checks), where the count is a device tensor."""
    grads = []
    for cls, kw in ((GGAdaClipDPOptimizer, ADA), (GGDPOptimizer, {})):
        torch.manual_seed(0)
        model = GradSampleModule(nn.Linear(5, 3))
        opt = cls(torch.optim.SGD(model.parameters(), lr=0.1), noise_multiplier=0.7, max_grad_norm=0.3,
                  expected_batch_size=8, beta=beta, generator=torch.Generator().manual_seed(3), **kw)
        opt.zero_grad()
        model(torch.randn(8, 5)).pow(2).sum().backward()
        with _device.accelerator_path(accel):
            opt.step()
        grads.append([q.grad.clone() for q in model.parameters()])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_counts_survive_a_skipped_step():
    """Virtual batches: a skipped step keeps its clipped sum and its counts (Opacus's AdaClipDPOptimizer resets
    the counts in zero_grad, so it would count the last physical batch only)."""
    model = GradSampleModule(nn.Linear(5, 3))
    opt = GGAdaClipDPOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), noise_multiplier=0.7, max_grad_norm=1e3,
                               expected_batch_size=16, beta=1.5, **ADA)
    for skip in (True, False):
        opt.signal_skip_step(skip)
        opt.zero_grad()
        model(torch.randn(8, 5)).sum().backward()
        opt.step()
        if skip:
            assert opt.sample_size == 8 and int(opt.unclipped_num) == 8  # all 8 unclipped at C = 1000, not noised
    assert opt.sample_size == 16


def _data(seed=0, n=128, d_in=10):
    torch.manual_seed(seed)
    X = torch.randn(n, d_in)
    y = (X[:, 0] > 0).long()
    model = nn.Sequential(nn.Linear(d_in, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    return model, opt, DataLoader(TensorDataset(X, y), batch_size=16)


def test_make_private_adaptive_at_beta_1_5_trains_and_accounts_the_count():
    """make_private(clipping='adaptive', beta=1.5): trains (loss falls), the bound moves, and every step is
    recorded with σ_c = 2·unclipped_num_std (one segment: the pair in noise units does not depend on C_t)."""
    model, opt, dl = _data()
    pe = GGPrivacyEngine()
    model, opt, dl = pe.make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=0.8,
                                     max_grad_norm=1.0, beta=1.5, clipping="adaptive", **ADA)
    X, y = dl.dataset.tensors

    def loss() -> float:
        with torch.no_grad():
            return nn.functional.cross_entropy(model(X), y).item()

    loss0 = loss()
    for _ in range(6):
        for xb, yb in dl:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    assert loss() < loss0
    assert opt.max_grad_norm != 1.0
    hist = pe.accountant.history
    assert [tuple(e) for e in hist] == [(0.8, 1 / 8, 48, 1.5, opt.dim, 1.5, 2 * ADA["unclipped_num_std"])]
    assert math.isfinite(pe.get_epsilon(1e-5))  # ε with vs without the count: tests/test_adaptive_accounting.py


def test_make_private_with_epsilon_adaptive_solves_sigma_with_the_count():
    """The σ solved for clipping='adaptive' meets the target with the count accounted, so it is larger than flat
    clipping's σ for the same target (β = 2: the exact Gaussian pair, a fast solve)."""
    sig = {}
    for clipping, kw in (("adaptive", ADA), ("flat", {})):
        model, opt, dl = _data()
        _, opt, _ = GGPrivacyEngine().make_private_with_epsilon(
            module=model, optimizer=opt, data_loader=dl, target_epsilon=2.0, target_delta=1e-5, epochs=2,
            max_grad_norm=1.0, beta=2.0, clipping=clipping, epsilon_tolerance=0.05, **kw)
        sig[clipping] = opt.noise_multiplier
    assert sig["adaptive"] > sig["flat"]
    eps = compute_epsilon(noise_multiplier=sig["adaptive"], sample_rate=1 / 8, steps=16, delta=1e-5,
                          count_noise_multiplier=2 * ADA["unclipped_num_std"]).epsilon
    assert 1.95 <= eps <= 2.0


def test_adaptive_takes_sigma_above_twice_the_count_std():
    """Opacus's AdaClipDPOptimizer refuses σ ≥ 2σ_b (the precondition of its σ adjustment, not used here); ours
    accounts the count at every σ, so make_private_with_epsilon's solved σ (here > 2σ_b: σ_b = 1, target ε = 2) is
    accepted and meets the target with the count included."""
    from opacus.optimizers import AdaClipDPOptimizer

    ada = dict(ADA, unclipped_num_std=1.0)
    model, opt, dl = _data()
    _, opt, _ = GGPrivacyEngine().make_private_with_epsilon(
        module=model, optimizer=opt, data_loader=dl, target_epsilon=2.0, target_delta=1e-5, epochs=2,
        max_grad_norm=1.0, beta=2.0, clipping="adaptive", epsilon_tolerance=0.05, **ada)
    sigma = opt.noise_multiplier
    assert sigma > 2 * ada["unclipped_num_std"]
    assert opt.unclipped_num_std == 1.0 and opt.count_noise_multiplier == 2.0
    with pytest.raises(ValueError, match="Theorem 1"):
        AdaClipDPOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), noise_multiplier=sigma, max_grad_norm=1.0,
                           expected_batch_size=16, **ada)
    assert compute_epsilon(noise_multiplier=sigma, sample_rate=1 / 8, steps=16, delta=1e-5,
                           count_noise_multiplier=2.0).epsilon <= 2.0


@pytest.mark.parametrize("accountant", ["prv", "rdp"])
def test_adaptive_refuses_accountants_that_miss_the_count(accountant):
    model, opt, dl = _data()
    with pytest.raises(ValueError, match="count"):
        GGPrivacyEngine(accountant=accountant).make_private(module=model, optimizer=opt, data_loader=dl,
                                                            noise_multiplier=1.0, max_grad_norm=1.0,
                                                            clipping="adaptive", **ADA)


@pytest.mark.parametrize("kw,match", [({"target_unclipped_quantile": 1.5}, "target_unclipped_quantile"),
                                      ({"unclipped_num_std": 0.0}, "unclipped_num_std"),
                                      ({"clipbound_learning_rate": -1.0}, "clipbound_learning_rate")])
def test_adaptive_bad_arguments(kw, match):
    prm = nn.Parameter(torch.zeros(3))
    args = dict(ADA, **kw)
    with pytest.raises(ValueError, match=match):
        GGAdaClipDPOptimizer(torch.optim.SGD([prm], lr=0.1), noise_multiplier=1.0, max_grad_norm=1.0,
                             expected_batch_size=4, beta=1.5, **args)
