"""benchmarks/contour_base.py (C5 of the contour Base, issue 35 item 1): the Base curve's error against explicit shapes
whose curves come from the library's spread pairs (FFT products of the one-coordinate law: no code of C1–C4), and
the contour Base confined to its block (docs/accounting.md, "C5: the contour Base curve, assembled")."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from opacus_gg.accountants import ball_prv
from opacus_gg.accountants.ball_prv import TableSpec

from benchmark_modules import BENCHMARKS as _BENCH, load_benchmark

cb = load_benchmark("contour_base")

#: C3's rows at β = 2.5, a_0 = 0.1, |y| ≤ 40, every a ∈ (0, a_0] (``contour_remainder.py --out``), c = 2 and 1.2
_ROWS = [cb.load_rows(str(_BENCH / "data" / f"c3_rows_c{c}.json")) for c in ("2", "1.2")]
#: log α where the shapes are read (α ≥ 1; the other orientation is the same curve by symmetry)
_T = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0]
#: k equal coordinates (the worst case at large |y|: every coordinate at the cap, Lemma D1) and mixed shapes, of
#: masses 16–64 a_0² (where the table reads the contour Base)
_SHAPES = {
    "16 x a0": [(0.1, 16)],
    "32 x a0": [(0.1, 32)],
    "64 x a0/2": [(0.05, 64)],
    "one a0 beside 60 x a0/2": [(0.1, 1), (0.05, 60)],
    "8 x a0 beside 40 x 0.03": [(0.1, 8), (0.03, 40)],
}
#: a table small enough for the full tier's minute (a_0 = 0.1m as the rows, coarse cells and loss grid, V on)
_SMALL = TableSpec(a0=0.1, ratio_low=1.5, ratio_high=1.5, high_from=0.7, h=0.05, half_width=8.0, mass_split=1,
                   mean_variance=True)


def test_error_is_above_the_deviation_of_explicit_shapes_from_the_gaussian_limit():
    # H_α(G_R) + err(α) ≥ H_α of a pair dominating the shape (so ≥ the shape's own curve), err over [R − ΔR, R]
    worst = cb.shape_check(_ROWS, _SHAPES, _T, step=0.0025)
    assert worst >= 0.0
    # and a shape strictly inside the mass interval of its state
    assert cb.shape_check(_ROWS, {"15 x a0 inside [0.15, 0.16]": [(0.1, 15)]}, _T, step=0.01, r_hi=0.16) >= 0.0


def test_a_deliberately_wrong_error_fails_the_shape_check():
    # without err, or with the rows' ρ shrunk 100-fold (a remainder claimed too small), some shape is above
    assert cb.shape_check(_ROWS, _SHAPES, _T, step=0.0025, scale=0.0) < 0.0
    shrunk = [cb.dataclasses.replace(r, rho=tuple(x / 100.0 for x in r.rho)) for r in _ROWS]
    assert cb.shape_check(shrunk, _SHAPES, _T, step=0.0025) < 0.0


def test_error_rate_refuses_an_empty_interval_and_foreign_constants():
    rows = _ROWS[0]
    decay = cb.contour_decay.decay_constants(rows.beta, rows.c, rows.a0)
    assert 0.0 < cb.error_rate(rows, decay, 0.15, 0.16) < math.inf
    with pytest.raises(ValueError):
        cb.error_rate(rows, decay, 0.16, 0.15)
    with pytest.raises(ValueError):  # constants of another c
        cb.error_rate(rows, cb.contour_decay.decay_constants(rows.beta, 4.0, rows.a0), 0.15, 0.16)


def test_rows_with_a_gap_or_a_bad_value_are_refused(tmp_path):
    def row(lo, hi, rho, lam):
        return {"y_lo": lo, "y_hi": hi, "rho": rho, "lam": lam, "rho_low": 0.0, "cells": 1, "rho_cells": rho,
                "lam_cells": lam, "rho_small": 0.0, "lam_small": -1.0}

    def file(rows, y_max=2.0, n_c=1):
        return {"beta": 2.5, "a0": 0.1, "a_min": 0.00625, "y_max": y_max,
                "tables": [{"c": 2.0 + k, "seconds": 1.0, "rows": rows} for k in range(n_c)]}

    good = [row(0.0, 1.0, 0.01, 1.5), row(1.0, 2.0, 0.02, 1.0)]
    for data in (file([good[0], row(1.5, 2.0, 0.02, 1.0)]), file([row(0.0, 2.0, -0.01, 1.5)]),
                 file([row(0.0, 2.0, 0.01, float("nan"))]), file([row(0.5, 2.0, 0.01, 1.5)]),
                 file(good, y_max=3.0), file(good, n_c=2)):
        p = tmp_path / "rows.json"
        p.write_text(json.dumps(data))
        with pytest.raises(ValueError):
            cb.load_rows(str(p))
    p = tmp_path / "ok.json"
    p.write_text(json.dumps(file(good)))
    r = cb.load_rows(str(p))
    assert r.y_max == 2.0 and r.rho == (0.01, 0.02) and r.c == 2.0


def test_arb_contour_base_through_the_librarys_switch_lowers_the_moments_table():
    # the tool's Arb K_c handed to build_table: with no state above its threshold the U, V table bit for bit; from
    # 16 a_0² on, curves below it (strictly somewhere); the library itself is unchanged by the tool
    lib = ball_prv.build_table(1.0, 2.5, 2.0, _SMALL, contour_base=False)
    base = cb.ArbContourBase(_ROWS, 16.0)
    contour = ball_prv.build_table(1.0, 2.5, 2.0, _SMALL, contour_base=base)
    none = ball_prv.build_table(1.0, 2.5, 2.0, _SMALL, contour_base=cb.ArbContourBase(_ROWS, 1e9))
    np.testing.assert_array_equal(none.top.omega, lib.top.omega)
    a0 = float(ball_prv._lattice(1.0, _SMALL)[0])  # the table's Base cell (≤ 0.1m)
    assert base.used and min(base.used) >= 16 * a0 * a0
    alpha = np.exp(np.linspace(0.0, 3.0, 13))
    h_lib, h_con = lib.top.h_pq(alpha), contour.top.h_pq(alpha)
    assert np.all(h_con <= h_lib * (1 + 1e-9)) and np.any(h_con < h_lib * (1 - 1e-3))
