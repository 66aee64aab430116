"""The grid cap (issue 33): beyond the half-width FAST_HALF_WIDTH the PRV mesh grows with the half-width
(``discretization.mesh_coarsening``), so a wide grid keeps at most the points Opacus's mesh puts on ±FAST_HALF_WIDTH.

Oracles: the same composition with the cap switched off (``MAX_MESH_COARSENING = 0`` by monkeypatch, i.e. the grid
rule before the cap), the grid sizes computed here from ``mesh_for`` and the quantization the docstring states, and
the rigorous lower bound of :mod:`lower_bound_oracle` (shares no code) on capped grids.
"""

from __future__ import annotations

import math

import pytest

from opacus_gg.accountants import composition as cp
from opacus_gg.accountants import discretization as dz
from opacus_gg.accountants.history import Segment

DELTA, DELTA_ERROR, EPS_ERROR = 1e-5, 1e-8, 0.01


def _compose(seg: Segment, mesh=None, direction: str = "remove"):
    dz.step_dprv.cache_clear()
    return cp.compose_history([seg], DELTA, direction, eps_error=EPS_ERROR, delta_error=DELTA_ERROR, mesh=mesh)


def _cap_points(steps: int) -> float:
    """The cap: the points of ±FAST_HALF_WIDTH at Opacus's mesh rounded down to a power of 2^(1/4)."""
    h = 2.0 ** (math.floor(4.0 * math.log2(dz.mesh_for(EPS_ERROR, steps, DELTA_ERROR))) / 4.0)
    return 2.0 * dz.FAST_HALF_WIDTH / h


def test_mesh_coarsening_is_the_fewest_quarter_steps_that_fit_and_bounded():
    # L = 2^{b/8}; the mesh × 2^{k/4} brings 2L/h back to the cap iff k ≥ (b − 24)/2
    assert dz.FAST_HALF_WIDTH == 8.0
    assert [dz.mesh_coarsening(b) for b in (-40, 0, 23, 24, 25, 26, 27, 38)] == [0, 0, 0, 0, 1, 1, 2, 7]
    assert dz.mesh_coarsening(24 + 2 * dz.MAX_MESH_COARSENING + 9) == dz.MAX_MESH_COARSENING == 16


def test_cap_leaves_a_beta_two_grid_and_its_epsilon_bit_for_bit(monkeypatch):
    # the benchmark's widest β ≤ 2 grid: β = 2, σ = 0.8, q = 0.004, T = 10^4 (remove: half-width exactly 8)
    seg = Segment(0.8, 0.004, 10_000, 2.0, 1, 2.0)
    capped = _compose(seg)
    monkeypatch.setattr(dz, "MAX_MESH_COARSENING", 0)
    plain = _compose(seg)
    assert capped.mesh == plain.mesh and capped.domain_L == plain.domain_L
    assert (capped.epsilon_upper, capped.epsilon_lower, capped.epsilon_estimate) == (
        plain.epsilon_upper, plain.epsilon_lower, plain.epsilon_estimate)


def test_cap_shrinks_a_wide_beta_three_grid_and_moves_epsilon_by_round_off(monkeypatch):
    seg = Segment(1.0, 0.01, 1000, 3.0, 1, 2.0)
    capped = _compose(seg)
    L, h = dz._grid([seg], "remove", DELTA_ERROR, EPS_ERROR, 0.0, None)
    monkeypatch.setattr(dz, "MAX_MESH_COARSENING", 0)
    plain = _compose(seg)
    # half-width 2^{4.75} (widened to an FFT-friendly size on both grids): the mesh is 2^{7/4} times Opacus's
    assert L == 2.0 ** 4.75 and min(capped.domain_L, plain.domain_L) >= L
    assert h == capped.mesh == pytest.approx(plain.mesh * 2.0 ** 1.75, rel=1e-12)
    assert 2.0 * L / h <= _cap_points(seg.steps) * (1.0 + 1e-12) < 2.0 * L / plain.mesh
    # both are proven upper bounds; the coarser grid moves the estimate up and the round-off allowance (Lemma R3,
    # which grows with the grid) down: measured −3.4e-8 relative here, +4e-7 … +2.1e-6 on the benchmark's rows
    assert abs(capped.epsilon_upper - plain.epsilon_upper) <= 1e-5 * plain.epsilon_upper
    assert capped.epsilon_estimate >= plain.epsilon_estimate
    # Opacus's ε_error widens with the mesh in the (uncertified) lower end of the bracket
    assert capped.epsilon_lower <= plain.epsilon_lower
    # the refinement of api._compose_tight is not triggered by the coarser mesh
    assert capped.mesh <= 0.004 * capped.epsilon_upper


def test_a_caller_given_finer_mesh_wins_over_the_cap():
    seg = Segment(1.0, 0.01, 1000, 3.0, 1, 2.0)
    fine = dz.mesh_for(EPS_ERROR, seg.steps, DELTA_ERROR)
    dom = dz.make_domain([seg], "remove", DELTA_ERROR, EPS_ERROR, mesh=fine)
    assert dom.dt <= fine
    assert dom.dt == 2.0 ** (math.floor(4.0 * math.log2(fine)) / 4.0)
    # a coarser caller's mesh than the capped one does not coarsen it further
    capped = dz.make_domain([seg], "remove", DELTA_ERROR, EPS_ERROR)
    assert dz.make_domain([seg], "remove", DELTA_ERROR, EPS_ERROR, mesh=1.0).dt == capped.dt > dom.dt


@pytest.mark.parametrize("beta,sigma,q,steps", [(3.0, 0.5, 1.0, 3), (3.0, 0.7, 0.5, 4), (2.5, 0.4, 1.0, 2)])
def test_capped_grid_epsilon_is_above_the_rigorous_lower_bound(beta, sigma, q, steps):
    # small T with ε 28–54: half-widths 54–91, meshes 6–10× Opacus's; the oracle (tests/lower_bound_oracle.py:
    # losses rounded down, exact convolution) shares no code with the accountant
    from lower_bound_oracle import epsilon_lower

    seg = Segment(sigma, q, steps, beta, 1, 2.0)
    results = [_compose(seg, direction=d) for d in ("remove", "add")]
    assert max(r.mesh / dz.mesh_for(EPS_ERROR, steps, DELTA_ERROR) for r in results) > 4.0  # the cap engaged
    assert max(r.epsilon_upper for r in results) >= epsilon_lower([(sigma, q, steps, beta)], DELTA)
