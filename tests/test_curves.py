"""The privacy curve ε(σ) (Figure 2): rows, CSV, PNG."""

from __future__ import annotations

import csv
import math
from types import SimpleNamespace

import numpy as np
import pytest
from opacus.accountants import PRVAccountant

from opacus_gg.experiments.figures import curves as C


def opacus_gaussian_epsilon(*, noise_multiplier, sample_rate, steps, delta, beta, dim, clip_norm_p, mode,
                            eps_error):
    """A real ε for β = 2 (Opacus's PRV accountant, remove direction), in the EpsilonReport shape."""
    assert beta == 2.0
    acc = PRVAccountant()
    acc.history = [(noise_multiplier, sample_rate, steps)]
    e = acc.get_epsilon(delta, eps_error=eps_error)
    return SimpleNamespace(epsilon=e, epsilon_lower=e - 2 * eps_error, epsilon_estimate=e - eps_error,
                           epsilon_upper=e, certified=True, scope="proven", direction="remove", shape_k=1)


def test_parse_sigma_range_and_lists():
    assert C.parse_sigma_range("0.5:2:4") == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert C.parse_sigma_range("1,2.5") == [1.0, 2.5]
    assert C.parse_float_list("1,1.5,2,3", "betas") == [1.0, 1.5, 2.0, 3.0]
    for bad in ("0.5:2", "a:b:3", "0:1:3", "-1,2", "", "1:2:0"):
        with pytest.raises(ValueError, match="sigmas"):
            C.parse_sigma_range(bad)
    with pytest.raises(ValueError, match="betas"):
        C.parse_float_list("1,,x", "betas")


def test_privacy_curve_rows_decrease_in_sigma():
    sigmas = [0.7, 1.0, 1.5, 2.5]
    rows = C.privacy_curve([2.0], sigmas, delta=1e-5, sample_rate=0.02, steps=50,
                           epsilon_fn=opacus_gaussian_epsilon)
    assert [r["noise_multiplier"] for r in rows] == sigmas
    eps = [r["epsilon"] for r in rows]
    assert all(a > b for a, b in zip(eps, eps[1:]))
    assert rows[0]["paper_sigma"] == pytest.approx(2 * 0.7**2)  # σ_p = β s^β
    assert all(r["certified"] and r["mode"] == "certified" for r in rows)


def test_privacy_curve_bad_input():
    with pytest.raises(ValueError, match="beta"):
        C.privacy_curve([0.5], [1.0], delta=1e-5, epsilon_fn=opacus_gaussian_epsilon)
    with pytest.raises(ValueError, match="sigmas"):
        C.privacy_curve([2.0], [0.0], delta=1e-5, epsilon_fn=opacus_gaussian_epsilon)
    with pytest.raises(ValueError, match="mode"):
        C.privacy_curve([2.0], [1.0], delta=1e-5, mode="exact", epsilon_fn=opacus_gaussian_epsilon)


def test_unbounded_settings_become_inf_not_smaller():
    def failing(**kw):
        raise RuntimeError("Cannot compute epsilon")

    rows = C.privacy_curve([2.0], [1.0], delta=1e-5, epsilon_fn=failing)
    assert rows[0]["epsilon"] == math.inf and "Cannot compute" in rows[0]["error"]


def test_csv_and_png(tmp_path):
    rows = C.privacy_curve([2.0], [0.8, 1.6], delta=1e-5, sample_rate=0.05, steps=20,
                           epsilon_fn=opacus_gaussian_epsilon)
    csv_path = C.write_curve_csv(rows, str(tmp_path / "sub" / "curve.csv"))
    with open(csv_path) as f:
        back = list(csv.DictReader(f))
    assert list(back[0].keys()) == C.CURVE_FIELDS
    assert float(back[1]["epsilon"]) == rows[1]["epsilon"]  # full precision, no rounding
    png = C.plot_privacy_curve(rows, str(tmp_path / "curve.png"), epsilon_line=4.0)
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError):
        C.plot_privacy_curve([], str(tmp_path / "empty.png"))


def test_privacy_curve_with_accountant_certified_and_ordering():
    rows = C.privacy_curve([1.0, 2.0], [1.0, 2.0], delta=1e-5, sample_rate=1.0, steps=1)
    assert len(rows) == 4 and all(r["certified"] for r in rows)
    by = {(r["beta"], r["noise_multiplier"]): r["epsilon"] for r in rows}
    assert by[(1.0, 2.0)] < by[(1.0, 1.0)] and by[(2.0, 2.0)] < by[(2.0, 1.0)]
    # β = 2, q = 1, T = 1: the Gaussian mechanism; Opacus agrees (remove direction, same units)
    ref = opacus_gaussian_epsilon(noise_multiplier=2.0, sample_rate=1.0, steps=1, delta=1e-5, beta=2.0, dim=1,
                                  clip_norm_p=None, mode="certified", eps_error=0.01).epsilon
    assert abs(by[(2.0, 2.0)] - ref) < 0.05
    assert np.isfinite(list(by.values())).all()


def test_paper_curve_error_bars_only_when_asked():
    """Paper mode's rows carry the sampled-PRV ε; its error bars (the lower/upper columns) only with diagnostics,
    around the same ε."""
    import functools
    import warnings

    from opacus_gg.accountants import compute_epsilon

    fn = functools.partial(compute_epsilon, n_samples=100_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # paper mode's NOT-a-guarantee label
        fast = C.privacy_curve([1.5], [1.0], delta=1e-5, mode="paper", epsilon_fn=fn)[0]
        full = C.privacy_curve([1.5], [1.0], delta=1e-5, mode="paper", epsilon_fn=fn, diagnostics=True)[0]
    assert fast["epsilon"] == full["epsilon"] and fast["epsilon_estimate"] == full["epsilon_estimate"]
    assert fast["epsilon_lower"] is None and fast["epsilon_upper"] is None and fast["epsilon_scope"] == "estimate"
    assert full["epsilon_lower"] <= full["epsilon_estimate"] <= full["epsilon"] <= full["epsilon_upper"]
