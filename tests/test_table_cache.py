"""The disk cache of ball tables (:mod:`opacus_gg.accountants.table_cache`): a table read back is the built pair (the
same ε), a different parameter, spec or code never reads another table's file, a file that is corrupt, tampered
with (mass) or stored under another key is rebuilt with a warning, and the cache can be turned off or be
unwritable without losing the table."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from opacus_gg.accountants import ball_prv, table_cache
from opacus_gg.accountants.api import _compose_tight, _validate_errors
from opacus_gg.accountants.ball_prv import TableSpec
from opacus_gg.accountants.history import PairSegment

#: a tiny spec of its own (m = 0.5: ~100 states, ~1 s), so that no other test's in-process table is reused
SPEC = TableSpec(a0=0.2, ratio_low=1.2, ratio_high=1.1, high_from=0.5, h=0.02, half_width=7.5, orders=(2, 3, 4, 5))
ARGS = (0.5, 1.5, 1.5, SPEC)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(table_cache.CACHE_ENV, str(tmp_path))
    return tmp_path / "ball_tables"


def _from_disk_only(monkeypatch):
    """``ball_table`` without its in-process LRU, with building forbidden: it must read the disk."""
    monkeypatch.setattr(ball_prv, "build_table", lambda *a: pytest.fail("built instead of read from disk"))
    return ball_prv.ball_table.__wrapped__(*ARGS)


def _epsilon(tab) -> float:
    eps_error, delta_error = _validate_errors(1e-5, 0.01, None)
    seg = PairSegment(tab.pairs, 0.01, 1000, tab.roundoff)
    return max(_compose_tight([seg], 1e-5, d, eps_error, delta_error).epsilon_upper for d in ("remove", "add"))


def test_a_table_read_back_from_disk_is_the_built_pair_and_gives_the_same_epsilon(cache, monkeypatch):
    built = ball_prv.ball_table.__wrapped__(*ARGS)
    files = list(cache.glob("*.npz"))
    assert len(files) == 1
    read = _from_disk_only(monkeypatch)
    for f in ("t0", "h", "p_inf", "q_ninf", "roundoff"):  # roundoff: the pair's own factor (Lemma R6)
        assert getattr(read.top, f) == getattr(built.top, f)
    assert np.array_equal(read.top.omega, built.top.omega) and np.array_equal(read.top.nu, built.top.nu)
    assert (read.roundoff, read.states, read.seconds) == (built.roundoff, built.states, built.seconds)
    assert _epsilon(read) == _epsilon(built)


def test_a_different_parameter_spec_or_code_never_reads_another_tables_file(cache, monkeypatch):
    ball_prv.ball_table.__wrapped__(*ARGS)
    key = table_cache.table_key(*ARGS)
    assert table_cache.load(key) is not None
    others = [table_cache.table_key(0.5 * (1 + 2**-52), 1.5, 1.5, SPEC),  # m one ulp away
              table_cache.table_key(0.5, 1.5, 1.2, SPEC),
              table_cache.table_key(0.5, 1.5, 1.5, dataclasses.replace(SPEC, orders=(2, 3, 4)))]
    monkeypatch.setattr(table_cache, "code_hash", lambda: "another version of the library")
    others.append(table_cache.table_key(*ARGS))
    for other in others:
        assert other != key and table_cache.load(other) is None
    # a file stored under another key (renamed onto this key's name) is refused, with a warning
    src = table_cache._path(key)
    src.rename(table_cache._path(others[1]))
    with pytest.warns(RuntimeWarning, match="its key differs"):
        assert table_cache.load(others[1]) is None


def test_a_corrupt_or_tampered_file_is_rebuilt_with_a_warning(cache, monkeypatch):
    built = ball_prv.ball_table.__wrapped__(*ARGS)
    path = table_cache._path(table_cache.table_key(*ARGS))
    with np.load(path) as z:
        fields = dict(z)
    fields["omega"] = fields["omega"] * 1.01  # P-mass 1.01: the pair's own mass check refuses it
    np.savez(path, **fields)
    with pytest.warns(RuntimeWarning, match="not usable.*total mass"):
        assert table_cache.load(table_cache.table_key(*ARGS)) is None
    path.write_bytes(b"not a table")
    with pytest.warns(RuntimeWarning, match="not usable"):
        rebuilt = ball_prv.ball_table.__wrapped__(*ARGS)  # rebuilt and stored again
    assert np.array_equal(rebuilt.top.omega, built.top.omega)
    assert np.array_equal(_from_disk_only(monkeypatch).top.nu, built.top.nu)


def test_cache_off_or_unwritable_keeps_the_table(tmp_path, monkeypatch):
    monkeypatch.setenv(table_cache.CACHE_ENV, "off")
    assert table_cache.cache_dir() is None
    tab = ball_prv.ball_table.__wrapped__(*ARGS)
    assert table_cache.save(table_cache.table_key(*ARGS), tab.top, {}) is None
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv(table_cache.CACHE_ENV, str(blocker))  # its ball_tables/ cannot be created
    with pytest.warns(RuntimeWarning, match="could not write"):
        again = ball_prv.ball_table.__wrapped__(*ARGS)
    assert np.array_equal(again.top.omega, tab.top.omega)
    monkeypatch.delenv(table_cache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert table_cache.cache_dir() == tmp_path / "xdg" / "opacus_gg" / "ball_tables"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setattr(table_cache.Path, "home", lambda: (_ for _ in ()).throw(RuntimeError("no home")))
    with pytest.warns(RuntimeWarning, match="no home directory"):
        assert table_cache.cache_dir() is None


def test_the_key_names_the_numerical_environment_and_no_sources_means_no_cache(cache, monkeypatch):
    """numpy, scipy and the machine's long double are in the key (a cache directory shared by several
    environments never reads another's table); an install without readable sources keeps tables per process."""
    env = table_cache.table_key(*ARGS)["environment"]
    assert set(env) == {"numpy", "scipy", "machine", "longdouble_mantissa"} and env["numpy"] == np.__version__
    monkeypatch.setattr(table_cache, "code_hash", lambda: "")
    with pytest.warns(RuntimeWarning, match="sources are not readable"):
        assert table_cache.load(table_cache.table_key(*ARGS)) is None
