"""Queries leave the library's shared state as they found it (the in-place arithmetic of issue 33 item 13,
docs/performance.md: ``renyi._subinterval_bounds``, ``refine_enclosure``, ``log_moments_upper``,
``ball_rdp._chord_sup_at``, ``_k_peak``; and every cache that hands out arrays).

What is checked, with no reference to how the code is written: the primitives never write into their inputs (copies
compared before and after) and never return a view of them (``np.shares_memory``); the arrays every memoized
function of :mod:`opacus_gg.accountants` handed out (its lru caches, found by their ``cache_info``, and the
module-level dict caches) are unchanged after further queries of other settings read them; and a query repeated in
one process, interleaved with other settings, returns the identical floats warm and again cold (every cache
cleared). The settings cover the paths those functions run: the Rényi dual at p ≠ 2 (Newton b) and p = 2 (closed
form), the orders in (1, 2) at β > 2, the moment and K enclosures, the count table at β > 2 and β < 2 (coarse
spec), the equal-spread PRV and the Gaussian PRV.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import itertools
import math
import pkgutil
import warnings
from typing import Callable, Dict, List

import numpy as np
import pytest

import opacus_gg.accountants as accountants
from opacus_gg.accountants import api, ball_rdp, renyi
from opacus_gg.accountants.api import compute_epsilon
from opacus_gg.accountants.ball_count import CountSpec

#: coarse count-table spec (~1 s a table at d ≤ 4): any spec gives an upper bound
COARSE = CountSpec(mass_steps=32, ratio_high=1.05, h=0.02)


def _modules() -> list:
    return [importlib.import_module(f"{accountants.__name__}.{m.name}")
            for m in pkgutil.walk_packages(accountants.__path__) if not m.ispkg]


def _memoized() -> Dict[str, Callable]:
    """Every lru-cached function of the package's accountant modules, by qualified name."""
    out = {}
    for mod in _modules():
        for name, obj in vars(mod).items():
            if callable(obj) and hasattr(obj, "cache_info") and getattr(obj, "__module__", None) == mod.__name__:
                out[f"{mod.__name__}.{name}"] = obj
    return out


def _dict_caches() -> Dict[str, dict]:
    """The module-level dict caches (``_moment_cache``, ``_ball_cache``, ...) and the API's record of proven numbers."""
    return {f"{mod.__name__}.{name}": obj for mod in _modules() for name, obj in vars(mod).items()
            if isinstance(obj, dict) and (name.endswith("_cache") or name == "_PROVEN")}


def _clear_all() -> None:
    for f in _memoized().values():
        f.cache_clear()
    for d in _dict_caches().values():
        d.clear()


def _arrays(obj, depth: int = 0, seen=None) -> List[np.ndarray]:
    """The numpy arrays reachable from a cached value (tuples, lists, dicts, dataclasses and plain objects)."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 6:
        return []
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [a for x in obj for a in _arrays(x, depth + 1, seen)]
    if isinstance(obj, dict):
        return [a for x in obj.values() for a in _arrays(x, depth + 1, seen)]
    if hasattr(obj, "__dict__") and not isinstance(obj, type) and not callable(obj):
        return [a for x in vars(obj).values() for a in _arrays(x, depth + 1, seen)]
    return []


def _query(setting: dict):
    kw = dict(setting)
    spec = kw.pop("count_spec", None)
    old = api.COUNT_SPEC
    try:
        api.COUNT_SPEC = spec
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # β ≠ 2's "proven over the ball" notes: not what is checked here
            rep = compute_epsilon(**kw)
    finally:
        api.COUNT_SPEC = old
    floats = {k: v for k, v in rep.details.items() if isinstance(v, float)}
    return (rep.epsilon, rep.epsilon_upper, rep.method), floats


#: the paths the in-place code runs (module docstring); each ~1–5 s cold on one core
SETTINGS = {
    "count_beta3_p3": dict(noise_multiplier=0.8, sample_rate=0.05, steps=20, delta=1e-5, beta=3.0, dim=3,
                           clip_norm_p=3.0, ball_bound="table", count_spec=COARSE),
    "spread_prv_beta1.5": dict(noise_multiplier=1.0, sample_rate=0.02, steps=100, delta=1e-5, beta=1.5, dim=8,
                               clip_norm_p=1.5, diagnostics=True),
    "renyi_beta2.5_p2": dict(noise_multiplier=1.0, sample_rate=0.01, steps=100, delta=1e-5, beta=2.5, dim=1000,
                             clip_norm_p=2.0),
    "gaussian": dict(noise_multiplier=1.0, sample_rate=0.01, steps=50, delta=1e-5, beta=2.0, dim=10),
    "count_beta1.5_p3": dict(noise_multiplier=1.0, sample_rate=0.05, steps=10, delta=1e-5, beta=1.5, dim=4,
                             clip_norm_p=3.0, ball_bound="table", count_spec=COARSE),
    "renyi_beta1.3_p2.5": dict(noise_multiplier=1.5, sample_rate=0.02, steps=200, delta=1e-6, beta=1.3, dim=50,
                               clip_norm_p=2.5),
}


# ---- the primitives: inputs untouched, outputs their own ------------------------------------------------------


def _frozen_copies(*arrays):
    return [np.array(a, copy=True) for a in arrays]


def _assert_untouched(arrays, copies, out_arrays):
    for a, c in zip(arrays, copies):
        assert np.array_equal(a, c, equal_nan=True), "an input was written into"
        for o in out_arrays:
            assert not np.shares_memory(o, a), "an output is a view of an input"


@pytest.mark.parametrize("p", [1.5, 2.0, 3.0])
@pytest.mark.parametrize("rounded", [False, True])
def test_chord_bound_writes_only_into_its_own_arrays(p, rounded):
    """``_chord_sup_at`` on the dual's broadcast request (rows λ, columns intervals: λ = 0, flat, decreasing and
    infinite chords included) and on a flat gathered one: its inputs, views of the grid and of the excess arrays,
    are unchanged, and the bound is a new array; called twice, the same floats."""
    rng = np.random.default_rng(11)
    A = np.concatenate([[0.0], np.sort(rng.uniform(0.01, 3.0, 30))])
    G = np.sort(rng.uniform(0.0, 5.0, 31))
    G[5:8] = G[5]  # a flat stretch
    G[12] = G[11] - 0.5  # a decreasing chord
    G[-1] = 800.0  # e^G overflows: an infinite chord
    lam = np.concatenate([[0.0], np.exp(rng.uniform(-3.0, 3.0, 9))])
    grid_copies = _frozen_copies(A, G, lam)
    ask = ball_rdp._chord_grid(lam, G, A, p, rounded)
    ask_copies = _frozen_copies(*ask[:5])
    out = ball_rdp._chord_sup_at(*ask)
    _assert_untouched(list(ask[:5]) + [A, G, lam], ask_copies + grid_copies, [out])
    again = ball_rdp._chord_sup_at(*ask)
    assert np.array_equal(out, again) and not np.shares_memory(out, again)
    flat = [np.ascontiguousarray(np.broadcast_to(x, out.shape)).ravel() for x in ask[:5]]
    flat_copies = _frozen_copies(*flat)
    flat_out = ball_rdp._chord_sup_at(*flat, p, rounded)
    _assert_untouched(flat, flat_copies, [flat_out])
    assert np.array_equal(flat_out, out.ravel())  # elementwise: an entry does not depend on the others


@pytest.mark.parametrize("beta", [1.5, 2.5, 3.0, 4.5])
def test_moment_enclosure_writes_only_into_its_own_arrays(beta):
    """``_subinterval_bounds`` (rows of a parameter array, gathered by owner) and ``refine_enclosure`` leave their
    inputs unchanged and return new arrays; ``log_moments_upper`` leaves the shifts, orders and tolerances unchanged,
    returns a new array each call, and a caller writing into it changes nothing the next call returns."""
    rng = np.random.default_rng(5)
    shifts = np.exp(rng.uniform(np.log(1e-3), np.log(4.0), 12))
    orders = np.array([1.5, 2.0, 3.0, 7.0] * 3)
    epsrel = np.full(12, 1e-8)
    copies = _frozen_copies(shifts, orders, epsrel)
    renyi._moment_cache.clear()
    first = renyi.log_moments_upper(orders, shifts, beta, epsrel)  # computed
    _assert_untouched([shifts, orders, epsrel], copies, [first])
    kept = first.copy()
    first[:] = -1.0  # the caller's array is its own
    second = renyi.log_moments_upper(orders, shifts, beta, epsrel)  # read from the cache
    assert np.array_equal(second, kept) and not np.shares_memory(second, first)
    # the enclosure's parts, with the setup log_moments_upper uses: pieces [0, a], [a, x*] of one owner, [a, x*] of
    # another (g* = g(x*), the peak)
    a = np.array([0.3, 1.0])
    j = np.array([2.0, 3.0])
    x_star = np.array([renyi._peak(2.0, 0.3, beta), renyi._peak(3.0, 1.0, beta)])
    g_star = -(j * np.abs(x_star - a) ** beta + (1 - j) * np.abs(x_star) ** beta) / beta
    params = renyi._row_parameters(np.array([a, x_star, g_star, np.zeros(2), j]))  # (+ 1 − j, |j|, |1 − j|, |g*|)
    xl, xr = np.array([0.0, 0.3, 1.0]), np.array([0.3, x_star[0], x_star[1]])
    owner = np.array([0, 0, 1])
    prm = params[:, owner]
    in_copies = _frozen_copies(xl, xr, prm, params, owner)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # as refine_enclosure calls it
        up, lo = renyi._subinterval_bounds(xl, xr, prm, beta)
    _assert_untouched([xl, xr, prm, params], in_copies[:4], [up, lo])
    tol = np.full(2, 1e-9)
    tot, cnt = renyi.refine_enclosure(xl, xr, owner, 2, tol,
                                      lambda l, r, o: renyi._subinterval_bounds(l, r, params[:, o], beta))
    _assert_untouched([xl, xr, owner, params, tol], in_copies[:2] + [in_copies[4], in_copies[3], np.full(2, 1e-9)],
                      [tot, cnt])
    assert np.all(np.isfinite(tot)) and np.all(tot > 0) and np.all(cnt >= 2)


def test_k_peak_writes_only_into_its_own_arrays():
    """``_k_peak`` (its bracket updated in place) leaves ja and a unchanged and returns a new array, where the
    bracket grows and where it never does (small ja: every peak below 1), and where a is 0."""
    for a, factor in itertools.product((np.array([0.0, 1e-6, 0.01, 0.1]), np.array([0.5, 2.0, 8.0])), (3.0, 0.05)):
        ja = factor * a
        copies = _frozen_copies(ja, a)
        for beta in (1.5, 2.5, 3.0):
            x = ball_rdp._k_peak(ja, a, beta)
            _assert_untouched([ja, a], copies, [x])
            assert np.all(np.isfinite(x)) and np.all(x >= 0)


# ---- queries: caches unchanged, repeated queries identical warm and cold ---------------------------------------


#: the settings each query test runs: every path (the full command), and every path with one count table (the
#: quick tier: the β = 3 count table is its slowest setting; the β = 1.5 one keeps the count tables' path)
SUBSETS = {"every-path": list(SETTINGS), "one-count-table": [n for n in SETTINGS if n != "count_beta3_p3"]}


@pytest.mark.parametrize("subset", list(SUBSETS))
def test_cached_arrays_are_unchanged_after_other_queries_read_them(monkeypatch, subset):
    """Every array a memoized function of the accountants handed out during a round of queries (the wrapper at each
    module that holds the function records what it returns, hits included), and every entry of the dict caches, is
    unchanged (bit for bit, flags kept) after a second round of the subset's settings, interleaved."""
    settings = {name: SETTINGS[name] for name in SUBSETS[subset]}
    _clear_all()
    handed: Dict[int, object] = {}
    memo = _memoized()
    for mod in _modules():
        for name, obj in list(vars(mod).items()):
            for f in memo.values():
                if obj is f:
                    def wrapper(*a, __f=f, **k):
                        out = __f(*a, **k)
                        handed[id(out)] = out
                        return out
                    wrapper.cache_info, wrapper.cache_clear = f.cache_info, f.cache_clear
                    monkeypatch.setattr(mod, name, wrapper)
    first = {name: _query(s) for name, s in settings.items()}
    snapshot = {i: [(a, a.copy(), a.flags.writeable) for a in _arrays(v)] for i, v in handed.items()}
    dicts = {name: copy.deepcopy(dict(d)) for name, d in _dict_caches().items()}
    assert sum(len(v) for v in snapshot.values()) > 10, "the queries handed out arrays to check"
    for name in reversed(list(settings)):
        assert _query(settings[name]) == first[name], name
    for i, arrays in snapshot.items():
        for a, before, writeable in arrays:
            assert np.array_equal(a, before, equal_nan=True) and a.flags.writeable == writeable, i
    for name, d in dicts.items():
        now = _dict_caches()[name]
        for key, value in d.items():
            if key in now:  # an entry may only be added (the LRU ones are function caches)
                assert _equal(now[key], value), (name, key)


def _equal(x, y) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return bool(np.array_equal(x, y, equal_nan=True))
    if isinstance(x, (tuple, list)):
        return type(x) is type(y) and len(x) == len(y) and all(_equal(a, b) for a, b in zip(x, y))
    if dataclasses.is_dataclass(x):
        return _equal(dataclasses.astuple(x), dataclasses.astuple(y))
    if isinstance(x, float) and math.isnan(x):
        return isinstance(y, float) and math.isnan(y)
    return x == y


@pytest.mark.parametrize("subset", list(SUBSETS))
def test_a_query_repeated_among_others_returns_the_same_floats_warm_and_cold(subset):
    """Each setting queried cold, then again after the others (warm: its caches read, the others' written), then
    again after every cache is cleared, in the reverse order (cold for its own entries, after the others ran): the
    published ε, its upper end, the method and every float of the report's details are identical each time."""
    names = SUBSETS[subset]
    _clear_all()
    cold = {name: _query(SETTINGS[name]) for name in names}
    for name in names[1:] + names[:1]:
        assert _query(SETTINGS[name]) == cold[name], f"{name}: warm"
    _clear_all()
    for name in reversed(names):
        assert _query(SETTINGS[name]) == cold[name], f"{name}: cold after the others"
