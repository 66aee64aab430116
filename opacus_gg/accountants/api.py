r"""Public functions: ε (certified or paper mode) and δ(ε); the σ solver is in :mod:`.solver`.

A history is a list of segments ``(noise_multiplier, sample_rate, steps, beta, dim, clip_norm_p[,
count_noise_multiplier])`` (the last: adaptive clipping's noisy count, :mod:`.history`; 3-tuples
``(σ, q, steps)`` mean β = 2, d = 1, p = β, as Opacus writes them). ``dim`` is required wherever ε
depends on it (β ≠ 2 or p > 2: :func:`opacus_gg.validation.validate_dim`, the CLI's rule), so a missing d never
gives the smallest ε of all. The certified ε is

    ε = max_{direction ∈ {remove, add}} ε_upper(direction),

where each direction composes, step by step, the upper envelope over the worst-case shift shapes
(see :mod:`.composition`, :mod:`.shapes`): the exact ε of a dominating discretization at
δ − (mass at +∞) − δ_error, an upper bound on the true ε (no ε_error added), never an estimate.
A history entry with noise_multiplier = 0 gives ε = ∞ (with a UserWarning).

Where the PRV composition cannot represent the privacy loss (extreme β or σ: its grids overflow), the proven
Rényi bound over the ℓp ball (:mod:`.ball_rdp`), which holds for every setting, is published instead, or for β ≤ 2
the dominating Gaussian's PRV where that is smaller (docs/accounting.md Lemma N; ``details["prv_failed"]`` says
why); where both are infinite or out of range, ε = ∞ with the reason in ``details``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import math
import warnings
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from ..validation import (BALL_BOUNDS, shift_radius, validate_ball_bound, validate_delta, validate_delta_error,
                          validate_nonnegative, validate_positive)
from .ball_count import COUNT_DIM_MAX, CountSpec, count_table, count_table_applies
from .ball_prv import TABLE_P_MAX, TableSpec, ball_table, default_spec, table_applies, table_base
from .ball_rdp import (combine, gaussian_rdp_epsilon_below, rdp_ball_delta, rdp_ball_epsilon,
                       rdp_ball_epsilon_below)
from . import low_orders
from .checks import AccountingError, LossBeyondGrid
from .composition import CompositionResult, compose_delta, compose_history
from .family_composition import (FAMILY_EPSILON_FLOOR, FAMILY_RELATIVE_MESH, family_applies, family_epsilon,
                                 family_refusal)
from .full_batch import full_batch_shift, gaussian_delta_upper, gaussian_epsilon, is_full_batch_gaussian
from .gaussian_domination import gaussian_domination_applies, gaussian_domination_constant
from .history import PairSegment, Segment, normalize_history
from .report import NOT_COMPUTED, EpsilonReport
from .shapes import is_certified

__all__ = ["compute_epsilon", "compute_epsilon_history", "proven_epsilon_history", "compute_delta",
           "ball_table_epsilon", "gaussian_dominated_history", "BALL_BOUNDS"]

MODES = ("certified", "paper")
#: the resolution of the tables ``ball_bound="table"`` builds (:class:`.ball_prv.TableSpec`); None: the default
#: for each segment's p and β (:func:`.ball_prv.default_spec`)
TABLE_SPEC: Optional[TableSpec] = None
#: the resolution of the count tables ``ball_bound="table"`` builds for p > 2 at d ≤ :data:`.ball_count.COUNT_DIM_MAX`
#: (:class:`.ball_count.CountSpec`); None: ``CountSpec()``
COUNT_SPEC: Optional[CountSpec] = None


def _validate_errors(delta: float, eps_error: float, delta_error: Optional[float]) -> Tuple[float, float]:
    return validate_positive(eps_error, "eps_error"), validate_delta_error(delta_error, delta)


#: relative mesh: the grid spacing is refined to at most RELATIVE_MESH · max(ε, EPSILON_FLOOR)
RELATIVE_MESH = 0.004
#: ε below which the mesh is no longer refined (tightness to 0.5 % is targeted for ε ≥ 0.05)
EPSILON_FLOOR = 0.05


def _compose_tight(segs: Sequence[Segment], delta: float, direction: str, eps_error: float,
                   delta_error: float) -> CompositionResult:
    r"""compose_history on Opacus's mesh, refined once to mesh ≤ RELATIVE_MESH · max(ε, EPSILON_FLOOR).

    Every grid gives a certified upper bound; the refinement only makes it tighter. For one step the excess
    over the exact ε is at most one mesh (the connect-the-dots δ equals the exact δ at the grid point above
    ε); for T steps it was measured ≤ 0.2 % against dp-accounting (tests/test_accountant_tight.py).
    """
    res = compose_history(segs, delta, direction, eps_error=eps_error, delta_error=delta_error)
    target = RELATIVE_MESH * max(res.epsilon_upper, EPSILON_FLOOR)
    if math.isfinite(res.epsilon_upper) and res.mesh > target:
        res = compose_history(segs, delta, direction, eps_error=eps_error, delta_error=delta_error, mesh=target)
    return res


def compute_epsilon_history(
    history: Sequence[Sequence],
    delta: float,
    *,
    mode: str = "certified",
    eps_error: float = 0.01,
    delta_error: Optional[float] = None,
    ball_bound: str = "renyi",
    diagnostics: bool = False,
    progress: Optional[Callable[[str], None]] = None,
    **paper_kwargs,
) -> EpsilonReport:
    r"""ε(δ) of a history of Poisson-subsampled GG steps (certified: max over add/remove of ε_upper).

    ``mode="paper"`` delegates to :func:`opacus_gg.accountants.paper.paper_epsilon_report` (the GG
    paper's one-hot, remove-only, Monte Carlo PRV; NOT a guarantee for β ≠ 2). ``ball_bound``
    (:data:`BALL_BOUNDS`): where the PRV covers equal spreads only, "table" also composes the ball table's pair
    (:mod:`.ball_prv`, p ≤ 1.8, or p ≤ 2 above β = 2; :mod:`.ball_count`, p > 2 at d ≤ 32) and publishes the smaller
    proven ε (method "prv_table" where the table wins).

    ``diagnostics``: where the PRV covers equal spreads only (β ∉ {1, 2}, d > 1, p < ∞), the published ε is a
    bound over the whole ℓp ball and the equal-spread PRV (its bracket, the worst direction and spread, the
    equal-spread ε) is a reference beside it, composed only when asked (True; seconds to a minute): by default
    the report carries the published number alone, bit-identical, and says the rest was not computed
    (:meth:`.report.EpsilonReport.prv_bracket`). Where the PRV is the published ε it is always computed. In paper
    mode the published ε is one composition of the sampled PRV, and ``diagnostics`` adds its Monte Carlo error
    bars and DKW bracket (up to R + 4 more compositions, :func:`.paper.sampled_epsilon_details`); ε: the same bits.
    ``progress``: called with a short text before each diagnostic composition (where ``diagnostics`` runs it).
    """
    delta = validate_delta(delta)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    ball_bound = validate_ball_bound(ball_bound)
    eps_error, delta_error = _validate_errors(delta, eps_error, delta_error)
    segs = normalize_history(history)
    if mode == "paper" and ball_bound != "renyi":
        raise ValueError("ball_bound='table' needs mode='certified' (paper mode prints the paper's estimate)")
    if mode == "paper":
        if any(s.count_noise_multiplier is not None for s in segs):
            raise ValueError("mode='paper' does not model the noisy count of adaptive clipping "
                             "(count_noise_multiplier); use mode='certified'")
        from .paper import paper_epsilon_report  # lazy: paper mode draws Monte Carlo samples with torch

        hist = [(s.noise_multiplier, s.sample_rate, s.steps, s.beta, s.dim, s.clip_norm_p) for s in segs]
        return paper_epsilon_report(hist, delta, eps_error=eps_error, delta_error=delta_error,
                                    diagnostics=diagnostics, progress=progress, **paper_kwargs)
    if not segs:
        return EpsilonReport(epsilon=0.0, epsilon_lower=0.0, epsilon_estimate=0.0, epsilon_upper=0.0, delta=delta,
                             details={"empty_history": True})
    if any(s.noiseless for s in segs):
        return _noiseless_report(segs, delta)
    if is_full_batch_gaussian(segs):
        return _full_batch_report(segs, delta)
    uncertified = [s for s in segs if not is_certified(s.beta, s.dim, s.clip_norm_p)]
    if uncertified and not diagnostics:  # the published proven bound alone (the equal-spread PRV: on request)
        return _ball_report(segs, delta, eps_error, delta_error, ball_bound)
    try:
        # where the Rényi bound is published the PRV runs beside it: its float warnings (overflow on the way to
        # a refusal) are not the user's business; where it is published its own checks speak
        with _quiet_floats() if uncertified else contextlib.nullcontext():
            results = []
            for d in ("remove", "add"):
                if uncertified and progress is not None:
                    progress(f"equal-spread PRV (diagnostics), {d} direction")
                results.append(_compose_tight(segs, delta, d, eps_error, delta_error))
    except PRV_OUT_OF_RANGE as e:  # also "epsilon is too large to bound": the Rényi bound may still be finite
        report = _rdp_only_report(segs, delta, e, prv_published=not uncertified)
        if uncertified:
            report = _with_gaussian_domination(report, segs, delta, eps_error, delta_error)
        if uncertified and ball_bound == "table":
            report = _with_ball_table(report, segs, delta, eps_error, delta_error)
        return report
    worst = max(results, key=lambda r: r.epsilon_upper)
    scores = worst.shape_scores
    shape_k = max(scores, key=scores.get) if scores else (1, 1)  # label (k₀, k₁): spreads k₀ … k₁
    details = {
        "epsilon_by_direction": {r.direction: r.epsilon_upper for r in results},
        "estimate_by_direction": {r.direction: r.epsilon_estimate for r in results},
        "truncated_mass": {r.direction: r.inf_mass for r in results},
        "domain_half_width": worst.domain_L,
        "mesh": worst.mesh,
        "eps_error": eps_error,
        "delta_error": delta_error,
        "dim": _dims(segs),
        "shape_scores": {f"{k[0]}-{k[1]}": float(v) for k, v in scores.items()},
        "shapes": sorted([int(k[0]), int(k[1])] for k in scores),
        "shape_range": [int(shape_k[0]), int(shape_k[1])],
    }
    report = EpsilonReport(
        epsilon=worst.epsilon_upper,
        epsilon_lower=worst.epsilon_lower,
        epsilon_estimate=worst.epsilon_estimate,
        epsilon_upper=worst.epsilon_upper,
        delta=delta,
        mode="certified",
        scope="equal_spreads" if uncertified else "proven",
        direction=worst.direction,
        shape_k=int(shape_k[0]),
        details=details,
    )
    # where the PRV covers equal spreads only, publish the proven RDP bound over the whole ℓp ball and keep
    # the equal-spread PRV ε beside it (docs/accounting.md, "Every shift: the Rényi bound over the ℓp ball")
    if uncertified:
        rdp_eps, rdp_order, more = _renyi_epsilon(segs, delta)
        report = combine(report, rdp_eps, rdp_order)
        report = dataclasses.replace(report, details={**report.details, **more})
        report = _with_gaussian_domination(report, segs, delta, eps_error, delta_error)
        if ball_bound == "table":
            report = _with_ball_table(report, segs, delta, eps_error, delta_error)
    return report


#: the Gaussian of Lemma N is composed only where its own Rényi bound is at most GAUSS_DOMINATION_GATE × the Rényi
#: bound over the ball, or that is below GAUSS_DOMINATION_SMALL_EPS: its PRV ε is below its Rényi ε by the RDP →
#: (ε, δ) conversion's loss, measured for the Gaussian mechanism 1.08–1.15× at ε from 0.16 to 10 and 1.39× at 0.03,
#: but 4–19× where the Rényi ε sits at its floor (≈ 0.02 at δ = 1e-5); beyond the gate it rarely wins, and its PRV
#: costs about as much as Opacus's. A cost gate, never a soundness one: skipping it only keeps the Rényi bound
GAUSS_DOMINATION_GATE = 1.3
GAUSS_DOMINATION_SMALL_EPS = 0.1


def gaussian_dominated_history(segs: Sequence[Segment]) -> Optional[list]:
    r"""Every segment replaced by one Gaussian coordinate that dominates its whole ℓp ball (Lemma N, 1 ≤ β ≤ 2):
    shift κ_β·r/σ, ‖μ‖_2 ≤ r/σ with r = 1 for p ≤ 2 and d^{1/2 − 1/p} for p > 2; with adaptive clipping's count
    coordinate (already Gaussian, shift 1/σ_c: :mod:`.count_query`) the two add in ℓ2 (rotation invariance); β = 2,
    d = 1, noise multiplier 1/shift. Rounded so the shift only grows. None where a segment has β > 2 (the lemma
    fails there)."""
    out = []
    for s in segs:
        if not gaussian_domination_applies(s.beta):
            return None
        p = s.clip_norm_p
        r = 1.0 if p <= 2.0 else math.exp((0.5 - 1.0 / p) * math.log(s.dim)) * (1.0 + 1e-12)
        shift = gaussian_domination_constant(s.beta) * r * shift_radius(s.noise_multiplier)
        if s.count_shift is not None:
            shift = math.hypot(shift, s.count_shift)
        shift *= 1.0 + 1e-12
        out.append(Segment(1.0 / shift * (1.0 - 1e-12), s.sample_rate, s.steps, 2.0, 1, 2.0))
    return out


def _gaussian_domination_epsilon(segs: Sequence[Segment], delta: float, rdp_eps: float, eps_error: float,
                                 delta_error: float,
                                 gauss_prv: Optional[Tuple[Optional[float], str]] = None) -> Tuple[Optional[float], str]:
    """(ε, note): the PRV ε of :func:`gaussian_dominated_history` (proven for every shift, any d), or None with
    the reason where Lemma N does not apply, the cost gate (:data:`GAUSS_DOMINATION_GATE`) skips it, or its PRV
    is out of range (the Rényi bound is published then; nothing is lost). ``gauss_prv``: that PRV's
    :func:`_gaussian_prv_epsilon` where this query has composed it already (:func:`_gaussian_first`)."""
    gauss = gaussian_dominated_history(segs)
    if gauss is None:
        return None, "not applicable: beta > 2"
    gauss_low = gaussian_rdp_epsilon_below(gauss, delta)  # ≤ gauss_rdp below, in closed form (never NaN)
    if not (gauss_low <= GAUSS_DOMINATION_GATE * rdp_eps or rdp_eps <= GAUSS_DOMINATION_SMALL_EPS):
        # then gauss_rdp ≥ gauss_low fails the gate below too (docs/accounting.md, "The gate decided from below")
        return None, f"skipped: its Rényi bound (≥ {gauss_low:.4g}) is above {GAUSS_DOMINATION_GATE} x the ball's"
    with np.errstate(all="ignore"):
        gauss_rdp = rdp_ball_epsilon(gauss, delta)[0]
    if not (gauss_rdp <= GAUSS_DOMINATION_GATE * rdp_eps or rdp_eps <= GAUSS_DOMINATION_SMALL_EPS):
        return None, f"skipped: its Rényi bound {gauss_rdp:.4g} is above {GAUSS_DOMINATION_GATE} x the ball's"
    return _gaussian_prv_epsilon(gauss, delta, eps_error, delta_error) if gauss_prv is None else gauss_prv


def _gaussian_prv_epsilon(gauss: list, delta: float, eps_error: float,
                          delta_error: float) -> Tuple[Optional[float], str]:
    """(ε, note) of the PRV of :func:`gaussian_dominated_history`'s segments ``gauss``, both directions (None with
    the reason where it is out of range)."""
    try:
        with _quiet_floats():
            return max(_compose_tight(gauss, delta, d, eps_error, delta_error).epsilon_upper
                       for d in ("remove", "add")), "composed"
    except PRV_OUT_OF_RANGE as e:
        return None, "PRV out of range: " + (str(e).splitlines()[0] if str(e) else type(e).__name__)


def _gaussian_first(segs: Sequence[Segment], delta: float, eps_error: float,
                    delta_error: float) -> Tuple[Optional[float], Optional[Tuple[Optional[float], str]]]:
    r"""(ε, G's PRV): ε the number :func:`_ball_report` publishes, where it is the dominating Gaussian's PRV and a
    cheap test shows it without the Rényi bound over the ball, None elsewhere (then that bound is computed as
    usual); G's PRV: :func:`_gaussian_prv_epsilon` where it was composed for the test (else None), for
    :func:`_ball_report` to reuse instead of composing it again.

    With R the Rényi bound's ε (:func:`.ball_rdp.rdp_ball_epsilon`) and R_low ≤ R its lower end
    (:func:`.ball_rdp.rdp_ball_epsilon_below`), times 1 − 1e-3: the gate passes when the Gaussian's Rényi ε is
    ≤ GAUSS_DOMINATION_GATE·R_low (≤ the gate's GATE·R), and the Gaussian's PRV ε G is published when G < R_low
    (< R, so _publish_if_smaller takes it). The same float as the default report, without its Rényi bound. Where
    the Gaussian's Rényi ε is above GATE·R_low by its closed-form lower end
    (:func:`.ball_rdp.gaussian_rdp_epsilon_below`), it is not computed (the gate fails all the same)."""
    gauss = gaussian_dominated_history(segs)
    if gauss is None:
        return None, None
    with np.errstate(all="ignore"):
        low = rdp_ball_epsilon_below(segs, delta) * (1.0 - 1e-3)
        # the gate fails where the Gaussian's Rényi ε is known from below to fail it (as gauss_rdp ≥ that lower end)
        if not (math.isfinite(low) and gaussian_rdp_epsilon_below(gauss, delta) <= GAUSS_DOMINATION_GATE * low):
            return None, None
        gauss_rdp = rdp_ball_epsilon(gauss, delta)[0]
    if not gauss_rdp <= GAUSS_DOMINATION_GATE * low:
        return None, None
    prv = _gaussian_prv_epsilon(gauss, delta, eps_error, delta_error)
    eps = prv[0]
    return (eps if eps is not None and eps < low else None), prv


def _with_gaussian_domination(report: EpsilonReport, segs: Sequence[Segment], delta: float, eps_error: float,
                              delta_error: float,
                              gauss_prv: Optional[Tuple[Optional[float], str]] = None) -> EpsilonReport:
    """The report with the Gaussian-domination ε (Lemma N) published where it is below the Rényi bound (both
    proven; method "prv_gaussian"; ``gauss_prv``: as :func:`_gaussian_domination_epsilon`)."""
    eps, note = _gaussian_domination_epsilon(segs, delta, report.details.get("epsilon_rdp", report.epsilon),
                                             eps_error, delta_error, gauss_prv)
    details = {**report.details, "gaussian_domination": note}
    if eps is None:
        return dataclasses.replace(report, details=details)
    return _publish_if_smaller(report, eps, "prv_gaussian", {**details, "epsilon_gaussian_domination": eps})


def _renyi_epsilon(segs: Sequence[Segment], delta: float) -> Tuple[float, float, dict]:
    r"""(ε, α, details): the proven Rényi bound over the ℓp ball, :func:`.ball_rdp.rdp_ball_epsilon` at integer
    orders, or, where :func:`.low_orders.applies`, the orders in (1, 2) of Lemma F
    (:func:`.low_orders.low_order_epsilon`) where they give less (both proven; docs/accounting.md, "Orders below
    2"); details: ``epsilon_rdp_integer_orders`` where the low orders were tried. They are tried also where every
    integer order overflows (ε = ∞ there; β = 10, σ = 1, d = 100: ∞ → 3615.19)."""
    eps, order = rdp_ball_epsilon(segs, delta)
    if not low_orders.applies(segs):
        return eps, order, {}
    low, low_order = low_orders.low_order_epsilon(segs, delta, beat=eps)
    more = {"epsilon_rdp_integer_orders": eps}
    return (low, low_order, more) if low < eps else (eps, order, more)


def _renyi_delta(segs: Sequence[Segment], epsilon: float) -> float:
    r"""The proven Rényi bound's δ(ε) over the ℓp ball, the δ side of :func:`_renyi_epsilon` (the same orders, the
    same gate): :func:`.ball_rdp.rdp_ball_delta` at integer orders, and where :func:`.low_orders.applies` the least
    of it and of the orders in (1, 2) (:func:`.low_orders.low_order_deltas`)."""
    rdp = rdp_ball_delta(segs, epsilon)
    if not low_orders.applies(segs):
        return rdp
    return float(low_orders.low_order_deltas(segs, [epsilon], beat=[rdp])[0])


def _ball_report(segs: Sequence[Segment], delta: float, eps_error: float, delta_error: float,
                 ball_bound: str, gauss_prv: Optional[Tuple[Optional[float], str]] = None) -> EpsilonReport:
    r"""The published report where the PRV covers equal spreads only, computing only what it publishes: the Rényi
    bound over the ℓp ball, or the smaller dominating Gaussian's PRV (Lemma N) or ball table's PRV
    (``ball_bound="table"``); the same ε as with ``diagnostics=True`` (the same calls, in the same order). The
    equal-spread PRV is not composed: its bracket, direction and spread are None and ``details["diagnostics"]``
    says so (:data:`.report.NOT_COMPUTED`). ε = ∞ (every Rényi moment overflows, and no PRV bound is finite) is
    said with a UserWarning. ``gauss_prv``: the dominating Gaussian's PRV where this query composed it already."""
    eps, order, more = _renyi_epsilon(segs, delta)
    details = {"rdp_order": order, "epsilon_rdp": eps, "eps_error": eps_error, "delta_error": delta_error,
               "dim": _dims(segs), "diagnostics": NOT_COMPUTED, **more}
    report = EpsilonReport(epsilon=eps, epsilon_lower=None, epsilon_estimate=None, epsilon_upper=None, delta=delta,
                           mode="certified", scope="proven", method="rdp", direction=None, shape_k=None,
                           details=details)
    report = _with_gaussian_domination(report, segs, delta, eps_error, delta_error, gauss_prv)
    if ball_bound == "table":
        report = _with_ball_table(report, segs, delta, eps_error, delta_error)
    if not math.isfinite(report.epsilon):
        why = ("every Rényi order's moment of the privacy loss overflows at these settings (the bound is infinite, "
               "not the privacy loss necessarily)")
        report.details["infinite_because"] = why
        warnings.warn(f"epsilon = inf at beta={sorted({s.beta for s in segs})}, noise_multiplier="
                      f"{sorted({s.noise_multiplier for s in segs})}: {why}; raise noise_multiplier or lower beta",
                      UserWarning, stacklevel=3)
    return report


def _publish_if_smaller(report: EpsilonReport, eps: float, method: str, details: dict) -> EpsilonReport:
    """The report with ``details``, and with the proven bound ``eps`` published (labelled ``method``) where it is
    below the published one; the equal-spread PRV stays beside it where it is smaller still."""
    if not eps < report.epsilon:
        return dataclasses.replace(report, details=details)
    spreads = report.epsilon_upper  # None where the equal-spread PRV was not computed (diagnostics=False)
    return dataclasses.replace(report, epsilon=eps, method=method, details=details,
                               epsilon_equal_spreads=spreads if spreads is not None and spreads < eps else None)


def _table_args(s: Segment, spec: Optional[TableSpec]) -> Tuple[float, float, float, TableSpec]:
    """(m, β, p, spec) of a segment's ball table (``spec`` None: :func:`.ball_prv.default_spec` of its p, β and m)."""
    m = shift_radius(s.noise_multiplier)
    return m, s.beta, s.clip_norm_p, default_spec(s.clip_norm_p, s.beta, m) if spec is None else spec


def _ball_table_segments(segs: Sequence[Segment], spec: Optional[TableSpec]) -> Optional[list]:
    """The history with every segment the PRV does not certify replaced by its ball table's pair
    (:class:`.history.PairSegment`, round-off C attached; ``spec`` None: :func:`.ball_prv.default_spec` of its p, β and m;
    p > 2 at d ≤ 32: the count table of :mod:`.ball_count`, at :data:`COUNT_SPEC`); None where a segment is outside
    both tables (p > 1.8 at β ≤ 2 up to p = 2, p > 2 at d > 32, a count query)."""
    out = []
    for s in segs:
        if is_certified(s.beta, s.dim, s.clip_norm_p):
            out.append(s)
        elif table_applies(s.clip_norm_p, s.count_noise_multiplier, s.beta):
            tab = ball_table(*_table_args(s, spec))
            out.append(PairSegment(tab.pairs, s.sample_rate, s.steps, tab.roundoff, tab.member_pairs))
        elif count_table_applies(s.clip_norm_p, s.count_noise_multiplier, s.dim):
            tab = count_table(shift_radius(s.noise_multiplier), s.beta, s.clip_norm_p, s.dim,
                              CountSpec() if COUNT_SPEC is None else COUNT_SPEC)
            out.append(PairSegment(tab.pairs, s.sample_rate, s.steps, tab.roundoff))
        else:
            return None
    return out


def ball_table_epsilon(segs: Sequence[Segment], delta: float, *, eps_error: float = 0.01,
                       delta_error: Optional[float] = None, spec: Optional[TableSpec] = None):
    r"""({direction: ε_upper}) of the ball tables' pairs (docs/accounting.md, Lemmas T1–T4): the PRV composition of
    their envelope, or, where smaller, the per-state maximum over a table's family (Lemma M1, :func:`family_applies`:
    one table segment of at most FAMILY_MAX_CONVOLUTIONS step convolutions); a proven upper bound for every shift in
    the ℓp ball, any d; None where a segment is outside the table."""
    delta = validate_delta(delta)
    eps_error, delta_error = _validate_errors(delta, eps_error, delta_error)
    pair_segs = _ball_table_segments(segs, spec)
    if pair_segs is None:
        return None
    out = {}
    family = family_applies(pair_segs)
    for d in ("remove", "add"):
        res = _compose_tight(pair_segs, delta, d, eps_error, delta_error)
        out[d] = res.epsilon_upper
        if family and math.isfinite(res.epsilon_upper):
            h = max(res.mesh, FAMILY_RELATIVE_MESH * max(res.epsilon_upper, FAMILY_EPSILON_FLOOR))
            try:  # V_T beyond the grid is read as W⁺(t_max): far above ε, where V_T ≪ δ, that costs nothing
                out[d] = min(out[d], _family_epsilon_kept(segs[0], spec, delta, d, h, res.domain_L,
                                                          2.0 * res.epsilon_upper + 1.0))
            except AccountingError as e:  # a self-check failed, or W⁺ did not fall to δ on its grid
                warnings.warn(f"ball_bound='table': the family maximum could not certify its numerics "
                              f"({str(e).splitlines()[0]}); the envelope's proven epsilon is kept ({d} direction)",
                              UserWarning, stacklevel=2)
    return out


@functools.lru_cache(maxsize=64)
def _family_epsilon_kept(seg: Segment, spec: Optional[TableSpec], delta: float, direction: str, h: float,
                         half_width: float, t_max: float) -> float:
    """:func:`.family_composition.family_epsilon` of one table segment, kept for the process: its table is the
    process's own (:func:`.ball_prv.ball_table`, keyed by the same parameters), so these arguments determine the
    value, and a report asked again (its history, the CLI's JSON and text, a checkpoint's accountant) reuses it."""
    return family_epsilon(_ball_table_segments([seg], spec)[0], delta, direction, h, half_width, t_max)


def _ball_table_composition(segs: Sequence[Segment], spec: Optional[TableSpec]) -> str:
    """How :func:`ball_table_epsilon` composes ``segs``' tables (the report's ``details["ball_table_composition"]``)."""
    pair_segs = _ball_table_segments(segs, spec)
    why = "no table" if pair_segs is None else family_refusal(pair_segs)
    if why is None:
        return (f"the per-state maximum over the table's {len(pair_segs[0].members)} family members (Lemma M1), "
                "where below the envelope's PRV")
    return f"the PRV of the table's envelope pair ({why})"


#: what ``ball_bound="table"`` says where it cannot help (the default proven bound is then published)
_TABLE_OUT_OF_SCOPE = (f"ball_bound='table' covers clip_norm_p <= {TABLE_P_MAX} (<= 2 for beta > 2; above 2 at dim <= "
                       f"{COUNT_DIM_MAX}) without a count query (adaptive clipping; nearer p = 2 at beta <= 2 the "
                       "table is looser than the Rényi bound); "
                       "the published epsilon is the default proven bound (Rényi, or the dominating Gaussian's where "
                       "smaller)")


def _table_or_none(segs: Sequence[Segment], delta: float, eps_error: float, delta_error: float):
    """:func:`ball_table_epsilon`, or None with a one-line warning where it is out of scope or its numerics fail
    (the default proven bound is then published)."""
    try:
        with _quiet_floats():
            by_dir = ball_table_epsilon(segs, delta, eps_error=eps_error, delta_error=delta_error, spec=TABLE_SPEC)
    except PRV_OUT_OF_RANGE as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        warnings.warn(f"ball_bound='table': the ball table's PRV could not certify its numerics ({reason}); the "
                      "published epsilon is the default proven bound", UserWarning, stacklevel=4)
        return None
    if by_dir is None:
        warnings.warn(_TABLE_OUT_OF_SCOPE, UserWarning, stacklevel=4)
    return by_dir


def _ball_table_bases(segs: Sequence[Segment], spec: Optional[TableSpec]) -> list:
    """Which Base each segment's ball table used and why (:func:`.ball_prv.table_base`: the contour Base where it
    applies, else min(U, V)), for the segments :func:`_ball_table_segments` replaces by a ball table."""
    return [table_base(*_table_args(s, spec))[1] for s in segs if not is_certified(s.beta, s.dim, s.clip_norm_p)
            and table_applies(s.clip_norm_p, s.count_noise_multiplier, s.beta)]


def _with_ball_table(report: EpsilonReport, segs: Sequence[Segment], delta: float, eps_error: float,
                     delta_error: float) -> EpsilonReport:
    """The report with the ball table's ε published where it is below the Rényi bound (both proven); its details
    say which Base each table used (``ball_table_base``)."""
    by_dir = _table_or_none(segs, delta, eps_error, delta_error)
    if by_dir is None:
        return report
    if any(math.isnan(e) for e in by_dir.values()):  # max() would keep a NaN only in the first direction
        raise AccountingError(f"ball table: a direction's epsilon is NaN ({by_dir})")
    eps = max(by_dir.values())
    return _publish_if_smaller(report, eps, "prv_table",
                               {**report.details, "epsilon_ball_table": eps, "ball_table_by_direction": by_dir,
                                "ball_table_base": _ball_table_bases(segs, TABLE_SPEC),
                                "ball_table_composition": _ball_table_composition(segs, TABLE_SPEC)})


def _dims(segs: Sequence[Segment]):
    """The ``dim`` shown in a report's details: the segments' d, or the sorted distinct values where they differ."""
    dims = sorted({s.dim for s in segs})
    return dims[0] if len(dims) == 1 else dims


def _full_batch_report(segs: Sequence[Segment], delta: float) -> EpsilonReport:
    r"""Every segment at β = 2, q = 1: the composition is one Gaussian pair with shift μ (:mod:`.full_batch`),
    whose exact ε(δ) (Balle & Wang's closed form) is published rounded up; no PRV grid, so any T and δ."""
    mu = full_batch_shift(segs)
    eps = gaussian_epsilon(mu, delta)
    details = {"gaussian_mu": float(mu), "dim": _dims(segs)}
    return EpsilonReport(epsilon=eps, epsilon_lower=eps, epsilon_estimate=eps, epsilon_upper=eps, delta=delta,
                         mode="certified", scope="proven", method="gaussian", details=details)


def _quiet_floats() -> np.errstate:
    """numpy's float warnings off (errstate, a context variable that the composition's worker threads inherit:
    :mod:`.spreads`), for the equal-spread PRV printed beside the published Rényi bound. Not a warnings filter:
    changing one resets Python's once-per-location registry, and the user's own warnings would repeat."""
    return np.errstate(over="ignore", invalid="ignore", divide="ignore")


#: what the PRV composition raises where its grids cannot represent the privacy loss (overflow in the pair's
#: discretization, Opacus's "Cannot compute epsilon", a failed self-check; ValueError: a refused truncated mass
#: or domain); inputs are validated before, so none of these is bad input
PRV_OUT_OF_RANGE = (ArithmeticError, RuntimeError, ValueError)


def _prv_refusal(error: BaseException) -> str:
    """The first words of the warning where the PRV composition refused: the loss's size (:class:`LossBeyondGrid`)
    or a failed self-check of its numerics (anything else)."""
    if isinstance(error, LossBeyondGrid):
        return "the PRV accountant cannot hold this privacy loss on its grid"
    return "the PRV accountant could not certify its own numerics"


def _rdp_only_report(segs: Sequence[Segment], delta: float, error: BaseException, *,
                     prv_published: bool = False) -> EpsilonReport:
    r"""The report where the PRV composition is out of its numerical range: the proven Rényi bound over the ℓp
    ball alone (it holds for every β, d, p; docs/accounting.md, "Every shift"), ∞ with the reason where that
    is infinite too. Inputs are validated before the PRV runs, so ``error`` is numerical, never bad input.
    Where the PRV bound would have been the published number (``prv_published``) the switch is said aloud: a
    one-line warning naming the failed check, since the number printed is then the looser Rényi bound; where
    the PRV only gave the equal-spread reference beside it, a warning says that the reference is missing, and why
    (the report's ``prv_bracket`` then carries ``not_available``)."""
    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    if prv_published:
        warnings.warn(f"{_prv_refusal(error)} at beta={sorted({s.beta for s in segs})}, noise_multiplier="
                      f"{sorted({s.noise_multiplier for s in segs})} ({reason}): the published epsilon is the proven, "
                      "looser Rényi bound instead", UserWarning, stacklevel=3)
    try:
        with np.errstate(all="ignore"):  # the Rényi path checks its own numbers (infinite moments → ε = ∞)
            eps, order, more = _renyi_epsilon(segs, delta)
    except PRV_OUT_OF_RANGE as e2:
        raise AccountingError(
            f"cannot certify epsilon at beta={sorted({s.beta for s in segs})}, noise_multiplier="
            f"{sorted({s.noise_multiplier for s in segs})}: the PRV composition failed ({reason}) and so did the "
            f"Rényi bound ({e2}); lower beta or raise noise_multiplier") from None
    details = {"prv_failed": reason, "rdp_order": order, "epsilon_rdp": eps, **more}
    if not prv_published and math.isfinite(eps):  # the published ε is unaffected, but its reference is missing
        warnings.warn(f"the PRV over every equal spread (the reference reported beside the proven Rényi bound) is "
                      f"not available at beta={sorted({s.beta for s in segs})}, noise_multiplier="
                      f"{sorted({s.noise_multiplier for s in segs})}: {reason}", UserWarning, stacklevel=3)
    if not math.isfinite(eps):
        details["infinite_because"] = ("every Rényi order's moment of the privacy loss overflows at these settings "
                                      "(the bound is infinite, not the privacy loss necessarily)")
        warnings.warn(f"epsilon = inf at beta={sorted({s.beta for s in segs})}, noise_multiplier="
                      f"{sorted({s.noise_multiplier for s in segs})}: {details['infinite_because']}, and the PRV "
                      f"composition is out of range ({reason}); raise noise_multiplier or lower beta",
                      UserWarning, stacklevel=3)
    return EpsilonReport(epsilon=eps, epsilon_lower=0.0, epsilon_estimate=eps, epsilon_upper=eps, delta=delta,
                         mode="certified", scope="proven", method="rdp", details=details)


def proven_epsilon_history(history: Sequence[Sequence], delta: float, *, eps_error: float = 0.01,
                           delta_error: Optional[float] = None, ball_bound: str = "renyi") -> float:
    r"""The proven ε(δ) alone: ``compute_epsilon_history(history, delta).epsilon``, computing only what it needs.

    Where the PRV covers every shift (β = 2, d = 1 or p = ∞ in every segment) that is the PRV bound; otherwise
    the published ε is the Rényi bound over the ℓp ball (:func:`.ball_rdp.rdp_ball_epsilon`) or, for β ≤ 2 where
    smaller, the dominating Gaussian's PRV (Lemma N; composed only past :data:`GAUSS_DOMINATION_GATE`, one PRV
    composition, 0.1–2 s), and the equal-spread PRV (printed beside it by :func:`compute_epsilon_history`) is not
    computed at all: this is the per-step path of ``GGPRVAccountant.get_epsilon`` and of the σ solver. Empty
    history: 0; σ = 0: ∞ (warning). ``ball_bound="table"``: the smaller of that and the ball table's ε
    (:func:`ball_table_epsilon`). The same query again (the same segments, δ, eps_error, delta_error) is answered
    from a per-process record of the numbers computed without a warning (:data:`_PROVEN`; ``ball_bound="renyi"``).
    """
    delta = validate_delta(delta)
    eps_error, delta_error = _validate_errors(delta, eps_error, delta_error)
    ball_bound = validate_ball_bound(ball_bound)
    segs = normalize_history(history)
    key = (tuple(segs), delta, eps_error, delta_error)
    if ball_bound == "renyi" and key in _PROVEN:
        return _PROVEN[key]
    if not segs or any(s.noiseless for s in segs) or all(is_certified(s.beta, s.dim, s.clip_norm_p) for s in segs):
        report = compute_epsilon_history(_as_entries(segs), delta, eps_error=eps_error, delta_error=delta_error)
        if segs and not any(s.noiseless for s in segs) and not {"prv_failed", "infinite_because"} & set(report.details):
            _remember(key, report.epsilon)  # not where it warned: a warning is said at every query
        return report.epsilon
    eps, gauss_prv = _gaussian_first(segs, delta, eps_error, delta_error) if ball_bound == "renyi" else (None, None)
    if eps is None:  # the default report's number (the Gaussian's PRV, where composed above, not composed again)
        eps = _ball_report(segs, delta, eps_error, delta_error, ball_bound, gauss_prv).epsilon
    if ball_bound == "renyi" and math.isfinite(eps):  # an infinite bound is computed (and explained) at every query
        _remember(key, eps)
    return eps


#: {(segments, δ, eps_error, delta_error): ε} of :func:`proven_epsilon_history` (``ball_bound="renyi"``), queries
#: that gave no warning; at most _PROVEN_MAX entries (the oldest forgotten first)
_PROVEN: collections.OrderedDict = collections.OrderedDict()
_PROVEN_MAX = 1024


def _remember(key: tuple, eps: float) -> None:
    _PROVEN[key] = eps
    if len(_PROVEN) > _PROVEN_MAX:
        _PROVEN.popitem(last=False)


def clear_query_cache() -> None:
    """Forget the numbers :func:`proven_epsilon_history` recorded (the next query computes them again)."""
    _PROVEN.clear()


def _as_entries(segs: Sequence[Segment]) -> list:
    """History entries (σ, q, steps, β, d, p) of parsed segments (parsing them again is the identity)."""
    return [s.as_tuple() for s in segs]


def _noiseless_report(segs: Sequence[Segment], delta: float) -> EpsilonReport:
    r"""ε = ∞ for a history with a σ = 0 segment (with a UserWarning saying why), as Opacus reports σ = 0.

    ∞ is always a valid bound. It is also the exact ε(δ) whenever δ < 1 − (1 − q)^{T_0} (T_0 noiseless steps
    at rate q): without noise, with probability 1 − (1 − q)^{T_0} some noiseless step samples the example and
    its output has probability 0 without it, so δ(ε) ≥ 1 − (1 − q)^{T_0} for every finite ε.
    """
    steps = sum(s.steps for s in segs if s.noiseless)
    warnings.warn(
        f"noise_multiplier=0 in {steps} step(s): no noise was added, so epsilon is infinite (no privacy "
        "guarantee for this training run)",
        UserWarning,
        stacklevel=3,
    )
    inf = math.inf
    return EpsilonReport(epsilon=inf, epsilon_lower=inf, epsilon_estimate=inf, epsilon_upper=inf, delta=delta,
                         mode="certified", scope="proven", details={"noiseless_steps": steps})


def compute_epsilon(
    *,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    beta: float = 2.0,
    dim: Optional[int] = None,
    clip_norm_p: Optional[float] = None,
    count_noise_multiplier: Optional[float] = None,
    mode: str = "certified",
    eps_error: float = 0.01,
    delta_error: Optional[float] = None,
    ball_bound: str = "renyi",
    diagnostics: bool = False,
    progress: Optional[Callable[[str], None]] = None,
    **paper_kwargs,
) -> EpsilonReport:
    """ε(δ) after ``steps`` identical steps; see :func:`compute_epsilon_history` (``count_noise_multiplier``:
    each step also releases a noisy count, adaptive clipping's; :mod:`.history`; ``diagnostics``: also the
    equal-spread PRV's bracket, direction and spread where they are not the published ε, and paper mode's error
    bars).

    ``dim`` (the number of noised coordinates d) is required unless β = 2 with p ≤ 2: everywhere else ε grows
    with d, and ValueError says so (:func:`opacus_gg.validation.validate_dim`)."""
    return compute_epsilon_history(
        [(noise_multiplier, sample_rate, steps, beta, dim, clip_norm_p, count_noise_multiplier)],
        delta,
        mode=mode,
        eps_error=eps_error,
        delta_error=delta_error,
        ball_bound=ball_bound,
        diagnostics=diagnostics,
        progress=progress,
        **paper_kwargs,
    )


def compute_delta(
    *,
    epsilon: float,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    beta: float = 2.0,
    dim: Optional[int] = None,
    clip_norm_p: Optional[float] = None,
    count_noise_multiplier: Optional[float] = None,
    eps_error: float = 0.01,
) -> float:
    r"""Proven upper bound on δ(ε): max over add/remove of the dominating composed δ (+ tail slack) where the
    PRV covers every shift (β = 2, d = 1, p = ∞), else the smaller of the Rényi bound over the ℓp ball
    (:func:`_renyi_delta`: the integer orders, and above β = 2 the orders in (1, 2), as :func:`compute_epsilon`)
    and, for β ≤ 2, the PRV δ of :func:`gaussian_dominated_history`.

    ``dim`` is required unless β = 2 with p ≤ 2 (as in :func:`compute_epsilon`). Where the PRV composition is out of
    its numerical range, the Rényi bound is published with a warning (as :func:`compute_epsilon` does).
    σ = 0: δ(ε) = 1 − (1 − q)^T exactly (remove: the loss is +∞ iff a step samples the example, and
    T·log(1 − q) < 0 otherwise; add: δ = (1 − e^ε (1 − q)^T)_+ is smaller).
    """
    epsilon = validate_nonnegative(epsilon, "epsilon")
    segs = normalize_history([(noise_multiplier, sample_rate, steps, beta, dim, clip_norm_p, count_noise_multiplier)])
    if segs[0].noiseless:
        q, t = segs[0].sample_rate, segs[0].steps
        return 1.0 if q == 1.0 else float(-math.expm1(t * math.log1p(-q)))
    if is_full_batch_gaussian(segs):  # the exact δ(ε) of one Gaussian pair, rounded up (:mod:`.full_batch`)
        return gaussian_delta_upper(full_batch_shift(segs), epsilon)
    if not all(is_certified(s.beta, s.dim, s.clip_norm_p) for s in segs):
        # the PRV covers equal spreads only: publish the smaller proven bound over every shift in the ℓp ball, the
        # Rényi bound or (β ≤ 2) the dominating Gaussian's PRV (Lemma N)
        rdp = _renyi_delta(segs, epsilon)
        gauss = gaussian_dominated_history(segs)
        if gauss is None:
            return rdp
        try:
            with _quiet_floats():
                return min(rdp, max(compose_delta(gauss, epsilon, d, eps_error=eps_error) for d in ("remove", "add")))
        except PRV_OUT_OF_RANGE:
            return rdp
    try:
        return max(compose_delta(segs, epsilon, d, eps_error=eps_error) for d in ("remove", "add"))
    except PRV_OUT_OF_RANGE as e:  # as compute_epsilon: the proven Rényi bound, said aloud, never a traceback
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        warnings.warn(f"{_prv_refusal(e)} at beta={segs[0].beta:g}, "
                      f"noise_multiplier={segs[0].noise_multiplier:g} ({reason}): the published delta is the proven, "
                      "looser Rényi bound instead", UserWarning, stacklevel=2)
        with np.errstate(all="ignore"):
            return _renyi_delta(segs, epsilon)
