"""The certified accountant against an independent oracle (Google's dp-accounting with a GG noise class).

For one coordinate (d = 1) the exact subsampled-GG ε lies between dp-accounting's optimistic and pessimistic PLD
estimates. Ours is an upper bound, so it must not fall below the optimistic (lower) estimate, and it must not be
looser than the pessimistic one by more than its own error allowance (eps_error = 0.01) plus 1%.
"""

from __future__ import annotations

import pytest

from gg_oracle import oracle_epsilon
from opacus_gg.accountants import compute_epsilon

CASES = [
    # beta, noise_multiplier, sample_rate, steps, delta, oracle mesh
    (1.0, 1.0, 0.02, 200, 1e-5, 1e-4),
    (1.5, 1.0, 0.02, 200, 1e-5, 1e-4),
    (2.5, 1.5, 0.05, 100, 1e-5, 2e-4),
    (3.0, 2.0, 0.02, 100, 1e-6, 2e-4),
]


@pytest.mark.parametrize("beta,sigma,q,steps,delta,mesh", CASES)
def test_one_coordinate_epsilon_matches_dp_accounting(beta, sigma, q, steps, delta, mesh):
    ours = compute_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=beta, dim=1)
    lower = oracle_epsilon(beta, sigma, q, steps, delta, mesh, pessimistic=False)
    upper = oracle_epsilon(beta, sigma, q, steps, delta, mesh, pessimistic=True)
    assert lower <= upper
    # a certified bound is never below an optimistic estimate of the true value
    assert ours.epsilon >= lower - 1e-9, (ours.epsilon, lower, upper)
    # and is tight: within its own eps_error and 1% of the pessimistic oracle
    assert ours.epsilon <= upper * 1.01 + 0.011, (ours.epsilon, lower, upper)
    assert ours.certified
