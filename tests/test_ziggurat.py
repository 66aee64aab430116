"""The Ziggurat's accelerator-only branches (one pass, explicit random range, static-shape finish), run on CPU
through the internal switch ``_device.accelerator_path``; the CPU path's threads; the tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from test_distribution import _gennorm

from opacus_gg import _device
from opacus_gg import _ziggurat as Z
from opacus_gg import distribution as D


def test_switch_is_scoped():
    cpu = torch.device("cpu")
    assert not _device.uses_accelerator_path(cpu)
    with _device.accelerator_path():
        assert _device.uses_accelerator_path(cpu)
        with _device.accelerator_path(False):
            assert not _device.uses_accelerator_path(cpu)
        assert _device.uses_accelerator_path(cpu)
    assert not _device.uses_accelerator_path(cpu)


def test_accelerator_path_asks_random_for_an_explicit_range(monkeypatch):
    calls, sizes = [], []
    orig = torch.Tensor.random_

    def spy(self, *args, **kwargs):
        calls.append(args)
        sizes.append(self.numel())
        return orig(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "random_", spy)
    n = Z.CHUNK * 2 + 5
    with _device.accelerator_path():
        D.sample(n, 1.5, 1.0, generator=torch.Generator().manual_seed(0))
        D.sample(100, 1.5, 1.0, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert calls[0] == (0, 2**31)  # one pass over all n draws: a single random_ call for the bulk
    assert (0, 2**62) in calls
    calls.clear()
    sizes.clear()
    D.sample(n, 1.5, 1.0, generator=torch.Generator().manual_seed(0))
    assert calls[0] == () and sizes[0] == 4  # CPU path: the bulk's words come from PCG64, seeded by 4 words
    assert max(sizes) < n // 10  # (then only the small float64 finish of the rejected draws)


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0, 8.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_accelerator_path_ks_against_gennorm(beta, dtype):
    with _device.accelerator_path():
        x = D.sample(300_000, beta, 1.3, generator=torch.Generator().manual_seed(77), dtype=dtype)
    assert x.dtype == dtype and torch.isfinite(x).all()
    assert stats.kstest(x.double().numpy(), _gennorm(beta, 1.3).cdf).pvalue > 1e-3
    # power: the same draws are rejected as samples of a nearby shape
    other = beta + 0.5 if beta <= 4 else 2 * beta
    assert stats.kstest(x.double().numpy(), _gennorm(other, 1.3).cdf).pvalue < 1e-6


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0, 8.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_accelerator_path_tail_masses(beta, dtype):
    """P(|X| > t) at t = r/2, r, 1.2 r and 2r against the exact sf (binomial, 5 standard deviations)."""
    r = Z.table(beta)[0]
    n = 2_000_000
    with _device.accelerator_path():
        x = D.sample(n, beta, 1.0, generator=torch.Generator().manual_seed(6), dtype=dtype).abs()
    for t in (0.5 * r, r, 1.2 * r, 2 * r):
        p = 2 * float(D.sf(t, beta, 1.0))
        k = int((x > t).sum())
        assert abs(k - n * p) < 5 * math.sqrt(n * p * (1 - p)) + 1, (t, k, n * p)


def test_accelerator_path_reproducible_and_two_sample_equal_to_cpu_path():
    n = 200_000
    with _device.accelerator_path():
        a = D.sample(n, 1.5, 1.0, generator=torch.Generator().manual_seed(3))
        b = D.sample(n, 1.5, 1.0, generator=torch.Generator().manual_seed(3))
    c = D.sample(n, 1.5, 1.0, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b)
    assert stats.ks_2samp(a.numpy(), c.numpy()).pvalue > 1e-3


def test_cpu_loops_run_on_one_thread_and_restore_the_setting(monkeypatch):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = []
        orig = Z._sample_cpu
        monkeypatch.setattr(Z, "_sample_cpu", lambda *a: seen.append(torch.get_num_threads()) or orig(*a))
        D.sample(1000, 1.5, 1.0)
        assert seen and set(seen) == {1} and torch.get_num_threads() == 2
        with _device.one_thread():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpu_output_does_not_depend_on_the_number_of_workers(dtype):
    """Each block of STREAM_DRAWS has its own stream, so splitting the blocks over threads changes nothing."""
    n = Z.STREAM_DRAWS * 2 + 17
    a = Z._sample_cpu(n, 1.5, 0.7, torch.Generator().manual_seed(3), dtype, 1)
    for workers in (2, 3, 8):
        assert torch.equal(a, Z._sample_cpu(n, 1.5, 0.7, torch.Generator().manual_seed(3), dtype, workers))


def test_sample_splits_over_the_torch_thread_count(monkeypatch):
    before = torch.get_num_threads()
    seen = []
    orig = Z._sample_cpu
    monkeypatch.setattr(Z, "_sample_cpu", lambda *a: seen.append(a[-1]) or orig(*a))
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            D.sample(1000, 3.0, 1.0)
    finally:
        torch.set_num_threads(before)
    assert seen[0] == 1 and 2 in seen[1:]


def test_worker_errors_reach_the_caller(monkeypatch):
    orig = Z.word_stream

    def fail_on_block_1(seed, block):
        if block == 1:
            raise RuntimeError("block 1")
        return orig(seed, block)

    monkeypatch.setattr(Z, "word_stream", fail_on_block_1)
    with pytest.raises(RuntimeError, match="block 1"):
        Z._sample_cpu(Z.STREAM_DRAWS * 2, 1.5, 1.0, torch.Generator().manual_seed(0), torch.float32, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpu_words_are_pcg64_streams_seeded_by_four_words_of_the_generator(dtype, monkeypatch):
    """Independent re-derivation of the CPU path's words: the generator gives one 4-word int64 ``random_``
    call; block j of STREAM_DRAWS draws reads PCG64(SeedSequence(seed, spawn_key=(j,))); then idx = w & 511
    and k = w >> 10 (32-bit words, float32) or w >> 12 (64-bit words, float64)."""
    g, ref = torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)
    seed = Z._seed_words(g)
    expected = torch.empty(4, dtype=torch.int64).random_(generator=ref)
    assert np.array_equal(seed, expected.numpy()) and torch.equal(g.get_state(), ref.get_state())
    m = 5000 if dtype == torch.float32 else 3000
    shift = 10 if dtype == torch.float32 else 12
    for block in (0, 1):
        raw = np.random.PCG64(np.random.SeedSequence(expected.numpy(), spawn_key=(block,))).random_raw(3000)
        words = raw.view(np.uint32)[:m].astype(np.uint64) if dtype == torch.float32 else raw
        idx = torch.empty(m, dtype=Z._bits(dtype, False)[0])
        k = Z._split_words(Z.word_stream(seed, block), dtype, idx)
        assert np.array_equal(idx.numpy().astype(np.uint64), words & 511)
        assert np.array_equal(k.numpy().astype(np.uint64), words >> shift)
        assert int(k.max()) < 2 ** Z._bits(dtype, False)[3] and int(k.min()) >= 0
    blocks = []
    orig = Z.word_stream
    monkeypatch.setattr(Z, "word_stream", lambda s, j: blocks.append(j) or orig(s, j))
    Z._sample_cpu(Z.STREAM_DRAWS * 2 + 1, 1.5, 1.0, torch.Generator().manual_seed(0), dtype, 2)
    assert sorted(blocks[:3]) == [0, 1, 2]  # one stream per block (then the small redraws' own calls)


def test_cpu_path_is_a_function_of_the_generator_state():
    a = D.sample(100_000, 1.5, 1.0, generator=torch.Generator().manual_seed(5))
    b = D.sample(100_000, 1.5, 1.0, generator=torch.Generator().manual_seed(5))
    c = D.sample(100_000, 1.5, 1.0, generator=torch.Generator().manual_seed(6))
    torch.manual_seed(5)
    d = D.sample(100_000, 1.5, 1.0)  # the default generator
    assert torch.equal(a, b) and torch.equal(a, d) and not torch.equal(a, c)


def _rejected(n, beta, dtype, seed):
    """(u, idx) of the fast-test failures among n accelerator-path candidates."""
    out = torch.empty(n, dtype=dtype)
    u, idx, rej = Z._candidates(n, beta, 1.0, torch.Generator().manual_seed(seed), torch.device("cpu"), dtype, out)
    pos = rej.nonzero().flatten()
    return u[pos], idx[pos].long()


def _resolved(u, idx, beta, dtype, seed, piece=1 << 30):
    """_resolve on the slots (u, idx), their codes placed in a buffer of their own (pools of k each)."""
    k = idx.numel()
    buf = torch.empty(k + 1, dtype=dtype)
    buf[:k].view(Z._bits(dtype, True)[0]).copy_(Z._encode_(u.clone(), idx))
    status = Z._resolve(torch.arange(k), k, beta, 1.0, torch.Generator().manual_seed(seed), torch.device("cpu"),
                        dtype, (k, k), buf, piece)
    assert not (status & 3).any()  # pools of k: nothing left (at these sizes)
    return buf[:k]


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0, 8.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_static_slot_resolution_has_the_law_of_fix(beta, dtype):
    """The accelerator's static resolution of fast-test failures (own wedge test, k-th terminal candidate of
    the restart pool, k-th accepted tail proposal) against the dynamic ``_fix`` on the same (u, idx): two
    samples of the same conditional law (all ≈ 40 000 values go through the rare branches)."""
    u, idx = _rejected(2_000_000, beta, dtype, seed=3)
    ours = _resolved(u, idx, beta, dtype, seed=4).numpy()
    ref = Z._fix(u, idx, beta, 1.0, torch.Generator().manual_seed(5), torch.device("cpu"), dtype).numpy()
    assert stats.ks_2samp(ours, ref).pvalue > 1e-3
    r = Z.table(beta)[0]
    k_ours, k_ref = int((abs(ours) > r).sum()), int((abs(ref) > r).sum())  # the tail's share
    assert abs(k_ours - k_ref) < 5 * math.sqrt(k_ours + k_ref) + 1


def test_slot_resolution_test_sees_a_skipped_wedge_test(monkeypatch):
    """Power: accepting the wedge draws without their vertical test is rejected by the two-sample test."""
    u, idx = _rejected(2_000_000, 1.5, torch.float32, seed=3)
    ref = Z._fix(u, idx, 1.5, 1.0, torch.Generator().manual_seed(5), torch.device("cpu"), torch.float32).numpy()
    orig = Z._vertical
    monkeypatch.setattr(Z, "_vertical", lambda u, idx, *a, **kw: (orig(u, idx, *a, **kw)[0], (idx >> 1) != 0))
    assert stats.ks_2samp(_resolved(u, idx, 1.5, torch.float32, seed=4).numpy(), ref).pvalue < 1e-10


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpu_exact_finish_in_pieces_is_the_whole_finish(dtype, monkeypatch):
    """The CPU path's exact finish of its rejected draws in pieces of any size gives the same draws bit for bit
    as one piece (the whole finish: wedge uniforms, tail draws, restarts in one call each)."""
    outs = []
    for piece in (1 << 30, 100, 4097):
        monkeypatch.setattr(Z, "_fix_piece", lambda n: piece)
        outs.append(Z.sample(200_001, 1.0, 0.7, torch.Generator().manual_seed(8), "cpu", dtype))
    assert all(torch.equal(outs[0], o) for o in outs[1:]) and torch.isfinite(outs[0]).all()


@pytest.mark.parametrize("density", [0.0, 0.01, 0.5, 1.0])
def test_kth_true_position(density):
    g = torch.Generator().manual_seed(2)
    mask = torch.rand(500, generator=g) < density
    rank = torch.randint(-1, 300, (400,), generator=g)
    true = mask.nonzero().flatten()
    for size in (300, 7):  # nonzero_static of ≥ every rank, and of fewer (the pool smaller than K)
        at, found = Z._kth(torch.nonzero_static(mask, size=size, fill_value=500).flatten(), 500, rank)
        for r, a, f in zip(rank.tolist(), at.tolist(), found.tolist()):
            r = max(r, 0)
            assert f == (r < min(true.numel(), size))
            if f:
                assert a == true[r]


@pytest.mark.parametrize("n", [1, 9, 1000, 4099])
@pytest.mark.parametrize("density", [0.0, 0.002, 0.3, 1.0])
def test_first_set_positions_equal_nonzero_static_of_the_unpacked_mask(n, density):
    """The first k rejected positions found from the packed mask, a few bytes at a time, are
    ``nonzero_static(mask, size=k, fill_value=n)`` of the whole mask (fewer, exactly k, and more than k set)."""
    mask = torch.rand(n, generator=torch.Generator().manual_seed(n)) < density
    packed = torch.empty(-(-n // 8), dtype=torch.uint8)
    Z._pack(mask, packed)
    for k in {1, 5, max(int(mask.sum()), 1), int(mask.sum()) + 3}:
        ref = torch.nonzero_static(mask, size=k, fill_value=n).flatten()
        for piece in (8, 24, 1 << 20):
            assert torch.equal(Z._first_set(packed, n, k, piece).long(), ref)


def test_a_new_noise_scale_uploads_no_table(monkeypatch):
    """A σ schedule changes the scale every step: the scaled tables are derived on the device from the
    scale-free ones (uploaded once per β), so no host-to-device copy (a CUDA synchronisation) follows."""
    Z._TENSORS.clear()
    with _device.accelerator_path():
        Z.sample(1000, 1.5, 0.7, torch.Generator().manual_seed(0), "cpu", torch.float32)
        made = []
        orig = torch.tensor
        monkeypatch.setattr(Z.torch, "tensor", lambda *a, **k: made.append(1) or orig(*a, **k))
        Z.sample(1000, 1.5, 0.9, torch.Generator().manual_seed(0), "cpu", torch.float32)
    assert made == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scaled_tables_are_the_float64_products_rounded_once(dtype):
    r, v, xs, gs, gt = Z.table(1.5)
    fac = Z._bits(dtype, False)[4]
    width, _ = Z._tensors(1.5, 0.37, "cpu", dtype)
    ref = np.repeat(xs[:-1], 2) * np.tile([0.37 * fac, -0.37 * fac], Z.LAYERS)
    assert torch.equal(width, torch.tensor(ref, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("budgets", [None, (5, 40, 40), (600, 5, 5)])
def test_accelerator_draw_in_chunks_is_the_one_pass_stream(dtype, budgets, monkeypatch):
    """The accelerator path's candidate pass in chunks (its memory: a 1-bit mask per draw beyond the output) and
    the resolution of its rejected draws in pieces give, on CPU, the same draws bit for bit as one pass over the
    whole buffer resolved at once (the stream's definition), also when the budgets are exceeded (more rejections
    than slots; pools exhausted) and the Finisher decodes the unresolved draws' codes from the output."""
    if budgets:
        monkeypatch.setattr(Z, "_budgets", lambda n, b, w: budgets)
    outs = []
    for chunk, piece in ((1 << 30, 1 << 30), (1000, 16), (1000, 4096)):
        monkeypatch.setattr(Z, "ACCEL_MIN_CHUNK", chunk)
        monkeypatch.setattr(Z, "ACCEL_CHUNK", chunk)
        monkeypatch.setattr(Z, "_slot_piece", lambda n: piece)
        g = torch.Generator().manual_seed(4)
        with _device.accelerator_path():
            x, fin = Z.sample_deferred(30_001, 1.5, 0.7, g, torch.device("cpu"), dtype)
            assert bool(fin.pending) == bool(budgets)
            fin.finish()
        outs.append(x)
    assert all(torch.equal(outs[0], o) for o in outs[1:]) and torch.isfinite(outs[0]).all()


@pytest.mark.parametrize("n", [1, 7, 8, 9, 1000, 1003])
def test_packed_rejection_mask_round_trips(n):
    g = torch.Generator().manual_seed(n)
    mask = torch.rand(n, generator=g) < 0.3
    packed = torch.empty(-(-n // 8), dtype=torch.uint8)
    Z._pack(mask, packed)
    assert torch.equal(Z._unpack(packed, n), mask)
