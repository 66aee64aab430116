"""Appendix D.1 simulated histograms and GGNMax label-accuracy experiments."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from opacus_gg.experiments.figures.pate_experiments import (
    accuracy_vs_beta,
    label_accuracy,
    load_votes,
    plot_accuracy_vs_beta,
    simulate_histograms,
)


def test_two_class_histograms_follow_appendix_d1():
    h = simulate_histograms(50, 2, total_votes=1000, gap_range=(0.001, 0.2))
    assert h.votes.shape == (50, 2)
    np.testing.assert_allclose(h.votes.sum(axis=1), 1000.0)
    np.testing.assert_allclose(h.votes[:, 1], h.votes[:, 0] * (1 - h.gaps))
    np.testing.assert_allclose(h.gaps, np.linspace(0.001, 0.2, 50))
    assert (h.labels == 0).all() and (np.argmax(h.votes, axis=1) == 0).all()


def test_many_class_histograms_follow_appendix_d1():
    h = simulate_histograms(200, 25, seed=3)
    v = h.votes
    np.testing.assert_allclose(v.sum(axis=1), 1000.0)
    np.testing.assert_allclose(v[:, 1], v[:, 0] * (1 - h.gaps))
    np.testing.assert_allclose(v[:, 2], 0.95 * v[:, 1])
    np.testing.assert_allclose((25 - 3) * v[:, 2] / 2 + v[:, 2] + v[:, 1] + v[:, 0], 1000.0)
    mid = v[:, 3:24]
    assert np.all(mid == np.round(mid)) and np.all(mid >= 0) and np.all(mid <= v[:, 2:3])
    assert np.all(v[:, 24] >= 0) and np.all(v[:, 24] <= v[:, 1])
    assert (np.argmax(v, axis=1) == 0).all()
    np.testing.assert_array_equal(simulate_histograms(200, 25, seed=3).votes, v)
    assert not np.array_equal(simulate_histograms(200, 25, seed=4).votes, v)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_histograms=0), "n_histograms"), (dict(n_classes=1), "n_classes"),
    (dict(gap_range=(0.0, 0.2)), "gap_range"), (dict(total_votes=-5.0), "total_votes"),
])
def test_simulation_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        simulate_histograms(**kwargs)


def test_two_class_gaussian_accuracy_matches_exact_value():
    """2 classes, β = 2: P(correct) = Φ(gap / (σ√2)) per histogram; the Monte Carlo mean must agree."""
    h = simulate_histograms(100, 2)
    sigma, trials = 20.0, 400
    acc, se, per_query = label_accuracy(h.votes, h.labels, beta=2.0, noise_multiplier=sigma, trials=trials,
                                        generator=torch.Generator().manual_seed(0))
    exact = stats.norm.cdf((h.votes[:, 0] - h.votes[:, 1]) / (sigma * math.sqrt(2)))
    # binomial s.d. of the grand mean over 100 × 400 independent draws
    sd = math.sqrt(np.mean(exact * (1 - exact)) / (100 * trials))
    assert abs(acc - exact.mean()) < 4.5 * sd
    assert per_query.shape == (100,)


@pytest.mark.parametrize("n_classes", [3, 4, 5, 10])
def test_small_class_counts_are_well_defined(n_classes):
    v = simulate_histograms(100, n_classes, seed=0).votes
    np.testing.assert_allclose(v.sum(axis=1), 1000.0)
    assert np.all(v >= 0) and (np.argmax(v, axis=1) == 0).all()
    if n_classes >= 4:
        assert np.all(v[:, -1] <= v[:, 1])
        assert abs(np.mean(v[:, -1] / v[:, 2]) - 0.5) < 0.2  # the remainder averages x2/2


def test_label_accuracy_rises_as_sigma_falls():
    h = simulate_histograms(200, 25, seed=1)
    accs = []
    for sigma in [40.0, 10.0, 2.0]:
        a, se, _ = label_accuracy(h.votes, h.labels, beta=1.5, noise_multiplier=sigma, trials=20,
                                  generator=torch.Generator().manual_seed(7))
        accs.append((a, se))
    for (a_hi_noise, se1), (a_lo_noise, se2) in zip(accs, accs[1:]):
        assert a_lo_noise - a_hi_noise > 3 * math.hypot(se1, se2)


def test_label_accuracy_validates_labels_and_trials():
    votes = np.array([[5.0, 1.0], [0.0, 3.0]])
    with pytest.raises(ValueError, match="one entry per query"):
        label_accuracy(votes, [0], beta=2.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="class indices"):
        label_accuracy(votes, [0, 2], beta=2.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="trials"):
        label_accuracy(votes, None, beta=2.0, noise_multiplier=1.0, trials=0)
    acc, _, _ = label_accuracy(votes, None, beta=2.0, noise_multiplier=1e-6)
    assert acc == 1.0


def test_load_votes_checks_file_and_contents(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_votes(str(tmp_path / "missing.npy"))
    np.save(tmp_path / "neg.npy", np.array([[1.0, -2.0]]))
    with pytest.raises(ValueError, match="non-negative"):
        load_votes(str(tmp_path / "neg.npy"))
    np.save(tmp_path / "ok.npy", np.array([[1, 2], [3, 0]]))
    np.save(tmp_path / "y.npy", np.array([1, 0]))
    v, y = load_votes(str(tmp_path / "ok.npy"), str(tmp_path / "y.npy"))
    assert v.shape == (2, 2) and y.tolist() == [1, 0]


def test_accuracy_vs_beta_uses_certified_sigma_and_plots(tmp_path):
    from opacus_gg.pate import pate_epsilon

    h = simulate_histograms(60, 2, seed=0)
    rows, per_query = accuracy_vs_beta(h.votes, h.labels, betas=[1.0, 2.0], target_epsilon=1.0, target_delta=1e-5,
                                       trials=10, seed=0)
    assert [r["beta"] for r in rows] == [1.0, 2.0]
    for r in rows:
        assert pate_epsilon(noise_multiplier=r["noise_multiplier"], n_queries=1, delta=1e-5,
                            beta=r["beta"]).epsilon <= 1.0
        assert 0.5 <= r["accuracy"] <= 1.0
    png = tmp_path / "acc.png"
    plot_accuracy_vs_beta(rows, str(png), per_query=per_query, gaps=h.gaps)
    assert png.stat().st_size > 1000
