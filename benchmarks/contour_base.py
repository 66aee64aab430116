r"""C5 of the contour Base (issue 35 item 1): the Base curve from C1–C4, put into the table, ε measured
(docs/accounting.md, "C5: the contour Base curve, assembled"; ``python benchmarks/contour_base.py``).

Units: GG(β, 1) noise, m = 1/σ, p = 2, 2 < β ≤ 3 (run at β = 2.5), a_0 = 0.1 (the C3 rows' and C4's). A Base member
is a shift μ with 0 ≤ μ_i ≤ a_0 and 2-mass R' = Σμ_i²; its pair (P_μ, Q) has X = e^ℓ under Q with
M(z) = E_Q X^z = Π_i φ(z; μ_i), and the Gaussian limit N(√(I_β R')) has M_G(z) = e^{I_β R' z(z−1)/2}. At z = c + iy:

* C1: H_α = (1/2π)∫ M(z)α^{1−z}/(z(z − 1)) dy for c > 1 (and likewise for M_G), so
  |H_α(P_μ‖Q) − H_α(N(√(I_β R')))| ≤ (α^{1−c}/π)∫_0^∞ |M − M_G|/|z(z − 1)| dy  (M(c − iy) = conj M(c + iy));
* C3 (rows): |log φ(z; a) − I_β a²z(z − 1)/2| ≤ a²ρ and log|φ(z; a)| ≤ a²λ on each y-row for every a ∈ (0, a_0]
  (the cells on [a_0/16, a_0], Lemma Z3 below), so |M − M_G| ≤ min(|M_G|(e^{R'ρ} − 1), e^{R'λ} + |M_G|);
* C4: the part |y| > Y = 40 by ``contour_decay.tail_bound`` (proven for every a ≤ a_0);
* C2 (masses): a state of mass R_i holds every member of mass ≤ R_i; those of mass in (R_{i−1}, R_i] are bounded
  by the sup of the above over R' ∈ [R_{i−1}, R_i] (:func:`error_rate`), those below by the previous state's values;
* C5: err(α) = min_c α^{1−c}K_c over the rows' c (K_c = :func:`error_rate`), the Base values
  min(U, V, max(previous, H_α(N(√(I_β R_i))) + err)) at the table's grid points, both orientations alike (every
  member's pair is symmetric, Lemma T4), then Lemma T3's hull and connect-the-dots.

The library carries C5 (:mod:`opacus_gg.accountants.ball_contour`, docs "C5 in the library"): K_c in float64 from
the data file this tool writes (``export``: C3's rows, Λ_c, C4's tail pieces and κ, I_β's ends, all from Arb), and
the recursion in :func:`.ball_prv.base_states`. Here err is an arb ball (python-flint, a dev dependency; the library
does not import it), rounded up to float at the end: :class:`ArbContourBase` is the library's contour Base with this
K_c, handed to ``build_table(..., contour_base=...)``, the oracle of the float one. The rows are C3's files
(``contour_remainder.py --out``; β = 2.5, c = 1.2, 2, 4 in ``benchmarks/data/c3_rows_c*.json``). Subcommands:
``curve`` (err against the Gaussian's H_α at a few masses and α), ``epsilon`` (the β = 2.5 table with the Arb
contour Base in the states of mass ≥ n·a_0², its ε), ``export`` (the library's data file); :func:`shape_check` (err
against explicit shapes) is the tests' check. The disk cache is off (``base_ceiling``), so no table built here is
stored or read.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from flint import arb

sys.path.insert(0, os.path.dirname(__file__))
import base_ceiling  # noqa: E402  (sets the disk cache off)
import contour_decay  # noqa: E402
from contour_decay import DecayConstants, _up  # noqa: E402
import contour_remainder  # noqa: E402
from contour_remainder import fisher  # noqa: E402

from opacus_gg.accountants import ball_contour, ball_prv  # noqa: E402
from opacus_gg.accountants.ball_contour import contour_error  # noqa: E402
from opacus_gg.accountants.gg_pair import GGPair  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Rows:
    """C3's rows at one c: ρ ≥ sup|r|/a², λ ≥ sup log|φ|/a² over a ∈ (0, a0] and y ∈ [y_lo, y_hi] (the cells on
    [a_min, a0], Lemma Z3 below a_min); the rows cover [0, y_max] (checked on load)."""

    beta: float
    c: float
    a0: float
    a_min: float
    y_lo: Tuple[float, ...]
    y_hi: Tuple[float, ...]
    rho: Tuple[float, ...]
    lam: Tuple[float, ...]

    @property
    def y_max(self) -> float:
        return self.y_hi[-1]


def load_rows(path: str) -> Rows:
    """The rows of a C3 file (:func:`contour_remainder.write_rows`, one c; ρ, λ the sup over a ∈ (0, a_0], checked
    there to cover [0, y_max] without gaps and to be the larger of the cells' and Lemma Z3's parts); raises unless
    the file holds one c, every ρ ≥ 0 (∞ allowed: the log's cut) and every λ is finite."""
    meta, tables = contour_remainder.load_rows(path)
    if len(tables) != 1:
        raise ValueError(f"{path}: one c per file (found {sorted(tables)})")
    (c, rows), = tables.items()
    for r in rows:
        if not (r["y_lo"] < r["y_hi"] and r["rho"] >= 0.0 and math.isfinite(r["lam"])):
            raise ValueError(f"{path}: bad row {r}")
    return Rows(float(meta["beta"]), float(c), float(meta["a0"]), float(meta["a_min"]),
                *(tuple(float(r[k]) for r in rows) for k in ("y_lo", "y_hi", "rho", "lam")))


#: each C3 row is read on this many equal parts (1/|z(z − 1)| at each part's start)
SUB_ROWS = 4


def error_rate(rows: Rows, decay: DecayConstants, r_lo: float, r_hi: float, sub: int = SUB_ROWS) -> float:
    r"""K_c ≥ sup over R' ∈ [r_lo, r_hi] (0 < r_lo ≤ r_hi) and over every member of 2-mass R' of
    (1/π)∫_0^∞ |M − M_G|/|z(z − 1)| dy at z = c + iy, rounded up (so err ≤ α^{1−c}K_c, C1).

    On a row [y_lo, y_hi] (ρ, λ constant; 1/|z(z − 1)| non-increasing in y ≥ 0, so read at y_lo; ∫min ≤ min∫):
    |M_G| = e^{I R'(c² − c)/2}e^{−I R'y²/2} ≤ e^{I r_hi(c² − c)/2}e^{−I r_lo y²/2} =: g(y) (c > 1), whose integral
    over the row is closed form (erfc); e^{R'ρ} − 1 ≤ e^{r_hi ρ} − 1; e^{R'λ} ≤ max at the ends. So the row gives
    min((e^{r_hi ρ} − 1)∫g, max(e^{r_lo λ}, e^{r_hi λ})(y_hi − y_lo) + ∫g)/|z(z − 1)|(y_lo), on each of ``sub``
    equal parts of the row (its ρ, λ hold on each). Beyond y_max: |M| by C4's tail_bound at r_lo plus at r_hi (each
    of its terms e^{R'(Λ_c − κ_i)} is largest at an end; :func:`_tail`), and |M_G| by ∫_Y^∞ g (erfc) over
    |z(z − 1)| at Y."""
    if not 0.0 < r_lo <= r_hi:
        raise ValueError(f"need 0 < r_lo <= r_hi, got {r_lo}, {r_hi}")
    if not (decay.c == rows.c and decay.beta == rows.beta and decay.a0 >= rows.a0):
        raise ValueError("the decay constants must be at the rows' (beta, c) and an a0 >= the rows'")
    i_b = fisher(rows.beta)
    c = arb(rows.c)
    lo, hi = arb(r_lo), arb(r_hi)
    peak = (i_b * hi * (c * c - c) / 2).exp()
    s = (i_b * lo / 2).sqrt()  # g(y) = peak·e^{−(s y)²}, ∫_u^v g = peak·√π/(2s)·(erfc(su) − erfc(sv))
    gauss_scale = peak * arb.pi().sqrt() / (2 * s)
    total = arb(0)

    def zz(y: arb) -> arb:  # |z(z − 1)| at z = c + iy
        return (c * c + y * y).sqrt() * ((c - 1) ** 2 + y * y).sqrt()

    for y0, y1, rho, lam in zip(rows.y_lo, rows.y_hi, rows.rho, rows.lam):
        m_lam = (lo * arb(lam)).exp().max((hi * arb(lam)).exp())
        m_rho = None if math.isinf(rho) else (hi * arb(rho)).expm1()
        for j in range(sub):
            a = arb(y0) + (arb(y1) - arb(y0)) * j / sub
            b = arb(y1) if j == sub - 1 else arb(y0) + (arb(y1) - arb(y0)) * (j + 1) / sub
            g_int = gauss_scale * ((s * a).erfc() - (s * b).erfc())
            far = m_lam * (b - a) + g_int
            part = far if m_rho is None else (m_rho * g_int).min(far)
            total += part / zz(a)
    # beyond y_max: |M − M_G| ≤ |M| + |M_G|; |M_G| ≤ g and 1/|z(z − 1)| ≤ its value at y_max: ∫_Y^∞ g = erfc(sY)·…
    ymax = arb(rows.y_max)
    total += gauss_scale * (s * ymax).erfc() / zz(ymax)
    total = total / arb.pi()
    for r in (r_lo, r_hi):
        total += arb(_tail(decay, r, rows.y_max))  # already over π (|M| beyond y_max)
    return _up(total)


@functools.lru_cache(maxsize=4096)
def _tail(decay: DecayConstants, R: float, Y: float) -> float:
    """:func:`contour_decay.tail_bound` at t = 0 (α^{1−c} = 1), kept: consecutive states share an end."""
    return contour_decay.tail_bound(decay, R, 0.0, Y)


class ArbContourBase(ball_contour.ContourBase):
    r"""The library's contour Base (:class:`opacus_gg.accountants.ball_contour.ContourBase`: Lemma C2/C5's recursion
    in :func:`.ball_prv.base_states`, the float Gaussian limit and err(α) = min_c α^{1−c}K_c) with K_c from
    :func:`error_rate` (Arb, on C3's rows files) instead of the float one: the independent oracle of the float K_c,
    handed to :func:`.ball_prv.build_table` as its ``contour_base``. The states of mass ≥ ``min_cells``·a_0² take
    the contour values; :attr:`used` lists their masses."""

    def __init__(self, rows: Sequence[Rows], min_cells: float) -> None:
        beta = rows[0].beta
        data = ball_contour.contour_data(beta)
        if data is None:
            raise ValueError(f"no library data for beta {beta} (python3 benchmarks/contour_base.py export)")
        super().__init__(dataclasses.replace(data, a0=min(r.a0 for r in rows)), min_cells)
        self.rows = {r.c: r for r in rows}
        self.decay = {r.c: contour_decay.decay_constants(beta, r.c, r.a0) for r in rows}
        self.used: List[float] = []  # the masses where the contour values were taken

    def rates(self, r_lo: float, r_hi: float) -> Dict[float, float]:
        """{c: K_c} over R' ∈ [r_lo, r_hi] (:func:`error_rate`, Arb)."""
        return {c: error_rate(self.rows[c], self.decay[c], r_lo, r_hi) for c in self.rows}

    def values(self, r_prev: float, R: float, log_alpha: np.ndarray) -> np.ndarray:
        self.used.append(R)
        return super().values(r_prev, R, log_alpha)


def _row_files(paths: Sequence[str]) -> List[Rows]:
    rows = [load_rows(p) for p in paths]
    if len({r.beta for r in rows}) != 1:
        raise ValueError("rows of one beta only")
    return rows


def curve_rows(rows: Sequence[Rows], masses: Sequence[float], ts: Sequence[float], step: float) -> None:
    """err over [R − step, R] against H_α of the Gaussian limit at R, per (R, log α)."""
    beta = rows[0].beta
    base = ArbContourBase(rows, 0.0)
    print(f"beta {beta:g}, rows c = {sorted(base.rows)}, a in (0, {rows[0].a0:g}] (Lemma Z3 below "
          f"{rows[0].a_min:g}), Y = {rows[0].y_max:g}")
    print("| R | K_c per c | log alpha | H_alpha (limit) | err | err / H |")
    print("|---|---|---|---|---|---|")
    for R in masses:
        k = base.rates(R - step, R)
        la = np.asarray(ts, dtype=float)
        h = ball_contour.gaussian_limit_curve(base.data, R, la)
        e = contour_error(k, la)
        for t, hh, ee in zip(ts, h, e):
            ks = ", ".join(f"{c:g}: {v:.3g}" for c, v in sorted(k.items()))
            print(f"| {R:g} | {ks} | {t:g} | {hh:.4g} | {ee:.3g} | {ee / hh:.3g} |")
        sys.stdout.flush()


def shape_pair(beta: float, parts: Sequence[Tuple[float, int]], n: int = 1 << 14):
    r"""A pair dominating the shape of k_j coordinates of size a_j (``parts``: ((a_j, k_j), ...)): the library's
    spread pairs (:func:`.spreads.exact_spread_pair`; one coordinate split onto a grid), composed
    (:func:`.discrete.compose_aligned`). Independent of the contour bound (no C1–C4 code)."""
    from opacus_gg.accountants.discrete import compose_aligned, split_to_grid
    from opacus_gg.accountants.spreads import exact_spread_pair

    pairs = [split_to_grid(GGPair(a, beta), n) if k == 1 else exact_spread_pair(1.0 / (a * math.sqrt(k)), beta, k,
                                                                                  2.0, n) for a, k in parts]
    out = pairs[0]
    for p in pairs[1:]:
        out = compose_aligned(out, p)
    return out


def shape_check(rows: Sequence[Rows], shapes: Dict[str, Sequence[Tuple[float, int]]], ts: Sequence[float],
                step: float, scale: float = 1.0, r_hi: Optional[float] = None) -> float:
    """The smallest H_α(G_{r_hi}) + scale·err_{[r_hi − step, r_hi]}(α) − H_α(shape) over the shapes and log α ∈ ts
    (``r_hi`` None: the shape's mass R; else R must lie in the interval): ≥ 0 where the Base value holds for the
    shape (the shape's curve from a dominating pair, :func:`shape_pair`). Prints one line per shape."""
    beta = rows[0].beta
    base = ArbContourBase(rows, 0.0)
    la = np.asarray(ts, dtype=float)
    worst = math.inf
    for name, parts in shapes.items():
        R = sum(a * a * k for a, k in parts)
        hi = R if r_hi is None else r_hi
        if not hi - step <= R <= hi:
            raise ValueError(f"{name}: mass {R} outside [{hi - step}, {hi}]")
        e = contour_error(base.rates(hi - step, hi), la) * scale
        g = ball_contour.gaussian_limit_curve(base.data, hi, la)
        h = shape_pair(beta, parts).h_pq(np.exp(la))
        slack = g + e - h
        worst = min(worst, float(slack.min()))
        print(f"{name}: R {R:.4g}; |H_shape - H_G| max {np.max(np.abs(h - g)):.3g}, err min {e.min():.3g},"
              f" smallest slack {slack.min():.3g} (log alpha {la[int(np.argmin(slack))]:g})")
    return worst


def epsilon_rows(rows: Sequence[Rows], spec: str, min_cells: Sequence[float], q: float, steps: int,
                 delta: float) -> None:
    """The β table (σ = 1, p = 2, cells ``base_ceiling.SPECS[spec]``) with the contour Base in the states of mass
    ≥ n·a_0², its PRV ε (upper end, max over remove/add)."""
    beta = rows[0].beta
    for n in min_cells:
        base = ArbContourBase(rows, n)
        tab = ball_prv.build_table(1.0, beta, 2.0, base_ceiling.SPECS[spec], contour_base=base)
        e = base_ceiling._eps(tab.pairs, q, steps, delta, tab.roundoff)
        print(f"| {spec} | {n:g} a_0^2 | {e:.6f} | {tab.states} | {tab.seconds:.0f} s | contour states"
              f" {len(base.used)} | C {tab.roundoff:.1e} |")
        sys.stdout.flush()


#: where ``export`` writes the library's file for one β (read by :mod:`opacus_gg.accountants.ball_contour`)
EXPORT_DIR = os.path.join(os.path.dirname(__file__), os.pardir, "opacus_gg", "accountants", "data")
#: the tail's geometric pieces, as :func:`contour_decay.tail_bound`'s defaults (ratio, y_end)
TAIL_RATIO, TAIL_END = 1.1, 1e7


def tail_pieces(decay: DecayConstants, Y: float) -> Tuple[List[float], List[float]]:
    """(y_i, κ_i): the pieces [y_i, y_{i+1}] of [Y, y_end] of :func:`contour_decay.tail_bound` (the same floats: ratio
    1.1 from Y, y_end last) and κ_i = :func:`contour_decay.kappa_lower` at each y_i (|M| ≤ e^{R'(Λ_c − κ_i)} for every
    |y| ≥ y_i; at y_end beyond)."""
    ys = [float(Y)]
    while ys[-1] * TAIL_RATIO < TAIL_END:
        ys.append(ys[-1] * TAIL_RATIO)
    ys.append(float(TAIL_END))
    return ys, [contour_decay.kappa_lower(decay, y, y_end=TAIL_END) for y in ys]


def export_data(rows: Sequence[Rows], paths: Sequence[str]) -> dict:
    """The library's data for one β (:mod:`opacus_gg.accountants.ball_contour`): I_β's ends, and per c the rows
    (y_lo, y_hi, ρ, λ), Λ_c and the tail's pieces (y_i, κ_i), every number a float computed here in Arb (one source
    of truth: the library reads, never recomputes them)."""
    beta = rows[0].beta
    i_b = fisher(beta)
    out = {"format": 1, "beta": beta, "a0": min(r.a0 for r in rows), "a_min": max(r.a_min for r in rows),
           "fisher_lower": contour_decay._down(i_b), "fisher_upper": _up(i_b), "sub_rows": SUB_ROWS,
           "command": "python3 benchmarks/contour_base.py export --rows "
                      + " ".join(os.path.relpath(p, os.path.join(os.path.dirname(__file__), os.pardir)) for p in paths),
           "tables": []}
    for r in sorted(rows, key=lambda x: x.c):
        k = contour_decay.decay_constants(beta, r.c, r.a0)
        ys, kap = tail_pieces(k, r.y_max)
        out["tables"].append({"c": r.c, "a0": r.a0, "y_lo": list(r.y_lo), "y_hi": list(r.y_hi), "rho": list(r.rho),
                              "lam": list(r.lam), "log_moment_rate": k.lam, "tail_y": ys, "tail_kappa": kap})
    return out


def export_path(beta: float) -> str:
    """The shipped file of one β."""
    return os.path.normpath(os.path.join(EXPORT_DIR, ball_contour._data_file(beta)))  # the name the library reads


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("curve", "epsilon"):
        s = sub.add_parser(name)
        s.add_argument("--rows", nargs="+", required=True,
                       help="C3's rows files, one c each (contour_remainder.py --out; benchmarks/data/c3_rows_c*.json)")
        if name == "curve":
            s.add_argument("--mass", type=float, nargs="+", default=[0.16, 0.32, 0.64, 1.0])
            s.add_argument("--t", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0, 4.0])
            s.add_argument("--step", type=float, default=0.0025)
        else:
            s.add_argument("--spec", default="above-top")
            s.add_argument("--min-cells", type=float, nargs="+", default=[16.0])
            s.add_argument("--q", type=float, default=0.01)
            s.add_argument("--steps", type=int, default=1000)
            s.add_argument("--delta", type=float, default=1e-5)
    ex = sub.add_parser("export", help="the library's data file of one beta from C3's rows and C4's constants")
    ex.add_argument("--rows", nargs="+", required=True)
    ex.add_argument("--out", default=None, help="default: opacus_gg/accountants/data/contour_beta<beta>.json")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.cmd == "export":
        rows = _row_files(args.rows)
        data = export_data(rows, args.rows)
        out = args.out or export_path(rows[0].beta)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as fh:
            json.dump(data, fh, indent=1)
            fh.write("\n")
        print(f"wrote {out}")
    elif args.cmd == "curve":
        curve_rows(_row_files(args.rows), args.mass, args.t, args.step)
    else:
        print("| spec | contour Base from | eps (upper end) | states | build | contour states | C | |")
        print("|---|---|---|---|---|---|---|---|")
        epsilon_rows(_row_files(args.rows), args.spec, args.min_cells, args.q, args.steps, args.delta)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
