"""The per-step envelope pair is realizable, so the adaptive composition theorem for dominating pairs applies
(docs/accounting.md, "Why an upper bound"): the connect-the-dots discrete PRV of the envelope over every shape
is itself a pair of (sub-)probability measures, and its δ(t) is ≥ every shape's δ(t) at the grid points."""

from __future__ import annotations

import numpy as np
import pytest

from opacus_gg.accountants.discretization import step_dprv
from opacus_gg.accountants.history import parse_segment
from opacus_gg.accountants.profile import one_step_delta


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_envelope_discretization_is_a_realizable_dominating_pair(direction):
    seg = parse_segment((1.0, 0.1, 1, 1.5, 8, 1.5))  # several equal spreads k = 1, 2, 4, 8: a true envelope
    t = np.linspace(-6.0, 6.0, 1201)
    pmf, rho, _, (ks, _) = step_dprv(seg.step_key, direction, float(t[0]), float(t[-1]), len(t))
    assert len(ks) > 1
    # a pair: P puts ω_i on loss t_i and ρ at +∞ (a Q-null atom); Q puts ω_i e^{−t_i} there and the rest of its
    # mass on a P-null atom at −∞, which needs Σ ω_i e^{−t_i} ≤ 1
    assert np.all(pmf >= 0) and rho >= 0
    assert abs(float(pmf.sum()) + rho - 1.0) <= 1e-9
    assert float(np.sum(pmf * np.exp(-t))) <= 1.0 + 1e-9
    # its hockey-stick curve δ(t) = Σ_{t_i > t} ω_i (1 − e^{t − t_i}) + ρ dominates the envelope at every grid point
    d_env, _, _, _ = one_step_delta(seg, t, direction)
    pos = t >= 0
    tail = np.array([float(np.sum(pmf[t > s] * (1 - np.exp(s - t[t > s])))) + rho for s in t[pos]])
    assert np.all(tail >= d_env[pos] * (1 - 1e-9) - 1e-15)
