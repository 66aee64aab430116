"""At most one host synchronisation per optimizer step on the accelerator path (forced on CPU through
``_device.accelerator_path``), with every rare case still exact: the sampler's static budgets forced tiny
(the Finisher completes the draws; KS and tail masses against the exact law), and virtual (skipped) steps."""

from __future__ import annotations

import math

import pytest
import torch
from opacus.utils.batch_memory_manager import BatchMemoryManager
from scipy import stats
from sync_counter import SyncCounter
from test_distribution import _gennorm
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine, _device
from opacus_gg import _ziggurat as Z
from opacus_gg import distribution as D

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

def test_counter_sees_every_kind_of_sync():
    t = torch.randn(50)
    for f in (
        lambda: bool(t.sum() > 0),
        lambda: t.max().item(),
        lambda: float(t.sum()),
        lambda: t.nonzero(),
        lambda: t[t > 0],
        lambda: t.masked_select(t > 0),
        lambda: t.tolist(),
        lambda: t.cpu(),
        lambda: torch.unique(t),
        lambda: torch.arange(3).repeat_interleave(torch.tensor([1, 2, 0])),
        lambda: torch.equal(t, t),
    ):
        with SyncCounter() as c:
            f()
        assert c.count == 1, c.ops
    with SyncCounter() as c:  # the static-shape tools of the accelerator path are free
        torch.nonzero_static(t > 0, size=10, fill_value=-1)
        (t > 0).cumsum(0)
        t.index_select(0, torch.arange(5))
        torch.zeros(51).index_copy_(0, torch.arange(5), t[:5])
        torch.where(t > 0, t, 0.0)
    assert c.count == 0, c.ops


def _engine_setup(beta, clipping, p=None, sigma=1.0, batch=16, seed=0, device="cpu", dtype=torch.float32,
                  engine=None):
    """A small classifier made private (Poisson sampling) on ``device`` in ``dtype``, with the device's noise
    generator; ``engine``: the GGPrivacyEngine to use (a fresh one if None)."""
    torch.manual_seed(seed)
    X, y = torch.randn(64, 10), torch.randint(0, 3, (64,))
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3)).to(device=device, dtype=dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    mgn = 1.0 if clipping == "flat" else [0.5, 0.5, 0.6, 0.3]
    dl = DataLoader(TensorDataset(X, y), batch_size=batch)
    return (engine or GGPrivacyEngine()).make_private(
        module=model, optimizer=opt, data_loader=dl, noise_multiplier=sigma, max_grad_norm=mgn, beta=beta,
        clip_norm_p=p, clipping=clipping, noise_generator=torch.Generator(device=device).manual_seed(1),
    )


def _counted_step(model, opt, xb, yb) -> int:
    with SyncCounter() as c:
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
    return c.count


CASES = [(b, cl, None) for b in (1.0, 1.5, 3.0) for cl in ("flat", "per_layer")] + [
    (2.0, "flat", 3.0), (2.0, "per_layer", 3.0), (2.0, "flat", None), (2.0, "per_layer", None),
]


@pytest.mark.parametrize("beta,clipping,p", CASES)
def test_one_sync_per_training_step(beta, clipping, p):
    model, opt, dl = _engine_setup(beta, clipping, p)
    with _device.accelerator_path():
        counts = [_counted_step(model, opt, xb, yb) for xb, yb in dl]
    assert counts == [1] * len(counts)  # exactly one: the step's checks are read, never skipped
    with SyncCounter() as c:  # CPU path: as before, several (the counter can fail)
        for xb, yb in dl:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    if beta != 2.0 or p is not None or clipping == "per_layer":
        assert c.count > len(counts)


@pytest.mark.parametrize("beta,clipping", [(1.5, "flat"), (3.0, "per_layer"), (2.0, "flat")])
def test_one_sync_per_virtual_step(beta, clipping):
    """BatchMemoryManager splits each Poisson batch into physical batches of 4: every optimizer.step(),
    skipped (clip and accumulate only) or not, synchronises once."""
    model, opt, dl = _engine_setup(beta, clipping, batch=16)
    counts, skipped = [], 0
    bmm = BatchMemoryManager(data_loader=dl, max_physical_batch_size=4, optimizer=opt)
    with _device.accelerator_path(), bmm as mdl:
        for xb, yb in mdl:
            with SyncCounter() as c:
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
                skipped += opt._is_last_step_skipped
                opt.zero_grad()
            counts.append(c.count)
    assert skipped > 0 and counts == [1] * len(counts)


@pytest.mark.parametrize("clipping", ["flat", "per_layer"])
def test_accelerator_steps_equal_cpu_steps_without_noise(clipping):
    """σ = 0: the deferred clipping (fast path, optimistic sum) trains as the synchronising CPU path."""
    out = []
    for accel in (False, True):
        model, opt, dl = _engine_setup(1.5, clipping, sigma=0.0)
        torch.manual_seed(5)  # Poisson sampling draws from the global RNG
        bmm = BatchMemoryManager(data_loader=dl, max_physical_batch_size=8, optimizer=opt)
        with _device.accelerator_path(accel), bmm as mdl:
            for xb, yb in mdl:
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
                opt.zero_grad()
        out.append([q.detach().clone() for q in model.parameters()])
    for a, b in zip(*out):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


# -- the sampler's rare branches, forced by tiny static budgets ----------------------------------------


@pytest.fixture
def finishes(monkeypatch):
    """Counts Finisher.finish calls."""
    calls = []
    orig = Z.Finisher.finish
    monkeypatch.setattr(Z.Finisher, "finish", lambda self: calls.append(1) or orig(self))
    return calls


#: (K slots, R restart candidates, T tail proposals): every budget exhausted, then one at a time
TINY = [(1, 1, 1), (4, 10**6, 10**6), (10**6, 1, 10**6), (10**6, 10**6, 1)]


def _tail_masses_ok(x: torch.Tensor, beta: float, scale: float = 1.0) -> None:
    """P(|X| > t) at t = r/2, r, 1.2r, 2r (times ``scale``) against the exact sf (binomial, 5 standard deviations)."""
    r, n = Z.table(beta)[0] * scale, x.numel()
    a = x.abs()
    for t in (0.5 * r, r, 1.2 * r, 2 * r):
        p = 2 * float(D.sf(t, beta, scale))
        k = int((a > t).sum())
        assert abs(k - n * p) < 5 * math.sqrt(n * p * (1 - p)) + 1, (t, k, n * p)


@pytest.mark.parametrize("budgets", TINY)
@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0])
def test_exhausted_budgets_keep_the_law_exact(beta, budgets, monkeypatch, finishes):
    monkeypatch.setattr(Z, "_budgets", lambda n, b, w: budgets)
    with _device.accelerator_path():
        x = D.sample(1_000_000, beta, 1.0, generator=torch.Generator().manual_seed(21))
    assert finishes and torch.isfinite(x).all()
    assert stats.kstest(x.double().numpy(), _gennorm(beta, 1.0).cdf).pvalue > 1e-3
    _tail_masses_ok(x, beta)


def test_exhausted_budgets_float64(monkeypatch, finishes):
    monkeypatch.setattr(Z, "_budgets", lambda n, b, w: (3, 2, 1))
    with _device.accelerator_path():
        x = D.sample(500_000, 1.5, 0.7, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    assert finishes and x.dtype == torch.float64
    assert stats.kstest(x.numpy(), _gennorm(1.5, 0.7).cdf).pvalue > 1e-3


def test_tail_slots_continue_as_tail_proposals(monkeypatch, finishes):
    """With no tail proposals, every tail slot is finished by ``tail`` (the slot's own tail sequence);
    finishing them by a fresh draw instead (a restart) would lose the tail mass, and the test sees it."""
    monkeypatch.setattr(Z, "_budgets", lambda n, b, w: (10**6, 10**6, 1))
    calls = []
    orig_tail = Z.tail
    monkeypatch.setattr(Z, "tail", lambda k, *a: calls.append(k) or orig_tail(k, *a))
    with _device.accelerator_path():
        x = D.sample(1_000_000, 1.0, 1.0, generator=torch.Generator().manual_seed(4))
    assert finishes and sum(calls) > 100
    _tail_masses_ok(x, 1.0)
    # the wrong continuation (a tail slot restarted from scratch) fails the same test
    monkeypatch.setattr(Z, "tail", lambda k, beta, r, g, dev: Z.sample(k, beta, 1.0, g, dev, torch.float64).abs())
    with _device.accelerator_path():
        y = D.sample(1_000_000, 1.0, 1.0, generator=torch.Generator().manual_seed(4))
    with pytest.raises(AssertionError):
        _tail_masses_ok(y, 1.0)


@pytest.mark.parametrize("budgets", [None, (2, 3, 1)])
def test_deferred_sampler_reproducible(budgets, monkeypatch):
    if budgets:
        monkeypatch.setattr(Z, "_budgets", lambda n, b, w: budgets)
    with _device.accelerator_path():
        a, b, c = (D.sample(100_000, 3.0, 1.0, generator=torch.Generator().manual_seed(s)) for s in (9, 9, 10))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("beta", [1.0, 1.5, 3.0, 8.0])
@pytest.mark.parametrize("n", [1, 1000, 1_000_003])
def test_default_budgets_leave_nothing_pending(beta, n, finishes):
    g = torch.Generator().manual_seed(n)
    with _device.accelerator_path():
        for dtype in (torch.float32, torch.float64):
            x, fin = D.sample_deferred(n, beta, 1.0, generator=g, dtype=dtype)
            assert not bool(fin.pending) and x.shape == (n,) and torch.isfinite(x).all()
            D.sample(n, beta, 1.0, generator=g, dtype=dtype)
    assert not finishes


def test_deferred_sample_synchronises_nothing():
    with _device.accelerator_path():
        D.sample_deferred(10, 1.5, 1.0)  # tables built outside the count
        with SyncCounter() as c:
            x, fin = D.sample_deferred(200_000, 1.5, 1.0, generator=torch.Generator().manual_seed(0))
        assert c.count == 0, c.ops
        with SyncCounter() as c:
            D.sample(200_000, 1.5, 1.0, generator=torch.Generator().manual_seed(0))
        assert c.count == 1, c.ops  # the pending flag, read once
