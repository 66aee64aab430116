"""σ solver: never overshoots the target, is tight to the tolerance, and fails clearly; input validation."""

from __future__ import annotations

import math

import pytest
import torch
from opacus.data_loader import DPDataLoader
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg.accountants import compute_delta, compute_epsilon, compute_epsilon_history, get_noise_multiplier
from opacus_gg.accountants import solver


@pytest.mark.parametrize("target,beta,q,steps", [(1.0, 2.0, 0.02, 200), (3.0, 1.5, 0.01, 300), (0.5, 1.0, 0.05, 50)])
def test_solver_never_overshoots(target, beta, q, steps):
    sigma = get_noise_multiplier(target_epsilon=target, target_delta=1e-5, sample_rate=q, steps=steps, beta=beta, dim=1)
    eps = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=1e-5, beta=beta, dim=1).epsilon
    assert eps <= target
    assert target - eps <= 0.01 + 1e-9
    # a slightly smaller σ would exceed the target (the bracket really was bisected)
    eps_less = compute_epsilon(noise_multiplier=sigma * 0.97, sample_rate=q, steps=steps, delta=1e-5,
                               beta=beta, dim=1).epsilon
    assert eps_less > target - 0.02


def test_solver_epochs_and_unreachable():
    s1 = get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.05, epochs=2)
    s2 = get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.05, steps=40)
    assert s1 == s2
    with pytest.raises(ValueError, match="unreachable"):
        get_noise_multiplier(target_epsilon=0.05, target_delta=1e-5, sample_rate=1.0, steps=100,
                             beta=2.0, sigma_max=20.0)
    with pytest.raises(ValueError, match="steps or epochs"):
        get_noise_multiplier(target_epsilon=1.0, target_delta=1e-5, sample_rate=0.1)


def test_delta_and_epsilon_agree():
    kw = dict(noise_multiplier=1.0, sample_rate=0.02, steps=300, beta=1.5, dim=1)
    rep = compute_epsilon(delta=1e-5, **kw)
    d_at = compute_delta(epsilon=rep.epsilon_estimate, **kw)
    # ε_estimate is the PRV point estimate, not the bound: δ there is δ up to eps_error's effect (2 %)
    assert d_at == pytest.approx(1e-5, rel=0.02)
    assert compute_delta(epsilon=rep.epsilon, **kw) <= 1e-5


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(noise_multiplier=-1.0), "noise_multiplier"),
        (dict(sample_rate=0.0), "sample_rate"),
        (dict(sample_rate=1.5), "sample_rate"),
        (dict(delta=1.0), "delta"),
        (dict(beta=0.5), "beta"),
        (dict(dim=0), "dim"),
        (dict(dim=2.5), "dim"),
        (dict(clip_norm_p=0.5), "clip_norm_p"),
        (dict(steps=0), "steps"),
        (dict(mode="magic"), "mode"),
        (dict(eps_error=-1.0), "eps_error"),
    ],
)
def test_bad_input_names_parameter(kwargs, name):
    base = dict(noise_multiplier=1.0, sample_rate=0.1, steps=10, delta=1e-5)
    base.update(kwargs)
    with pytest.raises(ValueError, match=name):
        compute_epsilon(**base)


def test_empty_history_and_bad_entries():
    assert compute_epsilon_history([], 1e-5).epsilon == 0.0
    with pytest.raises(ValueError, match="history entries"):
        compute_epsilon_history([(1.0, 0.1)], 1e-5)


def test_accountant_beta_above_2_is_proven_by_the_ball_rdp_bound():
    """β > 2 with ℓβ clipping in d > 1: get_epsilon publishes the proven RDP bound over every shift (no
    "NOT certified" warning), at least the equal-spread PRV ε, which it reports beside it."""
    import warnings as _w

    from opacus_gg.accountants import GGPRVAccountant

    acc = GGPRVAccountant()
    for _ in range(3):
        acc.step(noise_multiplier=2.0, sample_rate=0.1, beta=3.0, dim=4, clip_norm_p=3.0)
    with _w.catch_warnings(record=True) as rec:
        _w.simplefilter("always")
        eps = acc.get_epsilon(1e-5)
    assert not any("NOT a certified guarantee" in str(r.message) for r in rec)
    report = acc.get_epsilon_report(1e-5)
    assert report.certified and report.method == "rdp" and eps == report.epsilon
    assert report.epsilon_equal_spreads is None or report.epsilon_equal_spreads < eps


def test_solver_accounts_every_step_training_runs_75_batches_3_epochs():
    """75 batches × 3 epochs at β = 1.5, target ε = 3; int(3/(1/75)) = 224 undercounts the 225 run."""
    dl = DPDataLoader.from_data_loader(DataLoader(TensorDataset(torch.zeros(75, 1)), batch_size=1))
    q = 1.0 / 75
    sigma = get_noise_multiplier(target_epsilon=3.0, target_delta=1e-5, sample_rate=q, epochs=3, beta=1.5, dim=1)
    run = 3 * len(dl)
    assert run == 225
    eps = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=run, delta=1e-5, beta=1.5, dim=1).epsilon
    assert eps <= 3.0


def test_solver_steps_never_below_what_opacus_loader_runs(monkeypatch):
    """The steps the solver accounts (observed by a spy on its ε function) are ≥ epochs × len(DPDataLoader)."""
    seen = []

    def spy(**kw):  # ε(σ) = 1/σ: decreasing, cheap; the test is about the ``steps`` argument only
        seen.append(kw["steps"])
        return 1.0 / kw["noise_multiplier"]

    monkeypatch.setattr(solver, "solver_epsilon", spy)
    for n_batches in list(range(1, 120)) + [235, 469, 1000, 3907]:
        dl = DPDataLoader.from_data_loader(DataLoader(TensorDataset(torch.zeros(n_batches, 1)), batch_size=1))
        for epochs in (1, 2, 3, 7, 10):
            seen.clear()
            solver.get_noise_multiplier(target_epsilon=1.0, target_delta=1e-5, sample_rate=1.0 / len(dl),
                                        epochs=epochs)
            assert seen and set(seen) == {seen[0]}
            assert seen[0] >= epochs * len(dl), (n_batches, epochs, seen[0])


def test_noise_multiplier_zero_gives_infinite_epsilon_with_a_warning():
    from opacus_gg.accountants import GGPRVAccountant

    with pytest.warns(UserWarning, match="noise_multiplier=0"):
        rep = compute_epsilon(noise_multiplier=0.0, sample_rate=0.1, steps=10, delta=1e-5)
    assert rep.epsilon == math.inf and rep.epsilon_upper == math.inf
    acc = GGPRVAccountant()
    hook = acc.get_optimizer_hook_fn(sample_rate=0.1)
    opt = type("Opt", (), {"noise_multiplier": 0.0, "beta": 1.5, "dim": 4, "clip_norm_p": 1.5})()
    hook(opt)  # what optimizer.step() calls: records the step instead of raising
    acc.step(noise_multiplier=1.0, sample_rate=0.1, beta=1.5, dim=4)
    assert [e[0] for e in acc.history] == [0.0, 1.0]
    with pytest.warns(UserWarning, match="no noise"):
        assert acc.get_epsilon(1e-5) == math.inf
    with pytest.warns(UserWarning):
        assert acc.get_epsilon_report(1e-5).epsilon == math.inf
    with pytest.raises(ValueError, match="noise_multiplier"):
        acc.step(noise_multiplier=-0.5, sample_rate=0.1)
    with pytest.raises(ValueError, match="noise_multiplier"):
        compute_epsilon(noise_multiplier=0.0, sample_rate=0.1, steps=10, delta=1e-5, mode="paper")


def test_noise_multiplier_zero_delta_is_the_limit_of_small_noise():
    """σ = 0: δ(ε) = 1 − (1 − q)^T exactly; small σ gives a δ below it and close to it."""
    q, T = 0.1, 10
    d0 = compute_delta(epsilon=1.0, noise_multiplier=0.0, sample_rate=q, steps=T)
    assert d0 == pytest.approx(1 - (1 - q) ** T, rel=1e-12)  # σ = 0: δ(0) = 1 − (1 − q)^T exactly; float64 round-off
    d_small = compute_delta(epsilon=1.0, noise_multiplier=0.2, sample_rate=q, steps=T)
    assert 0.9 * d0 <= d_small <= d0
