r"""A PRV-level dominating pair for every shift of the ℓp ball (1 ≤ p ≤ 2): the table over (p-mass, cap).

Noise units: GG(β, 1) per coordinate, m = 1/noise_multiplier, shifts μ ≥ 0 (reflection, Lemma A) with
‖μ‖_p ≤ m, in any dimension. E(R, c) is a discrete pair that dominates (P_μ, Q^{⊗n}) for every n and every μ with
max μ_i ≤ c and Σ μ_i^p ≤ R (docs/accounting.md, "Every shift at PRV level: the table over (p-mass, cap)").

Lattice a_0 < a_1 < … < a_J = m (ratio ``ratio_high`` on [high_from·m, m], ``ratio_low`` below, a_0 ≤ a0·m; a0 and
ratio_low − 1 divided by min(m, 2) for m > 1, :meth:`TableSpec.cells`); p-mass grid R_i = i·ΔR (ΔR < a_0^p
divided by :meth:`TableSpec.mass_steps`, R_N ≥ m^p). Split on the cell (a_{j−1}, a_j] of the largest coordinate:

    E(R_i, a_0) = Base(R_i, a_0)                                            (every coordinate ≤ a_0)
    E(R_i, a_j) = env(E(R_i, a_{j−1}), GG_{a_j} ⊗ E(R_k, a_j)),  R_k = ⌈R_i − a_{j−1}^p⌉   if a_{j−1}^p < R_i
    E(R_i, a_j) = E(R_i, a_{j−1})                                                           otherwise

(Lemma T1). env = the connect-the-dots pair of the lower convex hull of the pointwise max of the hockey-stick
curves on a uniform loss grid (Lemma T2); ⊗ = :meth:`.discrete.DiscretePair.compose`; Base = the Rényi-set pair,
and for β ≤ 2 the smaller of it and the Gaussian N(κ_β·a_0^{1−p/2}·√R) of Lemma N, and where the spec asks the
mean–variance bound (Lemma T3); at p = 2 and a β with shipped data (2.05, 2.1, …, 3:
:func:`.ball_contour.shipped_betas`) and a_0 ≤ the data's, from mass a_0² on also the contour Base of
:mod:`.ball_contour` (Lemmas C2, C5: the Gaussian limit plus an enclosed error; :func:`base_states`,
:func:`table_base`); where the spec sets ``sub_base``, the hull of the smaller of that and the state of a finer table
under a_0 (Lemma T3s: :func:`sub_table_states`, :func:`min_pair`). The computed pairs carry the connect-the-dots
round-off: each state records C with δ_computed ≥ (1 − C)·δ_exact at every loss t, accumulated along its
dependencies (Lemma T4). Every shift's pair is symmetric (H_α(P‖Q) = H_α(Q‖P), the noise is), so the published
one-step pair is the symmetric envelope of the top pair T and of T swapped (:class:`Swapped`): both adjacency directions then read curves ≥ (1 − C)·the exact ones, and C enters the
accountant's δ like a one-step PMF's round-off (Lemma R5).

Cost at the defaults, one core (benchmarks/ball_table_results.md): one table per (β, p, σ) (m = 1/σ sets the
lattice; at σ ≥ 1 the cost does not depend on σ): p = 1.2: 15.6k states, 35 s; p = 1.5: 48k, 81–95 s; p = 1.8
(:data:`NEAR_TWO_SPEC`): 65k, 4.5–5 min on a loaded machine; at σ = 0.5 (finer cells): p = 1.2: 62k, 2 min;
p = 1.5: 231k, 8.5–10 min on a loaded machine; at 0.25 ≤ σ < 0.5 (the mass grid twice as fine, :meth:`TableSpec.
mass_steps`): p = 1.2: 123k, 5 min; p = 1.5: 461k, 19–22 min; β > 2 at p = 2, σ = 1
(:data:`ABOVE_TWO_SPEC`): 57.8k, 2.5–3.7 min on an idle core (its loss grid is 2.5× wider), and above σ = 1 where
the contour Base has data (:func:`default_spec`: its cell held at 0.1 absolute, the finer table of Lemma T3s under
it) 2.5–3.5 min (β = 2.5, σ = 3.416 / 2: 150 / 198 s of CPU, 44k + 15k / 63k + 15k states, beside another job;
the whole CLI query's process ≤ 0.92 GB resident there and at β = 3, σ = 4.2577). The
top pairs are kept for the process (:func:`ball_table`, LRU) and on disk (:mod:`.table_cache`), so a table is
built once per (β, p, σ, spec) and library version.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, replace
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from ..validation import validate_beta, validate_positive
from . import table_cache
from .ball_contour import ContourBase, contour_applies, contour_data
from .ball_rdp import log_moment_uppers, quadratic_coefficient
from .checks import LEAST_SUBNORMAL, UNIT_ROUNDOFF, AccountingError, check_finite
from .discrete import DiscretePair, count_below, first_above, read_roundoff, tie_mismatch
from .discretization import ctd_pmf
from .gaussian_domination import gaussian_domination_applies, gaussian_domination_constant
from .gg_pair import GGPair, _safe_log

__all__ = ["TableSpec", "BallTable", "Swapped", "envelope_pair", "base_pair", "base_values", "base_states",
           "table_base", "moment_curve_bound",
           "base_log_moment_rates", "base_gaussian_rate", "build_table", "ball_table", "table_applies", "loss_grid",
           "mass_grid", "min_pair", "sub_table_states",
           "default_spec", "NEAR_TWO_SPEC", "ABOVE_TWO_SPEC", "NEAR_ABOVE_TWO_SPEC", "FINE_MASS_BELOW_BETA",
           "FINER_MASS_BELOW_BETA", "NEAREST_TWO_MASS_RATE", "NEAREST_TWO_MASS_SPLIT_MAX",
           "CONTOUR_CELL_GROWTH_MAX", "LARGE_SIGMA_SUB_BASE", "LARGE_SIGMA_RATIO_LOW",
           "LARGE_SIGMA_FROM",
           "mean_variance_bound"]


@dataclass(frozen=True)
class TableSpec:
    r"""Resolution of a ball table, relative to m = 1/σ (one spec means the same work at every σ ≥ 1).

    Lattice: ratio ``ratio_high`` on [high_from·m, m], ``ratio_low`` below, down to a_0 ≤ ``a0``·m; loss grid:
    step ``h``·m on [−``half_width``·m, ``half_width``·m]; p-mass step ΔR < a_0^p/``mass_split``; Base: Rényi
    orders ``orders`` (and, for β ≤ 2, the Gaussian of Lemma N). For m > 1 (σ < 1) the Base cell ``a0`` and the
    low cells' ``ratio_low`` − 1 are divided by min(m, ``refine_to``) (:meth:`cells`): at a fixed relative
    resolution the excess over the worst shape grows with m (σ = 0.5, β = p = 1.5: up to 7 %, set by the small
    coordinates of the rest beside a large one: a0, ratio_low and the mass step ΔR < a_0^p), and the cost grows
    like (m/a_0)^p·J, so the cells stop refining at m = refine_to; beyond it the mass step is divided by
    ⌈m/refine_to⌉ (:meth:`mass_steps`; σ = 0.3: the excess 1.017–1.041 → 1.011–1.033 for 2× the states).
    ``tail`` (None: off) widens the loss grid to the one coordinate's tail (:meth:`half_width_at`; needed above
    β = 2); ``mean_variance`` adds the mean–variance bound to the Base (:func:`mean_variance_bound`; there is no
    Gaussian Base above β = 2). ``sub_base`` (None: off) adds to each Base state E(R, a_0) a second bound, the state
    of a finer table with the cap a_0 (Lemma T3s, :func:`sub_table_states`): its cells ratio ``sub_ratio`` on
    (a'_0, a_0], a'_0 ≤ ``sub_base``·a_0, its p-mass step < a'_0^p/``sub_mass_split``, its own Base (Lemma T3) at
    a'_0; the Base state is the hull of the smaller of the two. Any spec gives an upper bound; finer ones a tighter
    one (defaults: within 2 % of the equal-spread PRV at β = p ≤ 1.5, σ ≥ 0.4, and β = p = 1.2 at σ = 0.3;
    benchmarks/ball_table_results.md)."""

    a0: float = 0.03
    ratio_low: float = 1.02
    ratio_high: float = 1.005
    high_from: float = 0.3
    h: float = 0.005
    half_width: float = 10.0
    orders: Tuple[int, ...] = tuple(range(2, 65))
    refine_to: float = 2.0
    mass_split: int = 1
    tail: Optional[float] = None
    mean_variance: bool = False
    sub_base: Optional[float] = None
    sub_ratio: float = 1.02
    sub_mass_split: int = 12

    def half_width_at(self, m: float, beta: float) -> float:
        """The loss grid's half-width at m (absolute): ``half_width``·m, widened where ``tail`` is set to the loss
        t_K = ((n + m)^β − n^β)/β, n = (β·K)^{1/β}, K = −log ``tail``, that one coordinate shifted by m exceeds only
        where its noise exceeds n (ℓ increases in x), probability ≤ e^{−n^β/β}/n^{β−1}·(1/Z) ≤ ``tail`` for n ≥ 1.
        Above β = 2 the loss of a shifted coordinate grows like m·x^{β−1}, so ±10m leaves more beyond the grid
        than δ allows (β = 3, σ = 1: 4.6·10⁻⁵ per step); any width is sound (the mass beyond is ρ, in δ)."""
        w = self.half_width * m
        if self.tail is None:
            return w
        n = (beta * -math.log(self.tail)) ** (1.0 / beta)
        return max(w, ((n + m) ** beta - n ** beta) / beta)

    def cells(self, m: float) -> Tuple[float, float]:
        """(a0, ratio_low) used at m: the spec's where min(m, refine_to) ≤ 1; a0/f and 1 + (ratio_low − 1)/f with
        f = min(m, refine_to) otherwise."""
        f = min(m, self.refine_to)
        if f <= 1.0:
            return self.a0, self.ratio_low
        return self.a0 / f, 1.0 + (self.ratio_low - 1.0) / f

    def mass_steps(self, m: float) -> int:
        """The p-mass step at m is ΔR < a_0^p/``mass_steps(m)``: ``mass_split``, times ⌈m/refine_to⌉ for
        m > ``refine_to`` (σ < 1/refine_to), where the cells have stopped refining and the mass grid refines on
        (the cost then grows like m, not like (m/a_0)^p·J)."""
        return self.mass_split * (int(math.ceil(m / self.refine_to)) if m > self.refine_to else 1)

    def __post_init__(self) -> None:
        for name in ("a0", "h", "half_width", "refine_to"):
            validate_positive(getattr(self, name), name)
        if not (self.ratio_low > 1.0 and self.ratio_high > 1.0):
            raise ValueError(f"ratio_low and ratio_high must be > 1, got {self.ratio_low}, {self.ratio_high}")
        if not (0.0 < self.high_from <= 1.0 and self.a0 < 1.0):
            raise ValueError(f"high_from must be in (0, 1] and a0 < 1, got {self.high_from}, {self.a0}")
        if not (isinstance(self.mass_split, int) and not isinstance(self.mass_split, bool) and self.mass_split >= 1):
            raise ValueError(f"mass_split must be an integer >= 1, got {self.mass_split!r}")
        # integers: Λ_j is enclosed at the integer order j (base_log_moment_rates) and U reads the same j
        if not self.orders or not all(isinstance(j, (int, np.integer)) and not isinstance(j, bool) and j >= 2
                                      for j in self.orders):
            raise ValueError(f"orders must be integers ≥ 2, got {self.orders!r}")
        if self.mean_variance and 2 not in self.orders:
            raise ValueError("mean_variance needs order 2 in orders (its Λ_2 bounds the variance)")
        if self.tail is not None and not 0.0 < self.tail < 1.0:
            raise ValueError(f"tail must be None or in (0, 1), got {self.tail!r}")
        if self.sub_base is not None and not 0.0 < self.sub_base < 1.0:
            raise ValueError(f"sub_base must be None or in (0, 1), got {self.sub_base!r}")
        if not self.sub_ratio > 1.0:
            raise ValueError(f"sub_ratio must be > 1, got {self.sub_ratio!r}")
        if not (isinstance(self.sub_mass_split, int) and not isinstance(self.sub_mass_split, bool)
                and self.sub_mass_split >= 1):
            raise ValueError(f"sub_mass_split must be an integer >= 1, got {self.sub_mass_split!r}")


#: the API builds tables for clip_norm_p ≤ this only at β ≤ 2. The table is valid for every p ≤ 2 (:func:`build_table`),
#: but at β ≤ 2 and p = 2 the worst shapes are many small coordinates, which the Base bounds by the Gaussian of
#: Lemma N (κ_β/√I_β too large below β ≈ 1.9) or at RDP level, and the table loses to the smaller of the Rényi bound
#: and that Gaussian alone (measured, β = 1.8, p = 2, σ = 1, quickstart / d = 10⁶: tables 2.18 / 1.91 (a0 = 0.15,
#: split 4) and 1.91 / 1.71 (a0 = 0.4, split 8), Rényi 1.96 / 1.69, Gaussian 1.89 / 1.69;
#: benchmarks/ball_table_results.md). Above β = 2 the large coordinates are the worst and tables go to p = 2
#: (:data:`ABOVE_TWO_SPEC`).
TABLE_P_MAX = 1.8
#: above this p the default spec is :data:`NEAR_TWO_SPEC` (β ≤ 2) or :data:`ABOVE_TWO_SPEC` (β > 2)
FINE_MASS_FROM_P = 1.6
#: the default spec for FINE_MASS_FROM_P < p ≤ TABLE_P_MAX at β ≤ 2: near p = 2 much of the p-mass can sit in many
#: mid-size coordinates, each of which the recursion charges a_{j−1}^p rounded up to the mass grid, so the grid must
#: be finer than a_0^p; with the Gaussian Base (Lemma N) a coarser a_0 does (measured, β = p = 1.8, σ = 1: a_0 = 0.06m
#: with ΔR < a_0^p gave 2.17 at the quickstart, with ΔR < a_0^p/4 1.552, against the equal-spread PRV 1.526;
#: benchmarks/ball_table_results.md)
NEAR_TWO_SPEC = TableSpec(a0=0.1, ratio_high=1.01, mass_split=8)
#: the default spec for FINE_MASS_FROM_P < p ≤ 2 at β > 2: the one-coordinate shapes are the worst there after
#: subsampling and composition, so the top cells are finest (ratio 1.002 above 0.7m, 1.02 below); the p-mass step
#: a_0^p/4; the loss grid reaches the one coordinate's tail (``tail``: its loss grows like m·x^{β−1}, ±10m leaves
#: 4.6·10⁻⁵ per step beyond the grid at β = 3, σ = 1), and the Base adds the mean–variance bound (Lemma T3; no
#: Gaussian above β = 2). Measured (β = 3 / 2.5, p = 2, σ = 1, q = 0.01, T = 1000, δ = 1e-5; docs/accounting.md "A
#: PRV-level Base: the ceiling, measured"): 10.9113 / 4.8987 against the one coordinate's 10.6134 / 4.5461, 57.8k
#: states (ratios 1.05 / 1.005, split 2, 11.7k states, gave 11.0856 / 5.1713); at β = 2.5 the contour Base
#: (:mod:`.ball_contour`, "C5 in the library") gives 4.6596 (1.025×), at β = 3 10.7244 (1.0105×)
ABOVE_TWO_SPEC = TableSpec(a0=0.1, ratio_low=1.02, ratio_high=1.002, high_from=0.7, h=0.01, mass_split=4,
                           tail=1e-13, mean_variance=True)
#: below this β (and above 2) the default spec at FINE_MASS_FROM_P < p ≤ 2 is :data:`NEAR_ABOVE_TWO_SPEC`
FINE_MASS_BELOW_BETA = 2.5
#: :data:`ABOVE_TWO_SPEC` with the p-mass step a_0^p/8, the default for 2 < β < :data:`FINE_MASS_BELOW_BETA`: near
#: β = 2 every shape comes close to the one coordinate, so the mass each cell's coordinate rounds up reaches the top
#: pair; measured at β = 2.2, p = 2, σ = 1 (q = 0.01, T = 1000, δ = 1e-5; docs/accounting.md "β = 2.2, p = 2: what
#: it takes"): with the ideal Base 2.7133 (split 4) → 2.5666 (split 8) against the one coordinate's 2.4757; with the
#: contour Base 2.5668 (1.037×), 115k states
NEAR_ABOVE_TWO_SPEC = replace(ABOVE_TWO_SPEC, mass_split=8)
#: below this β (and above 2) :data:`NEAR_ABOVE_TWO_SPEC`'s mass split grows to ⌈:data:`NEAREST_TWO_MASS_RATE`/(β − 2)⌉,
#: at most :data:`NEAREST_TWO_MASS_SPLIT_MAX` (:func:`default_spec`): the closer β is to 2, the closer every spread comes
#: to the one coordinate, and the cells' mass rounding (up to m²/split in all: ≤ 1/a_0² coordinates above the Base
#: cell, each charged < a_0²/split) is the excess; measured (p = 2, σ = 1, q = 0.01, T = 1000, δ = 1e-5, d = 2410,
#: the contour Base; docs/accounting.md "The β grid"): β = 2.1: split 8 2.2393 (1.073× the one coordinate), split 16
#: 2.1629 (1.036×); β = 2.05: split 8 2.1805 (1.121×), 16 2.0658 (1.062×), 32 2.0300 (1.044×)
FINER_MASS_BELOW_BETA = 2.2
NEAREST_TWO_MASS_RATE = 1.6
NEAREST_TWO_MASS_SPLIT_MAX = 32
#: the top state's members (its Base and one product per column, Lemma M1) are kept as at most this many envelopes of
#: consecutive members (:func:`group_members`), the family that :mod:`.family_composition` composes by the per-state
#: maximum; measured (β = 2.5, σ = 3.416, q = 1/23, T = 230, δ = 1e-5): 8 groups 0.9255, 32 0.9237, all 217
#: members 0.9232, against the envelope's 0.9423 (docs/accounting.md, "The family maximum: adaptive choices among
#: dominating pairs")
FAMILY_GROUPS = 32


#: the contour Base's cell grows with σ up to this many times the spec's a_0 (:func:`default_spec`; a_0 ≤ 0.5m)
CONTOUR_CELL_GROWTH_MAX = 5.0
#: at p = 2, σ ≥ :data:`LARGE_SIGMA_FROM` and a β with contour data the default spec's Base states also read a finer
#: table below the Base cell (``sub_base``, Lemma T3s) and its low cells are this fine: at large σ the Base states of
#: one to four cells of mass (few coordinates, where U, V are RDP-level and the contour remainder is O(1)) set most of
#: the excess; measured (β = 2.5, σ = 3.416, q = 1/23, T = 230, δ = 1e-5; the one coordinate 0.8709, the adaptive
#: truth [0.8705, 0.8714]): family maximum 0.9237 → 0.9163 (the finer table alone) → 0.9107 (with ratio_low 1.01;
#: 1.005: 0.9087); β = 3, σ = 4.2577: 0.8588 → 0.8370 (docs/accounting.md "A Base from a finer table"). Below σ = 2
#: the gain was 0.1 % for 1.7× the build (β = 2.5, σ = 1.3: 2.0803 → 2.0784), at σ = 2 0.4 % for 1.5× (0.7968 →
#: 0.7933)
LARGE_SIGMA_SUB_BASE = 0.5
LARGE_SIGMA_RATIO_LOW = 1.01
LARGE_SIGMA_FROM = 2.0


def default_spec(clip_norm_p: float, beta: float = 2.0, m: float = 1.0) -> TableSpec:
    r"""The spec ``ball_bound="table"`` builds at ``clip_norm_p``, ``beta`` and m = 1/σ: TableSpec() up to
    :data:`FINE_MASS_FROM_P`, above it :data:`NEAR_TWO_SPEC` (β ≤ 2), :data:`NEAR_ABOVE_TWO_SPEC`
    (2 < β < :data:`FINE_MASS_BELOW_BETA`; below :data:`FINER_MASS_BELOW_BETA` its mass split
    min(max(8, ⌈1.6/(β − 2)⌉), 32)) or :data:`ABOVE_TWO_SPEC`; at p = 2, σ > 1 and a β with contour data
    (:mod:`.ball_contour`) that spec with the Base cell held at the data's absolute a_0 (0.1): a0 → a0/f and the
    mass split → ⌈split/f²⌉, f = max(min(m·a0/a_0^data, 1), 1/:data:`CONTOUR_CELL_GROWTH_MAX`) (= max(m, 1/5) for the
    shipped files), so the p-mass step stays the same
    fraction of m² while fewer coordinates sit above the Base cell (each is charged up to one mass step: at σ ≥ 2
    the spread shapes come within 10 % of the one coordinate and that charge was the excess; docs/accounting.md
    "Large σ: the Base cell in absolute units"); from σ = :data:`LARGE_SIGMA_FROM` on also the low cells' ratio at
    most :data:`LARGE_SIGMA_RATIO_LOW` and the Base states bounded by a finer table under the Base cell
    (``sub_base`` = :data:`LARGE_SIGMA_SUB_BASE`, Lemma T3s; its mass split ⌈split·sub_base²⌉, so its p-mass step
    is about the table's). Any spec gives a proven table; this one is a choice of cost and tightness."""
    if clip_norm_p <= FINE_MASS_FROM_P:
        return TableSpec()
    if beta <= 2.0:
        return NEAR_TWO_SPEC
    spec = NEAR_ABOVE_TWO_SPEC if beta < FINE_MASS_BELOW_BETA else ABOVE_TWO_SPEC
    if beta < FINER_MASS_BELOW_BETA:
        split = int(math.ceil(NEAREST_TWO_MASS_RATE / (beta - 2.0) - 1e-9))
        spec = replace(spec, mass_split=min(max(spec.mass_split, split), NEAREST_TWO_MASS_SPLIT_MAX))
    data = contour_data(float(beta)) if m < 1.0 and clip_norm_p == 2.0 else None
    if data is None:
        return spec
    # the cell a0·m/f = the data's a_0 at f = m·(spec.a0/data.a0) (= m for the shipped files, a_0 = 0.1 = spec.a0),
    # never finer than the spec's, at most CONTOUR_CELL_GROWTH_MAX× coarser; kept strictly below, so the contour applies
    f = max(min(m * (spec.a0 / data.a0), 1.0), 1.0 / CONTOUR_CELL_GROWTH_MAX)
    split = int(math.ceil(spec.mass_split / (f * f) - 1e-9))
    spec = replace(spec, a0=spec.a0 / f * (1.0 - 1e-9), mass_split=split)
    if not m <= 1.0 / LARGE_SIGMA_FROM:
        return spec
    # the finer table's p-mass step about the table's: (a_0/2)^p/split' ≈ a_0^p/split
    sub_split = max(1, int(math.ceil(split * LARGE_SIGMA_SUB_BASE ** 2 - 1e-9)))
    return replace(spec, ratio_low=min(spec.ratio_low, LARGE_SIGMA_RATIO_LOW), sub_base=LARGE_SIGMA_SUB_BASE,
                   sub_mass_split=sub_split)


def table_applies(clip_norm_p: float, count_noise_multiplier: Optional[float], beta: float = 2.0) -> bool:
    """Whether ``ball_bound="table"`` builds a table for a segment: no count coordinate, and p ≤ :data:`TABLE_P_MAX`
    (β ≤ 2) or p ≤ 2 (β > 2): the Base needs p ≤ 2 (Σμ² ≤ a_0^{2−p}·R); at β ≤ 2 nearer 2 it does not pay."""
    p_max = 2.0 if beta > 2.0 else TABLE_P_MAX
    return clip_norm_p <= p_max and count_noise_multiplier is None


def loss_grid(m: float, spec: TableSpec, beta: Optional[float] = None) -> np.ndarray:
    """The table's uniform loss grid: step h·m, symmetric about 0, half-width ≥ half_width·m, or ≥
    :meth:`TableSpec.half_width_at` where the spec sets ``tail`` (then ``beta`` is needed)."""
    h = spec.h * m
    if spec.tail is None:
        n = int(math.ceil(spec.half_width / spec.h))
    else:
        if beta is None:
            raise ValueError("loss_grid: a spec with tail needs beta")
        n = int(math.ceil(spec.half_width_at(m, beta) / h))
    return h * np.arange(-n, n + 1, dtype=np.float64)


class Swapped:
    r"""The pair (Q, P) of a pair (P, Q): H_α(Q‖P) and H_α(P‖Q) exchanged (for the symmetric envelope of T and its
    swap: every shift's pair is symmetric, so it is dominated by T in both orientations iff by this envelope)."""

    def __init__(self, pair) -> None:
        self.pair = pair

    def h_pq(self, alpha: np.ndarray, log_alpha: Optional[np.ndarray] = None) -> np.ndarray:
        """H_α(Q‖P) of the wrapped pair."""
        return self.pair.h_qp(alpha, log_alpha)

    def h_qp(self, alpha: np.ndarray, log_alpha: Optional[np.ndarray] = None) -> np.ndarray:
        """H_α(P‖Q) of the wrapped pair."""
        return self.pair.h_pq(alpha, log_alpha)


class _Grid:
    """The table's loss grid t and what every envelope on it reads: α = e^t, the read points of the two curves
    (t ≥ 0: H_α(P‖Q) at α = e^t; t < 0: H_{1/α}(Q‖P)), the hull's abscissae, and per input grid the indices of
    :meth:`.DiscretePair.h_pq` / :meth:`.DiscretePair.h_qp` at those points (computed once: the same numbers)."""

    def __init__(self, t: np.ndarray) -> None:
        self.t = t
        self.pos = pos = t >= 0
        self.alpha = np.exp(t)
        self.a_pos = np.exp(t[pos])  # H_α(P‖Q) read at these α (t ≥ 0)
        self.a_inv = np.exp(-t[~pos])  # H_α(Q‖P) read at these α (t < 0)
        # r = e^t·H_{1/α}(Q‖P), rounded up: exp (≤ 2u) and the products with it (≤ u each) move r by ≤ 4u
        self.e_neg = np.exp(t[~pos]) * (1.0 + 6.0 * UNIT_ROUNDOFF)
        self.e_mt = np.exp(-t)  # ν = ω e^{−t}
        self._log_pq = _safe_log(self.a_pos, self.a_pos > 0, None)
        self._log_qp = -_safe_log(self.a_inv, self.a_inv > 0, None)
        self._index = {}

    def read(self, pair) -> Tuple[np.ndarray, np.ndarray]:
        """(H_α(P‖Q) at a_pos, H_α(Q‖P) at a_inv), each clipped to [0, 1]: for a :class:`.DiscretePair` the numbers
        of its h_pq / h_qp (their indices cached per grid, the sums of the masses taken only where read)."""
        if not isinstance(pair, DiscretePair):
            return np.clip(pair.h_pq(self.a_pos), 0.0, 1.0), np.clip(pair.h_qp(self.a_inv), 0.0, 1.0)
        n = pair.omega.size
        key = (pair.t0, pair.h, n)
        if key not in self._index:
            jp = first_above(pair.t0, pair.h, n, self._log_pq)
            jq = count_below(pair.t0, pair.h, n, self._log_qp)
            lo, hi = int(jp.min()), int(jq.max())
            self._index[key] = (jp - lo, lo, jq, hi)
        jp, lo, jq, hi = self._index[key]
        # the upper sums Σ_{k ≥ j} from the top and the lower sums Σ_{k < j} from the bottom, as h_pq / h_qp sum
        # rounded up as h_pq / h_qp are: ν's tie to ω e^{−t} and the sums' round-off (Lemma R7(d))
        m_pq, m_qp, z = tie_mismatch(pair)
        sw, sn, sm = (np.concatenate([np.cumsum(v[lo:][::-1])[::-1], [0.0]]) for v in (pair.omega, pair.nu, m_pq))
        cw, cn, cm = (np.concatenate([[0.0], np.cumsum(v[:hi])]) for v in (pair.omega, pair.nu, m_qp))
        sz = np.concatenate([np.cumsum(z[::-1])[::-1], [0.0]])[jq]  # Q-only atoms at or above the read point
        rd = read_roundoff(n)
        a_sn, a_cw = self.a_pos * sn[jp], self.a_inv * cw[jq]
        a = pair.undo_normalization(np.maximum(pair.p_inf + sw[jp] - a_sn, 0.0) + self.a_pos * sm[jp] * (1.0 + rd)
                                    + rd * (pair.p_inf + sw[jp] + a_sn))
        b = pair.undo_normalization(np.maximum(pair.q_ninf + cn[jq] - a_cw, 0.0) + (cm[jq] + sz) * (1.0 + rd)
                                    + rd * (pair.q_ninf + cn[jq] + a_cw))
        return np.clip(a, 0.0, 1.0), np.clip(b, 0.0, 1.0)


def _hull_pair(g: _Grid, d_pos: np.ndarray, r_neg: np.ndarray) -> Tuple[DiscretePair, float]:
    r"""(pair, c): the connect-the-dots pair of the lower convex hull in α of the points (0, 1) and (α_i, δ_i)
    (δ read where t ≥ 0, r = δ − 1 + α where t < 0; :func:`.discretization.hull_profile`), c its relative round-off
    (Lemma R5: δ_pair ≥ (1 − c)·δ_hull)."""
    delta = np.full(g.t.shape, np.nan)
    r = np.full(g.t.shape, np.nan)
    delta[g.pos], r[~g.pos] = d_pos, r_neg
    omega, rho, c = ctd_pmf(g.t, delta, r, tolerance=math.inf)  # the hull is taken there
    # ν = ω e^{−t}; DiscretePair puts the Q-mass left (losses below the grid) at −∞ itself
    return DiscretePair(float(g.t[0]), float(g.t[1] - g.t[0]), omega, omega * g.e_mt, float(rho), 0.0), float(c)


def envelope_pair(pairs: Sequence, t: np.ndarray, grid: Optional[_Grid] = None) -> Tuple[DiscretePair, float]:
    r"""(pair, c): a discrete pair on the grid t dominating every pair in ``pairs`` (Lemma T2).

    Reads max_k H_α(P_k‖Q_k) at α = e^t (t ≥ 0) and max_k α·H_{1/α}(Q_k‖P_k) = r (t < 0), takes the lower convex
    hull in α (each input curve is convex, so every hull value is ≥ every input's) and realizes it by connect the
    dots (:func:`.discretization.ctd_pmf`); c: δ_pair ≥ (1 − c)·δ_hull at every t (Lemma R5). ``grid``: the
    :class:`_Grid` of t, kept by a caller that builds many envelopes on it."""
    g = _Grid(t) if grid is None else grid
    d = rr = None
    for pr in pairs:
        a, b = g.read(pr)
        d = a if d is None else np.maximum(d, a)
        rr = b if rr is None else np.maximum(rr, b)
    return _hull_pair(g, d, g.e_neg * rr)


def base_log_moment_rates(a0: float, beta: float, p: float, orders: Sequence[int]) -> np.ndarray:
    r"""Λ_j ≥ sup_{0 < a ≤ a0} L_j(a)/a^p for each order j (p ≤ 2), L_j(a) = log E_Q[e^{jℓ_a}] enclosed.

    Geometric cells [u_k, u_{k+1}] of ratio ≤ 1.02 on [a_min, a0] give L_j(u_{k+1})/u_k^p (L_j increases in a,
    Lemma 2); a ≤ a_min = min(10⁻⁴, a0/100) gives K_j(a_min)·a_min^{2−p} (L_j(a) ≤ K_j a², Lemma 4b, and p ≤ 2)."""
    if not 1.0 <= p <= 2.0:
        raise ValueError(f"base_log_moment_rates: clip_norm_p must be in [1, 2], got {p}")
    a_min = min(1e-4, a0 / 100.0)
    n = max(int(math.ceil(math.log(a0 / a_min) / math.log(1.02))), 1)
    u = a_min * (a0 / a_min) ** (np.arange(n + 1) / n)
    u[0], u[-1] = a_min, a0  # the cells cover [a_min, a0] exactly
    out = np.empty(len(orders))
    for i, j in enumerate(orders):
        L = log_moment_uppers(int(j), u, beta)
        cells = np.max(L[1:] / u[:-1] ** p)
        small = quadratic_coefficient(int(j), a_min, beta) * a_min ** (2.0 - p)
        out[i] = max(cells, small) * (1.0 + 1e-12)
    check_finite(out, "ball table: Base log-moment rates")
    return out


def base_gaussian_rate(a0: float, beta: float, p: float) -> Optional[float]:
    r"""s with every shift of coordinates ≤ a0 and p-mass ≤ R dominated by N(s·√R) (Lemma N, 1 ≤ β ≤ 2, p ≤ 2):
    Σμ_i² ≤ a0^{2−p}·Σμ_i^p ≤ a0^{2−p}·R, so s = κ_β·a0^{1−p/2}, rounded up; None for β > 2."""
    if not gaussian_domination_applies(beta):
        return None
    if not 1.0 <= p <= 2.0:
        raise ValueError(f"base_gaussian_rate: clip_norm_p must be in [1, 2], got {p}")
    return gaussian_domination_constant(beta) * a0 ** (1.0 - p / 2.0) * (1.0 + 1e-12)


def moment_curve_bound(R: float, rates: np.ndarray, orders: Sequence[int], log_alpha: np.ndarray) -> np.ndarray:
    r"""U(α) = min_j e^{RΛ_j}(j−1)^{j−1}/(j^j α^{j−1}), capped at 1, rounded up (Lemma T3): the exponent
    S + log c_j − (j − 1)·log α (S = R·Λ_j, log c_j = (j−1)log(j−1) − j log j) carries ≤ 4u(|S| + |log c_j| +
    |(j − 1)·log α|) (one or two roundings per term, two additions) and exp ≤ 2u relative, so
    e^{arg}·e^{that + 4u}·(1 + 4u) (the two products rounded) is ≥ the exact value; the exponential to nearest fell
    up to ~1e-14 relative below it. ``log_alpha`` is log α exactly (the table's grid losses). Below the normal
    range, 2·2^{−1074} more (absolute)."""
    j = np.asarray(orders, dtype=np.float64)[:, None]
    logc = (j - 1) * np.log(j - 1) - j * np.log(j)
    S = R * np.asarray(rates, dtype=np.float64)[:, None]
    la = (j - 1) * np.asarray(log_alpha, dtype=np.float64)[None, :]
    arg = S + logc - la
    slack = 4.0 * UNIT_ROUNDOFF * (np.abs(S) + np.abs(logc) + np.abs(la) + 1.0)
    # + twice the smallest subnormal: below the normal range exp and the products err absolutely; an exponent past
    # float range gives +inf, a valid upper bound that the cap at 1 then replaces (so no overflow warning)
    with np.errstate(over="ignore"):
        up = np.exp(arg) * (np.expm1(slack) + 1.0) * (1.0 + 4.0 * UNIT_ROUNDOFF) + 2.0 * LEAST_SUBNORMAL
    return np.minimum(np.min(up, axis=0), 1.0)


def mean_variance_bound(R: float, rate2: float, log_alpha: np.ndarray) -> np.ndarray:
    r"""V(α) = ½(1 − α + √(v + (1 − α)²)), v = e^{R·Λ_2} − 1, rounded up (Lemma T3): H_α = E_Q[(X − α)_+] for
    X = e^ℓ with E_Q[X] = 1 exactly and E_Q[X²] = e^{L_2} ≤ e^{RΛ_2}, and E(X − α)_+ = ½(E|X − α| + 1 − α) ≤
    ½(√(E(X − α)²) + 1 − α) (Cauchy–Schwarz), E(X − α)² = Var X + (1 − α)² ≤ v + (1 − α)². Evaluated without
    cancellation (α ≥ 1: v/(2(√(v + (α−1)²) + α − 1))); V has elasticity ≤ 1 in v and in |α − 1| (expm1, ≤ 2u),
    so v raised by 2u in its exponent and 4u after, and V by 16u, cover the round-off. ``log_alpha``: log α
    exactly."""
    v = math.expm1(R * rate2 * (1.0 + 2.0 * UNIT_ROUNDOFF)) * (1.0 + 4.0 * UNIT_ROUNDOFF)
    x = np.expm1(np.asarray(log_alpha, dtype=np.float64))  # α − 1
    y = np.abs(x)
    root = np.sqrt(v + y * y)
    with np.errstate(divide="ignore", invalid="ignore"):
        above = 0.5 * v / (root + y)
    out = np.where(x >= 0, above, 0.5 * (y + root))
    return np.minimum(out * (1.0 + 16.0 * UNIT_ROUNDOFF) + 2.0 * LEAST_SUBNORMAL, 1.0)


def base_values(R: float, rates: np.ndarray, orders: Sequence[int], t: np.ndarray, grid: Optional[_Grid] = None,
                gauss_rate: Optional[float] = None, mean_variance: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    r"""(H_α(P‖Q) upper values at t ≥ 0, H_{1/α}(Q‖P) upper values at t < 0) of every shift with coordinates ≤ a_0
    and p-mass ≤ R (Lemma T3): with log-moments ≤ R·Λ_j in both directions, H_α ≤ U(α) = min_j e^{RΛ_j}(j−1)^{j−1}/
    (j^j α^{j−1}) (from (x − α)_+ ≤ x^j(j−1)^{j−1}/(j^j α^{j−1})), ``mean_variance``: also V (:func:`mean_variance_bound`);
    with ``gauss_rate`` s (:func:`base_gaussian_rate`) also H_α ≤ H_α(N(s√R)‖N(0)) (Lemma N; both pairs symmetric,
    so the t < 0 side likewise)."""
    if not R > 0:
        raise ValueError(f"base_pair: the p-mass R must be > 0, got {R}")
    g = _Grid(t) if grid is None else grid
    d_pos, h_neg = moment_curve_bound(R, rates, orders, t[g.pos]), moment_curve_bound(R, rates, orders, -t[~g.pos])
    if mean_variance:
        rate2 = float(rates[list(orders).index(2)])
        d_pos = np.minimum(d_pos, mean_variance_bound(R, rate2, t[g.pos]))
        h_neg = np.minimum(h_neg, mean_variance_bound(R, rate2, -t[~g.pos]))
    if gauss_rate is not None:
        # GG(2, 1) = N(0, 1); the shift inflated by 1e-9 relative: κ_β·a_0^{1−p/2}·√R rounded up (the curve itself
        # is rounded up by GGPair, Lemma R9)
        gauss = GGPair(gauss_rate * math.sqrt(R) * (1.0 + 1e-9), 2.0)
        d_pos = np.minimum(d_pos, gauss.h_pq(g.a_pos))
        h_neg = np.minimum(h_neg, gauss.h_qp(g.a_inv))
    return d_pos, h_neg


def base_pair(R: float, rates: np.ndarray, orders: Sequence[int], t: np.ndarray,
              grid: Optional[_Grid] = None, gauss_rate: Optional[float] = None,
              mean_variance: bool = False) -> Tuple[DiscretePair, float]:
    r"""(pair, c) dominating every shift with coordinates ≤ a_0 and p-mass ≤ R (Lemma T3): the lower convex hull of
    :func:`base_values` (r(α) = αH_{1/α}(Q‖P) at t < 0) and (0, 1) is ≥ every member's convex curve and is realized
    by connect the dots."""
    g = _Grid(t) if grid is None else grid
    d_pos, h_neg = base_values(R, rates, orders, t, g, gauss_rate, mean_variance)
    return _hull_pair(g, d_pos, g.e_neg * h_neg)


def base_states(d_r: float, n_r: int, rates: np.ndarray, t: np.ndarray, grid: _Grid, spec: TableSpec,
                gauss_rate: Optional[float], contour: Optional[ContourBase], base_cell: float) -> List:
    r"""[None, (pair, c) of E(R_1, a_0), …, of E(R_N, a_0)], R_i = i·ΔR: :func:`base_pair` each, or with ``contour``
    (:class:`.ball_contour.ContourBase`) Lemma C2/C5's recursion in increasing i: where the state takes the contour
    values, min(U, V, max(values of state i − 1, contour values over [R_{i−1}, R_i])) in both orientations (every
    member's pair is symmetric), clipped to [0, 1] (H_α ≤ 1), then Lemma T3's hull by connect the dots."""
    if contour is None:
        return [None] + [base_pair(i * d_r, rates, spec.orders, t, grid, gauss_rate, spec.mean_variance)
                         for i in range(1, n_r + 1)]
    out: List = [None]
    below: Optional[Tuple[float, np.ndarray, np.ndarray]] = None  # (R, d_pos, h_neg) of the state below
    for i in range(1, n_r + 1):
        R = i * d_r
        d_pos, h_neg = base_values(R, rates, spec.orders, t, grid, gauss_rate, spec.mean_variance)
        if contour.applies(None if below is None else below[0], R, base_cell):
            vals = contour.values(below[0], R, np.abs(t))  # H_α at α = e^{|t|}: t ≥ 0 and t < 0 alike
            d_pos = np.minimum(d_pos, np.maximum(below[1], vals[grid.pos]))
            h_neg = np.minimum(h_neg, np.maximum(below[2], vals[~grid.pos]))
        d_pos, h_neg = np.clip(d_pos, 0.0, 1.0), np.clip(h_neg, 0.0, 1.0)
        below = (R, d_pos, h_neg)
        out.append(_hull_pair(grid, d_pos, grid.e_neg * h_neg))
    return out


@dataclass
class BallTable:
    r"""The table of one (β, p, m, spec): ``top`` = E(m^p, m) dominates every shift with ‖μ‖_p ≤ m (either
    orientation through its symmetric envelope, :attr:`pairs`); ``roundoff`` = C of ``top`` (Lemma T4)."""

    top: DiscretePair
    roundoff: float
    m: float
    beta: float
    p: float
    spec: TableSpec
    states: int
    seconds: float
    base: str = ""  # which Base the table used and why (:func:`table_base`)
    #: the top state's dominating family, grouped (:func:`group_members`, Lemma M1): ((pair, C), ...)
    members: Tuple[Tuple[DiscretePair, float], ...] = ()

    @property
    def pairs(self) -> Tuple:
        """((label, pair), ...) for a :class:`.history.PairSegment`: T and T swapped (their envelope)."""
        return (("ball-table", self.top), ("ball-table-swapped", Swapped(self.top)))

    @property
    def member_pairs(self) -> Tuple:
        """(((label, pair), (label, pair swapped)), C) per member, for :attr:`.history.PairSegment.members`."""
        return tuple((((f"member-{k}", pair), (f"member-{k}-swapped", Swapped(pair))), c)
                     for k, (pair, c) in enumerate(self.members))


def _lattice(m: float, spec: TableSpec) -> np.ndarray:
    """a_0 < … < a_J = m: ratio_high on [high_from·m, m], ratio_low below, down to the first a_0 ≤ a0·m (a0 and
    ratio_low as :meth:`TableSpec.cells` sets them at m)."""
    a0, ratio_low = spec.cells(m)
    lat = [m]
    while lat[-1] > a0 * m:
        lat.append(lat[-1] / (spec.ratio_high if lat[-1] > spec.high_from * m else ratio_low))
    return np.array(lat[::-1])


def table_base(m: float, beta: float, p: float, spec: TableSpec,
               contour_base: Union[bool, ContourBase] = True) -> Tuple[Optional[ContourBase], str]:
    """(the contour Base or None, which Base the table of (m, β, p, spec) uses and why): with ``contour_base`` True
    the contour Base (:mod:`.ball_contour`) where :func:`.ball_contour.contour_applies` (β with shipped data, p = 2,
    the Base cell lat[0] ≤ the data's a_0), else Lemma T3's min(U, V) (and Lemma N's Gaussian at β ≤ 2); False:
    never; a :class:`.ball_contour.ContourBase`: that one (its a0 must cover lat[0], p = 2, β > 2). Where the spec
    sets ``sub_base`` the reason also says that each Base state reads a finer table (Lemma T3s)."""
    base, why = _contour_choice(m, beta, p, spec, contour_base)
    if spec.sub_base is not None:
        why += (f"; each Base state also bounded by a finer table under the Base cell (Lemma T3s: cells down to "
                f"{spec.sub_base:g}·a_0, ratio {spec.sub_ratio:g}, mass split {spec.sub_mass_split})")
    return base, why


def _contour_choice(m: float, beta: float, p: float, spec: TableSpec,
                    contour_base: Union[bool, ContourBase]) -> Tuple[Optional[ContourBase], str]:
    """:func:`table_base` without the finer table's note."""
    if contour_base is False:
        return None, "contour Base off (build_table(contour_base=False)); Base min(U, V)"
    if not beta > 2.0:
        return None, "Base min(U, V) and Lemma N's Gaussian (beta <= 2: no contour Base)"
    a0 = float(_lattice(m, spec)[0])
    if contour_base is True:
        ok, why = contour_applies(beta, p, a0)
        return (ContourBase(contour_data(float(beta))) if ok else None), why
    if not (p == 2.0 and a0 <= contour_base.a0 and contour_base.data.beta == beta):
        raise ValueError(f"build_table: the given contour Base holds for beta = {contour_base.data.beta}, p = 2, "
                         f"a_0 <= {contour_base.a0}; the table has beta = {beta}, p = {p}, a_0 = {a0}")
    return contour_base, f"contour Base given ({type(contour_base).__name__})"


def _columns(lat: np.ndarray, d_r: float, n_r: int, first: List, t: np.ndarray, grid: _Grid, beta: float, p: float,
              members: Optional[List] = None) -> Tuple[List, int]:
    r"""Lemma T1's recursion over the cells of ``lat`` (lat[0] the Base cell, ``first`` = [None, E(R_1, a_0), …,
    E(R_N, a_0)] as (pair, C), R_i = i·``d_r``): column by column (cap a_j outer, mass R_i inner: a state reads the
    previous column at the same mass and its own column at a smaller mass, so two columns are kept). Returns ([None,
    E(R_1, a_J), …, E(R_N, a_J)], the number of states built); ``members`` (a list) receives the top state's product
    of each column (Lemma M1)."""
    low = lat ** p * (1.0 - 1e-10)  # a_j^p rounded down: the rest's mass R − a_{j−1}^p is rounded up
    prev = first
    states = 0
    for jj in range(1, lat.size):
        gg = envelope_pair([GGPair(float(lat[jj]), beta)], t, grid)
        cur: List = [None] * (n_r + 1)
        for i in range(1, n_r + 1):
            R = i * d_r
            if not low[jj - 1] < R:
                cur[i] = prev[i]  # no coordinate of the set reaches the cell (a_{j−1}, a_j]
                continue
            k = _mass_index(R - low[jj - 1], d_r)  # the rest's mass, rounded UP on the grid
            if k >= i:
                raise AccountingError("ball table: the mass recursion does not decrease (ΔR ≥ a_0^p)")
            if k == 0:
                prod, c_prod = gg
            else:
                # the column's GG factor is transformed once (keep_transform) for its products with every rest
                prod, c_prod = gg[0].compose(cur[k][0], keep_transform=True), gg[1] + cur[k][1]
            pair, c = envelope_pair([prev[i][0], prod], t, grid)
            cur[i] = (pair, c + max(prev[i][1], c_prod))
            states += 1
            if members is not None and i == n_r:
                members.append((prod, c_prod))
        prev = cur
    return prev, states


def _mass_index(x: float, d_r: float) -> int:
    """The least k ≥ 0 with k·``d_r`` ≥ x, compared in the floats that define the grid (T1's rounding up of a
    mass onto it)."""
    k = max(int(math.ceil(x / d_r)), 0)
    while k * d_r < x:
        k += 1
    return k


def _base_column(cell: float, d_r: float, n_r: int, beta: float, p: float, spec: TableSpec, t: np.ndarray,
                 grid: _Grid, contour: Optional[ContourBase]) -> List:
    """[None, E(R_1, cell), …, E(R_N, cell)]: Lemma T3's Base states of a lattice whose Base cell is ``cell``
    (:func:`base_states` with the rates, and at β ≤ 2 Lemma N's Gaussian, of that cell)."""
    rates = base_log_moment_rates(cell, beta, p, spec.orders)
    return base_states(d_r, n_r, rates, t, grid, spec, base_gaussian_rate(cell, beta, p), contour, cell)


def mass_grid(r_top: float, cell: float, p: float, steps: int) -> Tuple[float, int]:
    """(ΔR, N): the p-mass grid R_i = i·ΔR, i ≤ N, with ΔR < cell^p/``steps`` (every recursion over cells ≥ cell
    lowers the mass index) and R_N ≥ ``r_top`` (checked)."""
    d_r = cell ** p * (1.0 - 1e-9) / steps
    n_r = int(math.ceil(r_top / d_r))
    d_r = r_top / n_r * (1.0 + 1e-15)
    if not n_r * d_r >= r_top:
        raise AccountingError("ball table: the p-mass grid does not reach its top")
    return d_r, n_r


def min_pair(a: Tuple[DiscretePair, float], b: Tuple[DiscretePair, float], grid: _Grid) -> Tuple[DiscretePair, float]:
    r"""(pair, C) dominating every shift that both ``a`` and ``b`` dominate (Lemma T3s): the lower convex hull of
    min(a's curves, b's curves) as read on the grid, C = its c + max(C_a, C_b). A member's convex curve is ≤ each
    pair's read curve/(1 − C), so ≤ their min/(1 − max C) and ≤ the hull of it (its greatest convex minorant)."""
    da, ra = grid.read(a[0])
    db, rb = grid.read(b[0])
    pair, c = _hull_pair(grid, np.minimum(da, db), grid.e_neg * np.minimum(ra, rb))
    return pair, c + max(a[1], b[1])


def sub_table_states(a0: float, d_r: float, n_r: int, beta: float, p: float, spec: TableSpec, t: np.ndarray,
                     grid: _Grid, contour: Optional[ContourBase]) -> Tuple[List, int]:
    r"""[None, pair_1, …, pair_N] with pair_i = (pair, C) dominating S(R_i, a_0) = {μ : max μ ≤ a_0, Σμ^p ≤ i·d_r}
    (Lemma T3s): the last column of Lemma T1's recursion over the cells a'_0 < … < a'_J' = a_0 (ratio
    ``spec.sub_ratio``, a'_0 ≤ ``spec.sub_base``·a_0) on its own p-mass grid (ΔR' < a'_0^p/``spec.sub_mass_split``,
    up to R_N) with Lemma T3's Base at a'_0 (and the contour Base where it applies), read at the least R'_{i'} ≥ R_i
    (S grows with R). Also the number of states built."""
    cells = [a0]
    while cells[-1] > spec.sub_base * a0:
        cells.append(cells[-1] / spec.sub_ratio)
    lat = np.array(cells[::-1])  # lat[-1] = a0 exactly: the sub-table's top cap is the table's Base cell
    d2, n2 = mass_grid(n_r * d_r, float(lat[0]), p, spec.sub_mass_split)
    first = _base_column(float(lat[0]), d2, n2, beta, p, spec, t, grid, contour)
    last, states = _columns(lat, d2, n2, first, t, grid, beta, p)
    out: List = [None]
    for i in range(1, n_r + 1):
        k = _mass_index(i * d_r, d2)
        if k > n2:
            raise AccountingError("ball table: the sub-table's p-mass grid does not reach the table's")
        out.append(last[k])
    return out, states + n2


def build_table(m: float, beta: float, p: float, spec: Optional[TableSpec] = None,
                contour_base: Union[bool, ContourBase] = True) -> BallTable:
    r"""Build E(m^p, m) (module docstring) by :func:`_columns` over the lattice; ``spec`` None: :func:`default_spec`
    of (p, β, m); the Base states by :func:`base_states`, with the contour Base where :func:`table_base` says it
    applies (``contour_base=False``: never; a :class:`.ball_contour.ContourBase`: that one, e.g. the research tool's
    Arb K_c), and where ``spec.sub_base`` is set the hull of the smaller of each and the finer table's state
    (:func:`sub_table_states`, :func:`min_pair`)."""
    t0 = time.perf_counter()
    m = validate_positive(m, "m (= 1/noise_multiplier)")
    beta = validate_beta(beta)
    if not 1.0 <= p <= 2.0:
        raise ValueError(f"the ball table needs 1 <= clip_norm_p <= 2, got {p}")
    spec = default_spec(p, beta, m) if spec is None else spec
    t = loss_grid(m, spec, beta)
    lat = _lattice(m, spec)
    d_r, n_r = mass_grid(m ** p, float(lat[0]), p, spec.mass_steps(m))  # R_i = i·ΔR, R_N ≥ m^p
    grid = _Grid(t)
    contour, base_note = table_base(m, beta, p, spec, contour_base)
    first = _base_column(float(lat[0]), d_r, n_r, beta, p, spec, t, grid, contour)  # (pair, C)
    states = n_r
    if spec.sub_base is not None:
        sub, sub_count = sub_table_states(float(lat[0]), d_r, n_r, beta, p, spec, t, grid, contour)
        first = [None] + [min_pair(first[i], sub[i], grid) for i in range(1, n_r + 1)]
        states += sub_count
    members = [first[n_r]]  # the top state's members (Lemma M1): its Base and each column's product
    last, built = _columns(lat, d_r, n_r, first, t, grid, beta, p, members)
    top, roundoff = last[n_r]
    if not roundoff < 1e-3:
        raise AccountingError(f"ball table: the connect-the-dots round-off is not small (C = {roundoff:.3g})")
    return BallTable(top, roundoff, m, beta, p, spec, states + built, time.perf_counter() - t0, base_note,
                     group_members(members, t, grid))


def group_members(members: Sequence[Tuple[DiscretePair, float]], t: np.ndarray,
                  grid: Optional[_Grid] = None) -> Tuple[Tuple[DiscretePair, float], ...]:
    r"""At most :data:`FAMILY_GROUPS` pairs (pair, C), each the envelope (Lemma T2) of consecutive members of the top
    state (its Base, then the columns in increasing a_j; equal counts; a group of one is its member's hull pair): a
    shift dominated by a member is dominated by its group's envelope, so the groups are a dominating family (Lemma
    M1) of fewer members, each C = c + the largest C of its members (Lemma T4)."""
    out = []
    for idx in np.array_split(np.arange(len(members)), min(FAMILY_GROUPS, len(members))):
        pair, c = envelope_pair([members[int(i)][0] for i in idx], t, grid)  # a single member too: a hull pair, as
        # the top is (what the disk cache stores and reads back bit for bit)
        out.append((pair, c + max(members[int(i)][1] for i in idx)))
    return tuple(out)


@functools.lru_cache(maxsize=16)
def ball_table(m: float, beta: float, p: float, spec: Optional[TableSpec] = None) -> BallTable:
    """:func:`build_table`, kept for the process (one table per (β, p, σ, spec)) and on disk across processes
    (:mod:`.table_cache`: keyed by the exact parameters, the spec and the code; read back through the pair's own
    checks); ``spec`` None: :func:`default_spec` of (p, β, m)."""
    spec = default_spec(p, beta, m) if spec is None else spec
    return table_cache.load_or_build(
        table_cache.table_key(m, beta, p, spec), lambda: build_table(m, beta, p, spec),
        lambda top, roundoff, states, seconds, members: BallTable(top, roundoff, m, beta, p, spec, states, seconds,
                                                                  table_base(m, beta, p, spec)[1], members))
