"""ℓp per-sample clipping: norms, the clipping bound (property tests), stability, NaN/inf, per-layer."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from opacus.optimizers import DPOptimizer, DPPerLayerOptimizer
from sync_counter import SyncCounter

from opacus_gg import _device, clipping
from opacus_gg.clipping import check_finite, clip_factors, per_sample_norms, total_sensitivity
from opacus_gg.optimizers import GGDPOptimizer, GGDPPerLayerOptimizer

PS = [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, math.inf]


@pytest.fixture(params=["cpu_chunked", "accelerator_one_pass"])
def path(request):
    """Run the test on the CPU chunked path and on the accelerator one-pass path (forced on CPU)."""
    with _device.accelerator_path(request.param == "accelerator_one_pass"):
        yield request.param


def _ref_norm(grads, p):
    flat = np.concatenate([g.reshape(len(g), -1).double().numpy() for g in grads], axis=1)
    return np.array([np.linalg.norm(r, ord=p) for r in flat])


@pytest.mark.parametrize("p", PS)
def test_per_sample_norms_are_tight_upper_bounds(p, path):
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(5, 3, 4, generator=g), torch.randn(5, 7, generator=g) * 10]
    ours = per_sample_norms(grads, p).double().numpy()
    ref = _ref_norm(grads, p)
    assert (ours >= ref).all() and (ours <= ref * (1 + 1e-4)).all()


@pytest.mark.parametrize("p", [1.0, 1.5, 2.0, 3.0])
def test_norm_upper_bound_on_a_million_entries(p, path):
    """torch's float32 vector_norm is ~3e-4 (p≠2) / 1e-5 (p=2) off on 10^6 entries; ours never under-estimates."""
    g = torch.Generator().manual_seed(1)
    grads = [torch.rand(4, 1_000_003, generator=g) * 2 - 1, torch.randn(4, 5000, generator=g)]
    ours = per_sample_norms(grads, p).numpy()
    ref = _ref_norm(grads, p)
    assert (ours >= ref).all() and (ours <= ref * (1 + 1e-4)).all(), (ours / ref - 1)


@pytest.mark.parametrize("p", [3.0, 8.0, 16.0])
def test_norm_stable_for_tiny_and_huge_entries(p, path):
    """Without rescaling, |x|^p under/overflows in float32 (an inf norm would zero the gradient)."""
    tiny = torch.full((2, 1000), 1e-20)
    huge = torch.full((2, 1000), 1e20)
    for x, scale in ((tiny, 1e-20), (huge, 1e20)):
        n = per_sample_norms([x], p)
        assert torch.isfinite(n).all() and (n > 0).all()
        np.testing.assert_allclose(n.numpy(), scale * 1000 ** (1 / p), rtol=1e-4)
        assert (n.numpy() >= scale * 1000 ** (1 / p) * (1 - 1e-6)).all()
    f = clip_factors(per_sample_norms([huge], p), 1.0)
    assert (f > 0).all()


def test_nonfinite_raises():
    for bad in (float("nan"), float("inf")):
        x = torch.randn(4, 6)
        x[2, 3] = bad
        with pytest.raises(FloatingPointError, match="NaN or inf"):
            check_finite(per_sample_norms([x, torch.randn(4, 2)], 3.0))
        with pytest.raises(FloatingPointError):
            check_finite(per_sample_norms([x], 2.0))


def test_total_sensitivity():
    assert total_sensitivity([3.0, 4.0], 2.0) == pytest.approx(5.0)
    assert total_sensitivity([1.0, 1.0], 1.0) == pytest.approx(2.0)
    assert total_sensitivity([1.0, 2.0], math.inf) == 2.0


def test_total_sensitivity_is_never_below_the_exact_norm():
    """The noise scale σ·‖(C_l)‖_p must cover the exact norm: checked at 60 digits on random per-layer bounds."""
    import mpmath
    rng = np.random.default_rng(7)
    with mpmath.workdps(60):
        for _ in range(200):
            n = int(rng.integers(2, 300))
            p = float(rng.choice([1.0, 1.5, 3.0, 7.3]))
            c = (rng.random(n) * 10.0 ** rng.uniform(-3, 3, n)).tolist()
            exact = mpmath.fsum(mpmath.mpf(x) ** p for x in c) ** (1 / mpmath.mpf(p))
            assert mpmath.mpf(total_sensitivity(c, p)) >= exact
        for n in (4000, 20000):  # many layers: the margin grows with L (no refusal)
            for p in (1.0, 1.5, 2.0, 3.0):
                c = (rng.random(n) * 10.0 ** rng.uniform(-1, 1, n)).tolist()
                exact = mpmath.fsum(mpmath.mpf(x) ** p for x in c) ** (1 / mpmath.mpf(p))
                got = mpmath.mpf(total_sensitivity(c, p))
                assert exact <= got <= exact * (1 + 3 * (n + 8) * 2.0 ** -52)  # the margin and the norm's own error
    assert total_sensitivity([1.0, 1.0, 1.0], 3.0) == pytest.approx(3 ** (1 / 3))


class _Holder:
    """Minimal param setup for driving an optimizer's clip_and_accumulate directly."""

    def __init__(self, shapes, batch, seed, spread):
        g = torch.Generator().manual_seed(seed)
        self.params = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
        for prm in self.params:
            scales = torch.exp(torch.randn(batch, *([1] * len(prm.shape)), generator=g) * spread)
            prm.grad_sample = torch.randn(batch, *prm.shape, generator=g) * scales


def _clipped_per_sample(opt_cls, holder, p, mgn):
    sgd = torch.optim.SGD(holder.params, lr=0.1)
    # beta=1.5 so that every p (also p=2) goes through the rounded-up ℓp norm
    opt = opt_cls(sgd, noise_multiplier=0.0, max_grad_norm=mgn, expected_batch_size=4, beta=1.5, clip_norm_p=p)
    # clip each sample alone so the per-sample clipped gradient is observable
    B = len(holder.params[0].grad_sample)
    full = [prm.grad_sample.clone() for prm in holder.params]
    out = []
    for i in range(B):
        for prm, gs in zip(holder.params, full):
            prm.grad_sample = gs[i : i + 1].clone()
            prm.summed_grad = None
        opt.clip_and_accumulate()
        out.append([prm.summed_grad.clone() for prm in holder.params])
    return opt, out


@settings(max_examples=25, deadline=None, database=None)
@given(
    p=st.sampled_from(PS),
    c=st.floats(0.01, 10.0),
    seed=st.integers(0, 10_000),
    spread=st.floats(0.0, 4.0),
    one_pass=st.booleans(),
    big=st.booleans(),
)
def test_flat_clipping_bound_property(p, c, seed, spread, one_pass, big):
    # big: a 2100-entry tensor, so that whole 1024-blocks (not only the remainder) are summed
    h = _Holder([(3, 4), (5,), (2, 2, 2)] + ([(3, 700)] if big else []), batch=6, seed=seed, spread=spread)
    orig = [prm.grad_sample.clone() for prm in h.params]
    with _device.accelerator_path(one_pass):
        _, out = _clipped_per_sample(GGDPOptimizer, h, p, c)
    for i, parts in enumerate(out):
        n = float(_ref_norm([x.unsqueeze(0) for x in parts], p)[0])  # exact (float64)
        assert n <= c * (1 + 1e-6), (n, c, p)
        before = float(_ref_norm([o[i : i + 1] for o in orig], p)[0])
        if before <= c * (1 - 1e-4):  # unclipped samples are (almost) untouched
            assert n == pytest.approx(before, rel=1e-5)


@settings(max_examples=25, deadline=None, database=None)
@given(
    p=st.sampled_from(PS),
    cs=st.lists(st.floats(0.01, 5.0), min_size=3, max_size=3),
    seed=st.integers(0, 10_000),
    spread=st.floats(0.0, 4.0),
    one_pass=st.booleans(),
)
def test_per_layer_clipping_bound_property(p, cs, seed, spread, one_pass):
    h = _Holder([(3, 4), (5,), (2, 1100)], batch=5, seed=seed, spread=spread)
    with _device.accelerator_path(one_pass):
        opt, out = _clipped_per_sample(GGDPPerLayerOptimizer, h, p, cs)
    assert opt.max_grad_norm == pytest.approx(total_sensitivity(cs, p))
    for parts in out:
        for x, c in zip(parts, cs):
            assert float(_ref_norm([x.unsqueeze(0)], p)[0]) <= c * (1 + 1e-6)
        total = float(_ref_norm([x.unsqueeze(0) for x in parts], p)[0])
        assert total <= opt.max_grad_norm * (1 + 1e-6)


@pytest.mark.parametrize("gg_cls,op_cls,mgn", [(GGDPOptimizer, DPOptimizer, 1.0), (GGDPPerLayerOptimizer, DPPerLayerOptimizer, [0.5, 1.0])])
def test_l2_clipping_equals_opacus(gg_cls, op_cls, mgn):
    g = torch.Generator().manual_seed(3)
    params = [torch.nn.Parameter(torch.zeros(4, 3)), torch.nn.Parameter(torch.zeros(3))]
    gs = [torch.randn(7, 4, 3, generator=g) * 3, torch.randn(7, 3, generator=g)]
    sums = []
    for cls, kw in ((gg_cls, {"beta": 2.0}), (op_cls, {})):
        for prm, x in zip(params, gs):
            prm.grad_sample = x.clone()
            prm.summed_grad = None
        opt = cls(torch.optim.SGD(params, lr=0.1), noise_multiplier=1.0, max_grad_norm=mgn, expected_batch_size=7, **kw)
        opt.clip_and_accumulate()
        sums.append([prm.summed_grad.clone() for prm in params])
        assert opt.max_grad_norm == pytest.approx(total_sensitivity(mgn, 2.0))
    for a, b in zip(*sums):
        assert torch.equal(a, b)


def test_optimizer_raises_on_nan_before_accumulating():
    prm = torch.nn.Parameter(torch.zeros(3))
    prm.grad_sample = torch.randn(4, 3)
    prm.grad_sample[1, 0] = float("nan")
    opt = GGDPOptimizer(torch.optim.SGD([prm], lr=0.1), noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=4, beta=1.5)
    with pytest.raises(FloatingPointError):
        opt.clip_and_accumulate()
    assert prm.summed_grad is None


@pytest.mark.parametrize("p", [1.5, 3.0, 7.0])
def test_direct_and_rescaled_paths_agree(p, path):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(6, 50, generator=g)
    y = x.clone()
    y[0, 0] = 1e30  # forces the rescaled path for the whole batch
    a = per_sample_norms([x], p)
    b = per_sample_norms([y], p)
    np.testing.assert_allclose(a[1:].numpy(), b[1:].numpy(), rtol=1e-6)
    ref = _ref_norm([x], p)
    assert (a.numpy() >= ref).all() and (a.numpy() <= ref * (1 + 1e-4)).all()


@pytest.mark.parametrize("p", [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 7.0])
def test_norm_bound_with_underflowing_entries(p, path):
    """Entries whose |x|^p underflows in float32 (1e-30…1e-12) next to normal ones: still an upper bound."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 3000, generator=g)
    x[:, ::2] *= 10.0 ** -torch.randint(12, 31, (4, 1500), generator=g).float()
    x[3] *= 1e-25  # a sample made only of tiny entries: takes the rescaled path
    ours = per_sample_norms([x], p).numpy()
    ref = _ref_norm([x], p)
    assert (ours >= ref).all() and (ours <= ref * (1 + 1e-4)).all(), ours / ref - 1


def test_zero_gradient_has_zero_norm(path):
    x = torch.zeros(3, 2500)
    x[1, 7] = 0.5
    n = per_sample_norms([x, torch.zeros(3, 4)], 3.0)
    assert n[0] == 0 and n[2] == 0 and 0.5 <= float(n[1]) <= 0.5 * (1 + 1e-4)


def test_chunked_path_has_no_full_size_temporary(monkeypatch):
    """The CPU |x|^p pass allocates scratch of at most 2 chunks, however large the per-sample gradients."""
    sizes = []
    orig_empty = torch.empty

    def spy(*args, **kwargs):
        t = orig_empty(*args, **kwargs)
        sizes.append(t.numel())
        return t

    monkeypatch.setattr(clipping.torch, "empty", spy)
    monkeypatch.setattr(clipping, "_CHUNK_ELEMS", 4096)
    x = torch.randn(64, 5000)
    for p in (1.0, 1.5, 2.5, 3.0, 4.0):
        sizes.clear()
        per_sample_norms([x], p)
        assert max(sizes) <= 4096, (p, sizes)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # the overflow below is handled, not reported by numpy
@pytest.mark.parametrize("p", [1.0, 1.5, 3.0, 4.0, math.inf])
def test_per_layer_norms_equal_per_tensor_norms(p, path):
    g = torch.Generator().manual_seed(9)
    grads = [torch.randn(5, 3000, generator=g), torch.randn(5, 7, generator=g) * 1e-30, torch.zeros(5, 4)]
    grads[0][2, 5] = 1e30  # overflow in float32 |x|^p for p > 1: that tensor takes the rescaled path
    for ours, x in zip(clipping.per_layer_norms(grads, p), grads):
        assert torch.equal(ours, per_sample_norms([x], p))
        ref = _ref_norm([x], p)
        assert (ours.numpy() >= ref).all() and (ours.numpy() <= ref * (1 + 1e-4)).all()


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("p", [1.5, 2.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_half_power_block_sums_past_range_give_the_rescaled_upper_bound_and_a_nan_is_refused(p, dtype, path):
    """The half powers' block sums made quiet past their dtype's range (main da1e28d): a row whose sum overflows,
    or one entry near the dtype's max, gets the rescaled path's bound, finite and ≥ the float64 norm (within its
    1 + 4ε);
    a NaN entry leaves its row's norm non-finite, so check_finite refuses the batch (no finite number for it)."""
    big = float(torch.finfo(dtype).max) / 2
    g = torch.ones(3, 3000, dtype=dtype)
    g[0, :] = big  # Σ|x|^p far past the dtype's range
    g[1, 7] = big
    norms = per_sample_norms([g], p)
    ref = _ref_norm([g], p)
    slack = 1e-4 + 4 * torch.finfo(dtype).eps  # the rescaled path's (1 + 4ε): M_i rounded to the dtype
    assert torch.isfinite(norms).all() and (norms.numpy() >= ref).all() and (norms.numpy() <= ref * (1 + slack)).all()
    g[2, 3] = float("nan")
    norms = per_sample_norms([g], p)
    assert not torch.isfinite(norms[2])
    with pytest.raises(FloatingPointError, match="NaN or inf"):
        check_finite(norms)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_numpy_sqrt_is_correctly_rounded(dtype):
    """The CPU half powers use numpy's sqrt (see clipping._pow_block_sums_); their error analysis assumes one
    rounding: relative error ≤ u, checked against float64/mpmath references over the whole exponent range,
    subnormals and the smallest normals included (evidence for this build's numpy, not a proof)."""
    fi = torch.finfo(dtype)
    g = torch.Generator().manual_seed(11)
    lo, hi = math.log2(fi.tiny * fi.eps), math.log2(fi.max) - 1
    a = torch.exp2(torch.rand(200_000, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
    a = torch.cat([a, fi.tiny * (1 + torch.rand(10_000, generator=g, dtype=torch.float64)).to(dtype)])
    got = torch.from_numpy(np.sqrt(a.numpy())).double()
    if dtype == torch.float32:
        exact = torch.sqrt(a.double())  # float64 is exact to 2^-53 relative here
    else:
        import mpmath

        idx = torch.randint(0, len(a), (2000,), generator=g)
        a, got = a[idx], got[idx]
        exact = torch.tensor([float(mpmath.sqrt(mpmath.mpf(float(v)))) for v in a], dtype=torch.float64)
    u = fi.eps / 2
    rel = ((got - exact).abs() / exact).max().item()
    assert rel <= u + (2.0**-52 if dtype == torch.float32 else 2.0**-53), rel


@pytest.mark.parametrize("p", [1.5, 2.5])
def test_half_powers_on_relu_like_gradients(p, path):
    """Mostly-zero gradients with denormal and smallest-normal entries (the zeros torch's CPU sqrt is slow on)."""
    g = torch.Generator().manual_seed(12)
    x = torch.randn(6, 40_000, generator=g) * (torch.rand(6, 40_000, generator=g) < 0.3)
    x[1, :500] = torch.finfo(torch.float32).tiny * torch.rand(500, generator=g) * 4  # normals and denormals
    x[2, ::3] = 1e-42
    ours = per_sample_norms([x], p).numpy()
    ref = _ref_norm([x], p)
    assert (ours >= ref).all() and (ours <= ref * (1 + 1e-4) + 1e-30).all(), ours / ref - 1


@pytest.mark.parametrize("p", [1.0, 1.5, 2.5, 3.0, 4.0, 7.0])
def test_norms_do_not_depend_on_the_number_of_threads(p, monkeypatch):
    """The CPU chunk loop is split over torch.get_num_threads() workers: same sums, bit for bit."""
    monkeypatch.setattr(clipping, "_CHUNK_ELEMS", 8192)
    g = torch.Generator().manual_seed(13)
    grads = [torch.randn(9, 3000, generator=g), torch.randn(9, 40, 50, generator=g)]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = per_sample_norms(grads, p)
        torch.set_num_threads(3)
        three = per_sample_norms(grads, p)
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, three)


def test_run_split_covers_the_range_once_and_reraises():
    seen = []
    _device.run_split(lambda lo, hi: seen.extend(range(lo, hi)), 10, 3)
    assert sorted(seen) == list(range(10))

    def fail(lo, hi):
        if lo > 0:
            raise RuntimeError("worker failed")

    with pytest.raises(RuntimeError, match="worker failed"):
        _device.run_split(fail, 4, 2)


# -- the accelerator path: clip factors with a device flag, checked once per step ------------------------


def _batch(kind: str, B: int = 5, n: int = 3000) -> torch.Tensor:
    g = torch.Generator().manual_seed(11)
    x = torch.randn(B, n, generator=g)
    if kind == "huge":
        x[1, 7] = 1e30  # Σ|x|^p overflows in float32 for p > 1: the rescaled path
    elif kind == "zero":
        x[2] = 0.0  # tiny (below 10^6·2n·tiny) with f = 1: needs nothing
    elif kind == "nan":
        x[3, 0] = float("nan")
    return x


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("kind", ["normal", "zero", "huge", "nan"])
def test_deferred_factors_flag_exactly_the_rare_cases(p, kind):
    x = _batch(kind)
    with _device.accelerator_path():
        f, redo = clipping.clip_factors_deferred([x[:, :1000], x[:, 1000:]], p, 1.0)
        expect = kind == "nan" or (kind == "huge" and not math.isinf(p) and p > 1.0)
        assert redo.shape == () and bool(redo) == expect
        if kind == "nan":
            return
        sync = clip_factors(per_sample_norms([x[:, :1000], x[:, 1000:]], p), 1.0)
    if not expect:  # final factors: the synchronising path's (up to its rescaled norms' rounding)
        np.testing.assert_allclose(f.numpy(), sync.numpy(), rtol=2e-4)
        if kind == "normal":
            assert torch.equal(f, sync)
        if kind == "zero":
            assert f[2] == 1.0 and sync[2] == 1.0 and (f[[0, 1, 3, 4]] < 1).all()


def test_deferred_factors_flag_a_tiny_sample_that_may_be_clipped():
    """A sample whose Σ|x|^p underflows: its one-pass bound is ≈ (2n·tiny)^{1/p}; with C below it the factor
    is < 1 and depends on the loose bound, so the rescaled path is asked for."""
    x = torch.randn(3, 1000)
    x[0] = 1e-20  # |x|^3 = 1e-60 flushes to zero in float32
    with _device.accelerator_path():
        assert not bool(clipping.clip_factors_deferred([x], 3.0, 1.0)[1])
        assert bool(clipping.clip_factors_deferred([x], 3.0, 1e-13)[1])


def _opt(cls, params, p, mgn, beta=1.5, **kw):
    return cls(torch.optim.SGD(params, lr=0.1), noise_multiplier=0.0, max_grad_norm=mgn, expected_batch_size=1,
               loss_reduction="sum", beta=beta, clip_norm_p=p, **kw)


def _per_sample_steps(cls, grads, p, mgn, accel):
    """Each sample alone through a full pre_step (σ = 0: p.grad is the clipped gradient); syncs per step."""
    out, syncs = [], []
    for i in range(len(grads[0])):
        params = [torch.nn.Parameter(torch.zeros(g.shape[1:])) for g in grads]
        for prm, g in zip(params, grads):
            prm.grad_sample = g[i : i + 1].clone()
        opt = _opt(cls, params, p, mgn)
        with _device.accelerator_path(accel), SyncCounter() as c:
            opt.pre_step()
        out.append([prm.grad.clone() for prm in params])
        syncs.append(c.count)
    return out, syncs


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, 8.0, math.inf])
@pytest.mark.parametrize("cls,mgn", [(GGDPOptimizer, 1.0), (GGDPPerLayerOptimizer, [0.5, 1.0])])
def test_accelerator_step_with_huge_and_tiny_gradients(p, cls, mgn):
    """Full steps on the accelerator path: huge (overflowing Σ|x|^p) and tiny per-sample gradients are clipped
    to ≤ C as on the CPU path, with one sync per step unless the rescaled path is needed."""
    g = torch.Generator().manual_seed(2)
    grads = [torch.randn(6, 40, 30, generator=g), torch.randn(6, 30, generator=g)]
    for k, s in enumerate([1e30, 1e18, 1e-20, 1e-30, 1.0, 0.0]):
        grads[0][k] *= s
        grads[1][k] *= s
    acc, syncs = _per_sample_steps(cls, grads, p, mgn, accel=True)
    cpu, _ = _per_sample_steps(cls, grads, p, mgn, accel=False)
    bounds = [mgn] if isinstance(mgn, float) else mgn
    for i, (a, c) in enumerate(zip(acc, cpu)):
        for x, y in zip(a, c):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=0.0)
        parts = [[x.unsqueeze(0) for x in a]] if len(bounds) == 1 else [[x.unsqueeze(0)] for x in a]
        for ps, c_l in zip(parts, bounds):
            assert float(_ref_norm(ps, p)[0]) <= c_l * (1 + 1e-6)
    assert syncs[2:] == [1, 1, 1, 1]  # tiny, zero and normal samples: the step's one check
    assert all(s >= 1 for s in syncs[:2])


@pytest.mark.parametrize("cls,mgn", [(GGDPOptimizer, 1.0), (GGDPPerLayerOptimizer, [0.5, 1.0])])
@pytest.mark.parametrize("beta,p", [(1.5, None), (2.0, 3.0), (2.0, None)])
def test_nan_refuses_its_whole_logical_batch(cls, mgn, beta, p, path):
    """A NaN per-sample gradient in a skipped (accumulating) physical batch or in the last one: FloatingPointError
    with the current message, and the whole logical batch is refused: its skip signals are all consumed, no noise,
    no accounting, no p.grad, parameters untouched; the next logical batch steps alone, on its own last physical
    batch (Opacus pops the skip signal only after clipping, so without this the queue ran one batch behind)."""
    g = torch.Generator().manual_seed(8)
    params = [torch.nn.Parameter(torch.randn(4, 3, generator=g)), torch.nn.Parameter(torch.randn(3, generator=g))]
    start = [prm.detach().clone() for prm in params]
    opt = _opt(cls, params, p, mgn, beta=beta)
    opt.noise_multiplier = 0.0
    accounted = []
    opt.attach_step_hook(lambda o: accounted.append(1))

    def physical(nan: bool, more: bool):
        opt.zero_grad()
        for prm in params:
            prm.grad_sample = torch.randn(5, *prm.shape, generator=g)
            prm.grad = torch.ones_like(prm)  # backward's (non-private) gradient: gone after a refusal, on both paths
        if nan:
            params[1].grad_sample[2, 1] = float("nan")
        opt.signal_skip_step(more)
        return opt.pre_step()

    with pytest.raises(FloatingPointError, match="NaN or inf for sample"):  # logical batch 1: NaN, then clean
        physical(nan=True, more=True)
    assert physical(nan=False, more=False) is False  # consumed without effect
    assert physical(nan=False, more=True) is False  # logical batch 2: clean, then NaN (raised in add_noise
    with pytest.raises(FloatingPointError, match="NaN or inf for sample"):  # on the accelerator path)
        physical(nan=True, more=False)
    assert not opt._step_skip_queue and not accounted and not opt._step_checks
    for prm, x in zip(params, start):
        assert prm.summed_grad is None and prm.grad is None and torch.equal(prm.detach(), x)
    assert physical(nan=False, more=True) is False  # logical batch 3: two clean physical batches, one step
    first = [prm.summed_grad.clone() for prm in params]
    fresh = [torch.nn.Parameter(prm.detach().clone()) for prm in params]
    for q, prm in zip(fresh, params):
        q.grad_sample = prm.grad_sample.clone()
    _opt(cls, fresh, p, mgn, beta=beta).clip_and_accumulate()
    for f, q in zip(first, fresh):  # nothing of the refused batches is left in the sum
        assert torch.equal(f, q.summed_grad)
    assert physical(nan=False, more=False) is True and accounted == [1] and not opt._step_skip_queue
    for prm in params:  # σ = 0, sum reduction: p.grad is the clipped sum of batch 3's two physical batches
        assert torch.allclose(prm.grad, prm.summed_grad.view_as(prm))


@pytest.mark.parametrize("beta", [1.5, 2.0])
@pytest.mark.parametrize("seeded", [True, False])
def test_refused_step_leaves_the_noise_generator_as_if_it_never_happened(beta, seeded, path):
    """σ = 1: a refused step (NaN per-sample gradient; on the accelerator path the noise is drawn before the step's
    one check refuses it) puts the generator back (``noise_generator``, or torch's default one when it is None):
    its state and the next step's noised gradient equal those of a run that never saw the refused step."""
    def run(refused_first: bool):
        g = torch.Generator().manual_seed(8)
        params = [torch.nn.Parameter(torch.randn(4, 3, generator=g)), torch.nn.Parameter(torch.randn(3, generator=g))]
        torch.manual_seed(123)
        opt = _opt(GGDPOptimizer, params, None, 1.0, beta=beta,
                   generator=torch.Generator().manual_seed(5) if seeded else None)
        opt.noise_multiplier = 1.0
        for nan in [True, False] if refused_first else [False]:
            opt.zero_grad()
            for prm in params:
                prm.grad_sample = torch.randn(5, *prm.shape, generator=g if nan else torch.Generator().manual_seed(9))
            if nan:
                params[1].grad_sample[2, 1] = float("nan")
                with pytest.raises(FloatingPointError):
                    opt.pre_step()
            else:
                assert opt.pre_step() is True
        state = (opt.generator if seeded else torch.default_generator).get_state()
        return [prm.grad.clone() for prm in params], state

    (grads, state), (ref_grads, ref_state) = run(True), run(False)
    assert torch.equal(state, ref_state)
    for a, b in zip(grads, ref_grads):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("p", [1.0, 1.5, 2.0, 3.0, 4.0])
def test_16_bit_gradients_are_summed_in_float32(dtype, p, path):
    """16-bit per-sample gradients (autocast): |x|^p and the 1024-term block sums are formed in float32, so the
    bound is as tight as for float32 (a bfloat16 block sum could be off by γ_1023 ≈ 4: a bound up to 5× large)."""
    g = torch.Generator().manual_seed(14)
    grads = [(torch.randn(4, 3000, generator=g) * 0.1).to(dtype), torch.randn(4, 7, 9, generator=g).to(dtype)]
    ours = per_sample_norms(grads, p).numpy()
    ref = _ref_norm(grads, p)
    assert (ours >= ref).all() and (ours <= ref * (1 + 1e-4)).all(), ours / ref - 1
