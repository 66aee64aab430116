"""Extreme but valid inputs, and the dimension d: every accepted input gives a finite proven ε, ∞ with its
reason, or one clear error naming the parameter and its allowed range (Python: ValueError / AccountingError;
CLI: one line on stderr, exit 2, no warning leaked). Issue 19, items 7 and 8."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from lower_bound_oracle import epsilon_lower

from opacus_gg import validation as V
from opacus_gg.accountants import GGPRVAccountant, compute_delta, compute_epsilon, compute_epsilon_history
from opacus_gg.accountants import get_noise_multiplier
from opacus_gg.accountants.ball_rdp import log_moment_upper, rdp_ball_epsilon

SETTING = dict(sample_rate=0.01, steps=100, delta=1e-5)


@pytest.mark.parametrize("call", [
    lambda: compute_epsilon(noise_multiplier=1.0, beta=1.5, **SETTING),
    lambda: compute_epsilon(noise_multiplier=1.0, beta=2.0, clip_norm_p=3.0, **SETTING),
    lambda: compute_delta(epsilon=1.0, noise_multiplier=1.0, sample_rate=0.01, steps=100, beta=3.0),
    lambda: compute_epsilon_history([(1.0, 0.01, 100, 1.5)], 1e-5),
    lambda: get_noise_multiplier(target_epsilon=3.0, target_delta=1e-5, sample_rate=0.01, steps=100, beta=1.5),
    lambda: GGPRVAccountant(beta=1.5).step(noise_multiplier=1.0, sample_rate=0.01),
])
def test_the_api_asks_for_dim_wherever_epsilon_depends_on_it(call):
    with pytest.raises(ValueError, match=r"dim is required for beta=.*epsilon grows with the number of noised"):
        call()


def test_dim_is_optional_exactly_where_epsilon_does_not_depend_on_it():
    """β = 2 with p ≤ 2: the one-coordinate shift is the worst case (the CLI's rule, one function)."""
    assert V.dim_matters(2.0, None) is False and V.dim_matters(2.0, 1.5) is False
    assert V.dim_matters(2.0, 3.0) and V.dim_matters(1.5, None) and V.dim_matters(2.0, math.inf)
    e_none = compute_epsilon(noise_multiplier=1.0, **SETTING).epsilon
    assert e_none == compute_epsilon(noise_multiplier=1.0, dim=10**6, **SETTING).epsilon
    acc = GGPRVAccountant()  # the engine's construction: β = 2, d from the optimizer's hook
    acc.step(noise_multiplier=1.0, sample_rate=0.01)
    assert acc.get_epsilon(1e-5) > 0


@pytest.mark.parametrize("kwargs,name", [
    (dict(dim=1e308), "dim"), (dict(dim=10**16), "dim"), (dict(dim=2.5), "dim"),
    (dict(beta=1e308, dim=1), "beta"), (dict(noise_multiplier=1e-300), "noise_multiplier"),
    (dict(noise_multiplier=1e300), "noise_multiplier"), (dict(steps=1e308), "steps"),
])
def test_out_of_range_inputs_are_one_error_naming_the_parameter_and_its_range(kwargs, name):
    kw = dict(noise_multiplier=1.0, beta=2.0, **SETTING)
    kw.update(kwargs)
    with pytest.raises(ValueError, match=rf"^{name} must be .*(\[|≥)"):
        compute_epsilon(**kw)


def test_bounds_of_the_other_validators():
    with pytest.raises(ValueError, match=r"rectify_bound must be None or a number in \(0, 1e\+30\]"):
        V.validate_rectify_bound(1e308)
    with pytest.raises(ValueError, match="epochs must give at most"):
        get_noise_multiplier(target_epsilon=3.0, target_delta=1e-5, sample_rate=0.01, epochs=1e308)


def test_solver_validates_before_it_searches():
    """A bad dim used to be swallowed as ε = ∞ and reported 'unreachable' after 14 accountant runs."""
    runs = []
    with pytest.raises(ValueError, match="^dim must be"):
        get_noise_multiplier(target_epsilon=3.0, target_delta=1e-5, sample_rate=0.01, steps=100, beta=1.5,
                             dim=0, progress=lambda s, e: runs.append(s))
    assert runs == []


def test_large_beta_many_coordinates_is_a_true_bound_not_an_overflow_artefact():
    """β = 10, σ = 10, d = 100 printed ε = 1.35e51: the rounding slack of the dual charged a huge unused
    quadratic coefficient (K ~ 1e64) to every interval. The bound is now within a small factor of the worst
    equal spread at order 2 (which it must bound from above)."""
    from opacus_gg.accountants.ball_rdp import ball_log_moment

    s2 = ball_log_moment(2, 10.0, 10.0, 100, 10.0)
    spreads = max(k * log_moment_upper(2, 0.1 * k ** -0.1, 10.0) for k in (1, 2, 5, 10, 25, 50, 100))
    assert spreads <= s2 <= 1.05 * spreads
    eps, _ = rdp_ball_epsilon([(10.0, 0.01, 100, 10.0, 100, 10.0)], 1e-5)
    assert 1.14 <= eps <= 20  # ≥ the d = 1 PRV value 1.144; was 1.35e51


@pytest.mark.parametrize("argv", [
    ["--beta", "1e308", "--dim", "1"],
    ["--beta", "1.5", "--dim", "1e308"],
    ["--beta", "1.5", "--dim", "1000000000000000000000000000000"],
    ["--beta", "2", "--steps", "10000000000000"],
])
def test_cli_extreme_arguments_are_one_line_exit_2(cli, argv):
    base = {"--noise-multiplier": "1", "--sample-rate": "0.01", "--steps": "100", "--delta": "1e-5"}
    for k, v in zip(argv[::2], argv[1::2]):
        base[k] = v
    args = ["epsilon"] + [x for kv in base.items() for x in kv]
    code, out, err = cli(args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_prv_out_of_range_publishes_the_renyi_bound_and_inf_says_why(cli):
    """β = 10, σ = 1, d = 100 used to raise OverflowError from the equal-spread PRV: the proven Rényi bound is
    published, every integer order's moment overflows there (∞ before issue 35 item 2's follow-up) and the orders in
    (1, 2) give 3615.19 at α = 1.005, compute_delta's δ at that ε too; with diagnostics the equal-spread PRV runs,
    fails, and the report says so. β = 20 (the low orders overflow too): ∞, with a one-line warning saying why, and
    the CLI prints no numpy warning."""
    for diagnostics in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rep = compute_epsilon(noise_multiplier=1.0, beta=10.0, dim=100, diagnostics=diagnostics, **SETTING)
        assert rep.method == "rdp" and rep.details["rdp_order"] == 1.005 and "infinite_because" not in rep.details
        assert rep.details["epsilon_rdp_integer_orders"] == math.inf and 3615.0 < rep.epsilon < 3616.0
        assert not any("epsilon = inf" in str(w.message) for w in caught)
        assert ("prv_failed" in rep.details) is diagnostics
    kw = {k: v for k, v in SETTING.items() if k != "delta"}
    assert compute_delta(epsilon=rep.epsilon, noise_multiplier=1.0, beta=10.0, dim=100, **kw) <= 1e-5 * (1 + 1e-9)
    for diagnostics in (False, True):
        with pytest.warns(UserWarning, match=r"epsilon = inf at beta=\[20.0\].*raise noise_multiplier or lower beta"):
            rep = compute_epsilon(noise_multiplier=1.0, beta=20.0, dim=100, diagnostics=diagnostics, **SETTING)
        assert rep.epsilon == math.inf and rep.method == "rdp" and "infinite_because" in rep.details
        assert ("prv_failed" in rep.details) is diagnostics
    code, out, err = cli(["epsilon", "--beta", "20", "--dim", "100", "--noise-multiplier", "1", "--sample-rate",
                          "0.01", "--steps", "100", "--delta", "1e-5"])
    assert code == 0 and out.startswith("epsilon = inf (proven")
    assert err.count("\n") == 1 and "encountered" not in err


def test_large_beta_at_one_coordinate_is_a_proven_number_or_inf_with_its_reason():
    """β = 50, d = 1 (the PRV's domain would exceed ±512): the Rényi bound is published with a warning that says
    the switch; finite through the orders below 2 (∞ before they were tried at d = 1). β = 20, σ = 1, d = 1: every
    order overflows, ∞ with a warning that names β. β = 20, σ = 10, d = 1 stays the PRV's finite number."""
    with pytest.warns(UserWarning, match=r"cannot hold this privacy loss on its grid at beta=\[50.0\]"):
        rep = compute_epsilon(noise_multiplier=10.0, beta=50.0, dim=1, **SETTING)
    assert math.isfinite(rep.epsilon) and rep.method == "rdp" and rep.scope == "proven" and rep.details["rdp_order"] < 2
    with pytest.warns(UserWarning, match=r"epsilon = inf at beta=\[20.0\]"):
        rep = compute_epsilon(noise_multiplier=1.0, beta=20.0, dim=1, **SETTING)
    assert rep.epsilon == math.inf and rep.scope == "proven"
    assert math.isfinite(compute_epsilon(noise_multiplier=10.0, beta=20.0, dim=1, **SETTING).epsilon)


def test_a_one_coordinate_pair_no_grid_certifies_publishes_the_renyi_bound_aloud():
    """β = 4, σ = 0.1, p = ∞, d = 2 (the vertex's shift a = 10: H = 1 to double precision on every grid of its
    one-coordinate pair, docs/accounting.md Lemma R10(b)): split_to_grid refuses, and the published ε is the proven
    Rényi bound with a warning naming the step — never a PRV number from an uncertified pair, never silently."""
    with pytest.warns(UserWarning, match=r"could not certify its own numerics.*shift a=10\.0.*Lemma R10.*Rényi bound"):
        rep = compute_epsilon(noise_multiplier=0.1, beta=4.0, dim=2, clip_norm_p=math.inf, **SETTING)
    assert rep.method == "rdp" and rep.certified and math.isfinite(rep.epsilon)
    assert "Lemma R10" in rep.details["prv_failed"]


def test_an_equal_spread_no_grid_certifies_says_its_reference_is_not_available():
    """β = 1.5, p = 1, σ = 10^6, d = 10^6: the spreads' one-coordinate shift m/k reaches 10^{−12}, where no grid of
    its pair is well conditioned (Lemma R10(b)); the published proven ε is unaffected (not a PRV number of the
    spreads) and, where the diagnostics are asked for, a warning says the equal-spread reference is not available,
    naming the step."""
    # the shift is the least float ≥ 10^{−12} (validation.shift_radius, shapes.per_coordinate_shift)
    with pytest.warns(UserWarning,
                      match=r"over every equal spread.*is not available.*shift a=1\.0000000000000002e-12.*Lemma R10"):
        rep = compute_epsilon(noise_multiplier=1e6, beta=1.5, dim=10**6, clip_norm_p=1.0, diagnostics=True, **SETTING)
    assert rep.certified and rep.epsilon_equal_spreads is None and "Lemma R10" in rep.details["prv_failed"]
    assert rep.epsilon <= rep.details["epsilon_rdp"]


def test_a_failed_prv_self_check_where_the_prv_is_published_is_said_aloud(monkeypatch):
    """β = 2, d = 1: the PRV bound is the published ε; if its numerics fail a self-check the library falls back to
    the (proven, looser) Rényi bound, and says so in a warning naming the check — never silently."""
    from opacus_gg.accountants import api
    from opacus_gg.accountants.checks import AccountingError

    def failing(*args, **kwargs):
        raise AccountingError("total mass 1.5 is not within 1e-12 of [0, 1]")

    monkeypatch.setattr(api, "_compose_tight", failing)
    with pytest.warns(UserWarning, match=r"could not certify its own numerics.*total mass 1\.5.*Rényi bound"):
        rep = api.compute_epsilon(noise_multiplier=1.0, sample_rate=0.01, steps=100, delta=1e-5, beta=2.0)
    assert rep.method == "rdp" and rep.certified and math.isfinite(rep.epsilon) and "prv_failed" in rep.details


def test_a_missing_equal_spread_reference_is_said_aloud(monkeypatch):
    """β = 1.5, d = 100: the published ε is the Rényi bound and the equal-spread PRV is its reference; if the PRV
    fails a self-check (as at d = 10^9 before Lemma R6), a warning names the check, and the report's bracket and
    verbose lines say "not available" instead of printing the Rényi bound as the PRV's bracket (which they did)."""
    from opacus_gg.accountants import api
    from opacus_gg.accountants.checks import AccountingError

    def failing(*args, **kwargs):
        raise AccountingError("discrete pair (Q-law): total mass 1.5 is not within 1e-08 of [0, 1]")

    monkeypatch.setattr(api, "_compose_tight", failing)
    with pytest.warns(UserWarning, match=r"PRV over every equal spread.*not available.*total mass 1\.5"):
        rep = api.compute_epsilon(noise_multiplier=1.0, sample_rate=0.01, steps=100, delta=1e-5, beta=1.5, dim=100,
                                  diagnostics=True)
    assert rep.method == "rdp" and rep.certified and math.isfinite(rep.epsilon)
    bracket = rep.prv_bracket()
    assert bracket["upper"] is None and "total mass 1.5" in bracket["not_available"]
    lines = rep.verbose_lines()
    assert any("not available" in line and "total mass 1.5" in line for line in lines)
    assert not any("worst case" in line or "lower" in line for line in lines)


def test_a_quadratic_coefficient_whose_tail_overflows_is_infinite_not_an_error():
    """β = 50, σ = 10, d = 100 raised AccountingError ("quadratic_coefficient … the integrand is not a number"): the
    tail's U = X^β/(2β) of Lemma 4c overflows. K = +∞ there (the quadratic bound is then not used: any K ≥ the true one
    is a bound), finite where U is, and the published ε is the proven Rényi bound, finite at this setting."""
    from opacus_gg.accountants import ball_rdp

    ball_rdp.clear_caches()
    assert ball_rdp.quadratic_coefficients(2, [0.1, 1e-3], 50.0).tolist() == [math.inf, math.inf]
    k8 = ball_rdp.quadratic_coefficients(2, [0.05], 8.0)[0]
    assert math.isfinite(k8) and k8 > 0
    rep = compute_epsilon(noise_multiplier=10.0, beta=50.0, dim=100, **SETTING)
    assert rep.method == "rdp" and rep.certified and math.isfinite(rep.epsilon) and rep.epsilon > 0


def test_an_unused_quadratic_bound_is_infinite_not_nan_and_the_ball_is_monotone_in_d():
    """K = +∞ (the tail overflows, β = 50) made the dual's power bound ∞·0 = NaN at u = 0 ('invalid value encountered
    in multiply' printed to the user), and the NaN steered the dual to a looser bound: 1466.57 at d = 100 and 686.87
    at d = 2, the cube's d·L_α(m), against ∞ at d = 1 (no orders below 2 there). Now the power bound is +∞ (unused),
    no RuntimeWarning, the orders below 2 are tried at d = 1 and p = ∞ too, and ε is finite at d = 1, non-decreasing
    in d, at most the cube's (p = ∞) and above the oracle's rigorous lower bound for one coordinate at the full norm."""
    from opacus_gg.accountants import ball_rdp

    K = np.array([[math.inf, 2.0]])
    for s in (1.0, 0.5):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            v = ball_rdp._power_sup(np.array([0.0, 3.0]), K, s, np.array([[0.0, 0.0]]), np.array([[0.5, 0.5]]))
        assert np.isposinf(v[:, 0]).all() and np.isfinite(v[:, 1]).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        eps = {(d, p): compute_epsilon(noise_multiplier=10.0, beta=50.0, dim=d, clip_norm_p=p, **SETTING).epsilon
               for d, p in ((1, 2.0), (2, 2.0), (100, 2.0), (100, math.inf))}
    assert math.isfinite(eps[1, 2.0]) and eps[1, 2.0] <= eps[2, 2.0] <= eps[100, 2.0] <= eps[100, math.inf]
    assert eps[100, 2.0] < 1.01 * eps[1, 2.0]  # β = 50: one coordinate is the worst shape, the bound sees it
    history = [(10.0, SETTING["sample_rate"], SETTING["steps"], 50.0)]
    assert epsilon_lower(history, SETTING["delta"], shift=(1.0,)) <= eps[1, 2.0]


def test_a_large_norm_order_gives_a_number_without_numpy_warnings(cli):
    """p = 100, β = 3, σ = 0.5, d = 2 (found by tests/test_soundness_sweep.py): U = A^p spans hundreds of decades, the
    dual's steepest candidate λ overflowed λm^p ('overflow encountered in multiply/divide' printed by the CLI), and
    with K = +∞ read as NaN the orders below 2 raised AccountingError. Now: a finite proven ε, no RuntimeWarning, at
    least the oracle's rigorous lower bound for one coordinate at the full norm, and the CLI prints no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        rep = compute_epsilon(noise_multiplier=0.5, beta=3.0, dim=2, clip_norm_p=100.0, **SETTING)
    assert rep.method == "rdp" and math.isfinite(rep.epsilon)
    assert epsilon_lower([(0.5, SETTING["sample_rate"], SETTING["steps"], 3.0)], SETTING["delta"]) <= rep.epsilon
    code, out, err = cli(["epsilon", "--beta", "3", "--clip-norm-p", "100", "--dim", "2", "--noise-multiplier", "0.5",
                          "--sample-rate", "0.01", "--steps", "100", "--delta", "1e-5"])
    assert code == 0 and out.startswith("epsilon = ") and "warning" not in err, err
