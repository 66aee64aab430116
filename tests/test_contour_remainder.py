"""benchmarks/contour_remainder.py (C3 of the contour Base, issue 35 item 1): the enclosures against the complex moment
by scipy quadrature of the plain form (base_ceiling.phi_minus_one, which shares no code with them; docs/accounting.md,
"C3: the remainder at |y| ≤ Y, enclosed")."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from flint import arb

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(_BENCH))  # contour_remainder imports contour_decay from its own directory


def _load(name):
    spec = importlib.util.spec_from_file_location(name, _BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


cr = _load("contour_remainder")
bc = _load("base_ceiling")

BETA = 2.5
FISHER = 1.2095873820113014  # I_2.5 (fisher.fisher_information; cr.fisher's ball is checked against it below)


def _phi(c, y, a):
    """(φ(c + iy; a), quad's error) by base_ceiling's plain-form quadrature."""
    w, err = bc.phi_minus_one(complex(c, y), a, BETA)
    return 1.0 + w, err


def _remainder(c, y, a):
    """(|r|/a², log|φ|/a²) at one point, r = log φ − I a² z(z − 1)/2 (principal log, base_ceiling.log_phi)."""
    z = complex(c, y)
    lp, _ = bc.log_phi(z, a, BETA)
    return abs(lp - FISHER * a * a * z * (z - 1) / 2) / (a * a), lp.real / (a * a)


def test_fisher_ball_contains_the_library_value():
    from opacus_gg.accountants.fisher import fisher_information

    ball = cr.fisher(BETA)
    assert cr._down(ball) <= fisher_information(BETA) <= cr._up(ball)
    assert cr._down(ball) <= FISHER <= cr._up(ball)


@pytest.mark.parametrize("c,y,a", [(1.2, 0.0, 0.1), (2.0, 5.0, 0.1), (4.0, 17.0, 0.03), (1.2, 38.0, 0.0125)])
def test_symmetric_form_encloses_the_plain_form_and_its_derivatives(c, y, a):
    # Lemma Z1 at point balls: φ against scipy's plain form (within quad's error), narrow; φ_z, φ_a and φ_aa
    # against central differences of it (step h: the differences' error is O(h²), far below the tolerance)
    phi, phi_z, phi_a = cr.enclose(BETA, c, arb(a), arb(y))
    ref, err = _phi(c, y, a)
    for part, want in ((phi.real, ref.real), (phi.imag, ref.imag)):
        assert cr._down(part) - err - 1e-12 <= want <= cr._up(part) + err + 1e-12
    assert float(phi.rad()) <= 1e-6  # QUAD_TOL's goal 10⁻⁸ (a cell's own width is far larger)
    h = 1e-4
    dz = (_phi(c + h, y, a)[0] - _phi(c - h, y, a)[0]) / (2 * h)
    da = (_phi(c, y, a + h * a)[0] - _phi(c, y, a - h * a)[0]) / (2 * h * a)
    (phi_aa,) = cr.enclose(BETA, c, arb(a), arb(y), kinds=("aa",))
    h2 = 1e-2 * a  # the second difference: quad's 10⁻¹⁴ over h2² stays below 10⁻⁶
    daa = (_phi(c, y, a + h2)[0] - 2 * ref + _phi(c, y, a - h2)[0]) / h2 ** 2
    for ball, want, rel in ((phi_z, dz, 1e-5), (phi_a, da, 1e-5), (phi_aa, daa, 1e-4)):
        got = complex(float(ball.real.mid()), float(ball.imag.mid()))
        assert abs(got - want) <= rel * max(abs(want), 0.01) + float(ball.rad())


@pytest.mark.parametrize("c,a_lo,a_hi,y_lo,y_hi", [
    (2.0, 0.095, 0.1, 5.0, 5.25),  # the top of the a-range, where the sup sits
    (1.2, 0.0125, 0.013, 20.0, 20.5),  # a small coordinate at a large frequency
    (4.0, 0.05, 0.0525, 0.0, 0.2),  # the real axis (y = 0 is in the cell)
])
def test_cell_bound_is_above_the_sampled_remainder_in_the_cell_and_not_far_above(c, a_lo, a_hi, y_lo, y_hi):
    # Lemma Z2: ρ ≥ |r|/a² and λ ≥ log|φ|/a² at every sampled point of the cell (corners, middles), and the bound
    # is within 4× of the largest sample (the mean value form's terms are second order in the cell's size)
    rho, lam, mid = cr.cell_bound(BETA, c, a_lo, a_hi, y_lo, y_hi)
    samples = [_remainder(c, y, a) for a in np.linspace(a_lo, a_hi, 3) for y in np.linspace(y_lo, y_hi, 3)]
    assert rho >= max(s[0] for s in samples)
    assert lam >= max(s[1] for s in samples)
    assert mid <= max(s[0] for s in samples) * (1 + 1e-9)  # the centre's value is a value: below the sup
    assert rho <= 4.0 * max(s[0] for s in samples)


def test_row_bound_covers_the_row_and_refines_towards_its_lower_end():
    # Branch and bound over a ∈ [a0/16, a0] on one row: ρ ≥ the centre values' max ρ_low, ρ ≥ samples at both ends
    # of the a-range and between; splitting lowers ρ (the start's bound against the refined one)
    c, y_lo, y_hi, a0 = 2.0, 3.0, 3.2, 0.1
    cells = cr.a_cells(a0, a0 / 16, 1.1)
    start = cr.row_bound(BETA, c, y_lo, y_hi, cells, 0.0, 0)
    rho, lam, low, n = cr.row_bound(BETA, c, y_lo, y_hi, cells, 0.1, start[3] + 8)
    assert n > start[3] and rho <= start[0] and rho >= low
    for a in (a0 / 16, 0.03, a0):
        for y in (y_lo, y_hi):
            r, lp = _remainder(c, y, a)
            assert rho >= r and lam >= lp


def test_cells_cover_their_ranges():
    cells = cr.a_cells(0.1, 0.1 / 16, 1.05)
    assert cells[0][0] == 0.1 / 16 and cells[-1][1] == 0.1
    assert all(lo < hi <= lo * 1.05 * (1 + 1e-12) and hi == nxt for (lo, hi), (nxt, _) in zip(cells, cells[1:]))
    rows = cr.y_cells(40.0, 2.0, 0.05, 0.2)
    assert rows[0][0] == 0.0 and rows[-1][1] == 40.0 and all(a[1] == b[0] for a, b in zip(rows, rows[1:]))


def test_bad_cells_are_refused():
    with pytest.raises(ValueError):
        cr.cell_bound(BETA, 2.0, 0.0, 0.1, 0.0, 1.0)
    with pytest.raises(ValueError):
        cr.cell_bound(BETA, 2.0, 0.1, 0.05, 0.0, 1.0)
    assert math.isfinite(cr.cell_bound(BETA, 2.0, 0.09, 0.1, 0.0, 0.1)[0])
