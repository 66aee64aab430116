"""The ball table's proven ε against the equal-spread PRV and the Rényi bound (``python benchmarks/ball_table.py``).

For each setting (β, p, σ, q, T, d, δ) prints:

- ``table``: the PRV ε of the ball table's pair (:func:`opacus_gg.accountants.ball_table_epsilon`, default
  :class:`~opacus_gg.accountants.ball_prv.TableSpec`, the max over the remove and add directions): proven for
  every shift of the ℓp ball (docs/accounting.md, Lemmas T1–T4);
- ``eq-spread``: the PRV upper bound over every equal spread (``compute_epsilon(...).epsilon_upper``, whose
  scope is "equal_spreads" where the published method is not "prv": ``report.prv_bracket()``), and its lower
  end ``eq-lower`` (of the cover's pairs, each dominating a range of spreads within 1 % of an exact spread's,
  unless the cover hit its cap of pairs: then it can be far above every spread, see ``--spreads``; a proven bound
  below ``eq-lower`` is suspect, not proof of a bug); ``1-coord lower``: the lower end of the PRV of the whole shift on one coordinate (d = 1, exact
  up to its bracket), a rigorous lower bound on the true ε: a proven bound below it is a soundness bug (flagged);
- ``renyi``: the proven Rényi bound over the ℓp ball (``details["epsilon_rdp"]``);
- ``gaussian``: the PRV ε of the Gaussian that dominates the whole ball (Lemma N, 1 ≤ β ≤ 2;
  ``details["epsilon_gaussian_domination"]``, "-" where it is not computed: β > 2, skipped by its cost gate, or
  out of the PRV's range);
- ``published``: ``compute_epsilon(..., ball_bound="table").epsilon`` (the smallest of table, Rényi and Gaussian);
- the ratios table / eq-spread and Rényi / eq-spread; the table's build time, states (pairs computed) and
  connect-the-dots round-off C; the process's peak resident memory after the build (``ru_maxrss``: run one
  (β, p, σ) per process to read it per table); the time of the two ε computations after the build.

One table per (β, p, σ) serves every q, T, d: the settings are grouped by it and each table is built once (the
first row of a group shows the build, the others "cached"; the disk cache of tables is off here, so every table
is built). Settings that raise are printed with the error.

``--spreads`` (no tables): the reference itself, per setting: the worst of the exact equal spreads k = 1, 2, 4, …,
1024, 4096, …, d (each spread's own dominating pair composed as the accountant composes, its upper end and lower
end, and the worst k), the cover's ε with its number of pairs, whether it was capped and its max excess over the
exact curves, the Rényi bound, and the ratios cover / worst and Rényi / worst.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import resource
import sys
import time
import warnings
from typing import List, NamedTuple, Optional

import numpy as np
from opacus_gg.accountants import compute_epsilon
from opacus_gg.accountants.api import _compose_tight, _validate_errors, ball_table_epsilon
from opacus_gg.accountants.ball_prv import TABLE_P_MAX, TableSpec, ball_table, default_spec, table_applies
from opacus_gg.accountants.history import PairSegment, normalize_history
from opacus_gg.accountants.spreads import exact_spread_pair, spread_cover
from opacus_gg.accountants.table_cache import CACHE_ENV
from opacus_gg.formatting import fmt_down, fmt_up


class Setting(NamedTuple):
    beta: float
    p: float
    sigma: float
    q: float
    steps: int
    dim: int
    delta: float


#: (q, T, d): the quickstart's model (examples/quickstart) and the issue's large setting
QUICKSTART = (0.01, 1000, 2410)
LARGE = (0.001, 100_000, 1_000_000)
#: issue 21's settings at σ = 1, δ = 1e-5
DEFAULT = [
    Setting(1.5, 1.5, 1.0, *QUICKSTART, 1e-5),
    Setting(1.5, 1.5, 1.0, *LARGE, 1e-5),
    Setting(1.5, 2.0, 1.0, *LARGE, 1e-5),
    Setting(1.2, 1.2, 1.0, *QUICKSTART, 1e-5),
    Setting(1.2, 1.2, 1.0, *LARGE, 1e-5),
]


def _peak_mib() -> float:
    """Peak resident memory of this process so far, MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _error(e: BaseException) -> str:
    line = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {line}"


def run(s: Setting, refine_to: Optional[float], built: set) -> dict:
    """One row: build (or reuse) the table of (β, p, σ) at the API's spec for p (``refine_to`` replaced where
    given), then the table's ε and the reports."""
    row = {"setting": s}
    spec = default_spec(s.p, s.beta, 1.0 / s.sigma)
    spec = spec if refine_to is None else dataclasses.replace(spec, refine_to=refine_to)
    key = (s.beta, s.p, s.sigma)
    if not table_applies(s.p, None, s.beta):
        row["skipped"] = (f"no table: clip_norm_p > TABLE_P_MAX = {TABLE_P_MAX} at beta <= 2 (the table loses to the "
                          "Rényi bound there; see ball_table_results.md for the measured p = 2 rows)")
        return row
    try:
        tab = ball_table(1.0 / s.sigma, s.beta, s.p, spec)
    except Exception as e:  # noqa: BLE001 -- a failed build is a finding: printed, not hidden
        row["error"] = "build: " + _error(e)
        return row
    row.update(states=tab.states, roundoff=tab.roundoff, peak=_peak_mib(),
               build=None if key in built else tab.seconds)
    built.add(key)
    entry = (s.sigma, s.q, s.steps, s.beta, s.dim, s.p)
    t0 = time.perf_counter()
    try:
        by_dir = ball_table_epsilon(normalize_history([entry]), s.delta, spec=spec)
        row["table"] = max(by_dir.values()) if by_dir is not None else None
    except Exception as e:  # noqa: BLE001
        row["error"] = "table eps: " + _error(e)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            rep = compute_epsilon(noise_multiplier=s.sigma, sample_rate=s.q, steps=s.steps, delta=s.delta,
                                  beta=s.beta, dim=s.dim, clip_norm_p=s.p, ball_bound="table", diagnostics=True)
        except Exception as e:  # noqa: BLE001
            row["error"] = row.get("error", "") + " report: " + _error(e)
            return row
    row["compute"] = time.perf_counter() - t0
    row["warnings"] = [str(w.message).splitlines()[0] for w in caught]
    bracket = rep.prv_bracket()
    row.update(published=rep.epsilon, method=rep.method, renyi=rep.details.get("epsilon_rdp"),
               gauss=rep.details.get("epsilon_gaussian_domination"),
               scope=bracket["scope"], prv_failed=rep.details.get("prv_failed"),
               table_in_report=rep.details.get("epsilon_ball_table"))
    if bracket["scope"] == "equal_spreads" and "prv_failed" not in rep.details:
        row.update(spread=bracket["upper"], spread_lower=bracket["lower"])
    # a rigorous lower bound on the true ε: the whole shift on one coordinate is in the ball for every d, and
    # its PRV (d = 1) is exact up to its bracket (scope "proven")
    try:
        one = compute_epsilon(noise_multiplier=s.sigma, sample_rate=s.q, steps=s.steps, delta=s.delta,
                              beta=s.beta, dim=1, clip_norm_p=s.p)
        if one.prv_bracket()["scope"] == "proven":
            row["one_lower"] = one.prv_bracket()["lower"]
    except Exception as e:  # noqa: BLE001
        row["error"] = row.get("error", "") + " one-coordinate PRV: " + _error(e)
    return row


def _spread_ks(dim: int) -> List[int]:
    """k = 1, 2, 4, …, 1024, then every 4th power of 2, and d: the equal spreads the sweep evaluates exactly."""
    ks = [2 ** i for i in range(11)] + [2 ** i for i in range(12, 64, 2)]
    return [k for k in ks if k < dim] + [dim]


def spread_sweep(s: Setting) -> dict:
    """The worst of the sampled exact equal spreads (each spread's own pair, :func:`.spreads.exact_spread_pair`,
    composed as the accountant composes), and whether the equal-spread cover hit its pair cap."""
    eps_error, delta_error = _validate_errors(s.delta, 0.01, None)
    best = {"upper": 0.0, "lower": 0.0, "k": None}
    for k in _spread_ks(s.dim):
        seg = PairSegment(((f"k={k}", exact_spread_pair(s.sigma, s.beta, k, s.p)),), s.q, s.steps)
        res = [_compose_tight([seg], s.delta, d, eps_error, delta_error) for d in ("remove", "add")]
        up = max(r.epsilon_upper for r in res)
        if up > best["upper"]:
            best = {"upper": up, "lower": max(r.epsilon_lower for r in res), "k": k}
    cover = spread_cover(s.sigma, s.beta, s.dim, s.p)
    return {**best, "capped": cover.capped, "max_excess": cover.max_excess, "pairs": len(cover.pairs)}


def print_sweep(s: Setting) -> None:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", UserWarning)
        t0 = time.perf_counter()
        try:
            w = spread_sweep(s)
        except Exception as e:  # noqa: BLE001
            print(f"| {s.beta:g} | {s.p:g} | {s.sigma:g} | {s.q:g} | {s.steps:g} | {s.dim:g} | ERROR {_error(e)} |")
            return
        rep = compute_epsilon(noise_multiplier=s.sigma, sample_rate=s.q, steps=s.steps, delta=s.delta, beta=s.beta,
                              dim=s.dim, clip_norm_p=s.p, diagnostics=True)
    cover = rep.prv_bracket()["upper"] if "prv_failed" not in rep.details else None
    renyi = rep.details.get("epsilon_rdp")
    print(f"| {s.beta:g} | {s.p:g} | {s.sigma:g} | {s.q:g} | {s.steps:g} | {s.dim:g} | {_up(w['upper'])} |"
          f" {_down(w['lower'])} | {w['k']} | {_up(cover)} | {w['pairs']}{' capped' if w['capped'] else ''},"
          f" {w['max_excess']:.3g} | {_up(renyi)} | {_up(cover / w['upper'] if cover else None, 3)} |"
          f" {_up(renyi / w['upper'] if renyi else None, 3)} | {time.perf_counter() - t0:.0f} |")
    sys.stdout.flush()


def _f(x: Optional[float], fmt: str = ".4f") -> str:
    """Times, ratios of timings and counts (not privacy numbers)."""
    return "-" if x is None else format(x, fmt)


def _up(x: Optional[float], digits: int = 4) -> str:
    """An upper bound (or a ratio of one over a reference, a "within" figure), rounded up (``fmt_up``)."""
    return "-" if x is None else fmt_up(x, digits)


def _down(x: Optional[float]) -> str:
    """A lower bound, rounded down (``fmt_down``)."""
    return "-" if x is None else fmt_down(x)


def print_row(r: dict) -> None:
    s = r["setting"]
    head = f"| {s.beta:g} | {s.p:g} | {s.sigma:g} | {s.q:g} | {s.steps:g} | {s.dim:g} | {s.delta:g} |"
    if "skipped" in r:
        print(head + f" {r['skipped']} |")
        return
    if "table" not in r and "published" not in r:
        print(head + f" ERROR {r['error']} |")
        return
    es, tb, rn = r.get("spread"), r.get("table"), r.get("renyi")
    flag = ""
    if tb is not None and r.get("one_lower") is not None and tb < r["one_lower"]:
        flag = " BELOW the one-coordinate PRV's lower end: SOUNDNESS BUG"
    elif tb is not None and r.get("spread_lower") is not None and tb < r["spread_lower"]:
        flag = " below the equal-spread cover's lower end (within the cover's 1 %: suspect, not proof of a bug)"
    if r.get("table_in_report") is not None and tb is not None and r["table_in_report"] != tb:
        flag += f" (report's table eps {r['table_in_report']:.6f} differs)"
    build = "cached" if r.get("build") is None else f"{r['build']:.1f}"
    print(head + f" {_up(tb)} | {_up(es)} | {_down(r.get('spread_lower'))} | {_down(r.get('one_lower'))} | {_up(rn)} |"
          f" {_up(r.get('gauss'))} |"
          f" {_up(r.get('published'))} | {_up(tb / es if tb and es else None, 3)} | {_up(rn / es if rn and es else None, 3)} |"
          f" {build} | {r['states']} | {r['roundoff']:.1e} | {r['peak']:.0f} | {_f(r.get('compute'), '.1f')} |"
          + flag + (f" ERROR {r['error']}" if "error" in r else "")
          + (f" PRV failed: {r['prv_failed']}" if r.get("prv_failed") else ""))
    for w in r.get("warnings", []):
        print(f"|   warning: {w}")


def _at(text: str):
    q, steps, dim = text.split(",")
    return float(q), int(float(steps)), int(float(dim))


def main(argv: Optional[List[str]] = None) -> None:
    os.environ[CACHE_ENV] = "off"  # builds are measured: the disk cache of tables (table_cache) is not read
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--beta", type=float, nargs="+", help="β values (default: issue 21's five settings)")
    ap.add_argument("--p", type=float, nargs="+", help="clip_norm_p values (default p = β)")
    ap.add_argument("--sigma", type=float, nargs="+", help="noise multipliers (default 1)")
    ap.add_argument("--at", type=_at, nargs="+", metavar="Q,T,D",
                    help="sampling rate, steps, dim (default: 0.01,1000,2410 and 0.001,1e5,1e6)")
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--refine-to", type=float, default=None,
                    help="TableSpec.refine_to: σ < 1 refines the cells by min(1/σ, this) (default: the spec's, "
                         f"{TableSpec.refine_to})")
    ap.add_argument("--spreads", action="store_true",
                    help="no tables: the worst sampled exact equal spread against the cover's PRV and the Rényi bound")
    args = ap.parse_args(argv)
    if args.beta is None and args.p is None and args.sigma is None and args.at is None:
        settings = [s._replace(delta=args.delta) for s in DEFAULT]
    else:
        settings = [Setting(b, b if p is None else p, sg, *at, args.delta)
                    for b, p, sg, at in itertools.product(args.beta or [1.5], args.p or [None], args.sigma or [1.0],
                                                          args.at or [QUICKSTART, LARGE])]
    settings.sort(key=lambda s: (s.beta, s.p, s.sigma))  # one table per (β, p, σ): build each once
    if args.spreads:
        print("worst sampled exact equal spread (k = 1, 2, 4, …, 1024, 4096, …, d) vs the equal-spread cover's PRV"
              f" and the Rényi bound; delta {args.delta:g}")
        print("| beta | p | sigma | q | T | d | worst spread | its lower | k | cover | cover pairs, max excess |"
              " renyi | cover/worst | renyi/worst | s |")
        print("|" + "---|" * 15)
        for s in settings:
            print_sweep(s)
        return
    specs = sorted({default_spec(s.p, s.beta, 1.0 / s.sigma) for s in settings}, key=lambda sp: (sp.mass_split, sp.tail or 0.0))
    shown = [{**dataclasses.asdict(sp), "orders": f"{min(sp.orders)}..{max(sp.orders)}"} for sp in specs]
    print(f"ball table vs equal-spread PRV vs Rényi bound; TableSpec (default_spec(p, beta, 1/sigma)) {shown}, refine_to "
          f"{args.refine_to or 'default'}; table eps = max over remove/add; peak RSS before any table "
          f"{_peak_mib():.0f} MiB")
    print("| beta | p | sigma | q | T | d | delta | table | eq-spread | eq-lower | 1-coord lower | renyi | gaussian |"
          " published | table/eq | renyi/eq | build s | states | C | peak MiB | eps s |")
    print("|" + "---|" * 21)
    built: set = set()
    for s in settings:
        print_row(run(s, args.refine_to, built))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
