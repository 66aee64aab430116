"""The default report computes what it publishes: the proven ε, bit-identical to the report with diagnostics (the
equal-spread PRV's bracket, worst direction and spread), which it does not compose and does not pretend to have;
in paper mode the sampled-PRV ε, without its Monte Carlo error bars and DKW bracket."""

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
    k0, k1 = full.details["shape_range"]  # the pair that set the cover's ε: it covers the spreads k0 … k1
    assert k0 == full.shape_k <= k1 and [k0, k1] in full.details["shapes"]
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


# ---------------------------------------------------------------------------------------------- paper mode
#: paper mode at a cost a test affords (10⁵ samples; the default is 10⁶), β ≠ 2 (its label warns)
PAPER = dict(BASE, beta=1.5, dim=10, mode="paper", n_samples=100_000, seed=3)


def _paper_reports(**extra):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return compute_epsilon(**PAPER, **extra), compute_epsilon(**PAPER, diagnostics=True, **extra)


def test_paper_epsilon_is_bit_identical_with_and_without_error_bars():
    """The default paper report carries the paper's number (SampledComposePRV's upper end) and its estimate, the
    same bits as the report with the error bars, and says the error bars were not computed."""
    from opacus_gg.accountants.paper import sampled_compose_epsilon

    fast, full = _paper_reports()
    assert fast.epsilon == full.epsilon and fast.epsilon_estimate == full.epsilon_estimate
    hist = [(PAPER["noise_multiplier"], PAPER["sample_rate"], PAPER["steps"], PAPER["beta"])]
    paper = sampled_compose_epsilon(hist, PAPER["delta"], n_samples=PAPER["n_samples"], seed=PAPER["seed"])
    assert fast.epsilon == paper["upper"] and fast.epsilon_estimate == paper["estimate"]
    assert fast.mode == full.mode == "paper" and fast.scope == full.scope == "estimate" and not fast.certified
    # the default: no error bars, and says so (the certified report's words)
    assert fast.epsilon_lower is None and fast.epsilon_upper is None
    assert not fast.diagnostics_computed and fast.details["diagnostics"] == NOT_COMPUTED
    assert fast.prv_bracket() == {"lower": None, "estimate": fast.epsilon_estimate, "upper": None,
                                  "scope": "estimate", "not_computed": NOT_COMPUTED}
    assert not {"mc_std_error", "tail_sensitivity_upper", "dkw_epsilon_upper"} & set(fast.details)
    assert any(NOT_COMPUTED in x for x in fast.verbose_lines())
    # the Theorem 6 terms are closed forms: in both
    assert fast.details["thm6_full_eta_lower_bound"] == full.details["thm6_full_eta_lower_bound"]
    # with diagnostics: the error bars around the same number
    assert full.diagnostics_computed and full.details["mc_replicates"] == 8
    assert full.epsilon_lower <= full.epsilon_estimate <= full.epsilon <= full.epsilon_upper
    assert full.prv_bracket()["upper"] == full.epsilon_upper
    assert any("Monte Carlo sd" in x for x in full.verbose_lines())


def test_default_paper_report_never_runs_the_error_bars(monkeypatch):
    """Replicates, tail sensitivity and the DKW bracket are not run by default: made to fail, the default report
    (API, accountant) is unaffected; with diagnostics the failure surfaces."""
    from opacus_gg.accountants.paper import report as paper_report

    def failing(*a, **k):
        raise AssertionError("an error bar was computed")

    for name in ("draw_losses", "_tail_weights", "dkw_bracket"):
        monkeypatch.setattr(paper_report, name, failing)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fast = compute_epsilon(**PAPER)
        acc = GGPRVAccountant(beta=1.5, dim=10)
        acc.history = [(1.0, 0.01, 100, 1.5, 10, 1.5)]
        assert acc.get_epsilon_report(1e-5, mode="paper").epsilon_upper is None
        with pytest.raises(AssertionError, match="error bar was computed"):
            compute_epsilon(**PAPER, diagnostics=True)
    assert fast.epsilon > 0 and fast.epsilon_upper is None


def test_paper_diagnostics_progress_names_each_group():
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        compute_epsilon(**PAPER, diagnostics=True, progress=seen.append)
        assert [s.split(" (")[0] for s in seen] == ["Monte Carlo replicates", "tail sensitivity", "DKW bracket"]
        seen.clear()
        compute_epsilon(**PAPER, progress=seen.append)  # one composition: no lines
    assert seen == []


def test_accountant_report_passes_paper_keywords_to_paper_mode():
    """``GGPRVAccountant.get_epsilon_report(mode="paper", n_samples=…, seed=…)`` reaches paper mode: the same number
    as ``compute_epsilon`` with those keywords, and another seed gives another Monte Carlo estimate."""
    acc = GGPRVAccountant(beta=PAPER["beta"], dim=PAPER["dim"], clip_norm_p=PAPER["beta"])
    acc.history = [(PAPER["noise_multiplier"], PAPER["sample_rate"], PAPER["steps"])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ours = acc.get_epsilon_report(PAPER["delta"], mode="paper", n_samples=PAPER["n_samples"], seed=PAPER["seed"])
        other = acc.get_epsilon_report(PAPER["delta"], mode="paper", n_samples=PAPER["n_samples"], seed=4)
    assert ours.epsilon == _paper_reports()[0].epsilon and other.epsilon != ours.epsilon
