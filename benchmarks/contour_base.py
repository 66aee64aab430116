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
  member's pair is symmetric, Lemma T4), then Lemma T3's hull and connect-the-dots (:func:`contour_base`).

Everything of err is an arb ball (python-flint, a dev dependency; the library does not import it), rounded up to
float at the end. The rows are C3's files (``contour_remainder.py --out``; β = 2.5, c = 1.2, 2, 4 shipped in
``benchmarks/data/c3_rows_c*.json``). Subcommands: ``curve`` (err against the
Gaussian's H_α at a few masses and α), ``epsilon`` (the β = 2.5 table with the contour Base in the states of mass
≥ n·a_0², its ε); :func:`shape_check` (err against explicit shapes) is the tests' check. Nothing here is wired into
``opacus_gg/``; the disk cache is off (``base_ceiling``), so no table built here is stored or read.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import math
import os
import sys
import time
from typing import Dict, Iterator, List, Optional, Sequence, Tuple
from unittest import mock

import numpy as np
from flint import arb

sys.path.insert(0, os.path.dirname(__file__))
import base_ceiling  # noqa: E402  (sets the disk cache off)
import contour_decay  # noqa: E402
from contour_decay import DecayConstants, _up  # noqa: E402
import contour_remainder  # noqa: E402
from contour_remainder import fisher  # noqa: E402

from opacus_gg.accountants import ball_prv  # noqa: E402
from opacus_gg.accountants.gg_pair import GGPair  # noqa: E402

UNIT_ROUNDOFF = 2.0 ** -53


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
    equal parts of the row (its ρ, λ hold on each). Beyond y_max: C4's tail_bound at r_lo plus at r_hi (each of its
    terms e^{R'(Λ_c − κ_i)} is largest at an end; :func:`_tail`)."""
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
    for y0, y1, rho, lam in zip(rows.y_lo, rows.y_hi, rows.rho, rows.lam):
        m_lam = (lo * arb(lam)).exp().max((hi * arb(lam)).exp())
        m_rho = None if math.isinf(rho) else (hi * arb(rho)).expm1()
        for j in range(sub):
            a = arb(y0) + (arb(y1) - arb(y0)) * j / sub
            b = arb(y1) if j == sub - 1 else arb(y0) + (arb(y1) - arb(y0)) * (j + 1) / sub
            g_int = gauss_scale * ((s * a).erfc() - (s * b).erfc())
            far = m_lam * (b - a) + g_int
            part = far if m_rho is None else (m_rho * g_int).min(far)
            zz = (c * c + a * a).sqrt() * ((c - 1) ** 2 + a * a).sqrt()
            total += part / zz
    total = total / arb.pi()
    for r in (r_lo, r_hi):
        total += arb(_tail(decay, r, rows.y_max))  # already over π
    return _up(total)


@functools.lru_cache(maxsize=4096)
def _tail(decay: DecayConstants, R: float, Y: float) -> float:
    """:func:`contour_decay.tail_bound` at t = 0 (α^{1−c} = 1), kept: consecutive states share an end."""
    return contour_decay.tail_bound(decay, R, 0.0, Y)


def gaussian_limit_curve(beta: float, R: float, log_alpha: np.ndarray) -> np.ndarray:
    """H_α(N(√(I_β R))‖N(0)) at α = e^{log_alpha} ≥ 1, rounded up: the shift's ball's upper end inflated by 10⁻⁹
    (as Lemma T3's Gaussian) and the curve by GGPair (Lemma R9)."""
    s = _up((fisher(beta) * arb(R)).sqrt()) * (1.0 + 1e-9)
    return GGPair(s, 2.0).h_pq(np.exp(log_alpha), log_alpha)


def contour_error(rates: Dict[float, float], log_alpha: np.ndarray) -> np.ndarray:
    """err(α) = min over c of α^{1−c}K_c (``rates`` {c: K_c}), rounded up (exp ≤ 2u, the product ≤ u)."""
    la = np.asarray(log_alpha, dtype=np.float64)
    if np.any(la < 0):
        raise ValueError("contour_error: the bound is read at alpha >= 1 only (the other side by symmetry)")
    out = np.full(la.shape, np.inf)
    for c, k in rates.items():
        out = np.minimum(out, k * np.exp((1.0 - c) * la) * (1.0 + 4.0 * UNIT_ROUNDOFF))
    return out


class ContourBase:
    r"""The Base's upper values at the grid points for states R_1 < R_2 < … (C2, C5): state i reads
    min(U, V, max(values of state i − 1, H_α(N(√(I_β R_i))) + err_{[R_{i−1}, R_i]}(α))) in both orientations
    where R_i ≥ ``min_cells``·a_0², U and V (Lemma T3) alone below. The states must come in increasing R (as
    :func:`.ball_prv.build_table` builds them); a state above the threshold without a previous one raises."""

    def __init__(self, beta: float, rows: Sequence[Rows], min_cells: float) -> None:
        self.beta, self.min_cells = beta, min_cells
        self.rows = {r.c: r for r in rows}
        self.decay = {r.c: contour_decay.decay_constants(beta, r.c, r.a0) for r in rows}
        self.a0 = min(r.a0 for r in rows)
        self.prev: Optional[Tuple[float, np.ndarray, np.ndarray]] = None
        self.used: List[float] = []  # the masses where the contour values were taken

    def rates(self, r_lo: float, r_hi: float) -> Dict[float, float]:
        """{c: K_c} over R' ∈ [r_lo, r_hi] (:func:`error_rate`)."""
        return {c: error_rate(self.rows[c], self.decay[c], r_lo, r_hi) for c in self.rows}

    def values(self, R: float, a0: float, moment_rates: np.ndarray, orders: Sequence[int], t: np.ndarray,
               g: "ball_prv._Grid", mean_variance: bool) -> Tuple[np.ndarray, np.ndarray]:
        """(H_α(P‖Q) at t ≥ 0, H_{1/α}(Q‖P) at t < 0) bounds for the state of mass R (base_pair's two arrays)."""
        if a0 > self.a0:
            raise ValueError(f"the table's Base cell {a0} exceeds the rows' a0 {self.a0}")
        if self.prev is not None and R <= self.prev[0]:
            self.prev = None  # a new table: its states start again from the smallest mass
        d_pos = ball_prv.moment_curve_bound(R, moment_rates, orders, t[g.pos])
        h_neg = ball_prv.moment_curve_bound(R, moment_rates, orders, -t[~g.pos])
        if mean_variance:
            rate2 = float(moment_rates[list(orders).index(2)])
            d_pos = np.minimum(d_pos, ball_prv.mean_variance_bound(R, rate2, t[g.pos]))
            h_neg = np.minimum(h_neg, ball_prv.mean_variance_bound(R, rate2, -t[~g.pos]))
        if R >= self.min_cells * a0 * a0:
            if self.prev is None:
                raise RuntimeError("contour Base: a state above the threshold without the state below it")
            r_prev, p_pos, p_neg = self.prev
            k = self.rates(r_prev, R)
            c_pos = gaussian_limit_curve(self.beta, R, t[g.pos]) + contour_error(k, t[g.pos])
            c_neg = gaussian_limit_curve(self.beta, R, -t[~g.pos]) + contour_error(k, -t[~g.pos])
            # the sum rounded up (one addition, ≤ u relative)
            c_pos, c_neg = c_pos * (1.0 + 2.0 * UNIT_ROUNDOFF), c_neg * (1.0 + 2.0 * UNIT_ROUNDOFF)
            d_pos = np.minimum(d_pos, np.maximum(p_pos, c_pos))
            h_neg = np.minimum(h_neg, np.maximum(p_neg, c_neg))
            self.used.append(R)
        d_pos, h_neg = np.clip(d_pos, 0.0, 1.0), np.clip(h_neg, 0.0, 1.0)
        self.prev = (R, d_pos, h_neg)
        return d_pos, h_neg


@contextlib.contextmanager
def contour_base(beta: float, rows: Sequence[Rows], min_cells: float) -> Iterator[ContourBase]:
    r"""Inside the block :func:`.ball_prv.build_table` reads its Base from :class:`ContourBase` (U, V below
    ``min_cells``·a_0², the contour values from there on), as Lemma T3's hull of those values realized by connect
    the dots; the library is unchanged outside the block (``base_ceiling.ideal_base``'s pattern). β > 2 only (no
    Gaussian of Lemma N to drop)."""
    if not beta > 2.0:
        raise ValueError("the contour Base is built for beta > 2")
    base = ContourBase(beta, rows, min_cells)
    seen = {}

    def gauss_rate(a0: float, b: float, p: float) -> None:
        if p != 2.0 or b != beta:
            raise ValueError(f"contour Base: built for (beta, p) = ({beta}, 2), got ({b}, {p})")
        seen["a0"] = a0
        return None

    def base_pair(R, rates, orders, t, grid=None, gauss_rate=None, mean_variance=False):
        g = ball_prv._Grid(t) if grid is None else grid
        d_pos, h_neg = base.values(R, seen["a0"], rates, orders, t, g, mean_variance)
        return ball_prv._hull_pair(g, d_pos, g.e_neg * h_neg)

    with mock.patch.object(ball_prv, "base_gaussian_rate", gauss_rate), \
            mock.patch.object(ball_prv, "base_pair", base_pair):
        yield base


def _row_files(paths: Sequence[str]) -> List[Rows]:
    rows = [load_rows(p) for p in paths]
    if len({r.beta for r in rows}) != 1:
        raise ValueError("rows of one beta only")
    return rows


def curve_rows(rows: Sequence[Rows], masses: Sequence[float], ts: Sequence[float], step: float) -> None:
    """err over [R − step, R] against H_α of the Gaussian limit at R, per (R, log α)."""
    beta = rows[0].beta
    base = ContourBase(beta, rows, 0.0)
    print(f"beta {beta:g}, rows c = {sorted(base.rows)}, a in (0, {rows[0].a0:g}] (Lemma Z3 below "
          f"{rows[0].a_min:g}), Y = {rows[0].y_max:g}")
    print("| R | K_c per c | log alpha | H_alpha (limit) | err | err / H |")
    print("|---|---|---|---|---|---|")
    for R in masses:
        k = base.rates(R - step, R)
        la = np.asarray(ts, dtype=float)
        h = gaussian_limit_curve(beta, R, la)
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
    base = ContourBase(beta, rows, 0.0)
    la = np.asarray(ts, dtype=float)
    worst = math.inf
    for name, parts in shapes.items():
        R = sum(a * a * k for a, k in parts)
        hi = R if r_hi is None else r_hi
        if not hi - step <= R <= hi:
            raise ValueError(f"{name}: mass {R} outside [{hi - step}, {hi}]")
        e = contour_error(base.rates(hi - step, hi), la) * scale
        g = gaussian_limit_curve(beta, hi, la)
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
        with contour_base(beta, rows, n) as base:
            tab = ball_prv.build_table(1.0, beta, 2.0, base_ceiling.SPECS[spec])
        e = base_ceiling._eps(tab.pairs, q, steps, delta, tab.roundoff)
        print(f"| {spec} | {n:g} a_0^2 | {e:.6f} | {tab.states} | {tab.seconds:.0f} s | contour states"
              f" {len(base.used)} | C {tab.roundoff:.1e} |")
        sys.stdout.flush()


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
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.cmd == "curve":
        curve_rows(_row_files(args.rows), args.mass, args.t, args.step)
    else:
        print("| spec | contour Base from | eps (upper end) | states | build | contour states | C | |")
        print("|---|---|---|---|---|---|---|---|")
        epsilon_rows(_row_files(args.rows), args.spec, args.min_cells, args.q, args.steps, args.delta)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
