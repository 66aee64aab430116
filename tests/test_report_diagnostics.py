"""The default report computes what it publishes: the proven ε, bit-identical to the report with diagnostics (the
equal-spread PRV's bracket, worst direction and spread), which it does not compose and does not pretend to have."""

from __future__ import annotations

import warnings

import pytest

from opacus_gg.accountants import GGPRVAccountant, compute_epsilon
from opacus_gg.accountants.api import proven_epsilon_history
from opacus_gg.accountants.report import NOT_COMPUTED

BASE = dict(noise_multiplier=1.0, sample_rate=0.01, steps=100, delta=1e-5)
#: (β, d, p, count σ_c) and the method expected to publish ε: the PRV (β = 2, d = 1; p = ∞), the Rényi bound
#: (β = 1.5 with ℓ2; β = 3), the dominating Gaussian (β near 2), and a count query (the README's d = 2410:
#: test_default_report_never_composes_the_equal_spread_prv; its diagnostics cost a minute)
SETTINGS = [
    ((2.0, 1, None, None), "prv"),
    ((1.5, 10, float("inf"), None), "prv"),
    ((1.5, 50, 2.0, None), "rdp"),
    ((3.0, 8, None, None), "rdp"),
    ((1.9, 10, 2.0, None), "prv_gaussian"),
    ((1.5, 10, 2.0, 2.0), None),
]


def _reports(beta, dim, p, count):
    kw = dict(BASE, beta=beta, dim=dim, clip_norm_p=p, count_noise_multiplier=count)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return compute_epsilon(**kw), compute_epsilon(**kw, diagnostics=True)


@pytest.mark.parametrize("setting,method", SETTINGS)
def test_published_epsilon_is_bit_identical_with_and_without_diagnostics(setting, method):
    fast, full = _reports(*setting)
    assert fast.epsilon == full.epsilon and fast.method == full.method and fast.scope == full.scope == "proven"
    assert method is None or fast.method == method
    beta, dim, p, count = setting
    hist = [(BASE["noise_multiplier"], BASE["sample_rate"], BASE["steps"], beta, dim, p, count)]
    assert proven_epsilon_history(hist, BASE["delta"]) == fast.epsilon  # get_epsilon's path: the same number
    assert full.diagnostics_computed and full.prv_bracket()["upper"] is not None
    if fast.method == "prv":  # the PRV is the published number: its bracket is computed anyway
        assert fast.diagnostics_computed and fast.prv_bracket() == full.prv_bracket()
    else:
        assert fast.proven_bounds() == full.proven_bounds()


@pytest.mark.parametrize("setting", [s for s, m in SETTINGS if m != "prv"])
def test_default_report_says_what_it_did_not_compute(setting):
    fast, full = _reports(*setting)
    assert not fast.diagnostics_computed and fast.details["diagnostics"] == NOT_COMPUTED
    b = fast.prv_bracket()
    assert b["lower"] is b["estimate"] is b["upper"] is None and b["not_computed"] == NOT_COMPUTED
    assert fast.direction is None and fast.shape_k is None and fast.epsilon_equal_spreads is None
    lines = fast.verbose_lines()
    assert any(NOT_COMPUTED in x for x in lines) and not any("worst case" in x or "lower " in x for x in lines)
    assert full.direction in ("add", "remove") and full.shape_k >= 1  # with diagnostics: the real ones
    assert fast.to_dict()["epsilon"] == full.to_dict()["epsilon"]


def test_default_report_never_composes_the_equal_spread_prv(monkeypatch):
    """The equal-spread PRV (the GG segments' composition) is not run at all by default: made to fail, the default
    report and get_epsilon_report are unaffected and silent; with diagnostics the failure is reported."""
    from opacus_gg.accountants import api

    real = api.compose_history

    def failing(segs, *a, **k):
        if any(getattr(s, "beta", 2.0) != 2.0 for s in segs):
            raise AssertionError("the equal-spread PRV was composed")
        return real(segs, *a, **k)

    monkeypatch.setattr(api, "compose_history", failing)
    kw = dict(BASE, beta=1.5, dim=2410, clip_norm_p=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rep = compute_epsilon(**kw)
    acc = GGPRVAccountant(beta=1.5, dim=2410, clip_norm_p=2.0)
    acc.history = [(1.0, 0.01, 100, 1.5, 2410, 2.0)]
    assert acc.get_epsilon_report(1e-5).epsilon == acc.get_epsilon(1e-5) == rep.epsilon
    with pytest.raises(AssertionError, match="was composed"):
        acc.get_epsilon_report(1e-5, diagnostics=True)


def test_diagnostics_progress_is_called_once_per_direction():
    seen = []
    compute_epsilon(**BASE, beta=1.5, dim=10, clip_norm_p=2.0, diagnostics=True, progress=seen.append)
    assert [s.split(", ")[-1] for s in seen] == ["remove direction", "add direction"]
    seen.clear()
    compute_epsilon(**BASE, beta=1.5, dim=10, clip_norm_p=2.0, progress=seen.append)  # nothing slow: no lines
    assert seen == []
    acc = GGPRVAccountant(beta=1.5, dim=10, clip_norm_p=2.0)  # the accountant's report passes it through
    acc.history = [(1.0, 0.01, 100, 1.5, 10, 2.0)]
    acc.get_epsilon_report(1e-5, diagnostics=True, progress=seen.append)
    assert [s.split(", ")[-1] for s in seen] == ["remove direction", "add direction"]
