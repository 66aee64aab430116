r"""Privacy curves ε(σ) at fixed δ for several β (the GG paper's Figure 2), as rows, CSV and PNG.

Each row is one accountant call ``compute_epsilon(noise_multiplier=σ, sample_rate=q, steps=T, delta=δ,
beta=β, dim=d, clip_norm_p=p, mode=mode)``. σ is the Opacus noise multiplier (noise scale s = σ·C); the
paper's Figure 2 axis is its own σ_p = β·s^β with Δf = C = 1, given in the ``paper_sigma`` column. Figure 2
itself is one composition without subsampling (q = 1, T = 1), δ = 1e-5.
"""

from __future__ import annotations

import csv
import math
import os
from typing import Callable, Dict, List, Optional, Sequence

from ...distribution import scale_to_paper_sigma
from ...accountants.report import SCOPE_TEXT, SCOPES
from ...validation import validate_beta, validate_positive
from . import pyplot, save_figure

__all__ = ["CURVE_FIELDS", "privacy_curve", "write_curve_csv", "plot_privacy_curve", "parse_float_list",
           "parse_sigma_range"]

CURVE_FIELDS = ["beta", "noise_multiplier", "paper_sigma", "epsilon", "epsilon_lower", "epsilon_estimate",
                "epsilon_upper", "certified", "epsilon_scope", "mode", "direction", "shape_k", "delta", "sample_rate", "steps",
                "dim", "clip_norm_p", "error"]


def parse_float_list(text: str, name: str) -> List[float]:
    """Parse "1,1.5,2" into [1.0, 1.5, 2.0]; ValueError naming ``name`` on malformed input."""
    try:
        vals = [float(x) for x in str(text).split(",") if x.strip() != ""]
    except ValueError:
        raise ValueError(f"{name} must be a comma-separated list of numbers, got {text!r}") from None
    if not vals or not all(math.isfinite(v) for v in vals):
        raise ValueError(f"{name} must be a non-empty comma-separated list of finite numbers, got {text!r}")
    return vals


def parse_sigma_range(text: str) -> List[float]:
    """σ values from "start:stop:num" (num equally spaced values, both ends included) or "a,b,c"; all > 0."""
    text = str(text)
    if ":" in text:
        parts = text.split(":")
        try:
            if len(parts) != 3:
                raise ValueError
            start, stop, num = float(parts[0]), float(parts[1]), int(parts[2])
        except ValueError:
            raise ValueError(f"sigmas must be 'start:stop:num' or a comma-separated list, got {text!r}") from None
        if num < 1 or not (math.isfinite(start) and math.isfinite(stop)):
            raise ValueError(f"sigmas range needs finite ends and num >= 1, got {text!r}")
        vals = [start] if num == 1 else [start + (stop - start) * i / (num - 1) for i in range(num)]
    else:
        vals = parse_float_list(text, "sigmas")
    return [validate_positive(v, "sigmas (noise multipliers)") for v in vals]


def privacy_curve(betas: Sequence[float], sigmas: Sequence[float], *, delta: float, sample_rate: float = 1.0,
                  steps: int = 1, dim: int = 1, clip_norm_p: Optional[float] = None, mode: str = "certified",
                  eps_error: float = 0.01, diagnostics: bool = False,
                  epsilon_fn: Optional[Callable[..., object]] = None) -> List[Dict[str, object]]:
    r"""ε(σ) for every (β, σ): one row per pair, ε from the accountant (an EpsilonReport).

    Rows carry ``epsilon`` with its ``epsilon_scope`` (the report's ``scope``: "proven" in certified mode, the
    paper's sampled-PRV number in paper mode is an "estimate"), its lower/estimate/upper, and ``paper_sigma`` = β·σ^β (the paper's σ_p at C = 1).
    Settings the accountant cannot bound give ε = inf and the reason in ``error`` (never a smaller number).
    ``epsilon_fn`` defaults to :func:`opacus_gg.accountants.compute_epsilon`. ``diagnostics=True`` asks it for what
    it computes only on request (the equal-spread PRV's bracket, paper mode's error bars: the lower/upper
    columns); by default those cells are empty where the published ε does not need them.
    """
    betas = [validate_beta(b) for b in betas]
    if not sigmas:
        raise ValueError("sigmas must be a non-empty list of finite numbers > 0, got []")
    sigmas = [validate_positive(s, "sigmas") for s in sigmas]
    if mode not in ("certified", "paper"):
        raise ValueError(f"mode must be 'certified' or 'paper', got {mode!r}")
    if epsilon_fn is None:
        from ...accountants import compute_epsilon as epsilon_fn  # the certified accountant (other module)
    rows: List[Dict[str, object]] = []
    for beta in betas:
        for sigma in sigmas:
            sigma = float(sigma)
            row: Dict[str, object] = {"beta": beta, "noise_multiplier": sigma,
                                      "paper_sigma": scale_to_paper_sigma(beta, sigma), "delta": float(delta),
                                      "sample_rate": float(sample_rate), "steps": int(steps), "dim": int(dim),
                                      "clip_norm_p": clip_norm_p if clip_norm_p is not None else beta,
                                      "mode": mode, "error": ""}
            try:
                rep = epsilon_fn(noise_multiplier=sigma, sample_rate=sample_rate, steps=steps, delta=delta,
                                 beta=beta, dim=dim, clip_norm_p=clip_norm_p, mode=mode, eps_error=eps_error,
                                 **({"diagnostics": True} if diagnostics else {}))
            except (RuntimeError, OverflowError, FloatingPointError) as e:  # unbounded here: report, never hide
                row.update(epsilon=math.inf, epsilon_lower=math.nan, epsilon_estimate=math.nan,
                           epsilon_upper=math.inf, certified=mode == "certified",
                           epsilon_scope="proven" if mode == "certified" else "estimate", direction="", shape_k="",
                           error=str(e).splitlines()[0] if str(e) else type(e).__name__)
            else:
                # the PRV bracket, direction and spread: None (an empty cell) where they were not computed
                # (β ≠ 1, 2 with d > 1: the equal-spread PRV beside the published bound; paper mode: the error bars)
                row.update(epsilon=float(rep.epsilon), epsilon_lower=rep.epsilon_lower,
                           epsilon_estimate=rep.epsilon_estimate, epsilon_upper=rep.epsilon_upper,
                           certified=bool(rep.certified), epsilon_scope=rep.scope, direction=rep.direction,
                           shape_k=rep.shape_k)
            rows.append(row)
    return rows


def write_curve_csv(rows: Sequence[Dict[str, object]], path: str) -> str:
    """Write the rows (columns :data:`CURVE_FIELDS`) to ``path``; floats in full precision (repr)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CURVE_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    return path


def plot_privacy_curve(rows: Sequence[Dict[str, object]], path: str, *,
                       epsilon_line: Optional[float] = None, title: Optional[str] = None) -> str:
    """Plot ε against σ, one line per β (matplotlib, Agg backend), save a PNG to ``path``.

    The y label states what ε is: the weakest ``epsilon_scope`` among the rows, in the words of
    :data:`opacus_gg.accountants.report.SCOPE_TEXT`; ``epsilon_line`` draws the paper's horizontal line of equal
    privacy (Figure 2 uses ε = 4).
    """
    plt = pyplot()

    if not rows:
        raise ValueError("rows must be non-empty to plot a privacy curve")
    fig, ax = plt.subplots(figsize=(6, 4))
    for beta in sorted({float(r["beta"]) for r in rows}):
        pts = sorted((float(r["noise_multiplier"]), float(r["epsilon"])) for r in rows if float(r["beta"]) == beta)
        xs = [p[0] for p in pts if math.isfinite(p[1])]
        ys = [p[1] for p in pts if math.isfinite(p[1])]
        ax.plot(xs, ys, marker="o", ms=3, label=f"β = {beta:g}")
    if epsilon_line is not None:
        ax.axhline(float(epsilon_line), color="red", lw=1, ls="--")
    ax.set_xlabel("noise multiplier σ")
    scope = max((str(r["epsilon_scope"]) for r in rows), key=SCOPES.index)  # SCOPES runs strongest → weakest
    ax.set_ylabel(f"ε ({SCOPE_TEXT[scope]})", fontsize=8)
    r0 = rows[0]
    default_title = (f"δ = {float(r0['delta']):g}, q = {float(r0['sample_rate']):g}, T = {r0['steps']}, "
                     f"d = {r0['dim']}, {r0['mode']}\nε: {SCOPE_TEXT[scope]}")
    ax.set_title(title or default_title, fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    return save_figure(fig, path)
