"""β = 1, one coordinate: the certified accountant vs Google's dp-accounting PLD for the subsampled Laplace
mechanism (both adjacency directions, connect-the-dots pessimistic PLD), within 1%."""

from __future__ import annotations

import pytest
from dp_accounting.pld import privacy_loss_distribution as pld

from opacus_gg.accountants import compute_epsilon

CASES = [  # sigma (Laplace scale / C), q, steps, delta
    (1.0, 0.02, 300, 1e-5),
    (2.0, 0.05, 200, 1e-6),
    (0.5, 0.01, 500, 1e-5),
    (3.0, 1.0, 20, 1e-5),  # no subsampling: pure composition of Laplace
]


def _dp_accounting_eps(sigma, q, steps, delta, pessimistic):
    one = pld.from_laplace_mechanism(sigma, sensitivity=1.0, pessimistic_estimate=pessimistic,
                                     value_discretization_interval=1e-4, sampling_prob=q)
    return one.self_compose(steps).get_epsilon_for_delta(delta)


@pytest.mark.parametrize("sigma,q,steps,delta", CASES)
def test_laplace_matches_dp_accounting(sigma, q, steps, delta):
    ours = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=1.0, dim=1)
    ref = _dp_accounting_eps(sigma, q, steps, delta, pessimistic=True)
    opt = _dp_accounting_eps(sigma, q, steps, delta, pessimistic=False)
    assert ours.certified
    assert ours.epsilon >= opt - 1e-9  # an upper bound is never below the optimistic estimate
    assert abs(ours.epsilon / ref - 1) < 0.01, (ours.epsilon, ref, opt)
