r"""A PRV-level dominating pair for every shift of the ℓp ball with p > 2 in small dimension: the table over
(p-mass, cap, count).

Noise units as in :mod:`.ball_prv`: GG(β, 1) per coordinate, m = 1/noise_multiplier, shifts μ ≥ 0 (reflection) with
‖μ‖_p ≤ m in d coordinates. Above p = 2 the p-mass alone allows m^p/a^p coordinates of size a, so the table of
:mod:`.ball_prv` (no count) cannot bound them; this one carries the number n of non-zero coordinates
(docs/accounting.md, "A count-aware table for p > 2 at small d"). ΔR = m^p/N; the cells are ON the mass lattice:
b_j = (k_j·ΔR)^{1/p} for integers k_0 < k_1 < … < k_J = N (:func:`mass_lattice`). E(i, j, n) dominates (P_μ, Q^{⊗d})
for every μ with at most n non-zero coordinates, max μ ≤ b_j and Σμ^p ≤ i·ΔR (exact reals):

    E(i, 0, n) = ⊗_{k=1}^{n} GG(min(b_0, (iΔR/k)^{1/p}))                       (Base: the k-th largest ≤ (iΔR/k)^{1/p})
    E(i, j, n) = env(E(i, j − 1, n), GG(min(b_j, (iΔR)^{1/p})) ⊗ E(i − k_{j−1}, j, n − 1))   if k_{j−1} < i
    E(i, j, n) = E(i, j − 1, n)                                                              otherwise

(Lemma T1c; E(·, ·, 0) = no coordinate), with the states normalized: i ≤ n·k_j (the mass of n coordinates ≤ b_j) and
j the least cell with k_j ≥ i (the largest coordinate is ≤ (iΔR)^{1/p}). A peel charges k_{j−1}·ΔR = b_{j−1}^p
exactly: there is no mass rounding; the shifts of the GG factors are the exact b_j rounded UP (:func:`cap`). env,
the connect-the-dots hull and the round-off C are those of :mod:`.ball_prv` (Lemmas T2, T4). Cost: states × (one
FFT product + one hull), ≈ 2–3 ms each on one idle core at β = 3, σ = 1 (:meth:`CountSpec.states` counts them
before the build; the default spec: 35k states at d = 10, 49k at d = 16).
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from ..validation import validate_beta, validate_positive
from . import table_cache
from .ball_prv import BallTable, TableSpec, _Grid, envelope_pair, loss_grid
from .checks import AccountingError
from .gg_pair import GGPair

__all__ = ["CountSpec", "CountTable", "COUNT_DIM_MAX", "count_table_applies", "mass_lattice", "cap",
           "reachable_states", "build_count_table", "count_table"]

#: the largest d the count table is built for (its states grow like d; the worst shapes at large d put about d
#: coordinates near m·d^{−1/p}, which a recursion that peels one coordinate at a time reaches only at d× the cost)
COUNT_DIM_MAX = 32
#: relative margin that rounds a computed b = m·(k/N)^{1/p} up past the exact value: k/N, 1/p, the power (log N ≤ 20
#: times 1/p's rounding) and the product carry < 40 ulps together
_CAP_MARGIN = 1e-12


@dataclass(frozen=True)
class CountSpec:
    r"""Resolution of a count table, relative to m = 1/σ: ΔR = m^p/``mass_steps``; cells on the mass lattice of ratio
    ≤ ``ratio_high`` in b on [high_from·m, m], ≤ ``ratio_low`` below (never finer than the lattice,
    :func:`mass_lattice`), down to the Base cell b_0 = (``base_steps``·ΔR)^{1/p}; loss grid step ``h``·m on ±
    ``half_width``·m, widened to the one coordinate's tail ``tail`` (:meth:`.TableSpec.half_width_at`). Any spec
    gives an upper bound; finer ones usually a tighter one. Measured (β = p, σ = 1, q = 0.01, T = 1000, δ = 1e-5,
    d = 10; docs/accounting.md): the top cells (the large coordinate; ``ratio_high`` 1.01 → 1.005 → 1.0025, i.e.
    every lattice point above 0.3m at N = 256: 13.4126 → 13.3297 → 13.2865 at β = 3) and, at β = 2.5, the low cells
    (the thin coordinates beside a large one, ≈ 0.2–0.35m: ``ratio_low`` 1.1 → 1.02: 5.5298 → 5.4246) set the excess
    the resolution can remove; N = 512 with top ratio 1.01 (13.4091 at β = 3) and h = 0.01 (13.4107) did not pay."""

    mass_steps: int = 256
    ratio_high: float = 1.0025
    ratio_low: float = 1.02
    high_from: float = 0.3
    base_steps: int = 1
    h: float = 0.02
    half_width: float = 10.0
    tail: Optional[float] = 1e-13

    def __post_init__(self) -> None:
        for name in ("mass_steps", "base_steps"):
            v = getattr(self, name)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if not self.base_steps < self.mass_steps:
            raise ValueError(f"base_steps must be < mass_steps, got {self.base_steps}, {self.mass_steps}")
        if not (self.ratio_low > 1.0 and self.ratio_high > 1.0):
            raise ValueError(f"ratio_low and ratio_high must be > 1, got {self.ratio_low}, {self.ratio_high}")
        if not 0.0 < self.high_from <= 1.0:
            raise ValueError(f"high_from must be in (0, 1], got {self.high_from}")
        self.grid_spec()  # h, half_width and tail checked there

    def grid_spec(self) -> TableSpec:
        """The loss grid's fields as a :class:`.TableSpec` (one source of the grid: :func:`.ball_prv.loss_grid`)."""
        return TableSpec(h=self.h, half_width=self.half_width, tail=self.tail)

    def states(self, p: float, dim: int) -> int:
        """The number of states a table of (p, dim) computes (:func:`reachable_states`), before building it."""
        return len(reachable_states(mass_lattice(p, self), dim))


def count_table_applies(clip_norm_p: float, count_noise_multiplier: Optional[float], dim: int) -> bool:
    """Whether ``ball_bound="table"`` builds a count table for a segment: p > 2, d ≤ :data:`COUNT_DIM_MAX`, no count
    query. (The recursion holds for every p ≥ 1 and β ≥ 1; at p ≤ 2 the table of :mod:`.ball_prv` needs no count.)"""
    return clip_norm_p > 2.0 and dim <= COUNT_DIM_MAX and count_noise_multiplier is None


def mass_lattice(p: float, spec: CountSpec) -> Tuple[int, ...]:
    r"""k_0 = ``base_steps`` < k_1 < … < k_J = N = ``mass_steps``: from N down, the next k is the least integer with
    (k_prev/k)^{1/p} ≤ the ratio (``ratio_high`` where b = (k_prev/N)^{1/p}·m > high_from·m, else ``ratio_low``),
    or k_prev − 1 where that is not smaller (the lattice's own ratio is then coarser), stopping at k_0."""
    n = spec.mass_steps
    ks = [n]
    while ks[-1] > spec.base_steps:
        k = ks[-1]
        r = spec.ratio_high if (k / n) ** (1.0 / p) > spec.high_from else spec.ratio_low
        ks.append(max(min(k - 1, int(math.ceil(k / r ** p))), spec.base_steps))
    return tuple(ks[::-1])


def cap(m: float, k: float, n_steps: int, p: float) -> float:
    r"""m·(k/N)^{1/p} rounded UP (relative margin :data:`_CAP_MARGIN`): a GG factor at this shift dominates every
    coordinate ≤ the exact (k·ΔR)^{1/p} (Lemma A); ``k`` may be a ratio i/k' (the Base's caps)."""
    return m * (k / n_steps) ** (1.0 / p) * (1.0 + _CAP_MARGIN)


def _normalize(i: int, j: int, n: int, ks: Tuple[int, ...]) -> Tuple[int, int, int]:
    """The state whose set equals that of (i, j, n): i ≤ n·k_j, then j the least with k_j ≥ i (Lemma T1c)."""
    i = min(i, n * ks[j])
    while j > 0 and ks[j - 1] >= i:
        j -= 1
    return i, j, n


def reachable_states(ks: Tuple[int, ...], dim: int) -> Dict[Tuple[int, int, int], Tuple]:
    """{state: (left, rest)} of every state the top (N, J, dim) reads: left = (i, j − 1, n), rest = (i − k_{j−1},
    j, n − 1) (None where n = 1: no coordinate left, or where the cell is empty); Base states (j = 0) read none."""
    top = _normalize(ks[-1], len(ks) - 1, dim, ks)
    deps: Dict[Tuple[int, int, int], Tuple] = {}
    stack = [top]
    while stack:
        s = stack.pop()
        if s in deps:
            continue
        i, j, n = s
        if j == 0:
            deps[s] = (None, None)
            continue
        left = _normalize(i, j - 1, n, ks)
        # k_{j−1} < i holds after normalization (j is the least cell with k_j ≥ i)
        rest = _normalize(i - ks[j - 1], j, n - 1, ks) if n > 1 else None
        deps[s] = (left, rest)
        stack.extend(x for x in (left, rest) if x is not None)
    return deps


@dataclass
class CountTable(BallTable):
    r"""The table of one (β, p, m, d, spec): ``top`` = E(N, J, d) dominates every shift with ‖μ‖_p ≤ m in d
    coordinates (either orientation through :attr:`pairs`); ``roundoff`` = C of ``top`` (Lemma T4)."""

    dim: int = 0


def build_count_table(m: float, beta: float, p: float, dim: int, spec: Optional[CountSpec] = None) -> CountTable:
    r"""Build E(N, J, d) (module docstring) over the reachable states, cells outer, then count, then mass (each state
    reads a smaller cell or a smaller count); a state is dropped once its last reader is built."""
    t_start = time.perf_counter()
    m = validate_positive(m, "m (= 1/noise_multiplier)")
    beta = validate_beta(beta)
    if not p >= 1.0:
        raise ValueError(f"the count table needs clip_norm_p >= 1, got {p}")
    if not (isinstance(dim, int) and 1 <= dim <= COUNT_DIM_MAX):
        raise ValueError(f"the count table is built for 1 <= dim <= {COUNT_DIM_MAX}, got {dim!r}")
    spec = CountSpec() if spec is None else spec
    n_steps = spec.mass_steps
    ks = mass_lattice(p, spec)
    deps = reachable_states(ks, dim)
    readers: Dict[Tuple[int, int, int], int] = {s: 0 for s in deps}
    for left, rest in deps.values():
        for x in (left, rest):
            if x is not None:
                readers[x] += 1
    t = loss_grid(m, spec.grid_spec(), beta)
    grid = _Grid(t)

    @functools.lru_cache(maxsize=None)
    def gg(shift: float):  # (pair, C) of GG(shift) on the grid; its transform kept for its products
        return envelope_pair([GGPair(shift, beta)], t, grid)

    def product(first, second):  # (pair, C) of a product of two (pair, C), back on the grid (Lemma T2, T4)
        pr = first[0].compose(second[0], keep_transform=True)
        pair, c = envelope_pair([pr], t, grid)
        return pair, c + first[1] + second[1]

    done: Dict[Tuple[int, int, int], Tuple] = {}

    def release(s) -> None:
        readers[s] -= 1
        if readers[s] == 0:
            del done[s]

    for s in sorted(deps, key=lambda x: (x[1], x[2], x[0])):
        i, j, n = s
        if j == 0:
            caps = [cap(m, min(ks[0], i / k), n_steps, p) for k in range(1, n + 1)]  # k-th largest ≤ (iΔR/k)^{1/p}
            acc = gg(caps[0])
            for c_k in caps[1:]:
                acc = product(gg(c_k), acc)
            done[s] = acc
            continue
        left, rest = deps[s]
        g_pair = gg(cap(m, min(ks[j], i), n_steps, p))  # μ_1 ≤ min(b_j, (iΔR)^{1/p})
        if rest is None:
            peel = g_pair
        else:
            peel = (g_pair[0].compose(done[rest][0], keep_transform=True), g_pair[1] + done[rest][1])
        pair, c = envelope_pair([done[left][0], peel[0]], t, grid)
        done[s] = (pair, c + max(done[left][1], peel[1]))
        release(left)
        if rest is not None:
            release(rest)
    top_state = _normalize(ks[-1], len(ks) - 1, dim, ks)
    top, roundoff = done[top_state]
    if not roundoff < 1e-3:
        raise AccountingError(f"count table: the connect-the-dots round-off is not small (C = {roundoff:.3g})")
    return CountTable(top=top, roundoff=roundoff, m=m, beta=beta, p=p, spec=spec, states=len(deps),
                      seconds=time.perf_counter() - t_start, dim=dim)


@functools.lru_cache(maxsize=16)
def count_table(m: float, beta: float, p: float, dim: int, spec: Optional[CountSpec] = None) -> CountTable:
    """:func:`build_count_table`, kept for the process and on disk (:mod:`.table_cache`, keyed also by d and the
    spec's count-table fields)."""
    spec = CountSpec() if spec is None else spec
    return table_cache.load_or_build(
        table_cache.table_key(m, beta, p, spec, dim=dim), lambda: build_count_table(m, beta, p, dim, spec),
        lambda top, roundoff, states, seconds, _members: CountTable(top=top, roundoff=roundoff, m=m, beta=beta, p=p,
                                                                    spec=spec, states=states, seconds=seconds,
                                                                    dim=dim))
