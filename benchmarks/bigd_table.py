r"""Prototype (issue 35 item 2 at large d): a PRV-level table for p = β > 2 in many coordinates, by position chains.

``PYTHONPATH=$PWD OMP_NUM_THREADS=1 python3 benchmarks/bigd_table.py [--dim 2410] [--betas 3 2.5] [--count-only]
[--proof] [--mass-steps 64 --base-steps 1 --bulk-fine 1.02 --position-ratio 1.1 ...]``

Not library code and not published anywhere: a measurement of what a count-carrying table costs at d = 2410
(docs/accounting.md, "A count-aware table for p > 2 at small d", last paragraph). Units as in
:mod:`opacus_gg.accountants.ball_prv`: GG(β, 1) noise, m = 1/σ, μ ≥ 0 sorted decreasingly, ‖μ‖_p ≤ m in d
coordinates; ΔR = m^p/N. Two phases (the argument: ``PROOF`` below, printed by ``--proof``):

* **Top** (cells on the mass lattice b = m(k/N)^{1/p}, k_S ≤ k ≤ N, no count; Lemma T1 with exact charges):
  T(i, j) = env(T(i, j − 1), GG(b_j) ⊗ T(i − k_{j−1}, j)),  T(i, 0) = E_J(i, 0) (everything left ≤ b_S).
* **Bulk** (cells b_0 < … < b_J ≥ b_S, c_j ≤ b_{j−1}^p; positions on a grid 0 = s_0 < s_1 < … = d, steps
  g(s) = s⁺ − s; the count left is d − s):
  E_j(i, s) = env(E_{j−1}(i, s), GG(b_j)^{⊗g(s)} ⊗ F_j(λ, s)),  λ = i + ⌈s·c_j/ΔR⌉;
  F_j(λ, s) = env(E_{j−1}(⌈λ − s⁺c_j/ΔR⌉, s⁺),  GG(b_j)^{⊗g(s⁺)} ⊗ F_j(λ, s⁺),  D_{j−1}(⌈λ − (s + 1)c_j/ΔR⌉, s⁺));
  D_j(M, s) = env(D_{j−1}(M, s), E_j(⌈M − (g − 1)c_j/ΔR⌉, s)),  g the step ending at s;
  E_0(i, s) = GG(b_0)^{⊗(d−s)};  E_j(i, s) = GG(b_j)^{⊗(d−s)} where (d − s)·b_j^p ≤ iΔR (count-bound).
  λ is invariant along a cell's chain (a full step in cell j is charged g·c_j exactly); a step whose last coordinate
  is in a lower cell j' is charged c_j + (g − 1)c_{j'} (its first, and its others ≥ its last: the lag charge D).

``--count-only`` counts the states and prints the ℓ2 proxy: the same recursion with each pair replaced by its
Σcap² (env → max, ⊗ → +), the ℓ2² of the worst member of the relaxed family the table bounds, against the equal
spread's d^{1−2/p}m² (a diagnostic of the construction's slack, not a bound). Otherwise it builds the pairs and prints
the PRV ε (σ = 1, q = 0.01, T = 1000, δ = 1e-5) against the worst explicit shape's PRV and the published Rényi bound.

Measured (β = p = 3, d = 2410, load 2.5–3 on the 2 cores; states / proxy): N = 64 (bulk cells 1.02 on [0.045, 0.12]m,
1.1 elsewhere, positions ≤ 10 % steps): 716k / 1.63; N = 256: 2.45M / 1.23; N = 1024: 9.4M / 1.11. The slack is the
mass rounding, two grid steps per group (E's λ and the exit), which a staircase of small groups down the cells
collects (the argmax of the proxy: ~30 groups of 1–64 coordinates from 0.21m down to 0.08m, its p-mass bound staying
near m^p); the cells (1.02 → 1.05 with 1.2 elsewhere, N = 256: 1.23 → 1.26) and the positions (then ≤ 20 %: 1.30) cost
less. Build ≈ 1.7 ms CPU per state (2–4.5 ms wall on the loaded 2-core machine; 3001-point loss grid): d = 16 (N = 64,
k_S = 16, 18.5k states): ε 20.58 in 71 s, against the worst explicit shape's 14.42 and the count table's 15.42; d =
2410 at N = 128, k_S = 2, bulk cells 1.05 / 1.2, positions ≤ 20 % (333k states, proxy 1.37; 569 CPU s, 25 min wall at
load 5–6): ε 257.88, against 162.82 and the published 219.47 (ε's excess is 1.6–1.8× the proxy's: below 219.47 needs a
proxy under about 1.2, 1.10× one near 1.06).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

os.environ.setdefault("OPACUS_GG_CACHE", "off")

from opacus_gg.accountants.api import _compose_tight  # noqa: E402
from opacus_gg.accountants.ball_count import cap as lattice_cap  # noqa: E402
from opacus_gg.accountants.ball_prv import Swapped, _Grid, envelope_pair  # noqa: E402
from opacus_gg.accountants.gg_pair import GGPair  # noqa: E402
from opacus_gg.accountants.history import PairSegment  # noqa: E402
from opacus_gg.formatting import fmt_up  # noqa: E402

Q, T, DELTA = 0.01, 1000, 1e-5
#: published today (Rényi with Lemma F) and the worst explicit shape's PRV (docs/accounting.md, "Orders below 2")
KNOWN = {(3.0, 2410): (219.4699, 162.8234), (2.5, 2410): (31.5923, 24.1487), (3.0, 100): (45.0236, 32.6435),
         (2.5, 100): (12.1831, 8.7469), (3.0, 10): (15.1406, 12.4896), (2.5, 10): (6.3077, 5.0038)}
_UP = 1.0 + 1e-12  # caps rounded up, charges down (relative; the float operations carry < 40 ulps)

PROOF = r"""
Sets (exact reals). Top: T(i, j) ⊇ tails (any count ≤ d) with max ≤ b_j (lattice), p-mass ≤ iΔR. Bulk, for a
sorted ν on positions s+1..d (d − s coordinates): E_j(i, s) ⊇ {max ≤ b_j, Σν^p ≤ iΔR}; F_j(λ, s) ⊇ {ν_{s+1} ∈
(b_{j−1}, b_j], Σν^p ≤ λΔR − s·c_j}, its pair bounding the positions after s⁺ (the reader multiplies the step's
GG(b_j)^{⊗g(s)}: positions s+1..s⁺ are ≤ ν_{s+1} ≤ b_j, Lemma A each, Lemma B); D_j(M, s) ⊇ {positions after s:
first ≤ x, where x ≤ b_j is the last coordinate of the step ending at s, and Σν^p + (g − 1)x^p ≤ MΔR}.
E: ν_{s+1} ≤ b_{j−1} → E_{j−1}(i, s); else ν ∈ F_j's set, since λΔR − s c_j ≥ iΔR.
F, by the step's last coordinate x = ν_{s⁺}: (a) x > b_{j−1}: the step is in cell j, its mass > g c_j, the rest's
< λΔR − s⁺c_j; the rest's first is ≤ b_{j−1} (→ E_{j−1}) or in cell j (→ GG(b_j)^{⊗g(s⁺)} ⊗ F_j(λ, s⁺)).
(b) x ≤ b_{j−1} (g ≥ 2): the step's mass ≥ ν_{s+1}^p + (g − 1)x^p > c_j + (g − 1)x^p, the rest is ≤ x →
D_{j−1}(M, s⁺) with MΔR ≥ λΔR − (s + 1)c_j.
D: x ≤ b_{j−1} → D_{j−1}; x ∈ cell j: Σν^p < MΔR − (g − 1)c_j, the rest ≤ x ≤ b_j → E_j; D_0 = E_0.
Every rounding is up on the rest's mass (⌈⌉, charges computed with a relative margin) and on the caps; a branch is
dropped only where its set is empty (c_j ≥ iΔR; λΔR ≤ s⁺c_j or ≤ (s⁺ + 1)c_j; (g − 1)c_j ≥ MΔR). Count-bound:
every member of E_j(i, s) has d − s coordinates ≤ b_j, so GG(b_j)^{⊗(d−s)} dominates it whatever the mass. Top:
Lemma T1 with the lattice's exact charges; its peeled coordinates are not counted, so the bulk's d positions
over-count (a larger set). Envelopes (Lemma T2), round-off C (Lemma T4) and the symmetric envelope as in ball_prv.
"""


@dataclass(frozen=True)
class Spec:
    mass_steps: int = 64  # N: ΔR = m^p/N (top lattice and bulk mass grid)
    top_ratio: float = 1.005  # top lattice ratio in b (never finer than the lattice)
    base_steps: int = 1  # k_S: the bulk's cap b_S = m(k_S/N)^{1/p}
    bulk_fine: float = 1.02  # bulk cell ratio on [fine_lo, fine_hi]·m
    bulk_coarse: float = 1.1  # elsewhere in the bulk
    fine_lo: float = 0.045
    fine_hi: float = 0.12
    b0: float = 0.015  # the bulk's Base cell (relative to m)
    exact_positions: int = 16
    position_ratio: float = 1.1  # position steps: powers of 2 ≤ (ratio − 1)·s
    h: float = 0.04
    half_width: float = 60.0


def top_lattice(p: float, sp: Spec) -> Tuple[int, ...]:
    n = sp.mass_steps
    ks = [n]
    while ks[-1] > sp.base_steps:
        k = ks[-1]
        ks.append(max(min(k - 1, int(math.ceil(k / sp.top_ratio ** p))), sp.base_steps))
    return tuple(ks[::-1])


def bulk_cells(m: float, p: float, sp: Spec) -> List[float]:
    top = lattice_cap(m, sp.base_steps, sp.mass_steps, p)  # ≥ the exact b_S
    cells = [top]
    while cells[-1] > sp.b0 * m:
        b = cells[-1]
        r = sp.bulk_fine if sp.fine_lo * m < b <= sp.fine_hi * m * sp.bulk_fine else sp.bulk_coarse
        cells.append(b / r)
    cells[-1] = min(cells[-1], sp.b0 * m)
    return cells[::-1]


def positions(d: int, sp: Spec) -> List[int]:
    s = list(range(0, min(sp.exact_positions, d) + 1))
    while s[-1] < d:
        step = 1 << max(0, int(math.floor(math.log2(max(1.0, s[-1] * (sp.position_ratio - 1.0))))))
        s.append(min(d, s[-1] + step))
    return s


class Bound:
    """The states of one (m, β, p, d, spec) and their dependencies (built by :meth:`states`, then :meth:`build`)."""

    def __init__(self, m: float, beta: float, p: float, d: int, sp: Spec) -> None:
        self.m, self.beta, self.p, self.d, self.sp = m, beta, p, d, sp
        self.n = sp.mass_steps
        self.dr = m ** p / self.n  # ΔR (exact for m = 1; the prototype runs σ = 1)
        self.ks = top_lattice(p, sp)
        self.b = bulk_cells(m, p, sp)
        self.cap = [x * _UP for x in self.b]
        self.cap[-1] = self.b[-1]  # already rounded up (lattice_cap)
        self.c = [x ** p / _UP for x in self.b]  # c_j = b_{j}^p rounded down, the charge of cell j + 1
        self.pos = positions(d, sp)
        self.nxt = {self.pos[k]: self.pos[k + 1] for k in range(len(self.pos) - 1)}
        self.prv = {self.pos[k + 1]: self.pos[k] for k in range(len(self.pos) - 1)}
        self.J = len(self.b) - 1

    # -- the state graph -------------------------------------------------------------------------------------------
    def _norm_top(self, i: int, j: int) -> Tuple[int, int]:
        while j > 0 and self.ks[j - 1] >= i:
            j -= 1
        return i, j

    def _idx(self, x: float) -> int:
        """The least mass index ≥ x (x already moved in the safe direction by the caller), at least 0."""
        return max(int(math.ceil(x)), 0)

    def _e(self, i: int, j: int, s: int):
        """The E state (i, j, s) after dropping empty cells; ('P', j, d − s) where a power is the bound."""
        d = self.d
        if s == d:
            return None  # no coordinate left: (Q, Q)
        while j > 0 and self.c[j - 1] * self.n >= i * (1 + 1e-9) * self.m ** self.p:
            j -= 1  # no coordinate of the set can be in cell j: c_j ≥ iΔR
        if j == 0 or (d - s) * self.b[j] ** self.p <= i * self.dr:
            return ("P", j, d - s)  # Base, or count-bound: GG(b_j)^{⊗(d−s)}
        return ("E", i, j, s)

    def deps(self, x):
        """((factor, state), ...): the branches of x's envelope, each the product of a factor (None, ('g', shift):
        one GG, ('P', j, k): GG(b_j)^{⊗k}) and a state (None: no coordinate left)."""
        kind = x[0]
        if kind == "T":
            _, i, j = x
            if j == 0:
                return ((None, self._e(i, self.J, 0)),)
            return ((None, ("T",) + self._norm_top(i, j - 1)),
                    (("g", lattice_cap(self.m, min(self.ks[j], i), self.n, self.p)),
                     ("T",) + self._norm_top(i - self.ks[j - 1], j)))
        if kind == "E":
            _, i, j, s = x
            lam = i + math.ceil(s * self.c[j - 1] / self.dr * _UP)
            return ((None, self._e(i, j - 1, s)), (("P", j, self.nxt[s] - s), ("F", lam, j, s)))
        if kind == "F":  # the positions after s⁺; the step (s, s⁺] starts in cell j; mass ≤ λΔR − s·c_j
            _, lam, j, s = x
            sp_ = self.nxt[s]
            if sp_ == self.d:
                return ((None, None),)
            c, g = self.c[j - 1], sp_ - s
            out = []
            if lam * _UP > sp_ * c / self.dr:  # the step can lie in cell j entirely
                out.append((None, self._e(self._idx(lam - sp_ * c / self.dr / _UP), j - 1, sp_)))
                if lam * _UP > (sp_ + 1) * c / self.dr:  # and the next step start there too
                    out.append((("P", j, self.nxt[sp_] - sp_), ("F", lam, j, sp_)))
            if g >= 2 and j >= 2:  # the step's last in a lower cell j' (lag: its g − 1 others ≥ it)
                out.append((None, ("D", self._idx(lam - (s + 1) * c / self.dr / _UP), j - 1, sp_)))
            elif g >= 2:
                out.append((None, self._e(self._idx(lam - (s + 1) * c / self.dr / _UP), 0, sp_)))
            if not out:  # every case dropped by the margins: keep (a1), a superset (any extra branch is sound)
                out.append((None, self._e(self._idx(lam - s * c / self.dr), j - 1, sp_)))
            return tuple(out)
        if kind == "D":  # the positions after s; the last of the step ending at s is in a cell ≤ j; mass ≤ MΔR
            _, mm, j, s = x
            g = s - self.prv[s]
            out = [(None, ("D", mm, j - 1, s) if j >= 2 else self._e(mm, 0, s))]
            c = self.c[j - 1]
            if (g - 1) * c < mm * self.dr * _UP:  # the last can be in cell j (its g − 1 step mates > b_{j−1} too)
                out.append((None, self._e(self._idx(mm - (g - 1) * c / self.dr / _UP), j, s)))
            return tuple(out)
        return ()

    def states(self) -> Dict:
        top = ("T",) + self._norm_top(self.n, len(self.ks) - 1)
        graph: Dict = {}
        stack = [top]
        while stack:
            x = stack.pop()
            if x is None or x[0] == "P" or x in graph:
                continue
            graph[x] = self.deps(x)
            stack.extend(y for _, y in graph[x])
        self.top = top
        return graph

    def proxy(self, graph: Dict) -> float:
        """The DP with each pair replaced by its ℓ2 mass Σcap² (env → max, ⊗ → +): the ℓ2² of the worst member of
        the relaxed family the table bounds (a diagnostic of the construction's slack, not a bound)."""
        val: Dict = {}

        def ell2(f):
            if f is None:
                return 0.0
            return f[1] ** 2 if f[0] == "g" else f[2] * self.cap[f[1]] ** 2

        def get(y):
            if y is None:
                return 0.0
            return ell2(y) if y[0] == "P" else val[y]

        for x in sorted(graph, key=_order):
            val[x] = max(ell2(f) + get(y) for f, y in graph[x])
        return val[self.top]

    # -- the pairs ---------------------------------------------------------------------------------------------------
    def build(self, graph: Dict, log=print):
        sp = self.sp
        hm = sp.h * self.m
        n = int(math.ceil(sp.half_width / sp.h))
        t = hm * np.arange(-n, n + 1, dtype=np.float64)
        grid = _Grid(t)
        gg_cache: Dict = {}

        def gg(shift: float):
            if shift not in gg_cache:
                gg_cache[shift] = envelope_pair([GGPair(shift, self.beta)], t, grid)
            return gg_cache[shift]

        pow_cache: Dict = {}

        def power(j: int, k: int):  # GG(cap_j)^{⊗k} on the grid, by binary powering (each product re-gridded)
            key = (j, k)
            if key in pow_cache:
                return pow_cache[key]
            if k == 1:
                out = gg(self.cap[j])
            elif k % 2 == 0:
                half = power(j, k // 2)
                pair, c = envelope_pair([half[0].compose(half[0])], t, grid)
                out = (pair, c + 2 * half[1])
            else:
                a, b = power(j, k - 1), power(j, 1)
                pair, c = envelope_pair([b[0].compose(a[0], keep_transform=True)], t, grid)
                out = (pair, c + a[1] + b[1])
            pow_cache[key] = out
            return out

        readers: Dict = {x: 0 for x in graph}
        for ds in graph.values():
            for _, y in ds:
                if y is not None and y[0] != "P":
                    readers[y] += 1
        done: Dict = {}

        def factor(f):
            return gg(f[1]) if f[0] == "g" else power(f[1], f[2])

        def branch(f, y):  # (pair, C) of factor ⊗ state; None: (Q, Q)
            a = None if f is None else factor(f)
            b = None if y is None else (power(y[1], y[2]) if y[0] == "P" else done[y])
            if a is None or b is None:
                return a if b is None else b
            return a[0].compose(b[0], keep_transform=True), a[1] + b[1]

        order = sorted(graph, key=_order)
        t0 = time.perf_counter()
        ident = None
        for count, x in enumerate(order):
            parts = [branch(f, y) for f, y in graph[x]]
            if any(p_ is None for p_ in parts):
                if ident is None:
                    ident = (_identity(t), 0.0)
                parts = [ident if p_ is None else p_ for p_ in parts]
            pair, c = envelope_pair([p_[0] for p_ in parts], t, grid)
            done[x] = (pair, c + max(p_[1] for p_ in parts))
            for _, y in graph[x]:
                if y is not None and y[0] != "P":
                    readers[y] -= 1
                    if readers[y] == 0:
                        del done[y]
            if count % 20000 == 0:
                log(f"  {count}/{len(order)} states, {time.perf_counter() - t0:.0f} s, live {len(done)}", flush=True)
        return done[self.top], time.perf_counter() - t0


def _order(x):
    """Build order: bulk cells ascending; in a cell, positions descending, F then E then D; then the top by cell,
    then mass (each state reads a lower cell, a later position, or in its own (cell, position) an earlier kind)."""
    if x[0] == "T":
        return (1, x[2], 0, x[1])
    return (0, x[2], -x[3], "FED".index(x[0]), x[1])


def _identity(t):
    """(Q, Q): the pair with every loss 0 (no coordinate left), on the grid t (which holds 0)."""
    from opacus_gg.accountants.discrete import DiscretePair
    i0 = int(np.argmin(np.abs(t)))
    if t[i0] != 0.0:
        raise ValueError("the loss grid must contain 0")
    om = np.zeros_like(t)
    om[i0] = 1.0
    return DiscretePair(float(t[0]), float(t[1] - t[0]), om, om.copy(), 0.0, 0.0)


def epsilon(top_pair, roundoff: float) -> float:
    seg = [PairSegment((("bigd", top_pair), ("bigd-swapped", Swapped(top_pair))), Q, T, roundoff)]
    return max(_compose_tight(seg, DELTA, d, 0.01, DELTA * 1e-3).epsilon_upper for d in ("remove", "add"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=2410)
    ap.add_argument("--betas", type=float, nargs="+", default=[3.0, 2.5])
    ap.add_argument("--count-only", action="store_true")
    ap.add_argument("--proof", action="store_true")
    for f, v in Spec().__dict__.items():
        ap.add_argument("--" + f.replace("_", "-"), type=type(v), default=v)
    args = ap.parse_args()
    if args.proof:
        print(PROOF)
    sp = Spec(**{f: getattr(args, f) for f in Spec().__dict__})
    print(sp, flush=True)
    for beta in args.betas:
        bd = Bound(1.0, beta, beta, args.dim, sp)
        t0 = time.perf_counter()
        graph = bd.states()
        kinds = {k: sum(1 for x in graph if x[0] == k) for k in "TEFD"}
        print(f"beta=p={beta:g} d={args.dim}: states {kinds} (counted in {time.perf_counter() - t0:.1f} s); "
              f"bulk cells {bd.J}, positions {len(bd.pos)}, top cells {len(bd.ks)}", flush=True)
        prox = bd.proxy(graph)
        print(f"  proxy: worst relaxed l2^2 {prox:.4f} vs equal spread {args.dim ** (1 - 2 / beta):.4f} "
              f"(ratio {prox / args.dim ** (1 - 2 / beta):.4f})", flush=True)
        if args.count_only:
            continue
        t1 = time.process_time()
        (pair, c), wall = bd.build(graph)
        cpu = time.process_time() - t1
        eps = epsilon(pair, c)
        renyi, ref = KNOWN.get((beta, args.dim), (None, None))
        ratios = f" ref {ref} ratio {fmt_up(eps / ref, 4)} renyi {renyi} ratio {fmt_up(eps / renyi, 4)}" if ref else ""
        print(f"beta=p={beta:g} d={args.dim}: eps {fmt_up(eps, 6)} C {c:.2e} rho {pair.p_inf:.2e} "
              f"build cpu {cpu:.0f} s wall {wall:.0f} s{ratios}", flush=True)


if __name__ == "__main__":
    main()
