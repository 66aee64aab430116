"""The proven trade-off curve (:mod:`opacus_gg.accountants.tradeoff`, docs/what_epsilon_means.md).

Soundness against references that share no code with the library: the Gaussian's G_μ in mpmath (β = 2, q = 1,
μ = √T/σ: never below and within 1e-6); the Laplace pair's closed-form curve (β = 1, d = 1, T = 1) and, composed, the
rigorous lower bound of tests/lower_bound_oracle.py (pointwise-rounded-down losses, exact convolution); subsampled
settings, including the Rényi / dominating-Gaussian curve over the ℓp ball, above that lower bound. The μ-GDP claim
is checked where the proof checks it (every piece end, in mpmath) and on a dense grid, and shown to be the least μ.
"""

from __future__ import annotations

import math
import re

import mpmath
import numpy as np
import pytest

from lower_bound_oracle import tpr_lower
from opacus_gg.accountants import GGPRVAccountant
from opacus_gg.accountants.api import proven_epsilon_history
from opacus_gg.accountants.checks import AccountingError
from opacus_gg.accountants.tradeoff import (TradeoffReport, compute_tradeoff, compute_tradeoff_history,
                                            gaussian_mu_for)

FPR = np.array([1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.05, 0.1, 0.3, 0.5, 0.9, 0.999])


def _g_mu(alpha: float, mu: float) -> mpmath.mpf:
    """Φ(Φ^{−1}(α) + μ) in 40 digits (Φ^{−1} by mpmath's root finder: no scipy)."""
    with mpmath.workdps(40):
        x = mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(alpha) - 1)
        return mpmath.ncdf(x + mpmath.mpf(mu))


@pytest.mark.parametrize("sigma,steps,p,dim", [(1.0, 4, 2.0, 1), (0.7, 10, 2.0, 1), (3.0, 1, 4.0, 16)])
def test_full_batch_gaussian_curve_is_g_mu_within_1e6_and_never_below(sigma, steps, p, dim):
    mu_exact = math.sqrt(steps) / sigma * (dim ** (0.5 - 1.0 / p) if p > 2 else 1.0)
    rep = compute_tradeoff(noise_multiplier=sigma, sample_rate=1.0, steps=steps, delta=1e-5, clip_norm_p=p, dim=dim)
    assert rep.sources == ("gaussian",)
    alphas = np.concatenate((np.geomspace(1e-12, 0.5, 60), 1.0 - np.geomspace(1e-9, 0.5, 30)))
    ours = rep.tpr_upper(alphas)
    exact = np.array([float(_g_mu(a, mu_exact)) for a in alphas])
    assert np.all(ours >= exact)
    assert np.max(ours - exact) <= 1e-6
    assert rep.mu_gdp >= mu_exact and rep.mu_gdp <= mu_exact * (1 + 1e-12)
    assert rep.mu_gdp_fpr_range == (0.0, 1.0)


@pytest.mark.parametrize("sigma,steps", [(1.0, 4), (2.0, 1)])
def test_prv_route_at_full_batch_gaussian_is_g_mu_within_1e6_and_never_below(sigma, steps):
    # the PRV lines (both directions, one composition each) where the closed form is known: the PRV machinery itself
    from opacus_gg.accountants.history import normalize_history
    from opacus_gg.accountants.tradeoff import _add_lines, _prv_by_direction

    mu = math.sqrt(steps) / sigma
    acc = {}
    _add_lines(acc, _prv_by_direction(normalize_history([(sigma, 1.0, steps)]), 0.01, 1e-8, 1.0))
    lines = {r: (np.concatenate([s for s, _ in v]), np.concatenate([c for _, c in v])) for r, v in acc.items()}
    rep = TradeoffReport(epsilon=1.0, delta=1e-5, sources=("prv",), lines=lines)
    alphas = np.concatenate((np.geomspace(1e-6, 0.5, 50), 1.0 - np.geomspace(1e-6, 0.5, 20)))
    ours = rep.tpr_upper(alphas)
    exact = np.array([float(_g_mu(a, mu)) for a in alphas])
    assert np.all(ours >= exact) and np.max(ours - exact) <= 1e-6
    assert mu <= rep.mu_gdp <= mu * (1 + 1e-3)  # the grid: μ = 0.50007 for 0.5 at σ = 2


def _laplace_tpr(alpha: np.ndarray, eps0: float) -> np.ndarray:
    r"""The exact largest TPR of (Lap(1, b), Lap(0, b)) at FPR α, ε₀ = 1/b: the threshold test x > c (the likelihood
    ratio is monotone) gives e^{ε₀}α (α ≤ e^{−ε₀}/2), 1 − e^{−ε₀}/(4α) (α ≤ 1/2), 1 − e^{−ε₀}(1 − α)."""
    a = np.asarray(alpha)
    return np.where(a <= math.exp(-eps0) / 2, math.exp(eps0) * a,
                    np.where(a <= 0.5, 1 - math.exp(-eps0) / (4 * a), 1 - math.exp(-eps0) * (1 - a)))


@pytest.mark.parametrize("sigma", [0.5, 2.0])
def test_laplace_one_step_is_the_closed_form_curve_from_above(sigma):
    rep = compute_tradeoff(noise_multiplier=sigma, sample_rate=1.0, steps=1, delta=1e-5, beta=1.0, dim=1)
    assert rep.sources == ("prv",)
    ours = rep.tpr_upper(FPR)
    exact = _laplace_tpr(FPR, 1.0 / sigma)
    assert np.all(ours >= exact)
    assert np.all(ours <= exact * 1.005 + 1e-8)  # the accountant's grid (mesh 0.004·ε) and δ_error/4 floor


@pytest.mark.parametrize("steps", [2, 5])
def test_composed_laplace_is_above_the_rigorous_lower_bound_and_close(steps):
    rep = compute_tradeoff(noise_multiplier=2.0, sample_rate=1.0, steps=steps, delta=1e-5, beta=1.0, dim=1)
    ours = rep.tpr_upper(FPR)
    lower = tpr_lower([(2.0, 1.0, steps, 1.0)], FPR)
    assert np.all(ours >= lower)
    assert np.all(ours <= lower * 1.01 + 1e-8)


@pytest.mark.parametrize("seg,shifts,gap", [
    ((1.0, 0.2, 20, 2.0, 1, 2.0), [(1.0,)], 0.05),
    ((2.0, 0.1, 10, 1.0, 1, 1.0), [(1.0,)], 0.01),
    ((1.5, 0.2, 10, 1.5, 1, 1.5), [(1.0,)], 0.01),
    # over the ℓ2 ball in d = 4: the Rényi bound and the dominating Gaussian; one coordinate and the equal spread
    ((1.0, 0.2, 10, 1.5, 4, 2.0), [(1.0,), (0.5, 0.5, 0.5, 0.5)], None),
    # β = p = 3 in d = 16, where the Rényi orders in (1, 2) set the curve: one coordinate and the equal spread
    ((0.7, 0.05, 20, 3.0, 16, 3.0), [(1.0,), (16 ** (-1 / 3),) * 16], None),
])
def test_subsampled_curve_is_above_the_independent_lower_bound(seg, shifts, gap):
    rep = compute_tradeoff_history([seg], 1e-5)
    ours = rep.tpr_upper(FPR)
    for shift in shifts:
        lower = tpr_lower([seg[:4]], FPR, shift=shift)
        assert np.all(ours >= lower)
        if gap is not None:  # where the PRV covers every shift: tight to the accountant's and the oracle's grids
            assert np.all(ours <= lower * (1 + gap) + 1e-8)


def test_ball_curve_uses_the_renyi_bound_and_the_dominating_gaussian_and_is_labelled():
    rep = compute_tradeoff(noise_multiplier=1.0, sample_rate=0.2, steps=10, delta=1e-5, beta=1.5, dim=4,
                           clip_norm_p=2.0)
    assert rep.sources == ("rdp", "prv_gaussian")
    assert "Rényi" in rep.sources_text and "Lemma N" in rep.sources_text
    # the union of two proven line sets is below each alone
    both = rep.tpr_upper(FPR)
    for keep in ("rdp", "prv_gaussian"):
        one = _only(rep, keep)
        assert np.all(both <= one.tpr_upper(FPR))


def _only(rep: TradeoffReport, source: str) -> TradeoffReport:
    """The report recomputed from one source's lines (the same composition: the rdp lines come first)."""
    from opacus_gg.accountants.history import normalize_history
    from opacus_gg.accountants.tradeoff import _add_lines, _prv_by_direction, _rdp_by_direction
    from opacus_gg.accountants.api import gaussian_dominated_history

    segs = normalize_history([(1.0, 0.2, 10, 1.5, 4, 2.0)])
    acc = {}
    if source == "rdp":
        _add_lines(acc, _rdp_by_direction(segs))
    else:
        _add_lines(acc, _prv_by_direction(gaussian_dominated_history(segs), 0.01, 1e-8, rep.epsilon))
    lines = {r: (np.concatenate([s for s, _ in v]), np.concatenate([c for _, c in v])) for r, v in acc.items()}
    return TradeoffReport(epsilon=rep.epsilon, delta=rep.delta, sources=(source,), lines=lines)


def test_curve_is_a_tradeoff_bound_monotone_concave_and_above_the_diagonal():
    rep = compute_tradeoff(noise_multiplier=1.0, sample_rate=0.05, steps=50, delta=1e-5)
    a = np.linspace(0.0, 1.0, 2001)
    t = rep.tpr_upper(a)
    assert np.all(t >= a) and np.all(t <= 1.0)
    assert np.all(np.diff(t) >= -1e-15)
    # (ε, δ)-DP at the published ε bounds the curve from above: TPR ≤ e^ε α + δ
    assert np.all(t <= np.exp(rep.epsilon) * a + rep.delta + 1e-12)


def test_mu_gdp_dominates_at_every_piece_end_in_mpmath_and_on_a_dense_grid_and_is_the_least():
    rep = compute_tradeoff(noise_multiplier=1.0, sample_rate=0.05, steps=50, delta=1e-5)
    mu = rep.mu_gdp
    assert mu is not None and 0 < mu < 5
    ends, values = rep._piece_ends()
    step = max(1, ends.size // 400)  # mpmath on 400 of them (all are checked in floats by mu_gdp itself)
    worst = min(float(_g_mu(a, mu) - v) for a, v in zip(ends[::step], values[::step]))
    assert worst >= 0.0
    lo, hi = rep.mu_gdp_fpr_range
    dense = np.geomspace(lo, hi, 20001)
    from scipy import special

    assert np.all(rep.tpr_upper(dense) <= special.ndtr(special.ndtri(dense) + mu) * (1 + 1e-9))
    # the least: 0.1 % less fails at some piece end (the end that sets μ, then in mpmath)
    i = int(np.argmax(special.ndtri(values) - special.ndtri(ends)))
    assert float(_g_mu(ends[i], mu * 0.999)) < values[i]
    assert rep.tpr_upper([hi])[0] <= (1 - rep.fpr_min) * (1 + 2e-12) and lo == rep.fpr_min


def test_mu_gdp_is_none_without_noise_and_zero_for_an_empty_history():
    with pytest.warns(UserWarning):
        rep = compute_tradeoff(noise_multiplier=0.0, sample_rate=0.1, steps=3, delta=1e-5)
    assert rep.mu_gdp is None and np.all(rep.tpr_upper(FPR) == 1.0)
    empty = compute_tradeoff_history([], 1e-5)
    assert np.allclose(empty.tpr_upper(FPR), FPR, rtol=1e-11) and empty.mu_gdp == 0.0


def test_epsilon_is_the_proven_epsilon_and_the_gaussian_reference_has_it():
    hist = [(1.0, 0.05, 50, 2.0, 1, 2.0)]
    rep = compute_tradeoff_history(hist, 1e-5)
    assert rep.epsilon == proven_epsilon_history(hist, 1e-5)
    mu = gaussian_mu_for(rep.epsilon, 1e-5)
    from opacus_gg.accountants.full_batch import gaussian_delta

    assert float(gaussian_delta(mu, rep.epsilon)) == pytest.approx(1e-5, rel=1e-9)


def test_bad_fpr_and_arguments_raise_naming_them():
    rep = compute_tradeoff(noise_multiplier=1.0, sample_rate=1.0, steps=1, delta=1e-5)
    with pytest.raises(ValueError, match="fpr"):
        rep.tpr_upper([0.1, 1.5])
    with pytest.raises(ValueError, match="delta"):
        compute_tradeoff(noise_multiplier=1.0, sample_rate=1.0, steps=1, delta=2.0)
    with pytest.raises(ValueError, match="fpr_min"):
        compute_tradeoff_history([(1.0, 1.0, 1)], 1e-5, fpr_min=0.0)


def test_a_bound_below_the_diagonal_is_refused():
    broken = TradeoffReport(epsilon=1.0, delta=1e-5, sources=("prv",),
                            lines={"remove_is_pq": (np.array([0.5]), np.array([0.0]))})
    with pytest.raises(AccountingError, match="diagonal"):
        broken.tpr_upper([0.5])


def test_accountant_and_engine_give_the_same_curve():
    acc = GGPRVAccountant(beta=2.0)
    for _ in range(20):
        acc.step(noise_multiplier=1.0, sample_rate=0.1)
    rep = acc.get_tradeoff(1e-5)
    ref = compute_tradeoff(noise_multiplier=1.0, sample_rate=0.1, steps=20, delta=1e-5)
    assert np.array_equal(rep.tpr_upper(FPR), ref.tpr_upper(FPR)) and rep.mu_gdp == ref.mu_gdp
    acc.poisson_sampling = False
    assert acc.get_tradeoff(1e-5).scope == "shuffled"


def test_engine_answers_with_either_accountant():
    from opacus_gg import GGPrivacyEngine

    ref = compute_tradeoff(noise_multiplier=1.0, sample_rate=0.1, steps=20, delta=1e-5).tpr_upper(FPR)
    for name, entry in (("gg_prv", (1.0, 0.1, 20, 2.0, 1, 2.0)), ("prv", (1.0, 0.1, 20))):
        engine = GGPrivacyEngine(accountant=name)
        engine.accountant.history = [entry]
        assert np.array_equal(engine.get_tradeoff(1e-5).tpr_upper(FPR), ref)


def test_envelope_equals_the_minimum_over_all_lines():
    from opacus_gg.accountants.tradeoff import _envelope, _eval_envelope

    rng = np.random.default_rng(0)
    a = np.concatenate(([0.0, 1.0], rng.uniform(0, 1, 2000)))
    for _ in range(20):
        n = int(rng.integers(1, 400))
        s, c = np.exp(rng.normal(0, 2, n)), rng.uniform(0, 1.2, n)
        s[: n // 4] = np.round(s[: n // 4], 1)  # ties in slope
        direct = np.minimum(1.0, np.min(s[None, :] * a[:, None] + c[None, :], axis=1))
        env = _eval_envelope(_envelope(s, c), a)
        assert np.allclose(env, direct, rtol=2e-12, atol=0) and np.all(env >= direct)


def test_train_summary_line_rounds_up_and_is_absent_without_a_curve():
    from opacus_gg.experiments.train import tradeoff_text

    rep = compute_tradeoff(noise_multiplier=1.0, sample_rate=0.1, steps=20, delta=1e-5)
    line = tradeoff_text(rep.to_dict())
    shown = [float(x) for x in re.findall(r"≤ ([0-9.]+) at FPR", line)]
    assert line.startswith("membership inference: TPR") and len(shown) == 3
    assert all(s >= t for s, t in zip(shown, rep.tpr_upper([1e-3, 1e-2, 0.1])))
    lo, hi = rep.mu_gdp_fpr_range  # μ is claimed on its range only, and the line says which
    assert rep.mu_gdp is not None and f"at every FPR in [{lo:g}, {hi:.7g}]" in line
    assert tradeoff_text({"error": "why"}) is None and tradeoff_text(None) is None


def test_renyi_curve_above_beta_two_reads_the_orders_below_two():
    """β = p = 3, d = 16 (published ε 30.54 at α = 1.52 against 116.75 at integer orders): the curve lies below the
    (ε, δ) line of the published ε, moved up by one step of the Rényi ε grid (ratio 1.0028), at tiny FPR where that
    line is near δ; the integer orders' curve alone does not, and it lies above the new one everywhere."""
    from opacus_gg.accountants.ball_rdp import rdp_ball_curves, rdp_deltas
    from opacus_gg.accountants.history import normalize_history
    from opacus_gg.accountants.renyi import DEFAULT_ORDERS
    from opacus_gg.accountants.tradeoff import RDP_EPSILONS, _add_lines

    seg = (0.7, 0.05, 20, 3.0, 16, 3.0)
    rep = compute_tradeoff_history([seg], 1e-5)
    assert rep.sources == ("rdp",) and rep.epsilon < 31.0
    a = np.geomspace(1e-20, 1e-12, 30)
    line = np.exp(rep.epsilon * 1.003) * a + 1e-5 * (1 + 1e-9)
    assert np.all(rep.tpr_upper(a) <= line)
    curves = rdp_ball_curves(normalize_history([seg]), DEFAULT_ORDERS)
    acc = {}
    _add_lines(acc, {d: (RDP_EPSILONS, rdp_deltas(c, DEFAULT_ORDERS, RDP_EPSILONS)) for d, c in curves.items()})
    lines = {r: (np.concatenate([s for s, _ in v]), np.concatenate([c for _, c in v])) for r, v in acc.items()}
    integer = TradeoffReport(epsilon=rep.epsilon, delta=rep.delta, sources=("rdp",), lines=lines)
    assert np.any(integer.tpr_upper(a) > 10.0 * line)
    assert np.all(rep.tpr_upper(FPR) <= integer.tpr_upper(FPR))
