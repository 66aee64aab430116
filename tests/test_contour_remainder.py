"""benchmarks/contour_remainder.py (C3 of the contour Base, issue 35 item 1): the enclosures against the complex moment
by scipy quadrature of the plain form (base_ceiling.phi_minus_one, which shares no code with them; docs/accounting.md,
"C3: the remainder at |y| ≤ Y, enclosed")."""

from __future__ import annotations

import math

import numpy as np
import pytest
from flint import arb

from benchmark_modules import BENCHMARKS as _BENCH, load_benchmark

cr = load_benchmark("contour_remainder")
bc = load_benchmark("base_ceiling")

BETA = 2.5
FISHER = 1.2095873820113014  # I_2.5 (fisher.fisher_information; cr.fisher's ball is checked against it below)


def _phi(c, y, a, beta=BETA):
    """(φ(c + iy; a), quad's error) by base_ceiling's plain-form quadrature."""
    w, err = bc.phi_minus_one(complex(c, y), a, beta)
    return 1.0 + w, err


def _fisher(beta):
    """I_β: the pinned value at β = 2.5, the library's closed form elsewhere (its ball is checked below)."""
    from opacus_gg.accountants.fisher import fisher_information

    return FISHER if beta == BETA else fisher_information(beta)


def _remainder(c, y, a, beta=BETA):
    """(|r|/a², log|φ|/a²) at one point, r = log φ − I a² z(z − 1)/2 (principal log, base_ceiling.log_phi)."""
    z = complex(c, y)
    lp, _ = bc.log_phi(z, a, beta)
    return abs(lp - _fisher(beta) * a * a * z * (z - 1) / 2) / (a * a), lp.real / (a * a)


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


# --- Lemma Z3: a ∈ (0, a_min] --------------------------------------------------------------------------------------

A_MIN = 0.1 / 16


def _moments_phi4_at_zero(z, beta=BETA):
    """∂_a⁴φ(z; 0) in closed form from the GG moments E|X|^p = β^{p/β}Γ((p + 1)/β)/Γ(1/β) (mpmath; shares no code
    with the enclosure): (z(z − 1))²E|X|^{4β−4} + z(z − 1)((β − 1)E|X|^{3β−4} − (β − 1)²E|X|^{2β−4})."""
    import mpmath

    b = mpmath.mpf(beta)

    def mom(p):
        return b ** (p / b) * mpmath.gamma((p + 1) / b) / mpmath.gamma(1 / b)

    zz = mpmath.mpc(z) * (mpmath.mpc(z) - 1)
    return complex(zz ** 2 * mom(4 * b - 4) + zz * ((b - 1) * mom(3 * b - 4) - (b - 1) ** 2 * mom(2 * b - 4)))


@pytest.mark.parametrize("c,y", [(1.2, 0.0), (2.0, 5.0), (4.0, 0.0), (1.2, 30.0)])
def test_fourth_a_derivative_encloses_the_moment_form_at_zero_and_the_differences_above(c, y):
    # ∂_a⁴φ = (1/Z)∫F''(x)G''(x − a)dx (Lemma Z3): at a = 0 the ball holds the closed form, narrowly; at a = 0.05
    # it agrees with the fourth central differences of scipy's plain-form φ, Richardson-extrapolated from steps h and
    # h/2, h = min(0.01, 0.1/|z|) (φ varies on the scale 1/|z|; truncation O((h|z|)⁴); quad's 10⁻¹³ over h⁴ ≤ 10⁻²)
    ball = cr.enclose_phi4(BETA, c, arb(0), arb(y))
    want = _moments_phi4_at_zero(complex(c, y))
    assert cr._down(ball.real) <= want.real <= cr._up(ball.real)
    assert cr._down(ball.imag) <= want.imag <= cr._up(ball.imag)
    assert float(ball.rad()) <= 1e-6 * max(1.0, abs(want))
    a = 0.05

    def fourth(h):
        vals = [_phi(c, y, a + k * h)[0] for k in (-2, -1, 0, 1, 2)]
        return (vals[0] - 4 * vals[1] + 6 * vals[2] - 4 * vals[3] + vals[4]) / h ** 4

    h = min(0.01, 0.1 / abs(complex(c, y)))
    diff = (4 * fourth(h / 2) - fourth(h)) / 3
    got = cr.enclose_phi4(BETA, c, arb(a), arb(y))
    mid = complex(float(got.real.mid()), float(got.imag.mid()))
    assert abs(mid - diff) <= 1e-3 * abs(diff) + 1e-2


@pytest.mark.parametrize("c,y", [(1.2, 0.0), (2.0, 0.0), (4.0, 1.0), (2.0, 5.0)])
def test_remainder_is_of_order_a_to_the_fourth_with_the_cumulant_limit(c, y):
    # the true order (docs, Lemma Z3): r/a⁴ → ∂_a⁴φ(0)/24 − A²/2, A = I z(z − 1)/2 (the odd orders vanish: φ is
    # even in a), measured at a = 0.01 and 0.03 with scipy (mpmath at 10⁻³…10⁻¹ agrees to 5 digits: docs)
    z = complex(c, y)
    limit = _moments_phi4_at_zero(z) / 24 - (FISHER * z * (z - 1) / 2) ** 2 / 2
    for a in (0.01, 0.03):
        lp, _ = bc.log_phi(z, a, BETA)
        r = lp - FISHER * a * a * z * (z - 1) / 2
        assert abs(r / a ** 4 - limit) <= 2e-3 * abs(limit)


def _z3_misses(c, y_lo, y_hi, beta=BETA):
    """The sampled points (a ∈ {a_min, a_min/2}, 3 values of y in the row) where |r| exceeds a²ρ_small beyond quad's
    error (so a list that must be empty), and ρ_small over the largest sampled |r|/a²."""
    rho, lam = cr.small_bound(beta, c, A_MIN, y_lo, y_hi)
    misses, top = [], 0.0
    for a in (A_MIN, A_MIN / 2):
        for y in np.linspace(y_lo, y_hi, 3):
            z = complex(c, y)
            lp, err = bc.log_phi(z, a, beta)
            r = abs(lp - _fisher(beta) * a * a * z * (z - 1) / 2)
            top = max(top, r / (a * a))
            if r > rho * a * a + 2 * err or lp.real > lam * a * a + 2 * err:
                misses.append((a, y))
    return misses, rho / top


ROWS = [(1.2, 0.0, 0.2), (2.0, 0.0, 0.2), (4.0, 1.628, 2.06), (2.0, 4.528, 5.024), (1.2, 19.581, 21.543)]


@pytest.mark.parametrize("c,y_lo,y_hi", ROWS)
def test_small_shift_bound_is_above_the_sampled_remainder_and_within_a_few_times_it(c, y_lo, y_hi):
    misses, ratio = _z3_misses(c, y_lo, y_hi)
    assert not misses
    assert ratio <= 4.0  # the sup over the row is at y_hi, a_min; the bound's slack is the balls' and U's terms


def test_small_shift_bound_with_a_wrong_fourth_derivative_is_caught(monkeypatch):
    # halving ∂_a⁴φ (a 1/48 for Taylor's 1/24) leaves the plain form above the samples (it carries A²/2 whole), but
    # the cancelling form, which the lemma needs to be tight, falls below them: the check above sees it
    true = cr.enclose_phi4
    monkeypatch.setattr(cr, "enclose_phi4", lambda *args: true(*args) / 2)
    misses, _ = _z3_misses(2.0, 0.0, 0.2)
    assert misses


def test_small_shift_bound_needs_a_small_u():
    # U = |A|a² + Da⁴/24 < 1 is the log series' condition: at a_min = 0.05, y = 40 it fails (|A|a² ≈ 2.4), and at
    # a_min = 0.5, y ∈ [4, 5] (|A|a² ≈ 4): the bound refuses
    for a_min, y_lo, y_hi in ((0.05, 39.0, 40.0), (0.5, 4.0, 5.0)):
        with pytest.raises(ArithmeticError):
            cr.small_bound(BETA, 2.0, a_min, y_lo, y_hi)


# --- β = 2.2: Arb's pow at 0 off half-integers (contour_decay._Ball.pw's disc) -------------------------------------

NEAR = 2.2  # |x|^β is C² and no more at 0; Arb's pow of a ball holding 0 is not finite at β − 2 = 0.2 (at 2.5: √)


def test_power_disc_contains_every_power_near_zero_and_leaves_half_integers_to_arb():
    # the disc |t^e| ≤ |t|_+^e (|exp(e log t)| = |t|^e) holds the principal power at points of the ball on both
    # sides of 0; it is used only off the analytic flag (there a branch point must stay reported) and only where
    # Arb's own ball is not finite, so β = 2.5's powers (and its rows) are Arb's, unchanged
    cd = load_benchmark("contour_decay")
    from flint import acb

    g = cd._Ball(NEAR, 2.0, 0.0)
    t = acb(arb(0.0005, 0.001))  # [−0.0005, 0.0015]
    for e in (g.b - 2, g.b1, g.b, 2 * g.b1):
        assert not t.pow(e, analytic=False).is_finite()  # the reason for the disc
        disc = g.pw(t, e, False)
        for x in (-0.0005, -1e-7, 1e-9, 0.0007, 0.0014):
            assert acb(complex(x) ** float(e.mid())) in disc
        assert acb(0) in disc
        assert cd._up(disc.real.rad()) <= 0.0015 ** float(e.mid()) * (1 + 1e-6)  # Arb keeps radii to ~30 bits
        assert not g.pw(t, e, True).is_finite()
    half = cd._Ball(2.5, 2.0, 0.0)
    for e in (half.b - 2, half.b):
        ours, arbs = half.pw(t, e, False), t.pow(e, analytic=False)
        assert ours.is_finite() and all(p.mid() == q.mid() and p.rad() == q.rad()
                                        for p, q in ((ours.real, arbs.real), (ours.imag, arbs.imag)))


@pytest.mark.parametrize("beta", [NEAR, 3.0])
@pytest.mark.parametrize("c,y,a", [(2.0, 0.0, 0.1), (1.2, 20.0, 0.03), (4.0, 3.0, 0.00625)])
def test_symmetric_form_at_beta_2_2_and_3_encloses_the_plain_form(c, y, a, beta):
    (phi,) = cr.enclose(beta, c, arb(a), arb(y), kinds=("phi",))
    ref, err = _phi(c, y, a, beta)
    for part, want in ((phi.real, ref.real), (phi.imag, ref.imag)):
        assert cr._down(part) - err - 1e-12 <= want <= cr._up(part) + err + 1e-12
    assert float(phi.rad()) <= 1e-6


@pytest.mark.parametrize("beta", [NEAR, 3.0])
@pytest.mark.parametrize("c,y", [(2.0, 0.0), (1.2, 30.0)])
def test_fourth_a_derivative_at_beta_2_2_and_3_encloses_the_moment_form_at_zero(c, y, beta):
    # Lemma Z3 at β = 2.2: F, G are C² (h'' = 1.2|x|^0.2 is continuous), 𝒜, ℬ carry t^0.2 (bounded at 0), and the
    # moments E|X|^{2β−4} = E|X|^0.4 etc. are finite; the ball at a = 0 (the a-ball's (a/2)^e are discs) holds it;
    # at β = 3 h'' = 2|x| and every power is an integer one
    ball = cr.enclose_phi4(beta, c, arb(0), arb(y))
    want = _moments_phi4_at_zero(complex(c, y), beta)
    assert cr._down(ball.real) <= want.real <= cr._up(ball.real)
    assert cr._down(ball.imag) <= want.imag <= cr._up(ball.imag)
    assert float(ball.rad()) <= 1e-6 * max(1.0, abs(want))


@pytest.mark.parametrize("beta", [NEAR, 3.0])
@pytest.mark.parametrize("c,a_lo,a_hi,y_lo,y_hi", [(2.0, 0.095, 0.1, 5.0, 5.25), (4.0, 0.00625, 0.0065, 0.0, 0.2)])
def test_cell_bound_at_beta_2_2_and_3_is_above_the_sampled_remainder(c, a_lo, a_hi, y_lo, y_hi, beta):
    rho, lam, mid = cr.cell_bound(beta, c, a_lo, a_hi, y_lo, y_hi)
    samples = [_remainder(c, y, a, beta) for a in np.linspace(a_lo, a_hi, 3) for y in np.linspace(y_lo, y_hi, 3)]
    assert rho >= max(s[0] for s in samples) and lam >= max(s[1] for s in samples)
    assert mid <= max(s[0] for s in samples) * (1 + 1e-9)


@pytest.mark.parametrize("beta", [NEAR, 3.0])
@pytest.mark.parametrize("c,y_lo,y_hi", [(2.0, 0.0, 0.2), (4.0, 1.628, 2.06), (1.2, 19.581, 21.543)])
def test_small_shift_bound_at_beta_2_2_and_3_is_above_the_sampled_remainder(c, y_lo, y_hi, beta):
    misses, ratio = _z3_misses(c, y_lo, y_hi, beta)
    assert not misses
    assert ratio <= 4.0


def test_rows_file_covers_every_shift_and_round_trips(tmp_path):
    # a small run (a ∈ [0.05, 0.1] by cells, (0, 0.05] by Lemma Z3), written and read back: ρ, λ are the larger
    # parts, the rows cover [0, y_max]; a file with a gap is refused
    table = cr.remainder_table(BETA, [2.0], 0.1, 0.05, 1.25, 1.25, 4.0, 0.4, 0.1, 0.2, 0.15, 0)
    path = tmp_path / "rows.json"
    cr.write_rows(str(path), table, {"beta": BETA, "a0": 0.1, "a_min": 0.05, "y_max": 0.4})
    meta, rows = cr.load_rows(str(path))
    assert meta["a_min"] == 0.05 and list(rows) == [2.0]
    for got, (y_lo, y_hi, rho, lam, low, n, rho_s, lam_s) in zip(rows[2.0], table[2.0]):
        assert (got["y_lo"], got["y_hi"], got["rho_cells"], got["rho_small"]) == (y_lo, y_hi, rho, rho_s)
        assert got["rho"] == max(rho, rho_s) >= low and got["lam"] == max(lam, lam_s)
    text = path.read_text().replace('"y_lo": 0.2', '"y_lo": 0.25')
    path.write_text(text)
    with pytest.raises(ValueError):
        cr.load_rows(str(path))


#: the committed rows files and their β (β = 2.5: c3_rows_c*.json; every other β of the shipped grid:
#: c3_rows_b<β>_c*.json)
ROWS_FILES = ([(p, BETA) for p in sorted((_BENCH / "data").glob("c3_rows_c*.json"))]
              + [(p, float(p.name.split("_")[2][1:])) for p in sorted((_BENCH / "data").glob("c3_rows_b*_c*.json"))])


@pytest.mark.parametrize("path,beta", ROWS_FILES, ids=lambda p: getattr(p, "name", str(p)))
def test_committed_rows_cover_every_shift_and_reproduce_their_small_shift_part(path, beta):
    # the shipped rows (docs: table 8): every a ∈ (0, a_0] (a_min = a_0/16 by Z3, the rest by cells), |y| ≤ 40 without
    # gaps (load_rows), ρ_s below the cells' ρ in every row; Z3's part recomputed at the first and a middle row
    meta, tables = cr.load_rows(str(path))
    assert meta["a0"] == 0.1 and meta["a_min"] == 0.1 / 16 and meta["y_max"] == 40.0 and meta["beta"] == beta
    for c, rows in tables.items():
        assert all(r["rho_small"] < r["rho_cells"] and math.isfinite(r["lam"]) for r in rows)
        # ρ = ∞ only where a cell's φ met the log's cut (C5 reads λ there): never from β = 2.5 up; below it the rows
        # above |y| ≈ 30 at β = 2.2 and ≈ 26 at the grid's other β, where the start cells' balls are wide (docs:
        # "Above β = 2 at ℓ2 clipping", "The β grid")
        y_cut = 29.0 if beta == NEAR else 26.0
        assert all(math.isfinite(r["rho"]) or (beta < BETA and r["y_lo"] >= y_cut) for r in rows)
        for r in (rows[0], rows[len(rows) // 3]):
            assert (r["rho_small"], r["lam_small"]) == cr.small_bound(beta, c, meta["a_min"], r["y_lo"], r["y_hi"],
                                                                      meta["small_split"], meta["small_split"])


def _integrands(beta, c, y, a, s):
    """The six symmetric-form integrands (without 2/Z) at v = a/2 + s, in complex floats, typed from Lemma Z1's
    formulas (not from `enclose`): P = s + a, N = s, σ = +1."""
    P, N, w = s + a, s, complex(c - 0.5, y)
    M, ell = (P ** beta + N ** beta) / (2 * beta), (P ** beta - N ** beta) / beta
    d_ell, d_m = (P ** (beta - 1) + N ** (beta - 1)) / 2, (P ** (beta - 1) - N ** (beta - 1)) / 4
    dd_ell, dd_m = (beta - 1) * (P ** (beta - 2) - N ** (beta - 2)) / 4, (beta - 1) * (P ** (beta - 2) + N ** (beta - 2)) / 8
    e, sh, ch = np.exp(-M), np.sinh(w * ell), np.cosh(w * ell)
    return {"phi": e * ch, "z": e * ell * sh, "zz": e * ell * ell * ch, "a": e * (w * sh * d_ell - ch * d_m),
            "za": e * ((sh + w * ell * ch) * d_ell - ell * sh * d_m),
            "aa": e * (ch * (w * w * d_ell ** 2 + d_m ** 2 - dd_m) + w * sh * (dd_ell - 2 * d_ell * d_m))}


@pytest.mark.parametrize("beta", [2.2, 2.5, 3.0])
def test_tail_majorants_of_lemma_z1_hold_for_every_integrand_and_the_second_derivatives_bound(beta):
    """The tail beyond v = a/2 + S (docs, Lemma Z1): with P = s + a, N = s (s ≥ S), |ℓ| ≤ aP^{β−1}, M ≥ s^β/β,
    |ℓ'|, 2|M'| ≤ P^{β−1} and |ℓ''|, |M''| ≤ (β − 1)P^{β−2}/4 (not 2|M''|: at s ≫ a, M'' → (β − 1)P^{β−2}/4), so
    each integrand is ≤ K·P^p·e^{−s^β/β + (c−½)aP^{β−1}} with `enclose`'s (K, p); sampled at s from S to S + 6."""
    S = cr._cut(beta)
    b1 = beta - 1
    worst_dd_m = 0.0
    for c in (1.2, 2.0, 4.0):
        for y in (0.0, 1.0, 10.0, 40.0):
            w_up = abs(complex(c - 0.5, y))
            for a in (1e-4, 0.01, 0.05, 0.1):
                K = {"phi": (1.0, b1), "z": (a, b1), "a": (w_up + 0.5, b1), "zz": (a * a, 2 * b1),
                     "za": (1 + a / 2 + w_up * a, 2 * b1),
                     "aa": (w_up * w_up + w_up + 0.25 + b1 * (w_up + 1) / 4, 2 * b1)}
                for s in S + np.array([0.0, 0.01, 0.5, 2.0, 6.0]):
                    P, N = s + a, s
                    ell = (P ** beta - N ** beta) / beta
                    assert ell <= a * P ** b1 and (P ** beta + N ** beta) / (2 * beta) >= s ** beta / beta
                    assert (P ** b1 + N ** b1) / 2 <= P ** b1 and (P ** b1 - N ** b1) / 2 <= P ** b1
                    dd_m = b1 * (P ** (beta - 2) + N ** (beta - 2)) / 8
                    assert b1 * (P ** (beta - 2) - N ** (beta - 2)) / 4 <= b1 * P ** (beta - 2) / 4
                    assert dd_m <= b1 * P ** (beta - 2) / 4
                    worst_dd_m = max(worst_dd_m, dd_m / (b1 * P ** (beta - 2) / 4))
                    log_env = -s ** beta / beta + (c - 0.5) * a * P ** b1
                    for kind, f in _integrands(beta, c, y, a, s).items():
                        k, p = K[kind]
                        assert math.log(abs(f)) <= math.log(k) + p * math.log(P) + log_env + 1e-9, (kind, c, y, a, s)
    assert worst_dd_m > 0.5  # so "2|M''| ≤ (β − 1)P^{β−2}/4" would be false at these points
