r"""The contour Base of the ball table above β = 2 at p = 2: upper values of the Base states from the Gaussian limit
and an enclosed contour-integral error (docs/accounting.md, "C5: the contour Base curve, assembled" and "C5 in the
library").

Units: GG(β, 1) noise, m = 1/σ, p = 2. A member of the Base set is a shift μ with 0 ≤ μ_i ≤ a_0 (the data's a_0;
the table's Base cell lat[0] must be ≤ it) and 2-mass R' = Σμ_i²; its pair (P_μ, Q), X = e^ℓ under Q,
M(z) = E_Q X^z, and the Gaussian limit N(√(I_β R')) with M_G(z) = e^{I_β R' z(z − 1)/2}. For c > 1, α = e^t ≥ 1:

    |H_α(P_μ‖Q) − H_α(N(√(I_β R')))| ≤ α^{1−c} K_c,
    K_c = (1/π) Σ_parts min((e^{r_hi ρ} − 1)·Ĝ, max(e^{r_lo λ}, e^{r_hi λ})·(v − u) + Ĝ)/|z(z − 1)|_{y=u}
          + tail(r_lo) + tail(r_hi) + gtail,

for every R' ∈ [r_lo, r_hi] (Lemmas C1', C2): the parts [u, v] are each C3 row [y_lo, y_hi] (its ρ ≥ sup|log φ −
I_β a²z(z − 1)/2|/a², λ ≥ sup log|φ|/a² over a ∈ (0, a_0]) cut into ``sub_rows`` equal parts; Ĝ ≥ ∫_u^v g with
g(y) = e^{I_β r_hi(c² − c)/2 − I_β r_lo y²/2} ≥ |M_G| (:func:`_gauss_integral_up`: y² − u² ≥ 2u(y − u), no erfc);
tail(R) = (1/π)Σ_i e^{R(Λ_c − κ_i)}(1/y_i − 1/y_{i+1}) + e^{R(Λ_c − κ_end)}/y_end (Lemma D7 on the pieces
[y_i, y_{i+1}] of [Y, y_end], Y the rows' end) bounds |M| beyond Y, and gtail = peak·∫_Y^∞ e^{−s²y²}dy/
(π|z(z − 1)|_{y=Y}) bounds |M_G| there (:func:`gauss_tail_rate`; g = peak·e^{−s²y²} as above).
err(α) = min_c α^{1−c}K_c. A Base state of mass R_i above the threshold takes min(U, V, max(previous state's values, H_α(N(√(I_β R_i))) + err_{[R_{i−1}, R_i]}(α))) (Lemma C5;
both orientations alike, every member's pair being symmetric).

The rows, Λ_c, the tail pieces (y_i, κ_i) and I_β's two ends are data (``data/contour_beta<β>.json``, written in Arb
by ``python3 benchmarks/contour_base.py export``; checked on load, :func:`load_contour_data`); everything here is
float64, every result an upper bound by the rounding argument of docs/accounting.md ("C5 in the library", Lemma F):
u = 2⁻⁵³; +, −, ×, ÷, sqrt correctly rounded (≤ u relative each); exp and expm1 ≤ 2u relative (the library's charge,
as :func:`.ball_prv.moment_curve_bound`); an exponent computed with relative error ≤ k·u is raised by (k + 2)·u·|x|
before exp (:func:`_exp_up`), so e^{exact} ≤ the value; below the normal range, 2·2⁻¹⁰⁷⁴ more (absolute).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Dict, Optional, Tuple

import numpy as np

from .checks import LEAST_SUBNORMAL, UNIT_ROUNDOFF, AccountingError
from .gg_pair import GGPair

__all__ = ["ContourRows", "ContourData", "parse_contour_data", "load_contour_data", "contour_data", "shipped_betas",
           "contour_applies", "error_rate", "tail_rate", "gauss_tail_rate", "gauss_tail_integral_up", "contour_error",
           "gaussian_limit_curve", "ContourBase", "MIN_CELLS"]

u = UNIT_ROUNDOFF
#: the contour values are taken in the Base states of 2-mass ≥ MIN_CELLS·a_0² (a_0 = the table's lat[0]) that have
#: a state below them (Lemma C2's recursion); below, U and V alone (the error does not vanish as R' → 0)
MIN_CELLS = 1.0


@dataclass(frozen=True)
class ContourRows:
    """One c's data: C3's rows (y_lo, y_hi, ρ, λ; ρ = ∞ where the row meets the log's cut), Λ_c and the tail's
    pieces (y_i, κ_i), y_0 = the rows' end Y, the last y_end (module docstring)."""

    c: float
    y_lo: np.ndarray
    y_hi: np.ndarray
    rho: np.ndarray
    lam: np.ndarray
    log_moment_rate: float
    tail_y: np.ndarray
    tail_kappa: np.ndarray


@dataclass(frozen=True)
class ContourData:
    """The shipped data of one β: rows and tails per c, the a_0 they hold for, I_β in [fisher_lower, fisher_upper],
    and the equal parts per row (``sub_rows``)."""

    beta: float
    a0: float
    fisher_lower: float
    fisher_upper: float
    sub_rows: int
    tables: Tuple[ContourRows, ...]
    source: str


def _fail(source: str, what: str) -> None:
    raise AccountingError(f"contour Base data {source}: {what}; rebuild it with "
                          "'python3 benchmarks/contour_base.py export --rows benchmarks/data/c3_rows_c*.json'")


def _floats(raw, key: str, source: str, allow_inf: bool = False) -> np.ndarray:
    arr = np.asarray(raw[key], dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0 or np.any(np.isnan(arr)) or (not allow_inf and not np.all(np.isfinite(arr))):
        _fail(source, f"'{key}' of c = {raw.get('c')} is not a list of finite numbers")
    return arr


def parse_contour_data(data: dict, source: str) -> ContourData:
    """The checked :class:`ContourData` of a decoded file; raises :class:`.checks.AccountingError` unless: every
    number finite (ρ may be +∞), 0 < fisher_lower ≤ fisher_upper, c > 1, the rows of each c cover [0, Y] in order
    without gaps or overlaps (y_lo[0] = 0, y_hi[k] = y_lo[k+1], y_lo < y_hi), ρ ≥ 0, the tail pieces start at Y,
    increase with ratio ≤ 2 (so y_{i+1} − y_i is exact, Sterbenz) and κ_i finite, Λ_c finite."""
    try:
        beta, a0 = float(data["beta"]), float(data["a0"])
        i_lo, i_hi, sub = float(data["fisher_lower"]), float(data["fisher_upper"]), int(data["sub_rows"])
        raw_tables = list(data["tables"])
    except (KeyError, TypeError, ValueError) as e:
        _fail(source, f"missing or malformed field ({type(e).__name__}: {e})")
    if not (2.0 < beta <= 3.0 and 0.0 < a0 <= 0.5 and 0.0 < i_lo <= i_hi < math.inf and 1 <= sub <= 64):
        _fail(source, f"bad header (beta {beta}, a0 {a0}, I_beta in [{i_lo}, {i_hi}], sub_rows {sub})")
    if not raw_tables:
        _fail(source, "no table")
    tables = []
    for raw in raw_tables:
        try:
            c, lmr, ta0 = float(raw["c"]), float(raw["log_moment_rate"]), float(raw["a0"])
        except (KeyError, TypeError, ValueError) as e:
            _fail(source, f"malformed table ({type(e).__name__}: {e})")
        y_lo, y_hi, lam = (_floats(raw, k, source) for k in ("y_lo", "y_hi", "lam"))
        rho = _floats(raw, "rho", source, allow_inf=True)
        ty, tk = _floats(raw, "tail_y", source), _floats(raw, "tail_kappa", source)
        if not (1.0 < c < 64.0 and c - 1.0 + 1.0 == c and math.isfinite(lmr) and ta0 == a0):
            _fail(source, f"bad c {c}, Lambda_c {lmr} or a0 {ta0}")
        if not (y_lo.size == y_hi.size == rho.size == lam.size and ty.size == tk.size >= 2):
            _fail(source, f"c = {c}: row or tail lengths differ")
        if not (y_lo[0] == 0.0 and np.all(y_lo < y_hi) and np.array_equal(y_hi[:-1], y_lo[1:])):
            _fail(source, f"c = {c}: the rows do not cover [0, Y] in order without gaps")
        if not np.all(rho >= 0.0):
            _fail(source, f"c = {c}: a negative rho")
        if not (ty[0] == y_hi[-1] and np.all(ty[1:] > ty[:-1]) and np.all(ty[1:] <= 2.0 * ty[:-1])):
            _fail(source, f"c = {c}: the tail pieces do not start at Y = {y_hi[-1]} and increase (ratio <= 2)")
        tables.append(ContourRows(c, y_lo, y_hi, rho, lam, lmr, ty, tk))
    if len({t.c for t in tables}) != len(tables):
        _fail(source, "a c appears twice")
    return ContourData(beta, a0, i_lo, i_hi, sub, tuple(tables), source)


_DATA_PREFIX, _DATA_SUFFIX = "contour_beta", ".json"


def _data_file(beta: float) -> str:
    return f"{_DATA_PREFIX}{beta:g}{_DATA_SUFFIX}"


@functools.lru_cache(maxsize=1)
def shipped_betas() -> Tuple[float, ...]:
    """The β with shipped data (the package files ``data/contour_beta<β>.json``), increasing."""
    names = (r.name for r in resources.files(__package__).joinpath("data").iterdir())
    return tuple(sorted(float(n[len(_DATA_PREFIX):-len(_DATA_SUFFIX)]) for n in names
                        if n.startswith(_DATA_PREFIX) and n.endswith(_DATA_SUFFIX)))


def load_contour_data(beta: float) -> Optional[ContourData]:
    """The shipped data of ``beta`` (package data ``data/contour_beta<β>.json``), checked
    (:func:`parse_contour_data`); None where no file is shipped for ``beta`` (its name must read back as ``beta``
    exactly, and the β it holds must equal it: else the file is refused)."""
    name = _data_file(beta)
    if float(name[len(_DATA_PREFIX):-len(_DATA_SUFFIX)]) != beta:
        return None  # the file name rounds β (f"{β:g}"): no file holds this β (e.g. 0.7·3 = 2.0999999999999996)
    res = resources.files(__package__).joinpath("data", name)
    if not res.is_file():
        return None
    source = f"data/{name}"
    try:
        data = json.loads(res.read_text())
    except ValueError as e:
        _fail(source, f"not JSON ({e})")
    out = parse_contour_data(data, source)
    if out.beta != beta:
        _fail(source, f"holds beta {out.beta}, not {beta}")
    return out


@functools.lru_cache(maxsize=8)
def contour_data(beta: float) -> Optional[ContourData]:
    """:func:`load_contour_data`, kept for the process."""
    return load_contour_data(beta)


def contour_applies(beta: float, p: float, base_cell: float) -> Tuple[bool, str]:
    """(whether the ball table's Base is the contour Base, why): β with shipped data, p = 2, the table's Base cell
    ``base_cell`` (lat[0], absolute) ≤ the data's a_0 (else the Base set is not inside the rows' set)."""
    if p != 2.0:
        return False, f"contour Base not used: clip_norm_p = {p:g} (it is built for p = 2); Base min(U, V)"
    data = contour_data(float(beta))
    if data is None:
        betas = shipped_betas()
        near = min(betas, key=lambda b: abs(b - beta), default=None)
        listed = ", ".join(f"{b:g}" for b in betas)
        return False, (f"contour Base not used: no data shipped for beta = {float(beta)!r} (shipped: {listed}"
                       + ("" if near is None else f"; the nearest {near:g}") + "); Base min(U, V)")
    if not base_cell <= data.a0:
        return False, (f"contour Base not used: the table's Base cell a_0 = {base_cell:.4g} exceeds the data's "
                       f"a_0 = {data.a0:g} (noise_multiplier too small for these cells); Base min(U, V)")
    return True, (f"contour Base (beta = {beta:g}, c in {sorted(t.c for t in data.tables)}, data a_0 = {data.a0:g}) "
                  f"in the Base states of 2-mass >= {MIN_CELLS:g}*a_0^2 = {MIN_CELLS * base_cell ** 2:.4g} (table "
                  f"a_0 = {base_cell:.4g}); min(U, V) below")


# --- float upper bounds (rounding: module docstring and docs/accounting.md, Lemma F) -------------------------------

def _exp_up(x, k: int):
    """≥ e^{x'} for every x' with |x' − x| ≤ k·u·|x| (x computed with ≤ k roundings of relative u each): the exponent
    raised by (k + 2)·u·|x| (the addition rounds: ≤ u|x| more), exp ≤ 2u, the product with (1 + 4u) ≤ u; + 2·2⁻¹⁰⁷⁴
    (exp's absolute error below the normal range). Overflow gives +∞ (a valid upper bound)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.exp(x + (k + 2) * u * np.abs(x)) * (1.0 + 4.0 * u) + 2.0 * LEAST_SUBNORMAL


def _gauss_integral_up(s2: float, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r"""≥ ∫_a^b e^{−s²y²} dy for 0 ≤ a < b and s² > 0 (s2 ≤ the exact s²: the integral decreases in s²):
    y² − a² ≥ 2a(y − a), so the integral is ≤ e^{−s²a²}·(1 − e^{−2s²a(b − a)})/(2s²a) (≤ e^{−s²a²}(b − a), the
    value at a = 0). Rounded up: the exponents have ≤ 3 roundings (s²·a·a; 2s²·a·(b − a), b − a one more), −expm1 is
    increasing in its argument (raised by 6u: ≥ the exact one) and ≤ 2u, the denominator, the quotient and the
    margin's product 3 more (× (1 + 2u) and the final (1 + 12u)); the min with b − a (≥ the exact b − a after
    × (1 + 3u)); the product with e^{−s²a²} and the last margin 2 more: 7 roundings beside _exp_up, (1 + 12u)."""
    d = b - a
    w = 2.0 * s2 * a * d * (1.0 + 6.0 * u)  # ≥ 2s²a(b − a): 3 roundings (2× exact), raised by 6u
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(a > 0.0, -np.expm1(-w) / (2.0 * s2 * a) * (1.0 + 2.0 * u), d)
    # the quotient ≤ (b − a): where w is tiny the float ratio may exceed it by round-off only; take the smaller
    ratio = np.minimum(ratio, d * (1.0 + 3.0 * u))
    return _exp_up(-s2 * a * a, 2) * ratio * (1.0 + 12.0 * u)


def _inv_zz_up(c: float, y: np.ndarray) -> np.ndarray:
    """≥ 1/|z(z − 1)| = 1/(√(c² + y²)·√((c − 1)² + y²)) at z = c + iy: c − 1 exact (1 ≤ c < 2⁵³), 8 roundings."""
    zz = np.sqrt(c * c + y * y) * np.sqrt((c - 1.0) * (c - 1.0) + y * y)
    return (1.0 / zz) * (1.0 + 10.0 * u)


def tail_rate(rows: ContourRows, R: float) -> float:
    r"""≥ C4's tail (1/π)∫_Y^∞ |M|/|z(z − 1)| dy at α = 1 for every member of 2-mass R (Lemma D7): the pieces'
    weights 1/y_i − 1/y_{i+1} = (y_{i+1} − y_i)/(y_i y_{i+1}) (the difference exact, ratio ≤ 2; 2 roundings),
    1/y_end (1), the exponents R·(Λ_c − κ_i) (2 roundings), the sum by math.fsum (≤ u) of the positive terms, ÷ the
    float π (< π: the quotient only grows) ≤ u; each term: w's 2 roundings and 2 products beside :func:`_exp_up`:
    (1 + 6u); the sum, the quotient and the last product: (1 + 4u)."""
    y, kap = rows.tail_y, rows.tail_kappa
    w = np.append((y[1:] - y[:-1]) / (y[:-1] * y[1:]), 1.0 / y[-1])
    # the exponents R(Λ_c − κ_i): κ_i at the pieces' starts and, beyond y_end, at y_end (the last κ)
    terms = _exp_up(R * (rows.log_moment_rate - kap), 2) * w * (1.0 + 6.0 * u)
    return math.fsum(terms) / math.pi * (1.0 + 4.0 * u)


def _gauss_majorant(data: ContourData, c: float, r_lo: float, r_hi: float) -> Tuple[float, float]:
    """(peak, s²) with |M_G(c + iy)| ≤ g(y) = peak·e^{−s²y²} for every R' ∈ [r_lo, r_hi]: peak = e^{I_β r_hi c(c − 1)/2}
    with I_β's upper end (the exponent: 3 roundings, :func:`_exp_up`), s² = I_β r_lo/2 with its lower end, lowered
    by 3u (2 roundings): a smaller s² only raises g."""
    peak = float(_exp_up(data.fisher_upper * r_hi * (c * (c - 1.0)) / 2.0, 3))
    return peak, data.fisher_lower * r_lo / 2.0 * (1.0 - 3.0 * u)


def gauss_tail_rate(data: ContourData, rows: ContourRows, r_lo: float, r_hi: float) -> float:
    r"""≥ (1/π)∫_Y^∞ |M_G|/|z(z − 1)| dy for every R' ∈ [r_lo, r_hi] (Y = the rows' end): the Gaussian's part of
    |M − M_G| ≤ |M| + |M_G| beyond the rows (:func:`tail_rate` bounds |M|'s). |M_G| ≤ g(y) = peak·e^{−s²y²} as in
    :func:`error_rate` and 1/|z(z − 1)| ≤ its value at Y (non-increasing in y ≥ 0), so the part is ≤
    peak·∫_Y^∞ e^{−s²y²}dy/(π|z(z − 1)|_{y=Y}) (:func:`gauss_tail_integral_up`); rounded up: peak, the integral and
    1/|z(z − 1)| are upper values, two products and the division by the float π (< π) carry ≤ 3u, × (1 + 4u)."""
    c = rows.c
    peak, s2 = _gauss_majorant(data, c, r_lo, r_hi)
    y = float(rows.y_hi[-1])
    return float(peak * gauss_tail_integral_up(s2, y) * _inv_zz_up(c, np.array([y]))[0] / math.pi * (1.0 + 4.0 * u))


def gauss_tail_integral_up(s2: float, y: float) -> float:
    r"""≥ ∫_y^∞ e^{−s²t²} dt for s² > 0, y ≥ 0 (``s2`` ≤ the exact s²: the integral decreases in s²): with x = sy,
    ∫_y^∞ e^{−s²t²}dt = (1/s)∫_x^∞ e^{−t²}dt ≤ e^{−x²}/(s(x + √(x² + 4/π))) (Abramowitz & Stegun 7.1.13), which also
    decreases in s. Rounded up: s = √s² lowered by 2u (so ≤ the exact s), 4/π from the float π lowered by 4u (a
    smaller constant only raises the bound), e^{−s²y²} by :func:`_exp_up` (2 roundings), the denominator's 6
    roundings and the quotient's 1 covered by × (1 + 16u); below the normal range, 2·2⁻¹⁰⁷⁴ more (absolute)."""
    if not (s2 > 0.0 and y >= 0.0):
        raise ValueError(f"gauss_tail_integral_up: need s2 > 0 and y >= 0, got {s2}, {y}")
    s = math.sqrt(s2) * (1.0 - 2.0 * u)
    x = s * y
    den = s * (x + math.sqrt(x * x + 4.0 / math.pi * (1.0 - 4.0 * u)))
    # + twice the smallest subnormal: a quotient in the subnormal range errs absolutely (≤ half of it)
    return float(_exp_up(-s2 * y * y, 2)) / den * (1.0 + 16.0 * u) + 2.0 * LEAST_SUBNORMAL


def error_rate(data: ContourData, rows: ContourRows, r_lo: float, r_hi: float) -> float:
    r"""K_c ≥ sup over R' ∈ [r_lo, r_hi] of (1/π)∫_0^∞ |M − M_G|/|z(z − 1)| dy at z = c + iy, for every member of
    2-mass R' (module docstring; ``benchmarks/contour_base.error_rate`` computes the same bound in Arb, with the erfc
    closed form where this has :func:`_gauss_integral_up`), rounded up (Lemma F): the rows' parts, then beyond the
    rows |M| by C4's tail at both ends (:func:`tail_rate`) and |M_G| by :func:`gauss_tail_rate`."""
    if not 0.0 < r_lo <= r_hi < math.inf:
        raise ValueError(f"error_rate: need 0 < r_lo <= r_hi < inf, got {r_lo}, {r_hi}")
    c, n = rows.c, data.sub_rows
    # the parts: each row cut into n equal parts (their float ends; consecutive parts share an end exactly)
    frac = np.arange(n + 1, dtype=np.float64) / n
    edges = rows.y_lo[:, None] + (rows.y_hi - rows.y_lo)[:, None] * frac[None, :]
    edges[:, 0], edges[:, -1] = rows.y_lo, rows.y_hi
    if not np.all(edges[:, 1:] > edges[:, :-1]):
        raise AccountingError(f"contour Base: the parts of the rows at c = {c} are not increasing")
    a, b = edges[:, :-1], edges[:, 1:]
    rho = np.broadcast_to(rows.rho[:, None], a.shape)
    lam = np.broadcast_to(rows.lam[:, None], a.shape)
    peak, s2 = _gauss_majorant(data, c, r_lo, r_hi)
    g_int = peak * _gauss_integral_up(s2, a, b) * (1.0 + 4.0 * u)
    m_lam = np.maximum(_exp_up(r_lo * lam, 1), _exp_up(r_hi * lam, 1))
    far = (m_lam * (b - a) * (1.0 + 5.0 * u) + g_int) * (1.0 + 4.0 * u)  # b − a, two products; the sum, a product
    with np.errstate(over="ignore", invalid="ignore"):
        # e^{r_hi ρ} − 1: the exponent raised by 3u (1 rounding), expm1 ≤ 2u, the product ≤ u; ρ = ∞: ∞
        m_rho = np.expm1(r_hi * rho * (1.0 + 3.0 * u)) * (1.0 + 4.0 * u)
        near = np.where(np.isinf(m_rho), np.inf, m_rho * g_int * (1.0 + 4.0 * u))
    part = np.minimum(near, far) * _inv_zz_up(c, a) * (1.0 + 4.0 * u)
    if not np.all(np.isfinite(part)) or np.any(part < 0.0):
        raise AccountingError(f"contour Base: a row's error at c = {c}, R' in [{r_lo}, {r_hi}] is not finite")
    rows_part = math.fsum(part.ravel()) / math.pi * (1.0 + 4.0 * u)
    out = (rows_part + tail_rate(rows, r_lo) + tail_rate(rows, r_hi) + gauss_tail_rate(data, rows, r_lo, r_hi)) * (
        1.0 + 6.0 * u)  # three additions of non-negative terms and the product
    if not math.isfinite(out):
        raise AccountingError(f"contour Base: K_c at c = {c}, R' in [{r_lo}, {r_hi}] is not finite")
    return out


def contour_error(rates: Dict[float, float], log_alpha: np.ndarray) -> np.ndarray:
    """err(α) = min over c of α^{1−c}K_c (``rates`` {c: K_c}) at log α ≥ 0, rounded up: the exponent (1 − c)·log α
    (1 − c exact, 1 rounding), :func:`_exp_up`, two products (× (1 + 4u))."""
    la = np.asarray(log_alpha, dtype=np.float64)
    if np.any(la < 0.0):
        raise ValueError("contour_error: the bound is read at alpha >= 1 only (the other side by symmetry)")
    out = np.full(la.shape, np.inf)
    for c, k in rates.items():
        out = np.minimum(out, k * _exp_up((1.0 - c) * la, 1) * (1.0 + 4.0 * u))
    return out


def gaussian_limit_curve(data: ContourData, R: float, log_alpha: np.ndarray) -> np.ndarray:
    """H_α(N(√(I_β R))‖N(0)) at α = e^{log_alpha} ≥ 1, rounded up: the shift √(I_β R) from I_β's upper end (the
    product and sqrt: ≤ 1.5u below; × (1 + 4u) rounded: ≥ the exact shift, so ≥ the least float above it), then
    inflated by 10⁻⁹ relative (as Lemma T3's Gaussian), the curve by GGPair (Lemma R9; H_α increases with the
    shift, N(s) being a garbling of N(s') for s ≤ s')."""
    s = math.sqrt(data.fisher_upper * R) * (1.0 + 4.0 * u) * (1.0 + 1e-9)  # ≥ the exact √(I_β R) before the 1e-9
    la = np.asarray(log_alpha, dtype=np.float64)
    return GGPair(s, 2.0).h_pq(np.exp(la), la)


class ContourBase:
    r"""The contour values of the Base states (Lemma C5), taken as min(U, V, max(previous state's values, these)) by
    :func:`.ball_prv.base_states`: for the state of mass R_i with the state R_{i−1} below it and R_i ≥
    ``min_cells``·a_0² (a_0 = the table's Base cell, ≤ the data's ``a0``), H_α(N(√(I_β R_i))) +
    min_c α^{1−c}K_c([R_{i−1}, R_i]) at α = e^{|t|} (both orientations alike), rounded up. A subclass may replace
    :meth:`rates` (the research tool's Arb K_c, ``benchmarks/contour_base.py``)."""

    def __init__(self, data: ContourData, min_cells: float = MIN_CELLS) -> None:
        if not min_cells >= 0.0:
            raise ValueError(f"contour Base: min_cells must be >= 0, got {min_cells}")
        self.data, self.min_cells = data, float(min_cells)
        self.a0 = data.a0

    def applies(self, r_prev: Optional[float], R: float, base_cell: float) -> bool:
        """Whether the state of mass R (the state below it of mass ``r_prev``, None for the first) takes the
        contour values, the table's Base cell being ``base_cell`` (≤ :attr:`a0`, else ValueError)."""
        if not base_cell <= self.a0:
            raise ValueError(f"contour Base: the table's Base cell {base_cell} exceeds the data's a0 {self.a0}")
        return r_prev is not None and R >= self.min_cells * base_cell * base_cell

    def rates(self, r_lo: float, r_hi: float) -> Dict[float, float]:
        """{c: K_c} over R' ∈ [r_lo, r_hi] (:func:`error_rate`)."""
        return {t.c: error_rate(self.data, t, r_lo, r_hi) for t in self.data.tables}

    def values(self, r_prev: float, R: float, log_alpha: np.ndarray) -> np.ndarray:
        """H_α(N(√(I_β R))) + err_{[r_prev, R]}(α) at log α ≥ 0, rounded up (the sum and the product: × (1 + 4u))."""
        la = np.asarray(log_alpha, dtype=np.float64)
        out = (gaussian_limit_curve(self.data, R, la) + contour_error(self.rates(r_prev, R), la)) * (1.0 + 4.0 * u)
        if not np.all(np.isfinite(out)):
            raise AccountingError(f"contour Base: values at R = {R} are not finite")
        return out
