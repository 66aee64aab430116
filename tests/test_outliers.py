"""Outlier probabilities (Appendix B.5): closed forms, Monte Carlo agreement, calibration at equal (ε, δ)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from opacus_gg.accountants import compute_epsilon
from opacus_gg.experiments.figures.outliers import (
    outlier_curve,
    outlier_probability,
    outlier_probability_mc,
    plot_outlier_curves,
    write_csv,
)


def test_gaussian_and_laplace_closed_forms():
    t = np.array([0.5, 1.0, 2.0, 4.0])
    np.testing.assert_allclose(outlier_probability(t, 2.0, 1.5), [math.erfc(x / (1.5 * math.sqrt(2))) for x in t],
                               rtol=1e-12)  # closed-form tail probability: float64 round-off
    # closed-form tail probability: float64 round-off
    np.testing.assert_allclose(outlier_probability(t, 1.0, 1.5), np.exp(-t / 1.5), rtol=1e-12)
    # closed-form tail probability: float64 round-off
    np.testing.assert_allclose(outlier_probability(t, 1.0, 0.5, max_grad_norm=3.0), np.exp(-t / 1.5), rtol=1e-12)
    assert outlier_probability(0.0, 2.7, 1.0) == pytest.approx(1.0)


def test_any_of_d_coordinates():
    p = outlier_probability(2.0, 1.5, 1.0)
    # 1 − (1 − p)^d in closed form: float64 round-off
    assert outlier_probability(2.0, 1.5, 1.0, dim=10) == pytest.approx(1 - (1 - p) ** 10, rel=1e-12)
    tiny = outlier_probability(60.0, 2.0, 1.0, dim=1000)  # keeps precision far below 1e-16
    # erfc in the far tail: scipy's relative accuracy ~1e-15, 1e-9 leaves room for the log-space path
    assert tiny == pytest.approx(1000 * math.erfc(60 / math.sqrt(2)), rel=1e-9)


@pytest.mark.parametrize("beta, tau", [(1.0, 2.0), (1.5, 1.0), (2.0, 2.5), (3.0, 1.5), (4.0, 1.2)])
def test_exact_probability_matches_monte_carlo(beta, tau):
    # 99.999% Clopper–Pearson intervals: five cases, so a false alarm has probability ≈ 5e-5 per run
    # (at 99.9%, one fixed seed of the exact Ziggurat sampler sat at z = 3.3 by chance)
    exact = float(outlier_probability(tau, beta, 1.0))
    p_hat, lo, hi = outlier_probability_mc(tau, beta, 1.0, n_samples=400_000, confidence=0.99999,
                                           generator=torch.Generator().manual_seed(int(10 * beta)))
    assert lo <= exact <= hi, (exact, p_hat, lo, hi)


def test_monte_carlo_interval_has_power():
    """A 5% error in the scale is detected: the check above can fail."""
    exact_wrong = float(outlier_probability(1.5, 3.0, 1.05))
    _, lo, hi = outlier_probability_mc(1.5, 3.0, 1.0, n_samples=400_000, confidence=0.99999,
                                       generator=torch.Generator().manual_seed(30))
    assert not (lo <= exact_wrong <= hi)


@pytest.mark.parametrize("kwargs, match", [
    (dict(threshold=-1.0, beta=2.0, noise_multiplier=1.0), "threshold"),
    (dict(threshold=1.0, beta=0.5, noise_multiplier=1.0), "beta"),
    (dict(threshold=1.0, beta=2.0, noise_multiplier=0.0), "noise_multiplier"),
    (dict(threshold=1.0, beta=2.0, noise_multiplier=1.0, dim=0), "dim"),
])
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        outlier_probability(**kwargs)


def test_outlier_curve_at_equal_privacy(tmp_path):
    rows = outlier_curve(betas=[1.0, 2.0], thresholds=[1.0, 2.0, 4.0], target_epsilon=1.5, target_delta=1e-5)
    assert len(rows) == 6
    for r in rows[::3]:  # one σ per β
        eps = compute_epsilon(noise_multiplier=r.noise_multiplier, sample_rate=1.0, steps=1, delta=1e-5,
                              beta=r.beta, dim=1).epsilon
        assert eps <= 1.5
    for r in rows:
        assert r.p_outlier == pytest.approx(float(outlier_probability(r.threshold, r.beta, r.noise_multiplier)))
    for b in (1.0, 2.0):  # monotone in τ
        ps = [r.p_outlier for r in rows if r.beta == b]
        assert ps[0] > ps[1] > ps[2]
    write_csv(rows, str(tmp_path / "o.csv"))
    assert (tmp_path / "o.csv").read_text().splitlines()[0].startswith("beta,noise_multiplier")
    plot_outlier_curves({"GG": rows}, str(tmp_path / "o.png"))
    assert (tmp_path / "o.png").stat().st_size > 1000
