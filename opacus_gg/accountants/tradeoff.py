r"""The proven trade-off curve (f-DP, Dong, Roth & Su): for every FPR α, an upper bound on the TPR of any
membership-inference attack, from the same dominating pairs as the proven ε.

Conventions. An attack tests H0 "the example is absent" (output law Q) against H1 "present" (law P) and rejects H0
on an event S: FPR α = Q(S), TPR = P(S); the trade-off curve is β(α) = 1 − sup TPR. For every ε ≥ 0 the
hockey-stick divergences δ_PQ(ε) = sup_S P(S) − e^ε Q(S) and δ_QP(ε) bound every test:

    TPR ≤ e^ε·α + δ_PQ(ε)                        (family 1: a line in α of slope e^ε),
    TPR ≤ 1 − e^{−ε}(1 − α − δ_QP(ε))             (family 2: the same inequality for S's complement, slope e^{−ε}),

and the infimum of both families over ε ≥ 0 is exactly 1 − β(α): the curve is the convex dual of the privacy
profile (δ_PQ at ε < 0 is 1 − e^ε + e^ε δ_QP(−ε), which is family 2). Any upper bound δ_up ≥ δ at finitely many ε
keeps every line above every test's TPR, so

    TPR_up(α) = min(1, min over the lines)                                      (concave, piecewise linear in α)

is a proven bound at every α, whatever the ε grid: a coarser grid only loosens it. Neighbouring data sets are
add/remove; the accountant's two directions bound the pair's two hockey-sticks (remove: δ_PQ, add: δ_QP, in the
profiles of docs/accounting.md). The published curve is the larger of the two bounds with the directions in either
role: the curve of the symmetric relation (f-DP's symmetrization), valid however the directions are named.

Sources (:data:`SOURCE_TEXT`), each a proven upper bound, the published curve their pointwise minimum:

* ``"prv"``: the dominating composed PRV of each direction (:mod:`.composition`), δ_up at every grid point ε = t_k ≥ 0
  with the composition's own budgets (:func:`prv_deltas`): no loss beyond the accountant's discretization.
* ``"prv_gaussian"`` / ``"prv_table"``: the same for the dominating Gaussian (Lemma N) or the ball table's pairs.
* ``"rdp"``: the Rényi bound over the ℓp ball, each direction's δ(ε) by the conversion of Opacus's
  ``get_privacy_spent`` (Balle et al. 2020; :func:`.ball_rdp.rdp_deltas`) on a grid of ε, at the integer orders
  and, where the published ε tries them (above β = 2), the orders in (1, 2) of :mod:`.low_orders`: labelled as such.
* ``"gaussian"``: a full-batch Gaussian composition (β = 2, q = 1) is the pair (N(μ, 1), N(0, 1)), whose curve is
  exactly TPR = Φ(Φ^{−1}(α) + μ) (Dong, Roth & Su's G_μ), evaluated with scipy and rounded up by
  :data:`GAUSSIAN_SLACK` (scipy's ``ndtr``/``ndtri`` are accurate to ~1e-15 relative; at |Φ^{−1}(α)| ≤ 40 an
  argument error of 1e-13 moves Φ by < 1e-11 relative).

Floating point: every line has slope ≥ 0 and intercept ≥ 0, so s·α + c is computed to a few units of round-off
relative; every evaluated bound is multiplied by 1 + :data:`REL_SLACK`.

μ-GDP. The smallest μ with TPR_up(α) ≤ Φ(Φ^{−1}(α) + μ) at every α with α ≥ ``fpr_min`` and TPR_up(α) ≤
1 − ``fpr_min`` (both error rates at least fpr_min; exactly μ-GDP only where the curve is G_μ's itself: a PRV or
Rényi curve keeps TPR_up(0) ≥ its tail slack > 0 and, by the same slack, 1 − TPR_up tiny just below α = 1, where
G_μ's is not, so the claim is made on that range and says so: :attr:`TradeoffReport.mu_gdp_fpr_range`). Proof of
"every α, not only a grid": g(α) = Φ(Φ^{−1}(α) + μ) is concave (g′(α) = exp(−μΦ^{−1}(α) − μ²/2) decreases); on
each piece [a, b] of a partition of the range a single line ℓ of the
family bounds TPR_up from above (TPR_up is the min over the lines), and g − ℓ is concave, so g ≥ ℓ on [a, b] iff
g(a) ≥ ℓ(a) and g(b) ≥ ℓ(b). The partition is the lower envelope's breakpoints (:func:`_envelope`), where that line
is the envelope itself, so nothing is lost; a wrong breakpoint would only loosen μ, never break the claim.
"""

from __future__ import annotations

import dataclasses
import math
from functools import cached_property
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy import special

from ..validation import validate_delta, validate_delta_error, validate_positive
from . import api, low_orders
from .api import (EPSILON_FLOOR, PRV_OUT_OF_RANGE, RELATIVE_MESH, _ball_table_segments, _quiet_floats,
                  gaussian_dominated_history, proven_epsilon_history, validate_ball_bound)
from .ball_rdp import rdp_ball_curves, rdp_deltas
from .checks import UNIT_ROUNDOFF, AccountingError, check_finite
from .composition import _certified_composition, _checked_domain
from .full_batch import full_batch_shift, gaussian_delta, is_full_batch_gaussian
from .history import Segment, normalize_history
from .renyi import DEFAULT_ORDERS
from .report import SCOPE_TEXT
from .shapes import is_certified

__all__ = ["TradeoffReport", "compute_tradeoff_history", "compute_tradeoff", "prv_deltas", "gaussian_tpr",
           "gaussian_mu_for", "FPR_DEFAULT", "MU_FPR_MIN", "SOURCE_TEXT"]

#: the FPRs reported by default (the CLI's ``--fpr``, the run record)
FPR_DEFAULT = (1e-3, 1e-2, 0.1)
#: the μ-GDP claim covers FPR ≥ MU_FPR_MIN with TPR_up ≤ 1 − MU_FPR_MIN (module docstring); the plot starts there
MU_FPR_MIN = 1e-6
#: relative slack on every evaluated line (round-off of s·α + c with s, c, α ≥ 0: a few units of 2^-53)
REL_SLACK = 1e-12
#: relative slack on scipy's Φ(Φ^{−1}(α) + μ) (module docstring)
GAUSSIAN_SLACK = 1e-10
#: the ε grid of the Rényi lines: 0 and geometric from 1e-4 to 2000 (ratio ≈ 1.0023)
RDP_EPSILONS = np.concatenate(([0.0], np.geomspace(1e-4, 2000.0, 6000)))
#: what each source is, as printed
SOURCE_TEXT: Dict[str, str] = {
    "prv": "PRV of the dominating pairs, both directions",
    "prv_gaussian": "PRV of the dominating Gaussian (Lemma N)",
    "prv_table": "PRV of the ball table's pairs",
    "rdp": "from the Rényi bound over the ℓp ball (RDP → (ε, δ) conversion of Balle et al. 2020)",
    "gaussian": "full-batch Gaussian closed form G_mu",
    "noiseless": "no noise: the trivial bound TPR ≤ 1",
    "empty": "no step: TPR = FPR",
}
_U = UNIT_ROUNDOFF


def gaussian_tpr(fpr: np.ndarray, mu: float) -> np.ndarray:
    r"""Φ(Φ^{−1}(α) + μ) (the TPR of G_μ at FPR α) rounded up by :data:`GAUSSIAN_SLACK`, capped at 1."""
    a = np.asarray(fpr, dtype=np.float64)
    with np.errstate(divide="ignore"):
        out = special.ndtr(special.ndtri(a) + mu) * (1.0 + GAUSSIAN_SLACK)
    return np.minimum(np.where(a >= 1.0, 1.0, out), 1.0)


def gaussian_mu_for(epsilon: float, delta: float) -> float:
    r"""The μ of the Gaussian mechanism (N(μ, 1), N(0, 1)) whose exact ε(δ) is ``epsilon``: the root of
    δ_μ(ε) = δ (Balle & Wang's closed form, mpmath; δ_μ(ε) increases with μ). A reference curve for the figure, not
    a bound; ∞ for ε = ∞."""
    if not math.isfinite(epsilon):
        return math.inf
    lo, hi = 0.0, 1.0
    while float(gaussian_delta(hi, epsilon)) < delta:
        lo, hi = hi, 2.0 * hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(gaussian_delta(mid, epsilon)) < delta else (lo, mid)
    return 0.5 * (lo + hi)


# ------------------------------------------------------------------------------------------------- the lines
def prv_deltas(segs: Sequence, direction: str, *, eps_error: float, delta_error: float,
               mesh: Optional[float] = None) -> Tuple[np.ndarray, np.ndarray]:
    r"""(ε_k, δ_up(ε_k)) at every grid point ε_k = t_k ≥ 0 of one composition in ``direction``: what
    :func:`.composition.compose_delta` gives at one ε, at all of them from one composition.

    δ(t_k) = Σ_{j > k} p_j (1 − e^{t_k − t_j}) = D1_{k+1} − e^{t_k} D2_{k+1} (suffix sums of p and p·e^{−t}); their
    round-off (cumulative sums of n terms, an exp) is ≤ 3n·u·Σ_{j > k}|p_j|, added; plus the FFT round-off bound
    B (Lemma R3, the suffix from k: ≥ the one compose_delta reads), δ_error/4 (tails) and the one-step PMFs'
    budget (Lemma R5). An underflowed p_j·e^{−t_j} only raises δ. Points with t_k ≥ 700 are left out (e^{t_k}).
    ``mesh``: at most this grid spacing (the accountant's refinement, :func:`.api._compose_tight`)."""
    domain, steps, rho, _, budget = _checked_domain(segs, direction, delta_error, eps_error, mesh=mesh)
    cert = _certified_composition(steps, domain, 0.0)
    t, p = cert.ts, cert.pmf
    with np.errstate(under="ignore"):
        d1 = np.cumsum(p[::-1])[::-1]
        d2 = np.cumsum((p * np.exp(-t))[::-1])[::-1]
        a1 = np.cumsum(np.abs(p)[::-1])[::-1]
    k = np.nonzero(t[:-1] < 700.0)[0]
    with np.errstate(under="ignore"):
        composed = d1[k + 1] - np.exp(t[k]) * d2[k + 1]
        roundoff = 3.0 * t.size * _U * a1[k + 1] + np.exp(np.minimum(cert.log_bound[k], 0.0))
    delta = np.minimum(budget.bound(np.maximum(composed, 0.0) + roundoff + delta_error / 4.0, rho), 1.0)
    check_finite(delta, f"trade-off: the composed delta curve ({direction})")
    return t[k], delta


def _family_pq(eps: np.ndarray, d_pq: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(slopes, intercepts) of family 1 (module docstring): e^ε, δ_PQ(ε); lines with intercept ≥ 1 dropped (the line
    TPR ≤ 1 is always there), and those with ε ≥ 700 (e^ε overflows; they only matter at α < e^{−700})."""
    keep = (d_pq < 1.0) & (eps < 700.0)
    return np.exp(eps[keep]), d_pq[keep]


def _family_qp(eps: np.ndarray, d_qp: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(slopes, intercepts) of family 2: e^{−ε}, 1 − e^{−ε}(1 − δ_QP(ε)) = −expm1(−ε) + e^{−ε}δ_QP(ε) (both ≥ 0);
    lines with intercept ≥ 1 dropped."""
    c = -np.expm1(-eps) + np.exp(-eps) * d_qp
    keep = c < 1.0
    return np.exp(-eps[keep]), c[keep]


def _envelope(slopes: np.ndarray, intercepts: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The lower envelope of the lines α ↦ s·α + c (with TPR ≤ 1 added) on [0, 1]: (left ends, slopes, intercepts)
    of its pieces, in increasing α, from 0; by slope descending, a line is dropped where it is never the least
    (the convex-hull trick). Each piece's line is one of the given lines, so evaluating it is a bound whatever."""
    s = np.concatenate((slopes, [0.0]))
    c = np.concatenate((intercepts, [1.0]))
    order = np.lexsort((c, -s))
    s, c = s[order], c[order]
    first = np.concatenate(([True], s[1:] != s[:-1]))  # equal slopes: the least intercept (sorted first)
    s, c = s[first], c[first]
    hs: List[float] = []
    hc: List[float] = []
    xs: List[float] = []
    for si, ci in zip(s.tolist(), c.tolist()):
        x = -math.inf
        while hs:
            x = (ci - hc[-1]) / (hs[-1] - si)
            if x <= xs[-1]:
                hs.pop(), hc.pop(), xs.pop()
                x = -math.inf
                continue
            break
        if x >= 1.0:  # best only beyond α = 1
            continue
        hs.append(si), hc.append(ci), xs.append(x)
    xs_a, hs_a, hc_a = np.array(xs), np.array(hs), np.array(hc)
    inside = np.concatenate((xs_a[1:] > 0.0, [True]))  # pieces ending at α ≤ 0 are not on [0, 1]
    xs_a, hs_a, hc_a = xs_a[inside], hs_a[inside], hc_a[inside]
    xs_a[0] = 0.0
    return xs_a, hs_a, hc_a


def _eval_envelope(env: Tuple[np.ndarray, np.ndarray, np.ndarray], fpr: np.ndarray) -> np.ndarray:
    """The envelope at ``fpr`` (each value one line's, rounded up by :data:`REL_SLACK`)."""
    xs, s, c = env
    i = np.clip(np.searchsorted(xs, fpr, side="right") - 1, 0, xs.size - 1)
    return (s[i] * fpr + c[i]) * (1.0 + REL_SLACK)


# ------------------------------------------------------------------------------------------------- the report
@dataclasses.dataclass(frozen=True, eq=False)
class TradeoffReport:
    r"""The proven trade-off curve of a history: :meth:`tpr_upper` at any FPR, μ-GDP where one holds.

    ``lines``: {role: (slopes, intercepts)} for the two roles of the directions ("remove_is_pq": remove's profile
    bounds δ_PQ; "add_is_pq"); TPR_up = min(1, max over roles of the min over its lines, G_μ's TPR where
    ``gaussian_mu`` is set). ``epsilon``: the proven ε at ``delta`` (the number ``get_epsilon`` returns), for
    the Gaussian reference at the same (ε, δ). ``sources``: keys of :data:`SOURCE_TEXT`."""

    epsilon: float
    delta: float
    sources: Tuple[str, ...]
    lines: Dict[str, Tuple[np.ndarray, np.ndarray]] = dataclasses.field(default_factory=dict)
    gaussian_mu: Optional[float] = None
    scope: str = "proven"
    fpr_min: float = MU_FPR_MIN
    details: Dict[str, object] = dataclasses.field(default_factory=dict)

    @property
    def certified(self) -> bool:
        """True iff the curve is proven (scope "proven")."""
        return self.scope == "proven"

    @cached_property
    def _envelopes(self) -> Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]]:
        return {role: _envelope(*sc) for role, sc in self.lines.items()}

    def tpr_upper(self, fpr) -> np.ndarray:
        r"""The proven upper bound on the TPR of any membership-inference attack at each FPR in [0, 1]; checked
        ≥ FPR (the coin-flip test reaches it: a bound below it is a numerical failure, AccountingError)."""
        a = np.atleast_1d(np.asarray(fpr, dtype=np.float64))
        if not np.all((a >= 0.0) & (a <= 1.0)):
            raise ValueError(f"fpr must be numbers in [0, 1], got {fpr!r}")
        out = np.ones_like(a)
        if self._envelopes:
            out = np.minimum(out, np.max([_eval_envelope(env, a) for env in self._envelopes.values()], axis=0))
        if self.gaussian_mu is not None:
            out = np.minimum(out, gaussian_tpr(a, self.gaussian_mu))
        check_finite(out, "trade-off curve")
        if np.any(out < a * (1.0 - 1e-9)):
            raise AccountingError(f"trade-off curve below the diagonal at fpr={a[out < a * (1 - 1e-9)][:3]} "
                                  f"(sources {self.sources}): a numerical failure")
        return out

    @cached_property
    def mu_gdp(self) -> Optional[float]:
        r"""The smallest μ (rounded up) with TPR_up ≤ Φ(Φ^{−1}(α) + μ) at every α in :attr:`mu_gdp_fpr_range`,
        proven by the concavity argument of the module docstring; None where no finite μ does (TPR_up = 1 inside)."""
        if self.gaussian_mu is not None:
            return float(self.gaussian_mu)
        if self.sources == ("empty",):  # TPR = FPR: G_0
            return 0.0
        if not self._envelopes:
            return None
        ends, values = self._piece_ends()
        if np.any(values * (1.0 + GAUSSIAN_SLACK) >= 1.0):
            return None
        x = special.ndtri(ends)
        need = float(np.max(special.ndtri(values * (1.0 + GAUSSIAN_SLACK)) - x, initial=0.0))
        mu = max(need, 0.0) * (1.0 + 1e-9) + 1e-12
        if not np.all(special.ndtr(x + mu) >= values * (1.0 + GAUSSIAN_SLACK)):
            raise AccountingError(f"mu-GDP check failed at mu={mu!r} (sources {self.sources})")
        return mu

    @property
    def mu_gdp_fpr_range(self) -> Tuple[float, float]:
        """The FPRs where :attr:`mu_gdp` is claimed: from fpr_min to where TPR_up reaches 1 − fpr_min (module
        docstring), or [0, 1] where the curve is G_μ's."""
        if self.gaussian_mu is not None or not self._envelopes:
            return (0.0, 1.0)
        return (self.fpr_min, float(np.max(self._piece_ends()[0])))

    def _piece_ends(self) -> Tuple[np.ndarray, np.ndarray]:
        """(α, ℓ(α)) at both ends of every envelope piece within :attr:`mu_gdp_fpr_range` of every role, ℓ the
        piece's line, rounded up by :data:`REL_SLACK` (the points the μ-GDP proof checks). The range ends where the
        first role's envelope reaches 1 − fpr_min (TPR_up is the larger of the roles')."""
        a0, top = self.fpr_min, 1.0 - self.fpr_min
        pieces = []
        for xs, s, c in self._envelopes.values():
            right = np.concatenate((xs[1:], [1.0]))
            with np.errstate(divide="ignore"):  # where the line reaches TPR = 1 − fpr_min (s = 0: never or at once)
                cross = np.where(s > 0, (top - c) / np.where(s > 0, s, 1.0), np.where(c <= top, np.inf, -np.inf))
            pieces.append((np.maximum(xs, a0), np.minimum(np.minimum(right, 1.0), cross), s, c))
        a1 = min(float(np.max(hi[hi > lo], initial=a0)) for lo, hi, _, _ in pieces)
        ends, values = [], []
        for lo, hi, s, c in pieces:
            hi = np.minimum(hi, a1)
            on = hi > lo
            for a in (lo[on], hi[on]):
                ends.append(a)
                values.append((s[on] * a + c[on]) * (1.0 + REL_SLACK))
        if not sum(e.size for e in ends):  # the envelope is above 1 − fpr_min from fpr_min on
            return np.array([a0]), np.array([1.0])
        return np.concatenate(ends), np.concatenate(values)

    def curve(self, n: int = 400, fpr_min: Optional[float] = None) -> Tuple[np.ndarray, np.ndarray]:
        """(FPR, TPR_up) on ``n`` log-spaced FPRs from ``fpr_min`` (default :attr:`fpr_min`) to 1."""
        fpr = np.geomspace(self.fpr_min if fpr_min is None else fpr_min, 1.0, n)
        return fpr, self.tpr_upper(fpr)

    @property
    def scope_text(self) -> str:
        """What the curve is (:data:`.report.SCOPE_TEXT`)."""
        return SCOPE_TEXT[self.scope]

    @property
    def sources_text(self) -> str:
        """The sources, as printed."""
        return "; ".join(SOURCE_TEXT[s] for s in self.sources)

    def to_dict(self, fpr: Sequence[float] = FPR_DEFAULT, n: int = 200) -> dict:
        """JSON view: ``fpr``/``tpr_upper`` (lists) at ``fpr``, ``mu_gdp`` (or None) and the FPRs it holds on,
        the scope, sources, the (ε, δ) it comes with, and the curve on ``n`` log-spaced FPRs."""
        grid, tpr = self.curve(n)
        return {"fpr": [float(a) for a in fpr], "tpr_upper": self.tpr_upper(fpr).tolist(), "mu_gdp": self.mu_gdp,
                "mu_gdp_fpr_range": list(self.mu_gdp_fpr_range), "epsilon": self.epsilon, "delta": self.delta,
                "scope": self.scope, "scope_text": self.scope_text, "sources": list(self.sources),
                "sources_text": self.sources_text, "curve": {"fpr": grid.tolist(), "tpr_upper": tpr.tolist()}}


def _add_lines(acc: Dict[str, List], by_dir: Dict[str, Tuple[np.ndarray, np.ndarray]]) -> None:
    """Append one source's lines ({direction: (ε grid, δ_up)}) to both roles of the directions."""
    for role, (pq, qp) in ROLES.items():
        acc.setdefault(role, []).extend([_family_pq(*by_dir[pq]), _family_qp(*by_dir[qp])])


#: the two roles of the accountant's directions: (the one bounding δ_PQ, the one bounding δ_QP)
ROLES = {"remove_is_pq": ("remove", "add"), "add_is_pq": ("add", "remove")}


def _prv_by_direction(segs: Sequence, eps_error: float, delta_error: float, epsilon: float):
    """{direction: :func:`prv_deltas`} on the accountant's mesh for ``epsilon`` (RELATIVE_MESH · max(ε, floor))."""
    mesh = RELATIVE_MESH * max(epsilon, EPSILON_FLOOR) if math.isfinite(epsilon) else None
    with _quiet_floats():
        return {d: prv_deltas(segs, d, eps_error=eps_error, delta_error=delta_error, mesh=mesh)
                for d in ("remove", "add")}


def _rdp_by_direction(segs: Sequence[Segment]):
    """{direction: (ε grid, δ(ε))} of the Rényi bound over the ℓp ball: the integer orders' curve of each direction,
    and where :func:`.low_orders.applies` (as the published ε) the least of it and of the orders in (1, 2), whose
    curve bounds both directions (Lemma F; :func:`.low_orders.low_order_deltas` with the larger direction's δ as
    ``beat`` prunes only orders that could lower neither)."""
    with np.errstate(all="ignore"):
        curves = rdp_ball_curves(segs, DEFAULT_ORDERS)
        deltas = {d: rdp_deltas(rdp, DEFAULT_ORDERS, RDP_EPSILONS) for d, rdp in curves.items()}
        if low_orders.applies(segs):
            low = low_orders.low_order_deltas(segs, RDP_EPSILONS, beat=np.maximum(*deltas.values()))
            deltas = {d: np.minimum(v, low) for d, v in deltas.items()}
    return {d: (RDP_EPSILONS, v) for d, v in deltas.items()}


def compute_tradeoff_history(history: Sequence[Sequence], delta: float, *, eps_error: float = 0.01,
                             delta_error: Optional[float] = None, ball_bound: str = "renyi",
                             fpr_min: float = MU_FPR_MIN) -> TradeoffReport:
    r"""The proven trade-off curve of a history (module docstring), with the proven ε at ``delta`` beside it.

    Where the PRV covers every shift: the PRV of both directions (the Rényi bound where the PRV is out of range);
    elsewhere the Rényi bound over the ℓp ball, with for β ≤ 2 the dominating Gaussian's PRV (Lemma N; its closed
    form where q = 1) and with ``ball_bound="table"`` the ball table's PRV: the curve is their pointwise minimum.
    A full-batch Gaussian history: G_μ exactly. ``delta_error`` (default δ/1000) is the curve's floor at α → 0."""
    delta = validate_delta(delta)
    eps_error = validate_positive(eps_error, "eps_error")
    delta_error = validate_delta_error(delta_error, delta)
    ball_bound = validate_ball_bound(ball_bound)
    fpr_min = validate_delta(fpr_min, "fpr_min")  # (0, 1)
    segs = normalize_history(history)
    epsilon = proven_epsilon_history(history, delta, eps_error=eps_error, delta_error=delta_error,
                                     ball_bound=ball_bound)
    base = dict(epsilon=epsilon, delta=delta, fpr_min=fpr_min)
    if not segs:
        return TradeoffReport(sources=("empty",), lines={"remove_is_pq": (np.ones(1), np.zeros(1))}, **base)
    if any(s.noiseless for s in segs):
        return TradeoffReport(sources=("noiseless",), **base)
    if is_full_batch_gaussian(segs):
        return TradeoffReport(sources=("gaussian",), gaussian_mu=_rounded_up_mu(segs), **base)
    acc: Dict[str, List] = {}
    sources: List[str] = []
    gaussian_mu = None
    details: Dict[str, object] = {}
    if all(is_certified(s.beta, s.dim, s.clip_norm_p) for s in segs):
        try:
            _add_lines(acc, _prv_by_direction(segs, eps_error, delta_error, epsilon))
            sources.append("prv")
        except PRV_OUT_OF_RANGE as e:
            details["prv_failed"] = str(e).splitlines()[0] if str(e) else type(e).__name__
    if not sources:
        _add_lines(acc, _rdp_by_direction(segs))
        sources.append("rdp")
        gauss = gaussian_dominated_history(segs)
        if gauss is not None and "prv_failed" not in details:
            if is_full_batch_gaussian(gauss):
                gaussian_mu = _rounded_up_mu(gauss)
                sources.append("gaussian")
            else:
                try:
                    _add_lines(acc, _prv_by_direction(gauss, eps_error, delta_error, epsilon))
                    sources.append("prv_gaussian")
                except PRV_OUT_OF_RANGE as e:
                    details["prv_gaussian_failed"] = str(e).splitlines()[0] if str(e) else type(e).__name__
        if ball_bound == "table":
            pair_segs = _ball_table_segments(segs, api.TABLE_SPEC)  # the tables ball_bound='table' builds for ε
            if pair_segs is not None:
                try:
                    _add_lines(acc, _prv_by_direction(pair_segs, eps_error, delta_error, epsilon))
                    sources.append("prv_table")
                except PRV_OUT_OF_RANGE as e:
                    details["prv_table_failed"] = str(e).splitlines()[0] if str(e) else type(e).__name__
    lines = {role: (np.concatenate([s for s, _ in parts]), np.concatenate([c for _, c in parts]))
             for role, parts in acc.items()}
    return TradeoffReport(sources=tuple(sources), lines=lines, gaussian_mu=gaussian_mu, details=details, **base)


def _rounded_up_mu(segs: Sequence[Segment]) -> float:
    """μ of a full-batch Gaussian history (:func:`.full_batch.full_batch_shift`, 50 digits) rounded up to a double."""
    mu = full_batch_shift(segs)
    out = float(mu)
    return math.nextafter(out, math.inf) if out < mu else out


def compute_tradeoff(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float, beta: float = 2.0,
                     dim: Optional[int] = None, clip_norm_p: Optional[float] = None,
                     count_noise_multiplier: Optional[float] = None, eps_error: float = 0.01,
                     delta_error: Optional[float] = None, ball_bound: str = "renyi") -> TradeoffReport:
    """:func:`compute_tradeoff_history` of ``steps`` identical steps (the arguments of :func:`.api.compute_epsilon`)."""
    return compute_tradeoff_history(
        [(noise_multiplier, sample_rate, steps, beta, dim, clip_norm_p, count_noise_multiplier)], delta,
        eps_error=eps_error, delta_error=delta_error, ball_bound=ball_bound)
