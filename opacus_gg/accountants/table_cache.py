r"""A disk cache for the ball tables of :mod:`.ball_prv` (``ball_bound="table"``): a table costs 35 s–30 min to build
and is the same pair every time for the same (m, β, p, spec) and the same code, so its top pair is kept on disk
and a later process (a CLI query, a resumed training run, the σ solver's probes) reads it back in milliseconds;
with it the table's family (:attr:`.ball_prv.BallTable.members`, Lemma M1), each member read through the same checks.

Where: ``$OPACUS_GG_CACHE/ball_tables`` if the variable is set (``OPACUS_GG_CACHE=off`` turns the cache off), else
``$XDG_CACHE_HOME/opacus_gg/ball_tables`` (``~/.cache/opacus_gg/ball_tables``). One ``.npz`` file per table
(≈ 1–2 MB with its 32 members; a count table's ≈ 30–60 kB), written atomically, read without pickle.

What makes a read sound: the file's name is the SHA-256 of the key (m, β, p as exact float hex, the spec's
fields, a hash of the source of every module whose code determines the pair: :mod:`opacus_gg.accountants` and its
data files, :mod:`opacus_gg.distribution`, :mod:`opacus_gg.validation`, and the numpy and scipy versions and the machine's
long double), and the key is stored in the file and compared on read; so a changed parameter, spec, library or
environment (a cache directory shared by several) never reads another table. The pair read back passes
:class:`.discrete.DiscretePair`'s own checks (finite, non-negative, mass within its budget) like a built one. A
file that cannot be read or does not match is rebuilt (with a warning), never used.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import platform
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, TypeVar

import numpy as np

from .discrete import DiscretePair

__all__ = ["CACHE_ENV", "cache_dir", "table_key", "load", "save", "load_or_build"]

#: environment variable naming the cache's parent directory ("off": no disk cache)
CACHE_ENV = "OPACUS_GG_CACHE"
_FORMAT = 2  # 2: the ball tables' family members (:attr:`.ball_prv.BallTable.members`) stored beside the top pair


def cache_dir() -> Optional[Path]:
    """The ball tables' directory (module docstring), or None when ``OPACUS_GG_CACHE=off`` (or when there is no
    home directory to put it in: then a warning, and tables are kept for the process only)."""
    root = os.environ.get(CACHE_ENV)
    if root is not None and root.strip().lower() == "off":
        return None
    if not root:
        base = os.environ.get("XDG_CACHE_HOME")
        if not base:
            try:
                base = os.path.join(Path.home(), ".cache")
            except RuntimeError as e:  # no HOME and no passwd entry (some containers)
                warnings.warn(f"ball table cache: no home directory ({e}); set {CACHE_ENV} to keep tables on disk",
                              RuntimeWarning, stacklevel=3)
                return None
        root = os.path.join(base, "opacus_gg")
    return Path(root) / "ball_tables"


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    """SHA-256 of the source of every module that determines a table's numbers and of the data files they read
    (``accountants/data/*.json``: the contour Base's, :mod:`.ball_contour`) (module docstring)."""
    pkg = Path(__file__).resolve().parents[1]
    files = (sorted((pkg / "accountants").rglob("*.py")) + sorted((pkg / "accountants" / "data").glob("*.json"))
             + [pkg / "distribution.py", pkg / "validation.py"])
    if not all(f.is_file() for f in files) or len(files) < 3:  # an install without its sources: no key, no cache
        return ""
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(pkg)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def environment() -> Dict[str, Any]:
    """What else determines a table's bits: numpy (sums, long double), scipy (the GG cdf/sf through scipy.special,
    the FFTs), the machine (long double's width: 64-bit mantissa on x86-64, plain double on arm64)."""
    import scipy

    return {"numpy": np.__version__, "scipy": scipy.__version__, "machine": platform.machine(),
            "longdouble_mantissa": int(np.finfo(np.longdouble).nmant)}


def table_key(m: float, beta: float, p: float, spec: Any, **extra: int) -> Dict[str, Any]:
    """The exact key of one table: floats as hex (no rounding), the spec's fields (and its class's name), the code
    hash, the numerical environment (:func:`environment`); ``extra``: further integer parameters of the table (the
    count table's ``dim``)."""
    fields = {k: (float(v).hex() if isinstance(v, float) else v) for k, v in dataclasses.asdict(spec).items()}
    key = {"format": _FORMAT, "m": float(m).hex(), "beta": float(beta).hex(), "p": float(p).hex(),
           "spec": json.loads(json.dumps(fields)), "code": code_hash(), "environment": environment()}
    if extra:
        key["kind"] = type(spec).__name__
        key["extra"] = {k: int(v) for k, v in sorted(extra.items())}
    return key


def _path(key: Dict[str, Any]) -> Optional[Path]:
    d = cache_dir()
    if d is None:
        return None
    if not key["code"]:
        warnings.warn("ball table cache: the library's sources are not readable, so a table cannot be keyed to "
                      "its code; tables are kept for the process only", RuntimeWarning, stacklevel=3)
        return None
    return d / (hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:40] + ".npz")


def _pair_fields(prefix: str, pair: DiscretePair) -> Dict[str, Any]:
    return {prefix + "t0": pair.t0, prefix + "h": pair.h, prefix + "omega": pair.omega, prefix + "nu": pair.nu,
            prefix + "p_inf": pair.p_inf, prefix + "q_ninf": pair.q_ninf, prefix + "pair_roundoff": pair.roundoff}


def _read_pair(z, prefix: str) -> DiscretePair:
    """A stored pair, constructed through :class:`.discrete.DiscretePair`'s own checks."""
    pair_c = float(z[prefix + "pair_roundoff"])  # the pair's own normalization factor (discrete.py, Lemma R6)
    if not 0.0 <= pair_c:
        raise ValueError(f"its pair's normalization factor is negative: {pair_c!r}")
    return DiscretePair(float(z[prefix + "t0"]), float(z[prefix + "h"]), np.array(z[prefix + "omega"], dtype=np.float64),
                        np.array(z[prefix + "nu"], dtype=np.float64), float(z[prefix + "p_inf"]),
                        float(z[prefix + "q_ninf"]), pair_c)


def _small_roundoff(c: Any) -> bool:
    return isinstance(c, float) and 0.0 <= c < 1e-3


def load(key: Dict[str, Any], stacklevel: int = 3) -> Optional[Tuple[DiscretePair, Dict[str, Any], Tuple]]:
    """(top pair, metadata, members ((pair, C), ...)) of the table stored under ``key``, or None (no cache, no file,
    or an unusable file: then a warning, at ``stacklevel``, and the caller rebuilds)."""
    path = _path(key)
    if path is None or not path.is_file():
        return None
    try:
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as z:  # closed also where np.load refuses it
            stored = json.loads(str(z["key"]))
            meta = json.loads(str(z["meta"]))
            if stored != json.loads(json.dumps(key)):
                raise ValueError("its key differs from the one asked for")
            pair = _read_pair(z, "")
            cs = meta.get("member_roundoffs")
            if not (isinstance(cs, list) and all(_small_roundoff(c) for c in cs)):
                raise ValueError(f"its members' round-offs C are not small non-negative numbers: {cs!r}")
            members = tuple((_read_pair(z, f"member{k}_"), c) for k, c in enumerate(cs))
        if not _small_roundoff(meta.get("roundoff")):
            raise ValueError(f"its round-off C is not a small non-negative number: {meta.get('roundoff')!r}")
        # what load_or_build restores besides the pair: a file without them is refused here, not a KeyError there
        if not (type(meta.get("states")) is int and meta["states"] >= 1):
            raise ValueError(f"its number of states is not a positive integer: {meta.get('states')!r}")
        if not (type(meta.get("seconds")) in (int, float) and 0.0 <= meta["seconds"] < math.inf):
            raise ValueError(f"its build time is not a non-negative number: {meta.get('seconds')!r}")
    except Exception as e:  # noqa: BLE001 - any unreadable file is rebuilt, never used
        warnings.warn(f"ball table cache: {path} is not usable ({type(e).__name__}: {e}); rebuilding the table",
                      RuntimeWarning, stacklevel=stacklevel)
        return None
    return pair, meta, members


def save(key: Dict[str, Any], pair: DiscretePair, meta: Dict[str, Any], stacklevel: int = 3,
         members: Sequence[Tuple[DiscretePair, float]] = ()) -> Optional[Path]:
    """Store ``pair``, ``meta`` and ``members`` ((pair, C), ...) under ``key`` (atomic: a temporary file renamed);
    None without a cache or when the directory is not writable (then a warning, at ``stacklevel``; the table is
    still used)."""
    path = _path(key)
    if path is None:
        return None
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            fields = _pair_fields("", pair)
            for k, (member, _) in enumerate(members):
                fields.update(_pair_fields(f"member{k}_", member))
            meta = {**meta, "member_roundoffs": [float(c) for _, c in members]}
            np.savez(f, key=json.dumps(key, sort_keys=True), meta=json.dumps(meta), **fields)
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
        warnings.warn(f"ball table cache: could not write {path} ({e}); the table is used but not kept",
                      RuntimeWarning, stacklevel=stacklevel)
        return None
    return path


_Table = TypeVar("_Table")


def load_or_build(key: Dict[str, Any], build: Callable[[], _Table],
                  restore: Callable[[DiscretePair, float, int, float, Tuple], _Table]) -> _Table:
    """The table stored under ``key``, as ``restore(top, roundoff, states, seconds, members)``, or else ``build()`` (a
    table with ``top``, ``roundoff``, ``states``, ``seconds`` and, if it has them, ``members``), stored under ``key``
    (:func:`load`, :func:`save`; their warnings name the caller of the table's own cached function)."""
    hit = load(key, stacklevel=4)
    if hit is not None:
        top, meta, members = hit
        return restore(top, meta["roundoff"], int(meta["states"]), float(meta["seconds"]), members)
    tab = build()
    save(key, tab.top, {"roundoff": tab.roundoff, "states": tab.states, "seconds": tab.seconds}, stacklevel=4,
         members=getattr(tab, "members", ()))
    return tab
