"""Per-sample ℓp norms of Linear weights from their factors (opacus_gg.rank1): the bound, each validity
condition, and the engine's use of it (same per-sample gradients as Opacus, norms certified)."""

from __future__ import annotations

from collections import ChainMap

import mpmath
import numpy as np
import pytest
import torch
from opacus import PrivacyEngine
from opacus.grad_sample import GradSampleModule
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine, _device, rank1
from opacus_gg.clipping import per_layer_norms, per_sample_norms

PS = [1.0, 1.5, 2.0, 2.5, 3.0, 4.0]


def _exact_norms(grads, p):
    """‖g_i‖_p of the stored (rounded) per-sample gradients, in float64 (exact to ~1e-15 relative)."""
    flat = np.concatenate([g.reshape(len(g), -1).double().numpy() for g in grads], axis=1)
    return np.array([np.linalg.norm(r, ord=p) for r in flat])


def _private(model, engine_cls=GGPrivacyEngine, batch=16, max_grad_norm=1.0, **kw):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    dl = DataLoader(TensorDataset(torch.randn(64, 20, generator=g), torch.randint(0, 5, (64,), generator=g)),
                    batch_size=batch)
    if engine_cls is GGPrivacyEngine:
        kw.setdefault("beta", 1.5)
    res = engine_cls().make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                    max_grad_norm=max_grad_norm, poisson_sampling=False, **kw)
    return res[0], res[1], res[-1]  # ghost clipping also returns a criterion


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 30), nn.ReLU(), nn.Linear(30, 5))


def _backward(model, dl):
    x, y = next(iter(dl))
    nn.functional.cross_entropy(model(x), y).backward()
    return [p.grad_sample for p in model.parameters()]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("p", PS)
def test_factored_norms_are_tight_upper_bounds(p):
    model, _, dl = _private(_mlp())
    grads = _backward(model, dl)
    assert [rank1.factors(g) is not None for g in grads] == [True, False, True, False]
    ref = _exact_norms(grads, p)
    ours = per_sample_norms(grads, p).numpy()
    assert (ours >= ref).all() and (ours <= ref * (1 + 1e-4)).all(), ours / ref - 1
    for g, n in zip(grads, per_layer_norms(grads, p)):
        r = _exact_norms([g], p)
        assert (n.numpy() >= r).all() and (n.numpy() <= r * (1 + 1e-4)).all()
    with rank1.use_factors(False):  # the full pass reads the same tensors: both bounds agree to 1e-4
        full = per_sample_norms(grads, p).numpy()
    np.testing.assert_allclose(ours, full, rtol=1e-4)


@pytest.mark.filterwarnings("ignore")
def test_per_sample_gradients_are_opacus_bit_for_bit():
    ours, _, dl = _private(_mlp())
    theirs, _, dl2 = _private(_mlp(), engine_cls=PrivacyEngine)
    for a, b in zip(_backward(ours, dl), _backward(theirs, dl2)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_rank1_bound_covers_the_rounded_outer_product(dtype):
    """Each step of the bound: stored entries fl(δ·a) (one rounding; underflow to subnormals and zero
    included), the factor norms' upper bounds, and the float64 formula; checked against mpmath sums."""
    g = torch.Generator().manual_seed(3)
    fi = torch.finfo(dtype)
    d = torch.randn(6, 7, generator=g, dtype=torch.float64)
    a = torch.randn(6, 11, generator=g, dtype=torch.float64)
    d[1] *= float(fi.tiny) * 4  # products under the smallest normal: gradual underflow
    a[1] *= 2.0**-10
    d[2, :3] = 0.0
    a[3] *= 1e3
    d, a = d.to(dtype), a.to(dtype)
    gs = d[:, :, None] * a[:, None, :]
    for p in (1.0, 1.5, 3.0):
        nd, na = per_sample_norms([d.double()], p), per_sample_norms([a.double()], p)  # as clipping._one_pass
        bound = rank1.rank1_bound(nd, na, dtype, 7 * 11, p)
        mpmath.mp.prec = 200
        for i in range(6):
            exact = mpmath.fsum(mpmath.power(abs(mpmath.mpf(float(v))), p) for v in gs[i].reshape(-1).double())
            assert mpmath.mpf(float(bound[i])) >= exact, (p, i)
            if i in (0, 3, 4, 5):  # not near underflow: tight up to the entries' rounding, ((1 + u)/(1 − u))^p
                assert float(bound[i]) <= float(exact) * ((1 + fi.eps / 2) / (1 - fi.eps / 2)) ** p * (1 + 1e-6)


@pytest.mark.filterwarnings("ignore")
def test_factors_dropped_when_the_tensor_is_edited_or_replaced():
    model, _, dl = _private(_mlp())
    grads = _backward(model, dl)
    w = next(model.parameters())
    assert rank1.factors(w.grad_sample) is not None
    w.grad_sample.mul_(3.0)  # in-place edit: version counter moved
    assert rank1.factors(w.grad_sample) is None
    ref = _exact_norms(grads, 1.5)
    assert (per_sample_norms(grads, 1.5).numpy() >= ref).all()
    w.grad_sample = torch.randn_like(w.grad_sample)  # set by hand: another tensor
    assert rank1.factors(w.grad_sample) is None


class _Tied(nn.Module):
    """One Linear used twice per forward: Opacus adds the two per-sample gradients (not rank one)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(20, 20)
        self.head = nn.Linear(20, 5)

    def forward(self, x):
        return self.head(self.lin(torch.relu(self.lin(x))))


class _Seq(nn.Module):
    """A Linear on 3-D input (B, T, d): Σ_t δ_t ⊗ a_t is not rank one."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 4)
        self.head = nn.Linear(4, 5)

    def forward(self, x):
        return self.head(self.lin(x.view(len(x), 4, 5)).mean(1))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("make, expect", [(_Tied, [False, False, True, False]), (_Seq, [False, False, True, False])])
def test_factors_only_for_single_use_2d_linear_layers(make, expect):
    torch.manual_seed(0)
    model, _, dl = _private(make())
    grads = _backward(model, dl)
    assert [rank1.factors(g) is not None for g in grads] == expect
    for p in (1.5, 3.0):
        ref = _exact_norms(grads, p)
        ours = per_sample_norms(grads, p).numpy()
        assert (ours >= ref).all() and (ours <= ref * (1 + 1e-4)).all()


@pytest.mark.filterwarnings("ignore")
def test_accumulated_batches_are_read_in_full():
    """Two backward passes before a step (virtual batches): Opacus concatenates; no factors for the result."""
    model, opt, dl = _private(_mlp())
    model.allow_grad_accumulation()
    it = iter(dl)
    for _ in range(2):
        x, y = next(it)
        nn.functional.cross_entropy(model(x), y).backward()
    grads = [opt._get_flat_grad_sample(p) for p in opt.params]
    assert len(grads[0]) == 32 and all(rank1.factors(g) is None for g in grads)


@pytest.mark.filterwarnings("ignore")
def test_not_installed_for_functorch_mode_and_removed_with_opacus_hooks():
    model, _, dl = _private(_mlp(), grad_sample_mode="functorch")
    assert all(rank1.factors(g) is None for g in _backward(model, dl))
    ghost, _, _ = _private(_mlp(), beta=2.0, clipping="ghost")
    assert not isinstance(ghost.GRAD_SAMPLERS, ChainMap)  # Opacus's ghost clipping keeps its own samplers
    model, _, dl = _private(_mlp())
    assert isinstance(model, GradSampleModule)
    n_hooks = len(model.autograd_grad_sample_hooks)
    rank1.install(model)  # idempotent
    assert len(model.autograd_grad_sample_hooks) == n_hooks
    model.remove_hooks()
    lin = model._module[0]
    assert not lin._backward_hooks and not lin._forward_hooks


@pytest.mark.filterwarnings("ignore")
def test_zero_input_sample_takes_the_rescaled_path():
    """A sample with a = 0 has Σ|a|^p below the tightness floor: reported not tight, so the norm is redone
    over every entry (and is 0 for that layer)."""
    model, _, dl = _private(_mlp())
    x, y = next(iter(dl))
    x[0] = 0.0
    nn.functional.cross_entropy(model(x), y).backward()
    grads = [p.grad_sample for p in model.parameters()]
    ref = _exact_norms(grads, 1.5)
    ours = per_sample_norms(grads, 1.5).numpy()
    assert (ours >= ref).all() and (ours <= ref * (1 + 1e-4) + 1e-30).all()


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("clipping", ["flat", "per_layer"])
@pytest.mark.parametrize("accelerator", [False, True])
def test_training_steps_match_the_full_pass(clipping, accelerator):
    """A whole step (clip + noise, same seed) with and without the factors: every clipped per-sample gradient
    within its bound (exact norms of the stored tensors), and the same update to 1e-4."""
    results = []
    mgn = 1.0 if clipping == "flat" else [0.5] * 4
    for use in (True, False):
        model, opt, dl = _private(_mlp(), clipping=clipping, max_grad_norm=mgn, noise_generator=torch.Generator().manual_seed(5))
        with rank1.use_factors(use), _device.accelerator_path(accelerator):
            grads = _backward(model, dl)
            assert (rank1.factors(grads[0]) is not None) == use
            f = opt._factors(grads)
            if clipping == "flat":
                assert (_exact_norms([g * f[0].view(-1, *[1] * (g.dim() - 1)) for g in grads], 1.5) <= 1.0).all()
            else:
                for g, fl in zip(grads, f):
                    assert (_exact_norms([g * fl.view(-1, *[1] * (g.dim() - 1))], 1.5) <= 0.5).all()
            opt.step()
        results.append([p.detach().clone() for p in model.parameters()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
