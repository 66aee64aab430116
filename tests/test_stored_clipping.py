"""The clipped per-sample gradient as stored (in the parameters' dtype) has ℓp norm ≤ C on every path: 16-bit
models, autocast, flat and per-layer clipping, Linear factors and full reads, CPU and accelerator branches
(docs/engine.md, Lemma S). Norms are exact: mpmath sums of the stored entries."""

from __future__ import annotations

import math
import warnings

import mpmath
import pytest
import torch
from devices import DEVICES
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine, _device, rank1
from opacus_gg.clipping import stored_clip_bound


def _exact_norm(tensors, p) -> mpmath.mpf:
    """‖x‖_p of the stored entries (exact in float64, then |x|^p summed at 40 digits)."""
    vals = [float(v) for t in tensors for v in t.detach().double().flatten().tolist()]
    with mpmath.workdps(40):
        return +(mpmath.fsum(abs(mpmath.mpf(v)) ** p for v in vals) ** (1 / mpmath.mpf(p)))


def _model(dtype):
    # a convolution (read in full) and two Linear layers on 2-D inputs (norms from their factors)
    return nn.Sequential(
        nn.Conv1d(2, 3, 3), nn.Flatten(), nn.Linear(3 * 6, 12), nn.Tanh(), nn.Linear(12, 3)
    ).to(dtype)


def _stored_per_sample(dtype, p, mode, trials, seed):
    """(stored clipped gradient per trial (list of tensors), its bound(s), exact unclipped norm ratio)."""
    torch.manual_seed(seed)
    device = "cuda" if mode.startswith("cuda") else "cpu"
    autocast = mode.endswith("autocast")
    model_dtype = torch.float32 if autocast else dtype
    model = _model(model_dtype).to(device)
    per_layer = mode == "per_layer"
    n_tensors = len(list(model.parameters()))
    gen = torch.Generator().manual_seed(seed)
    cs = [float(torch.empty(()).uniform_(0.05, 2.0, generator=gen)) for _ in range(n_tensors if per_layer else 1)]
    dl = DataLoader(TensorDataset(torch.randn(4, 2, 8), torch.zeros(4, dtype=torch.long)), batch_size=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, _ = GGPrivacyEngine().make_private(
            module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), data_loader=dl,
            noise_multiplier=0.0, max_grad_norm=cs if per_layer else cs[0], beta=p, clip_norm_p=p,
            clipping="per_layer" if per_layer else "flat", poisson_sampling=False,
        )
    out = []
    for _ in range(trials):
        x = torch.randn(1, 2, 8, generator=gen).to(model_dtype).to(device)
        scale = float(torch.empty(()).uniform_(-1.0, 3.0, generator=gen).exp()) * 10  # mostly clipped
        opt.zero_grad(set_to_none=True)
        if autocast:
            with torch.autocast(device, dtype=dtype):
                loss = model(x).float().square().sum() * scale
        else:
            loss = model(x).float().square().sum() * scale
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the input needs no gradient
            loss.backward()
        accel = mode in ("accelerator", "no_float64")
        with _device.accelerator_path(accel), _device.without_float64(mode == "no_float64"), \
                rank1.use_factors(mode != "full"):
            opt.clip_and_accumulate()
        out.append([prm.summed_grad.clone() for prm in opt.params])
        assert all(s.dtype == prm.dtype for s, prm in zip(out[-1], opt.params))
    return out, cs


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("p", [1.0, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("mode", ["factors", "full", "per_layer", "accelerator", "no_float64", "autocast"] + [
    pytest.param(m, marks=DEVICES[1].marks) for m in ("cuda", "cuda_autocast")])
def test_stored_clipped_gradient_is_within_C_in_its_dtype(dtype, p, mode):
    """β = p (so p = 2 also covers the β = 2 path): per trial, one sample's clipped gradient as stored in the
    parameters' dtype; its exact ℓp norm (per layer with C_l for per-layer clipping) is ≤ C. "no_float64": the
    accelerator branches of a device without float64 (MPS), run on CPU through ``_device.without_float64``; "cuda",
    "cuda_autocast": the same on a CUDA device where one is present (its own kernels). Most samples are
    clipped, and the largest stored norm is within 1.5 % of C (the bound is not vacuous)."""
    stored, cs = _stored_per_sample(dtype, p, mode, trials=12, seed=int(p * 10) + len(mode))
    worst = 0.0
    for parts in stored:
        groups = [[t] for t in parts] if mode == "per_layer" else [parts]
        for g, c in zip(groups, cs):
            n = _exact_norm(g, p)
            assert n <= c, (float(n / c) - 1, mode, dtype, p)
            worst = max(worst, float(n / c))
    assert worst > 0.985, worst


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
def test_stored_clip_bound_covers_the_roundings_of_the_store(dtype):
    """C' of Lemma S: below C by the dtype's rounding of the multiply and the cast (≈ 2u_T + 4u_W relative,
    more under reduced float32 matmul precision), by the underflow term, and 0 when C is below it."""
    u = torch.finfo(dtype).eps / 2
    c = stored_clip_bound(1.0, 2.0, [(dtype, dtype, 1000)])
    u_w = torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps / 2
    assert 1.0 - 2.5 * (u + 2 * u_w) - 1e-14 < c < 1.0 - 2 * (u + 2 * u_w)
    tiny = torch.finfo(dtype).tiny * torch.finfo(dtype).eps  # the smallest subnormal: below the underflow term
    assert stored_clip_bound(tiny, 1.0, [(dtype, dtype, 10**9)]) == 0.0
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        if dtype != torch.float64:  # float32 matmul inputs may be rounded to TF32/bfloat16
            assert stored_clip_bound(1.0, 2.0, [(dtype, dtype, 1000)]) < c - 2**-8
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.mark.parametrize("beta", [2.0, 1.5])
def test_grad_scaler_clips_the_scaled_gradient_and_does_not_unscale_the_update(beta):
    """The documented GradScaler behaviour (docs/engine.md, "Mixed precision"), as in Opacus: with loss scale S the
    per-sample gradients are S·g, so clipping at C clips S·g, and ``scaler.step`` unscales only the non-private
    p.grad, which the DP step overwrites: σ = 0, one sample with ‖g‖₂ < C < S‖g‖₂ gives an update of norm C
    (= S·clip_{C/S}(g)), not g; without the scaler the update is g."""
    torch.manual_seed(0)
    x, y = torch.randn(1, 5), torch.randn(1, 1)
    updates = {}
    for scaled in (False, True):
        torch.manual_seed(0)
        model = nn.Linear(5, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, opt, dl = GGPrivacyEngine().make_private(
                module=model, optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
                data_loader=DataLoader(TensorDataset(x, y), batch_size=1), noise_multiplier=0.0, max_grad_norm=100.0,
                beta=beta, clip_norm_p=2.0, poisson_sampling=False, loss_reduction="sum")
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
        loss = ((model(x) - y) ** 2).sum()
        (scaler.scale(loss) if scaled else loss).backward()
        per_sample = torch.cat([p.grad_sample.flatten() for p in opt.params])
        scaler.step(opt) if scaled else opt.step()
        updates[scaled] = (per_sample, torch.cat([p.grad.flatten() for p in opt.params]))
    g, update = updates[False]
    assert float(g.norm()) < 100.0 and torch.allclose(update, g)  # not clipped without the scaler
    s_g, s_update = updates[True]
    assert torch.allclose(s_g, 2.0 ** 10 * g)  # the per-sample gradients carry the loss scale
    assert float(s_update.norm()) == pytest.approx(100.0, rel=1e-5)  # clipped at C in scaled units, not unscaled
    assert torch.allclose(s_update, 100.0 * g / g.norm(), rtol=1e-4)


def _exact_norm(tensors, p):
    with mpmath.workdps(50):
        vals = [float(v) for t in tensors for v in t.double().flatten().tolist()]
        return mpmath.fsum(abs(mpmath.mpf(v)) ** p for v in vals) ** (1 / mpmath.mpf(p))


@pytest.mark.parametrize("accel", [False, True])
@pytest.mark.parametrize("p,k", [(16.0, 9), (8.0, 17)])
def test_mixed_gradient_dtypes_clip_within_C_on_the_rescaled_path(p, k, accel):
    """bfloat16 autocast with float32 parameters gives float32 gradients to some tensors and bfloat16 to others
    (LayerNorm vs Linear); where the sum overflows (large p) the rescaled path divides each tensor by M_i in ITS
    dtype, so the rounding constants must be the coarsest dtype's, not the first tensor's (found by a review:
    stored ‖clipped‖_p/C − 1 = +5.4e-3 at p = 8, float32 first and bfloat16 after)."""
    from opacus_gg.optimizers import GGDPOptimizer
    w0, w1 = nn.Parameter(torch.zeros(1)), nn.Parameter(torch.zeros(4096))
    opt = GGDPOptimizer(torch.optim.SGD([w0, w1], lr=1.0), noise_multiplier=0.0, max_grad_norm=1.0,
                        expected_batch_size=1, beta=2.0, clip_norm_p=p)
    s = 2.0 ** k
    w0.grad_sample = torch.tensor([[1.9023447036743164 * s]], dtype=torch.float32)
    w1.grad_sample = torch.full((1, 4096), 1.03125 * s, dtype=torch.bfloat16)
    with _device.accelerator_path(accel):
        opt.clip_and_accumulate()
        opt._settle()
    assert _exact_norm([w0.summed_grad, w1.summed_grad], p) <= opt.max_grad_norm


@pytest.mark.parametrize("factors", [True, False])
@pytest.mark.parametrize("accel", [False, True])
def test_an_overflowed_float16_linear_gradient_raises_on_the_factor_path(accel, factors):
    """δ = a = 300 in float16: each stored product δ·a = 90000 overflows to inf while the factors' norms are finite;
    the factor bound assumes no overflow, so such a sample must go to the full read, which raises (found by a
    review: the step ran and made the weights inf)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3)).to(torch.float16)
    dl = DataLoader(TensorDataset(torch.randn(4, 4), torch.zeros(4)), batch_size=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, _ = GGPrivacyEngine().make_private(
            module=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), data_loader=dl,
            noise_multiplier=1.0, max_grad_norm=1.0, beta=1.5, clip_norm_p=1.5, poisson_sampling=False)
        opt.zero_grad(set_to_none=True)
        (model(torch.full((2, 4), 300.0, dtype=torch.float16)).float() * 300.0).sum().backward()
    assert rank1.factors(model._module[0].weight.grad_sample) is not None
    before = [q.detach().clone() for q in model.parameters()]
    with _device.accelerator_path(accel), rank1.use_factors(factors), pytest.raises(FloatingPointError, match="inf"):
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("accel", [False, True])
def test_an_empty_poisson_batch_steps_in_16_bits(dtype, accel):
    """An empty batch (Poisson sampling) is noised and stepped in 16 bits as in float32 (a review found
    ``reshape(0, -1)`` raising there)."""
    from opacus_gg.optimizers import GGDPOptimizer
    w = nn.Parameter(torch.zeros(3, 5, dtype=dtype))
    opt = GGDPOptimizer(torch.optim.SGD([w], lr=1.0), noise_multiplier=1.0, max_grad_norm=1.0,
                        expected_batch_size=4, beta=1.5, clip_norm_p=1.5)
    w.grad_sample = torch.zeros((0, 3, 5), dtype=dtype)
    with _device.accelerator_path(accel):
        opt.step()
    assert torch.isfinite(w).all() and bool((w != 0).any())  # noised, no error
