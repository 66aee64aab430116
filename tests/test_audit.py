"""The one-run audit (opacus_gg.audit): the ε lower bound against closed forms, an mpmath oracle and Monte Carlo
soundness; the canary run through the real optimizer; (a) honest engines audit below their proven ε at
β ∈ {1, 1.5, 2, 3}, ℓβ and ℓ2 clipping; (b) engines broken on purpose are caught; (c) the test configuration is
fast; the operating points against the proven trade-off curve (the figure's); the CLI's JSON, figure and bad
input."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from pathlib import Path

import mpmath
import numpy as np
import pytest
import torch

from opacus_gg.audit import AuditConfig, audit, epsilon_lower_bound, p_value
from opacus_gg.audit.bound import audit_epsilon, guess_counts, guess_grid
from opacus_gg.audit.canaries import (
    BrokenGGDPOptimizer,
    canary_scores,
    proven_epsilon,
    proven_tradeoff,
    roc_points,
    run_canaries,
)
from opacus_gg.experiments.figures.audit import plot_audit
from opacus_gg.experiments.figures.tradeoff import epsilon_delta_tpr

#: the test configuration (the CLI's default): proven ε ≈ 1.1 at β = 2, small enough for a broken engine to exceed
TEST_SETTING = dict(noise_multiplier=2.0, sample_rate=0.05, steps=100, delta=1e-5, canaries=1000, seed=0)


# ----------------------------------------------------------------------------------------------- the bound
@pytest.mark.parametrize("r", [1, 10, 50, 100, 500])
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_all_correct_pure_dp_bound_is_the_closed_form(r: int, alpha: float) -> None:
    """δ = 0, v = r: q_ε^r ≤ α ⇔ ε ≤ log(x / (1 − x)), x = α^{1/r} (randomized response); 0 when that is < 0."""
    x = alpha ** (1.0 / r)
    closed = max(0.0, math.log(x / (1 - x)))
    assert epsilon_lower_bound(1000, r, r, 0.0, alpha) == pytest.approx(closed, rel=1e-12, abs=1e-12)


def _p_value_mpmath(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """Theorem 5.2's bound from exact binomial sums at 50 digits (shares no code with the module)."""
    with mpmath.workdps(50):
        q = mpmath.e ** eps / (1 + mpmath.e ** eps)
        pmf = [mpmath.binomial(r, j) * q ** j * (1 - q) ** (r - j) for j in range(r + 1)]
        f = lambda u: mpmath.fsum(pmf[max(u, 0):])  # noqa: E731 - P[Bin ≥ u]
        alpha = max([(f(v - i) - f(v)) / i for i in range(1, m + 1)] or [0])
        return float(min(1, f(v) + 2 * m * delta * alpha))


@pytest.mark.parametrize("m,r,v,eps,delta", [(50, 20, 15, 0.5, 1e-3), (100, 60, 50, 1.0, 1e-4),
                                             (40, 40, 30, 2.0, 0.0), (60, 30, 30, 3.0, 1e-2), (30, 10, 0, 1.0, 0.1)])
def test_p_value_matches_an_exact_oracle(m: int, r: int, v: int, eps: float, delta: float) -> None:
    """The maximum over every i ≤ m (not only i ≤ v, as the module takes) and exact sums agree to 1e-9."""
    assert p_value(m, r, v, eps, delta) == pytest.approx(_p_value_mpmath(m, r, v, eps, delta), rel=1e-9, abs=1e-15)


def test_bound_is_monotone_in_the_evidence_and_in_delta() -> None:
    """More correct guesses → larger ε_L; larger δ or a stricter level → smaller ε_L; ε_L is rejected (p ≤ α)."""
    bounds = [epsilon_lower_bound(1000, 200, v, 1e-5, 0.05) for v in range(100, 201, 5)]
    assert all(a <= b for a, b in zip(bounds, bounds[1:])) and bounds[0] == 0.0 and bounds[-1] > 3
    by_delta = [epsilon_lower_bound(1000, 200, 180, d, 0.05) for d in (0.0, 1e-6, 1e-4, 1e-3, 1e-2)]
    assert all(a >= b for a, b in zip(by_delta, by_delta[1:])) and by_delta[0] > by_delta[-1]
    assert epsilon_lower_bound(1000, 200, 180, 1e-5, 0.01) < epsilon_lower_bound(1000, 200, 180, 1e-5, 0.05)
    eps = epsilon_lower_bound(1000, 200, 180, 1e-5, 0.05)
    assert p_value(1000, 200, 180, eps, 1e-5) <= 0.05 < p_value(1000, 200, 180, eps + 1e-6, 1e-5)


def _randomized_response_scores(rng: np.random.Generator, m: int, eps0: float, leak: float):
    """An (ε0, δ = leak)-DP release per canary: with probability ``leak`` S_i itself (score ±10), otherwise
    randomized response of accuracy e^ε0/(1 + e^ε0) (score ±1); plus a tie-break independent of S."""
    s = rng.random(m) < 0.5
    leaked = rng.random(m) < leak
    out = np.where(leaked, s, s ^ (rng.random(m) >= 1 / (1 + math.exp(-eps0))))
    return np.where(out, 1.0, -1.0) * np.where(leaked, 10.0, 1.0) + 0.5 * rng.random(m), s


@pytest.mark.parametrize("k_plus,k_minus", [(100, 100), (500, 500), (20, 0)])
def test_bound_is_sound_for_randomized_response_monte_carlo(k_plus: int, k_minus: int) -> None:
    """300 seeds of a pure ε0 = 1 mechanism, m = 1000, one guess rule: ε_L > ε0 in at most 5 % + 3 standard errors
    of the runs (the theorem says ≤ 5 %; the binomial is exact here, so the rate is close to 5 %)."""
    rng, n, hits = np.random.default_rng(0), 300, 0
    for _ in range(n):
        scores, s = _randomized_response_scores(rng, 1000, 1.0, 0.0)
        r, v = guess_counts(scores, s, k_plus, k_minus)
        hits += epsilon_lower_bound(1000, r, v, 0.0, 0.05) > 1.0
    assert hits / n <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)


def test_bonferroni_over_the_grid_is_sound_monte_carlo() -> None:
    """100 seeds, ε0 = 1, the best of every rule of :func:`guess_grid` (each at 5 %/K): ε_L > ε0 in ≤ 5 % + 3 se."""
    rng, n, hits = np.random.default_rng(2), 100, 0
    for _ in range(n):
        scores, s = _randomized_response_scores(rng, 1000, 1.0, 0.0)
        hits += audit_epsilon(scores, s, 0.0, 0.95).epsilon > 1.0
    assert hits / n <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)


def test_delta_term_is_needed_and_enough_monte_carlo() -> None:
    """An (ε0 = 1, δ = 0.005)-DP release, m = 1000, 5 + 5 guesses: the δ-aware bound exceeds ε0 in at most
    5 % + 3 se of 300 runs, while the bound that ignores δ exceeds it in more than 15 % (measured: 0 % and 27 %)."""
    rng, n, with_delta, without = np.random.default_rng(1), 300, 0, 0
    for _ in range(n):
        scores, s = _randomized_response_scores(rng, 1000, 1.0, 0.005)
        r, v = guess_counts(scores, s, 5, 5)
        with_delta += epsilon_lower_bound(1000, r, v, 0.005, 0.05) > 1.0
        without += epsilon_lower_bound(1000, r, v, 0.0, 0.05) > 1.0
    assert with_delta / n <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)
    assert without / n > 0.15


def test_guess_counts_and_grid() -> None:
    scores, inc = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.0]), np.array([1, 0, 1, 0, 0, 1], bool)
    assert guess_counts(scores, inc, 2, 0) == (2, 1)
    assert guess_counts(scores, inc, 1, 2) == (3, 2)  # top: 5 (in ✓); bottom: 0 (in ✗), 1 (out ✓)
    assert guess_counts(scores, inc, 3, 3) == (6, 4)  # top 5 ✓ 4 ✗ 3 ✓; bottom 0 ✗ 1 ✓ 2 ✓
    with pytest.raises(ValueError, match="finite"):
        guess_counts(np.array([0.0, np.nan]), np.array([True, False]), 1, 0)
    grid = guess_grid(1000)
    assert (500, 500) in grid and (5, 0) in grid and all(kp + km <= 1000 for kp, km in grid)


@pytest.mark.parametrize("call,match", [
    (lambda: p_value(10, 11, 1, 1.0, 0.0), "r \\(guesses\\)"),
    (lambda: p_value(10, 5, 6, 1.0, 0.0), "v \\(correct guesses\\)"),
    (lambda: p_value(10, 5, 2, -1.0, 0.0), "epsilon"),
    (lambda: p_value(10, 5, 2, 1.0, 1.5), "delta"),
    (lambda: epsilon_lower_bound(10, 5, 2, 0.0, 1.0), "significance"),
    (lambda: AuditConfig.checked(canaries=5), "canaries"),
    (lambda: AuditConfig.checked(canaries=100, dim=50), "dim"),
    (lambda: AuditConfig.checked(canary_scale=0.5), "canary_scale"),
    (lambda: AuditConfig.checked(noise_multiplier=0.0), "noise_multiplier"),
    (lambda: AuditConfig.checked(confidence=1.0), "confidence"),
    (lambda: AuditConfig.checked(confidence="high"), "confidence"),
    (lambda: AuditConfig.checked(canaries=10**5, canary_width=1000), "canary_width"),
    (lambda: AuditConfig.checked(canaries=10**5, kind="input"), "canaries × dim"),
    (lambda: AuditConfig.checked(score="loss"), "score"),
    (lambda: AuditConfig.checked(kind="output"), "kind"),
])
def test_bad_input_names_the_parameter(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------------------------------------- the run
def test_canaries_go_through_the_optimizers_clipping() -> None:
    """σ ≈ 0, q = 1, T = 1: an included canary's update is its clipped gradient, ℓp norm ≤ C (Opacus's factor
    C/(‖g‖ + 1e-6)); with clipping skipped (test-only hook) it is the raw gradient, canary_scale · C."""
    cfg = AuditConfig.checked(beta=1.5, noise_multiplier=1e-6, sample_rate=1.0, steps=1, canaries=20, canary_width=4,
                              canary_scale=10.0, seed=3)
    honest = run_canaries(cfg)
    inc = honest["included"]

    def block_norms(updates: np.ndarray) -> np.ndarray:  # ‖U restricted to B_i‖_p per canary
        return np.linalg.norm(updates[: 20 * 4].reshape(20, 4), ord=1.5, axis=1)

    norms = block_norms(honest["updates"])
    assert 0 < inc.sum() < 20 and np.all(norms[inc] <= 1.0) and np.allclose(norms[inc], 1.0, atol=1e-4)
    assert np.allclose(norms[~inc], 0.0, atol=1e-4)
    scores = canary_scores(cfg, honest["updates"])  # ⟨u_i, C u_i⟩ = C ‖u_i‖_2² = k^(1 − 2/p) for the included
    assert np.allclose(scores[inc], 4 ** (1 - 2 / 1.5), atol=1e-4)
    broken = run_canaries(cfg, optimizer_class=BrokenGGDPOptimizer, optimizer_kwargs={"test_skip_clipping": True})
    assert np.allclose(block_norms(broken["updates"])[inc], 10.0, rtol=1e-5)


def test_noise_hook_scales_the_noise_only() -> None:
    """No canary included (q tiny, T = 1 is not enough: use the excluded canaries' coordinates): the excluded
    coordinates carry noise only, and the test-only noise scale multiplies their spread by 0.1."""
    cfg = AuditConfig.checked(noise_multiplier=1.0, sample_rate=0.05, steps=1, canaries=2000, seed=5)
    honest = run_canaries(cfg)["updates"]
    broken = run_canaries(cfg, optimizer_class=BrokenGGDPOptimizer, optimizer_kwargs={"test_noise_scale": 0.1})
    out = ~run_canaries(cfg)["included"]
    ratio = np.std(broken["updates"][out]) / np.std(honest[out])
    assert ratio == pytest.approx(0.1, rel=0.05)


@pytest.mark.parametrize("beta,p,k,q", [(1.0, 1.0, 1, 0.05), (1.5, 2.0, 3, 0.2), (3.0, 3.0, 2, 1.0)])
def test_likelihood_score_is_the_gg_density_ratio(beta: float, p: float, k: int, q: float) -> None:
    """The per-step score log(1 − q + q Π_j f(y_j − μ)/f(y_j)) against scipy's gennorm density (scale σC·β^{1/β}:
    density ∝ exp(−|x|^β / (β (σC)^β))), shared code: none."""
    from scipy import stats

    from opacus_gg.audit.canaries import _step_log_likelihood_ratio

    cfg = AuditConfig.checked(beta=beta, clip_norm_p=p, noise_multiplier=0.7, sample_rate=q, canaries=10,
                              canary_width=k, max_grad_norm=1.3)
    y = np.random.default_rng(4).normal(0, 2, size=10 * k)
    mu = 1.3 * k ** (-1 / p)
    law = stats.gennorm(beta, scale=0.7 * 1.3 * beta ** (1 / beta))
    ratio = np.exp((law.logpdf(y - mu) - law.logpdf(y)).reshape(10, k).sum(axis=1))
    expected = np.log(1 - q + q * ratio)
    got = _step_log_likelihood_ratio(cfg, torch.tensor(y))
    assert np.allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_roc_points_and_the_epsilon_delta_bound() -> None:
    roc = roc_points(np.array([3.0, 2.0, 2.0, 1.0]), np.array([True, False, True, False]))
    assert roc["fpr"].tolist() == [0.0, 0.0, 0.5, 1.0] and roc["tpr"].tolist() == [0.0, 0.5, 1.0, 1.0]
    f = np.linspace(0, 1, 101)
    tpr = epsilon_delta_tpr(f, 1.0, 1e-3)
    assert np.all(tpr >= f - 1e-12) and np.all(tpr <= 1) and tpr[0] == pytest.approx(1e-3)
    assert np.all(np.diff(tpr) >= -1e-12) and np.all(epsilon_delta_tpr(f, 0.0, 0.0) == pytest.approx(f))
    assert np.all(epsilon_delta_tpr(f, 2.0, 1e-3) >= tpr)


# ------------------------------------------------------------------------------------- (a), (b), (c)
SETTINGS_A = [(1.0, 1.0), (1.0, 2.0), (1.5, 1.5), (1.5, 2.0), (2.0, 2.0), (3.0, 3.0), (3.0, 2.0)]


@functools.lru_cache(maxsize=None)
def _proven(beta: float, p: float) -> float:
    """The proven ε of the test configuration (computed once per (β, p) for both scores)."""
    return proven_epsilon(AuditConfig.checked(beta=beta, clip_norm_p=p, **TEST_SETTING))


@pytest.mark.parametrize("score", ["inner", "likelihood"])
@pytest.mark.parametrize("beta,p", SETTINGS_A)
def test_honest_engine_audits_below_its_proven_epsilon(beta: float, p: float, score: str) -> None:
    """(a) β ∈ {1, 1.5, 2, 3}, ℓβ and ℓ2 clipping, both scores, fixed seed: 0 ≤ ε_L ≤ proven ε."""
    cfg = AuditConfig.checked(beta=beta, clip_norm_p=p, score=score, **TEST_SETTING)
    res = audit(cfg, epsilon_proven=_proven(beta, p))
    assert 0.0 <= res.epsilon_audit_lower <= res.epsilon_proven, (res.bound, res.epsilon_proven)
    assert res.bound.guesses == res.bound.k_plus + res.bound.k_minus and 0 <= res.bound.correct <= res.bound.guesses


@pytest.mark.parametrize("beta,p", [(3.0, 3.0), (1.0, 2.0)])
def test_wide_canaries_audit_below_the_proven_epsilon_in_their_dimension(beta: float, p: float) -> None:
    """(a) canaries spread over k = 16 coordinates (d = 16000; for β > 2 the spread shift is the stronger one),
    likelihood score: 0 ≤ ε_L ≤ the proven ε at d = 16000."""
    res = audit(AuditConfig.checked(beta=beta, clip_norm_p=p, canary_width=16, score="likelihood", **TEST_SETTING))
    assert 0.0 <= res.epsilon_audit_lower <= res.epsilon_proven, (res.bound, res.epsilon_proven)


@pytest.mark.parametrize("beta,broken", [
    (2.0, {"test_noise_scale": 0.1}),
    (2.0, {"test_skip_clipping": True}),
    (2.0, {"test_noise_scale": 0.1, "test_skip_clipping": True}),
    (1.5, {"test_noise_scale": 0.1}),
    (1.0, {"test_skip_clipping": True}),
])
@pytest.mark.parametrize("score", ["inner", "likelihood"])
def test_broken_engine_is_caught(beta: float, broken: dict, score: str) -> None:
    """(b) noise scaled by 0.1 or clipping skipped (the test-only hooks of BrokenGGDPOptimizer), the accountant
    still told σ: the audited ε_L exceeds the claimed (proven-for-σ) ε, with either score."""
    cfg = AuditConfig.checked(beta=beta, score=score, **TEST_SETTING)
    res = audit(cfg, optimizer_class=BrokenGGDPOptimizer, optimizer_kwargs=broken)
    assert res.epsilon_audit_lower > res.epsilon_proven, (res.bound, res.epsilon_proven)
    assert res.broken == broken


@pytest.mark.parametrize("beta,p,score", [(2.0, 2.0, "inner"), (1.5, 2.0, "likelihood"), (3.0, 3.0, "likelihood")])
def test_input_canaries_through_the_engine_audit_below_its_epsilon(beta: float, p: float, score: str) -> None:
    """(a) with input canaries through GGPrivacyEngine.make_private: ε_L ≤ the ε the engine reports, and that ε
    is the proven ε of (σ, q, T, β, d, p) (the engine accounted exactly T Poisson steps at q)."""
    cfg = AuditConfig.checked(beta=beta, clip_norm_p=p, score=score, kind="input", **TEST_SETTING)
    res = audit(cfg)
    assert 0.0 <= res.epsilon_audit_lower <= res.epsilon_proven
    assert res.epsilon_proven == _proven(beta, p)


@pytest.mark.parametrize("broken", [{"test_noise_scale": 0.1}, {"test_skip_clipping": True}])
def test_broken_engine_is_caught_with_input_canaries(broken: dict) -> None:
    """(b) the engine's make_private handing out the broken optimizer: ε_L > the ε it reports."""
    res = audit(AuditConfig.checked(kind="input", **TEST_SETTING), optimizer_class=BrokenGGDPOptimizer,
                optimizer_kwargs=broken)
    assert res.epsilon_audit_lower > res.epsilon_proven, (res.bound, res.epsilon_proven)


def test_input_canaries_need_q_one_over_an_integer() -> None:
    with pytest.raises(ValueError, match="1/L"):
        audit(AuditConfig.checked(kind="input", canaries=100, sample_rate=0.3, steps=2))


def test_test_configuration_is_fast() -> None:
    """(c) one audit of the test configuration (canary run, bound and proven ε) on ≤ 2 threads takes ≤ 10 s, so the
    module's 31 audits fit in 5 min on 2 cores (measured: about 1–3 s each, the whole module about 1 min)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(min(2, threads))
    try:
        t0 = time.perf_counter()
        audit(AuditConfig.checked(beta=1.5, clip_norm_p=2.0, score="likelihood", **TEST_SETTING))
        assert time.perf_counter() - t0 <= 10.0
    finally:
        torch.set_num_threads(threads)


def test_proven_epsilon_is_the_accountants() -> None:
    from opacus_gg.accountants import compute_epsilon

    cfg = AuditConfig.checked(**TEST_SETTING)
    rep = compute_epsilon(noise_multiplier=2.0, sample_rate=0.05, steps=100, delta=1e-5, beta=2.0, dim=1000)
    assert proven_epsilon(cfg) == rep.epsilon and rep.certified


def _above_the_curve_beyond_sampling(result, report, alpha: float = 1e-3) -> float:
    """The largest excess of an empirical ROC point over the proven curve after the DKW slack: Dirac canaries on
    their own coordinates give i.i.d. scores given the inclusions, so (Massart's one-sided DKW, probability ≥ 1 − α
    each) TPR̂(t) ≤ TPR(t) + e_in and FPR(t) ≤ FPR̂(t) + e_out, e_n = √(ln(1/α) / 2n), at every threshold t; with
    TPR(t) ≤ f(FPR(t)) and f increasing, an honest engine has TPR̂ ≤ f(min(1, FPR̂ + e_out)) + e_in everywhere."""
    n_in, n_out = int(result.included.sum()), int((~result.included).sum())
    e_in, e_out = (math.sqrt(math.log(1 / alpha) / (2 * n)) for n in (n_in, n_out))
    return float(np.max(result.tpr - report.tpr_upper(np.minimum(1.0, result.fpr + e_out)) - e_in))


def test_operating_points_lie_under_the_proven_curve_and_the_figure_draws_them(tmp_path: Path) -> None:
    """The audit's figure is the trade-off figure: its curve is the accountant's for the audited setting (same ε),
    the honest engine's ROC lies under it up to sampling (DKW), the broken engine's (noise × 0.1) far above."""
    cfg = AuditConfig.checked(**TEST_SETTING)
    rep = proven_tradeoff(cfg)
    assert rep.epsilon == proven_epsilon(cfg)
    honest = audit(cfg, epsilon_proven=rep.epsilon)
    broken = audit(cfg, optimizer_class=BrokenGGDPOptimizer, optimizer_kwargs={"test_noise_scale": 0.1},
                   epsilon_proven=rep.epsilon)
    assert _above_the_curve_beyond_sampling(honest, rep) <= 0 < 0.3 < _above_the_curve_beyond_sampling(broken, rep)
    png = tmp_path / "audit.png"
    assert plot_audit([honest, broken], png, rep) == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="one mechanism"):
        plot_audit([honest, dataclasses.replace(honest, config=dataclasses.replace(cfg, steps=50))], png, rep)


# ----------------------------------------------------------------------------------------------- the CLI
def test_cli_json_has_both_epsilons_and_the_operating_points(tmp_path: Path, cli) -> None:
    png = tmp_path / "audit.png"
    code, out, err = cli(["audit", "--canaries", "200", "--steps", "50", "--json", "--plot", str(png)])
    assert code == 0, err
    rec = json.loads(out)
    assert 0 <= rec["epsilon_audit_lower"] <= rec["epsilon_proven"] and rec["epsilon_proven_scope"] == "proven"
    fpr, tpr = rec["operating_points"]["fpr"], rec["operating_points"]["tpr"]
    assert len(fpr) == len(tpr) >= 2 and fpr[0] == tpr[0] == 0 and fpr[-1] == tpr[-1] == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_text_rounds_each_bound_in_its_safe_direction(cli) -> None:
    code, out, err = cli(["audit", "--canaries", "200", "--steps", "50"])
    assert code == 0, err
    assert out.startswith("audited epsilon >= ") and "proven epsilon  <= " in out


@pytest.mark.parametrize("argv,fragment", [
    (["--canaries", "5"], "--canaries"),
    (["--canaries", "100", "--dim", "50"], "--dim"),
    (["--confidence", "1.5"], "--confidence"),
    (["--noise-multiplier", "0"], "--noise-multiplier"),
    (["--beta", "0.5"], "--beta"),
    (["--sample-rate", "2"], "--sample-rate"),
    (["--seed", "-1"], "--seed"),
    (["--canary-scale", "0.5"], "--canary-scale"),
    (["--score", "loss"], "--score"),
])
def test_cli_bad_input_is_one_line_and_exit_2(argv, fragment: str, cli) -> None:
    code, out, err = cli(["audit", *argv])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and fragment in err, err
