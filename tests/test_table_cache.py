"""The disk cache of ball tables (:mod:`opacus_gg.accountants.table_cache`): a table read back is the built pair (the
same ε), a different parameter, spec or code never reads another table's file, a file that is corrupt, tampered
with (mass) or stored under another key is rebuilt with a warning, and the cache can be turned off or be
unwritable without losing the table."""

from __future__ import annotations

import dataclasses
import io
import json
import threading
import warnings

import numpy as np
import pytest

from opacus_gg.accountants import ball_count, ball_prv, table_cache
from opacus_gg.accountants.ball_count import CountSpec
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
    # the family (Lemma M1) comes back too, pair for pair and C for C
    assert len(read.members) == len(built.members) > 1
    for (a, ca), (b, cb) in zip(read.members, built.members):
        assert ca == cb and (a.t0, a.h, a.p_inf, a.q_ninf, a.roundoff) == (b.t0, b.h, b.p_inf, b.q_ninf, b.roundoff)
        assert np.array_equal(a.omega, b.omega) and np.array_equal(a.nu, b.nu)


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


def test_a_tampered_family_member_is_refused_with_a_warning(cache):
    """A member's masses pass the same checks as the top pair's, and its C must be a small non-negative number."""
    ball_prv.ball_table.__wrapped__(*ARGS)
    path = table_cache._path(table_cache.table_key(*ARGS))
    with np.load(path) as z:
        fields = dict(z)
    good = dict(fields)
    fields["member1_omega"] = fields["member1_omega"] * 1.01
    np.savez(path, **fields)
    with pytest.warns(RuntimeWarning, match="not usable.*total mass"):
        assert table_cache.load(table_cache.table_key(*ARGS)) is None
    meta = json.loads(str(good["meta"]))
    meta["member_roundoffs"][0] = -1e-12
    np.savez(path, **{**good, "meta": json.dumps(meta)})
    with pytest.warns(RuntimeWarning, match="members' round-offs"):
        assert table_cache.load(table_cache.table_key(*ARGS)) is None


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


# ---- the count tables (ball_count.count_table) through table_cache.load_or_build --------------------------------

#: two small count tables (~0.5 s each) that differ in every key input
COUNT_A = (0.5, 3.0, 3.0, 2, CountSpec(mass_steps=32, ratio_high=1.05, h=0.02))
COUNT_B = (0.625, 2.5, 2.5, 3, CountSpec(mass_steps=24, ratio_high=1.1, ratio_low=1.1, high_from=0.4, base_steps=2,
                                         h=0.025, half_width=9.0, tail=1e-12))


def _count_key(m, beta, p, dim, spec):
    return table_cache.table_key(m, beta, p, spec, dim=dim)


def _count_from_disk_only(monkeypatch, args):
    monkeypatch.setattr(ball_count, "build_count_table", lambda *a: pytest.fail("built instead of read from disk"))
    return ball_count.count_table.__wrapped__(*args)


def test_a_count_table_is_read_only_under_its_own_key(cache, monkeypatch):
    """Two count tables built and stored; a key with any one input of A's (m, β, p, d, each spec field) taken from B
    finds no file, and A's file put under that key's name is refused (its stored key differs), with a warning; a p ≤ 2
    table's key (no d) never names a count table's file."""
    a = ball_count.count_table.__wrapped__(*COUNT_A)
    b = ball_count.count_table.__wrapped__(*COUNT_B)
    key_a, key_b = _count_key(*COUNT_A), _count_key(*COUNT_B)
    assert table_cache.load(key_a) is not None and table_cache.load(key_b) is not None
    swaps = [COUNT_A[:k] + (COUNT_B[k],) + COUNT_A[k + 1:] for k in range(4)]
    for f in dataclasses.fields(CountSpec):
        swaps.append(COUNT_A[:4] + (dataclasses.replace(COUNT_A[4], **{f.name: getattr(COUNT_B[4], f.name)}),))
    swaps = [s for s in swaps if s != COUNT_A]
    assert len(swaps) == 4 + len(dataclasses.fields(CountSpec))  # B differs from A in every input
    src = table_cache._path(key_a)
    for s in swaps:
        key = _count_key(*s)
        assert key != key_a and table_cache._path(key) != src and table_cache.load(key) is None, s
        dst = table_cache._path(key)
        dst.write_bytes(src.read_bytes())
        with pytest.warns(RuntimeWarning, match="its key differs"):
            assert table_cache.load(key) is None, s
        dst.unlink()
    assert table_cache._path(table_cache.table_key(*COUNT_A[:3], COUNT_A[4])) != src
    read = _count_from_disk_only(monkeypatch, COUNT_A)
    assert np.array_equal(read.top.omega, a.top.omega) and read.dim == a.dim and read.roundoff == a.roundoff
    assert not np.array_equal(b.top.omega, a.top.omega)


def test_a_truncated_bit_flipped_or_incomplete_file_is_rebuilt_never_used(cache, monkeypatch):
    """load_or_build (the count table's path): a file cut short, one bit of a mass flipped (numpy's zip CRC), a
    metadata entry missing or not a number, or a file stored by another version of the code under this name: each
    is refused with a warning and the table rebuilt (the same pair), never read and never an exception."""
    built = ball_count.count_table.__wrapped__(*COUNT_A)
    key = _count_key(*COUNT_A)
    path = table_cache._path(key)
    raw = path.read_bytes()
    at = raw.find(built.top.omega.tobytes())
    assert at > 0  # the masses are stored uncompressed: flip a mantissa bit of the largest one
    flipped = bytearray(raw)
    flipped[at + 8 * int(np.argmax(built.top.omega)) + 5] ^= 0x10
    with np.load(path) as z:
        fields = dict(z)
    meta = json.loads(str(fields["meta"]))
    variants = {"cut short": raw[: len(raw) // 2], "one bit flipped": bytes(flipped)}
    for name, value in (("states", None), ("seconds", None), ("states", "many"), ("seconds", "long")):
        m = dict(meta)
        if value is None:
            del m[name]
        else:
            m[name] = value
        variants[f"meta {name} {value}"] = _npz_bytes({**fields, "meta": json.dumps(m)})
    old_key = json.loads(str(fields["key"]))
    old_key["code"] = "an older version of the library"
    variants["another version's key"] = _npz_bytes({**fields, "key": json.dumps(old_key, sort_keys=True)})
    for name, content in variants.items():
        path.write_bytes(content)
        with pytest.warns(RuntimeWarning, match="not usable"):
            again = ball_count.count_table.__wrapped__(*COUNT_A)
        assert np.array_equal(again.top.omega, built.top.omega) and again.roundoff == built.roundoff, name
        assert path.read_bytes() != content, name  # stored again
    assert _count_from_disk_only(monkeypatch, COUNT_A).states == built.states


def _npz_bytes(fields) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **fields)
    return buf.getvalue()


def test_concurrent_writers_never_expose_a_partial_file(cache):
    """Writers storing the same table at once (each through its own temporary file, renamed): a reader in between
    finds either no file or the whole table, never a file it refuses."""
    tab = ball_count.count_table.__wrapped__(*COUNT_A)
    key = _count_key(*COUNT_A)
    table_cache._path(key).unlink()
    meta = {"roundoff": tab.roundoff, "states": tab.states, "seconds": tab.seconds}
    stop = threading.Event()
    errors: list = []

    def write():
        while not stop.is_set():
            table_cache.save(key, tab.top, meta)

    def read():
        for _ in range(200):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                try:
                    hit = table_cache.load(key)
                except Exception as e:  # noqa: BLE001 - recorded for the assertion below
                    errors.append(e)
                    continue
            if hit is not None and not np.array_equal(hit[0].omega, tab.top.omega):
                errors.append("another pair")
    writers = [threading.Thread(target=write) for _ in range(3)]
    for w in writers:
        w.start()
    try:
        read()
    finally:
        stop.set()
        for w in writers:
            w.join()
    assert not errors, errors[:3]
    assert not list(cache.glob("*.tmp"))  # no temporary file left behind
