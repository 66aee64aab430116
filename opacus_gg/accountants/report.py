r"""The result object of every ε computation, and the one place that labels a printed ε with its scope.

Scopes (what a number is, stated once; every printout and JSON file uses these words):

* ``"proven"``: an upper bound on ε(δ) for every pair of neighbouring data sets (add/remove one example,
  Poisson subsampling) and every shift the clipping norm allows, with its argument in docs/accounting.md.
* ``"equal_spreads"``: an upper bound over every shift spread equally over k of the d coordinates
  (k = 1 … d). That these shifts are the worst case was found by search, not proven, so the number is
  printed beside the proven one, never alone.
* ``"shuffled"``: the Poisson-subsampling bound of a run that trained on shuffled fixed-size batches
  (``poisson_sampling=False``): the accountant's assumption does not hold, so NOT a guarantee.
* ``"estimate"``: not a bound (paper mode for β ≠ 2, CLT/GDP estimates): NOT a guarantee.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from ..formatting import DIGITS, fmt_down, fmt_up

__all__ = ["EpsilonReport", "SCOPES", "SCOPE_TEXT", "METHOD_TEXT", "NOT_COMPUTED", "format_epsilon", "scope_fields"]

SCOPES = ("proven", "equal_spreads", "shuffled", "estimate")
SCOPE_TEXT: Dict[str, str] = {
    "proven": "proven upper bound for every shift",
    "equal_spreads": "over equal spreads: worst case found by search, not proven",
    "shuffled": "NOT a guarantee (shuffled batches)",
    "estimate": "estimate, NOT a guarantee",
}
#: the proven bounds over the whole ℓp ball that a report may carry in ``details`` (name, key), as printed
PROVEN_BOUNDS = (("ball table", "epsilon_ball_table"), ("dominating Gaussian", "epsilon_gaussian_domination"),
                 ("Rényi", "epsilon_rdp"))
#: what a report says of the equal-spread PRV (bracket, worst direction and spread), or of paper mode's error bars,
#: that it did not compute: by default only the published ε is computed (:func:`.api.compute_epsilon_history`'s
#: ``diagnostics``)
NOT_COMPUTED = "not computed (pass diagnostics=True, or --verbose / --diagnostics on the command line)"
#: what produced a report's published ε (``EpsilonReport.method``), as printed beside it
METHOD_TEXT: Dict[str, str] = {
    "prv": "GG accountant: PRV",
    "rdp": "GG accountant: Rényi bound over the ℓp ball",
    "prv_table": "GG accountant: PRV of the ball table (every shift of the ℓp ball)",
    "prv_gaussian": "GG accountant: PRV of the dominating Gaussian (every shift of the ℓp ball, Lemma N)",
    "paper": "paper mode: sampled one-hot PRV",
    "gaussian": "GG accountant: full-batch Gaussian closed form",
}


def format_epsilon(epsilon: float, scope: str, digits: int = DIGITS) -> str:
    """``"<ε> (<scope text>)"``: bounds rounded up exactly (:func:`opacus_gg.formatting.fmt_up`)."""
    if scope not in SCOPE_TEXT:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    number = f"{float(epsilon):.{digits}f}" if scope == "estimate" else fmt_up(epsilon, digits)
    return f"{number} ({SCOPE_TEXT[scope]})"


@dataclass
class EpsilonReport:
    r"""ε at δ for a history, with what it is (``scope``) and how it was obtained.

    ``epsilon`` is the number to publish (what ``get_epsilon`` returns); ``certified`` is True iff its
    scope is ``"proven"``. ``epsilon_lower``/``epsilon_estimate``/``epsilon_upper`` bracket the PRV
    computation behind ``epsilon_equal_spreads`` (or behind ``epsilon`` when ``method == "prv"``).
    ``epsilon_equal_spreads`` is set when the worst equal spread gives a smaller ε than the proven bound
    (scope ``"equal_spreads"``); ``None`` when the proven bound already is that number.
    """

    epsilon: float
    epsilon_lower: float
    epsilon_estimate: float
    epsilon_upper: float
    delta: float
    mode: str = "certified"
    scope: str = "proven"
    method: str = "prv"
    epsilon_equal_spreads: Optional[float] = None
    direction: str = "remove"
    shape_k: int = 1
    details: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {self.scope!r}")

    @property
    def certified(self) -> bool:
        """True iff ``epsilon`` is proven for every shift (scope ``"proven"``)."""
        return self.scope == "proven"

    def to_dict(self) -> dict:
        """Plain-dict view (JSON friendly), with ``certified`` and the scope texts."""
        return {**asdict(self), **scope_fields(self)}

    def summary(self, digits: int = DIGITS, dim: Optional[Any] = None) -> str:
        """The one line to show (≤ 160 characters): ``epsilon = <ε> (<scope text>) at delta = δ, dim = d [<what
        produced it>]``; ``dim`` defaults to ``details["dim"]`` (omitted when neither is known). The rest is in
        :meth:`verbose_lines`."""
        dim = self.details.get("dim") if dim is None else dim
        where = f" at delta = {self.delta:g}" + (f", dim = {dim}" if dim is not None else "")
        return f"epsilon = {format_epsilon(self.epsilon, self.scope, digits)}{where} [{self.method_text}]"

    @property
    def method_text(self) -> str:
        """What produced ``epsilon`` (:data:`METHOD_TEXT`)."""
        return METHOD_TEXT.get(self.method, self.method)

    @property
    def diagnostics_computed(self) -> bool:
        """False where the equal-spread PRV beside the published ε was not composed (the default; its bracket,
        direction and spread are then None), or paper mode's error bars were not (epsilon_lower/upper None):
        ``diagnostics=True`` computes them."""
        return "diagnostics" not in self.details

    def prv_bracket(self) -> Dict[str, Any]:
        """The PRV computation's lower end, estimate and upper end, and the scope of that upper end: ``epsilon``
        itself when ``method`` is "prv" (or "paper"), else the PRV over every equal spread ("equal_spreads")
        that runs beside the published Rényi bound, which its upper end may be below. Where the PRV failed
        (``details["prv_failed"]``) the three are None and ``not_available`` holds the reason; where it was not
        computed (the default, :attr:`diagnostics_computed`) the ends are None and ``not_computed`` says how to ask
        (paper mode keeps its estimate: the one composition it publishes gives it; its ends are the error bars)."""
        scope = self.scope if self.method in ("prv", "paper", "gaussian") else "equal_spreads"
        if not self.diagnostics_computed:
            return {"lower": None, "estimate": self.epsilon_estimate if self.method == "paper" else None,
                    "upper": None, "scope": scope, "not_computed": self.details["diagnostics"]}
        if "prv_failed" in self.details:  # the PRV did not run to the end: no bracket, and why
            return {"lower": None, "estimate": None, "upper": None, "scope": scope,
                    "not_available": self.details["prv_failed"]}
        return {"lower": self.epsilon_lower, "estimate": self.epsilon_estimate, "upper": self.epsilon_upper,
                "scope": scope}

    def proven_bounds(self) -> Dict[str, float]:
        """The proven bounds over the whole ℓp ball that this report computed (:data:`PROVEN_BOUNDS`, by ``details``
        key), where there are several (the least is published); empty otherwise."""
        found = {key: self.details[key] for _, key in PROVEN_BOUNDS if key in self.details}
        return found if len(found) > 1 else {}

    def verbose_lines(self, digits: int = DIGITS) -> List[str]:
        """The details behind :meth:`summary`, one indented line each: the equal-spread ε (when smaller), the PRV
        computation's bracket and what it brackets, and the worst case found."""
        lines = []
        if self.epsilon_equal_spreads is not None:
            lines.append(f"  also: {format_epsilon(self.epsilon_equal_spreads, 'equal_spreads', digits)}")
        bounds = self.proven_bounds()
        if bounds:  # several proven bounds over the ball (ball table, Gaussian, Rényi): the least published
            shown = ", ".join(f"{name} {fmt_up(bounds[key], digits)}" for name, key in PROVEN_BOUNDS if key in bounds)
            lines.append(f"  proven bounds: {shown} (the {'smaller' if len(bounds) == 2 else 'smallest'} is "
                         "published)")
        if self.method == "gaussian":  # no grid: the exact ε rounded up (accountants.full_batch)
            mu = self.details.get("gaussian_mu")
            lines.append(f"  the composition is one Gaussian pair, mu = {mu:.6g}: exact epsilon, rounded up")
            return lines
        b = self.prv_bracket()
        what = "sampled PRV (paper mode)" if self.method == "paper" else (
            "PRV over every shift" if b["scope"] == "proven" else "PRV over every equal spread")
        if "not_available" in b:  # the published ε is the Rényi (or Gaussian) bound; the PRV's numbers do not exist
            lines.append(f"  PRV accountant: not available: {b['not_available']}")
            return lines
        if "not_computed" in b and self.method == "paper":  # the default: one composition, its estimate and ε
            lines.append(f"  {what}: estimate {b['estimate']:.{digits}f}; error bars (Monte Carlo replicates, tail "
                         f"sensitivity, DKW bracket): {b['not_computed']}")
            return lines
        if "not_computed" in b:  # the default: only the published ε was computed
            lines.append(f"  {what} (bracket, worst direction and spread): {b['not_computed']}")
            return lines
        # over equal spreads the PRV runs over an interval cover (pairs that dominate whole ranges of spreads):
        # where that cover is looser than the proven bound, its bracket is the cover's, not ε's
        # (k₀, k₁) of the pair that set the cover's ε: k₀ < k₁ is B[k₀, k₁], which dominates the spreads k₀ … k₁, and
        # k₀ = k₁ > 1 a discrete pair that dominates that spread: only k₁ = 1 (the exact one-coordinate pair) is
        # bracketed itself, elsewhere the lower end is the dominating pair's, not a lower bound on a spread's ε
        k0, k1 = self.details.get("shape_range", (self.shape_k, self.shape_k))
        loose = b["scope"] == "equal_spreads" and b["upper"] > self.epsilon
        cover = b["scope"] == "equal_spreads" and k1 > 1
        lines.append(f"  {what}: lower {fmt_down(b['lower'], digits)}, estimate {b['estimate']:.{digits}f}, "
                     f"upper {fmt_up(b['upper'], digits)}"
                     + (" (the spread cover's, looser than the proven bound: not a bracket of epsilon)" if loose else
                        " (the spread cover's: its lower end is not a lower bound on any spread's epsilon)" if cover
                        else ""))
        if self.method == "paper":  # the ends are statistical error bars; the DKW bracket beside them
            d = self.details
            lines.append(f"  (error bars, not bounds: Monte Carlo sd {d['mc_std_error']:.{digits}g} over "
                         f"{d['mc_replicates']} replicates, tail sensitivity; DKW bracket "
                         f"[{fmt_down(d['dkw_epsilon_lower'], digits)}, {fmt_up(d['dkw_epsilon_upper'], digits)}])")
        else:
            lines.append(f"  worst case: {self.direction} direction, shift spread over {self.shape_k} coordinate(s)"
                         if k0 == k1 else f"  worst case: {self.direction} direction, the pair covering the spreads "
                         f"over {k0}–{k1} coordinates")
        return lines

    def __str__(self) -> str:
        return "\n".join([self.summary(), *self.verbose_lines()])


def scope_fields(report: EpsilonReport) -> Dict[str, Any]:
    """The JSON keys every output format carries: ε, its scope and text, and the equal-spread ε if any."""
    out: Dict[str, Any] = {
        "epsilon": report.epsilon,
        "epsilon_scope": report.scope,
        "epsilon_scope_text": SCOPE_TEXT[report.scope],
        "certified": report.certified,
        "epsilon_method": report.method,
        "epsilon_method_text": report.method_text,
        "epsilon_equal_spreads": report.epsilon_equal_spreads,
    }
    if report.epsilon_equal_spreads is not None:
        out["epsilon_equal_spreads_scope"] = "equal_spreads"
        out["epsilon_equal_spreads_scope_text"] = SCOPE_TEXT["equal_spreads"]
    return out
