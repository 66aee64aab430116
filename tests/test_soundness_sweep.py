r"""Soundness sweep: every published proven number above a rigorous lower bound, over the input space the API accepts.

Oracle: :mod:`lower_bound_oracle` (pointwise-rounded-down losses composed exactly; numpy/scipy only, no opacus-gg
code), for explicit shifts of the unit ℓp ball (non-negative coordinates; σ is the noise multiplier, clip norm 1):
one coordinate at the full norm, the equal spread over k ∈ {2, d} coordinates (each k^{−1/p}), and one coordinate
c ∈ {0.5, 0.8} plus the rest of the p-mass spread equally over the other d − 1 ((1 − c^p)/(d − 1))^{1/p}). Each
shift is one neighbour the clipping allows, so the true ε(δ), δ(ε) and largest TPR at an FPR are at least the
oracle's at that shift; a coarser oracle grid is still a lower bound (it only loosens it). Checked against it:

* ε: ``compute_epsilon`` (single segments) and ``compute_epsilon_history`` (mixed histories: segments with their
  own σ, q, β, p, one d; the shift is taken coordinatewise smallest over the segments' balls, so it is in each);
  ``GGPRVAccountant.get_epsilon`` on the same history equals the published ε; the CLI's ``epsilon --json`` too;
* δ: ``compute_delta(ε)`` ≥ the oracle's δ lower bound at ε ∈ {0, ¼, ½, 1}·ε_low, the published ε and between;
* the trade-off curve: ``compute_tradeoff(...).tpr_upper`` ≥ the oracle's TPR lower bound at eight FPRs;
* monotonicity: ε non-increasing in σ and δ, non-decreasing in q, T and d (up to the PRV's eps_error and mesh).

What is new against tests/test_accountant_properties.py (d ≤ 3, p ∈ {β, 2, ∞}, the one-hot and full equal spread,
ε only, histories at d = 1) and tests/test_low_orders.py (the orders in (1, 2) at one setting): d ∈ {5, 16, 100},
p drawn in [1, 8] and p ∈ {1, 3} beside β, 2, ∞, the two-coordinate and mixed shapes, β in (2, 12] (the orders in
(1, 2), the K = +∞ tail of Lemma 4c), compute_delta and the trade-off curve over the same draws, and mixed
histories at d > 1 with β on both sides of 2.

The fast tests run named settings taken from the sweep (each region once); the ``slow`` ones draw settings with a
seeded numpy generator, one per test id (``np.random.default_rng((SEED, i))``: any id is rerun alone, the same
draw). Measured (docs/accounting.md, "Soundness sweep"): the least published/lower ratio over the draws, and where.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest

from lower_bound_oracle import delta_lower, direction_pmfs, epsilon_lower_from_pmf, epsilon_tail, tpr_lower_from_pmf
from opacus_gg.accountants import GGPRVAccountant, compute_epsilon, compute_epsilon_history
from opacus_gg.accountants.api import compute_delta
from opacus_gg.accountants.checks import AccountingError
from opacus_gg.accountants.tradeoff import compute_tradeoff

#: the errors by which the library refuses a setting in one clear line (anything else is a bug)
REFUSALS = (AccountingError, ValueError)
#: the FPRs at which the trade-off curve is checked
FPR = np.array([1e-6, 1e-4, 1e-3, 1e-2, 0.05, 0.1, 0.3, 0.5])
#: ε allowance for non-monotonicity of an upper bound: eps_error (0.01) + the relative mesh (0.4 %) + margin
#: (as tests/test_accountant_properties.py)
MONO_ABS, MONO_REL = 0.011, 0.005
SEED = 20261129

Shift = Tuple[float, ...]
Pmfs = List[Tuple[Tuple[int, np.ndarray], float]]


# ------------------------------------------------------------------------------------------------- the draws

def draw_setting(rng: np.random.Generator) -> dict:
    r"""One setting: β in [1, 1.05] (or 1), [1.9, 2.1] (or 2), (2, 12]; p ∈ {1, β, 2, 3, ∞, U[1, 8]};
    d ∈ {1, 2, 3, 5, 16, 100}; σ log-uniform in [0.3, 20]; q = 1, uniform or log-uniform in [1e-3, 1]; T ∈ [1, 50];
    δ log-uniform in [1e-12, 0.1]."""
    region = int(rng.integers(4))
    if region == 0:
        beta = float(rng.uniform(1.0, 1.05)) if rng.random() < 0.85 else 1.0
    elif region == 1:
        beta = float(rng.uniform(1.9, 2.1)) if rng.random() < 0.8 else 2.0
    else:
        beta = float(rng.uniform(2.0, 12.0))
    p = [1.0, beta, 2.0, 3.0, math.inf, float(rng.uniform(1.0, 8.0))][int(rng.integers(6))]
    d = int(rng.choice([1, 2, 3, 5, 16, 100]))
    sigma = float(math.exp(rng.uniform(math.log(0.3), math.log(20.0))))
    u = rng.random()
    if u < 0.3:
        q = 1.0
    elif u < 0.65:
        q = float(rng.uniform(1e-3, 1.0))
    else:
        q = float(math.exp(rng.uniform(math.log(1e-3), 0.0)))
    steps = int(rng.integers(1, 51))
    delta = float(math.exp(rng.uniform(math.log(1e-12), math.log(0.1))))
    return dict(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta, beta=beta, dim=d, clip_norm_p=p)


def draw_history(rng: np.random.Generator) -> Tuple[list, float]:
    """2–3 segments (σ, q, steps ≤ 15, β, d, p) of one d, each with its own draw of σ, q, β, p; and δ."""
    d = int(rng.choice([1, 2, 3, 5, 16]))
    segs = []
    for _ in range(int(rng.integers(2, 4))):
        s = draw_setting(rng)
        segs.append((s["noise_multiplier"], s["sample_rate"], int(rng.integers(1, 16)), s["beta"], d, s["clip_norm_p"]))
    return segs, float(math.exp(rng.uniform(math.log(1e-12), math.log(0.1))))


# ------------------------------------------------------------------------------------------------ the oracle

def shapes(d: int, p: float) -> Dict[str, Shift]:
    """The explicit shifts of the unit ℓp ball in d coordinates (module docstring); at p = ∞ the equal spreads
    (every coordinate 1) dominate the mixed shapes, which are left out there."""
    out = {"one": (1.0,)}
    for k in sorted({2, d}):
        if 2 <= k <= d:
            out[f"equal {k}"] = (1.0 if math.isinf(p) else k ** (-1.0 / p),) * k
    if d >= 2 and not math.isinf(p):
        for c in (0.5, 0.8):
            out[f"{c} + thin"] = (c,) + (((1.0 - c ** p) / (d - 1)) ** (1.0 / p),) * (d - 1)
    return out


def common_shapes(segs: Sequence[tuple]) -> Dict[str, Shift]:
    """The shapes of :func:`shapes` at each segment's p, coordinatewise smallest over the segments: in every
    segment's ball (a smaller coordinate keeps a shift in the ball), so one shift for the whole history."""
    d = segs[0][4]
    per = [shapes(d, s[5]) for s in segs]
    names = [n for n in per[0] if all(n in sh for sh in per)]
    return {n: tuple(min(sh[n][i] for sh in per) for i in range(len(per[0][n]))) for n in names}


def bins_for(coordinates: int, steps: int) -> int:
    """The oracle's grid (widest one-step PMF / bins): coarser where the shift has many coordinates and many steps,
    to bound its cost (a coarser grid is still a lower bound)."""
    work = coordinates * steps
    return 1500 if work <= 100 else 600 if work <= 1000 else 300


def oracle(history: Sequence[tuple], delta: float, shift: Shift) -> Pmfs:
    """The two directions' composed lower-bound PMFs of ``history`` ((σ, q, steps, β), ...) at ``shift``."""
    bins = bins_for(len(shift), sum(int(s[2]) for s in history))
    return direction_pmfs(history, shift, epsilon_tail(history, delta, shift), bins)


def epsilon_low(pmfs: Pmfs, delta: float) -> float:
    return max(epsilon_lower_from_pmf(pmf, delta, h) for pmf, h in pmfs)


# ---------------------------------------------------------------------------------------------- the checks

def _published(setting: dict):
    """compute_epsilon's report, or None where the library refuses the setting in one clear error; never NaN."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "ε = ∞ because …", "the PRV … is not available": said, and allowed
            rep = compute_epsilon(**setting)
    except REFUSALS:
        return None
    assert not math.isnan(rep.epsilon) and rep.epsilon >= 0.0 and rep.certified, (setting, rep)
    return rep


def check_setting(setting: dict, *, delta_side: bool = True, engine: bool = True, tradeoff: bool = True) -> dict:
    """Every published number of one setting above the oracle at every shape; returns the measurements."""
    rep = _published(setting)
    if rep is None:
        return {"refused": True}
    eps = rep.epsilon
    kw = {k: v for k, v in setting.items() if k != "delta"}
    history = [(setting["noise_multiplier"], setting["sample_rate"], setting["steps"], setting["beta"])]
    pmfs = {name: oracle(history, setting["delta"], shift)
            for name, shift in shapes(setting["dim"], setting["clip_norm_p"]).items()}
    lows = {name: epsilon_low(p, setting["delta"]) for name, p in pmfs.items()}
    worst = max(lows, key=lows.get)
    assert eps >= lows[worst], f"published ε {eps} < rigorous lower bound {lows[worst]} ({worst}) at {setting}"
    if delta_side:
        top = min(eps, 1e3)
        for e in sorted({0.0, 0.25 * lows[worst], 0.5 * lows[worst], lows[worst], 0.5 * (lows[worst] + top), top}):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = compute_delta(epsilon=e, **kw)
            low = max(delta_lower(pmf, e, h) for p in pmfs.values() for pmf, h in p)
            assert ours >= low, f"compute_delta({e}) = {ours} < rigorous lower bound {low} at {setting}"
    if engine:
        acc = GGPRVAccountant(beta=setting["beta"], dim=setting["dim"], clip_norm_p=setting["clip_norm_p"])
        for _ in range(setting["steps"]):
            acc.step(noise_multiplier=setting["noise_multiplier"], sample_rate=setting["sample_rate"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert acc.get_epsilon(setting["delta"]) == eps, setting
    if tradeoff:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            upper = compute_tradeoff(**setting).tpr_upper(FPR)
        lower = np.max([tpr_lower_from_pmf(pmf, FPR, h) for p in pmfs.values() for pmf, h in p], axis=0)
        assert np.all(upper >= lower), (setting, FPR[upper < lower], upper[upper < lower], lower[upper < lower])
    return {"epsilon": eps, "lower": lows[worst], "worst": worst, "method": rep.method}


def check_history(segs: list, delta: float) -> dict:
    """A mixed history: compute_epsilon_history and the accountant's get_epsilon, equal, above the oracle."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = compute_epsilon_history(segs, delta)
    except REFUSALS:
        return {"refused": True}
    assert not math.isnan(rep.epsilon) and rep.certified, (segs, rep)
    acc = GGPRVAccountant(beta=2.0, dim=segs[0][4])
    for sigma, q, steps, beta, d, p in segs:
        for _ in range(steps):
            acc.step(noise_multiplier=sigma, sample_rate=q, beta=beta, dim=d, clip_norm_p=p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert acc.get_epsilon(delta) == rep.epsilon, segs
    history = [s[:4] for s in segs]
    lows = {name: epsilon_low(oracle(history, delta, shift), delta) for name, shift in common_shapes(segs).items()}
    worst = max(lows, key=lows.get)
    assert rep.epsilon >= lows[worst], f"published ε {rep.epsilon} < lower bound {lows[worst]} ({worst}) at {segs}"
    return {"epsilon": rep.epsilon, "lower": lows[worst], "worst": worst, "method": rep.method}


def _epsilon_or_none(setting: dict) -> Optional[float]:
    rep = _published(setting)
    return None if rep is None else rep.epsilon


def check_monotone(setting: dict, factor: float) -> None:
    """ε falls as σ or δ grows and grows with T, q and d (up to eps_error and the mesh)."""
    e0 = _epsilon_or_none(setting)
    if e0 is None:
        return
    larger_d = {1: 2, 2: 3, 3: 5, 5: 16, 16: 100, 100: 1000}[setting["dim"]]
    larger = {  # the parameter grown, and whether ε may then grow (+1) or fall (−1)
        "noise_multiplier": (setting["noise_multiplier"] * factor, -1),
        "delta": (min(setting["delta"] * factor, 0.5), -1),
        "steps": (setting["steps"] + max(1, int(setting["steps"] * (factor - 1))), +1),
        "sample_rate": (min(1.0, setting["sample_rate"] * factor), +1),
        "dim": (larger_d, +1),
    }
    for name, (value, sign) in larger.items():
        e1 = _epsilon_or_none({**setting, name: value})
        if e1 is None:
            continue
        lo, hi = (e0, e1) if sign > 0 else (e1, e0)
        assert lo <= hi + MONO_ABS + MONO_REL * hi, f"ε not monotone in {name}: {e0} → {e1} at {value}, {setting}"


# ------------------------------------------------------------------------------------------- fast (CI) tests

#: settings from the sweep, one per region (their steps or d cut to bound the oracle's cost), with which of the
#: δ side, the accountant and the trade-off curve are checked there (all three cost an oracle's worth each)
FAST_SETTINGS = [
    # β near 1, ℓ2 ball in 3 coordinates: the Rényi bound over the ball
    (dict(noise_multiplier=1.1369, sample_rate=0.5542, steps=20, delta=7.34e-6, beta=1.0289, dim=3, clip_norm_p=2.0),
     dict(delta_side=True, engine=True, tradeoff=False)),
    # β = p just below 2, q = 1, d = 100: the dominating Gaussian
    (dict(noise_multiplier=1.1272, sample_rate=1.0, steps=4, delta=0.0577, beta=1.9986, dim=100, clip_norm_p=1.9986),
     dict(delta_side=False, engine=False, tradeoff=True)),
    # β = p = 2.62 in 16 coordinates: the orders in (1, 2)
    (dict(noise_multiplier=0.3359, sample_rate=0.0929, steps=10, delta=1.58e-12, beta=2.6192, dim=16,
          clip_norm_p=2.6192), dict(delta_side=True, engine=True, tradeoff=False)),
    # β = p = 10.45, d = 2: the orders in (1, 2) at a large β
    (dict(noise_multiplier=4.8261, sample_rate=0.606, steps=10, delta=4.44e-11, beta=10.4522, dim=2,
          clip_norm_p=10.4522), dict(delta_side=False, engine=False, tradeoff=True)),
    # β > 2, p drawn (5.9): integer orders
    (dict(noise_multiplier=8.87, sample_rate=0.4649, steps=4, delta=3.49e-12, beta=11.0726, dim=3, clip_norm_p=5.9017),
     dict(delta_side=True, engine=False, tradeoff=False)),
    # p = ∞ just above β = 2: the PRV over every shift
    (dict(noise_multiplier=8.2706, sample_rate=1.0, steps=14, delta=3.29e-11, beta=2.0609, dim=5, clip_norm_p=math.inf),
     dict(delta_side=True, engine=True, tradeoff=True)),
]


@pytest.mark.parametrize("setting,checks", FAST_SETTINGS,
                         ids=[f"beta{s['beta']:g}-p{s['clip_norm_p']:g}-d{s['dim']}" for s, _ in FAST_SETTINGS])
def test_published_epsilon_delta_and_tradeoff_are_above_the_oracle_at_every_shape(setting, checks):
    check_setting(setting, **checks)


def test_mixed_history_across_beta_two_is_above_the_oracle_and_the_accountant_agrees():
    # β = 1.5 then 3 then 1.02 at d = 5 with each its p: the orders in (1, 2) are tried (a segment has β > 2)
    segs = [(0.9, 0.2, 3, 1.5, 5, 2.0), (1.3, 0.05, 6, 3.0, 5, 3.0), (2.5, 1.0, 2, 1.02, 5, 1.02)]
    out = check_history(segs, 1e-6)
    assert out["method"] == "rdp"


def test_cli_epsilon_json_is_above_the_oracle_in_many_coordinates(cli):
    s = FAST_SETTINGS[3][0]
    code, out, err = cli(["epsilon", "--beta", repr(s["beta"]), "--dim", str(s["dim"]), "--clip-norm-p",
                          repr(s["clip_norm_p"]), "--noise-multiplier", repr(s["noise_multiplier"]), "--sample-rate",
                          repr(s["sample_rate"]), "--steps", str(s["steps"]), "--delta", repr(s["delta"]), "--json"])
    assert code == 0, err
    res = json.loads(out)
    assert res["certified"] and res["epsilon"] == _published(s).epsilon
    history = [(s["noise_multiplier"], s["sample_rate"], s["steps"], s["beta"])]
    shift = (s["dim"] ** (-1.0 / s["clip_norm_p"]),) * s["dim"]
    assert res["epsilon"] >= epsilon_low(oracle(history, s["delta"], shift), s["delta"])


# ------------------------------------------------------------------------------------------- slow: the sweep

@pytest.mark.slow
@pytest.mark.parametrize("i", range(120))
def test_sweep_published_numbers_are_above_the_oracle(i):
    setting = draw_setting(np.random.default_rng((SEED, i)))
    if setting["beta"] > 8.0 or setting["dim"] == 100:  # the oracle's cost grows with the loss's range and with
        setting["steps"] = min(setting["steps"], 12)  # coordinates × steps (β = 11.3, d = 100, T = 38: 100 s)
    check_setting(setting, delta_side=i % 2 == 0, engine=i % 3 == 0, tradeoff=i % 4 == 0)


@pytest.mark.slow
@pytest.mark.parametrize("i", range(40))
def test_sweep_mixed_histories_are_above_the_oracle(i):
    check_history(*draw_history(np.random.default_rng((SEED, 1000 + i))))


@pytest.mark.slow
@pytest.mark.parametrize("i", range(60))
def test_sweep_published_epsilon_is_monotone(i):
    rng = np.random.default_rng((SEED, 2000 + i))
    check_monotone(draw_setting(rng), float(rng.uniform(1.01, 3.0)))
