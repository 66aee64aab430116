r"""Exact vectorised Ziggurat sampler for the Generalized Gaussian (private; use ``distribution.sample``).

Half-density g(x) = exp(-x^β/β), x ≥ 0 (β ≥ 1), N = 256 equal-area layers (Marsaglia & Tsang 2000;
table built once per β in float64 and cached). Layer 0 is the base strip [0, r] × [0, g(r)] plus the
tail x > r (pseudo-width X_0 = v/g(r)); layer i ≥ 1 is [0, X_i] × [G_i, G_i + v/X_i], X_N = 0 (r is
bisected so that the top layer reaches G ≥ 1, so all N regions have area exactly v and cover g).

One random word per draw (32 bits in float32, 64 in float64; 31 and 62 on accelerators): the low 9 bits
pick (layer, sign), the top M bits give u = k·2^-M on an exact lattice (M = 22 in float32, 52 in float64).
x = u·X_i is accepted at once when u < X_{i+1}/X_i (an exact lattice test, ≈ 98–99 % of draws). The
rest is resolved exactly in float64 on that small subset: the wedge by the vertical test y < g(x) with
a fresh float64 uniform y (failures are redrawn from scratch), the tail x > r by an Exp(rate r^{β-1})
proposal shifted to r, accepted with probability exp(-(x^β/β - r^β/β - r^{β-1}(x - r))) ≤ 1 (tangent
bound; h(x) = x^β/β is convex for β ≥ 1).

Two execution paths give the same distribution. On CPU (:func:`_sample_cpu`) the words come from numpy's
PCG64, one stream per block of 2^20 draws, seeded by four words of the torch generator (:func:`word_stream`,
faster than torch's CPU ``random_``); the blocks are split over the torch thread count (the output does not
depend on it) and run in cache-sized chunks on one intra-op thread each; the lattice integer is
converted to float and multiplied by W_i·2^-M (x = k·W_i·2^-M, one rounding), the fast test is k ≥ K_i,
the rejected positions are found by numpy and resolved by :func:`_fix`. On accelerators
(:func:`sample_deferred`) nothing reads the device back: one pass over the buffer in chunks (random range given
explicitly to ``random_``; a rejected draw's (u, index) is kept as a code in the output until resolved, so
the pass costs a 1-bit mask per draw beyond the output), the first K rejected positions (K static: mean + 10 sd +
64; ``nonzero_static`` on the packed mask), and :func:`_resolve` finishes them with static shapes, its random
numbers drawn whole and its float64 work done in pieces (memory ∝ a piece, not K): each slot's own vertical test; a failed wedge
restarts by taking the k-th terminal candidate of a static pool of fresh candidates; a slot in the tail takes
the k-th accepted proposal of a static pool of tail proposals (k = the slot's rank among those that need one). Exact
because the terminal (accepted) elements of an i.i.d. stream, in order, are i.i.d. with the law of the
first one, independently of the ranks. A 0-dim device flag says whether a budget was exceeded (≈ e^-50
each); only then does :class:`Finisher` complete the unresolved draws by continuing their own sequences
(a failed tail proposal is retried as a tail proposal, a failed wedge restarts from scratch). So a call
synchronises the host once (:func:`sample` reads the flag), or never (the optimizer reads it with its
other checks of the step). The accelerator path can be forced on CPU with
:func:`opacus_gg._device.accelerator_path` (an internal switch for the tests).
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Optional, Tuple

import numpy as np
import torch
from scipy import special

from ._device import has_float64, one_thread, run_split, uses_accelerator_path

LAYERS = 256
CHUNK = 1 << 17  # draws per CPU chunk: the chunk's scratch buffers (~1.7 MB) stay in cache
STREAM_DRAWS = 8 * CHUNK  # draws per PCG64 stream: the unit of the CPU path's split over threads

_TABLES: dict = {}
_TENSORS: dict = {}


def table(beta: float) -> Tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
    """float64 (r, v, X[0..N], G[1..N-1], Gtop[1..N-1]) for exp(-x^β/β) (index 0 of G, Gtop is NaN)."""
    key = float(beta)
    if key in _TABLES:
        return _TABLES[key]
    n_layers = LAYERS
    f = lambda x: math.exp(-(x**beta) / beta)  # noqa: E731
    finv = lambda y: (-beta * math.log(y)) ** (1.0 / beta)  # noqa: E731
    c_tail = beta ** (1.0 / beta - 1.0) * math.gamma(1.0 / beta)

    def vol(r):
        return r * f(r) + c_tail * float(special.gammaincc(1.0 / beta, r**beta / beta))

    def top_excess(r):  # G_top of the last layer minus 1 (≥ 0: r not too large)
        v, x, g = vol(r), r, f(r)
        for _ in range(1, n_layers - 1):
            g = g + v / x
            if g >= 1.0:
                return 1.0
            x = finv(g)
        return g + v / x - 1.0

    lo, hi = 1e-3, (beta * 600.0) ** (1.0 / beta)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if top_excess(mid) >= 0.0:
            lo = mid
        else:
            hi = mid
    r = lo  # top_excess(r) ≥ 0: the top layer [0, X_{N-1}] × [G, G + v/X_{N-1}] covers g up to 1
    v = vol(r)
    xs, gs, gt = [v / f(r), r], [f(r)], []
    for i in range(1, n_layers):
        gt.append(gs[-1] + v / xs[i])
        if i < n_layers - 1:
            gs.append(gt[-1])
            xs.append(finv(gs[-1]))
    xs.append(0.0)
    tab = (r, v, np.array(xs), np.array([np.nan] + gs), np.array([np.nan] + gt))
    _TABLES[key] = tab
    return tab


def _bits(work_dtype: torch.dtype, accel: bool):
    """(int dtype, right shift, bits of 1.0, uniform bits M, u-lattice factor, random_ upper bound).

    float32: M = 22 uniform bits placed as u = k·2^-23 ∈ [0, ½) (the factor 2 is folded into the widths),
    9 index bits; on accelerators from a 31-bit ``random_(0, 2^31)`` word (shift 9), on CPU from a 32-bit
    PCG64 word (shift 10: bit 9 unused). float64: M = 52, 9 index bits; on accelerators from
    ``random_(0, 2^62)`` (shift 10), on CPU from a 64-bit PCG64 word (shift 12)."""
    if work_dtype == torch.float32:
        return torch.int32, (9 if accel else 10), 0x3F800000, 22, 2.0, 2**31
    return torch.int64, (10 if accel else 12), 0x3FF0000000000000, 52, 1.0, 2**62


def _lattice(work_dtype: torch.dtype) -> float:
    """u = k·2^-M/fac: the lattice step of the uniform u in units of the integer k (2^-23 in float32, 2^-52 in
    float64)."""
    mant, fac = _bits(work_dtype, False)[3:5]
    return 2.0**-mant / fac


def min_scale(beta: float, work_dtype: torch.dtype) -> float:
    """Smallest scale s the sampler represents in ``work_dtype``: every width it multiplies a draw by is a normal
    number there. CPU (the stricter path): W_i·2^-M' = fl(fl(X_i·fac·s)·2^-M') with 2^-M' = :func:`_lattice`;
    the scaling by 2^-M' is exact (as :func:`_lattice_tensors` assumes) only while the product stays ≥ the dtype's
    smallest normal, so s·X_min·fac ≥ tiny/2^-M' (a power of two; rounding is monotone, so the bound on the
    exact product carries over to the rounded one). Below it the widths turn subnormal, lose their relative
    precision and at s ≲ 1e-31 (float32) flush the draws to ≈ 0. Returned with a relative margin 2^-48 above
    the bound (one float64 division)."""
    mant, fac = _bits(work_dtype, False)[3:5]
    x_min = float(np.min(table(beta)[2][:-1]))  # the top layer's width X_{N-1} > 0
    tiny = float(torch.finfo(work_dtype).tiny)
    return tiny / _lattice(work_dtype) / (x_min * fac) * (1 + 2.0**-48)


def _cached(key: tuple, make):
    """The per-process table cache (cleared beyond 64 entries)."""
    if key not in _TENSORS:
        if len(_TENSORS) > 64:
            _TENSORS.clear()
        _TENSORS[key] = make()
    return _TENSORS[key]


def _device_tables(beta: float, device, work_dtype):
    """Scale-free tables, uploaded once per (β, device, dtype): float64 signed X_i·fac by (layer, sign)
    index, the fast-accept thresholds (work dtype), and the float64 layer bottoms and spans."""

    def make():
        r, v, xs, gs, gt = table(beta)
        mant, fac = _bits(work_dtype, False)[3:5]
        ratio = xs[1:] / xs[:-1]  # fast accept u·fac < X_{i+1}/X_i  <=>  k < ceil(ratio·2^M)
        thr = np.ceil(ratio * 2.0**mant) * 2.0**-mant / fac
        f64 = lambda a: torch.tensor(a, dtype=torch.float64, device=device)  # noqa: E731
        return (
            f64(np.repeat(xs[:-1], 2) * np.tile([fac, -fac], LAYERS)),
            torch.tensor(np.repeat(thr, 2), dtype=work_dtype, device=device),
            f64(np.repeat(gs, 2)),
            f64(np.repeat(gt - gs, 2)),
            f64(np.tile([1.0, -1.0], LAYERS)),
        )

    return _cached(("device", float(beta), str(device), work_dtype), make)


def _tensors(beta: float, scale: float, device, work_dtype):
    """Per-(layer, sign) tables of length 2N: signed scaled widths ±X_i·fac·s (rounded once to the work
    dtype from float64) and fast-accept thresholds. Derived on the device from :func:`_device_tables`, so a
    new noise scale (a σ schedule) uploads nothing."""

    def make():
        signed, thr = _device_tables(beta, device, work_dtype)[:2]
        return (signed * float(scale)).to(work_dtype), thr

    return _cached((float(beta), float(scale), str(device), work_dtype), make)


def _lattice_tensors(beta: float, scale: float, work_dtype):
    """CPU tables by (layer, sign) index, in units of the lattice integer k: fast-accept thresholds
    K_i = ceil(X_{i+1}/X_i · 2^M) (k ≥ K_i is rejected) and signed widths W_i·2^-M' (x = k·W_i·2^-M')."""

    def make():
        width, thr = _tensors(beta, scale, "cpu", work_dtype)
        lattice = _lattice(work_dtype)
        return (
            (thr.double() / lattice).to(work_dtype),  # integers < 2^53: exact
            (width.double() * lattice).to(work_dtype),  # power-of-two scaling: exact
        )

    return _cached(("lattice", float(beta), float(scale), work_dtype), make)


def tail(k: int, beta: float, r: float, generator: Optional[torch.Generator], device) -> torch.Tensor:
    """k i.i.d. float64 draws of X | X > r, density ∝ exp(-x^β/β): shifted-exponential rejection."""
    out = torch.empty(0, device=device, dtype=torch.float64)
    while out.numel() < k:
        x, ok = _tail_proposals(2 * (k - out.numel()) + 16, beta, r, generator, device)
        out = torch.cat([out, x[ok]])
    return out[:k]


def _tail_proposals(m: int, beta: float, r: float, generator: Optional[torch.Generator], device):
    r"""m i.i.d. proposals of the tail sampler and their acceptance: x = r + E/λ, E ~ Exp(1), λ = r^{β-1},
    accepted iff U < exp(-(x^β/β - r^β/β - λ(x - r))) (≤ 1, tangent bound). The accepted x, in the order of
    the stream, are i.i.d. X | X > r."""
    lam = r ** (beta - 1.0)
    h_r = r**beta / beta
    e = torch.rand(m, generator=generator, device=device, dtype=torch.float64).neg_().log1p_().neg_()
    x = e.div_(lam).add_(r)
    logp = -(_pow(x, beta).div_(beta) - h_r - lam * (x - r))
    u = torch.rand(m, generator=generator, device=device, dtype=torch.float64)
    return x, u < logp.clamp_(max=0.0).exp_()


def _fix_tables(beta: float, scale: float, device, work_dtype):
    """float64 tables by (layer, sign) index: u-to-x width, layer bottom height and span (NaN for
    the base layer, so that its vertical test always fails and sends it to the tail), signed scale."""

    def make():
        signed, _, g_lo, g_span, sign = _device_tables(beta, device, work_dtype)
        return signed.abs(), g_lo, g_span, sign * float(scale)

    return _cached(("fix", float(beta), float(scale), str(device), work_dtype), make)


def _vertical(u, idx, beta, scale, generator, device, work_dtype, y=None):
    """(x, ok) for draws (u, idx) that missed the fast path: x = u·X_i signed and scaled (float64), and the
    wedge's vertical test y < g(x) with a fresh float64 y uniform on the layer's span (always False in the
    base layer, whose NaN bottom sends it to the tail). ``idx`` must be int64; a float64 ``u`` is overwritten
    (callers pass gathered copies). ``y``: the draws' uniforms on [0, 1) if already drawn (overwritten), else
    drawn here."""
    width, g_lo, g_span, ssign = _fix_tables(beta, scale, device, work_dtype)
    x = u.to(torch.float64).mul_(width.index_select(0, idx))
    if y is None:
        y = torch.rand(x.numel(), generator=generator, device=device, dtype=torch.float64)
    y.mul_(g_span.index_select(0, idx)).add_(g_lo.index_select(0, idx))
    # wedge: vertical test y < g(x) = exp(-x^β/β), x^β as exp(β·log x) (vectorised; pow is not)
    ok = y < _pow(x, beta).mul_(-1.0 / beta).exp_()
    return x.mul_(ssign.index_select(0, idx)), ok


def _fix(u, idx, beta, scale, generator, device, work_dtype) -> torch.Tensor:
    """Exact outcome (signed, scaled, float64) of the draws (u, idx) that missed the fast path."""
    res = torch.empty(idx.numel(), device=device, dtype=torch.float64)
    _fix_into(res, None, u, idx, beta, scale, generator, device, work_dtype, max(idx.numel(), 1))
    return res


def _fix_into(dest, pos, u, idx, beta, scale, generator, device, work_dtype, piece: int) -> None:
    """``dest[pos]`` ← :func:`_fix`'s outcomes (cast to ``dest``'s dtype; ``pos`` None: all of ``dest``). The
    random numbers are those of one whole call, in its order: the K wedge uniforms, then the tail draws, then
    the restarts' fresh draws; the float64 work runs in pieces of ``piece`` draws, so its temporaries scale
    with a piece, not with K, and the result does not depend on ``piece``."""
    r = table(beta)[0]
    ssign = _fix_tables(beta, scale, device, work_dtype)[3]
    k = idx.numel()
    y = torch.rand(k, generator=generator, device=device, dtype=torch.float64)
    bad = []
    for a in range(0, k, piece):
        val, ok = _vertical(u[a : a + piece], idx[a : a + piece].long(), beta, scale, generator, device, work_dtype,
                            y=y[a : a + piece])
        _put(dest, pos, a, val)
        del val
        miss = _positions(~ok)
        if miss.numel():
            bad.append(miss.add_(a))
    del y
    if not bad:
        return
    bad = torch.cat(bad)
    ib = idx.index_select(0, bad).long()
    base = (ib >> 1) == 0
    tl = bad.masked_select(base)
    if tl.numel():  # base layer beyond r: the tail, signed
        sg = ssign.index_select(0, ib.masked_select(base))
        _put(dest, pos, tl, tail(tl.numel(), beta, r, generator, device).mul_(sg))
    redo = bad.masked_select(~base)
    if redo.numel():  # wedge rejections: fresh draws from scratch
        _put(dest, pos, redo, sample(redo.numel(), beta, scale, generator, device, work_dtype))


def _put(dest: torch.Tensor, pos: Optional[torch.Tensor], at, val: torch.Tensor) -> None:
    """``dest[pos[at]] ← val`` (cast): ``at`` an offset (the next ``len(val)`` entries) or an index tensor."""
    if isinstance(at, int):
        at = torch.arange(at, at + val.numel(), device=dest.device)
    if pos is not None:
        at = pos.index_select(0, at)
    dest.index_copy_(0, at.long(), val.to(dest.dtype))


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Indices of the True entries of a bool vector: numpy's vectorised search on the CPU path (~9× torch's
    ``nonzero`` here), ``nonzero`` on the accelerator path."""
    if uses_accelerator_path(mask.device):
        return mask.nonzero().flatten()
    return torch.from_numpy(np.flatnonzero(mask.numpy()))


def _pow(x: torch.Tensor, beta: float) -> torch.Tensor:
    """x^β for x ≥ 0 (a new tensor): exp(β·log x), vectorised (0 ↦ 0); x itself for β = 1."""
    if beta == 1.0:
        return x.clone()
    return torch.log(x).mul_(beta).exp_()


def sample(n: int, beta: float, scale: float, generator, device, work_dtype) -> torch.Tensor:
    """n i.i.d. GG(β, scale) draws (flat vector of ``work_dtype`` on ``device``) by the Ziggurat above.

    CPU: :func:`_sample_cpu`, its stream blocks split over ``torch.get_num_threads()`` Python threads of one
    intra-op thread each. Accelerator path: :func:`sample_deferred`, then ONE host synchronisation (reading
    ``pending``) and, in the rare case, the exact finish. A device without float64 (MPS;
    :func:`opacus_gg._device.has_float64`): the CPU path on the host (seeded by the device generator's words),
    its float32 result moved to the device."""
    device = torch.device(device)
    workers = torch.get_num_threads()
    host = not has_float64(device)
    with contextlib.nullcontext() if device.type != "cpu" and not host else one_thread():
        if host:
            return _sample_cpu(n, beta, scale, generator, work_dtype, workers).to(device)
        if uses_accelerator_path(device):
            out, finisher = sample_deferred(n, beta, scale, generator, device, work_dtype)
            if bool(finisher.pending):  # the one host synchronisation
                finisher.finish()
            return out
        return _sample_cpu(n, beta, scale, generator, work_dtype, workers)


def _sample_cpu(n: int, beta: float, scale: float, generator, work_dtype, workers: int = 1) -> torch.Tensor:
    """CPU path. The n draws are cut into blocks of ``STREAM_DRAWS``; block j takes its words from its own
    PCG64 stream (:func:`word_stream`), split into the (layer, sign) index and the lattice integer k
    (:func:`_split_words`), and is processed in chunks of ``CHUNK`` draws whose scratch stays in cache. k
    itself is converted to float (x = k exactly, k < 2^52), so that the threshold test is k ≥ K_i and
    x = k·(W_i·2^-M') is one rounded product, as on the accelerator path (W_i·2^-M' is exact: a
    power-of-two scaling). The fast-accept compare and the search for the few rejected positions run in
    numpy (vectorised; torch's bool-output compare is ~4× slower here); the rejected draws are finished
    by :func:`_fix_into` after all blocks, in block order (its float64 work in pieces: :func:`_fix_piece`).

    The blocks are split over ``workers`` Python threads (:func:`opacus_gg._device.run_split`; numpy and
    torch release the GIL): since each block has its own stream, the output does not depend on
    ``workers``."""
    thr_k, width_k = _lattice_tensors(beta, scale, work_dtype)
    out = torch.empty(n, dtype=work_dtype)
    if n == 0:
        return out
    seed = _seed_words(generator)
    starts = range(0, n, STREAM_DRAWS)
    rejected: list = [None] * len(starts)
    int_dtype = _bits(work_dtype, False)[0]
    pos_dtype = torch.int32 if n < 2**31 else torch.int64

    def blocks(lo: int, hi: int) -> None:  # blocks lo..hi-1, with this worker's own scratch
        c = min(n, CHUNK)
        idx_buf, w_buf, m_buf = torch.empty(c, dtype=int_dtype), torch.empty(c, dtype=work_dtype), np.empty(c, np.bool_)
        for j in range(lo, hi):
            bits = word_stream(seed, j)
            found = []
            for a in range(starts[j], min(starts[j] + STREAM_DRAWS, n), c):
                m = min(c, n - a)
                x, idx, w = out[a : a + m], idx_buf[:m], w_buf[:m]
                k = _split_words(bits, work_dtype, idx)
                x.copy_(k)
                torch.index_select(thr_k, 0, idx, out=w)
                mask = m_buf[:m]
                np.greater_equal(x.numpy(), w.numpy(), out=mask)
                r = torch.from_numpy(np.flatnonzero(mask))
                if r.numel():
                    found.append(((r + a).to(pos_dtype), k.index_select(0, r), idx.index_select(0, r)))
                torch.index_select(width_k, 0, idx, out=w)
                x.mul_(w)
            rejected[j] = found

    run_split(blocks, len(starts), workers)
    parts = [list(p) for p in zip(*(t for block in rejected for t in block))]
    rejected.clear()
    if parts:
        pos, ks, ix = (_cat_(p) for p in parts)
        u = ks.to(work_dtype).mul_(_lattice(work_dtype))  # u = k·2^-M' exactly (k < 2^23 in float32, < 2^53)
        del ks
        _fix_into(out, pos, u, ix, beta, scale, generator, torch.device("cpu"), work_dtype, _fix_piece(n))
    return out


def _cat_(parts: list) -> torch.Tensor:
    """``torch.cat(parts)``, the list emptied (its tensors freed as soon as copied)."""
    out = torch.cat(parts)
    parts.clear()
    return out


def _fix_piece(n: int) -> int:
    """Rejected draws per piece of the CPU path's exact finish for n draws: n/256 (≥ CHUNK/32), so the pieces'
    temporaries (≈ 40 bytes per draw of a piece) stay ≈ 1/25 of the output (≈ 6 pieces at a 2 % rejection rate)."""
    return max(CHUNK // 32, n // 256)


def _seed_words(generator: Optional[torch.Generator]) -> np.ndarray:
    """4 words of 63 bits from the torch ``generator`` (None: the default one), in one ``random_`` call: the
    generator is advanced once, under its own lock, so a concurrent user of it never shares these words. A
    device generator (the host path of a device without float64) draws them on its device."""
    device = generator.device if generator is not None else torch.device("cpu")
    return torch.empty(4, dtype=torch.int64, device=device).random_(generator=generator).cpu().numpy()


def word_stream(seed: np.ndarray, block: int) -> np.random.PCG64:
    """The random words of the CPU path's block ``block``: numpy's PCG64 seeded by
    ``SeedSequence(seed, spawn_key=(block,))`` (independent streams per block, as numpy's ``spawn`` gives).

    PCG64's ``random_raw`` gives 64 bits in ≈ 1.6 ns here, against ≈ 1.8 ns for each 32-bit word of torch's
    CPU mt19937 ``random_``. The output is a function of the torch generator's state (PCG64 and SeedSequence
    streams are stable across numpy versions)."""
    return np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(block,)))


def _split_words(bits: np.random.PCG64, work_dtype, idx: torch.Tensor) -> torch.Tensor:
    """len(idx) draws' words from ``bits``: the (layer, sign) index w & (2N − 1) into ``idx`` (int32 in
    float32, int64 in float64), and the returned lattice integer k = w >> shift (a tensor of idx's dtype;
    22 bits from a 32-bit word in float32, two words per PCG64 output; 52 bits from a 64-bit word in
    float64)."""
    m = len(idx)
    if work_dtype == torch.float32:
        w = bits.random_raw((m + 1) // 2).view(np.uint32)[:m]
    else:
        w = bits.random_raw(m)
    ix = idx.numpy()
    np.bitwise_and(w, 2 * LAYERS - 1, out=ix.view(w.dtype))
    np.right_shift(w, _bits(work_dtype, False)[1], out=w)
    return torch.from_numpy(w.view(ix.dtype))


# ---------------------------------------------------------------------------------------------------------
# Accelerator path: static shapes, no host synchronisation (the rare remainder is left to a Finisher).


@functools.lru_cache(maxsize=None)
def _rates(beta: float, work_dtype: torch.dtype) -> Tuple[float, float, float, float]:
    r"""Per fresh candidate: P(fast test fails) q (exact on the u-lattice), P(tail) p_t = (1 − P_0)/N,
    P(restart) p_w = 1 − c/(N v) (regions above g; c = ∫_0^∞ g = β^{1/β−1} Γ(1/β)), and the tail
    proposal's acceptance a = λ (v − r g(r)) / g(r). Only the static budgets use them."""
    r, v, xs, _, _ = table(beta)
    mant = _bits(work_dtype, False)[3]
    accept = np.ceil(xs[1:] / xs[:-1] * 2.0**mant) * 2.0**-mant  # P(k < ratio·2^M) per layer
    g_r = math.exp(-(r**beta) / beta)
    c = beta ** (1.0 / beta - 1.0) * math.gamma(1.0 / beta)
    q = 1.0 - float(accept.mean())
    p_t = (1.0 - float(accept[0])) / LAYERS
    p_w = max(1.0 - c / (LAYERS * v), 0.0)
    a = min(r ** (beta - 1.0) * (v - r * g_r) / g_r, 1.0)
    return q, p_t, p_w, a


def _at_most(mean: float) -> int:
    """Static bound for a count of mean μ and variance ≤ μ (binomial): μ + 10√μ + 64, exceeded with
    probability ≤ e^-50 (Bernstein: t²/(2(σ² + t/3)) ≥ 50 for t = 10√μ + 64)."""
    return int(math.ceil(mean + 10.0 * math.sqrt(mean) + 64.0))


def _pool(demand: int, success: float) -> int:
    """Static pool size T whose successes (i.i.d., probability ``success``) reach ``demand`` but with
    probability ≤ e^-50: the smallest T with T·s − 10√(T·s) − 64 ≥ demand (as in :func:`_at_most`)."""
    y = 5.0 + math.sqrt(89.0 + demand)  # √(T·s)
    return int(math.ceil(y * y / success))


def _budgets(n: int, beta: float, work_dtype: torch.dtype) -> Tuple[int, int, int]:
    """Static sizes (K, R, T) for n draws: K slots for the fast-path rejections (≈ Bin(n, q)), R fresh
    candidates for the restarts (≈ Bin(n, p_w) of them), T tail proposals for the tail slots (among the
    first n + R candidates, ≈ Bin(n + R, p_t)). Each is exceeded with probability ≤ e^-50 ≈ 2·10^-22;
    exceeding one costs synchronisations, never exactness (see :class:`Finisher`)."""
    q, p_t, p_w, a = _rates(float(beta), work_dtype)
    k = _at_most(n * q)
    r = _pool(_at_most(n * p_w), 1.0 - p_w)
    return k, r, _pool(_at_most((n + r) * p_t), a)


def _candidates(n: int, beta: float, scale: float, generator, device, work_dtype, out: torch.Tensor):
    """n fresh Ziggurat candidates in one pass, random range explicit: ``out`` ← u·X_i signed and scaled
    (the value if the fast test passes); returns u (the lattice uniform), the (layer, sign) index and the
    mask of the fast test's failures."""
    u = torch.empty(n, device=device, dtype=work_dtype)
    _words_(u, generator)
    return _from_words(u, beta, scale, device, work_dtype, out)


def _words_(u: torch.Tensor, generator) -> None:
    """``u``'s integer view ← one random word per draw (``random_`` with the non-negative range asked for
    explicitly: 31 bits in float32, 62 in float64)."""
    int_dtype, hi = _bits(u.dtype, True)[0], _bits(u.dtype, True)[5]
    u.view(int_dtype).random_(0, hi, generator=generator)


def _from_words(u: torch.Tensor, beta: float, scale: float, device, work_dtype, out: torch.Tensor):
    """:func:`_candidates` for the words already in ``u``'s integer view (:func:`_words_`; ``u`` becomes the
    lattice uniform)."""
    width, thr = _tensors(beta, scale, device, work_dtype)
    int_dtype, shift, one_bits = _bits(work_dtype, True)[:3]
    b = u.view(int_dtype)
    idx = torch.bitwise_and(b, 2 * LAYERS - 1)
    b.bitwise_right_shift_(shift).bitwise_or_(one_bits)
    u.sub_(1.0)  # u = k·2^-M, exact
    torch.index_select(thr, 0, idx, out=out)
    rej = u >= out
    torch.index_select(width, 0, idx, out=out)
    out.mul_(u)
    return u, idx, rej


#: draws per chunk of the accelerator path's candidate pass, at most (:func:`_accel_chunk`)
ACCEL_CHUNK = 1 << 22
#: ... and at least (fewer kernel launches for small draws, whose transients are small anyway)
ACCEL_MIN_CHUNK = 1 << 17

_BIT_WEIGHTS: dict = {}


def _accel_chunk(n: int) -> int:
    """Chunk of the candidate pass for n draws: n/16 clamped to [ACCEL_MIN_CHUNK, ACCEL_CHUNK], a multiple of 8.
    Its transients (u then the codes, the index, the mask and its packing: ≈ 10 bytes per chunk draw) are the
    sampler's largest beyond the output and the 1-bit mask (≈ 0.16 float32 copies of n for n ≥ 2^21); the
    rejected draws are then resolved in pieces of 1/16 chunk (:func:`_slot_piece`)."""
    return -(-max(ACCEL_MIN_CHUNK, min(ACCEL_CHUNK, -(-n // 16))) // 8) * 8


def _weights(device) -> torch.Tensor:
    """[1, 2, 4, …, 128] (uint8) on ``device``: the bit of each of 8 mask entries in a packed byte."""
    key = str(device)
    if key not in _BIT_WEIGHTS:
        _BIT_WEIGHTS[key] = torch.tensor([1 << b for b in range(8)], dtype=torch.uint8, device=device)
    return _BIT_WEIGHTS[key]


def _pack(mask: torch.Tensor, out: torch.Tensor) -> None:
    """``out`` (uint8, ⌈len/8⌉) ← the bool ``mask`` packed 8 entries a byte (entry j is bit j % 8)."""
    m = mask.numel()
    b = mask.view(torch.uint8)
    if m % 8:
        b = torch.nn.functional.pad(b, (0, 8 - m % 8))
    torch.sum(b.view(-1, 8) * _weights(mask.device), dim=-1, dtype=torch.uint8, out=out)


def _unpack(packed: torch.Tensor, n: int) -> torch.Tensor:
    """The first n entries of a mask packed by :func:`_pack` (bool; one byte per entry, formed in place)."""
    return packed[:, None].bitwise_and(_weights(packed.device)).clamp_(max=1).view(torch.bool).flatten()[:n]


def _encode_(u: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The integer codes (k << 9) | idx of draws (u = k·2^-M exactly, (layer, sign) index), formed in u's storage
    (u is consumed) and returned as its integer view: stored in the output at rejected positions until they are
    resolved (:func:`_decode`)."""
    int_dtype, _, one_bits = _bits(u.dtype, True)[:3]
    k = u.add_(1.0).view(int_dtype).sub_(one_bits)  # 1 + u = 1.k exactly
    return k.bitwise_left_shift_(9).bitwise_or_(idx.to(int_dtype))


def _decode(code: torch.Tensor, work_dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor]:
    """(u, idx) from :func:`_encode_`'s codes (u in ``work_dtype``, idx int64)."""
    one_bits = _bits(work_dtype, True)[2]
    u = (code >> 9).bitwise_or_(one_bits).view(work_dtype).sub_(1.0)
    return u, torch.bitwise_and(code, 2 * LAYERS - 1).long()


def _candidate_pass(n: int, beta: float, scale: float, generator, device, work_dtype, out):
    """:func:`_candidates` for ``out`` (n draws) in chunks (:func:`_accel_chunk`): ``out`` gets the fast-accepted
    values and, at the rejected positions, the draws' codes (:func:`_encode_`) in its integer view; returns the
    mask of rejected positions packed 8 a byte (:func:`_unpack`). Only ``random_`` uses the generator, once per
    chunk, in order (on CPU the words equal one call's). One chunk's transients are alive at a time."""
    int_dtype = _bits(work_dtype, True)[0]
    chunk = _accel_chunk(n)
    packed = torch.empty(-(-n // 8), dtype=torch.uint8, device=device)
    for a in range(0, n, chunk):
        o = out[a : a + chunk]
        u, idx, r = _candidates(o.numel(), beta, scale, generator, device, work_dtype, o)
        bits = o.view(int_dtype)
        torch.where(r, _encode_(u, idx), bits, out=bits)
        _pack(r, packed[a // 8 : (a + o.numel() + 7) // 8])
        del u, idx, r
    return packed


def _first_set(packed: torch.Tensor, n: int, k: int, piece: int) -> torch.Tensor:
    """Positions (ascending) of the first k set entries of a mask packed by :func:`_pack` (n entries), filled
    with n where it has fewer: ``nonzero_static`` of the unpacked mask, size k, without unpacking it. Each
    nonzero byte holds ≥ 1 set entry, so the first k nonzero bytes hold the first k set entries; they are
    unpacked ``piece / 2`` bytes at a time, each set bit written at its rank. int32 when n < 2^31."""
    m = packed.numel()
    device = packed.device
    at = torch.nonzero_static(packed, size=k, fill_value=m).flatten()
    pos = torch.full((k + 1,), n, dtype=torch.int32 if n < 2**31 - 1 else torch.int64, device=device)  # k: dump
    before = torch.zeros((), dtype=torch.int64, device=device)
    lanes = torch.arange(8, dtype=torch.int64, device=device)
    step = max(piece // 2, 1)
    for a in range(0, k, step):
        nb = at[a : a + step]
        byte = packed.index_select(0, nb.clamp(max=m - 1)).masked_fill_(nb >= m, 0)
        bits = _unpack(byte, 8 * byte.numel())
        rank = _ranks(bits, before)
        dst = torch.where(bits & (rank < k), rank, k)
        pos.index_copy_(0, dst, nb[:, None].mul(8).add(lanes).flatten().to(pos.dtype))
    return pos[:k]


def _kth(at: torch.Tensor, m: int, rank: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(position, found) of the rank-th True entry of a mask of m entries, given ``at`` =
    ``nonzero_static(mask, size=s, fill_value=m)`` (rank ≥ 0 where it matters), statically: ``found`` is False
    where the mask has no such entry among its first s (position clamped to a valid one)."""
    s = at.numel()
    got = at.index_select(0, rank.clamp(min=0, max=s - 1))
    return got.clamp(max=max(m - 1, 0)), (got < m) & (rank < s)


def _ranks(mask: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
    """The rank of each entry among the True ones (−1-based count of Trues up to it), continuing from
    ``before`` (0-dim int64: the Trues of earlier pieces), which is advanced past this piece."""
    rank = mask.long().cumsum(0).add_(before).sub_(1)
    before.copy_(rank[-1]).add_(1)
    return rank


def _slot_piece(n: int) -> int:
    """Slots (and pool candidates) per piece in :func:`_resolve` for n draws, and 2× the nonzero mask bytes per
    piece in :func:`_first_set` (≈ 200 bytes of temporaries per byte): 1/16 of a candidate chunk
    (:func:`_accel_chunk`), so that a piece's float64 and index temporaries stay below the candidate pass's
    (≈ 10 bytes per chunk draw); ≈ 3–6 pieces (K ≈ 0.8–2.3 % of n) for n ≥ 2^21. Larger pieces mean fewer kernel
    launches, which bound the sampler on a GPU (``benchmarks/profile_step.py``: 1/32 and piece/4 launched 853
    kernels for 10^6 draws, these 495); the step's peak memory stays ≤ 1.1× Opacus's (tests/test_step_memory.py)."""
    return _accel_chunk(n) // 16


def _restart_pool(m: int, beta: float, scale: float, generator, device, work_dtype, piece: int):
    """The restart pool of :func:`_resolve`: m fresh candidates, their random numbers drawn whole and in the
    order of one pass (the words, then the wedge uniforms), then processed in pieces. Returns (value, flags):
    the candidate's outcome in the work dtype where it is terminal and not in the tail, and per candidate
    bit 0 terminal (fast-accepted, wedge-accepted, or in the tail), bit 1 in the tail, bit 2 the sign
    (index & 1: ``_fix_tables``' signed scale ``ssign[idx] == ssign[idx & 1]``)."""
    words = torch.empty(m, device=device, dtype=work_dtype)
    _words_(words, generator)
    y = torch.rand(m, generator=generator, device=device, dtype=torch.float64)
    value = torch.empty(m, device=device, dtype=work_dtype)
    flags = torch.empty(m, device=device, dtype=torch.uint8)
    for a in range(0, m, piece):
        v = value[a : a + piece]
        u, idx, rej = _from_words(words[a : a + piece], beta, scale, device, work_dtype, v)
        idx = idx.long()
        val, ok = _vertical(u, idx, beta, scale, generator, device, work_dtype, y=y[a : a + piece])
        torch.where(rej, val.to(work_dtype), v, out=v)
        in_tail = rej & ((idx >> 1) == 0)
        f = flags[a : a + piece]
        torch.bitwise_or(~rej | ok | in_tail, in_tail.to(torch.uint8) << 1, out=f)
        f.bitwise_or_(idx.bitwise_and(1).to(torch.uint8) << 2)
    return value, flags


def _resolve(pos, n, beta, scale, generator, device, work_dtype, pools, dest, piece):
    r"""Exact outcomes of K slots that failed the fast test, with static shapes: the slot at ``pos`` (< n;
    ``pos`` = n: no slot) has its :func:`_encode_` code in ``dest``'s integer view there, and gets its value
    written over it (``dest[n]`` absorbs the no-slots' writes).

    Each slot runs its own Ziggurat continuation: its vertical test (fresh y); on failure a restart, which
    takes the k-th *terminal* candidate (fast-accepted, wedge-accepted, or in the tail) of a pool of R fresh
    candidates, k its rank among the restarting slots; a slot in the tail takes the k-th *accepted*
    proposal of a pool of T tail proposals, k its rank among the tail slots. In an i.i.d. stream the
    terminal (accepted) elements, in order, are i.i.d. with the law of the first one, and the ranks depend
    only on randomness independent of the pool; so each slot gets exactly what its own retry sequence
    would give. The random numbers are drawn whole and first, in this order: the K slots' y, the restart
    pool (:func:`_restart_pool`), the tail pool; the rest runs in pieces of ``piece`` slots (ranks carried
    across pieces), so the float64 temporaries scale with a piece, not with K, and nothing depends on
    ``piece``. Returns per slot (uint8) bit 0: restart pool exhausted, bit 1: tail pool exhausted, bit 2: the
    sign of its tail draw (index & 1)."""
    n_restart, n_tail = pools
    r = table(beta)[0]
    ssign = _fix_tables(beta, scale, device, work_dtype)[3]
    int_dtype = _bits(work_dtype, True)[0]
    k = pos.numel()
    y = torch.rand(k, generator=generator, device=device, dtype=torch.float64)  # the slots' vertical tests
    p_value, p_flags = _restart_pool(n_restart, beta, scale, generator, device, work_dtype, piece)
    p_at = torch.nonzero_static(p_flags.bitwise_and(1), size=min(k, n_restart), fill_value=n_restart).flatten()
    t_x, t_ok = _tail_proposals(n_tail, beta, r, generator, device)
    t_at = torch.nonzero_static(t_ok, size=min(k, n_tail), fill_value=n_tail).flatten()
    del t_ok
    status = torch.empty(k, dtype=torch.uint8, device=device)
    restarts = torch.zeros((), dtype=torch.int64, device=device)
    tails = torch.zeros((), dtype=torch.int64, device=device)
    codes = dest.view(int_dtype)
    for a in range(0, k, piece):
        at_pos = pos[a : a + piece].long()
        valid = at_pos < n
        u, idx = _decode(codes.index_select(0, at_pos.clamp(max=n - 1)), work_dtype)  # no slot: any code
        val, ok = _vertical(u, idx, beta, scale, generator, device, work_dtype, y=y[a : a + piece])
        in_tail = (idx >> 1) == 0
        restart = valid & ~ok & ~in_tail
        tail_now = valid & in_tail
        del ok, u
        at, found = _kth(p_at, n_restart, _ranks(restart, restarts))
        got = restart & found
        flag = p_flags.index_select(0, at)
        to_tail = got & flag.bitwise_and(2).bool()
        val = torch.where(got & ~to_tail, p_value.index_select(0, at).to(torch.float64), val)
        sign = torch.where(to_tail, flag.bitwise_right_shift(2), idx.bitwise_and(1))
        tail_now |= to_tail
        del at, got, to_tail, flag, idx
        t_pos, t_found = _kth(t_at, n_tail, _ranks(tail_now, tails))
        t_got = tail_now & t_found
        val = torch.where(t_got, t_x.index_select(0, t_pos).mul_(ssign.index_select(0, sign.long())), val)
        dest.index_copy_(0, at_pos, val.to(work_dtype))
        st = status[a : a + piece]
        torch.bitwise_or(restart & ~found, (tail_now & ~t_found).to(torch.uint8) << 1, out=st)
        st.bitwise_or_(sign.to(torch.uint8) << 2)
    return status


def sample_deferred(n: int, beta: float, scale: float, generator, device, work_dtype):
    r"""Accelerator path of :func:`sample` with no host synchronisation: returns (out, finisher).

    One pass (in chunks, :func:`_candidate_pass`) draws n candidates; the first K fast-test failures
    (:func:`_first_set`, K static, see :func:`_budgets`) are resolved exactly by :func:`_resolve`, in pieces.
    ``out`` is exact once ``finisher.pending`` (a 0-dim device bool: more than K failures, or a pool exhausted)
    is False, or after ``finisher.finish()``, which completes the rest in place with the dynamic
    (synchronising) code. Memory beyond ``out``: a 1-bit mask per draw, one candidate chunk's transients, then
    ≈ 13 bytes per slot (K ≈ 0.8–2.3 % of n) and 17 per restart-pool candidate (R ≈ 0.3–1.3 % of n) and one
    piece's temporaries."""
    if not has_float64(device):  # MPS: the exact finish needs float64, so the host draws (one synchronisation)
        return sample(n, beta, scale, generator, device, work_dtype), Finisher(torch.zeros((), dtype=torch.bool, device=device))
    buf = torch.empty(n + 1, device=device, dtype=work_dtype)  # slot n absorbs the padding's writes
    out = buf[:n]
    if n == 0:
        return out, Finisher(torch.zeros((), dtype=torch.bool, device=device))
    packed = _candidate_pass(n, beta, scale, generator, device, work_dtype, out)
    k, n_restart, n_tail = _budgets(n, beta, work_dtype)
    piece = _slot_piece(n)
    pos = _first_set(packed, n, k + 1, piece)
    many, pos = pos[k] < n, pos[:k]  # more than K failures: the (K+1)-th exists
    status = _resolve(pos, n, beta, scale, generator, device, work_dtype, (n_restart, n_tail), buf, piece)
    pending = many | (status & 3).any()
    state = (out, packed, pos, status, beta, scale, generator, work_dtype)
    return out, Finisher(pending, state)


class Finisher:
    r"""The rare remainder of one :func:`sample_deferred` call, completed exactly by continuing each
    unresolved draw's own retry sequence (never by redrawing whole vectors):

    * fast-test failures beyond the first K: their own (u, idx) through :func:`_fix` (vertical test, tail,
      restarts), as the CPU path does;
    * a slot whose restart found no terminal candidate in the pool: a fresh exact GG draw (a restart);
    * a slot in the tail whose tail proposals ran out: :func:`tail` (tail proposals until one is accepted),
      with the sign of its candidate.

    ``pending`` is a 0-dim bool on the device; :meth:`finish` synchronises and is to be called only when it
    is True (it is idempotent)."""

    def __init__(self, pending: torch.Tensor, state: Optional[tuple] = None):
        self.pending = pending
        self._state = state

    def finish(self) -> None:
        """Complete the unresolved draws in place (host synchronisations allowed: the rare case)."""
        if self._state is None:
            return
        out, packed, pos, status, beta, scale, generator, work_dtype = self._state
        self._state = None
        device = out.device
        rest = _unpack(packed, out.numel()).nonzero().flatten()[pos.numel():]
        if rest.numel():  # their codes are still in the output (only the first K were resolved)
            u, idx = _decode(out.view(_bits(work_dtype, True)[0])[rest], work_dtype)
            out[rest] = _fix(u, idx, beta, scale, generator, device, work_dtype).to(work_dtype)
        redo = pos[status.bitwise_and(1).bool()].long()
        if redo.numel():
            out[redo] = sample(redo.numel(), beta, scale, generator, device, work_dtype)
        left = status.bitwise_and(2).bool().nonzero().flatten()
        if left.numel():
            ssign = _fix_tables(beta, scale, device, work_dtype)[3]
            t = tail(left.numel(), beta, table(beta)[0], generator, device)
            sign = status.index_select(0, left).bitwise_right_shift(2).long()
            out[pos[left].long()] = t.mul_(ssign.index_select(0, sign)).to(work_dtype)
        self.pending = torch.zeros((), dtype=torch.bool, device=device)
