"""Fuzz of every public entry point with NaN, ±inf, negative, zero, huge, tiny and wrongly typed values for every
numeric argument (issue 32, item 3). Every call ends in a number that an independent check accepts, or in one
``ValueError`` naming the argument: never another exception, never a silently wrong number.

The independent checks share no code with the package:

* any setting: for the event S = "in some step, a noised coordinate exceeds half its shift" (the one-coordinate
  shift is in every ℓp ball; the count's coordinate where there is one), P(S) ≥ 1 − (1 − q(1 − s))^T and
  Q(S) ≤ T·s with s = P(X > shift/2) under the noise, so every valid δ(ε) is ≥ P(S) − e^ε Q(S) (issue 32, item 1's
  reference): a published ε with P(S) − e^ε Q(S) > δ is wrong;
* β = 2, q = 1: T Gaussian steps are one Gaussian pair with μ = √(T(σ⁻² + σ_c⁻²)), whose δ(ε) is exact;
* σ = 0: δ(ε) = 1 − (1 − q)^T.

hypothesis runs derandomized; the fast part (~30 s) runs in CI, the wider sweep under ``-m slow``.
"""

from __future__ import annotations

import math
import warnings

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import special, stats
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine
from opacus_gg.accountants import GGPRVAccountant, compute_delta, compute_epsilon, get_noise_multiplier
from opacus_gg.accountants.tradeoff import compute_tradeoff
from opacus_gg.audit import AuditConfig
from opacus_gg.companions.clt import clt_epsilon
from opacus_gg.companions.counting import calibrate_scale, linf_error_quantile
from opacus_gg.companions.rdp import compute_rdp_epsilon
from opacus_gg.pate import aggregate_labels
from opacus_gg.validation import NOISE_MULTIPLIER_MAX, NOISE_MULTIPLIER_MIN

BAD = [math.nan, math.inf, -math.inf, -1.0, 0.0, -0.0, 1e300, 1e-320, 1e-155, 1e-7, 5e-7, 2e6, 10**30, "abc", "1",
       None, True, [1.0], 1 + 1j, np.float64("nan"), np.float32(0.5), 7, 1e9]
VALUES = st.one_of(st.sampled_from(BAD), st.floats(allow_nan=True, allow_infinity=True),
                   st.integers(min_value=-10**20, max_value=10**20))
FAST = settings(max_examples=5, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))
WIDE = settings(max_examples=80, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def _log_sf(x: float, beta: float) -> float:
    r"""An upper bound on log P(X > x), X ~ GG(β, 1) (density ∝ exp(−|x|^β/β)), x > 0: scipy's gennorm (scale
    β^{1/β}) where finite, and everywhere at most log(½ Γ(1/β, z)/Γ(1/β)) ≤ log ½ + (1/β − 1) log z − z − log Γ(1/β),
    z = x^β/β (Γ(s, z) ≤ z^{s−1} e^{−z} for s ≤ 1), which stays finite where the tail underflows."""
    z = math.exp(beta * math.log(x)) / beta
    bound = math.log(0.5) + (1.0 / beta - 1.0) * math.log(z) - z - special.gammaln(1.0 / beta)
    scipy_value = float(stats.gennorm.logsf(x, beta, scale=beta ** (1.0 / beta)))
    return min(bound, scipy_value) if math.isfinite(scipy_value) else bound


def _event_lower_bound(eps: float, *, shift: float, beta: float, q: float, steps: int) -> float:
    """P(S) − e^ε Q(S) ≤ δ(ε) for S = "some step's coordinate exceeds shift/2" (module docstring)."""
    log_s = _log_sf(shift / 2.0, beta)
    hit = q * -math.expm1(log_s)  # P(S_i) ≥ q(1 − s) per step
    p_s = 1.0 if hit >= 1.0 else -math.expm1(steps * math.log1p(-hit))
    log_q = math.log(steps) + log_s
    return p_s - math.exp(min(eps + log_q, 700.0)) if math.isfinite(eps) else -math.inf


def _gauss_delta(eps: float, mu: float) -> float:
    r"""Exact δ(ε) of the Gaussian pair with shift μ, Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), in 50-digit mpmath (an oracle
    that shares no code with the package; float64 loses the difference at μ ~ 10^6)."""
    if math.isinf(eps):
        return 0.0
    with mpmath.workdps(50):
        e, m = mpmath.mpf(eps), mpmath.mpf(mu)
        return float(mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2))


def _check_epsilon(eps, kw: dict) -> None:
    """ε a float ≥ 0 (or inf), never NaN, and accepted by every independent check that applies to ``kw``."""
    eps = float(eps)
    assert eps >= 0 and not math.isnan(eps), (eps, kw)
    sigma, q, t, delta = kw["noise_multiplier"], kw["sample_rate"], int(kw["steps"]), kw["delta"]
    beta, count = kw.get("beta", 2.0), kw.get("count_noise_multiplier")
    if sigma == 0:
        if delta < (1.0 - (1.0 - q) ** t):
            assert eps == math.inf
        return
    slack = delta * 1e-9 + 1e-300
    assert _event_lower_bound(eps, shift=1 / sigma, beta=beta, q=q, steps=t) <= delta + slack, (eps, kw)
    if count is not None:
        assert _event_lower_bound(eps, shift=1 / count, beta=2.0, q=q, steps=t) <= delta + slack, (eps, kw)
    if beta == 2 and q == 1 and (kw.get("clip_norm_p") or 2) <= 2:
        mu = math.sqrt(t * (sigma ** -2 + (0.0 if count is None else count ** -2)))
        assert _gauss_delta(eps, mu) <= delta + slack, (eps, mu, kw)


#: the other argument a value can make necessary: p > 2 or β ≠ 2 need dim
ALSO_NAMED = {"clip_norm_p": "dim", "beta": "dim"}


def _names_it(err: ValueError, name: str) -> None:
    names = (name, name.replace("_", " "), ALSO_NAMED.get(name, name))
    assert any(n in str(err) for n in names), (name, str(err))
    assert "\n" not in str(err).strip(), str(err)


def _call(fn, kw: dict, name: str):
    """fn(**kw): the result, or None after a ValueError that names ``name`` (any other exception fails)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(**kw)
        except ValueError as e:
            _names_it(e, name)
            return None


# ------------------------------------------------------------------------------------------------- accountant
#: q = 1, β = 2: the closed form checks every accepted value exactly, and every call is fast
BASE = dict(noise_multiplier=1.0, sample_rate=1.0, steps=10, delta=1e-5, beta=2.0)
EPSILON_ARGS = ["noise_multiplier", "sample_rate", "steps", "delta", "beta", "dim", "clip_norm_p",
                "count_noise_multiplier", "eps_error"]


def _clean(kw: dict) -> dict:
    """The accepted arguments as plain numbers (the API took them, so they convert)."""
    out = dict(kw)
    for k in ("noise_multiplier", "sample_rate", "delta", "beta"):
        out[k] = float(kw[k])
    out["steps"] = int(kw["steps"])
    for k in ("count_noise_multiplier", "clip_norm_p"):
        out[k] = None if kw.get(k) is None else float(kw[k])
    return out


def _fuzz_compute_epsilon(name, value, base=BASE):
    kw = dict(base, **{name: value})
    rep = _call(compute_epsilon, kw, name)
    if rep is not None:
        _check_epsilon(rep.epsilon, _clean(kw))


@pytest.mark.parametrize("name", EPSILON_ARGS)
@FAST
@given(value=VALUES)
def test_compute_epsilon_is_a_checked_number_or_a_value_error_naming_the_argument(name, value):
    _fuzz_compute_epsilon(name, value)


@pytest.mark.slow
@pytest.mark.parametrize("name", EPSILON_ARGS)
@pytest.mark.parametrize("sample_rate", [1.0, 0.01])
@WIDE
@given(value=VALUES)
def test_compute_epsilon_wide(name, sample_rate, value):
    if name == "steps" and sample_rate < 1 and isinstance(value, (int, float)) and value > 10**5:
        value = 10**5  # huge T at q < 1: minutes per call
    _fuzz_compute_epsilon(name, value, dict(BASE, sample_rate=sample_rate))


@pytest.mark.parametrize("name", ["epsilon", "noise_multiplier", "sample_rate", "steps", "beta",
                                  "count_noise_multiplier", "eps_error"])
@FAST
@given(value=VALUES)
def test_compute_delta_is_a_checked_probability_or_a_value_error(name, value):
    kw = dict(epsilon=1.0, noise_multiplier=1.0, sample_rate=1.0, steps=10, beta=2.0, count_noise_multiplier=None)
    kw[name] = value
    d = _call(compute_delta, kw, name)
    if d is None:
        return
    assert 0.0 <= d <= 1.0, (d, kw)
    eps, sigma, t = float(kw["epsilon"]), float(kw["noise_multiplier"]), int(kw["steps"])
    q, count = float(kw["sample_rate"]), kw["count_noise_multiplier"]
    if sigma == 0:
        assert d >= (1.0 - (1.0 - q) ** t) * (1 - 1e-12)
        return
    assert d >= _event_lower_bound(eps, shift=1 / sigma, beta=float(kw["beta"]), q=q, steps=t) - 1e-12, (d, kw)
    if count is not None:
        assert d >= _event_lower_bound(eps, shift=1 / float(count), beta=2.0, q=q, steps=t) - 1e-12, (d, kw)


# issue 32, item 1: the accountant's answers at the issue's tiny count noise, now refused naming the range
def _fuzz_compute_tradeoff(name, value, base=BASE):
    """compute_tradeoff refuses naming ``name``, or returns a curve with TPR bounds in [α, 1] that at β = 2, q = 1,
    p ≤ 2 lie above the exact G_μ curve Φ(Φ⁻¹(α) + μ), μ = √(T(σ⁻² + σ_c⁻²)) (50-digit mpmath), and an ε the
    independent checks accept."""
    kw = dict(base, **{name: value})
    rep = _call(compute_tradeoff, kw, name)
    if rep is None:
        return
    kw = _clean(kw)
    _check_epsilon(rep.epsilon, kw)
    fpr = [1e-6, 1e-3, 0.1, 0.5]
    tpr = [float(t) for t in rep.tpr_upper(fpr)]
    assert all(a <= t <= 1.0 for a, t in zip(fpr, tpr)), (kw, tpr)
    p = kw.get("clip_norm_p")
    if kw["beta"] == 2 and kw["sample_rate"] == 1 and (p is None or p <= 2):
        count = kw.get("count_noise_multiplier")
        if kw["noise_multiplier"] == 0:
            return  # no noise: the curve is TPR = 1, checked above
        mu = math.sqrt(kw["steps"] * (kw["noise_multiplier"] ** -2 + (0 if count is None else count ** -2)))
        with mpmath.workdps(50):
            for a, t in zip(fpr, tpr):
                exact = float(mpmath.ncdf(-mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * mpmath.mpf(a)) + mu))
                assert t >= exact * (1 - 1e-12), (kw, a, t, exact)


@pytest.mark.parametrize("name", EPSILON_ARGS)
@settings(FAST, max_examples=3)
@given(value=VALUES)
def test_compute_tradeoff_is_a_checked_curve_or_a_value_error_naming_the_argument(name, value):
    _fuzz_compute_tradeoff(name, value)


@pytest.mark.slow
@pytest.mark.parametrize("name", EPSILON_ARGS + ["ball_bound", "delta_error"])
@pytest.mark.parametrize("sample_rate", [1.0, 0.01])
@settings(WIDE, max_examples=30)
@given(value=VALUES)
def test_compute_tradeoff_wide(name, sample_rate, value):
    _fuzz_compute_tradeoff(name, value, dict(BASE, sample_rate=sample_rate))


AUDIT_ARGS = ["beta", "clip_norm_p", "noise_multiplier", "sample_rate", "steps", "delta", "canaries", "canary_width",
              "dim", "max_grad_norm", "canary_scale", "seed", "confidence", "score", "kind"]


def _fuzz_audit_config(name, value):
    """AuditConfig.checked refuses naming ``name``, or holds plain numbers in their ranges (σ in the proven range)."""
    cfg = _call(AuditConfig.checked, {name: value}, name)
    if cfg is None:
        return
    assert NOISE_MULTIPLIER_MIN <= cfg.noise_multiplier <= NOISE_MULTIPLIER_MAX, cfg
    assert 0 < cfg.confidence < 1 and 0 < cfg.delta < 1 and 0 < cfg.sample_rate <= 1, cfg
    assert cfg.beta >= 1 and cfg.clip_norm_p >= 1 and cfg.canary_scale >= 1 and cfg.seed >= 0, cfg
    assert cfg.canaries >= 10 and cfg.dim >= cfg.canaries * cfg.canary_width and cfg.steps >= 1, cfg
    assert all(math.isfinite(x) for x in (cfg.beta, cfg.noise_multiplier, cfg.canary_scale, cfg.max_grad_norm)), cfg


@pytest.mark.parametrize("name", AUDIT_ARGS)
@FAST
@given(value=VALUES)
def test_audit_config_is_checked_numbers_or_a_value_error_naming_the_argument(name, value):
    _fuzz_audit_config(name, value)


@pytest.mark.slow
@pytest.mark.parametrize("name", AUDIT_ARGS)
@WIDE
@given(value=VALUES)
def test_audit_config_wide(name, value):
    _fuzz_audit_config(name, value)


def test_audit_config_refuses_a_per_layer_max_grad_norm_naming_it():
    """The audit has one C: a list (accepted by make_private, per-layer clipping) was a TypeError from float()."""
    with pytest.raises(ValueError, match="max_grad_norm"):
        AuditConfig.checked(max_grad_norm=[1.0])


@pytest.mark.parametrize("sigma", [0.0, 5e-7, 2e6, math.nan, math.inf])
def test_audit_config_noise_is_the_one_rule(sigma):
    with pytest.raises(ValueError, match=r"noise_multiplier must be a number in \[1e-06, 1e\+06\]"):
        AuditConfig.checked(noise_multiplier=sigma)


@pytest.mark.parametrize("call", [
    lambda: compute_epsilon(noise_multiplier=1, beta=2, sample_rate=0.01, steps=10, delta=1e-5,
                            count_noise_multiplier=5e-155),
    lambda: compute_epsilon(noise_multiplier=1, beta=1.5, dim=10, sample_rate=0.01, steps=10, delta=1e-5,
                            count_noise_multiplier=1e-155),
    lambda: compute_epsilon(noise_multiplier=1, beta=2, sample_rate=1, steps=10, delta=1e-5,
                            count_noise_multiplier=1e-155),
    lambda: compute_delta(epsilon=1, noise_multiplier=1, sample_rate=0.01, steps=10, count_noise_multiplier=1e-160),
    lambda: compute_delta(epsilon=1, noise_multiplier=1, sample_rate=0.01, steps=10, count_noise_multiplier=1e-150),
    lambda: GGPRVAccountant().step(noise_multiplier=1, sample_rate=0.01, count_noise_multiplier=1e-155),
    lambda: get_noise_multiplier(target_epsilon=1, target_delta=1e-5, sample_rate=0.01, steps=10,
                                 count_noise_multiplier=1e-155),
])
def test_the_issues_tiny_count_noise_is_refused_naming_its_proven_range(call):
    with pytest.raises(ValueError, match=r"count_noise_multiplier must be a number in \[1e-06, 1e\+06\]"):
        call()


@pytest.mark.parametrize("beta,dim", [(2.0, None), (1.5, 10), (1.0, 1), (3.0, 10)])
@pytest.mark.parametrize("count", [NOISE_MULTIPLIER_MIN, pytest.param(1e-3, marks=pytest.mark.slow),
                                   pytest.param(0.1, marks=pytest.mark.slow)])
def test_the_smallest_accepted_count_noise_gives_at_least_the_issues_reference(beta, dim, count):
    """At the edge of the accepted range (and inside it) the published ε is at least the rigorous lower bound of
    issue 32, item 1 (the count's event S: P(S) ≥ 1 − (1 − q(1 − Φ(−c/2)))^T, Q(S) ≤ T·Φ(−c/2), c = 1/σ_c):
    δ(ε) ≥ P(S) − e^ε Q(S) ≈ 0.0956 for every ε below about c²/8, so ε is huge or ∞, never small; compute_delta
    is at least that reference at ε = 1."""
    kw = dict(noise_multiplier=1.0, sample_rate=0.01, steps=10, delta=1e-5, beta=beta, dim=dim,
              count_noise_multiplier=count)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps = compute_epsilon(**kw).epsilon
        d = compute_delta(epsilon=1.0, **{k: v for k, v in kw.items() if k != "delta"})
    _check_epsilon(eps, kw)
    c = 1.0 / count
    if count == NOISE_MULTIPLIER_MIN:
        assert eps >= c * c / 8 * 0.99, eps  # the reference's ε: (10^6)²/8 = 1.25e11
        assert 1 - 0.99 ** 10 <= 0.0957
    assert d >= _event_lower_bound(1.0, shift=c, beta=2.0, q=0.01, steps=10) - 1e-12, d


@pytest.mark.parametrize("sigma", [NOISE_MULTIPLIER_MIN, NOISE_MULTIPLIER_MAX])
@pytest.mark.parametrize("beta,dim", [(2.0, None), (1.5, 10), (1.0, 1), (3.0, 10)])
def test_the_ends_of_the_noise_range_are_checked_numbers(sigma, beta, dim):
    for q in (0.01, 1.0):
        kw = dict(noise_multiplier=sigma, sample_rate=q, steps=10, delta=1e-5, beta=beta, dim=dim)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _check_epsilon(compute_epsilon(**kw).epsilon, kw)


@pytest.mark.parametrize("name", ["target_epsilon", "target_delta", "sample_rate", "steps", "beta",
                                  "count_noise_multiplier"])
@settings(FAST, max_examples=4)
@given(value=VALUES)
def test_get_noise_multiplier_meets_its_target_or_refuses(name, value):
    kw = dict(target_epsilon=2.0, target_delta=1e-5, sample_rate=1.0, steps=10, beta=2.0, count_noise_multiplier=None)
    kw[name] = value
    sigma = _call(get_noise_multiplier, kw, name)
    if sigma is None:
        return
    assert NOISE_MULTIPLIER_MIN <= sigma <= NOISE_MULTIPLIER_MAX, sigma
    check = dict(noise_multiplier=sigma, sample_rate=float(kw["sample_rate"]), steps=int(kw["steps"]),
                 delta=float(kw["target_delta"]), beta=float(kw["beta"]),
                 count_noise_multiplier=kw["count_noise_multiplier"])
    eps = compute_epsilon(**check).epsilon
    assert eps <= float(kw["target_epsilon"]), (eps, kw)
    _check_epsilon(eps, check)


@pytest.mark.parametrize("name", ["noise_multiplier", "sample_rate", "beta", "dim", "clip_norm_p",
                                  "count_noise_multiplier"])
@FAST
@given(value=VALUES)
def test_accountant_step_refuses_or_accounts_a_checked_epsilon(name, value):
    acc = GGPRVAccountant()
    kw = dict(noise_multiplier=1.0, sample_rate=1.0)
    kw[name] = value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            for _ in range(3):
                acc.step(**kw)
        except ValueError as e:
            _names_it(e, name)
            assert len(acc.history) == 0  # nothing was recorded
            return
        eps = acc.get_epsilon(1e-5)
    seg = acc.history[0]
    _check_epsilon(eps, dict(noise_multiplier=seg[0], sample_rate=seg[1], steps=3, delta=1e-5, beta=seg[3],
                             clip_norm_p=seg[5], count_noise_multiplier=seg[6] if len(seg) > 6 else None))


@pytest.mark.parametrize("delta", BAD)
def test_accountant_get_epsilon_refuses_a_bad_delta(delta):
    acc = GGPRVAccountant()
    acc.step(noise_multiplier=1.0, sample_rate=0.5)
    eps = _call(acc.get_epsilon, {"delta": delta}, "delta")
    if eps is not None:
        _check_epsilon(eps, dict(noise_multiplier=1.0, sample_rate=0.5, steps=1, delta=float(delta)))


# ----------------------------------------------------------------------------------------------------- engine
def _parts():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dl = DataLoader(TensorDataset(torch.randn(16, 3), torch.randint(0, 2, (16,))), batch_size=4)
    return model, opt, dl


ADA = dict(target_unclipped_quantile=0.5, clipbound_learning_rate=0.2, max_clipbound=10.0, min_clipbound=0.01,
           unclipped_num_std=4.0)
MAKE_PRIVATE_ARGS = ["noise_multiplier", "max_grad_norm", "beta", "clip_norm_p", "rectify_bound"] + list(ADA)


@pytest.mark.parametrize("name", MAKE_PRIVATE_ARGS)
@settings(FAST, max_examples=3)
@given(value=VALUES)
def test_make_private_refuses_naming_the_argument_or_trains_and_accounts(name, value):
    model, opt, dl = _parts()
    adaptive = name in ADA
    kw = dict(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0, max_grad_norm=1.0, beta=2.0,
              **(dict(ADA, clipping="adaptive") if adaptive else {}))
    kw[name] = value
    engine = GGPrivacyEngine()
    out = _call(engine.make_private, kw, name)
    if out is None:
        return
    model, opt, dl = out
    x, y = next(iter(dl))
    if len(x):
        nn.functional.cross_entropy(model(x), y).backward()
    try:
        opt.step()
    except ValueError as e:  # σ·C beyond what the parameters' dtype represents: refused before the write
        _names_it(e, "noise_multiplier·max_grad_norm")
        assert name in ("noise_multiplier", "max_grad_norm"), (name, str(e))
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps = engine.get_epsilon(1e-5)
    assert eps >= 0 and not math.isnan(eps)


def test_an_adaptive_run_with_tiny_count_noise_is_refused_at_make_private():
    """Issue 32, item 1: a tiny unclipped_num_std fed GGPRVAccountant a σ_c with ε = 0; now make_private refuses it,
    naming unclipped_num_std and its range (σ_c = 2σ_b in [1e-6, 1e6]), before Opacus wraps anything."""
    model, opt, dl = _parts()
    with pytest.raises(ValueError, match=r"unclipped_num_std must be a number in \[5e-07, 500000\]"):
        GGPrivacyEngine().make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                       max_grad_norm=1.0, clipping="adaptive", **dict(ADA, unclipped_num_std=5e-156))
    assert not hasattr(model, "_module")  # not wrapped
    for missing in ADA:
        with pytest.raises(ValueError, match=missing):
            GGPrivacyEngine().make_private(module=model, optimizer=opt, data_loader=dl, noise_multiplier=1.0,
                                           max_grad_norm=1.0, clipping="adaptive",
                                           **{k: v for k, v in ADA.items() if k != missing})


@pytest.mark.parametrize("name", ["target_epsilon", "target_delta", "epochs", "unclipped_num_std"])
@settings(FAST, max_examples=2)
@given(value=VALUES)
def test_make_private_with_epsilon_refuses_or_meets_the_target(name, value):
    model, opt, dl = _parts()
    kw = dict(module=model, optimizer=opt, data_loader=dl, target_epsilon=2.0, target_delta=1e-5, epochs=1,
              max_grad_norm=1.0, **(dict(ADA, clipping="adaptive") if name in ADA else {}))
    kw[name] = value
    engine = GGPrivacyEngine()
    out = _call(engine.make_private_with_epsilon, kw, name)
    if out is not None:
        assert NOISE_MULTIPLIER_MIN <= out[1].noise_multiplier <= NOISE_MULTIPLIER_MAX


# ----------------------------------------------------------------------------------------- PATE, companions
@pytest.mark.parametrize("name", ["noise_multiplier", "target_epsilon", "beta", "delta"])
@FAST
@given(value=VALUES)
def test_aggregate_labels_refuses_or_labels_with_a_checked_epsilon(name, value):
    votes = torch.tensor([[8.0, 1.0, 1.0], [2.0, 7.0, 1.0]])
    kw = dict(votes=votes, delta=1e-5, beta=2.0, noise_multiplier=2.0, generator=torch.Generator().manual_seed(0))
    if name == "target_epsilon":
        del kw["noise_multiplier"]
    kw[name] = value
    res = _call(aggregate_labels, kw, name)
    if res is None:
        return
    assert res.labels.shape == (2,)
    # replace adjacency: two unit shifts per query, 2 queries, q = 1
    _check_epsilon(res.epsilon, dict(noise_multiplier=res.noise_multiplier, sample_rate=1.0, steps=4, delta=res.delta,
                                     beta=res.beta))


@pytest.mark.parametrize("votes", [[[math.nan, 1.0]], [[-1.0, 2.0]], [[math.inf, 1.0]], [], [["a", "b"]],
                                   [[1.0, 2.0], [3.0]], "votes", None])
def test_aggregate_labels_refuses_broken_votes(votes):
    with pytest.raises(ValueError, match="votes"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            aggregate_labels(votes, delta=1e-5, noise_multiplier=2.0)


@pytest.mark.parametrize("fn", [clt_epsilon, compute_rdp_epsilon])
@pytest.mark.parametrize("name", ["noise_multiplier", "sample_rate", "steps", "delta", "beta", "dim"])
@settings(FAST, max_examples=5)
@given(value=VALUES)
def test_companion_epsilons_refuse_or_are_numbers(fn, name, value):
    kw = dict(noise_multiplier=1.0, sample_rate=0.01, steps=10, delta=1e-5, beta=2.0, dim=1)
    kw[name] = value
    res = _call(fn, kw, name)
    if res is not None:
        eps = float(res.epsilon)
        assert eps >= 0 and not math.isnan(eps), res


@pytest.mark.parametrize("name", ["k", "beta", "scale", "prob"])
@FAST
@given(value=VALUES)
def test_counting_error_companions_refuse_or_are_numbers(name, value):
    kw = dict(k=3, beta=2.0, scale=1.0, prob=0.95)
    kw[name] = value
    t = _call(linf_error_quantile, kw, name)
    if t is not None:
        assert t > 0 and not math.isnan(t), (t, kw)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["k", "beta", "epsilon", "delta"])
@settings(WIDE, max_examples=10)
@given(value=VALUES)
def test_calibrate_scale_refuses_or_is_a_positive_scale(name, value):
    if name == "k" and isinstance(value, (int, float)) and 1000 < value <= 1e15:
        value = 1000  # accepted, but each σ solve over 10^4 … 10^15 coordinates takes minutes
    kw = dict(k=3, beta=2.0, epsilon=1.0, delta=1e-5)
    kw[name] = value
    scale = _call(calibrate_scale, kw, name)
    if scale is not None:
        assert float(scale) > 0 and math.isfinite(float(scale)), scale
