"""β = 2: the certified GG accountant reproduces Opacus's own PRV accountant; Opacus integration."""

from __future__ import annotations

import math

import pytest
from opacus.accountants import PRVAccountant, RDPAccountant, create_accountant
from opacus.accountants.utils import get_noise_multiplier as opacus_get_noise_multiplier

from opacus_gg.accountants import GGPRVAccountant, compute_epsilon, compute_epsilon_history

SETTINGS = [  # sigma, q, steps, delta
    (1.0, 0.01, 1000, 1e-5),
    (0.8, 0.02, 500, 1e-6),
    (2.0, 0.1, 100, 1e-5),
    (1.5, 0.004, 3000, 1e-7),
]


def _opacus_eps(history, delta):
    acc = PRVAccountant()
    acc.history = list(history)
    return acc.get_epsilon(delta)


def _close_below_opacus(ours, ref, eps_error=0.01):
    """Opacus prints estimate + eps_error; ours (dominating discretization, no eps_error added) is at most
    Opacus's upper bound and at least its estimate minus 0.2 %."""
    return (ref - eps_error) * 0.998 <= ours <= ref + 1e-9


@pytest.mark.parametrize("sigma,q,steps,delta", SETTINGS)
def test_beta2_matches_opacus_prv(sigma, q, steps, delta):
    ours = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=2.0)
    ref = _opacus_eps([(sigma, q, steps)], delta)
    assert ours.certified and ours.mode == "certified"
    assert _close_below_opacus(ours.epsilon, ref), (ours.epsilon, ref)
    # Opacus uses the remove pair; the add pair is smaller for the Gaussian
    assert ours.direction == "remove"
    assert ours.details["epsilon_by_direction"]["add"] < ours.epsilon
    assert ours.epsilon_lower <= ours.epsilon_estimate <= ours.epsilon_upper == ours.epsilon


def test_beta2_is_dimension_free_with_l2_clipping():
    a = compute_epsilon(noise_multiplier=1.0, sample_rate=0.01, steps=500, delta=1e-5, beta=2.0, dim=1)
    b = compute_epsilon(noise_multiplier=1.0, sample_rate=0.01, steps=500, delta=1e-5, beta=2.0, dim=10**6)
    # β = 2, p = 2: the same computation whatever d, so equal up to round-off
    assert a.epsilon == pytest.approx(b.epsilon, rel=1e-12)
    # ℓ∞ clipping of a Gaussian in d = 4 dims: exactly the 1-D Gaussian with sensitivity 2C (σ/2)
    c = compute_epsilon(noise_multiplier=1.0, sample_rate=0.01, steps=500, delta=1e-5, beta=2.0, dim=4,
                        clip_norm_p=math.inf)
    ref = _opacus_eps([(0.5, 0.01, 500)], 1e-5)
    assert _close_below_opacus(c.epsilon, ref), (c.epsilon, ref)


def test_heterogeneous_history_matches_opacus():
    hist = [(1.2, 0.01, 300), (0.9, 0.02, 200), (1.2, 0.01, 100), (3.0, 0.05, 50)]
    ours = compute_epsilon_history([h + (2.0, 1, None) for h in hist], 1e-5)
    ref = _opacus_eps(hist, 1e-5)
    assert _close_below_opacus(ours.epsilon, ref), (ours.epsilon, ref)


def test_registry_and_accountant_steps_match_function():
    acc = create_accountant("gg_prv")
    assert isinstance(acc, GGPRVAccountant) and acc.mechanism() == "gg_prv"
    assert acc.get_epsilon(1e-5) == 0.0 == RDPAccountant().get_epsilon(1e-5)  # empty history, as Opacus's RDP
    rdp = RDPAccountant()
    for _ in range(200):
        acc.step(noise_multiplier=1.0, sample_rate=0.02)
        rdp.step(noise_multiplier=1.0, sample_rate=0.02)
    for _ in range(100):
        acc.step(noise_multiplier=1.5, sample_rate=0.02)
        rdp.step(noise_multiplier=1.5, sample_rate=0.02)
    # len() counts history entries, as Opacus's accountants do; the steps are in the entries
    assert len(acc) == len(rdp) == len(acc.history) == 2
    assert sum(e[2] for e in acc.history) == 300
    ref = _opacus_eps([(1.0, 0.02, 200), (1.5, 0.02, 100)], 1e-5)
    assert _close_below_opacus(acc.get_epsilon(1e-5), ref)


def test_state_dict_round_trip():
    acc = GGPRVAccountant(beta=1.5, dim=8, clip_norm_p=2.0)
    for _ in range(50):
        acc.step(noise_multiplier=1.0, sample_rate=0.05)
    acc.step(noise_multiplier=1.0, sample_rate=0.05, beta=2.0, dim=3)
    sd = acc.state_dict()
    other = GGPRVAccountant()
    other.load_state_dict(sd)
    assert other.history == acc.history
    assert (other.beta, other.dim, other.clip_norm_p) == (1.5, 8, 2.0)
    assert len(other) == 2 and sum(e[2] for e in other.history) == 51
    assert other.get_epsilon(1e-5) == acc.get_epsilon(1e-5)
    bad = dict(sd)
    bad["mechanism"] = "prv"
    with pytest.raises(ValueError):
        other.load_state_dict(bad)


class _FakeOptim:
    noise_multiplier = 1.3
    accumulated_iterations = 2
    beta = 1.5
    clip_norm_p = 1.5
    dim = 10


def test_optimizer_hook_reads_beta_dim_p():
    acc = GGPRVAccountant()
    hook = acc.get_optimizer_hook_fn(sample_rate=0.01)
    hook(_FakeOptim())
    hook(_FakeOptim())
    assert acc.history == [(1.3, 0.02, 2, 1.5, 10, 1.5)]


def test_opacus_noise_multiplier_search_accepts_gg_prv():
    # Opacus's own solver writes 3-tuples into history: they use the accountant defaults (β = 2)
    sigma = opacus_get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.02, steps=200,
                                        accountant="gg_prv", epsilon_tolerance=0.05)
    eps = compute_epsilon(noise_multiplier=sigma, sample_rate=0.02, steps=200, delta=1e-5).epsilon
    assert eps <= 2.0
